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
    /// `policies`, `embedded default`, with ` + custom DIR, ...` when custom dirs are loaded.
    pub origin: String,
}

/// What `sources` read: the schema, every policy file, where they came from, and which
/// files came from operator custom directories.
#[derive(Debug)]
pub struct Sources {
    pub schema: SourceFile,
    pub files: Vec<SourceFile>,
    /// `embedded default`, `DIR`, with ` + custom DIR, ...` when custom dirs are loaded.
    pub origin: String,
    /// Names (as in `files`) of the files read from custom directories.
    pub custom_files: std::collections::BTreeSet<String>,
}

/// The schema and policy files of a directory (or the embedded default), plus custom dirs.
///
/// Every file is named by the path it was read from, as the operator spelled the directory
/// (`policies/base/intent.cedar`, `../org-policies/deny.cedar`), so a diagnostic names a file
/// that exists; embedded files are named by their path inside the bundle (`base/intent.cedar`,
/// as `craik policy export` writes them). Names take no part in the policy-set hash.
pub fn sources(policies: Option<&Path>, custom: &[PathBuf]) -> Result<Sources, Error> {
    let (schema, mut files, mut origin) = match policies {
        None => (
            SourceFile::new(embedded::SCHEMA.0, embedded::SCHEMA.1),
            embedded::POLICIES
                .iter()
                .map(|(n, t)| SourceFile::new(*n, *t))
                .collect(),
            EMBEDDED.to_owned(),
        ),
        Some(dir) => {
            let path = dir.join("schema.cedarschema");
            let text = read_text(&path)?;
            (
                SourceFile::new(path.display().to_string(), text),
                cedar_files(dir, true)?,
                dir.display().to_string(),
            )
        }
    };
    let mut custom_files = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut listed = false;
    for dir in custom {
        // The same directory twice (however spelled: `--custom org` and a suite's `custom`
        // naming it too) is loaded once; twice would only report every id as a duplicate.
        if let Ok(real) = dir.canonicalize()
            && !seen.insert(real)
        {
            continue;
        }
        origin.push_str(if !listed { " + custom " } else { ", " });
        listed = true;
        origin.push_str(&dir.display().to_string());
        for file in cedar_files(dir, true)? {
            custom_files.insert(file.name.clone());
            files.push(file);
        }
    }
    Ok(Sources {
        schema,
        files,
        origin,
        custom_files,
    })
}

/// What every loaded policy must have beyond what the kernel requires: an `@reason` (shown
/// to operators in every deny), for custom policies exactly as for shipped ones. Each problem
/// names the file and line.
pub fn required(bundle: &Bundle) -> Vec<craik_kernel::Located> {
    bundle
        .policies()
        .filter(|p| p.reason.as_deref().is_none_or(|r| r.trim().is_empty()))
        .map(|p| craik_kernel::Located {
            file: p.file.clone(),
            line: p.line,
            column: 1,
            message: format!(
                "policy `{}` has no @reason; every policy needs @reason(\"...\") (shown to operators with each verdict it determines)",
                p.id
            ),
        })
        .collect()
}

/// How the embedded bundle is named in origins and on the command line (`policy diff
/// embedded DIR`).
pub const EMBEDDED: &str = "embedded default";

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
/// `dir` as given when `qualified`, so the name is a path the operator can open).
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
                dir.join(&relative).display().to_string()
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
