//! Installing and pinning a registry entry (`craik runners install`), and the check every
//! launch makes against the pin: `HOME/runners/<id>/pin.json` (mode 0600, written atomically,
//! in the operator's home where no confined process can write) names the resolved file (or
//! bundle directory) and its sha256; a launch re-hashes it and refuses any difference.
//!
//! What is pinned, per backend: `program` the adapter executable; `cli` the wrapped CLI (the
//! shipped handoff adapter beside it is hashed and recorded too); `provider` the shipped
//! provider adapter; `npx`/`uvx` the whole tree the package was installed into, offline from a
//! local tarball or wheel (`HOME/runners/<id>/pkg/`, see [`super::package`]; fetching from a
//! registry is not in this build). A `prebundled` entry pins its whole directory.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::tree::TreeStat;
use super::{Backend, Entry, Install, Origin};
use crate::Error;

/// The pin file's name under `HOME/runners/<id>/`.
pub const PIN_FILE: &str = "pin.json";

/// What `craik runners install` recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    pub id: String,
    pub backend: Backend,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub package: Option<String>,
    /// The resolved file (or `prebundled` directory) the digest is of.
    pub path: PathBuf,
    /// `sha256:` of the file's bytes, or of the directory's content ([`crate::config::dir_digest`]).
    pub sha256: String,
    pub installed_at: String,
    /// The registry entry as installed ([`super::definition_digest`]: backend, command,
    /// matrix, environment, read paths, …): a launch refuses an entry changed since (outside
    /// testing round 9: a project matrix edited after install reached the next run's prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_sha256: Option<String>,
}

pub use crate::run::RunnerRecord;

/// How an entry's adapter process is started, once its pin checked out.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program executed (absolute, real).
    pub program: PathBuf,
    /// Its `sha256:` as hashed now: the supervisor re-hashes the descriptor it executes.
    pub program_sha256: String,
    pub args: Vec<String>,
    /// Paths inside the home the adapter may read (its cache directory).
    pub home_read: Vec<PathBuf>,
    /// Paths outside the home it may read (a `cli` entry's pinned package tree).
    pub read: Vec<PathBuf>,
    /// What the adapter runs again at each step (a `cli` entry's CLI, a pinned tree) as it
    /// was when its digest was taken: the supervisor checks it is unchanged around every step.
    pub watch: Option<std::sync::Arc<TreeStat>>,
    pub record: RunnerRecord,
}

/// Why a `cli` entry's command cannot be pinned as one file (`None`: it can): it lies in an
/// npm package (a `node_modules` directory, or beside or under a `package.json`), so it loads
/// other files — a JS shim that starts a native binary from another package, a bundle that
/// imports its chunks — which a pin of the launcher alone would not cover (issue 32: code
/// appended to an imported chunk passed `runners check`).
fn launcher_of_a_package(real: &Path) -> Option<String> {
    let dir = real.parent()?;
    let in_node_modules = real.components().any(|c| c.as_os_str() == "node_modules");
    let package = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .find(|d| d.join("package.json").is_file());
    (in_node_modules || package.is_some()).then(|| {
        format!(
            "`{}` is a launcher inside an npm package ({}): a pin of it alone does not cover the files it loads; pin the whole tree: `--install prebundled --source <the install prefix or package root> --command <the launcher, relative to it>`",
            real.display(),
            package.map_or_else(|| "under node_modules".to_owned(), |p| format!("`{}`", p.join("package.json").display()))
        )
    })
}

fn absolute_home(home: &Path) -> Result<PathBuf, Error> {
    std::path::absolute(home).map_err(|e| Error::usage(format!("{}: {e}", home.display())))
}

/// `HOME/runners/<id>/`.
pub fn entry_dir(home: &Path, id: &str) -> PathBuf {
    home.join("runners").join(id)
}

/// `sha256:` of a file's bytes, read through `file`.
pub fn digest_reader(mut file: impl Read) -> std::io::Result<String> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(buf.get(..n).unwrap_or_default());
    }
    Ok(format!(
        "sha256:{}",
        craik_kernel::to_hex(&hasher.finalize())
    ))
}

/// `sha256:` of the regular file at `path` (a link is resolved first by the caller).
pub fn digest_file(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    digest_reader(file).map_err(|e| format!("{}: {e}", path.display()))
}

/// A program name as an entry gives it: an absolute path as is; a bare name beside `craik`
/// (the shipped adapters), else on the fixed `/usr/local/bin:/usr/bin:/bin`. Real path.
pub fn resolve_command(command: &str) -> Result<PathBuf, String> {
    let candidate = if command.contains('/') {
        Some(PathBuf::from(command))
    } else {
        let beside = std::env::current_exe()
            .ok()
            .and_then(|me| me.parent().map(|d| d.join(command)))
            .filter(|p| p.is_file());
        beside.or_else(|| {
            crate::run::exec::SAFE_PATH
                .split(':')
                .map(|d| Path::new(d).join(command))
                .find(|p| p.is_file())
        })
    };
    let path = candidate.ok_or_else(|| {
        format!(
            "`{command}`: not found beside craik or on {}",
            crate::run::exec::SAFE_PATH
        )
    })?;
    let real = path
        .canonicalize()
        .map_err(|e| format!("`{}`: {e}", path.display()))?;
    let meta = std::fs::metadata(&real).map_err(|e| format!("`{}`: {e}", real.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(format!("`{}`: not an executable file", real.display()));
        }
    }
    Ok(real)
}

/// What an entry's pin is of: a file, or a directory (`prebundled`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Artefact {
    File(PathBuf),
    Tree(PathBuf),
}

impl Artefact {
    fn path(&self) -> &Path {
        match self {
            Self::File(p) | Self::Tree(p) => p,
        }
    }

    fn digest(&self) -> Result<String, String> {
        self.digest_and_stat().map(|(digest, _)| digest)
    }

    /// Its digest, and its stat as it was while the digest was taken.
    fn digest_and_stat(&self) -> Result<(String, TreeStat), String> {
        match self {
            Self::File(p) => TreeStat::around(p, || digest_file(p)),
            Self::Tree(p) => TreeStat::around(p, || super::tree::digest(p)),
        }
        .map_err(|e| format!("{}: {e}", self.path().display()))
    }
}

fn file_name(path: &str) -> Result<String, String> {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && n != "." && n != "..")
        .ok_or_else(|| format!("`{path}`: no file name"))
}

/// Where an installed entry's artefact is (what the pin is of), without touching it.
fn artefact(entry: &Entry, home: &Path) -> Result<Artefact, String> {
    let dir = entry_dir(home, &entry.id);
    let command = || entry.command.clone().ok_or("no `command`");
    match entry.backend {
        Backend::InProcess => Err("runs inside Craik; nothing to install".into()),
        // A shipped handoff adapter finds its CLI itself (live mode), or needs none (fixture
        // mode): the pin is of the adapter.
        Backend::Cli if entry.origin == Origin::Builtin => {
            crate::runners::shipped(entry.adapter.as_deref().unwrap_or_default())
                .map(Artefact::File)
        }
        Backend::Provider => crate::runners::shipped("provider").map(Artefact::File),
        Backend::Program | Backend::Cli => match entry.install {
            Install::Installed => {
                let name = match (entry.backend, &entry.command) {
                    (Backend::Cli, None) => entry.adapter.clone().unwrap_or_default(),
                    _ => command()?,
                };
                let found = resolve_command(&name)?;
                if entry.backend == Backend::Cli
                    && let Some(why) = launcher_of_a_package(&found)
                {
                    return Err(why);
                }
                Ok(Artefact::File(found))
            }
            Install::Cache => {
                if entry.backend == Backend::Cli
                    && let Some(why) = resolve_command(&command()?)
                        .ok()
                        .and_then(|real| launcher_of_a_package(&real))
                {
                    return Err(why);
                }
                Ok(Artefact::File(
                    dir.join("bin").join(file_name(&command()?)?),
                ))
            }
            Install::Prebundled => {
                let source = entry.source.clone().ok_or("`prebundled` needs `source`")?;
                let real = source
                    .canonicalize()
                    .map_err(|e| format!("{}: {e}", source.display()))?;
                // What the launcher's package loads must be in the tree (outside testing
                // round r32: a tree of codex's launcher package alone ran the native binary
                // of a sibling package, unpinned).
                let launcher = in_tree(&real, &command()?)?;
                if let Some(why) = super::tree::npm_escape(&real, &launcher) {
                    return Err(why);
                }
                Ok(Artefact::Tree(real))
            }
        },
        // The installed tree, whatever `install` says: the package runs from there.
        Backend::Npx | Backend::Uvx => Ok(Artefact::Tree(dir.join(super::package::TREE))),
    }
}

fn create_private_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("{}: cannot create: {e}", dir.display())))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(format!("{}: {e}", dir.display())))
}

/// Copies `from` into `to` (atomically) with `mode`.
fn copy_into(from: &Path, to: &Path, mode: u32) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let bytes =
        std::fs::read(from).map_err(|e| Error::usage(format!("{}: {e}", from.display())))?;
    if let Some(parent) = to.parent() {
        create_private_dir(parent)?;
    }
    crate::fsio::write_atomic(to, &bytes)
        .map_err(|e| Error::io(format!("{}: cannot write: {e}", to.display())))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        .map_err(|e| Error::io(format!("{}: {e}", to.display())))
}

/// `craik runners install ID`: resolves what the entry names, caches it under
/// `HOME/runners/<id>/` when its strategy says so, and pins its digest.
pub fn install(entry: &Entry, home: &Path, now: &str) -> Result<Pin, Error> {
    let home = &absolute_home(home)?;
    let fail = |why: String| Error::usage(format!("runner `{}`: {why}", entry.id));
    let target = artefact(entry, home).map_err(fail)?;
    let dir = entry_dir(home, &entry.id);
    // Cache: the bytes are copied from what the entry names, then pinned as copied.
    match (entry.backend, entry.install) {
        (Backend::Program | Backend::Cli, Install::Cache) => {
            let command = entry.command.as_deref().unwrap_or_default();
            let from = resolve_command(command).map_err(fail)?;
            copy_into(&from, target.path(), 0o500)?;
        }
        (Backend::Npx | Backend::Uvx, _) => install_package(entry, &dir, target.path())?,
        _ => {}
    }
    let sha256 = target.digest().map_err(fail)?;
    let pin = Pin {
        id: entry.id.clone(),
        backend: entry.backend,
        version: entry.version.clone(),
        package: entry.package.clone(),
        path: target.path().to_path_buf(),
        sha256,
        installed_at: now.to_owned(),
        entry_sha256: Some(super::definition_digest(entry)),
    };
    // Fail closed: an entry that cannot be digested is not pinned at all.
    if pin.entry_sha256.as_deref() == Some("") {
        return Err(Error::internal(format!(
            "runner `{}`: its registry entry cannot be digested",
            entry.id
        )));
    }
    create_private_dir(&dir)?;
    let path = dir.join(PIN_FILE);
    let mut bytes = serde_json::to_vec_pretty(&pin)
        .map_err(|e| Error::internal(format!("cannot encode the pin: {e}")))?;
    bytes.push(b'\n');
    write_private(&path, &bytes)?;
    Ok(pin)
}

/// Installs an `npx`/`uvx` entry's package file into `tree` (replacing what was there): into a
/// fresh staging directory beside it first, so a failed install leaves the old tree (and its
/// pin) as they were.
fn install_package(entry: &Entry, dir: &Path, tree: &Path) -> Result<(), Error> {
    let fail = |why: String| Error::invalid(format!("runner `{}`: {why}", entry.id), Vec::new());
    let source = entry.source.as_deref().ok_or_else(|| {
        fail("fetching an `npx`/`uvx` package from its registry is not in this build; give `source`, a local package file (`npm pack`, a wheel)".into())
    })?;
    if !source.is_file() {
        return Err(fail(format!("source `{}`: not a file", source.display())));
    }
    create_private_dir(dir)?;
    let staging = dir.join(".pkg.new");
    let scratch = dir.join(".install");
    for stale in [&staging, &scratch] {
        let _ = std::fs::remove_dir_all(stale);
    }
    create_private_dir(&scratch)?;
    let installed = super::package::install(entry, source, &staging, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    if let Err(why) = installed {
        let _ = std::fs::remove_dir_all(&staging);
        // A first install that failed leaves nothing behind (only an empty directory goes).
        let _ = std::fs::remove_dir(dir);
        return Err(fail(why));
    }
    let _ = std::fs::remove_dir_all(tree);
    std::fs::rename(&staging, tree)
        .map_err(|e| Error::io(format!("{}: cannot write: {e}", tree.display())))
}

/// Writes `bytes` to `path` atomically, mode 0600 from the start.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = crate::fsio::tmp_beside(path, "tmp")
        .map_err(|e| Error::io(format!("{}: {e}", path.display())))?;
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(|e| Error::io(format!("{}: cannot write: {e}", path.display())))
}

/// The entry's pin, if it was installed; a pin file that does not parse, or names another
/// entry, is an error (never "not pinned").
pub fn read_pin(home: &Path, id: &str) -> Result<Option<Pin>, Error> {
    let path = entry_dir(home, id).join(PIN_FILE);
    let bytes = match crate::fsio::read_bounded(&path, 1 << 16) {
        Ok(b) => b,
        Err(crate::fsio::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(Error::usage(format!("{}: {e}", path.display()))),
    };
    let pin: Pin = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display()), Vec::new()))?;
    if pin.id != id {
        return Err(Error::invalid(
            format!(
                "{}: pins runner `{}`, not `{id}`",
                path.display(),
                craik_contracts::Truncated(&pin.id)
            ),
            Vec::new(),
        ));
    }
    Ok(Some(pin))
}

/// Removes an entry's pin and cache (`HOME/runners/<id>/`); whether there was one.
pub fn uninstall(home: &Path, id: &str) -> Result<bool, Error> {
    let dir = entry_dir(home, id);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(format!("{}: cannot remove: {e}", dir.display()))),
    }
}

/// The one-line refusal of a changed adapter.
fn changed(entry: &Entry, path: &Path, expected: &str, found: &str) -> Error {
    Error::refused(format!(
        "runner `{}`: `{}` changed since it was installed (expected {expected}, found {found}); refusing to launch it — review the change, then `craik runners install {}`",
        entry.id,
        path.display(),
        entry.id
    ))
}

/// `command` resolved inside the pinned tree `dir` (relative to it; an absolute path, or one
/// through a link, must still lie inside it).
fn in_tree(dir: &Path, command: &str) -> Result<PathBuf, String> {
    let inside = dir.join(command);
    let real = inside
        .canonicalize()
        .map_err(|e| format!("{}: {e}", inside.display()))?;
    if real.starts_with(dir) {
        Ok(real)
    } else {
        Err(format!(
            "`{command}` lies outside the pinned tree `{}`",
            dir.display()
        ))
    }
}

/// Checks an entry against its pin and says how to launch it. Every registry entry outside
/// the built-ins must be installed; a built-in without a pin is hashed and recorded
/// (unpinned), with one it is checked like any other.
pub fn verify(entry: &Entry, home: &Path) -> Result<Launch, Error> {
    let home = &absolute_home(home)?;
    let fail = |why: String| Error::usage(format!("runner `{}`: {why}", entry.id));
    let pin = read_pin(home, &entry.id)?;
    if pin.is_none() && entry.origin != Origin::Builtin {
        return Err(Error::usage(format!(
            "runner `{}` is not installed (no pin): run `craik runners install {}` first",
            entry.id, entry.id
        )));
    }
    let target = artefact(entry, home).map_err(fail)?;
    let (found, stat) = target.digest_and_stat().map_err(fail)?;
    if let Some(pin) = &pin {
        if pin.path != target.path() {
            return Err(Error::refused(format!(
                "runner `{}`: resolves to `{}`, but `{}` was installed; refusing to launch it — review, then `craik runners install {}`",
                entry.id,
                target.path().display(),
                pin.path.display(),
                entry.id
            )));
        }
        if pin.sha256 != found {
            // A tree pinned before its digest covered modes and directories.
            if let Artefact::Tree(dir) = &target
                && crate::config::dir_digest(dir)
                    .is_ok_and(|hex| pin.sha256 == format!("sha256:{hex}"))
            {
                return Err(Error::refused(format!(
                    "runner `{}`: `{}` was pinned by an earlier Craik, whose digest of a tree left out file modes and directories; refusing to launch it — review the tree, then `craik runners install {}`",
                    entry.id,
                    dir.display(),
                    entry.id
                )));
            }
            return Err(changed(entry, target.path(), &pin.sha256, &found));
        }
        if let Some(installed) = &pin.entry_sha256 {
            let now = super::definition_digest(entry);
            if *installed != now {
                return Err(Error::refused(format!(
                    "runner `{}`: its registry entry changed since it was installed (expected {installed}, found {now}: its matrix, command, environment or paths); refusing to launch it — review the change, then `craik runners install {}`",
                    entry.id, entry.id
                )));
            }
        }
    }
    let home_read: Vec<PathBuf> = if target.path().starts_with(home) {
        vec![target.path().to_path_buf()]
    } else {
        Vec::new()
    };
    let shipped = |name: &str| crate::runners::shipped(name).map_err(fail);
    let mut tree_read = Vec::new();
    let (program, mut args): (PathBuf, Vec<String>) = match (entry.backend, &target) {
        (Backend::Program, Artefact::File(p)) => (p.clone(), Vec::new()),
        (Backend::Cli, Artefact::File(p)) if entry.origin == Origin::Builtin => {
            (p.clone(), Vec::new())
        }
        // A CLI pinned as a whole tree (its package and what it loads): the shipped handoff
        // adapter runs the launcher inside it and may read the tree.
        (Backend::Cli, Artefact::Tree(dir)) => {
            let real = in_tree(dir, entry.command.as_deref().unwrap_or_default()).map_err(fail)?;
            tree_read.push(dir.clone());
            (
                shipped(entry.adapter.as_deref().unwrap_or_default())?,
                vec!["--cli".into(), real.display().to_string()],
            )
        }
        (Backend::Program, Artefact::Tree(dir)) => (
            in_tree(dir, entry.command.as_deref().unwrap_or_default()).map_err(fail)?,
            Vec::new(),
        ),
        (Backend::Cli, Artefact::File(cli)) => (
            shipped(entry.adapter.as_deref().unwrap_or_default())?,
            vec!["--cli".into(), cli.display().to_string()],
        ),
        (Backend::Provider, Artefact::File(p)) => (
            p.clone(),
            [
                "--api",
                entry.api.as_deref().unwrap_or_default(),
                "--model",
                entry.model.as_deref().unwrap_or_default(),
                "--stream",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        (Backend::Npx | Backend::Uvx, Artefact::Tree(tree)) => {
            super::package::launch(entry, tree).map_err(fail)?
        }
        _ => return Err(fail("nothing to launch".into())),
    };
    args.extend(entry.args.iter().cloned());
    args.extend(entry.cli_config_args());
    let program_sha256 = if program == target.path() {
        found.clone()
    } else {
        digest_file(&program).map_err(fail)?
    };
    let record = RunnerRecord {
        id: entry.id.clone(),
        backend: entry.backend.as_str().to_owned(),
        origin: match entry.origin {
            Origin::Builtin => "built-in",
            Origin::Home(_) => "home",
            Origin::Project(_) => "project",
        }
        .to_owned(),
        version: entry.version.clone(),
        package: entry.package.clone(),
        path: target.path().to_path_buf(),
        sha256: found,
        pinned: pin.is_some(),
        exec: (program != target.path()).then(|| program.clone()),
        exec_sha256: (program != target.path()).then(|| program_sha256.clone()),
        entry_sha256: Some(super::definition_digest(entry)).filter(|d| !d.is_empty()),
    };
    // What is executed again at each step: a `cli` entry's CLI (file or tree), a pinned tree.
    let watch = (entry.backend == Backend::Cli && !(entry.origin == Origin::Builtin)
        || matches!(target, Artefact::Tree(_)))
    .then(|| std::sync::Arc::new(stat));
    Ok(Launch {
        program,
        program_sha256,
        args,
        home_read,
        read: tree_read,
        watch,
        record,
    })
}
