//! `npx` and `uvx` entries: installing an adapter package offline from a local file into
//! `HOME/runners/<id>/pkg/` (the tree the pin covers), and saying how to run what was installed
//! with the interpreter directly. Never fetches: npm runs `--offline` against an unreachable
//! registry, pip with `--no-index`; a package that needs anything it cannot find fails.
//!
//! Why not the launchers at launch time: `npx` and `uvx` resolve the package into their own
//! caches (`~/.npm/_npx`, `~/.cache/uv`) on every start, so what runs would be something the pin
//! never saw, written outside the adapter's scratch. Here the launcher's work (npm's, pip's)
//! happens once, at `craik runners install`, an operator act; each launch re-hashes the whole
//! installed tree and runs `node FILE` / `python3 -I -B -c …` on it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Backend, Entry};

/// The installed tree, under the entry's directory.
pub(super) const TREE: &str = "pkg";

/// Longest an installer may take before it is killed.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(300);

/// `@scope/pkg@1.2.3` → (`@scope/pkg`, `1.2.3`).
pub(super) fn npm_spec(spec: &str) -> (&str, &str) {
    spec.rsplit_once('@')
        .filter(|(name, _)| !name.is_empty())
        .unwrap_or((spec, ""))
}

/// `pkg==1.2.3` → (`pkg`, `1.2.3`).
pub(super) fn pypi_spec(spec: &str) -> (&str, &str) {
    spec.split_once("==").unwrap_or((spec, ""))
}

/// Installs the entry's `source` package into `tree` (which must not exist): npm for `npx`,
/// pip for `uvx`, both offline, with a scrubbed environment and their caches in `scratch`
/// (removed by the caller). Then checks the tree holds the package and version the entry
/// names.
pub(super) fn install(
    entry: &Entry,
    source: &Path,
    tree: &Path,
    scratch: &Path,
) -> Result<(), String> {
    let spec = entry.package.as_deref().unwrap_or_default();
    let source = source
        .canonicalize()
        .map_err(|e| format!("source `{}`: {e}", source.display()))?;
    let tree_arg = tree.display().to_string();
    let source_arg = source.display().to_string();
    let scratch_arg = scratch.display().to_string();
    match entry.backend {
        Backend::Npx => {
            let npm = super::resolve_command("npm")?;
            refuse_npm_dependencies(&source)?;
            let cache = scratch.join("npm-cache").display().to_string();
            // Neither the operator's nor the system's npmrc: files that do not exist.
            let user = scratch.join("npmrc").display().to_string();
            let global = scratch.join("npmrc-global").display().to_string();
            run(
                &npm,
                &[
                    "install",
                    "--offline",
                    "--ignore-scripts",
                    "--no-bin-links",
                    "--no-save",
                    "--no-audit",
                    "--no-fund",
                    "--no-update-notifier",
                    "--prefix",
                    &tree_arg,
                    &source_arg,
                ],
                &[
                    ("npm_config_cache", cache.as_str()),
                    // Nothing to fetch from: a package that needs the registry fails at once.
                    ("npm_config_registry", "http://127.0.0.1:9/"),
                    ("npm_config_userconfig", user.as_str()),
                    ("npm_config_globalconfig", global.as_str()),
                    // No git either (a git dependency is fetched by git, not the registry).
                    ("npm_config_git", "/nonexistent/git"),
                ],
                scratch,
            )?;
            let (name, version) = npm_spec(spec);
            let manifest = tree.join("node_modules").join(name).join("package.json");
            let found = read_json(&manifest)?;
            let got = |key: &str| found.get(key).and_then(|v| v.as_str()).unwrap_or_default();
            if got("name") != name || got("version") != version {
                return Err(format!(
                    "`{}` installed `{}@{}`, not `{spec}`",
                    source.display(),
                    craik_contracts::Truncated(got("name")),
                    craik_contracts::Truncated(got("version"))
                ));
            }
            npm_script(entry, tree).map(|_| ())
        }
        Backend::Uvx => {
            // A wheel installs without running any of its code; a source distribution would
            // run its build (setup.py) here, unconfined: refused.
            if source.extension().is_none_or(|e| e != "whl") {
                return Err(format!(
                    "source `{}`: not a wheel (`.whl`); build one first (`python3 -m pip wheel --no-deps --no-index -w dist DIR`)",
                    source.display()
                ));
            }
            let python = super::resolve_command("python3")?;
            run(
                &python,
                &[
                    "-I",
                    "-m",
                    "pip",
                    "install",
                    "--no-index",
                    "--no-deps",
                    "--no-compile",
                    "--no-build-isolation",
                    "--only-binary",
                    ":all:",
                    "--disable-pip-version-check",
                    "--no-warn-script-location",
                    "--cache-dir",
                    &scratch_arg,
                    "--target",
                    &tree_arg,
                    &source_arg,
                ],
                &[],
                scratch,
            )?;
            let (name, version) = pypi_spec(spec);
            let info = tree.join(format!("{}-{version}.dist-info", dist_name(name)));
            if !info.is_dir() {
                return Err(format!(
                    "`{}` did not install `{spec}` (no `{}`)",
                    source.display(),
                    info.file_name().unwrap_or_default().to_string_lossy()
                ));
            }
            python_entry(entry, tree).map(|_| ())
        }
        _ => Err("not a package entry".into()),
    }
}

/// The program and arguments that run an installed package: `node FILE` for `npx`,
/// `python3 -I -B -c SHIM` for `uvx` (isolated: no `PYTHON*` variables, no user site; no
/// bytecode written into the pinned tree).
pub(super) fn launch(entry: &Entry, tree: &Path) -> Result<(PathBuf, Vec<String>), String> {
    match entry.backend {
        Backend::Npx => {
            let script = npm_script(entry, tree)?;
            // No global module folders: `$HOME/.node_modules` is the adapter's own writable
            // directory (outside testing round 9: a resumed adapter loaded code from it).
            Ok((
                super::resolve_command("node")?,
                vec![
                    "--no-global-search-paths".into(),
                    script.display().to_string(),
                ],
            ))
        }
        Backend::Uvx => {
            let (module, function) = python_entry(entry, tree)?;
            let shim = format!(
                "import sys; sys.path.insert(0, {}); import {module}; sys.exit({module}.{function}())",
                python_string(&tree.display().to_string())?
            );
            Ok((
                super::resolve_command("python3")?,
                vec!["-I".into(), "-B".into(), "-c".into(), shim],
            ))
        }
        _ => Err("not a package entry".into()),
    }
}

/// The file an npm package's `bin` names for the entry's binary (`command`, default the
/// package's name without its scope), inside the installed package.
fn npm_script(entry: &Entry, tree: &Path) -> Result<PathBuf, String> {
    let (name, _) = npm_spec(entry.package.as_deref().unwrap_or_default());
    let dir = tree.join("node_modules").join(name);
    let manifest = read_json(&dir.join("package.json"))?;
    let plain = name.rsplit('/').next().unwrap_or(name);
    let wanted = entry.command.as_deref().unwrap_or(plain);
    let file = match manifest.get("bin") {
        Some(serde_json::Value::String(file)) if wanted == plain => Some(file.as_str()),
        Some(serde_json::Value::Object(bins)) => bins.get(wanted).and_then(|v| v.as_str()),
        _ => None,
    }
    .ok_or_else(|| {
        format!(
            "package `{name}` has no binary `{}` in its `bin`",
            craik_contracts::Truncated(wanted)
        )
    })?;
    inside(&dir, &dir.join(file))
}

/// The `module:function` of the console script the entry runs (`command`, default the
/// distribution's name), from the installed `entry_points.txt`.
fn python_entry(entry: &Entry, tree: &Path) -> Result<(String, String), String> {
    let (name, version) = pypi_spec(entry.package.as_deref().unwrap_or_default());
    let wanted = entry.command.as_deref().unwrap_or(name);
    let path = tree
        .join(format!("{}-{version}.dist-info", dist_name(name)))
        .join("entry_points.txt");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut section = "";
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if section != "console_scripts" || key.trim() != wanted {
            continue;
        }
        let (module, function) = value
            .trim()
            .split_once(':')
            .ok_or_else(|| format!("{}: `{wanted}` is not `module:function`", path.display()))?;
        let (module, function) = (module.trim(), function.trim());
        // They become Python source: dotted identifiers only.
        let dotted = |s: &str| {
            !s.is_empty()
                && s.split('.').all(|part| {
                    part.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
        };
        if !dotted(module) || !dotted(function) || function.contains('.') {
            return Err(format!(
                "{}: `{wanted}` is not `module:function`",
                path.display()
            ));
        }
        return Ok((module.to_owned(), function.to_owned()));
    }
    Err(format!(
        "{}: no console script `{}`",
        path.display(),
        craik_contracts::Truncated(wanted)
    ))
}

/// A wheel's distribution directory name: `craik-python-example` → `craik_python_example`.
fn dist_name(name: &str) -> String {
    name.chars()
        .map(|c| if c == '-' || c == '.' { '_' } else { c })
        .collect::<String>()
        .to_lowercase()
}

/// A path as a Python string literal (JSON's escapes are valid Python for what a path holds).
fn python_string(text: &str) -> Result<String, String> {
    if text.chars().any(char::is_control) {
        return Err(format!(
            "`{}`: control characters in the path",
            text.escape_debug()
        ));
    }
    serde_json::to_string(text).map_err(|e| e.to_string())
}

/// `path` made real, refused unless it lies inside `dir`.
fn inside(dir: &Path, path: &Path) -> Result<PathBuf, String> {
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let real = path
        .canonicalize()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !real.starts_with(&dir) || !real.is_file() {
        return Err(format!(
            "`{}` is not a file inside the package `{}`",
            path.display(),
            dir.display()
        ));
    }
    Ok(real)
}

/// Refuses an npm package that depends on anything it does not bundle: npm would fetch it
/// (a git or file dependency bypasses `--offline`; outside testing round 9), and a pinned
/// adapter is one self-contained tree. Reads `package/package.json` from the tarball with
/// `tar`, in a cleared environment.
fn refuse_npm_dependencies(source: &Path) -> Result<(), String> {
    let tar = super::resolve_command("tar")?;
    let out = std::process::Command::new(tar)
        .env_clear()
        .env("PATH", crate::run::exec::SAFE_PATH)
        .arg("-xzOf")
        .arg(source)
        .arg("package/package.json")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("tar: {e}"))?;
    if !out.status.success() || out.stdout.len() > 1 << 20 {
        return Err(format!(
            "`{}`: not an npm package tarball (no package/package.json)",
            source.display()
        ));
    }
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("`{}`: package/package.json: {e}", source.display()))?;
    let bundled: Vec<&str> = ["bundleDependencies", "bundledDependencies"]
        .iter()
        .filter_map(|k| manifest.get(*k).and_then(|v| v.as_array()))
        .flatten()
        .filter_map(|v| v.as_str())
        .collect();
    for key in ["dependencies", "optionalDependencies", "peerDependencies"] {
        let Some(deps) = manifest.get(key).and_then(|v| v.as_object()) else {
            continue;
        };
        if let Some(name) = deps.keys().find(|n| !bundled.contains(&n.as_str())) {
            return Err(format!(
                "`{}`: package.json {key} `{}` is not bundled; an adapter package must be self-contained (bundle it, or vendor it into the package): nothing is fetched",
                source.display(),
                craik_contracts::Truncated(name)
            ));
        }
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let bytes =
        crate::fsio::read_bounded(path, 1 << 20).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs an installer with a scrubbed environment (a fixed `PATH`, `HOME` in `scratch`) in
/// `scratch`; its last stderr line names a failure. Killed after [`INSTALL_TIMEOUT`].
fn run(program: &Path, args: &[&str], env: &[(&str, &str)], scratch: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut child = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", crate::run::exec::SAFE_PATH)
        .env("HOME", scratch)
        .env("LANG", "C.UTF-8")
        .envs(env.iter().copied())
        .current_dir(scratch)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{}`: cannot start: {e}", program.display()))?;
    // Drained on a thread, so a chatty installer never blocks on a full pipe.
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = stderr {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() > INSTALL_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!(
                    "`{}` took longer than {} s: killed",
                    program.display(),
                    INSTALL_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => break Err(format!("`{}`: {e}", program.display())),
        }
    }?;
    let stderr = reader.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    let last = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("npm ERR! A complete log"))
        .unwrap_or("no diagnostics");
    Err(format!(
        "`{} {}` failed ({status}): {}",
        program.display(),
        args.first().copied().unwrap_or_default(),
        craik_contracts::one_line(last)
    ))
}
