//! A cgroup v2 of its own for every governed command, where the cgroup v2 hierarchy is
//! delegated to Craik (issue 30 item 5): `pids.max`, `memory.max` and `cpu.max` set from
//! [`CommandLimits`], the command's init moved into it before the program starts, and
//! everything in it killed (`cgroup.kill`) and the cgroup removed when the command ends.
//!
//! Delegated means: a cgroup2 mount exists, Craik's own cgroup (the `0::` line of
//! `/proc/self/cgroup`) lies under it, is writable by Craik, and its `cgroup.controllers`
//! offers `pids`, `memory` and `cpu`. Then, once per process, Craik enables the three
//! controllers for its cgroup's children (`cgroup.subtree_control`); a cgroup v2 with
//! processes in it cannot do that (the "no internal processes" rule), so where Craik's cgroup
//! holds processes and has not enabled them yet, Craik first moves itself into a leaf child of
//! its own (`craik-host`), as a delegated service manager does. Each command gets
//! `craik-cmd-<pid>-<n>` beside it.
//!
//! Where it is not delegated (cgroup v1 or hybrid hierarchies whose v2 part has no
//! controllers, a read-only or foreign cgroup, a container without one) nothing changes:
//! [`delegation`] says why, once, and commands run without a cgroup (SECURITY.md says what
//! bounds a process flood then).
//!
//! Everything that decides is a pure function of the files' text ([`own_cgroup`],
//! [`cgroup2_mount`], [`controllers`], [`plan_delegation`], [`CommandLimits::files`]), so it is
//! tested without a delegated hierarchy; only [`delegation`] and [`CommandCgroup`] touch the
//! file system. Nothing here runs after `fork`: the init writes its own pid into the opened
//! `cgroup.procs` ([`craik_spawn::Plan::cgroup_procs`]).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The controllers a command's cgroup needs.
pub const NEEDED: [&str; 3] = ["pids", "memory", "cpu"];

/// The leaf Craik moves itself into when its own cgroup holds processes.
pub const HOST_LEAF: &str = "craik-host";

/// The limits of one command's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// `pids.max`: processes and threads at once, the init included.
    pub pids_max: u64,
    /// `memory.max` in bytes.
    pub memory_max: u64,
    /// `cpu.max`: this many microseconds of CPU per [`CPU_PERIOD_US`] (all CPUs together).
    pub cpu_quota_us: u64,
}

/// The `cpu.max` period (the kernel's default, 100 ms).
pub const CPU_PERIOD_US: u64 = 100_000;

impl CommandLimits {
    /// The defaults, for a machine with `memory_total` bytes and `cpus` CPUs:
    /// - `pids.max` = [`super::PROCESS_LIMIT`] (4096): the same bound `RLIMIT_NPROC` gives a
    ///   user other than root, far above a parallel build (a few hundred), far below a
    ///   machine's `pid_max` (32768 at least);
    /// - `memory.max` = three quarters of the machine's memory: a runaway command meets the
    ///   OOM killer inside its own cgroup before the machine, Craik and its journal included,
    ///   runs out — and a large build still fits;
    /// - `cpu.max` = 90 % of all CPUs: a command can never starve Craik (its timeout, its
    ///   receipts) and the operator's shell, and a build loses at most a tenth.
    pub fn defaults(memory_total: u64, cpus: u64) -> Self {
        Self {
            pids_max: super::PROCESS_LIMIT,
            memory_max: memory_total / 4 * 3,
            cpu_quota_us: cpus.max(1) * CPU_PERIOD_US / 10 * 9,
        }
    }

    /// [`CommandLimits::defaults`] for this machine (`/proc/meminfo`, the CPUs Craik may run
    /// on).
    pub fn for_this_machine() -> Self {
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| mem_total(&text))
            .unwrap_or(u64::MAX / 4 * 3);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        Self::defaults(memory, cpus)
    }

    /// The files written into a command's cgroup, in order, and their content.
    pub fn files(&self) -> [(&'static str, String); 3] {
        [
            ("pids.max", self.pids_max.to_string()),
            ("memory.max", self.memory_max.to_string()),
            (
                "cpu.max",
                format!("{} {CPU_PERIOD_US}", self.cpu_quota_us.max(1000)),
            ),
        ]
    }
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
pub fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The path of the calling process's cgroup v2 (the `0::` line of `/proc/self/cgroup`),
/// relative to the cgroup2 mount's root; `None` without one.
pub fn own_cgroup(proc_self_cgroup: &str) -> Option<&str> {
    proc_self_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(|path| path.trim_start_matches('/'))
}

/// The first cgroup2 mount point in `/proc/self/mounts` text (octal escapes decoded).
pub fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let mut fields = line.split(' ');
        let (_, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
        (kind == "cgroup2").then(|| PathBuf::from(unescape(point)))
    })
}

/// A mount point as `/proc/self/mounts` writes it: space, tab, newline and backslash as
/// `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let value = d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The controllers a `cgroup.controllers` or `cgroup.subtree_control` file lists.
pub fn controllers(text: &str) -> BTreeSet<&str> {
    text.split_whitespace().collect()
}

/// What Craik's own cgroup looks like (read by [`delegation`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The cgroup2 mount point, if any.
    pub mount: Option<PathBuf>,
    /// Craik's cgroup relative to it (`0::` line), if any.
    pub own: Option<String>,
    /// Its `cgroup.controllers`, if readable.
    pub controllers: Option<String>,
    /// Its `cgroup.subtree_control`, if readable.
    pub subtree_control: Option<String>,
    /// Whether its `cgroup.procs` lists a process (Craik itself, usually).
    pub has_processes: bool,
    /// Whether Craik may create cgroups in it and write its control files.
    pub writable: bool,
}

/// How commands get their cgroups, once delegation is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegated {
    /// Craik's cgroup: each command's cgroup is made in it.
    pub base: PathBuf,
    /// A leaf Craik moves itself into first (its cgroup holds processes and has not
    /// enabled the controllers for its children).
    pub move_self_to: Option<PathBuf>,
    /// The controllers still to enable in `base`'s `cgroup.subtree_control` (`+name`).
    pub enable: Vec<&'static str>,
}

/// Whether commands can have cgroups of their own, and how; or why not (one line).
pub fn plan_delegation(seen: &Observed) -> Result<Delegated, String> {
    let mount = seen
        .mount
        .as_ref()
        .ok_or("no cgroup2 file system is mounted")?;
    let own = seen
        .own
        .as_ref()
        .ok_or("this process has no cgroup v2 (no `0::` line in /proc/self/cgroup)")?;
    let base = if own.is_empty() {
        mount.clone()
    } else {
        mount.join(own)
    };
    let offered = seen.controllers.as_deref().ok_or_else(|| {
        format!(
            "`{}` is not visible here (Craik's cgroup lies outside the cgroup2 mount)",
            base.join("cgroup.controllers").display()
        )
    })?;
    let offered = controllers(offered);
    let missing: Vec<&str> = NEEDED
        .iter()
        .copied()
        .filter(|c| !offered.contains(c))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the cgroup v2 at `{}` offers no {} controller (offered: {}; in a hybrid hierarchy they are bound to cgroup v1)",
            base.display(),
            missing.join(", "),
            if offered.is_empty() {
                "none".to_owned()
            } else {
                offered.into_iter().collect::<Vec<_>>().join(" ")
            }
        ));
    }
    if !seen.writable {
        return Err(format!(
            "Craik's cgroup `{}` is not delegated to it (not writable)",
            base.display()
        ));
    }
    let enabled = controllers(seen.subtree_control.as_deref().unwrap_or(""));
    let enable: Vec<&'static str> = NEEDED
        .iter()
        .copied()
        .filter(|c| !enabled.contains(c))
        .collect();
    // The root cgroup may hold processes and enable controllers; any other may not do both.
    let move_self_to =
        (!enable.is_empty() && seen.has_processes && !own.is_empty()).then(|| base.join(HOST_LEAF));
    Ok(Delegated {
        base,
        move_self_to,
        enable,
    })
}

/// What this process found, read once.
fn observe() -> Observed {
    let mount = std::fs::read_to_string("/proc/self/mounts")
        .ok()
        .and_then(|m| cgroup2_mount(&m));
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| own_cgroup(&c).map(str::to_owned));
    let base = match (&mount, &own) {
        (Some(mount), Some(own)) if own.is_empty() => Some(mount.clone()),
        (Some(mount), Some(own)) => Some(mount.join(own)),
        _ => None,
    };
    let read = |name: &str| {
        base.as_ref()
            .and_then(|b| std::fs::read_to_string(b.join(name)).ok())
    };
    let writable = base.as_ref().is_some_and(|b| {
        rustix::fs::access(b, rustix::fs::Access::WRITE_OK).is_ok()
            && rustix::fs::access(
                b.join("cgroup.subtree_control"),
                rustix::fs::Access::WRITE_OK,
            )
            .is_ok()
    });
    Observed {
        controllers: read("cgroup.controllers"),
        subtree_control: read("cgroup.subtree_control"),
        has_processes: read("cgroup.procs").is_some_and(|p| !p.trim().is_empty()),
        writable,
        mount,
        own,
    }
}

/// Carries out [`plan_delegation`]'s plan: Craik into its leaf, the controllers enabled.
fn set_up(plan: &Delegated) -> Result<(), String> {
    let write = |path: &Path, text: &str| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| format!("`{}`: {e}", path.display()))
    };
    if let Some(leaf) = &plan.move_self_to {
        match std::fs::create_dir(leaf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("`{}`: {e}", leaf.display())),
        }
        write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
    }
    if !plan.enable.is_empty() {
        let line = plan
            .enable
            .iter()
            .map(|c| format!("+{c}"))
            .collect::<Vec<_>>()
            .join(" ");
        write(&plan.base.join("cgroup.subtree_control"), &line)?;
    }
    Ok(())
}

/// Whether commands get a cgroup of their own on this machine: Craik's cgroup, set up once
/// per process; or why not (one line, the same every time it is asked).
pub fn delegation() -> &'static Result<Delegated, String> {
    static ANSWER: OnceLock<Result<Delegated, String>> = OnceLock::new();
    ANSWER.get_or_init(|| {
        let plan = plan_delegation(&observe())?;
        set_up(&plan).map_err(|e| format!("cannot set up the delegated cgroup v2: {e}"))?;
        Ok(plan)
    })
}

/// One line on how a command's processes are bounded here.
pub fn summary(limits: &CommandLimits) -> String {
    match delegation() {
        Ok(d) => format!(
            "own cgroup v2 under `{}`: pids.max {}, memory.max {} MiB, cpu.max {} of {} µs",
            d.base.display(),
            limits.pids_max,
            limits.memory_max >> 20,
            limits.cpu_quota_us,
            CPU_PERIOD_US
        ),
        Err(why) => format!("no cgroup per command ({why})"),
    }
}

/// A command's cgroup: made with its limits before the command starts, killed and removed
/// when this is dropped (after the command has been reaped).
#[derive(Debug)]
pub struct CommandCgroup {
    dir: PathBuf,
}

impl CommandCgroup {
    /// Makes `<base>/craik-cmd-<pid>-<n>` with `limits`, and opens its `cgroup.procs` for the
    /// init to move itself in.
    pub fn create(base: &Path, limits: &CommandLimits) -> Result<(Self, OwnedFd), String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("craik-cmd-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("`{}`: {e}", dir.display()))?;
        let cgroup = Self { dir };
        for (name, value) in limits.files() {
            let path = cgroup.dir.join(name);
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|mut f| f.write_all(value.as_bytes()))
                .map_err(|e| format!("`{}` = {value}: {e}", path.display()))?;
        }
        let procs = cgroup.dir.join("cgroup.procs");
        let fd = rustix::fs::open(
            &procs,
            rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| format!("`{}`: {e}", procs.display()))?;
        Ok((cgroup, fd))
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for CommandCgroup {
    /// Everything still in it is killed (`cgroup.kill`, Linux ≥ 5.14; before, each listed
    /// process), then the cgroup is removed — retried while the killed processes are still
    /// being torn down (`EBUSY`), for at most a second.
    fn drop(&mut self) {
        let kill = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        if kill.is_err()
            && let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs"))
        {
            for pid in procs.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
        for _ in 0..200 {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
            }
        }
    }
}

#[cfg(test)]
mod tests;
