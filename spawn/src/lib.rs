//! The code Craik runs in a confined child between `fork` and `exec`: the last steps of
//! confinement, applied to the child alone, from a [`Plan`] the parent computed before the
//! fork.
//!
//! Why a separate crate: it is the only place in Craik with `unsafe` (`pre_exec`, and the raw
//! Landlock, seccomp and `close_range` system calls), kept small enough to audit in one
//! sitting. Before it, each confined process was a re-executed `craik` (a trampoline) that did
//! the same steps; starting the 24 MB binary again cost more than a millisecond per command.
//!
//! Governed commands start through [`spawn`]: `clone(CLONE_VM | CLONE_VFORK)` as
//! `posix_spawn` does, the child sharing Craik's memory until `exec` (no page table copied;
//! see [`spawn`] for what that asks of the child), and — where the kernel allows it — under an
//! init of Craik's own as pid 1 of a PID namespace of their own (below). Adapters, long-lived
//! and started once per run, still use `std`'s `fork` with [`install`] (no PID namespace: their
//! leftovers are swept by Craik when they stop).
//!
//! The rules for code after `fork` in a multi-threaded process, which everything reachable
//! from [`apply`] keeps: **no allocation, no lock, no `std::io`** — only system calls on data
//! the [`Plan`] already holds (`rustix` calls with `&CStr` arguments allocate nothing), a
//! refusal kept as a value (or, for [`install`], written from static text with `write(2)`),
//! and `_exit`.
//!
//! The steps, in order (each needs the one before):
//! 1. a new session; `SIGKILL` when the parent dies (`PR_SET_PDEATHSIG`); refuse if the parent
//!    is no longer the process that planned this child;
//! 2. a private mount namespace (as a non-root user inside a new user namespace mapping only
//!    its own uid and gid) where every mount is made read-only, `nosuid` and private by one
//!    recursive `mount_setattr` (on kernels before 5.12: remounted one by one), and the
//!    writable directories are bound onto themselves and made writable again (`nosuid,nodev`);
//!    the working directory is entered again by path (it still referred to the read-only
//!    mount). Usually that namespace was made once by [`make_namespace`] for every child with
//!    the same writable directories, and the child only enters it (`setns`, [`MountNs`]);
//!    then, for [`spawn`], the PID namespace and its init (below);
//! 3. every capability dropped (bounding set and `noroot` secure bits as root or inside the
//!    user namespace, ambient, inheritable, permitted, effective) and `no_new_privs` set —
//!    then checked, or refused; then the resource limits: no core dump, a largest file size
//!    for commands and, in a PID namespace, a process limit ([`Plan::process_limit`]);
//! 4. Landlock: the parent's ruleset plus this process's own `/proc/<pid>`, then
//!    `landlock_restrict_self`;
//! 5. the seccomp filter (installed last but one: it refuses mounts, namespaces, ...);
//! 6. every descriptor above 2 marked close-on-exec: nothing Craik holds reaches the program.
//!
//! INVARIANT: when a step fails the program is never executed. [`spawn`] returns the refusal
//! as a value ([`SpawnError::Refused`]: the stage, the static text, the path, the errno),
//! handed back in the memory the children share with Craik — never read from the program's
//! standard error; a child of [`install`] writes one [`REFUSED_PREFIX`] line on its standard
//! error and exits [`REFUSED_EXIT`].
//!
//! # No process outlives its command (issue 30 item 5)
//!
//! Outside testing kept Craik 54 s in its freeze-then-kill sweep with a fork chain (each
//! generation forks and exits) until the un-reaped zombies filled the pid table. A sweep over
//! `/proc` can be outrun; a PID namespace cannot: when its pid 1 exits the kernel kills every
//! process in it, and reaps them before that exit is reported.
//!
//! **The decision: the init is allocation-free Rust in this crate, not a program.** A separate
//! init binary would cost an `execve` per command (a fresh address space and an ELF load, a
//! tenth of a millisecond and more against a 0.5 ms budget) and a file to ship, pin and keep out
//! of every sandbox's reach; the program itself as pid 1 would reap nothing (a chain's zombies
//! pile up again) and would change its signal semantics. So, in [`spawn`]:
//!
//! As root (no user namespace to enter first) the calling thread makes the init itself —
//! the first child's work is done by the init, and the thread waits for the init's word
//! (the same futex) instead of a first child's exit: one task, one `clone`, one exit and one
//! wake-up fewer per command (`start_init`):
//!
//! ```text
//! Craik thread ── clone(VM|NEWPID|PIDFD) ──> init: pid 1, own stack, signals reset, stdio,
//!   (futex wait, signals blocked)             cwd, setsid, PDEATHSIG, cgroup, mounts,
//!   <── word (futex) ──────────────────────── clone(VM|VFORK) ──> program: pid 2,
//!                                             reaps, forwards      steps 3–6, execve
//! ```
//!
//! Otherwise (a user other than root, who needs the private user namespace's capability):
//!
//! ```text
//! Craik thread ── clone(VM|VFORK|PIDFD) ──> first child: signals reset, stdio, cwd,
//!   (suspended)                              steps 1–2, unshare(CLONE_NEWPID),
//!                                            clone(VM|PARENT|PARENT_SETTID) ─┐
//!                                            waits (futex) until the init    │
//!                                            reports, exits 0                │
//!   <── Craik's child (CLONE_PARENT) ── init: pid 1, own stack, setsid,  <───┘
//!                                       PDEATHSIG, clone(VM|VFORK) ──> program: pid 2,
//!                                       reaps, forwards               steps 3–6, execve
//! ```
//!
//! - **Privilege.** `CLONE_NEWPID` needs `CAP_SYS_ADMIN` in the caller's user
//!   namespace: root has it; a user other than root has it inside the private user namespace
//!   the first child has just entered (`setns` into a user namespace gives every capability
//!   in it), which then owns the new PID namespace. With neither (no unprivileged user
//!   namespaces), [`PidNs::Required`] refuses; [`PidNs::Optional`] runs the program as the
//!   first child, as before, and [`Started::contained`] is false (Craik's sweep remains the
//!   belt there).
//! - **The init** runs beside Craik's threads in Craik's memory (a `fork` of Craik would cost
//!   the millisecond `CLONE_VM` saved), so after it has reported it touches only its own stack
//!   (kept by [`Started`] until the init has been reaped) and makes only `rustix` system calls:
//!   no `libc` call that sets `errno`, which lives in the thread-local storage it shares with
//!   the Craik thread that spawned it. It blocks every signal and reads them from a
//!   `signalfd`: `SIGCHLD` — it reaps every child as it exits (orphans are re-parented to
//!   pid 1), so zombies never pile up — and `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, which it
//!   passes on to the program. When the program has exited it records how ([`Ended`], one word
//!   at the top of its stack: an exit code and a signal stay apart) and exits with the exit
//!   code or 128 + the signal. It keeps no descriptor but its `signalfd` (no copy of another
//!   command's pipes). Craik's timeout kills the init (`SIGKILL` through its pidfd): the
//!   namespace dies whole.
//! - **Parent death.** `PR_SET_PDEATHSIG` fires on the exit of the creating *thread*: the
//!   init's parent is the Craik thread that called [`spawn`] (`CLONE_PARENT`), and the init
//!   sets the signal itself. Its parent lies outside its namespace (`getppid` answers 0), so
//!   it checks a pidfd of Craik instead: readable means Craik exited before the signal was
//!   armed, and it refuses.
//! - **Hand-over.** The children read the handoff on the Craik thread's stack; that thread is
//!   suspended until the first child exits, which waits for the init's word. The kernel writes
//!   the init's pid into the handoff before `clone` returns (`CLONE_PARENT_SETTID`), so if the
//!   first child is killed early, Craik still finds the init, kills and reaps it (with its
//!   namespace) before the handoff goes.
//! - **Why a program cannot reach the init** (which shares Craik's memory, signing key
//!   included): the init is never dumpable (dumpability belongs to the memory, and Craik made
//!   itself not dumpable, `harden_self`), so `ptrace`, `/proc/<pid>/mem`, `process_vm_*` and
//!   `pidfd_getfd` fail their access check for any process without `CAP_SYS_PTRACE` — and the
//!   program has no capability; every confined process's seccomp filter refuses those four
//!   calls outright; the program restricts itself with Landlock after the `vfork`, so the init
//!   lies outside its domain: Landlock forbids tracing it on every ABI and (ABI ≥ 6) signalling
//!   it, and no rule grants the init's `/proc/<pid>`. From inside the namespace the kernel
//!   drops `SIGKILL` and `SIGSTOP` sent to pid 1; any other signal only becomes a record the
//!   init reads (the forwarded ones go to the program, which could send them itself). The
//!   window in which an unprivileged child makes the shared memory dumpable to write its user
//!   namespace's maps ([`private_mounts`]) is unchanged: it exposed Craik the same way before.
//! - **`/proc`.** The program sees the host's `/proc` (mounting one for its namespace would
//!   need a mount namespace per command, the 0.2–0.4 ms cut before): `/proc/self` is itself,
//!   but its own pid (`$$`, `getpid`: 2) names nothing there, or another process, which
//!   Landlock keeps out.
//! - **A process flood.** A PID namespace ends a flood with its command but does not bound it
//!   meanwhile. As a user other than root, [`Plan::process_limit`] (`RLIMIT_NPROC`) does: the
//!   kernel counts it per user namespace, so in the private one it counts only the sandbox's
//!   processes. As root nothing does (`RLIMIT_NPROC` never binds uid 0) but the step's
//!   timeout — where cgroup v2 is delegated, the command's own cgroup does (below).
//! - **A cgroup of its own.** Where the caller made one ([`Plan::cgroup_procs`]: Craik, where
//!   cgroup v2 is delegated to it), the init writes `0` into its `cgroup.procs` before it
//!   starts the program — without a PID namespace the program's process does, before
//!   `exec` — so every process of the command is born inside it and bound by its `pids.max`,
//!   `memory.max` and `cpu.max`. The init's memory is Craik's (`CLONE_VM`) and stays charged
//!   to Craik's cgroup; the program's, after `exec`, to the command's. The caller removes the
//!   cgroup once the command has been reaped ([`Started::keep_until_reaped`]).

use std::ffi::CStr;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::{CapabilitiesSecureBits, CapabilitySet, CapabilitySets};

/// The exit code of a child that refused to run its program.
pub const REFUSED_EXIT: i32 = 125;
/// The first word of that child's refusal on its standard error.
pub const REFUSED_PREFIX: &str = "craik-confine:";

/// Every capability number the kernel may know; past its last one the calls fail `EINVAL`.
const LAST_CAP: u32 = 63;

/// Everything a confined child applies to itself, computed by the parent before the fork.
#[derive(Debug)]
pub struct Plan {
    /// The pid of the process that planned the child (checked after the parent-death signal is
    /// set: a parent that already died would never send it).
    pub parent: u32,
    /// The private mount namespace, or `None` for none.
    pub mounts: Option<MountNs>,
    /// Refuse to run when the mount namespace fails (otherwise warn on standard error).
    pub mounts_required: bool,
    /// The Landlock ruleset, or `None` where the kernel has none (the parent decided whether
    /// that is allowed).
    pub landlock: Option<Landlock>,
    /// The seccomp programs, installed in order.
    pub filters: &'static [Vec<Insn>],
    /// The largest file the program may write (`RLIMIT_FSIZE`, hard and soft), or `None` to
    /// keep the parent's. Core dumps are always off (`RLIMIT_CORE` 0).
    pub file_size_limit: Option<u64>,
    /// Whether [`spawn`] starts the program under an init of its own in a new PID namespace
    /// (see the crate documentation). [`install`] and [`apply`] ignore it.
    pub pid_ns: PidNs,
    /// The most processes the program's user may have (`RLIMIT_NPROC`, hard and soft), set
    /// only where the program runs in its own PID namespace — as a user other than root that
    /// is inside the private user namespace, whose processes alone it counts. The kernel never
    /// applies it to root (uid 0 of the host).
    pub process_limit: Option<u64>,
    /// The `pid_max` of the command's PID namespace (at most this many processes less one),
    /// written by its init. SAFETY OF THE MACHINE: only on a kernel that keeps `pid_max` per
    /// PID namespace (Linux ≥ 6.14); on an older one, as root, the write would set the whole
    /// machine's. `None`: not set.
    pub pid_max: Option<u32>,
    /// `cgroup.procs` of the command's own cgroup v2, open for writing, or `None` for none:
    /// the init (without a PID namespace, the program's process) writes `0` into it — moves
    /// itself there — before the program is started, so nothing of the program runs outside
    /// it; a failed write refuses. The caller made the cgroup and set its limits, and removes
    /// it once the command has been reaped ([`Started::keep_until_reaped`]). [`install`] and
    /// [`apply`] ignore it.
    pub cgroup_procs: Option<OwnedFd>,
}

/// Whether a command gets a PID namespace of its own, with Craik's init as its pid 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidNs {
    /// No: the program is the child itself (what is left behind is Craik's to sweep).
    Off,
    /// Where the kernel allows it (root, or inside the private user namespace); otherwise
    /// the program runs as [`PidNs::Off`], and [`Started::contained`] says so.
    Optional,
    /// Always: where no PID namespace can be made, the child refuses.
    Required,
}

/// One classic-BPF instruction (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

/// The private mount namespace.
#[derive(Debug)]
pub struct Mounts {
    /// `Some` when the process is not root: a user namespace first, with these maps.
    pub user: Option<IdMaps>,
    /// The writable directories: each bound onto itself (a mount of its own, so it can stay
    /// writable while what holds it turns read-only).
    pub binds: Vec<CString>,
    /// How the rest turns read-only.
    pub how: ReadOnly,
}

/// Where a child's private mount namespace comes from.
#[derive(Debug)]
pub enum MountNs {
    /// The child makes it (`unshare`, then the mounts).
    Make(Mounts),
    /// The child enters one made before by [`make_namespace`] (`setns`): no copy of the mount
    /// table per child, and none torn down when it exits — together a quarter of a
    /// millisecond and more per command on a small VM.
    Enter(std::sync::Arc<Namespace>),
}

/// A private mount namespace made by [`make_namespace`], held open by its descriptors.
#[derive(Debug)]
pub struct Namespace {
    /// The user namespace it belongs to, when one was made (not root).
    user: Option<OwnedFd>,
    mnt: OwnedFd,
}

/// How every mount but the writable binds becomes read-only.
#[derive(Debug)]
pub enum ReadOnly {
    /// One recursive `mount_setattr(2)` on `/` (Linux ≥ 5.12): read-only, `nosuid`,
    /// private; then each bind is made and given back write access (`nosuid`, `nodev`).
    /// Nothing is listed, so no mount can be missed.
    Recursive,
    /// Kernels without `mount_setattr`: the binds first, then every mount point remounted,
    /// deepest first, with the flags it gets.
    Remounts(Vec<Remount>),
}

/// The user namespace's identity maps (`/proc/self/uid_map` and `gid_map` content).
#[derive(Debug)]
pub struct IdMaps {
    /// `"<uid> <uid> 1"`.
    pub uid_map: Vec<u8>,
    /// `"<gid> <gid> 1"`.
    pub gid_map: Vec<u8>,
}

/// One bind remount.
#[derive(Debug)]
pub struct Remount {
    /// The mount point.
    pub point: CString,
    /// `MS_BIND | MS_REMOUNT` is added; these are the rest (`MS_RDONLY`, `MS_NOSUID`, ...).
    pub flags: MountFlags,
    /// Already read-only: a failure to remount it (a mount this process cannot see into) is
    /// not an error.
    pub may_fail: bool,
}

/// A Landlock ruleset built by the parent.
#[derive(Debug)]
pub struct Landlock {
    /// The ruleset (`landlock_create_ruleset`), rules added.
    pub ruleset: OwnedFd,
    /// The access the child gets to its own `/proc/<pid>` (a pid the parent cannot know).
    pub own_proc_access: u64,
}

/// Why a child refused, written without allocating.
#[derive(Debug, Clone, Copy)]
pub struct Fail<'a> {
    stage: Stage,
    what: &'static str,
    path: Option<&'a CStr>,
    errno: Option<i32>,
}

/// The step of confinement that refused (the crate documentation's numbering).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// 1: the session, the parent-death signal, the parent check.
    Session,
    /// 2: the private mount (and user) namespace.
    Mounts,
    /// The PID namespace and its init.
    PidNamespace,
    /// 3: capabilities, `no_new_privs`, resource limits.
    Privileges,
    /// 4: Landlock.
    Landlock,
    /// 5: seccomp.
    Seccomp,
    /// 6: inherited descriptors.
    Descriptors,
}

impl<'a> Fail<'a> {
    const fn new(what: &'static str) -> Self {
        Self {
            stage: Stage::Session,
            what,
            path: None,
            errno: None,
        }
    }

    fn os(what: &'static str, e: rustix::io::Errno) -> Self {
        Self {
            stage: Stage::Session,
            what,
            path: None,
            errno: Some(e.raw_os_error()),
        }
    }

    const fn at(mut self, path: &'a CStr) -> Self {
        self.path = Some(path);
        self
    }

    const fn in_stage(mut self, stage: Stage) -> Self {
        self.stage = stage;
        self
    }

    /// The step that refused.
    pub const fn stage(&self) -> Stage {
        self.stage
    }

    /// What failed (static text).
    pub const fn what(&self) -> &'static str {
        self.what
    }

    /// The errno of the call that failed, if a call failed.
    pub const fn errno(&self) -> Option<i32> {
        self.errno
    }

    /// An owned copy, for a [`SpawnError::Refused`].
    fn refusal(&self) -> Refusal {
        Refusal {
            stage: self.stage,
            what: self.what,
            path: self
                .path
                .map(|p| String::from_utf8_lossy(p.to_bytes()).into_owned()),
            errno: self.errno,
        }
    }

    /// What failed, as the line the child writes (for tests and the probe; allocates).
    pub fn text(&self) -> String {
        let mut line = Line::new();
        self.compose(&mut line);
        String::from_utf8_lossy(line.bytes()).into_owned()
    }

    fn compose(&self, line: &mut Line) {
        line.push(self.what.as_bytes());
        if let Some(path) = self.path {
            line.push(b" `");
            line.push(path.to_bytes());
            line.push(b"`");
        }
        if let Some(errno) = self.errno {
            line.push(b": os error ");
            line.number(errno);
        }
    }

    /// Writes `craik-confine: <what>[ `path`][: os error N]` (or a warning) to fd 2.
    fn report(&self, warning: bool) {
        let mut line = Line::new();
        line.push(REFUSED_PREFIX.as_bytes());
        line.push(b" ");
        if warning {
            line.push(b"WARNING: ");
        }
        self.compose(&mut line);
        if warning {
            line.push(b"; file metadata (chmod) is not confined for this process");
        }
        line.push(b"\n");
        let _ = rustix::io::write(stderr(), line.bytes());
    }
}

/// A fixed buffer a line is composed in (cut at its size).
struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Line {
    const fn new() -> Self {
        Self {
            buf: [0; 1024],
            len: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        for b in bytes {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = *b;
                self.len += 1;
            }
        }
    }

    fn number(&mut self, n: i32) {
        let mut digits = [0u8; 12];
        let mut i = digits.len();
        let mut v = n.unsigned_abs();
        loop {
            i -= 1;
            if let Some(d) = digits.get_mut(i) {
                *d = b'0' + (v % 10) as u8;
            }
            v /= 10;
            if v == 0 || i == 0 {
                break;
            }
        }
        if n < 0 {
            self.push(b"-");
        }
        self.push(digits.get(i..).unwrap_or_default());
    }

    fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

fn stderr() -> rustix::fd::BorrowedFd<'static> {
    // SAFETY: fd 2 is the child's standard error (set up by `Command` before `pre_exec`); a
    // write to a closed descriptor fails and is ignored.
    #[allow(unsafe_code)]
    unsafe {
        rustix::fd::BorrowedFd::borrow_raw(2)
    }
}

/// Makes `command`, when spawned, apply `plan` to its child before `exec`. On failure the
/// child writes what failed to a close-on-exec pipe and `std`'s spawn fails (its own pipe
/// carries the errno); [`RefusalPipe::take`] then reads the text — never the child's stderr,
/// which a program that ran may write anything to (issue 30).
pub fn install(command: &mut std::process::Command, plan: Plan) -> std::io::Result<RefusalPipe> {
    let (read, write) = rustix::pipe::pipe_with(
        rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK,
    )?;
    let hook = move || -> std::io::Result<()> {
        if let Err(fail) = apply(&plan) {
            let mut line = Line::new();
            fail.compose(&mut line);
            let _ = rustix::io::write(&write, line.bytes());
            return Err(std::io::Error::from_raw_os_error(
                fail.errno.unwrap_or(libc::EPERM),
            ));
        }
        Ok(())
    };
    // SAFETY: the hook runs in the child between `fork` and `exec`. Everything it reaches
    // ([`apply`], [`Line`], one `write(2)`) allocates nothing, takes no lock and only makes
    // system calls on data `plan` owns, built before the fork; see the crate documentation.
    // The `io::Error` it returns is built from a raw errno (no allocation).
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(hook);
    }
    Ok(RefusalPipe { read })
}

/// The parent's end of the pipe [`install`]'s child reports a refusal on.
#[derive(Debug)]
pub struct RefusalPipe {
    read: OwnedFd,
}

impl RefusalPipe {
    /// What the child refused, once `std`'s spawn has failed (the child wrote it before
    /// failing); `None` when it did not refuse (the spawn failed for another reason).
    pub fn take(self) -> Option<String> {
        let mut buf = [0u8; 1024];
        match rustix::io::read(&self.read, &mut buf) {
            Ok(n) if n > 0 => {
                Some(String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned())
            }
            _ => None,
        }
    }
}

/// A program to start, in the form `execve(2)` takes it (built by the parent).
#[derive(Debug)]
pub struct Program {
    /// The file executed (absolute; resolved and pinned by the parent, never searched for).
    pub path: CString,
    /// `argv`, `argv[0]` included.
    pub argv: Vec<CString>,
    /// The whole environment, as `NAME=value`.
    pub envp: Vec<CString>,
    /// The working directory.
    pub cwd: CString,
}

/// A started child: its pid, and a pidfd that holds that very process (a pid alone may be
/// reused once it is waited for).
#[derive(Debug)]
pub struct Started {
    /// The child's pid as Craik sees it, also its process group and session (it calls
    /// `setsid`): when [`Started::contained`], the init of the command's PID namespace —
    /// killing it kills every process of the command — otherwise the program itself.
    pub pid: i32,
    /// `CLONE_PIDFD`: readable when the child exits; `waitid(P_PIDFD)` reaps it.
    pub pidfd: OwnedFd,
    /// The init's stack (it records how the program ended at its top), while the init runs.
    init: Option<Stack>,
    /// Whether [`Started::wait`] reaped it.
    waited: std::sync::atomic::AtomicBool,
    /// What the caller keeps alive until the child has been reaped (a cgroup to remove).
    kept: std::sync::Mutex<Option<Kept>>,
}

/// A value [`Started`] drops once its child has been reaped (held only to be dropped).
struct Kept(#[allow(dead_code, reason = "held only for its `Drop`")] Box<dyn std::any::Any + Send>);

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kept(..)")
    }
}

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited with this code.
    Exited(i32),
    /// This signal ended it.
    Signaled(i32),
}

impl Ended {
    /// The word an init records it as (0: nothing recorded).
    pub const fn encode(self) -> u32 {
        match self {
            Self::Exited(code) => 0x100 | (code as u32 & 0xff),
            Self::Signaled(signal) => 0x200 | (signal as u32 & 0xff),
        }
    }

    /// The inverse of [`Ended::encode`]; `None` for a word no init wrote.
    pub const fn decode(word: u32) -> Option<Self> {
        match word >> 8 {
            1 => Some(Self::Exited((word & 0xff) as i32)),
            2 if matches!(word & 0xff, 1..=64) => Some(Self::Signaled((word & 0xff) as i32)),
            _ => None,
        }
    }

    /// The status an init exits with: the program's exit code, or 128 + the signal that
    /// ended it (a shell's convention; the exact record is [`Ended::encode`]'s word).
    pub const fn exit_status(self) -> i32 {
        match self {
            Self::Exited(code) => code & 0xff,
            Self::Signaled(signal) => 128 + (signal & 0x7f),
        }
    }

    /// The exit code, `None` when a signal ended it.
    pub const fn code(self) -> Option<i32> {
        match self {
            Self::Exited(code) => Some(code),
            Self::Signaled(_) => None,
        }
    }

    fn of(status: rustix::process::WaitStatus) -> Option<Self> {
        status
            .exit_status()
            .map(Self::Exited)
            .or_else(|| status.terminating_signal().map(Self::Signaled))
    }
}

impl Started {
    /// Whether the program runs in a PID namespace of its own under Craik's init: when it
    /// ends, or when [`Started::pid`] is killed, every process it started ends with it.
    pub fn contained(&self) -> bool {
        self.init.is_some()
    }

    /// Waits until the child has exited and reaps it: how the program ended (for a contained
    /// one, as its init recorded it; an init killed before the program ended — Craik's
    /// timeout — reports its own death, `SIGKILL`).
    pub fn wait(&self) -> std::io::Result<Ended> {
        use rustix::process::{WaitId, WaitIdOptions};
        let status = loop {
            match rustix::process::waitid(WaitId::PidFd(self.pidfd.as_fd()), WaitIdOptions::EXITED)
            {
                Err(rustix::io::Errno::INTR) => {}
                other => break other,
            }
        }?;
        self.waited.store(true, std::sync::atomic::Ordering::SeqCst);
        let own = status
            .and_then(|s| {
                s.exit_status()
                    .map(Ended::Exited)
                    .or_else(|| s.terminating_signal().map(Ended::Signaled))
            })
            .ok_or_else(|| std::io::Error::other("the child exited without a status"))?;
        self.release_kept();
        let recorded = self.init.as_ref().and_then(|stack| {
            Ended::decode(stack.slot().load(std::sync::atomic::Ordering::SeqCst))
        });
        Ok(recorded.unwrap_or(own))
    }
}

impl Started {
    /// Keeps `value` until the child has been reaped ([`Started::wait`], or this `Started`
    /// dropped): what must outlive the command, such as its cgroup, whose `Drop` kills what
    /// is left in it and removes it.
    pub fn keep_until_reaped(&self, value: Box<dyn std::any::Any + Send>) {
        if let Ok(mut kept) = self.kept.lock() {
            *kept = Some(Kept(value));
        }
    }

    fn release_kept(&self) {
        let kept = self.kept.lock().ok().and_then(|mut k| k.take());
        drop(kept);
    }
}

impl Drop for Started {
    /// An init still running when its `Started` goes is killed (its namespace with it) and
    /// reaped before its stack is unmapped; if that cannot be confirmed the stack is leaked.
    /// What [`Started::keep_until_reaped`] kept goes last.
    fn drop(&mut self) {
        use rustix::process::{WaitId, WaitIdOptions};
        let Some(stack) = self.init.take() else {
            return;
        };
        if !self.waited.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = rustix::process::pidfd_send_signal(&self.pidfd, rustix::process::Signal::KILL);
            loop {
                match rustix::process::waitid(
                    WaitId::PidFd(self.pidfd.as_fd()),
                    WaitIdOptions::EXITED,
                ) {
                    Err(rustix::io::Errno::INTR) => {}
                    // Reaped, or reaped by someone else: either way it runs no more.
                    Ok(_) | Err(rustix::io::Errno::CHILD) => break,
                    Err(_) => {
                        std::mem::forget(stack);
                        return;
                    }
                }
            }
        }
        drop(stack);
    }
}

/// Why [`spawn`] started no program.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// Confinement refused: the program never ran.
    #[error("{REFUSED_PREFIX} {0}")]
    Refused(Refusal),
    /// The working directory, standard descriptors or `exec` failed.
    #[error("{what}: {error}")]
    Start {
        /// Which.
        what: &'static str,
        /// The error of the call.
        error: std::io::Error,
    },
    /// Preparing the child failed (descriptors, stacks, `clone`).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A refusal of confinement as a value: the step, what failed (static text), the path it
/// failed on and the errno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The step.
    pub stage: Stage,
    /// What failed.
    pub what: &'static str,
    /// The path it failed on, if one.
    pub path: Option<String>,
    /// The errno of the call that failed, if a call failed.
    pub errno: Option<i32>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)?;
        if let Some(path) = &self.path {
            write!(f, " `{path}`")?;
        }
        if let Some(errno) = self.errno {
            write!(f, ": os error {errno}")?;
        }
        Ok(())
    }
}

/// The stack each child runs on (it shares the parent's memory, never its stack).
const CHILD_STACK: usize = 256 * 1024;

/// What the parent hands its children, and they hand back (a refusal, an `exec` or `chdir`
/// failure, the init's pid): they share memory until the program calls `exec` (or the init
/// says it has).
struct Handoff<'a> {
    program: &'a Program,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    stdio: [i32; 3],
    plan: &'a Plan,
    /// Where the init runs, and the program's child until `exec` (the PID namespace path).
    init_stack: Option<&'a Stack>,
    command_stack: Option<&'a Stack>,
    /// A pidfd of Craik (opened by the first child) for the init's parent check.
    parent: std::sync::atomic::AtomicI32,
    /// What the first child did of step 2 before it made the PID namespace: entered the user
    /// namespace; made or gave up on the mounts (the init does the rest).
    user_entered: std::sync::atomic::AtomicBool,
    mounts_done: std::sync::atomic::AtomicBool,
    /// The init's pid (in Craik's namespace), or 0.
    init_pid: std::sync::atomic::AtomicI32,
    /// 1 once the init has started the program or failed (a futex word).
    ready: std::sync::atomic::AtomicU32,
    /// 0, or the errno of the step that failed (`stage` says which).
    errno: std::sync::atomic::AtomicI32,
    stage: std::sync::atomic::AtomicU8,
    /// Set (once, by the one child that refused, before it exits) when `refusal` holds why.
    refused: std::sync::atomic::AtomicBool,
    refusal: std::cell::UnsafeCell<Option<Fail<'a>>>,
}

const STAGE_CHDIR: u8 = 1;
const STAGE_EXEC: u8 = 2;
const STAGE_STDIO: u8 = 3;

impl<'a> Handoff<'a> {
    /// Records a start failure and ends the calling child (exit 127).
    fn failed(&self, stage: u8, errno: i32) -> ! {
        use std::sync::atomic::Ordering;
        self.errno.store(errno.max(1), Ordering::SeqCst);
        self.stage.store(stage, Ordering::SeqCst);
        self.wake();
        // SAFETY: ends the child at once; nothing of the parent's runs (no atexit handler).
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(127)
        }
    }

    /// Records a refusal and ends the calling child ([`REFUSED_EXIT`]).
    fn refuse(&self, fail: Fail<'a>) -> ! {
        use std::sync::atomic::Ordering;
        // SAFETY: at most one child of a spawn writes here, once, and exits right after; the
        // parent reads it only after `refused` is set and every child that could write has
        // exited or handed over (the `CLONE_VFORK` completion and the `ready` futex order the
        // write before the read). `fail`'s path borrows the plan, which outlives the spawn.
        #[allow(unsafe_code)]
        unsafe {
            *self.refusal.get() = Some(fail);
        }
        self.refused.store(true, Ordering::SeqCst);
        self.wake();
        // SAFETY: as in `failed`.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(REFUSED_EXIT)
        }
    }

    /// Tells the first child (waiting in [`outer`]) that the init is done with the handoff.
    fn wake(&self) {
        use rustix::thread::futex;
        self.ready.store(1, std::sync::atomic::Ordering::SeqCst);
        let _ = futex::wake(&self.ready, futex::Flags::PRIVATE, u32::MAX);
    }
}

/// Starts `program` confined by `plan`, its standard input, output and error `stdio`.
///
/// The first child is made the way `posix_spawn` makes one — `clone(CLONE_VM | CLONE_VFORK)`
/// on a stack of its own, the parent's signals blocked meanwhile — so the parent's memory is
/// never copied (a `fork` of Craik cost a millisecond per command: its page tables copied,
/// then torn down at `exec`, and every page it wrote afterwards faulted in again). The calling
/// thread waits until that child has called `exec` or exited; the other threads go on, and the
/// children touch nothing of theirs: they only read `plan` and `program`, and run what
/// [`apply`] runs, which allocates nothing and takes no lock.
///
/// In the first child: every signal handler back to the default, `stdio` on 0, 1 and 2, the
/// working directory, the parent-death signal and parent check, the mount namespace. Then,
/// with a PID namespace ([`Plan::pid_ns`]; see the crate documentation), it starts the init,
/// which starts the program and reports; otherwise it goes on itself: a new session, an empty
/// signal mask, the rest of confinement, `execve`.
///
/// A refusal is [`SpawnError::Refused`]; an `exec`, `chdir` or descriptor failure
/// [`SpawnError::Start`] (every child has been reaped).
pub fn spawn(
    program: &Program,
    stdio: [std::os::fd::BorrowedFd<'_>; 3],
    plan: &Plan,
) -> Result<Started, SpawnError> {
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU32, Ordering};
    // Descriptors 0..=2 of the child are set by `dup2` from these: numbers ≥ 3 first, so no
    // target overwrites a source not yet copied.
    let high = |fd: std::os::fd::BorrowedFd<'_>| {
        rustix::io::fcntl_dupfd_cloexec(fd, 3).map_err(std::io::Error::from)
    };
    let sources = [high(stdio[0])?, high(stdio[1])?, high(stdio[2])?];
    let argv = nul_terminated(&program.argv);
    let envp = nul_terminated(&program.envp);
    let contain = plan.pid_ns != PidNs::Off;
    let init_stack = contain.then(Stack::new).transpose()?;
    let command_stack = contain.then(Stack::new).transpose()?;
    let handoff = Handoff {
        program,
        argv: &argv,
        envp: &envp,
        stdio: sources.each_ref().map(AsRawFd::as_raw_fd),
        plan,
        init_stack: init_stack.as_ref(),
        command_stack: command_stack.as_ref(),
        parent: AtomicI32::new(-1),
        user_entered: AtomicBool::new(false),
        mounts_done: AtomicBool::new(false),
        init_pid: AtomicI32::new(0),
        ready: AtomicU32::new(0),
        errno: AtomicI32::new(0),
        stage: AtomicU8::new(0),
        refused: AtomicBool::new(false),
        refusal: std::cell::UnsafeCell::new(None),
    };
    // No PID namespace for this process after all (`start_init` answers `None`): the first
    // child's path decides (it refuses or goes without one, as `plan.pid_ns` says).
    if contain
        && direct_init(plan)
        && let Some((pid, pidfd)) = start_init(&handoff, init_stack.as_ref())?
    {
        drop(sources);
        let pidfd = finish_direct(&handoff, pidfd)?;
        return Ok(Started {
            pid,
            pidfd,
            init: init_stack,
            waited: AtomicBool::new(false),
            kept: std::sync::Mutex::new(None),
        });
    }
    let stack = Stack::new()?;
    let mut pidfd: libc::c_int = -1;
    let pid = {
        let _blocked = SignalsBlocked::new();
        // SAFETY: `outer` runs on `stack` (mapped, with a guard page below it) and only
        // reads `handoff`, which outlives the call: with `CLONE_VFORK` this thread is
        // suspended until the child has called `execve` or `_exit` (and the child exits only
        // once the init it started is done with `handoff`). The children share this
        // process's memory; everything they run before the init's hand-over is allocation-
        // and lock-free (see [`apply`]), and every signal is blocked until they have reset
        // the handlers.
        #[allow(unsafe_code)]
        unsafe {
            libc::clone(
                outer,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
                std::ptr::from_ref(&handoff).cast_mut().cast(),
                std::ptr::from_mut(&mut pidfd),
            )
        }
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: with `CLONE_PIDFD` the kernel stored a new descriptor of the child here, owned
    // by nobody else.
    #[allow(unsafe_code)]
    let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) };
    drop(sources);
    let reap = |fd: &OwnedFd| {
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(fd.as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        );
    };
    let init_pid = handoff.init_pid.load(Ordering::SeqCst);
    // The init: this process's child (`CLONE_PARENT`), so its pid names it until it is
    // reaped here.
    let init = rustix::process::Pid::from_raw(init_pid);
    if init.is_some() {
        // The first child has exited (0) once the init is done with the handoff.
        reap(&pidfd);
    }
    if let Some(init) = init
        && handoff.ready.load(Ordering::SeqCst) == 0
    {
        // The first child ended before the init said it was done with `handoff` (killed from
        // outside): the init may still read it. Killed and reaped — with its namespace, the
        // program's process included — before `handoff` goes.
        let _ = rustix::process::kill_process(init, rustix::process::Signal::KILL);
        let _ = rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty());
        return Err(SpawnError::Start {
            what: "the init of the PID namespace ended before the program started",
            error: std::io::Error::from_raw_os_error(libc::ECHILD),
        });
    }
    // The child that failed has exited: reap what is left, then say what failed.
    let reap_rest = || match init {
        Some(init) => {
            let _ = rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty());
        }
        None => reap(&pidfd),
    };
    if let Some(error) = handoff_failure(&handoff, reap_rest) {
        return Err(error);
    }
    let Some(init) = init else {
        return Ok(Started {
            pid,
            pidfd,
            init: None,
            waited: AtomicBool::new(false),
            kept: std::sync::Mutex::new(None),
        });
    };
    match rustix::process::pidfd_open(init, rustix::process::PidfdFlags::empty()) {
        Ok(init_fd) => Ok(Started {
            pid: init_pid,
            pidfd: init_fd,
            init: init_stack,
            waited: AtomicBool::new(false),
            kept: std::sync::Mutex::new(None),
        }),
        Err(e) => {
            let _ = rustix::process::kill_process(init, rustix::process::Signal::KILL);
            let _ = rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty());
            Err(std::io::Error::from(e).into())
        }
    }
}

/// Whether [`spawn`] makes the init directly from the calling thread (`clone` with
/// `CLONE_NEWPID`, no first child): as root, where no user namespace is entered first (the
/// PID namespace must then be made inside it, by a child that has entered it).
fn direct_init(plan: &Plan) -> bool {
    let user = match &plan.mounts {
        Some(MountNs::Make(mounts)) => mounts.user.is_some(),
        Some(MountNs::Enter(namespace)) => namespace.user.is_some(),
        None => false,
    };
    !user && rustix::process::geteuid().is_root()
}

/// The errors of `clone(CLONE_NEWPID)` that mean "no PID namespace for this process" (no
/// `CAP_SYS_ADMIN`, a kernel without PID namespaces, the nesting limit): the first child's
/// path is taken instead, and decides as it always did.
fn no_pid_namespace(errno: i32) -> bool {
    matches!(
        errno,
        libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS
    )
}

/// Starts the init straight from the calling thread (issue 30 item 5, the cheaper path): `clone(CLONE_VM |
/// CLONE_NEWPID | CLONE_PIDFD)` on `init_stack`, then waits (a futex, every signal blocked)
/// until the init has started the program or failed, or has died. `None`: no PID namespace
/// can be made here ([`no_pid_namespace`]); nothing was started.
fn start_init(
    handoff: &Handoff<'_>,
    init_stack: Option<&Stack>,
) -> Result<Option<(i32, OwnedFd)>, SpawnError> {
    use std::sync::atomic::Ordering;
    let Some(init_stack) = init_stack else {
        return Ok(None);
    };
    // The init checks with this that Craik is still alive once its parent-death signal is
    // set (its parent, this thread, lies outside its namespace: `getppid` answers 0 there).
    // Its copy of the descriptor table holds it; this copy is closed when the init reports.
    let me = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(std::io::Error::from)?;
    handoff.parent.store(me.as_raw_fd(), Ordering::SeqCst);
    let mut pidfd: libc::c_int = -1;
    let _blocked = SignalsBlocked::new();
    // SAFETY: `init_direct` runs on `init_stack` (mapped, with a guard page below it), which
    // outlives it (`Started` keeps it until the init has been reaped; every early return
    // below reaps it first). Until it sets `ready` it reads `handoff`, which lives in the
    // caller's frame: this thread waits below for `ready` or the init's death and returns
    // only then; after `ready` the init touches only its own stack. It shares this
    // process's memory and thread-local storage; everything it runs is allocation- and
    // lock-free, and this thread makes only raw system calls while it waits (no `errno`).
    // Every signal is blocked, in this thread and (inherited) in the init.
    #[allow(unsafe_code)]
    let pid = unsafe {
        libc::clone(
            init_direct,
            init_stack.top(),
            libc::CLONE_VM | libc::CLONE_NEWPID | libc::CLONE_PIDFD | libc::SIGCHLD,
            std::ptr::from_ref(handoff).cast_mut().cast(),
            std::ptr::from_mut(&mut pidfd),
        )
    };
    if pid < 0 {
        let error = std::io::Error::last_os_error();
        handoff.parent.store(-1, Ordering::SeqCst);
        return match error.raw_os_error() {
            Some(errno) if no_pid_namespace(errno) => Ok(None),
            _ => Err(error.into()),
        };
    }
    // SAFETY: with `CLONE_PIDFD` the kernel stored a new descriptor of the child here, owned
    // by nobody else.
    #[allow(unsafe_code)]
    let pidfd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) };
    let slice = rustix::thread::futex::Timespec {
        tv_sec: 0,
        tv_nsec: 20_000_000,
    };
    while handoff.ready.load(Ordering::SeqCst) == 0 {
        let _ = rustix::thread::futex::wait(
            &handoff.ready,
            rustix::thread::futex::Flags::PRIVATE,
            0,
            Some(&slice),
        );
        // An init that died without a word (killed): `finish_direct` reaps it.
        if exited(pidfd.as_fd()) {
            break;
        }
    }
    drop(me);
    Ok(Some((pid, pidfd)))
}

/// Whether the child `pidfd` holds has exited (not reaped: `WNOWAIT`). A raw system call:
/// no `errno` is touched (the init may share this thread's).
fn exited(pidfd: rustix::fd::BorrowedFd<'_>) -> bool {
    use rustix::process::{WaitId, WaitIdOptions};
    matches!(
        rustix::process::waitid(
            WaitId::PidFd(pidfd),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ),
        Ok(Some(_)) | Err(_)
    )
}

/// After [`start_init`]: the init's pidfd when it has started the program, or — once it has
/// been reaped — why no program runs.
fn finish_direct(handoff: &Handoff<'_>, pidfd: OwnedFd) -> Result<OwnedFd, SpawnError> {
    use std::sync::atomic::Ordering;
    let reap = |fd: &OwnedFd| {
        let _ = rustix::process::waitid(
            rustix::process::WaitId::PidFd(fd.as_fd()),
            rustix::process::WaitIdOptions::EXITED,
        );
    };
    if handoff.ready.load(Ordering::SeqCst) == 0 {
        // Killed before it said it was done with `handoff`: reaped (its namespace, the
        // program's process included, is gone before its exit is reported) before
        // `handoff` goes.
        let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
        reap(&pidfd);
        return Err(SpawnError::Start {
            what: "the init of the PID namespace ended before the program started",
            error: std::io::Error::from_raw_os_error(libc::ECHILD),
        });
    }
    if let Some(error) = handoff_failure(handoff, || reap(&pidfd)) {
        return Err(error);
    }
    Ok(pidfd)
}

/// Why no program runs, when a child said so (a refusal, or a start failure), after `reap`
/// has reaped what is left; `None` when none did.
fn handoff_failure(handoff: &Handoff<'_>, reap: impl FnOnce()) -> Option<SpawnError> {
    use std::sync::atomic::Ordering;
    let refused = handoff.refused.load(Ordering::SeqCst);
    let errno = handoff.errno.load(Ordering::SeqCst);
    if !refused && errno == 0 {
        return None;
    }
    reap();
    if refused {
        // SAFETY: written once by the child that refused, which has exited (see
        // `Handoff::refuse`) and been reaped; nothing writes it any more.
        #[allow(unsafe_code)]
        let fail = unsafe { (*handoff.refusal.get()).take() };
        if let Some(fail) = fail {
            return Some(SpawnError::Refused(fail.refusal()));
        }
    }
    let what = match handoff.stage.load(Ordering::SeqCst) {
        STAGE_CHDIR => "cannot enter the working directory",
        STAGE_STDIO => "cannot set up standard input and output",
        _ => "cannot execute",
    };
    Some(SpawnError::Start {
        what,
        error: std::io::Error::from_raw_os_error(errno.max(1)),
    })
}

fn nul_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// A child's stack: an anonymous mapping with a `PROT_NONE` page below it (an overflow
/// faults instead of writing into the parent's memory). Its top 64 bytes are not stack: an
/// init records how its program ended there ([`Stack::slot`]).
#[derive(Debug)]
struct Stack {
    base: usize,
    len: usize,
}

/// The bytes at the top of a [`Stack`] kept for its slot.
const SLOT_BYTES: usize = 64;

impl Stack {
    fn new() -> std::io::Result<Self> {
        let page = 4096;
        let len = CHILD_STACK + page;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        #[allow(unsafe_code)]
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = Self {
            base: base as usize,
            len,
        };
        // SAFETY: the lowest page of the mapping made above.
        #[allow(unsafe_code)]
        if unsafe { libc::mprotect(base, page, libc::PROT_NONE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The highest address the stack uses (stacks grow down), 16-byte aligned, below the slot.
    fn top(&self) -> *mut libc::c_void {
        ((self.base + self.len - SLOT_BYTES) & !15) as *mut libc::c_void
    }

    /// Where the word at the top of the mapping lies: 4-byte aligned (page-aligned base,
    /// length a multiple of the page), above every stack frame ([`Stack::top`]).
    fn slot_at(&self) -> *const std::sync::atomic::AtomicU32 {
        (self.base + self.len - SLOT_BYTES) as *const std::sync::atomic::AtomicU32
    }

    /// The word at the top of the mapping, zero until written.
    fn slot(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: an aligned address inside the mapping, mapped for as long as `self` lives;
        // `AtomicU32` has no invalid bit pattern (the mapping starts zeroed).
        #[allow(unsafe_code)]
        unsafe {
            &*self.slot_at()
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; the child that used it has called `execve` or
        // exited (`Started` keeps an init's until it has been reaped).
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// Every signal blocked on the calling thread until dropped (no handler of the parent may
/// run in a child that shares its memory).
struct SignalsBlocked {
    old: libc::sigset_t,
}

impl SignalsBlocked {
    fn new() -> Self {
        // SAFETY: `sigfillset` initialises `all`; `pthread_sigmask` writes the old mask
        // into `old`, which zeroed is a valid `sigset_t` for.
        #[allow(unsafe_code)]
        unsafe {
            let mut all = std::mem::zeroed::<libc::sigset_t>();
            let mut old = std::mem::zeroed::<libc::sigset_t>();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            Self { old }
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        #[allow(unsafe_code)]
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// Has the process `command` starts killed (SIGKILL) when the thread that started it ends —
/// its parent dies — and refuses to start it when the parent is already gone by then. For a
/// program an adapter runs (an agent CLI): killed by Craik with its adapter, it goes too
/// (outside testing round r32b: a CLI outlived a Craik killed with SIGKILL, its key in its
/// environment). What that program starts in a new session of its own is not covered.
pub fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between `fork` and `exec`; it only makes the
    // `prctl` and `getppid` system calls (async-signal-safe), allocates nothing and takes no
    // lock.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Puts `SIGCHLD` back to its default disposition when Craik was started with it ignored
/// (a parent's `SIG_IGN` survives `exec`): ignored, the kernel reaps children itself and
/// `waitid` on a command answers `ECHILD` — found by outside testing: every command was then
/// recorded as not run though it had run. Called first thing in `main`.
pub fn default_child_signal() {
    let mut old = KernelSigaction::default();
    // SAFETY: `rt_sigaction` reads and writes only the `KernelSigaction` values given, of
    // the size given (the kernel's sigset of 8 bytes).
    #[allow(unsafe_code)]
    unsafe {
        if libc::syscall(
            libc::SYS_rt_sigaction,
            libc::SIGCHLD,
            std::ptr::null::<KernelSigaction>(),
            std::ptr::from_mut(&mut old),
            8_usize,
        ) == 0
            && old.handler == libc::SIG_IGN
        {
            libc::syscall(
                libc::SYS_rt_sigaction,
                libc::SIGCHLD,
                std::ptr::from_ref(&KernelSigaction::default()),
                std::ptr::null_mut::<KernelSigaction>(),
                8_usize,
            );
        }
    }
}

/// The kernel's `struct sigaction` (x86_64 and aarch64 alike: both have `sa_restorer`); the
/// default value is `SIG_DFL`, no flags, no mask.
#[repr(C)]
#[derive(Default)]
struct KernelSigaction {
    handler: libc::sighandler_t,
    flags: libc::c_ulong,
    restorer: usize,
    mask: u64,
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("craik-spawn knows the kernel's `struct sigaction` of x86_64 and aarch64 only");

/// What a child of [`spawn`] does first, whichever it is (the first child, or the init made
/// directly): every signal handler back to the default, `stdio` on 0, 1 and 2, the working
/// directory. A failure ends it ([`Handoff::failed`]).
fn prelude(handoff: &Handoff<'_>) {
    // SAFETY: plain system calls on this child with stack-held values: the kernel reads and
    // writes only the `KernelSigaction` given, of the size given.
    #[allow(unsafe_code)]
    unsafe {
        // Every disposition that is not the default goes back to it — the ignored ones too
        // (`SIGPIPE` in every Rust program, and glibc's own two, 32 and 33, which its
        // `sigaction` refuses to touch: hence the raw call). Past the last signal (64) the
        // call fails EINVAL; `SIGKILL` and `SIGSTOP` are refused and always default. Every
        // signal stays blocked (the parent blocked them for the `clone`): the init keeps them
        // so, the program's process unblocks them before `exec`.
        for signal in 1..=64_i64 {
            let mut old = KernelSigaction::default();
            let asked = libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                std::ptr::null::<KernelSigaction>(),
                std::ptr::from_mut(&mut old),
                8_usize,
            );
            if asked == 0 && old.handler != libc::SIG_DFL {
                libc::syscall(
                    libc::SYS_rt_sigaction,
                    signal,
                    std::ptr::from_ref(&KernelSigaction::default()),
                    std::ptr::null_mut::<KernelSigaction>(),
                    8_usize,
                );
            }
        }
    }
    for (target, source) in (0..).zip(handoff.stdio) {
        // SAFETY: `dup2` onto 0..=2 from descriptors ≥ 3 this child holds (its own copy of
        // the parent's table); the copy is not close-on-exec.
        #[allow(unsafe_code)]
        if unsafe { libc::dup2(source, target) } < 0 {
            handoff.failed(STAGE_STDIO, last_errno());
        }
    }
    if let Err(e) = rustix::process::chdir(handoff.program.cwd.as_c_str()) {
        handoff.failed(STAGE_CHDIR, e.raw_os_error());
    }
}

/// The first child of [`spawn`]: runs on its own stack in the parent's memory until it calls
/// `execve` (no PID namespace) or the init it started is done with the handoff.
extern "C" fn outer(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Handoff` of `spawn`, alive while this child runs (the parent
    // thread is suspended until it calls `execve` or `_exit`).
    #[allow(unsafe_code)]
    let handoff = unsafe { &*arg.cast::<Handoff<'_>>() };
    prelude(handoff);
    let plan = handoff.plan;
    if let Err(fail) = guard_parent(plan) {
        handoff.refuse(fail);
    }
    // With a PID namespace the init enters the mount namespace, after it has set its
    // namespace's `pid_max` through `/proc` (read-only in there); the PID namespace is made
    // inside the user namespace, so that is entered here — or, where this child makes its
    // own, made here with the mounts.
    let (mut user_entered, mut mounts_done) = (false, false);
    if let Some(init_stack) = handoff.init_stack {
        let first = match &plan.mounts {
            Some(MountNs::Make(made)) if made.user.is_some() => {
                mounts_done = true;
                mounts(plan, false)
            }
            Some(MountNs::Enter(namespace)) => match enter_user(namespace) {
                Ok(()) => {
                    user_entered = true;
                    Ok(())
                }
                Err(fail) if plan.mounts_required => Err(fail.in_stage(Stage::Mounts)),
                Err(fail) => {
                    // Nothing further to try: without the user namespace its mounts cannot
                    // be entered either.
                    fail.in_stage(Stage::Mounts).report(true);
                    mounts_done = true;
                    Ok(())
                }
            },
            _ => Ok(()),
        };
        if let Err(fail) = first {
            handoff.refuse(fail);
        }
        match unshare(rustix::thread::UnshareFlags::NEWPID) {
            Ok(()) => {
                handoff
                    .user_entered
                    .store(user_entered, std::sync::atomic::Ordering::SeqCst);
                handoff
                    .mounts_done
                    .store(mounts_done, std::sync::atomic::Ordering::SeqCst);
                contain(handoff, init_stack)
            }
            Err(e) if plan.pid_ns == PidNs::Required => handoff.refuse(
                Fail::os(
                    "a PID namespace needs root or the private user namespace",
                    e,
                )
                .in_stage(Stage::PidNamespace),
            ),
            // Optional: the program runs as this child, as without one.
            Err(_) => {}
        }
    }
    if !mounts_done && let Err(fail) = mounts(plan, user_entered) {
        handoff.refuse(fail);
    }
    if let Err(fail) = join_cgroup(plan) {
        handoff.refuse(fail);
    }
    let _ = rustix::process::setsid();
    unblock_signals();
    run_program(handoff, false)
}

/// Applies the rest of confinement to the calling child and executes the program; never
/// returns.
fn run_program(handoff: &Handoff<'_>, contained: bool) -> ! {
    if let Err(fail) = confine(handoff.plan, contained) {
        handoff.refuse(fail);
    }
    // SAFETY: `argv` and `envp` are NUL-terminated arrays of live NUL-terminated strings.
    #[allow(unsafe_code)]
    unsafe {
        libc::execve(
            handoff.program.path.as_ptr(),
            handoff.argv.as_ptr(),
            handoff.envp.as_ptr(),
        );
    }
    handoff.failed(STAGE_EXEC, last_errno())
}

/// An empty signal mask for the calling thread (the program starts with none blocked).
fn unblock_signals() {
    // SAFETY: `sigemptyset` initialises `empty`; `pthread_sigmask` only reads it.
    #[allow(unsafe_code)]
    unsafe {
        let mut empty = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}

/// In the first child, after `unshare(CLONE_NEWPID)`: starts the init (the namespace's pid 1,
/// this process's sibling: `CLONE_PARENT`), waits until it has started the program or failed,
/// and exits. The kernel writes the init's pid into the handoff before `clone` returns
/// (`CLONE_PARENT_SETTID`), so the parent finds the init even if this child is killed.
fn contain(handoff: &Handoff<'_>, init_stack: &Stack) -> ! {
    use std::sync::atomic::Ordering;
    // The init checks with this that Craik is still alive once its parent-death signal is set
    // (its parent is Craik, but outside its namespace: `getppid` answers 0 there).
    let Some(parent) = i32::try_from(handoff.plan.parent)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        handoff.refuse(Fail::new("the parent exited before the program started"));
    };
    match rustix::process::pidfd_open(parent, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => handoff
            .parent
            .store(std::os::fd::IntoRawFd::into_raw_fd(fd), Ordering::SeqCst),
        Err(e) => handoff.refuse(Fail::os("the parent exited before the program started", e)),
    }
    // SAFETY: `init` runs on `init_stack`, which outlives it (the parent keeps it until the
    // init has been reaped, see `Started`'s `Drop`), in this process's memory; until it sets
    // `ready` it reads `handoff` (alive: this child waits for `ready` before it exits, and
    // the parent kills and reaps an init that never set it before `handoff` goes); after,
    // only its own stack. Every signal is blocked in it (inherited).
    #[allow(unsafe_code)]
    let pid = unsafe {
        libc::clone(
            init,
            init_stack.top(),
            libc::CLONE_VM | libc::CLONE_PARENT | libc::CLONE_PARENT_SETTID | libc::SIGCHLD,
            std::ptr::from_ref(handoff).cast_mut().cast(),
            handoff.init_pid.as_ptr(),
        )
    };
    if pid <= 0 {
        handoff.refuse(
            Fail::os(
                "cannot start the init of the PID namespace",
                rustix::io::Errno::from_raw_os_error(last_errno()),
            )
            .in_stage(Stage::PidNamespace),
        );
    }
    let init_fd = rustix::process::Pid::from_raw(pid)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    let slice = rustix::thread::futex::Timespec {
        tv_sec: 0,
        tv_nsec: 20_000_000,
    };
    while handoff.ready.load(Ordering::SeqCst) == 0 {
        let _ = rustix::thread::futex::wait(
            &handoff.ready,
            rustix::thread::futex::Flags::PRIVATE,
            0,
            Some(&slice),
        );
        // An init that died without a word (killed): the parent finds it by its pid.
        if init_fd.as_ref().is_some_and(|fd| readable(fd.as_fd())) {
            break;
        }
    }
    // SAFETY: ends this child at once; nothing of the parent's runs.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(0)
    }
}

/// The init made directly by [`start_init`] (as root): pid 1 of its new PID namespace, the
/// calling Craik thread's child. It does what the first child does first ([`prelude`]),
/// then everything [`init`] does — its parent-death signal and parent check (the pidfd
/// `start_init` opened), the namespace's `pid_max`, the mounts, the program.
extern "C" fn init_direct(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Handoff` of `spawn`, alive until this process sets `ready`
    // (`start_init` waits for it, or for this process's death).
    #[allow(unsafe_code)]
    let handoff = unsafe { &*arg.cast::<Handoff<'_>>() };
    prelude(handoff);
    init(arg)
}

/// Moves the calling process into the command's cgroup ([`Plan::cgroup_procs`]), if it has
/// one: `0` written to its `cgroup.procs` names the writer. Its children are born there.
fn join_cgroup(plan: &Plan) -> Result<(), Fail<'static>> {
    match &plan.cgroup_procs {
        Some(procs) => rustix::io::write(procs, b"0").map(drop).map_err(|e| {
            Fail::os("cannot enter the command's cgroup", e).in_stage(Stage::Privileges)
        }),
        None => Ok(()),
    }
}

/// Whether `fd` is readable now (a pidfd: its process has exited).
fn readable(fd: rustix::fd::BorrowedFd<'_>) -> bool {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live `pollfd`, a zero timeout.
    #[allow(unsafe_code)]
    let n = unsafe { libc::poll(&mut poll, 1, 0) };
    n > 0 && poll.revents != 0
}

/// Sets this PID namespace's `pid_max` (Linux ≥ 6.14 keeps one per namespace, and the init
/// holds `CAP_SYS_ADMIN` over it): at most `limit - 1` processes can exist in it at once.
/// Written through the host's `/proc` before the read-only mounts are entered; best effort (a
/// kernel that refuses leaves the namespace unbounded, as before). The parent asks for it only
/// on kernels that keep the value per namespace: on older ones the write would set the whole
/// machine's.
fn limit_pids(limit: u32) {
    let mut line = Line::new();
    line.number(i32::try_from(limit).unwrap_or(i32::MAX));
    line.push(b"\n");
    let _ = write_file(c"/proc/sys/kernel/pid_max", line.bytes());
}

/// The signals the init passes on to the program (the rest it leaves pending, blocked).
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// The init: pid 1 of the command's PID namespace, in Craik's memory on a stack of its own.
///
/// Until it sets `ready` (the first child waits, and the parent thread with it) it may use
/// the handoff and `libc` calls that set `errno` (the thread-local `errno` it shares is the
/// suspended parent thread's). After that it runs beside Craik's threads, so it touches
/// nothing but its own stack and makes only `rustix` calls (raw system calls, no `errno`).
extern "C" fn init(arg: *mut libc::c_void) -> libc::c_int {
    use std::sync::atomic::Ordering;
    // SAFETY: `arg` is the `Handoff` of `spawn`, alive until this process sets `ready`.
    #[allow(unsafe_code)]
    let handoff = unsafe { &*arg.cast::<Handoff<'_>>() };
    let _ = rustix::process::setsid();
    if let Err(e) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        handoff.refuse(Fail::os("cannot set the parent-death signal", e));
    }
    let parent = handoff.parent.load(Ordering::SeqCst);
    // SAFETY: the pidfd the first child opened; this process's copy of its table holds it.
    #[allow(unsafe_code)]
    let parent_gone = parent < 0 || readable(unsafe { rustix::fd::BorrowedFd::borrow_raw(parent) });
    if parent_gone {
        handoff.refuse(Fail::new("the parent exited before the program started"));
    }
    // SAFETY: `close` of the descriptor just checked; nothing else uses it.
    #[allow(unsafe_code)]
    unsafe {
        libc::close(parent);
    }
    if let Err(fail) = join_cgroup(handoff.plan) {
        handoff.refuse(fail);
    }
    if let Some(limit) = handoff.plan.pid_max {
        limit_pids(limit);
    }
    if !handoff.mounts_done.load(Ordering::SeqCst)
        && let Err(fail) = mounts(handoff.plan, handoff.user_entered.load(Ordering::SeqCst))
    {
        handoff.refuse(fail);
    }
    let Some(stack) = handoff.init_stack else {
        handoff.refuse(Fail::new("the init has no stack").in_stage(Stage::PidNamespace));
    };
    // The mapping, not the `Stack` (which lives in the parent's frame until it moves into
    // `Started`): an address that stays valid until this process has been reaped.
    let slot = stack.slot_at();
    // Signals reach the init as readable records (they are all blocked): a child's exit, and
    // the ones it forwards.
    // SAFETY: `sigemptyset`/`sigaddset` initialise `set`; `signalfd` only reads it.
    #[allow(unsafe_code)]
    let signals = unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        for signal in FORWARDED {
            libc::sigaddset(&mut set, signal);
        }
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC)
    };
    if signals < 0 {
        handoff.refuse(
            Fail::os(
                "the init cannot receive signals",
                rustix::io::Errno::from_raw_os_error(last_errno()),
            )
            .in_stage(Stage::PidNamespace),
        );
    }
    let Some(command_stack) = handoff.command_stack else {
        handoff.refuse(Fail::new("the program has no stack").in_stage(Stage::PidNamespace));
    };
    // SAFETY: `command` runs on `command_stack` in this process's memory and only reads
    // `handoff`; with `CLONE_VFORK` this process is suspended until it has called `execve` or
    // exited, so both stay alive.
    #[allow(unsafe_code)]
    let program = unsafe {
        libc::clone(
            command,
            command_stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_ref(handoff).cast_mut().cast(),
        )
    };
    if program <= 0 {
        handoff.refuse(
            Fail::os(
                "cannot start the program in its PID namespace",
                rustix::io::Errno::from_raw_os_error(last_errno()),
            )
            .in_stage(Stage::PidNamespace),
        );
    }
    let Some(program) = rustix::process::Pid::from_raw(program) else {
        handoff.refuse(Fail::new("no program pid").in_stage(Stage::PidNamespace));
    };
    if handoff.refused.load(Ordering::SeqCst) || handoff.errno.load(Ordering::SeqCst) != 0 {
        // The program's process refused or could not `exec`, and has exited: reaped, and
        // the parent reads why.
        let _ = rustix::process::waitpid(Some(program), rustix::process::WaitOptions::empty());
        handoff.wake();
        // SAFETY: ends the init at once.
        #[allow(unsafe_code)]
        unsafe {
            libc::_exit(REFUSED_EXIT)
        }
    }
    // Nothing of Craik's stays open here (the command's pipes among them): only `signals`.
    // SAFETY: plain system calls on this process's own descriptor table.
    #[allow(unsafe_code)]
    unsafe {
        if signals > 0 {
            libc::syscall(libc::SYS_close_range, 0_u32, (signals - 1) as u32, 0_u32);
        }
        libc::syscall(libc::SYS_close_range, (signals + 1) as u32, u32::MAX, 0_u32);
    }
    // SAFETY: the descriptor made above, owned by this process from here on.
    #[allow(unsafe_code)]
    let signals = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(signals) };
    handoff.wake();
    // INVARIANT: from here on, no `handoff`, no `libc` call that may set `errno`.
    let status = match reap_until(program, &signals) {
        Some(ended) => {
            // SAFETY: `slot` lies in this process's own stack mapping, which `Started` keeps
            // mapped until this process has been reaped (see its `Drop`).
            #[allow(unsafe_code)]
            unsafe {
                (*slot).store(ended.encode(), Ordering::SeqCst);
            }
            ended.exit_status()
        }
        None => 255,
    };
    // SAFETY: ends the init (`exit_group`, which cannot fail: no `errno`); the kernel then
    // kills every process left in its namespace and reaps them before the init's own exit
    // is reported.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(status)
    }
}

/// The init's loop: reaps every child as it exits (orphans are re-parented to pid 1) and
/// passes [`FORWARDED`] signals on to the program, until the program itself has exited: how
/// it ended (`None`: its status was lost, which cannot happen while it is a child).
fn reap_until(program: rustix::process::Pid, signals: &OwnedFd) -> Option<Ended> {
    use rustix::process::{Signal, WaitOptions};
    let mut info = [0u8; 128];
    loop {
        let mut blocking = false;
        loop {
            match rustix::process::waitpid(None, WaitOptions::NOHANG) {
                Ok(Some((pid, status))) if pid == program => {
                    if let Some(ended) = Ended::of(status) {
                        return Some(ended);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        match rustix::io::read(signals, &mut info) {
            Ok(n) if n >= 4 => {
                let signo = info
                    .first_chunk::<4>()
                    .map_or(0, |b| u32::from_ne_bytes(*b));
                let signal = match i32::try_from(signo).unwrap_or(0) {
                    libc::SIGTERM => Some(Signal::TERM),
                    libc::SIGINT => Some(Signal::INT),
                    libc::SIGHUP => Some(Signal::HUP),
                    libc::SIGQUIT => Some(Signal::QUIT),
                    _ => None,
                };
                if let Some(signal) = signal {
                    let _ = rustix::process::kill_process(program, signal);
                }
            }
            Ok(_) | Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
            // No signal records: wait for a child instead (reaping still goes on).
            Err(_) => blocking = true,
        }
        if blocking {
            match rustix::process::waitpid(None, WaitOptions::empty()) {
                Ok(Some((pid, status))) if pid == program => {
                    if let Some(ended) = Ended::of(status) {
                        return Some(ended);
                    }
                }
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
    }
}

/// The program's process in a PID namespace: the init's `vfork` child (pid 2 there), in
/// Craik's memory until `execve`.
extern "C" fn command(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Handoff` of `spawn`, alive while this child runs (the init, and
    // with it the first child and the parent thread, wait until it calls `execve` or exits).
    #[allow(unsafe_code)]
    let handoff = unsafe { &*arg.cast::<Handoff<'_>>() };
    unblock_signals();
    run_program(handoff, true)
}

/// Applies `plan` to the calling process (in a child after `fork`, or in a process of its own
/// such as the probe): a new session, [`begin`]'s steps, then [`confine`]'s. See the crate
/// documentation for the steps.
pub fn apply(plan: &Plan) -> Result<(), Fail<'_>> {
    let _ = rustix::process::setsid();
    begin(plan)?;
    confine(plan, false)
}

/// Steps 1 and 2 but the session: the parent-death signal, the parent check, the mount
/// namespace.
fn begin(plan: &Plan) -> Result<(), Fail<'_>> {
    guard_parent(plan)?;
    mounts(plan, false)
}

/// The parent-death signal, then the check that the parent is still the planner.
fn guard_parent(plan: &Plan) -> Result<(), Fail<'_>> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .map_err(|e| Fail::os("cannot set the parent-death signal", e))?;
    let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    if u32::try_from(parent).ok() != Some(plan.parent) {
        return Err(Fail::new("the parent exited before the program started"));
    }
    Ok(())
}

/// Step 2 (`user_entered`: the user namespace of a [`MountNs::Enter`] already is); a failure
/// refuses where the mounts are required, and is a warning on standard error otherwise.
fn mounts(plan: &Plan, user_entered: bool) -> Result<(), Fail<'_>> {
    let entered = plan.mounts.as_ref().map(|how| match how {
        MountNs::Make(mounts) => private_mounts(mounts),
        MountNs::Enter(namespace) => enter(namespace, !user_entered),
    });
    if let Some(Err(fail)) = entered {
        let fail = fail.in_stage(Stage::Mounts);
        if plan.mounts_required {
            return Err(fail);
        }
        fail.report(true);
    }
    Ok(())
}

/// Steps 3 to 6: privileges, limits (the process limit only when `contained`), Landlock,
/// seccomp, descriptors.
fn confine(plan: &Plan, contained: bool) -> Result<(), Fail<'_>> {
    drop_privileges().map_err(|f| f.in_stage(Stage::Privileges))?;
    let processes = plan.process_limit.filter(|_| contained);
    limit_resources(plan.file_size_limit, processes).map_err(|f| f.in_stage(Stage::Privileges))?;
    if let Some(landlock) = &plan.landlock {
        restrict(landlock).map_err(|f| f.in_stage(Stage::Landlock))?;
    }
    for program in plan.filters {
        install_filter(program).map_err(|f| f.in_stage(Stage::Seccomp))?;
    }
    close_inherited().map_err(|f| f.in_stage(Stage::Descriptors))
}

#[expect(
    deprecated,
    reason = "`unshare` is deprecated for CLONE_FILES sharing hazards; only NEWNS, NEWUSER and NEWPID are passed, in a child with a descriptor table of its own"
)]
fn unshare(flags: rustix::thread::UnshareFlags) -> rustix::io::Result<()> {
    rustix::thread::unshare(flags)
}

fn write_file<'a>(path: &'a CStr, content: &[u8]) -> Result<(), Fail<'a>> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| Fail::os("opening", e).at(path))?;
    let written = rustix::io::write(&fd, content).map_err(|e| Fail::os("writing", e).at(path))?;
    if written != content.len() {
        return Err(Fail::new("a short write to").at(path));
    }
    Ok(())
}

/// Enters the private mount namespace `mounts` describes (step 2 alone: for the probe).
pub fn private_mounts(mounts: &Mounts) -> Result<(), Fail<'_>> {
    use rustix::thread::UnshareFlags;
    match &mounts.user {
        None => {
            unshare(UnshareFlags::NEWNS).map_err(|e| Fail::os("a private mount namespace", e))?
        }
        Some(maps) => {
            unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS).map_err(|e| {
                Fail::os(
                    "a private mount namespace needs root or unprivileged user namespaces",
                    e,
                )
            })?;
            // Craik is not dumpable (`harden_self`), and a child inherits that: its
            // `/proc/self` files then belong to root and the maps below cannot be written
            // (EACCES; found by outside testing: every unprivileged run went without private
            // mounts). The child becomes dumpable for these three writes and not again: the
            // program's `exec` decides for itself.
            //
            // A child of [`spawn`] shares Craik's memory, and dumpability belongs to the
            // memory: Craik itself is dumpable for these three writes (a few microseconds).
            // What that window opens is `ptrace`-class access to Craik for a process of the
            // same user outside every sandbox — which could read the key file anyway; every
            // confined process is kept off by its seccomp filter (`ptrace`, `process_vm_*`,
            // `pidfd_getfd`) and by Landlock (other processes' `/proc` entries, and a domain
            // cannot trace outside itself). Whatever it was is restored right after, even
            // when a write fails.
            let before =
                rustix::process::dumpable_behavior().map_err(|e| Fail::os("PR_GET_DUMPABLE", e))?;
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::Dumpable)
                .map_err(|e| Fail::os("PR_SET_DUMPABLE", e))?;
            let written = write_file(c"/proc/self/setgroups", b"deny")
                .and_then(|()| write_file(c"/proc/self/uid_map", &maps.uid_map))
                .and_then(|()| write_file(c"/proc/self/gid_map", &maps.gid_map));
            rustix::process::set_dumpable_behavior(before)
                .map_err(|e| Fail::os("PR_SET_DUMPABLE", e))?;
            written?;
        }
    }
    match &mounts.how {
        ReadOnly::Recursive => {
            set_mount_attr(
                c"/",
                true,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
                0,
                Some(MS_PRIVATE),
            )
            .map_err(|e| Fail::os("making every mount read-only", e))?;
            for dir in &mounts.binds {
                rustix::mount::mount_bind(dir.as_c_str(), dir.as_c_str())
                    .map_err(|e| Fail::os("bind-mounting", e).at(dir))?;
                set_mount_attr(
                    dir,
                    false,
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    MOUNT_ATTR_RDONLY,
                    None,
                )
                .map_err(|e| Fail::os("making a write root writable", e).at(dir))?;
            }
        }
        ReadOnly::Remounts(remounts) => {
            rustix::mount::mount_change(
                c"/",
                MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
            )
            .map_err(|e| Fail::os("making mounts private", e))?;
            for dir in &mounts.binds {
                rustix::mount::mount_bind(dir.as_c_str(), dir.as_c_str())
                    .map_err(|e| Fail::os("bind-mounting", e).at(dir))?;
            }
            for remount in remounts {
                let flags = remount.flags | MountFlags::BIND;
                match rustix::mount::mount_remount(remount.point.as_c_str(), flags, c"") {
                    Err(e) if !remount.may_fail => {
                        return Err(Fail::os("remounting read-only", e).at(&remount.point));
                    }
                    _ => {}
                }
            }
        }
    }
    // The working directory still refers to the mount it was entered through (now
    // read-only); entering it again by path lands on the bind mount.
    let mut buf = [0u8; 4096];
    reenter(current_dir(&mut buf)?)
}

/// The working directory's path, in `buf` (no allocation).
fn current_dir(buf: &mut [u8; 4096]) -> Result<&CStr, Fail<'static>> {
    // SAFETY: `getcwd` writes at most `buf.len()` bytes, NUL included, into the buffer.
    #[allow(unsafe_code)]
    let got = unsafe { libc::getcwd(buf.as_mut_ptr().cast(), buf.len()) };
    if got.is_null() {
        return Err(Fail::new("the working directory is unknown or too long"));
    }
    CStr::from_bytes_until_nul(buf)
        .map_err(|_| Fail::new("the working directory is unknown or too long"))
}

fn reenter(cwd: &CStr) -> Result<(), Fail<'static>> {
    rustix::process::chdir(cwd).map_err(|e| Fail::os("re-entering the working directory", e))
}

/// Enters `namespace` (its user namespace first, when it has one): the calling process then
/// sees exactly the mounts [`private_mounts`] made there. `setns` puts the working directory
/// at the namespace's root, so it is entered again by the path it had.
fn enter(namespace: &Namespace, with_user: bool) -> Result<(), Fail<'static>> {
    let mut buf = [0u8; 4096];
    let cwd = current_dir(&mut buf)?;
    if with_user {
        enter_user(namespace)?;
    }
    join(
        &namespace.mnt,
        libc::CLONE_NEWNS,
        "entering the private mount namespace",
    )?;
    reenter(cwd)
}

/// `setns` into the namespace `fd` holds.
fn join(fd: &OwnedFd, kind: libc::c_int, what: &'static str) -> Result<(), Fail<'static>> {
    // SAFETY: `setns` on a namespace descriptor this process holds open.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::setns(fd.as_raw_fd(), kind) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Fail::os(
            what,
            rustix::io::Errno::from_raw_os_error(last_errno()),
        ))
    }
}

/// Enters `namespace`'s user namespace, if it has one (the mount namespace is entered later).
fn enter_user(namespace: &Namespace) -> Result<(), Fail<'static>> {
    match &namespace.user {
        Some(user) => join(user, libc::CLONE_NEWUSER, "entering the user namespace"),
        None => Ok(()),
    }
}

/// What the child of [`make_namespace`] hands back.
struct Maker<'a> {
    mounts: &'a Mounts,
    user: std::sync::atomic::AtomicI32,
    mnt: std::sync::atomic::AtomicI32,
    errno: std::sync::atomic::AtomicI32,
}

/// Makes the private mount namespace `mounts` describes once, for any number of children to
/// enter ([`MountNs::Enter`]). A child sharing this process's memory and descriptor table
/// (`CLONE_VM | CLONE_VFORK | CLONE_FILES`, every signal blocked) runs [`private_mounts`],
/// opens its own `/proc/self/ns/{user,mnt}` close-on-exec — descriptors that land in this
/// process's table — and exits; the namespace lives on while they are open. `Err` when any
/// step failed (the child's errno): a caller then lets each child make its own, which fails
/// the same way and says why.
pub fn make_namespace(mounts: &Mounts) -> std::io::Result<Namespace> {
    use std::sync::atomic::{AtomicI32, Ordering};
    let maker = Maker {
        mounts,
        user: AtomicI32::new(-1),
        mnt: AtomicI32::new(-1),
        errno: AtomicI32::new(0),
    };
    let stack = Stack::new()?;
    let pid = {
        let _blocked = SignalsBlocked::new();
        // SAFETY: `make` runs on `stack` and only reads and writes `maker`, which outlives
        // the call (`CLONE_VFORK`: this thread waits until the child has exited). What it
        // runs allocates nothing and takes no lock; every signal stays blocked in it.
        #[allow(unsafe_code)]
        unsafe {
            libc::clone(
                make,
                stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
                std::ptr::from_ref(&maker).cast_mut().cast(),
            )
        }
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Reaped here; if another thread reaped it first (`ECHILD`) the answer is the same.
    let _ = rustix::process::waitpid(
        rustix::process::Pid::from_raw(pid),
        rustix::process::WaitOptions::empty(),
    );
    let owned = |fd: i32| {
        // SAFETY: a descriptor the child opened in this process's table and nobody else
        // owns.
        #[allow(unsafe_code)]
        (fd >= 0).then(|| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    };
    let user = owned(maker.user.load(Ordering::SeqCst));
    let mnt = owned(maker.mnt.load(Ordering::SeqCst));
    let errno = maker.errno.load(Ordering::SeqCst);
    match mnt {
        Some(mnt) if errno == 0 && user.is_some() == mounts.user.is_some() => {
            Ok(Namespace { user, mnt })
        }
        _ => Err(std::io::Error::from_raw_os_error(errno.max(1))),
    }
}

/// The child of [`make_namespace`].
extern "C" fn make(arg: *mut libc::c_void) -> libc::c_int {
    use std::os::fd::IntoRawFd;
    use std::sync::atomic::Ordering;
    // SAFETY: `arg` is the `Maker` of `make_namespace`, alive while this child runs.
    #[allow(unsafe_code)]
    let maker = unsafe { &*arg.cast::<Maker<'_>>() };
    let open = |path: &CStr| {
        rustix::fs::open(
            path,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map(IntoRawFd::into_raw_fd)
    };
    let done = match private_mounts(maker.mounts) {
        Err(fail) => Err(fail.errno.unwrap_or(libc::EPERM)),
        Ok(()) => {
            let user = if maker.mounts.user.is_some() {
                open(c"/proc/self/ns/user").map(|fd| maker.user.store(fd, Ordering::SeqCst))
            } else {
                Ok(())
            };
            user.and_then(|()| open(c"/proc/self/ns/mnt"))
                .map(|fd| maker.mnt.store(fd, Ordering::SeqCst))
                .map_err(rustix::io::Errno::raw_os_error)
        }
    };
    if let Err(errno) = done {
        maker.errno.store(errno.max(1), Ordering::SeqCst);
    }
    // SAFETY: ends the child at once; nothing of the parent's runs.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(0)
    }
}

// `linux/mount.h`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MS_PRIVATE: u64 = 1 << 18;
const AT_RECURSIVE: u32 = 0x8000;

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(AT_FDCWD, path, [AT_RECURSIVE], {set, clr, propagation})`.
fn set_mount_attr(
    path: &CStr,
    recursive: bool,
    set: u64,
    clear: u64,
    propagation: Option<u64>,
) -> Result<(), rustix::io::Errno> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: propagation.unwrap_or(0),
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: `path` is a live NUL-terminated string and `attr` a live `struct mount_attr`
    // whose size is passed; the kernel only reads both during the call.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            std::ptr::from_ref(&attr),
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(rustix::io::Errno::from_raw_os_error(last_errno()))
    }
}

/// Whether this kernel has `mount_setattr(2)` (Linux ≥ 5.12); asked once by the parent.
pub fn has_mount_setattr() -> bool {
    // An invalid call: ENOSYS where the call does not exist, another error where it does.
    // SAFETY: a null path with an invalid descriptor is refused before anything is read.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            -1,
            std::ptr::null::<libc::c_char>(),
            0,
            std::ptr::null::<MountAttr>(),
            0,
        )
    };
    rc != 0 && last_errno() != libc::ENOSYS
}

fn drop_privileges() -> Result<(), Fail<'static>> {
    let had = rustix::thread::capabilities(None).map_err(|e| Fail::os("capget", e))?;
    let bounding = had.effective.contains(CapabilitySet::SETPCAP);
    if bounding {
        // Root keeps no capability across `exec` (NOROOT), and cannot undo it.
        let bits = CapabilitiesSecureBits::NO_ROOT
            | CapabilitiesSecureBits::NO_ROOT_LOCKED
            | CapabilitiesSecureBits::NO_SETUID_FIXUP
            | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
            | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED;
        rustix::thread::set_capabilities_secure_bits(bits)
            .map_err(|e| Fail::os("securebits", e))?;
        // Each drop is checked by its own result: past the kernel's last capability the call
        // answers EINVAL and the loop ends; any other failure refuses.
        for n in 0..=LAST_CAP {
            match rustix::thread::remove_capability_from_bounding_set(cap(n)) {
                Ok(()) => {}
                Err(rustix::io::Errno::INVAL) => break,
                Err(e) => return Err(Fail::os("dropping a bounding capability", e)),
            }
        }
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(|e| Fail::os("capset", e))?;
    rustix::thread::set_no_new_privs(true).map_err(|e| Fail::os("no_new_privs", e))?;
    // Checked, not assumed. The ambient set needs no check of its own: the kernel keeps it a
    // subset of permitted ∩ inheritable, both checked empty here (and it was cleared above).
    let now = rustix::thread::capabilities(None).map_err(|e| Fail::os("capget", e))?;
    if !now.effective.is_empty() || !now.permitted.is_empty() || !now.inheritable.is_empty() {
        return Err(Fail::new("capabilities left after dropping them"));
    }
    if !rustix::thread::no_new_privs().map_err(|e| Fail::os("no_new_privs", e))? {
        return Err(Fail::new("no_new_privs is not set"));
    }
    Ok(())
}

/// `RLIMIT_CORE` 0 and, when given, `RLIMIT_FSIZE` and `RLIMIT_NPROC` (only ever lowered: a
/// limit already below stays; without privilege a hard limit cannot be raised again).
fn limit_resources(file_size: Option<u64>, processes: Option<u64>) -> Result<(), Fail<'static>> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let lower = |resource: Resource, to: u64| {
        let now = getrlimit(resource);
        let value = now.maximum.map_or(to, |max| max.min(to));
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )
    };
    lower(Resource::Core, 0).map_err(|e| Fail::os("RLIMIT_CORE", e))?;
    if let Some(limit) = file_size {
        lower(Resource::Fsize, limit).map_err(|e| Fail::os("RLIMIT_FSIZE", e))?;
    }
    if let Some(limit) = processes {
        lower(Resource::Nproc, limit).map_err(|e| Fail::os("RLIMIT_NPROC", e))?;
    }
    Ok(())
}

fn cap(n: u32) -> CapabilitySet {
    CapabilitySet::from_bits_retain(1_u64 << n)
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;

fn restrict(landlock: &Landlock) -> Result<(), Fail<'static>> {
    use rustix::fs::{Mode, OFlags};
    let ruleset = landlock.ruleset.as_raw_fd();
    // `/proc/self` is resolved to `/proc/<this pid>` (the program keeps the pid across exec).
    // Left out if it cannot be opened: less access, never more.
    if let Ok(own) = rustix::fs::open(
        c"/proc/self",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let attr = PathBeneath {
            allowed_access: landlock.own_proc_access,
            parent_fd: own.as_raw_fd(),
        };
        // SAFETY: `attr` is a live, correctly laid out `landlock_path_beneath_attr`; the
        // kernel only reads it during the call.
        #[allow(unsafe_code)]
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset,
                LANDLOCK_RULE_PATH_BENEATH,
                std::ptr::from_ref(&attr),
                0,
            )
        };
        if rc != 0 {
            return Err(Fail::os(
                "landlock_add_rule /proc/self",
                rustix::io::Errno::from_raw_os_error(last_errno()),
            ));
        }
    }
    // SAFETY: a plain system call on a descriptor this plan owns.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0) };
    if rc != 0 {
        return Err(Fail::os(
            "Landlock could not be applied",
            rustix::io::Errno::from_raw_os_error(last_errno()),
        ));
    }
    Ok(())
}

/// Adds a path-beneath rule to a Landlock ruleset (`landlock_add_rule`): `parent` (an
/// `O_PATH` descriptor Craik opened without following a link) gets `access`, which must be a
/// subset of what the ruleset handles. Craik's own call rather than the `landlock` crate's,
/// which `fstat`s every rule's descriptor again to tell files from directories (Craik knows).
pub fn add_path_rule(
    ruleset: std::os::fd::BorrowedFd<'_>,
    parent: std::os::fd::BorrowedFd<'_>,
    access: u64,
) -> std::io::Result<()> {
    let attr = PathBeneath {
        allowed_access: access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: `attr` is a live, correctly laid out `landlock_path_beneath_attr`; the kernel
    // only reads it during the call; both descriptors are borrowed for the call.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            std::ptr::from_ref(&attr),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The Landlock ABI the running kernel offers, or `None` where it has none.
pub fn landlock_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with a null attribute pointer and size 0, the version query reads nothing.
    #[allow(unsafe_code)]
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0_usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(v).ok().filter(|v| *v > 0)
}

/// User and system CPU time of this process and its waited-for children, in µs (for the
/// benchmarks: steadier than wall time on a busy machine).
pub fn cpu_time_us() -> f64 {
    let usage = |who| {
        let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `getrusage` fills the `rusage` it is given; zeroed is a valid `rusage`.
        #[allow(unsafe_code)]
        let u = unsafe {
            libc::getrusage(who, u.as_mut_ptr());
            u.assume_init()
        };
        let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    usage(libc::RUSAGE_SELF) + usage(libc::RUSAGE_CHILDREN)
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn install_filter(program: &[Insn]) -> Result<(), Fail<'static>> {
    let len = u16::try_from(program.len())
        .map_err(|_| Fail::new("seccomp: a filter longer than 65535 instructions"))?;
    if len == 0 {
        return Err(Fail::new("seccomp: an empty filter"));
    }
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
    };
    // SAFETY: `prog` points at `len` live instructions laid out as `struct sock_filter`
    // ([`Insn`] is `repr(C)` with the same fields); the kernel copies them during the call.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            std::ptr::from_ref(&prog),
        )
    };
    if rc != 0 {
        return Err(Fail::os(
            "seccomp",
            rustix::io::Errno::from_raw_os_error(last_errno()),
        ));
    }
    Ok(())
}

/// Marks every descriptor above 2 close-on-exec (`close_range`, or one by one up to the limit
/// on kernels before 5.11).
fn close_inherited() -> Result<(), Fail<'static>> {
    // SAFETY: a plain system call; it only sets flags on this process's descriptors.
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3_u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(1 << 20)
        .min(1 << 20);
    for fd in 3..limit {
        let Ok(fd) = i32::try_from(fd) else { break };
        // SAFETY: `F_SETFD` on a number that may not be open only fails with `EBADF`.
        #[allow(unsafe_code)]
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_line_names_what_where_and_the_errno() {
        let fail = Fail::os("remounting read-only", rustix::io::Errno::ACCESS).at(c"/a b");
        assert_eq!(fail.text(), "remounting read-only `/a b`: os error 13");
        assert_eq!(Fail::new("x").text(), "x");
        let mut line = Line::new();
        line.number(-2_147_483_648);
        assert_eq!(line.bytes(), b"-2147483648");
    }

    /// Issue 30 item 5: the word an init records tells an exit code from a signal (its own
    /// exit status, 128 + the signal, could not), and a word no init wrote is no status.
    #[test]
    fn issue_30_an_init_records_how_its_program_ended() {
        for ended in [
            Ended::Exited(0),
            Ended::Exited(1),
            Ended::Exited(143),
            Ended::Exited(255),
            Ended::Signaled(1),
            Ended::Signaled(9),
            Ended::Signaled(15),
            Ended::Signaled(64),
        ] {
            assert_eq!(Ended::decode(ended.encode()), Some(ended), "{ended:?}");
        }
        assert_ne!(Ended::Exited(143).encode(), Ended::Signaled(15).encode());
        assert_eq!(Ended::Exited(143).exit_status(), 143);
        assert_eq!(Ended::Signaled(15).exit_status(), 143);
        assert_eq!(Ended::Signaled(15).code(), None);
        assert_eq!(Ended::Exited(7).code(), Some(7));
        for word in [0, 0x2ff, 0x300, 0x200, u32::MAX] {
            assert_eq!(Ended::decode(word), None, "{word:#x}");
        }
    }

    #[test]
    fn a_refusal_is_a_value_that_renders_as_the_line_did() {
        let fail = Fail::os("remounting read-only", rustix::io::Errno::ACCESS)
            .at(c"/a b")
            .in_stage(Stage::Mounts);
        let refusal = fail.refusal();
        assert_eq!(
            refusal,
            Refusal {
                stage: Stage::Mounts,
                what: "remounting read-only",
                path: Some("/a b".into()),
                errno: Some(13),
            }
        );
        assert_eq!(refusal.to_string(), fail.text());
        assert_eq!(
            SpawnError::Refused(refusal).to_string(),
            "craik-confine: remounting read-only `/a b`: os error 13"
        );
    }

    #[test]
    fn a_long_line_is_cut_not_overflowed() {
        let mut line = Line::new();
        for _ in 0..100 {
            line.push(b"0123456789abcdef");
        }
        assert_eq!(line.bytes().len(), 1024);
    }

    #[test]
    fn insn_has_the_kernel_layout() {
        assert_eq!(
            std::mem::size_of::<Insn>(),
            std::mem::size_of::<libc::sock_filter>()
        );
        assert_eq!(std::mem::size_of::<PathBeneath>(), 12);
        assert_eq!(std::mem::size_of::<MountAttr>(), 32);
    }
}
