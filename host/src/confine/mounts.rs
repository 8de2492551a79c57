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
//! `nobody`). Applied in the trampoline before Landlock (which forbids mount changes) and
//! before capabilities are dropped.

use std::path::PathBuf;

use rustix::mount::{MountFlags, MountPropagationFlags};

/// Makes this process's view of every mount read-only but `writable` (each made its own
/// mount first). An error means nothing can be promised about metadata changes.
pub(super) fn read_only_except(writable: &[PathBuf]) -> Result<(), String> {
    enter_namespace()?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| format!("making mounts private: {e}"))?;
    for dir in writable {
        rustix::mount::mount_bind(dir, dir)
            .map_err(|e| format!("bind-mounting `{}`: {e}", dir.display()))?;
    }
    // Deepest first, so a remount of a parent never hides one below it from this loop.
    let mut mounts = mount_points()?;
    mounts.sort_by_key(|(p, _)| std::cmp::Reverse(p.components().count()));
    for (point, options) in &mounts {
        let rw = writable.iter().any(|w| w == point);
        // `nodev` only where the process writes (a device node it made there is inert);
        // elsewhere a mount keeps its own (`/dev` must stay usable: `/dev/null`).
        let mut flags = MountFlags::BIND | MountFlags::NOSUID | kept(options);
        if rw {
            flags |= MountFlags::NODEV;
        } else {
            flags |= MountFlags::RDONLY;
        }
        if let Err(e) = rustix::mount::mount_remount(point.as_path(), flags, "") {
            // A mount this process cannot even see the inside of (another namespace's
            // leftovers, `EACCES`/`EINVAL` on pseudo file systems) is left out only if it is
            // already read-only.
            if !options.split(',').any(|o| o == "ro") {
                return Err(format!("remounting `{}` read-only: {e}", point.display()));
            }
        }
    }
    // The working directory still refers to the mount it was entered through (now
    // read-only); entering it again by path lands on the writable bind mount.
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    std::env::set_current_dir(&cwd).map_err(|e| format!("re-entering `{}`: {e}", cwd.display()))?;
    Ok(())
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

#[expect(
    deprecated,
    reason = "`unshare` is deprecated for CLONE_FILES sharing hazards; only NEWNS and NEWUSER are passed, in a single-threaded process"
)]
fn enter_namespace() -> Result<(), String> {
    use rustix::thread::UnshareFlags;
    if rustix::process::geteuid().is_root() {
        return rustix::thread::unshare(UnshareFlags::NEWNS)
            .map_err(|e| format!("a private mount namespace: {e}"));
    }
    let (uid, gid) = (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    );
    rustix::thread::unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS).map_err(|e| {
        format!("a private mount namespace needs root or unprivileged user namespaces: {e}")
    })?;
    let write =
        |file: &str, text: String| std::fs::write(file, text).map_err(|e| format!("{file}: {e}"));
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
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
    String::from_utf8_lossy(&out).into_owned()
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
}
