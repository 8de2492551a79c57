//! A private mount namespace in which every mount is read-only and `nosuid`, except the
//! directories a process may write (`nosuid` and `nodev`).
//!
//! Why, beside Landlock: Landlock governs opening, creating, renaming and removing files, not
//! changing their metadata. Without this, a confined command could `chmod` any file its user
//! owns anywhere on the host (as root: every system file; as the operator: Craik's signing
//! key) — found by outside testing. On a read-only mount, `chmod`, `chown`, `utimes` and
//! extended attributes fail (`EROFS`) whoever owns the file.
//!
//! As root the namespace is made directly; otherwise inside a new user namespace mapping only
//! the caller's own uid and gid (the process keeps its identity; files of other users show as
//! `nobody`). The parent computes the [`craik_spawn::Mounts`] plan here: the writable
//! directories, and only on kernels without `mount_setattr` (before 5.12) the list of mount
//! points from its own `mountinfo`; the child applies it before Landlock (which forbids mount
//! changes) and before it drops its capabilities.

use std::ffi::CString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::mount::MountFlags;

/// The plan that makes every mount read-only but `writable` (each bound onto itself first, so
/// it is a mount of its own).
pub(super) fn plan(writable: &[PathBuf]) -> Result<craik_spawn::Mounts, String> {
    static SETATTR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let how = if *SETATTR.get_or_init(craik_spawn::has_mount_setattr) {
        craik_spawn::ReadOnly::Recursive
    } else {
        craik_spawn::ReadOnly::Remounts(remounts(writable)?)
    };
    let user = if rustix::process::geteuid().is_root() {
        None
    } else {
        let (uid, gid) = (
            rustix::process::getuid().as_raw(),
            rustix::process::getgid().as_raw(),
        );
        Some(craik_spawn::IdMaps {
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
        })
    };
    Ok(craik_spawn::Mounts {
        user,
        binds: writable
            .iter()
            .map(|p| c_path(p))
            .collect::<Result<_, _>>()?,
        how,
    })
}

/// The namespace a child with these writable directories enters: one made before for the
/// same directories ([`craik_spawn::make_namespace`]) while each still `lstat`s to the
/// directory it was bound from and Craik's own mount table has not changed since (a mount
/// or unmount on the host means a new snapshot), for at most `max_age` (at most four kept,
/// the one used longest ago dropped first); else a new one. Where one cannot be made,
/// the child makes its own ([`craik_spawn::MountNs::Make`]) — and fails, or warns, saying why.
///
/// Why kept: `unshare(CLONE_NEWNS)` copies every mount of Craik's namespace, and the last
/// process to leave a namespace tears it down in its `exit` — together 0.2–0.4 ms of each
/// command on this project's 2-core VM (issue 18 item 9), against a few microseconds for
/// `setns`. Confined processes cannot change it: they have no capability left
/// when they run, and Landlock refuses mount changes to a restricted process.
pub(super) fn namespace(
    writable: &[PathBuf],
    max_age: std::time::Duration,
) -> Result<craik_spawn::MountNs, String> {
    static MADE: Mutex<Vec<Made>> = Mutex::new(Vec::new());
    let now = std::time::Instant::now();
    let mut gone = Vec::new();
    if let Ok(mut made) = MADE.lock() {
        let (kept, old): (Vec<_>, Vec<_>) = std::mem::take(&mut *made)
            .into_iter()
            .partition(|m| now.saturating_duration_since(m.at) < max_age);
        *made = kept;
        gone.extend(old);
        let generation = mount_generation();
        if let Some(hit) = made.iter_mut().find(|m| m.writable == writable)
            && generation.is_some()
            && hit.generation == generation
            && hit.unchanged()
        {
            hit.used = now;
            let namespace = Arc::clone(&hit.namespace);
            drop(made);
            let _ = later(gone);
            return Ok(craik_spawn::MountNs::Enter(namespace));
        }
    }
    // Identities first, then the namespace: a directory replaced in between is bound new
    // but recorded old, so the next check makes another (the other order would keep a
    // namespace bound to a replaced directory).
    let ids: Vec<_> = writable.iter().map(|p| identity(p)).collect();
    let generation = mount_generation();
    let plan = plan(writable)?;
    let Ok(namespace) = craik_spawn::make_namespace(&plan) else {
        let _ = later(gone);
        return Ok(craik_spawn::MountNs::Make(plan));
    };
    let namespace = Arc::new(namespace);
    if let Ok(mut made) = MADE.lock() {
        let (kept, old): (Vec<_>, Vec<_>) = std::mem::take(&mut *made)
            .into_iter()
            .partition(|m| m.writable != writable);
        *made = kept;
        gone.extend(old);
        if made.len() >= 4
            && let Some(oldest) = (0..made.len()).min_by_key(|i| made.get(*i).map(|m| m.used))
        {
            gone.push(made.remove(oldest));
        }
        made.push(Made {
            writable: writable.to_vec(),
            ids,
            generation,
            namespace: Arc::clone(&namespace),
            at: now,
            used: now,
        });
    }
    let _ = later(gone);
    Ok(craik_spawn::MountNs::Enter(namespace))
}

/// Closes the namespaces no longer kept on a thread of their own: the last reference to a
/// mount namespace tears it down, which waits for an RCU grace period (a tenth of a
/// millisecond and more) — not on the path that starts a command. Closed here if that thread
/// cannot be had.
fn later(gone: Vec<Made>) -> Option<()> {
    static CLOSER: Mutex<Option<std::sync::mpsc::Sender<Vec<Made>>>> = Mutex::new(None);
    if gone.is_empty() {
        return Some(());
    }
    let mut closer = CLOSER.lock().ok()?;
    if closer.is_none() {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Made>>();
        std::thread::Builder::new()
            .name("craik-ns-close".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()?;
        *closer = Some(tx);
    }
    closer.as_ref()?.send(gone).ok()
}

/// A namespace kept for the next child with the same writable directories.
struct Made {
    writable: Vec<PathBuf>,
    /// The identity of each writable directory when it was bound (`None`: not there).
    ids: Vec<Option<(u64, u64)>>,
    /// [`mount_generation`] before it was made (`None`: unknown, never reused).
    generation: Option<u64>,
    namespace: Arc<craik_spawn::Namespace>,
    at: std::time::Instant,
    used: std::time::Instant,
}

/// How many times Craik's own mount table has been seen to change: `/proc/self/mountinfo`
/// polls `POLLPRI` once after each mount or unmount in the namespace (the kernel's own change
/// notice; each poll takes it). `None` when that file cannot be watched: then nothing is
/// reused.
fn mount_generation() -> Option<u64> {
    static WATCH: Mutex<Option<(std::fs::File, u64)>> = Mutex::new(None);
    let mut watch = WATCH.lock().ok()?;
    if watch.is_none() {
        // The first poll reports the table as changed (nothing read yet): taken here.
        let file = std::fs::File::open("/proc/self/mountinfo").ok()?;
        *watch = Some((file, 0));
        changed(&watch.as_ref()?.0)?;
    }
    let (file, generation) = watch.as_mut()?;
    if changed(file)? {
        *generation += 1;
    }
    Some(*generation)
}

/// Whether `mountinfo` reports a change since the last poll (`None`: the poll failed).
fn changed(file: &std::fs::File) -> Option<bool> {
    use rustix::event::{PollFd, PollFlags};
    let mut fds = [PollFd::new(file, PollFlags::PRI)];
    let n = rustix::event::poll(&mut fds, Some(&rustix::event::Timespec::default())).ok()?;
    let got = fds.first()?.revents();
    Some(n > 0 && got.intersects(PollFlags::PRI | PollFlags::ERR))
}

impl Made {
    fn unchanged(&self) -> bool {
        self.writable
            .iter()
            .zip(&self.ids)
            .all(|(p, id)| identity(p) == *id)
    }
}

/// Device and inode of what `path` names, never through a link.
fn identity(path: &Path) -> Option<(u64, u64)> {
    rustix::fs::lstat(path)
        .ok()
        .filter(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Symlink
        })
        .map(|st| (st.st_dev, st.st_ino))
}

fn c_path(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| format!("`{}`: a path with a NUL byte", p.display()))
}

/// Where `mount_setattr` is missing: every mount point to remount, from this process's
/// `mountinfo` (the child's is the same until it unshares).
fn remounts(writable: &[PathBuf]) -> Result<Vec<craik_spawn::Remount>, String> {
    let c = c_path;
    let existing = mount_points()?;
    // Every mount point, and every writable directory with the options of the mount it lies
    // on (a bind mount carries its source mount's flags, and a user namespace may not clear
    // the locked ones).
    let mut points: Vec<(PathBuf, String, bool)> = existing
        .iter()
        .map(|(p, o)| (p.clone(), o.clone(), writable.contains(p)))
        .collect();
    for dir in writable {
        let holder = existing
            .iter()
            .rev()
            .filter(|(p, _)| dir.starts_with(p))
            .max_by_key(|(p, _)| p.components().count())
            .map(|(_, o)| o.clone())
            .unwrap_or_default();
        points.push((dir.clone(), holder, true));
    }
    // Deepest first, so a remount of a parent never hides one below it.
    points.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.components().count()));
    let mut remounts = Vec::with_capacity(points.len());
    for (point, options, rw) in &points {
        // `nodev` only where the process writes (a device node it made there is inert);
        // elsewhere a mount keeps its own (`/dev` must stay usable: `/dev/null`).
        let mut flags = MountFlags::NOSUID | kept(options);
        if *rw {
            flags |= MountFlags::NODEV;
            flags.remove(MountFlags::RDONLY);
        } else {
            flags |= MountFlags::RDONLY;
        }
        remounts.push(craik_spawn::Remount {
            point: c(point)?,
            flags,
            // A mount this process cannot even see the inside of (another namespace's
            // leftovers, `EACCES`/`EINVAL` on pseudo file systems) is left out only if it is
            // already read-only.
            may_fail: !*rw && options.split(',').any(|o| o == "ro"),
        });
    }
    Ok(remounts)
}

/// The flags of a mount that must be kept on a bind remount (a user namespace may not clear
/// them).
fn kept(options: &str) -> MountFlags {
    let mut flags = MountFlags::empty();
    for o in options.split(',') {
        flags |= match o {
            "noexec" => MountFlags::NOEXEC,
            "noatime" => MountFlags::NOATIME,
            "nodiratime" => MountFlags::NODIRATIME,
            "relatime" => MountFlags::RELATIME,
            "ro" => MountFlags::RDONLY,
            "nodev" => MountFlags::NODEV,
            _ => MountFlags::empty(),
        };
    }
    flags
}

/// Every mount point of this namespace and its per-mount options, from `mountinfo`.
fn mount_points() -> Result<Vec<(PathBuf, String)>, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(' ');
            let point = fields.nth(4)?;
            let options = fields.next()?;
            Some((PathBuf::from(unescape(point)), options.to_owned()))
        })
        .collect())
}

/// `mountinfo` escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> std::ffi::OsString {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let value = d.iter().fold(0_u32, |v, c| v * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_fields_are_unescaped() {
        assert_eq!(unescape("/a\\040b\\134c"), "/a b\\c");
        assert_eq!(unescape("/plain"), "/plain");
        let points = mount_points().unwrap();
        assert!(
            points.iter().any(|(p, _)| p == std::path::Path::new("/")),
            "{points:?}"
        );
    }

    #[test]
    fn a_writable_directory_is_bound_and_stays_writable_everything_else_read_only() {
        let dir = std::env::temp_dir();
        let plan = plan(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(plan.binds.len(), 1);
        // This machine has `mount_setattr`: nothing is listed, one recursive call.
        assert!(matches!(plan.how, craik_spawn::ReadOnly::Recursive));
        let remounts = remounts(std::slice::from_ref(&dir)).unwrap();
        let rw: Vec<_> = remounts
            .iter()
            .filter(|r| !r.flags.contains(MountFlags::RDONLY))
            .map(|r| r.point.clone())
            .collect();
        assert_eq!(
            rw,
            vec![CString::new(dir.as_os_str().as_bytes()).unwrap()],
            "only the writable directory stays writable"
        );
        assert!(
            remounts
                .iter()
                .all(|r| r.flags.contains(MountFlags::NOSUID))
        );
        let depth = |r: &craik_spawn::Remount| r.point.as_bytes().split(|b| *b == b'/').count();
        assert!(
            remounts.windows(2).all(|w| match w {
                [a, b] => depth(a) >= depth(b),
                _ => true,
            }),
            "deepest first"
        );
    }
}
