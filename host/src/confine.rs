//! Confinement of every governed command and every adapter process, and their lifetime.
//!
//! A child is never started directly: Craik starts itself as a trampoline
//! (`craik __craik-confine …`), which, before it `exec`s the real program,
//! 1. starts a new session (so `setsid` in the child changes nothing we rely on),
//! 2. asks for `SIGKILL` when its parent (Craik) dies (`PR_SET_PDEATHSIG`) and checks the
//!    parent is still the one that started it,
//! 3. restricts itself with Linux Landlock: read (and execute) only the listed paths, write only
//!    the listed paths, no TCP bind/connect unless the sandbox allows network, and (ABI ≥ 6) no
//!    signals or abstract-socket connections to processes outside its domain. Landlock's
//!    ptrace rule also makes `/proc/<craik>/environ` and `/proc/<craik>/mem` unreadable.
//!
//! Craik itself is a child subreaper (`PR_SET_CHILD_SUBREAPER`, set in `main`): whatever a
//! child leaves behind (double forks, `setsid` daemons) is re-parented to Craik, and
//! [`reap_strays`] kills it when a command ends, when an adapter stops, and when Craik is asked
//! to exit by a signal ([`install_exit_handler`]).
//!
//! No `unsafe` here: Landlock is applied in the trampoline process (a fresh `craik`), not
//! between `fork` and `exec` of this one.
//!
//! INVARIANT: a sandbox marked `required` never runs its program unconfined: the trampoline
//! exits [`REFUSED_EXIT`] with a [`REFUSED_PREFIX`] line instead.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The hidden first argument that makes `craik` a trampoline.
pub const TRAMPOLINE: &str = "__craik-confine";
/// The trampoline's exit code when it refused to run the program.
pub const REFUSED_EXIT: i32 = 125;
/// The first word of the trampoline's refusal on stderr.
pub const REFUSED_PREFIX: &str = "craik-confine:";

/// The Landlock ABI whose features Craik asks for (fs incl. truncate and device ioctls, TCP,
/// signal and abstract-socket scoping). Newer kernels enforce exactly these.
const ASKED_ABI: ABI = ABI::V6;
/// The least ABI a required sandbox accepts: filesystem rules and TCP rules.
const LEAST_ABI: i32 = 4;

/// System paths every confined process may read and execute from.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/dev", "/sys",
];
/// The parts of `/proc` every confined process may read, besides its own `/proc/<pid>`. Not
/// `/proc` itself: as root, Landlock does not stop reading another process's `environ`, so the
/// other processes' directories are simply not granted.
const PROC_READ: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
    "/proc/sys",
];
/// Device files every confined process may write.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// What one confined process may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Paths (files or directories) it may read and execute.
    pub read: Vec<PathBuf>,
    /// Paths it may read and write (and create/remove beneath).
    pub write: Vec<PathBuf>,
    /// TCP bind/connect allowed.
    pub net: bool,
    /// Refuse to run unconfined (strict, automation, custom); `trusted-local` runs anyway and
    /// says so.
    pub required: bool,
    /// Apply Landlock at all (false only for `trusted-local` when no safe sandbox exists; the
    /// session, parent-death signal and reaping still apply).
    pub landlock: bool,
    /// Why Landlock is off, for the receipt.
    pub off_because: Option<String>,
}

impl Sandbox {
    /// A sandbox over the system paths plus `read` and `write`; any granted path that holds
    /// `protected` (Craik's home: keys, journals, approvals, memory) is dropped, so nothing
    /// granted reaches it. Returns the refusal when a path that must be granted was dropped.
    pub fn new(
        read: Vec<PathBuf>,
        write: Vec<PathBuf>,
        protected: Option<&Path>,
        net: bool,
        required: bool,
    ) -> Result<Self, String> {
        // The trampoline changes directory before it applies the rules: every path is made
        // absolute here, against Craik's own working directory (`--home h` is relative).
        let absolute = |paths: Vec<PathBuf>| -> Vec<PathBuf> {
            paths
                .into_iter()
                .map(|p| std::path::absolute(&p).unwrap_or(p))
                .collect()
        };
        let (read, write) = (absolute(read), absolute(write));
        let protected = protected.map(canonical);
        let holds_protected = |p: &Path| {
            protected
                .as_ref()
                .is_some_and(|h| h.starts_with(canonical(p)))
        };
        if let Some(bad) = write
            .iter()
            .find(|p| protected.as_ref().is_some_and(|h| canonical(p) == *h))
        {
            return Err(format!(
                "`{}` is Craik's home; a confined process may never write it",
                bad.display()
            ));
        }
        // A write grant that holds the home (a workspace with `.craik/` inside) is carved:
        // everything beside the home is granted, the directories on the way to it are not
        // (so nothing can be created directly in them).
        let mut carved_write = Vec::new();
        for path in write {
            match &protected {
                Some(home) if holds_protected(&path) => {
                    carved_write.extend(carve(&canonical(&path), home)?);
                }
                _ => carved_write.push(path),
            }
        }
        let write = carved_write;
        let mut all_read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
        all_read.extend(read);
        all_read.retain(|p| p.exists() && !holds_protected(p));
        all_read.sort();
        all_read.dedup();
        Ok(Self {
            read: all_read,
            write,
            net,
            required,
            landlock: true,
            off_because: None,
        })
    }

    /// No Landlock (trusted-local only): the session, parent-death signal and reaping apply.
    pub fn unconfined(why: String) -> Self {
        Self {
            read: Vec::new(),
            write: Vec::new(),
            net: true,
            required: false,
            landlock: false,
            off_because: Some(why),
        }
    }

    /// The sandbox for a profile: required outside `trusted-local`; under `trusted-local` a
    /// sandbox that cannot be built safely runs unconfined and says why.
    pub fn for_profile(
        read: Vec<PathBuf>,
        write: Vec<PathBuf>,
        protected: Option<&Path>,
        net: bool,
        trusted_local: bool,
    ) -> Result<Self, String> {
        match Self::new(read, write, protected, net, !trusted_local) {
            Ok(sandbox) => Ok(sandbox),
            Err(why) if trusted_local => Ok(Self::unconfined(why)),
            Err(why) => Err(why),
        }
    }

    /// A `std` command that starts `program args` through the trampoline.
    pub fn command(
        &self,
        program: &Path,
        args: &[String],
    ) -> Result<std::process::Command, String> {
        let me = std::env::current_exe().map_err(|e| format!("cannot find craik itself: {e}"))?;
        let mut command = std::process::Command::new(me);
        command.arg(TRAMPOLINE);
        command.arg("--parent").arg(std::process::id().to_string());
        for p in &self.read {
            command.arg("--read").arg(p);
        }
        for p in &self.write {
            command.arg("--write").arg(p);
        }
        if self.net {
            command.arg("--net");
        }
        if self.required {
            command.arg("--required");
        }
        if !self.landlock {
            command.arg("--no-landlock");
        }
        command.arg("--").arg(program).args(args);
        Ok(command)
    }

    /// One line for receipts: what confinement the process ran under.
    pub fn describe(&self) -> String {
        if let Some(why) = &self.off_because {
            return format!("none (trusted-local runs unconfined: {why})");
        }
        match probe() {
            Probe::Available(abi) => format!(
                "landlock abi {abi}: read {} paths, write {}; tcp {}; {}",
                self.read.len(),
                self.write
                    .iter()
                    .map(|p| format!("`{}`", p.display()))
                    .collect::<Vec<_>>()
                    .join(", "),
                if self.net {
                    "allowed"
                } else if abi >= LEAST_ABI {
                    "denied"
                } else {
                    "not restricted (abi < 4)"
                },
                if abi >= 6 {
                    "signals and abstract sockets scoped"
                } else {
                    "signals not scoped (abi < 6)"
                },
            ),
            Probe::Unavailable(why) if self.required => format!("refused ({why})"),
            Probe::Unavailable(why) => format!("none (trusted-local runs unconfined: {why})"),
        }
    }
}

/// The entries of `dir` (which holds `home`), recursively, except those on the way to `home`
/// and `home` itself.
fn carve(dir: &Path, home: &Path) -> Result<Vec<PathBuf>, String> {
    let mut granted = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let real = canonical(&path);
        if real == home {
            continue;
        }
        if home.starts_with(&real) {
            granted.extend(carve(&real, home)?);
        } else {
            granted.push(path);
        }
    }
    Ok(granted)
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// One line on how an adapter process (and each command it proposes) runs on this machine.
pub fn adapter_summary() -> String {
    match probe() {
        Probe::Available(abi) => format!(
            "landlock abi {abi}: the adapter reads system paths and its own program, writes only its working directory, network allowed; its commands write only the workspace and a fresh HOME, tcp {}; Craik's home unreachable; every process killed with the run",
            if abi >= LEAST_ABI {
                "denied"
            } else {
                "not restricted (abi < 4)"
            }
        ),
        Probe::Unavailable(why) => format!(
            "none on this kernel ({why}): strict, automation and custom refuse to start adapters and commands; trusted-local runs them unconfined and says so in every receipt"
        ),
    }
}

/// What the running kernel offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Landlock with this ABI.
    Available(i32),
    /// No Landlock, and why.
    Unavailable(String),
}

/// Asks a trampoline once what Landlock this kernel enforces (a process restricting itself is
/// the only honest test; the answer is cached for the life of this process).
pub fn probe() -> Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let out = std::env::current_exe().and_then(|me| {
                std::process::Command::new(me)
                    .args([TRAMPOLINE, "--probe"])
                    .env_clear()
                    .stdin(std::process::Stdio::null())
                    .output()
            });
            match out {
                Ok(out) => {
                    let text = String::from_utf8_lossy(&out.stdout);
                    match text.trim().strip_prefix("landlock abi ") {
                        Some(n) => n.parse().map_or_else(
                            |_| Probe::Unavailable(text.trim().to_owned()),
                            Probe::Available,
                        ),
                        None => Probe::Unavailable(text.trim().to_owned()),
                    }
                }
                Err(e) => Probe::Unavailable(format!("cannot run the probe: {e}")),
            }
        })
        .clone()
}

/// The trampoline's arguments.
#[derive(Debug)]
struct Args {
    parent: Option<u32>,
    sandbox: Sandbox,
    probe: bool,
    program: Vec<OsString>,
}

fn parse(args: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut parsed = Args {
        parent: None,
        sandbox: Sandbox {
            read: Vec::new(),
            write: Vec::new(),
            net: false,
            required: false,
            landlock: true,
            off_because: None,
        },
        probe: false,
        program: Vec::new(),
    };
    let sandbox = &mut parsed.sandbox;
    let mut args = args;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        let mut value = || args.next().ok_or(format!("`{text}` needs a value"));
        match text.as_str() {
            "--probe" => parsed.probe = true,
            "--parent" => {
                let v = value()?;
                parsed.parent = Some(
                    v.to_string_lossy()
                        .parse()
                        .map_err(|_| format!("--parent `{}`", v.to_string_lossy()))?,
                );
            }
            "--read" => sandbox.read.push(PathBuf::from(value()?)),
            "--write" => sandbox.write.push(PathBuf::from(value()?)),
            "--net" => sandbox.net = true,
            "--required" => sandbox.required = true,
            "--no-landlock" => sandbox.landlock = false,
            "--" => {
                parsed.program = args.by_ref().collect();
                break;
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(parsed)
}

/// Runs the trampoline (`craik __craik-confine …`): confines this process and `exec`s the
/// program, or exits [`REFUSED_EXIT`]. Never returns.
pub fn trampoline(args: impl Iterator<Item = OsString>) -> ! {
    let refuse = |why: String| -> ! {
        let _ = writeln!(std::io::stderr(), "{REFUSED_PREFIX} {why}");
        std::process::exit(REFUSED_EXIT)
    };
    let parsed = parse(args).unwrap_or_else(|e| refuse(e));
    if parsed.probe {
        let empty = Sandbox::unconfined(String::new());
        match restrict(&empty) {
            Ok(Some(abi)) => println!("landlock abi {abi}"),
            Ok(None) => println!("landlock is not enabled in this kernel"),
            Err(e) => println!("landlock failed: {e}"),
        }
        std::process::exit(0);
    }
    let sandbox = parsed.sandbox;
    let Some((program, rest)) = parsed.program.split_first() else {
        refuse("no program".into())
    };
    // Its own session and process group: killed as a group, and `setsid` in the program
    // changes nothing (the group is found through the subreaper anyway).
    let _ = rustix::process::setsid();
    if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .is_err()
    {
        refuse("cannot set the parent-death signal".into());
    }
    if let Some(parent) = parsed.parent {
        let now = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
        if u32::try_from(now).ok() != Some(parent) {
            refuse("the parent exited before the program started".into());
        }
    }
    let applied = if sandbox.landlock {
        restrict(&sandbox)
    } else {
        Ok(None)
    };
    if let Err(why) = admit(applied, sandbox.required) {
        refuse(why);
    }
    let error = std::process::Command::new(program).args(rest).exec();
    refuse(format!(
        "`{}`: cannot start: {error}",
        Path::new(program).display()
    ))
}

/// Whether the program may run after Landlock was (or was not) applied: a required sandbox
/// needs Landlock with filesystem and TCP rules; an optional one runs whatever the kernel has.
fn admit(applied: Result<Option<i32>, String>, required: bool) -> Result<(), String> {
    match applied {
        Ok(Some(abi)) if abi >= LEAST_ABI || !required => Ok(()),
        Ok(Some(abi)) => Err(format!(
            "this kernel's Landlock ABI is {abi}; confinement needs ABI ≥ {LEAST_ABI} (Linux ≥ 6.7) for network rules; this profile refuses to run unconfined (trusted-local runs unconfined)"
        )),
        Ok(None) if required => Err(
            "Landlock is not enabled in this kernel (needs CONFIG_SECURITY_LANDLOCK and `landlock` in the lsm= boot list); this profile refuses to run unconfined (trusted-local runs unconfined)".into(),
        ),
        Ok(None) => Ok(()),
        Err(e) => Err(format!("Landlock could not be applied: {e}")),
    }
}

/// Restricts this process; `Ok(Some(abi))` when Landlock enforces, `Ok(None)` when the kernel
/// has none.
fn restrict(sandbox: &Sandbox) -> Result<Option<i32>, String> {
    let abi = ASKED_ABI;
    let e = |e: landlock::RulesetError| e.to_string();
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(e)?;
    if !sandbox.net {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(e)?;
    }
    let mut created = ruleset
        .scope(Scope::from_all(abi))
        .map_err(e)?
        .create()
        .map_err(e)?;
    let rule = |path: &Path, access: landlock::BitFlags<AccessFs>| {
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        PathFd::new(path).map(|fd| PathBeneath::new(fd, access))
    };
    // This process's own `/proc/<pid>` (the program keeps the pid across `exec`).
    let own = PathBuf::from(format!("/proc/{}", std::process::id()));
    let proc_read: Vec<PathBuf> = PROC_READ.iter().map(PathBuf::from).chain([own]).collect();
    for path in sandbox.read.iter().chain(proc_read.iter()) {
        if let Ok(rule) = rule(path, AccessFs::from_read(abi)) {
            created = created.add_rule(rule).map_err(e)?;
        }
    }
    let devices: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
    for path in sandbox.write.iter().chain(devices.iter()) {
        match rule(path, AccessFs::from_all(abi)) {
            Ok(rule) => created = created.add_rule(rule).map_err(e)?,
            Err(err) if sandbox.write.contains(path) => {
                return Err(format!("`{}`: {err}", path.display()));
            }
            Err(_) => {}
        }
    }
    let status = created.restrict_self().map_err(e)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Ok(None);
    }
    Ok(match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => Some(effective_abi as i32),
        _ => None,
    })
}

/// Direct children Craik is managing (adapters, commands), by pid: [`reap_strays`] leaves them.
static MANAGED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Registers a direct child Craik manages itself.
pub fn manage(pid: Option<u32>) {
    if let (Some(pid), Ok(mut set)) = (pid.and_then(|p| i32::try_from(p).ok()), MANAGED.lock()) {
        set.insert(pid);
    }
}

/// Forgets a managed child (it has been waited for).
pub fn release(pid: Option<u32>) {
    if let (Some(pid), Ok(mut set)) = (pid.and_then(|p| i32::try_from(p).ok()), MANAGED.lock()) {
        set.remove(&pid);
    }
}

/// Makes this process a child subreaper: orphaned descendants are re-parented to it.
pub fn become_subreaper() {
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
}

/// Children of this process, from `/proc/*/stat`.
fn children() -> Vec<i32> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
                    let rest = stat.get(stat.rfind(')')? + 1..)?;
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(me)
        })
        .collect()
}

/// Kills every child of this process that it does not manage (what a command or adapter left
/// behind, re-parented here), and their children as they are re-parented in turn; `all` kills
/// the managed ones too. Returns how many were killed.
pub fn reap_strays(all: bool) -> usize {
    use rustix::process::{Pid, Signal, WaitOptions};
    let mut killed = 0;
    // Bounded: a fork bomb cannot keep Craik here for ever.
    for _ in 0..256 {
        let managed = MANAGED.lock().map(|s| s.clone()).unwrap_or_default();
        let strays: Vec<i32> = children()
            .into_iter()
            .filter(|pid| all || !managed.contains(pid))
            .collect();
        if strays.is_empty() {
            break;
        }
        for pid in strays {
            if let Some(pid) = Pid::from_raw(pid) {
                let _ = rustix::process::kill_process_group(pid, Signal::KILL);
                let _ = rustix::process::kill_process(pid, Signal::KILL);
                let _ = rustix::process::waitpid(Some(pid), WaitOptions::empty());
                killed += 1;
            }
        }
    }
    killed
}

/// On SIGINT, SIGTERM or SIGHUP: kill every child and what it left behind, then exit
/// 128 + the signal. Runs on its own thread.
pub fn install_exit_handler() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            reap_strays(true);
            let _ = writeln!(
                std::io::stderr(),
                "craik: stopped by signal {signal}; every process of the run was killed (`craik runs recover RUN` classifies what was in flight)"
            );
            std::process::exit(128 + signal);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_sandbox_never_runs_unconfined() {
        assert!(admit(Ok(Some(7)), true).is_ok());
        assert!(admit(Ok(Some(4)), true).is_ok());
        assert!(admit(Ok(Some(3)), true).unwrap_err().contains("ABI is 3"));
        assert!(admit(Ok(None), true).unwrap_err().contains("not enabled"));
        assert!(admit(Err("EPERM".into()), true).is_err());
        assert!(admit(Err("EPERM".into()), false).is_err());
        assert!(admit(Ok(None), false).is_ok());
        assert!(admit(Ok(Some(2)), false).is_ok());
    }

    #[test]
    fn a_sandbox_never_grants_a_path_that_holds_the_home() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(home.join("keys")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        let ok = Sandbox::new(
            vec![dir.path().to_path_buf()],
            vec![ws.clone()],
            Some(&home),
            false,
            true,
        )
        .unwrap();
        assert!(!ok.read.iter().any(|p| home.starts_with(p)), "{ok:?}");
        assert!(ok.write == vec![ws.clone()]);
        // A workspace holding the home is carved around it.
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let carved = Sandbox::new(
            vec![],
            vec![dir.path().to_path_buf()],
            Some(&home),
            false,
            true,
        )
        .unwrap();
        let mut write = carved.write.clone();
        write.sort();
        let root = dir.path().canonicalize().unwrap();
        assert_eq!(write, vec![root.join("a.txt"), root.join("ws")]);
        let same = Sandbox::new(vec![], vec![home.clone()], Some(&home), false, true);
        assert!(same.is_err());
    }
}
