//! Side-effect executors. Craik performs allowed actions itself; a runner never does.
//!
//! - Files: the target is the kernel's normalised workspace-relative path; every existing
//!   component is checked not to be a symlink, and the file is opened through `cap-std`, whose
//!   `Dir` cannot resolve outside the workspace (a symlink swapped in between the check and
//!   the open still cannot escape). Writes go to a temporary file in the same directory, are
//!   fsynced and renamed over the target (a rename replaces a symlink, never writes through
//!   it), then the directory is fsynced.
//! - Commands: argv only, no shell; argv\[0] resolved against a fixed PATH and pinned; cwd the
//!   workspace; environment cleared but for PATH, LANG and HOME; stdin closed; own process
//!   group, killed as a group on timeout; stdout/stderr capped and redacted.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use craik_kernel::to_hex;

/// Largest file a patch or read loads.
pub(crate) const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Captured command output per stream.
pub(crate) const MAX_CAPTURE: usize = 64 * 1024;
/// Ceiling on any command's run time.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(120);
/// The fixed PATH commands are resolved against and run with.
pub(crate) const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// `sha256:<hex>` of bytes.
pub(crate) fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", to_hex(&Sha256::digest(bytes)))
}

/// The workspace, opened as a capability.
#[derive(Debug)]
pub(crate) struct Workspace {
    pub(crate) root: PathBuf,
    dir: Dir,
}

/// What a file in the workspace currently holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileState {
    Missing,
    Present(String),
}

impl FileState {
    pub(crate) fn hash(&self) -> Option<&str> {
        match self {
            Self::Missing => None,
            Self::Present(h) => Some(h),
        }
    }
}

impl Workspace {
    pub(crate) fn open(root: &Path) -> Result<Self, String> {
        let root = root
            .canonicalize()
            .map_err(|e| format!("{}: {e}", root.display()))?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority())
            .map_err(|e| format!("{}: {e}", root.display()))?;
        Ok(Self { root, dir })
    }

    /// Refuses a path any existing component of which is a symlink or not what it should be.
    fn check_components(&self, rel: &str) -> Result<(), String> {
        let mut prefix = PathBuf::new();
        let segments: Vec<&str> = rel.split('/').collect();
        for (i, seg) in segments.iter().enumerate() {
            prefix.push(seg);
            match self.dir.symlink_metadata(&prefix) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(format!(
                        "`{}` is a symlink; Craik never writes through one",
                        prefix.display()
                    ));
                }
                Ok(meta) if i + 1 < segments.len() && !meta.is_dir() => {
                    return Err(format!("`{}` is not a directory", prefix.display()));
                }
                Ok(meta) if i + 1 == segments.len() && !meta.is_file() => {
                    return Err(format!("`{}` is not a regular file", prefix.display()));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(format!("`{}`: {e}", prefix.display())),
            }
        }
        Ok(())
    }

    /// The file's current state.
    pub(crate) fn state(&self, rel: &str) -> Result<FileState, String> {
        self.check_components(rel)?;
        match self.read_bytes(rel) {
            Ok(bytes) => Ok(FileState::Present(digest(&bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileState::Missing),
            Err(e) => Err(format!("`{rel}`: {e}")),
        }
    }

    fn read_bytes(&self, rel: &str) -> std::io::Result<Vec<u8>> {
        let file = self.dir.open(rel)?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_FILE_BYTES {
            return Err(std::io::Error::other(format!(
                "larger than {MAX_FILE_BYTES} bytes"
            )));
        }
        Ok(bytes)
    }

    /// Reads a text file.
    pub(crate) fn read_text(&self, rel: &str) -> Result<String, String> {
        self.check_components(rel)?;
        let bytes = self.read_bytes(rel).map_err(|e| format!("`{rel}`: {e}"))?;
        String::from_utf8(bytes).map_err(|_| format!("`{rel}`: not UTF-8 text"))
    }

    /// Writes `content` to `rel` atomically.
    pub(crate) fn write(&self, rel: &str, content: &[u8], tag: &str) -> Result<(), String> {
        self.check_components(rel)?;
        let (parent, name) = match rel.rsplit_once('/') {
            Some((p, n)) => (Some(p), n),
            None => (None, rel),
        };
        let dir = match parent {
            Some(p) => {
                self.dir
                    .create_dir_all(p)
                    .map_err(|e| format!("`{p}`: cannot create: {e}"))?;
                self.dir
                    .open_dir(p)
                    .map_err(|e| format!("`{p}`: cannot open: {e}"))?
            }
            None => self
                .dir
                .try_clone()
                .map_err(|e| format!("workspace: {e}"))?,
        };
        let tmp = format!(".{name}.craik-{tag}.tmp");
        let result = (|| -> std::io::Result<()> {
            let mut options = OpenOptions::new();
            options.write(true).create(true).truncate(true);
            let mut file = dir.open_with(&tmp, &options)?;
            file.write_all(content)?;
            file.sync_all()?;
            dir.rename(&tmp, &dir, name)?;
            dir.open(".")?.sync_all()
        })();
        if let Err(e) = result {
            let _ = dir.remove_file(&tmp);
            return Err(format!("`{rel}`: cannot write: {e}"));
        }
        Ok(())
    }
}

/// Applies exact edits: each `old` must occur exactly once in the text as edited so far.
pub(crate) fn apply_edits(
    text: &str,
    edits: &[craik_contracts::FileEdit],
) -> Result<String, String> {
    let mut out = text.to_owned();
    for (i, edit) in edits.iter().enumerate() {
        if edit.old.is_empty() {
            return Err(format!("edit {i}: `old` is empty"));
        }
        match out.matches(&edit.old).count() {
            1 => out = out.replacen(&edit.old, &edit.new, 1),
            0 => return Err(format!("edit {i}: `old` text not found")),
            n => {
                return Err(format!(
                    "edit {i}: `old` text occurs {n} times, expected once"
                ));
            }
        }
    }
    Ok(out)
}

/// A finished command.
#[derive(Debug, Clone)]
pub(crate) struct CommandOutcome {
    pub(crate) program: String,
    pub(crate) exit_code: Option<i32>,
    pub(crate) timed_out: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) truncated: bool,
}

/// Resolves argv\[0] to an executable path: an absolute path as is, `./x` inside the
/// workspace, a bare name against [`SAFE_PATH`].
pub(crate) fn resolve_program(program: &str, workspace: &Path) -> Result<PathBuf, String> {
    let candidate = if program.starts_with('/') {
        Some(PathBuf::from(program))
    } else if program.contains('/') {
        Some(workspace.join(program))
    } else {
        SAFE_PATH
            .split(':')
            .map(|d| Path::new(d).join(program))
            .find(|p| p.is_file())
    };
    let path = candidate.ok_or_else(|| format!("`{program}`: not found on {SAFE_PATH}"))?;
    let real = path
        .canonicalize()
        .map_err(|e| format!("`{program}`: {e}"))?;
    let meta = std::fs::metadata(&real).map_err(|e| format!("`{program}`: {e}"))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(format!("`{program}`: not an executable file"));
        }
    }
    Ok(real)
}

/// Runs argv in the workspace with a timeout; output capped. Never through a shell.
pub(crate) fn run_command(
    argv: &[String],
    workspace: &Path,
    timeout: Duration,
) -> Result<CommandOutcome, String> {
    let (program, args) = argv.split_first().ok_or("empty argv")?;
    let real = resolve_program(program, workspace)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(run_async(&real, args, workspace, timeout.min(MAX_TIMEOUT)))
}

async fn run_async(
    program: &Path,
    args: &[String],
    workspace: &Path,
    timeout: Duration,
) -> Result<CommandOutcome, String> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(workspace)
        .env_clear()
        .env("PATH", SAFE_PATH)
        .env("LANG", "C.UTF-8")
        .env("HOME", workspace)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("`{}`: cannot start: {e}", program.display()))?;
    let pid = child.id();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let capture = async {
        let (a, b) = tokio::join!(read_capped(stdout), read_capped(stderr));
        (a, b)
    };
    let waited = tokio::time::timeout(timeout, async {
        let (out, err) = capture.await;
        let status = child.wait().await;
        (out, err, status)
    })
    .await;
    let kill_group = || {
        if let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    };
    match waited {
        Ok(((stdout, t1), (stderr, t2), status)) => {
            // Whatever the command left behind in its group goes with it.
            kill_group();
            let status = status.map_err(|e| format!("waiting: {e}"))?;
            Ok(CommandOutcome {
                program: program.display().to_string(),
                exit_code: status.code(),
                timed_out: false,
                stdout,
                stderr,
                truncated: t1 || t2,
            })
        }
        Err(_) => {
            kill_group();
            Ok(CommandOutcome {
                program: program.display().to_string(),
                exit_code: None,
                timed_out: true,
                stdout: String::new(),
                stderr: format!("killed after {} ms", timeout.as_millis()),
                truncated: false,
            })
        }
    }
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(reader: Option<R>) -> (String, bool) {
    let Some(mut reader) = reader else {
        return (String::new(), false);
    };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    let mut truncated = false;
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_CAPTURE.saturating_sub(kept.len());
                let chunk = buf.get(..n).unwrap_or_default();
                if chunk.len() > room {
                    truncated = true;
                }
                kept.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), truncated)
}
