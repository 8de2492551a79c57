//! Side-effect executors. Craik performs allowed actions itself; a runner never does.
//!
//! - Files: the target is the kernel's normalised workspace-relative path. It is reached one
//!   component at a time from a descriptor of the workspace root, each directory opened with
//!   `O_NOFOLLOW | O_DIRECTORY` relative to the descriptor of the one above it, so no
//!   component is ever a symlink — not even one swapped in after a check: every later step
//!   works on the descriptors already held. Files are opened `O_NOFOLLOW` (reads also
//!   `O_NONBLOCK`, and must be regular files). Writes go to a new temporary file in the held
//!   directory, are fsynced and renamed over the target there (a rename replaces a symlink,
//!   never writes through it), then the directory is fsynced.
//! - Commands: argv only, no shell; argv\[0] resolved against a fixed PATH and pinned; cwd the
//!   workspace; environment cleared but for PATH, LANG and HOME; stdin closed; pid 2 of a PID
//!   namespace of its own under Craik's init (`craik_spawn`), so everything it starts ends
//!   with it and a timeout kills the namespace whole (without one: its own process group,
//!   killed as a group, then the sweep); stdout/stderr capped and redacted.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use craik_kernel::to_hex;

use crate::confine::Sandbox;

/// Largest file a patch or read loads.
pub const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;
/// Captured command output per stream.
pub const MAX_CAPTURE: usize = 64 * 1024;
/// Ceiling on any command's run time.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(120);
/// The fixed PATH commands are resolved against and run with.
pub const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// `sha256:<hex>` of bytes.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", to_hex(&Sha256::digest(bytes)))
}

/// The workspace, held as a descriptor of its root directory.
#[derive(Debug)]
pub struct Workspace {
    pub root: PathBuf,
    dir: OwnedFd,
}

/// What a file in the workspace currently holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    Missing,
    Present(String),
}

impl FileState {
    pub fn hash(&self) -> Option<&str> {
        match self {
            Self::Missing => None,
            Self::Present(h) => Some(h),
        }
    }
}

/// Why the workspace, or a file in it, could not be used. The variant is what went wrong; the
/// path is the kernel's normalised workspace path (never text a program wrote).
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("{}: {source}", root.display())]
    Root {
        root: PathBuf,
        source: std::io::Error,
    },
    #[error("`{0}`: not a normalised workspace path")]
    NotNormalised(String),
    #[error("`{0}` is a symlink; Craik never follows one")]
    Symlink(String),
    #[error("`{0}` is a symlink; Craik never writes through one")]
    SymlinkTarget(String),
    #[error("`{0}` is not a directory")]
    NotDirectory(String),
    #[error("`{0}` is not a regular file")]
    NotRegular(String),
    #[error("`{path}`: larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { path: String },
    #[error("`{0}`: not UTF-8 text")]
    NotUtf8(String),
    #[error("`{path}`: cannot create: {source}")]
    Create {
        path: String,
        source: std::io::Error,
    },
    #[error("`{path}`: cannot write: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("`{path}`: {source}")]
    Os {
        path: String,
        source: std::io::Error,
    },
}

impl WorkspaceError {
    fn os(path: &str, e: impl Into<std::io::Error>) -> Self {
        Self::Os {
            path: path.to_owned(),
            source: e.into(),
        }
    }
}

/// A directory opened from the workspace root without following any symlink, and the file
/// name in it a path ends with.
struct Parent<'a> {
    dir: OwnedFd,
    name: &'a str,
}

impl Workspace {
    pub fn open(root: &Path) -> Result<Self, WorkspaceError> {
        let root = root.canonicalize().map_err(|source| WorkspaceError::Root {
            root: root.to_path_buf(),
            source,
        })?;
        let dir = rustix::fs::open(
            &root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WorkspaceError::Root {
            root: root.clone(),
            source: e.into(),
        })?;
        Ok(Self { root, dir })
    }

    /// Opens the directory holding `rel` (normalised, `/`-separated) one component at a time,
    /// each relative to the descriptor of the one above it and never following a symlink.
    /// `None` when a directory on the way does not exist and `create` is false.
    fn parent<'a>(&self, rel: &'a str, create: bool) -> Result<Option<Parent<'a>>, WorkspaceError> {
        // The kernel hands over normalised paths; refuse anything else rather than walk it.
        if rel.split('/').any(|s| matches!(s, "" | "." | "..")) {
            return Err(WorkspaceError::NotNormalised(rel.to_owned()));
        }
        let (dirs, name) = match rel.rsplit_once('/') {
            Some((dirs, name)) => (Some(dirs), name),
            None => (None, rel),
        };
        let mut dir =
            rustix::io::fcntl_dupfd_cloexec(&self.dir, 0).map_err(|e| WorkspaceError::Root {
                root: self.root.clone(),
                source: e.into(),
            })?;
        let mut walked = String::new();
        for segment in dirs.into_iter().flat_map(|d| d.split('/')) {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(segment);
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let opened = match rustix::fs::openat(&dir, segment, flags, Mode::empty()) {
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&dir, segment, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => {
                            return Err(WorkspaceError::Create {
                                path: walked,
                                source: e.into(),
                            });
                        }
                    }
                    rustix::fs::openat(&dir, segment, flags, Mode::empty())
                }
                other => other,
            };
            dir = match opened {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Ok(None),
                Err(e) => return Err(refusal(&dir, segment, &walked, e)),
            };
        }
        Ok(Some(Parent { dir, name }))
    }

    /// The file's current state.
    pub fn state(&self, rel: &str) -> Result<FileState, WorkspaceError> {
        match self.read_bytes(rel)? {
            Some(bytes) => Ok(FileState::Present(digest(&bytes))),
            None => Ok(FileState::Missing),
        }
    }

    /// The file's bytes; `None` when it does not exist.
    fn read_bytes(&self, rel: &str) -> Result<Option<Vec<u8>>, WorkspaceError> {
        let Some(parent) = self.parent(rel, false)? else {
            return Ok(None);
        };
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&parent.dir, parent.name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(refusal(&parent.dir, parent.name, rel, e)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| WorkspaceError::os(rel, e))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(WorkspaceError::NotRegular(rel.to_owned()));
        }
        let mut bytes = Vec::new();
        File::from(fd)
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| WorkspaceError::os(rel, e))?;
        if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_FILE_BYTES {
            return Err(WorkspaceError::TooLarge {
                path: rel.to_owned(),
            });
        }
        Ok(Some(bytes))
    }

    /// Reads a text file.
    pub fn read_text(&self, rel: &str) -> Result<String, WorkspaceError> {
        let bytes = self
            .read_bytes(rel)?
            .ok_or_else(|| WorkspaceError::os(rel, Errno::NOENT))?;
        String::from_utf8(bytes).map_err(|_| WorkspaceError::NotUtf8(rel.to_owned()))
    }

    /// Writes `content` to `rel` atomically. An existing file keeps its permission bits
    /// (`rwx` for user, group and others; never set-id or sticky bits); a new one is `0644`.
    pub fn write(&self, rel: &str, content: &[u8], tag: &str) -> Result<(), WriteError> {
        let parent = self
            .parent(rel, true)
            .map_err(WriteError::Failed)?
            .ok_or_else(|| {
                WriteError::Failed(WorkspaceError::Create {
                    path: rel.to_owned(),
                    source: Errno::NOENT.into(),
                })
            })?;
        write_in(parent, rel, content, tag)
    }
}

/// Writes `content` as `parent.name` in the directory already held: whatever happens to the
/// path above it meanwhile, the file lands in that directory.
fn write_in(parent: Parent<'_>, rel: &str, content: &[u8], tag: &str) -> Result<(), WriteError> {
    let Parent { dir, name } = parent;
    // An existing target must be a regular file: never a symlink (the rename would replace
    // it, but Craik refuses rather than surprise), a directory or anything else. Its
    // permission bits carry over to the new bytes (issue 30: an executable script stayed
    // executable only by luck of the umask before).
    let mode = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => stat.st_mode & 0o777,
            FileType::Symlink => {
                return Err(WriteError::Failed(WorkspaceError::SymlinkTarget(
                    rel.to_owned(),
                )));
            }
            _ => {
                return Err(WriteError::Failed(WorkspaceError::NotRegular(
                    rel.to_owned(),
                )));
            }
        },
        Err(Errno::NOENT) => 0o644,
        Err(e) => return Err(WriteError::Failed(WorkspaceError::os(rel, e))),
    };
    let tmp = format!(".{name}.craik-{tag}.tmp");
    let result = (|| -> std::io::Result<()> {
        // A temporary file left by a crash is ours to replace.
        match rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let fd = rustix::fs::openat(
            &dir,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        // Exactly the mode (the umask narrowed what `openat` set).
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
        let mut file = File::from(fd);
        file.write_all(content)?;
        file.sync_all()?;
        rustix::fs::renameat(&dir, &tmp, &dir, name)?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = rustix::fs::unlinkat(&dir, &tmp, AtFlags::empty());
        return Err(WriteError::Failed(WorkspaceError::Write {
            path: rel.to_owned(),
            source: e,
        }));
    }
    // The bytes are in place; only their durability is in question if this fails.
    rustix::fs::fsync(&dir).map_err(|e| WriteError::Uncertain {
        path: rel.to_owned(),
        source: e.into(),
    })
}

/// Why a workspace write did not surely land.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Nothing was written (the file is as it was).
    #[error(transparent)]
    Failed(WorkspaceError),
    /// The new bytes were already in place: the outcome is uncertain, not failed, and the
    /// caller checks the bytes.
    #[error(
        "uncertain: `{path}`: the new bytes are in place but the directory could not be synced ({source}); a crash could still lose them"
    )]
    Uncertain {
        path: String,
        source: std::io::Error,
    },
}

/// Why opening `name` in `dir` (reached as `shown`) failed: ELOOP (`O_NOFOLLOW` on a symlink)
/// and ENOTDIR told apart from what is there now.
fn refusal(dir: &impl AsFd, name: &str, shown: &str, error: Errno) -> WorkspaceError {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map(|stat| FileType::from_raw_mode(stat.st_mode))
    {
        Ok(FileType::Symlink) => WorkspaceError::Symlink(shown.to_owned()),
        Ok(FileType::Directory) | Err(_) => WorkspaceError::os(shown, error),
        Ok(_) if error == Errno::NOTDIR => WorkspaceError::NotDirectory(shown.to_owned()),
        Ok(_) => WorkspaceError::os(shown, error),
    }
}

/// Why a list of exact edits does not apply (`index` counts from 0).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("edit {index}: `old` is empty")]
    EmptyOld { index: usize },
    #[error("edit {index}: `old` text not found")]
    NotFound { index: usize },
    #[error("edit {index}: `old` text occurs {count} times, expected once")]
    Ambiguous { index: usize, count: usize },
}

/// Applies exact edits: each `old` must occur exactly once in the text as edited so far.
pub fn apply_edits(text: &str, edits: &[craik_contracts::FileEdit]) -> Result<String, EditError> {
    let mut out = text.to_owned();
    for (index, edit) in edits.iter().enumerate() {
        if edit.old.is_empty() {
            return Err(EditError::EmptyOld { index });
        }
        match out.matches(&edit.old).count() {
            1 => out = out.replacen(&edit.old, &edit.new, 1),
            0 => return Err(EditError::NotFound { index }),
            count => return Err(EditError::Ambiguous { index, count }),
        }
    }
    Ok(out)
}

/// Why a directory of a write scope could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ScopeDirError {
    #[error(
        "`{}` is not a directory (a symlink or a file); the write scope cannot be granted",
        .0.display()
    )]
    NotDirectory(PathBuf),
    #[error("`{}`: {source}", path.display())]
    Os {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Creates the directories of `rel` under `root` that are missing; refuses a component that
/// is a symlink or not a directory (nothing is created through a link).
pub fn make_dirs(root: &Path, rel: &str) -> Result<(), ScopeDirError> {
    let mut at = root.to_path_buf();
    for part in rel.split('/') {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(ScopeDirError::NotDirectory(at)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&at).map_err(|source| ScopeDirError::Os {
                    path: at.clone(),
                    source,
                })?;
            }
            Err(source) => return Err(ScopeDirError::Os { path: at, source }),
        }
    }
    Ok(())
}

/// A finished command.
#[derive(Debug, Clone)]
pub struct CommandOutcome {
    pub program: String,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub truncated: bool,
}

/// Resolves argv\[0] to an executable path: an absolute path as is, `./x` inside the
/// workspace, a bare name against [`SAFE_PATH`].
pub fn resolve_program(program: &str, workspace: &Path) -> Result<PathBuf, ProgramError> {
    resolve_program_on(program, workspace, SAFE_PATH)
}

/// [`resolve_program`] against `search` (the fixed PATH with a run's toolchain entries
/// before it).
pub fn resolve_program_on(
    program: &str,
    workspace: &Path,
    search: &str,
) -> Result<PathBuf, ProgramError> {
    let candidate = if program.starts_with('/') {
        Some(PathBuf::from(program))
    } else if program.contains('/') {
        Some(workspace.join(program))
    } else {
        search
            .split(':')
            .map(|d| Path::new(d).join(program))
            .find(|p| p.is_file())
    };
    let path = candidate.ok_or_else(|| ProgramError::NotFound {
        program: program.to_owned(),
        search: search.to_owned(),
    })?;
    let os = |source| ProgramError::Os {
        program: program.to_owned(),
        source,
    };
    let real = path.canonicalize().map_err(os)?;
    let meta = std::fs::metadata(&real).map_err(os)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(ProgramError::NotExecutable(program.to_owned()));
        }
    }
    Ok(real)
}

/// Why argv\[0] names no program Craik can run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error(
        "`{program}`: not found on {search}; a tool installed in your home is made available with `craik run --toolchain rust|node|python|local-bin`, one elsewhere by its absolute path and `--command-read DIR`"
    )]
    NotFound { program: String, search: String },
    #[error("`{0}`: not an executable file")]
    NotExecutable(String),
    #[error("`{program}`: {source}")]
    Os {
        program: String,
        source: std::io::Error,
    },
}

/// Why a command has no outcome of its own. [`CommandError::ran`] tells the two kinds apart:
/// a program that never ran is recorded as not run; one that ran and then could not be
/// followed to its end is recorded as failed (its changes are still checked and named).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("empty argv")]
    EmptyArgv,
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// Descriptors for its standard streams could not be made.
    #[error("{what}: {source}")]
    Setup {
        what: &'static str,
        source: std::io::Error,
    },
    /// Confinement refused it, or it could not be started (see [`ConfineError`]).
    #[error(transparent)]
    Confine(crate::confine::ConfineError),
    /// It ran; processes it started were still alive after the sweep.
    #[error("processes the command started survived the sweep; the step fails")]
    Survivors,
    /// It ran; waiting for its output or its end failed.
    #[error("waiting for the command: {0}")]
    Wait(std::io::Error),
}

impl CommandError {
    /// Whether the program was executed before this went wrong.
    pub fn ran(&self) -> bool {
        match self {
            Self::EmptyArgv | Self::Program(_) | Self::Setup { .. } => false,
            Self::Confine(e) => matches!(e, crate::confine::ConfineError::Wait { .. }),
            Self::Survivors | Self::Wait(_) => true,
        }
    }
}

impl From<crate::confine::ConfineError> for CommandError {
    fn from(e: crate::confine::ConfineError) -> Self {
        Self::Confine(e)
    }
}

/// Where a command runs: its sandbox, and the fresh, empty `HOME` and `TMPDIR` it gets (outside
/// the workspace, removed after it, so nothing planted there configures a later command).
#[derive(Debug, Clone)]
pub struct CommandEnv {
    pub sandbox: Sandbox,
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// PATH: the run's toolchain entries, then [`SAFE_PATH`].
    pub path: String,
    /// Variables the run's toolchains set (`CARGO_HOME`, ...).
    pub vars: Vec<(String, String)>,
}

/// Runs argv in the workspace with a timeout, confined by `env`; output capped. Never through
/// a shell.
pub fn run_command(
    argv: &[String],
    workspace: &Path,
    timeout: Duration,
    env: &CommandEnv,
) -> Result<CommandOutcome, CommandError> {
    let (program, args) = argv.split_first().ok_or(CommandError::EmptyArgv)?;
    let real = resolve_program_on(program, workspace, &env.path)?;
    let mut contained = false;
    let outcome = run_confined(
        &real,
        program,
        args,
        workspace,
        timeout.min(MAX_TIMEOUT),
        env,
        &mut contained,
    );
    // A command in a PID namespace of its own has ended with everything it started (its init
    // was reaped). Otherwise whatever it left behind (double forks, `setsid` daemons, fork
    // chains) was re-parented to Craik: it goes now, before the workspace is checked and the
    // outcome recorded. One that survived the sweep fails the step.
    if !contained {
        crate::confine::reap_strays(false);
        if crate::confine::strays_left() {
            crate::confine::reap_strays(false);
            if crate::confine::strays_left() {
                return Err(CommandError::Survivors);
            }
        }
    }
    // A refusal before `exec` is an `Err` of the spawn (it came back through the memory the
    // child shared until `exec`); whatever a program that ran wrote, and whatever it exited
    // with, is its outcome (issue 30: never read back from its stderr).
    outcome
}

/// Starts the command confined and collects its output until it exits or the timeout: one
/// thread, `poll(2)` over its two pipes and its pidfd (no runtime, no thread per stream).
fn run_confined(
    program: &Path,
    arg0: &str,
    args: &[String],
    workspace: &Path,
    timeout: Duration,
    env: &CommandEnv,
    contained: &mut bool,
) -> Result<CommandOutcome, CommandError> {
    // argv[0] is the bare name the command was decided with (never a path it did not give).
    let name = arg0.rsplit('/').next().unwrap_or(arg0);
    let mut vars: Vec<(String, String)> = env
        .vars
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "PATH" | "LANG" | "HOME" | "TMPDIR"))
        .cloned()
        .collect();
    vars.extend([
        ("PATH".to_owned(), env.path.clone()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("HOME".to_owned(), env.home.display().to_string()),
        ("TMPDIR".to_owned(), env.tmp.display().to_string()),
    ]);
    let pipe = || {
        rustix::pipe::pipe_with(
            rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
        )
        .map_err(|e| CommandError::Setup {
            what: "a pipe for the command's output",
            source: e.into(),
        })
    };
    let null = rustix::fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| CommandError::Setup {
            what: "/dev/null",
            source: e.into(),
        })?;
    let ((out_r, out_w), (err_r, err_w)) = (pipe()?, pipe()?);
    // The child's ends block as usual (each end is an open file of its own).
    for end in [&out_w, &err_w] {
        rustix::fs::fcntl_setfl(end, OFlags::empty()).map_err(|e| CommandError::Setup {
            what: "a pipe for the command's output",
            source: e.into(),
        })?;
    }
    let started = env.sandbox.spawn(
        program,
        name,
        args,
        workspace,
        &vars,
        [null.as_fd(), out_w.as_fd(), err_w.as_fd()],
    )?;
    drop((null, out_w, err_w));
    *contained = started.contained();
    let pid = u32::try_from(started.pid).ok();
    let mut streams = [Capture::new(out_r), Capture::new(err_r)];
    let deadline = std::time::Instant::now() + timeout;
    // The command ends when its own process exits (or at the timeout), not when the last
    // holder of its pipes lets go: a background child must not keep the step open.
    let mut exited = false;
    let mut interrupted = None;
    // A failed wait stops the loop, never the kill below: the command does not outlive it.
    let mut lost = None;
    while !exited {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        // A signal asking the run to stop ends the command too (in slices, so it is seen).
        interrupted = crate::confine::interrupted();
        if interrupted.is_some() {
            break;
        }
        match poll_streams(
            &mut streams,
            Some(&started.pidfd),
            left.min(Duration::from_millis(200)),
        ) {
            Ok(ended) => exited = ended,
            Err(e) => {
                lost = Some(e);
                break;
            }
        }
    }
    if let Some(group) = rustix::process::Pid::from_raw(started.pid) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    // Contained: its init dies, and the kernel kills every process of its PID namespace.
    let _ = rustix::process::pidfd_send_signal(&started.pidfd, rustix::process::Signal::KILL);
    let exit_code = crate::confine::wait_exit(&started);
    crate::confine::release(pid);
    if !started.contained() {
        // Everything it left behind, in its group or not (`setsid`, double forks), was
        // re-parented to Craik: kill it, which also closes the pipes it held.
        crate::confine::reap_strays(false);
    }
    if let Some(e) = lost {
        return Err(e);
    }
    let exit_code = exit_code?;
    let drain_until = std::time::Instant::now() + Duration::from_secs(2);
    while streams.iter().any(|c| c.open.is_some()) {
        let left = drain_until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            // Still held open by something that escaped the sweep: what was read is kept.
            for stream in &mut streams {
                stream.truncated |= stream.open.take().is_some();
            }
            break;
        }
        let _ = poll_streams(&mut streams, None, left);
    }
    let [stdout, stderr] = streams;
    if !exited {
        return Ok(CommandOutcome {
            program: program.display().to_string(),
            exit_code: None,
            timed_out: true,
            stdout: String::new(),
            stderr: match interrupted {
                Some(signal) => format!(
                    "killed: the run was interrupted by {}",
                    crate::confine::signal_name(signal)
                ),
                None => format!("killed after {} ms", timeout.as_millis()),
            },
            truncated: false,
        });
    }
    Ok(CommandOutcome {
        program: program.display().to_string(),
        exit_code,
        timed_out: false,
        truncated: stdout.truncated || stderr.truncated,
        stdout: String::from_utf8_lossy(stdout.whole_words()).into_owned(),
        stderr: String::from_utf8_lossy(stderr.whole_words()).into_owned(),
    })
}

/// Waits up to `left` for output on the open `streams` (or for `exited`, the pidfd, to
/// become readable), then reads what is there. Returns whether `exited` is readable.
fn poll_streams(
    streams: &mut [Capture; 2],
    exited: Option<&OwnedFd>,
    left: Duration,
) -> Result<bool, CommandError> {
    use rustix::event::{PollFd, PollFlags};
    let mut fds: Vec<PollFd<'_>> = streams
        .iter()
        .filter_map(|c| c.open.as_ref())
        .chain(exited)
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    let wait = rustix::event::Timespec::try_from(left).unwrap_or(rustix::event::Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    });
    match rustix::event::poll(&mut fds, Some(&wait)) {
        Ok(_) | Err(Errno::INTR) => {}
        Err(e) => return Err(CommandError::Wait(e.into())),
    }
    let ready = exited.is_some() && fds.last().is_some_and(|p| !p.revents().is_empty());
    drop(fds);
    for stream in streams.iter_mut() {
        stream.read_available();
    }
    Ok(ready)
}

/// One output stream of a command: the first [`MAX_CAPTURE`] bytes kept, the rest counted
/// as truncation; `open` until end of file.
struct Capture {
    open: Option<OwnedFd>,
    kept: Vec<u8>,
    truncated: bool,
}

impl Capture {
    /// What was kept, ending at a word boundary when the stream was cut: the cut may fall
    /// inside a host path or a secret, and half of one is recognised by neither the path roles
    /// nor the redaction rules (outside testing round 12). So a truncated stream ends at its
    /// last whitespace within the last 4 KiB (a path's longest), or loses those 4 KiB.
    fn whole_words(&self) -> &[u8] {
        const TAIL: usize = 4096;
        if !self.truncated {
            return &self.kept;
        }
        let from = self.kept.len().saturating_sub(TAIL);
        let tail = self.kept.get(from..).unwrap_or_default();
        let end = tail
            .iter()
            .rposition(u8::is_ascii_whitespace)
            .map_or(from, |i| from + i + 1);
        self.kept.get(..end).unwrap_or_default()
    }

    fn new(fd: OwnedFd) -> Self {
        Self {
            open: Some(fd),
            kept: Vec::new(),
            truncated: false,
        }
    }

    /// Reads what is there without blocking; closes the stream at end of file or on error.
    fn read_available(&mut self) {
        let Some(fd) = &self.open else { return };
        let mut buf = [0u8; 8192];
        loop {
            match rustix::io::read(fd, &mut buf) {
                Ok(0) => {
                    self.open = None;
                    return;
                }
                Ok(n) => {
                    let chunk = buf.get(..n).unwrap_or_default();
                    let room = MAX_CAPTURE.saturating_sub(self.kept.len());
                    if chunk.len() > room {
                        self.truncated = true;
                    }
                    self.kept
                        .extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
                }
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return,
                Err(_) => {
                    self.open = None;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use std::os::unix::fs::symlink;

    use super::*;

    fn workspace() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("docs")).unwrap();
        std::fs::create_dir_all(tmp.path().join(".git")).unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        (tmp, ws)
    }

    /// Outside testing round 12: a stream cut at the capture limit ends at a word boundary, so
    /// no half path or half token survives the cut (neither roles nor rules recognise one).
    #[test]
    fn a_cut_stream_never_ends_inside_a_word() {
        let (tmp, _) = workspace();
        let fd = rustix::fs::open(tmp.path(), OFlags::RDONLY, Mode::empty()).unwrap();
        for (text, kept) in [
            (b"short".to_vec(), b"short".to_vec()),
            (
                [vec![b'x'; 100], b" /home/alice/wo".to_vec()].concat(),
                [vec![b'x'; 100], b" ".to_vec()].concat(),
            ),
            (
                [vec![b'x'; 100], b"\nAKIAIOSF".to_vec()].concat(),
                [vec![b'x'; 100], b"\n".to_vec()].concat(),
            ),
            (vec![b'y'; 10_000], vec![b'y'; 10_000 - 4096]),
        ] {
            let truncated = text.len() > 5;
            let c = Capture {
                open: Some(rustix::io::fcntl_dupfd_cloexec(&fd, 0).unwrap()),
                kept: text,
                truncated,
            };
            assert_eq!(c.whole_words(), kept.as_slice());
        }
    }

    /// Issue 30 item 1: whether the program ran is the error's variant (a receipt says "not
    /// run" or "ran, then failed" from it), never its words.
    #[test]
    fn issue_30_a_command_error_says_whether_the_program_ran() {
        use crate::confine::ConfineError;
        let io = || std::io::Error::other("x");
        assert!(!CommandError::EmptyArgv.ran());
        assert!(!CommandError::Program(ProgramError::NotExecutable("x".into())).ran());
        assert!(
            !CommandError::Setup {
                what: "a pipe",
                source: io()
            }
            .ran()
        );
        assert!(!CommandError::Confine(ConfineError::Plan("x".into())).ran());
        assert!(CommandError::Survivors.ran());
        assert!(CommandError::Wait(io()).ran());
        assert!(
            CommandError::Confine(ConfineError::Wait {
                pid: 2,
                source: io()
            })
            .ran()
        );
        let (tmp, _) = workspace();
        let env = CommandEnv {
            sandbox: crate::confine::Sandbox::new(
                Vec::new(),
                Vec::new(),
                Vec::new(),
                &crate::confine::Limits::hiding(Vec::new()),
                crate::confine::Network::None,
                false,
            )
            .unwrap(),
            home: tmp.path().to_path_buf(),
            tmp: tmp.path().to_path_buf(),
            path: SAFE_PATH.into(),
            vars: Vec::new(),
        };
        let e = run_command(
            &["no-such-program-craik".into()],
            tmp.path(),
            Duration::from_secs(5),
            &env,
        )
        .unwrap_err();
        assert!(
            matches!(e, CommandError::Program(ProgramError::NotFound { .. })) && !e.ran(),
            "{e}"
        );
    }

    /// Issue 30 item 7: a write keeps the target's permission bits (an executable script stays
    /// executable, a private file stays private), never its set-id bits; a new file is 0644
    /// whatever the umask.
    #[test]
    fn issue_30_a_write_keeps_the_targets_mode() {
        use std::os::unix::fs::PermissionsExt;
        let (tmp, ws) = workspace();
        let mode = |rel: &str| {
            std::fs::metadata(tmp.path().join(rel))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        for (rel, before, after) in [
            ("docs/run.sh", 0o755, 0o755),
            ("docs/secret.txt", 0o600, 0o600),
            ("docs/odd", 0o640, 0o640),
            ("docs/setuid", 0o4755, 0o755),
        ] {
            std::fs::write(tmp.path().join(rel), "old").unwrap();
            std::fs::set_permissions(
                tmp.path().join(rel),
                std::fs::Permissions::from_mode(before),
            )
            .unwrap();
            ws.write(rel, b"new", "t").unwrap();
            assert_eq!(mode(rel), after, "{rel}");
            assert_eq!(std::fs::read(tmp.path().join(rel)).unwrap(), b"new");
        }
        ws.write("docs/new.md", b"x", "t").unwrap();
        assert_eq!(mode("docs/new.md"), 0o644);
    }

    /// The race the descriptor walk closes: the directory is opened, then swapped for a
    /// symlink to `.git/`; the write still lands in the directory that was opened.
    #[test]
    fn a_directory_swapped_for_a_symlink_after_the_walk_is_not_followed() {
        let (tmp, ws) = workspace();
        let parent = ws.parent("docs/a.md", true).unwrap().unwrap();
        std::fs::rename(tmp.path().join("docs"), tmp.path().join("docs-old")).unwrap();
        symlink(tmp.path().join(".git"), tmp.path().join("docs")).unwrap();
        write_in(parent, "docs/a.md", b"x", "t").unwrap();
        assert!(tmp.path().join("docs-old/a.md").is_file());
        assert!(!tmp.path().join(".git/a.md").exists());
        // And a fresh walk now refuses the symlinked component.
        let e = ws.write("docs/b.md", b"x", "t").unwrap_err().to_string();
        assert!(e.contains("`docs` is a symlink"), "{e}");
        assert!(!tmp.path().join(".git/b.md").exists());
    }

    #[test]
    fn no_component_and_no_file_may_be_a_symlink_or_special() {
        let (tmp, ws) = workspace();
        std::fs::write(tmp.path().join("docs/real.md"), "real").unwrap();
        symlink("real.md", tmp.path().join("docs/link.md")).unwrap();
        symlink("../.git", tmp.path().join("docs/inner")).unwrap();
        std::fs::write(tmp.path().join("plain"), "").unwrap();
        let fifo = tmp.path().join("docs/fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();

        let e = ws.read_text("docs/link.md").unwrap_err();
        assert!(
            matches!(e, WorkspaceError::Symlink(ref p) if p == "docs/link.md"),
            "{e}"
        );
        assert!(e.to_string().contains("`docs/link.md` is a symlink"), "{e}");
        let e = ws.write("docs/link.md", b"x", "t").unwrap_err().to_string();
        assert!(e.contains("is a symlink"), "{e}");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("docs/real.md")).unwrap(),
            "real"
        );
        let e = ws
            .write("docs/inner/config", b"x", "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`docs/inner` is a symlink"), "{e}");
        assert!(!tmp.path().join(".git/config").exists());
        // A FIFO is neither read (which would block) nor replaced.
        assert!(matches!(
            ws.read_text("docs/fifo").unwrap_err(),
            WorkspaceError::NotRegular(_)
        ));
        assert!(
            ws.write("docs/fifo", b"x", "t")
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
        let e = ws.write("plain/x", b"x", "t").unwrap_err().to_string();
        assert!(e.contains("`plain` is not a directory"), "{e}");
        assert!(
            ws.write("docs", b"x", "t")
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );

        for bad in [
            "../x",
            "docs/../../x",
            "/etc/passwd",
            "docs//x",
            "./x",
            "docs/.",
            "",
        ] {
            let e = ws.write(bad, b"x", "t").unwrap_err().to_string();
            assert!(e.contains("not a normalised workspace path"), "{bad}: {e}");
            assert!(ws.state(bad).is_err(), "{bad}");
        }

        assert_eq!(ws.state("docs/none/x.md").unwrap(), FileState::Missing);
        assert_eq!(ws.state("docs/x.md").unwrap(), FileState::Missing);
        ws.write("docs/new/deep/x.md", b"hello", "t").unwrap();
        assert_eq!(ws.read_text("docs/new/deep/x.md").unwrap(), "hello");
        assert_eq!(
            ws.state("docs/new/deep/x.md").unwrap(),
            FileState::Present(digest(b"hello"))
        );
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(tmp.path().join("docs/new/deep"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["x.md"]);
    }
}
