//! `craik schema list|show|export`.

use std::fs;
use std::path::Path;

use craik_contracts::{CONTRACT_VERSION, Kind, Truncated};
use serde::Serialize;

use crate::exit::{Exit, Failure};
use crate::files::write_atomic;
use crate::output::{Format, Out};

#[derive(Serialize)]
struct Listed {
    name: &'static str,
    schema: &'static str,
    version: &'static str,
    description: &'static str,
    /// `reference` (shared with the reference implementation) or `craik` (Craik's own).
    origin: &'static str,
}

pub(crate) fn list(out: &mut Out, format: Format) -> Result<Exit, Failure> {
    let listed: Vec<Listed> = Kind::ALL
        .iter()
        .map(|k| Listed {
            name: k.name(),
            schema: k.schema_name(),
            version: CONTRACT_VERSION,
            description: k.description(),
            origin: if k.in_reference() {
                "reference"
            } else {
                "craik"
            },
        })
        .collect();
    match format {
        Format::Json | Format::Junit => out.json(&listed)?,
        Format::Human => {
            let width = listed.iter().map(|l| l.schema.len()).max().unwrap_or(0);
            for l in &listed {
                out.line(format_args!(
                    "{:<width$}  {}  {}",
                    l.schema, l.version, l.description
                ))?;
            }
        }
    }
    Ok(Exit::Ok)
}

pub(crate) fn lookup(name: &str) -> Result<Kind, Failure> {
    Kind::from_name(name).ok_or_else(|| {
        Failure::usage(format!(
            "unknown contract `{}`; `craik schema list` shows the {} names",
            Truncated(name),
            Kind::ALL.len()
        ))
    })
}

pub(crate) fn show(out: &mut Out, name: &str) -> Result<Exit, Failure> {
    let kind = lookup(name)?;
    out.text(&kind.json_schema_text())?;
    Ok(Exit::Ok)
}

/// The adapter channel's schema, exported beside the contracts'.
pub(crate) const CHANNEL_SCHEMA_FILE: &str = "channel.schema.json";

pub(crate) fn export(out: &mut Out, format: Format, dir: &Path) -> Result<Exit, Failure> {
    fs::create_dir_all(dir)
        .map_err(|e| Failure::usage(format!("{}: cannot create directory: {e}", dir.display())))?;
    let mut written = Vec::new();
    for kind in Kind::ALL {
        let path = dir.join(kind.schema_file_name());
        write_atomic(&path, kind.json_schema_text().as_bytes())
            .map_err(|e| Failure::usage(format!("{}: cannot write: {e}", path.display())))?;
        written.push(path.display().to_string());
    }
    for (name, checkpoint) in [("receipt", false), ("checkpoint", true)] {
        let path = dir.join(format!("{name}.schema.json"));
        write_atomic(
            &path,
            craik_kernel::payload_schema_text(checkpoint).as_bytes(),
        )
        .map_err(|e| Failure::usage(format!("{}: cannot write: {e}", path.display())))?;
        written.push(path.display().to_string());
    }
    let path = dir.join(CHANNEL_SCHEMA_FILE);
    write_atomic(
        &path,
        craik_contracts::channel::channel_schema_text().as_bytes(),
    )
    .map_err(|e| Failure::usage(format!("{}: cannot write: {e}", path.display())))?;
    written.push(path.display().to_string());
    match format {
        Format::Json | Format::Junit => out.json(&written)?,
        Format::Human => {
            out.line(format_args!(
                "wrote {} JSON Schemas (the contracts, signed receipt and checkpoint payloads, the adapter channel) to {}",
                written.len(),
                dir.display()
            ))?;
        }
    }
    Ok(Exit::Ok)
}
