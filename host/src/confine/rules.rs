//! Which paths a confined process may reach: the system allow-lists (`/etc`, `/dev`, `/sys`,
//! `/proc` reduced to what programs need) and the carving of a granted directory around the
//! paths it holds that must stay out of reach (Craik's home, protected workspace paths,
//! credential files).
//!
//! INVARIANT: a symlink never becomes a rule. Carving reads entries with `lstat` semantics
//! (`DirEntry::file_type` does not follow links) and skips links: access through a link is
//! checked against its target's rules, so a link needs none. Nothing recurses on a link, so no
//! walk can loop.

use std::path::{Path, PathBuf};

/// Directories whose whole content every confined process may read and execute.
pub(crate) const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
];

/// The entries of `/etc` programs need (loader, users and groups by name, name service,
/// time zone, certificates, alternatives, the system's own identification, tool defaults).
/// Never `shadow`, `gshadow`, `sudoers`, `ssh/`, keys or credentials: not listed.
pub(crate) const ETC_READ: &[&str] = &[
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "localtime",
    "timezone",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "alternatives",
    "os-release",
    "lsb-release",
    "debian_version",
    "mime.types",
    "magic",
    "magic.mime",
    "locale.alias",
    "inputrc",
    "terminfo",
    "gitconfig",
    "gitattributes",
    "npmrc.d",
    "python3",
    // Not `pip.conf`: it may hold an index URL with credentials (a credential file, see
    // `toolchains::CREDENTIALS`).
    "xdg",
    "environment",
    "mtab",
];

/// Devices a confined process may read and write (no block device, no terminal, no `/dev/mem`).
pub(crate) const DEVICES_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
/// Devices a confined process may only read.
pub(crate) const DEVICES_READ: &[&str] = &["/dev/random", "/dev/urandom"];

/// The parts of `/sys` programs read to size their thread pools (CPU topology, cgroup
/// quotas). Nothing else: no block devices, no firmware, no kernel keys.
pub(crate) const SYS_READ: &[&str] = &["/sys/devices/system/cpu", "/sys/fs/cgroup"];

/// The parts of `/proc` every confined process may read, besides its own `/proc/<pid>`. Not
/// `/proc` itself: other processes' directories (`environ`, `mem`, `fd`) are never granted.
pub(crate) const PROC_READ: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
    "/proc/sys/kernel/ngroups_max",
    "/proc/sys/kernel/osrelease",
    "/proc/sys/kernel/pid_max",
    "/proc/sys/vm/overcommit_memory",
];

/// Most rules a carve may produce; more is refused (the grant is too fragmented to express).
pub const MAX_CARVED: usize = 4096;

/// The real path of an operator- or host-chosen path (absolute, every link resolved); `None`
/// when it does not exist.
pub(crate) fn real(path: &Path) -> Option<PathBuf> {
    std::path::absolute(path).ok()?.canonicalize().ok()
}

/// A path to keep out of reach, as the sandbox compares it: its real path when it exists,
/// else its absolute path (it may be created later). A path that cannot even be made absolute
/// is an error, never an empty path that every comparison would treat alike.
pub(crate) fn kept_path(path: &Path) -> Result<PathBuf, String> {
    match real(path) {
        Some(real) => Ok(real),
        None => std::path::absolute(path)
            .map_err(|e| format!("`{}`: cannot be made absolute: {e}", path.display())),
    }
}

/// The system read roots and allow-listed files that exist here, as real paths, deduplicated.
pub(crate) fn system_read() -> Vec<PathBuf> {
    let etc: Vec<PathBuf> = ETC_READ.iter().map(|e| Path::new("/etc").join(e)).collect();
    let trees: Vec<PathBuf> = SYSTEM_READ
        .iter()
        .chain(DEVICES_READ)
        .chain(SYS_READ)
        .map(PathBuf::from)
        .collect();
    resolved_allow_list(&trees, &etc)
}

/// `trees` and `files` resolved to real paths, keeping only what resolves **into the allow-list
/// itself**: under a tree of `trees`, or under one of `files` that is not a link. An
/// allow-listed name that links elsewhere — `/etc/gitconfig` → `/etc/shadow` (outside testing:
/// the shadow file was read through it), → a block device, → `/root` — is not granted; one
/// that links into the system trees (`/etc/localtime` → `/usr/share/zoneinfo/…`) is.
fn resolved_allow_list(trees: &[PathBuf], files: &[PathBuf]) -> Vec<PathBuf> {
    let is_link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    let roots: Vec<PathBuf> = trees
        .iter()
        .chain(files.iter().filter(|p| !is_link(p)))
        .filter_map(|p| real(p))
        .collect();
    let mut out: Vec<PathBuf> = trees
        .iter()
        .chain(files)
        .filter_map(|p| real(p))
        .filter(|p| roots.iter().any(|root| p.starts_with(root)))
        .filter(|p| !linked_file(p, files))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Names container runtimes bind-mount over `/etc` as a matter of course: a mount point there
/// is granted.
const RUNTIME_BOUND: &[&str] = &["/etc/hosts", "/etc/hostname", "/etc/resolv.conf"];

/// Whether `real` is an allow-listed single file (`files`, not a tree) that may be another
/// file under an allow-listed name: one with more than one hard link (outside testing round 6:
/// `/etc/gitconfig` made a hard link to `/etc/shadow` by root let commands read the shadow
/// file) or a mount point (round 7: `/etc/shadow` bind-mounted there), but the names container
/// runtimes bind. Not granted.
fn linked_file(real: &Path, files: &[PathBuf]) -> bool {
    use std::os::unix::fs::MetadataExt;
    if !files.iter().any(|f| f == real) {
        return false;
    }
    let linked = std::fs::symlink_metadata(real).is_ok_and(|m| m.is_file() && m.nlink() > 1);
    let runtime = RUNTIME_BOUND.iter().any(|n| real == Path::new(n));
    linked || (mount_point(real) && !(runtime && bound_from_its_own_name(real)))
}

/// Whether the mount on `path` binds a file of the same name (a container runtime's
/// `/var/lib/…/resolv.conf` on `/etc/resolv.conf`), from `/proc/self/mountinfo`: outside
/// testing round 8 bound `/etc/shadow` and a home's signing key there.
fn bound_from_its_own_name(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let Some(want) = path.to_str() else {
        return false;
    };
    // The last mount on `path` is the one seen; its fourth field is the bound root.
    info.lines()
        .rev()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let root = f.nth(3)?;
            let point = f.next()?;
            (point == want).then_some(root)
        })
        .next()
        .is_some_and(|root| {
            let root = Path::new(root);
            root.file_name() == path.file_name() && !root.starts_with("/etc")
        })
}

/// Whether `path` is on another mount than its directory (a bind mount of a file or a
/// directory onto it); unknown counts as one.
fn mount_point(path: &Path) -> bool {
    let id = |p: &Path| {
        rustix::fs::statx(
            rustix::fs::CWD,
            p,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            rustix::fs::StatxFlags::MNT_ID,
        )
        .ok()
        .filter(|x| x.stx_mask & rustix::fs::StatxFlags::MNT_ID.bits() != 0)
        .map(|x| x.stx_mnt_id)
    };
    match (id(path), path.parent().and_then(id)) {
        (Some(a), Some(b)) => a != b,
        _ => true,
    }
}

/// The entries of `dir` to grant so that nothing in `keep_out` is reachable: every entry
/// beside them, and — for a directory on the way to one — its entries in turn. The
/// directories on the way themselves are not granted (nothing can be created or renamed
/// directly in them). Symlinks are skipped, never followed.
pub(crate) fn carve(dir: &Path, keep_out: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut granted = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("`{}`: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("`{}`: {e}", dir.display()))?;
            let kind = entry
                .file_type()
                .map_err(|e| format!("`{}`: {e}", entry.path().display()))?;
            let path = entry.path();
            if kind.is_symlink() || keep_out.contains(&path) {
                continue;
            }
            if kind.is_dir() && keep_out.iter().any(|k| k.starts_with(&path)) {
                todo.push(path);
            } else {
                granted.push(path);
            }
            if granted.len() + todo.len() > MAX_CARVED {
                return Err(format!(
                    "`{}`: more than {MAX_CARVED} entries to grant around protected paths; narrow the grant",
                    dir.display()
                ));
            }
        }
    }
    granted.sort();
    Ok(granted)
}

/// What to grant for the real path `path` so that nothing in `kept` is reachable: the path
/// itself, or — a directory holding something kept — its entries carved around it.
pub(crate) fn around(path: PathBuf, kept: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let inner: Vec<PathBuf> = kept
        .iter()
        .filter(|k| k.starts_with(&path) && **k != path)
        .cloned()
        .collect();
    if inner.is_empty() || !path.is_dir() {
        return Ok(vec![path]);
    }
    carve(&path, &inner)
}

/// What of Craik's `home` must stay out of reach of a process granted `allowed` paths: the
/// whole home, or — when some allowed path lies inside it (an example's workspace, a
/// command's scratch directories under the run directory) — every entry of the home beside
/// the way to them (keys, journals, approvals, reviews, memory, other runs).
pub fn keep_out_of_home(home: &Path, allowed: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let home = kept_path(home)?;
    let inside: Vec<PathBuf> = allowed
        .iter()
        .filter_map(|a| real(a))
        .filter(|a| a.starts_with(&home) && *a != home)
        .collect();
    if inside.is_empty() {
        return Ok(vec![home]);
    }
    carve(&home, &inside)
}

/// A read root too broad to grant whatever asks for it: the file system root, the home
/// directories, the temporary directory, or anything holding the operator's own `HOME`.
pub fn too_broad(path: &Path) -> bool {
    let user_home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|h| real(&h));
    [
        "/", "/home", "/root", "/tmp", "/var", "/var/tmp", "/run", "/mnt", "/media", "/srv",
    ]
    .iter()
    .any(|b| path == Path::new(b))
        || user_home.is_some_and(|h| h.starts_with(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside testing (round 5): an allow-listed `/etc` name that links to a file the
    /// allow-list does not name grants nothing; a link into a system tree still works.
    /// Round 7 (R7-5, root only): an allow-listed file with another file bind-mounted on it is
    /// not granted. Where mounting is not permitted, nothing to check.
    #[test]
    fn a_bind_mounted_allow_listed_file_is_not_granted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (secret, listed) = (root.join("secret"), root.join("listed"));
        std::fs::write(&secret, "secret").unwrap();
        std::fs::write(&listed, "listed").unwrap();
        let files = vec![listed.clone()];
        assert_eq!(
            resolved_allow_list(&[], &files),
            files,
            "not a mount point yet"
        );
        if rustix::mount::mount_bind(&secret, &listed).is_err() {
            return;
        }
        let got = resolved_allow_list(&[], &files);
        let _ = rustix::mount::unmount(&listed, rustix::mount::UnmountFlags::DETACH);
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn an_allow_listed_link_grants_only_what_the_allow_list_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (usr, etc) = (root.join("usr"), root.join("etc"));
        std::fs::create_dir_all(usr.join("share/zoneinfo")).unwrap();
        std::fs::create_dir_all(etc.join("ssl/certs")).unwrap();
        std::fs::write(usr.join("share/zoneinfo/UTC"), "tz").unwrap();
        for f in ["passwd", "shadow"] {
            std::fs::write(etc.join(f), f).unwrap();
        }
        let link = |to: &Path, name: &str| std::os::unix::fs::symlink(to, etc.join(name)).unwrap();
        link(&etc.join("shadow"), "gitconfig");
        link(&usr.join("share/zoneinfo/UTC"), "localtime");
        link(&etc.join("ssl"), "pki");
        link(Path::new("/dev/zero"), "hosts");
        link(&root, "inputrc");
        std::fs::hard_link(etc.join("shadow"), etc.join("nsswitch.conf")).unwrap();
        let files: Vec<PathBuf> = [
            "nsswitch.conf",
            "passwd",
            "gitconfig",
            "localtime",
            "ssl/certs",
            "pki",
            "hosts",
            "inputrc",
        ]
        .iter()
        .map(|n| etc.join(n))
        .collect();
        let got = resolved_allow_list(std::slice::from_ref(&usr), &files);
        assert_eq!(
            got,
            vec![
                etc.join("passwd"),
                etc.join("ssl/certs"),
                usr.clone(),
                usr.join("share/zoneinfo/UTC")
            ],
            "not shadow (via gitconfig, or its hard link nsswitch.conf), not etc/ssl (via pki), no device, not the root"
        );
    }

    #[test]
    fn carving_never_grants_a_link_or_a_kept_out_path_and_never_loops() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b/secret")).unwrap();
        std::fs::create_dir_all(root.join("a/c")).unwrap();
        std::fs::write(root.join("a/b/f"), "x").unwrap();
        std::fs::write(root.join("top"), "x").unwrap();
        // Links of every kind: to the kept-out path, to an ancestor (a loop), outside.
        std::os::unix::fs::symlink(root.join("a/b/secret"), root.join("k")).unwrap();
        std::os::unix::fs::symlink(&root, root.join("a/b/up")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("a/out")).unwrap();
        let granted = carve(&root, &[root.join("a/b/secret")]).unwrap();
        assert_eq!(
            granted,
            vec![root.join("a/b/f"), root.join("a/c"), root.join("top")]
        );
    }

    #[test]
    fn system_reads_hold_no_secret() {
        let read = system_read();
        for bad in [
            "/etc",
            "/etc/shadow",
            "/etc/gshadow",
            "/dev",
            "/sys",
            "/proc",
            "/root",
        ] {
            assert!(!read.iter().any(|p| p == Path::new(bad)), "{bad}: {read:?}");
        }
        assert!(!read.iter().any(|p| p.starts_with("/etc/ssh")));
        // No allow-listed /etc entry is a credential file.
        for cred in crate::confine::toolchains::CREDENTIALS {
            assert!(!ETC_READ.contains(cred), "{cred}");
        }
    }

    #[test]
    fn broad_roots_are_refused() {
        for p in ["/", "/home", "/tmp", "/root"] {
            assert!(too_broad(Path::new(p)), "{p}");
        }
        assert!(!too_broad(Path::new("/usr/lib/node_modules")));
    }
}
