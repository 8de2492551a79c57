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
