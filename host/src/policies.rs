//! Policy bundles and grants from files: a directory (`--policies DIR`) or the embedded
//! default, plus operator custom directories loaded on top, never instead; grant files.

use std::path::{Path, PathBuf};

use craik_contracts::{CapabilityGrant, Kind, decode_document};
use craik_kernel::{Bundle, GrantSet, SourceFile};

use crate::Error;
use crate::embedded;

/// Largest policy or grant file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A loaded bundle and where it came from.
#[derive(Debug)]
pub struct Loaded {
    pub bundle: Bundle,
    /// `policies/` or `embedded default`.
    pub origin: String,
}

/// The schema and policy files of a directory (or the embedded default), plus custom dirs.
pub fn sources(
    policies: Option<&Path>,
    custom: &[PathBuf],
) -> Result<(SourceFile, Vec<SourceFile>, String), Error> {
    let (schema, mut files, origin) = match policies {
        None => (
            SourceFile::new(embedded::SCHEMA.0, embedded::SCHEMA.1),
            embedded::POLICIES
                .iter()
                .map(|(n, t)| SourceFile::new(*n, *t))
                .collect(),
            "embedded default".to_owned(),
        ),
        Some(dir) => {
            // Names are relative to the directory, so the policy-set hash does not depend on
            // where the bundle sits (the embedded default hashes the same as `policies/`).
            let text = read_text(&dir.join("schema.cedarschema"))?;
            (
                SourceFile::new("schema.cedarschema", text),
                cedar_files(dir, false)?,
                dir.display().to_string(),
            )
        }
    };
    let mut names = std::collections::BTreeSet::new();
    for dir in custom {
        let base = dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        let base = base.unwrap_or_else(|| dir.display().to_string());
        if !names.insert(base.clone()) {
            return Err(Error::usage(format!(
                "--custom {}: another custom directory is also named `{base}`; custom policies are named by their directory, so the names must differ",
                dir.display()
            )));
        }
        // Named by the directory's own name, not by how its path was typed: `custom-sec` and
        // `./custom-sec` give the same policy-set hash (issue 13 item 2).
        files.extend(cedar_files(dir, false)?.into_iter().map(|mut f| {
            f.name = format!("custom/{base}/{}", f.name);
            f
        }));
    }
    Ok((schema, files, origin))
}

/// A file's bytes, at most [`MAX_FILE_BYTES`]; the error says why, without the path.
pub fn read_file_bounded(path: &Path) -> Result<Vec<u8>, String> {
    crate::fsio::read_bounded(path, MAX_FILE_BYTES).map_err(|e| e.to_string())
}

/// A file's bytes, at most [`MAX_FILE_BYTES`]; the error names the file.
fn read_bounded(path: &Path) -> Result<Vec<u8>, Error> {
    read_file_bounded(path).map_err(|why| Error::usage(format!("{}: {why}", path.display())))
}

fn read_text(path: &Path) -> Result<String, Error> {
    let bytes = read_bounded(path)?;
    String::from_utf8(bytes).map_err(|e| {
        Error::invalid(
            format!(
                "{}: not valid UTF-8 at byte {}",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
            Vec::new(),
        )
    })
}

/// Every `*.cedar` under `dir`, sorted, named by their path relative to `dir` (prefixed with
/// `dir` itself when `qualified`).
pub fn cedar_files(dir: &Path, qualified: bool) -> Result<Vec<SourceFile>, Error> {
    if !dir.is_dir() {
        return Err(Error::usage(format!("{}: not a directory", dir.display())));
    }
    let mut paths = Vec::new();
    walk(dir, &mut paths)
        .map_err(|e| Error::usage(format!("{}: cannot list: {e}", dir.display())))?;
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let relative = p
                .strip_prefix(dir)
                .unwrap_or(&p)
                .to_string_lossy()
                .replace('\\', "/");
            let name = if qualified {
                format!("{}/{relative}", dir.display())
            } else {
                relative
            };
            Ok(SourceFile::new(name, read_text(&p)?))
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "cedar") {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads `craik.capability_grant` files (objects, arrays or JSON lines).
pub fn read_grants(paths: &[PathBuf]) -> Result<Vec<CapabilityGrant>, Error> {
    let mut grants = Vec::new();
    for path in paths {
        let bytes = read_bounded(path)?;
        grants.extend(decode_grants(&path.display().to_string(), &bytes)?);
    }
    Ok(grants)
}

/// Decodes grants from bytes, naming `label` in every problem.
pub fn decode_grants(label: &str, bytes: &[u8]) -> Result<Vec<CapabilityGrant>, Error> {
    let doc = decode_document(bytes, Some(Kind::CapabilityGrant));
    let mut problems: Vec<String> = doc.error.iter().map(|p| format!("{label}: {p}")).collect();
    let mut grants = Vec::new();
    for record in doc.records {
        match record.outcome {
            Ok(craik_contracts::AnyContract::CapabilityGrant(g)) => grants.push(*g),
            Ok(_) => problems.push(format!("{label}: not a craik.capability_grant")),
            Err(ps) => problems.extend(ps.iter().map(|p| format!("{label}: {p}"))),
        }
    }
    if problems.is_empty() {
        Ok(grants)
    } else {
        Err(Error::invalid(format!("{label}: invalid grant"), problems))
    }
}

/// Compiles grants against a bundle; a refused grant is invalid input naming file and field.
pub fn compile_grants(
    bundle: &craik_kernel::Bundle,
    grants: &[CapabilityGrant],
    label: &str,
) -> Result<GrantSet, Error> {
    GrantSet::compile(bundle, grants)
        .map_err(|e| Error::invalid(format!("{label}: {e}"), Vec::new()))
}
