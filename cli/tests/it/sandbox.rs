//! Issue 18: the sandbox enforces the path policy. Each class of the outside test as a CLI
//! test over generated variants: symlinks never become rules, protected paths are unwritable
//! (and checked after every command), nothing ambient (descriptors, devices, capabilities,
//! sockets) reaches confined code, and real toolchains run confined.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::boundary::confinement_available;
use crate::runs::{act, receipts, scratch_example, verify_run};

fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Adds `writes` to the scratch example's grant `i`.
fn grant_writes(ex: &Path, i: usize, writes: &[&str]) {
    let path = ex.join(format!("grants/g{i}.json"));
    let mut g: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    g["target"]["writes"] = json!(writes);
    std::fs::write(&path, serde_json::to_string_pretty(&g).unwrap()).unwrap();
}

fn run(ex: &Path, home: &Path, extra: &[&str]) -> (Output, String) {
    let out = crate::craik()
        .arg("run")
        .arg(ex)
        .arg("--home")
        .arg(home)
        .args(extra)
        .output()
        .unwrap();
    let id = crate::run_id_of(&out.stdout);
    (out, id)
}

/// The outcome receipts of a run, in order.
fn outcomes(home: &Path, id: &str) -> Vec<Value> {
    receipts(home, id)
        .into_iter()
        .filter(|r| r["decided_by"]["kind"] == "outcome")
        .collect()
}

/// A scratch example whose one action runs `./probe.sh` (the script given) under `profile`
/// with a shell.test grant for it; `out/` exists; `files` are added to the workspace.
fn probe_example(dir: &Path, profile: &str, script: &str, files: &[(&str, &str)]) -> PathBuf {
    let steps = act(json!([
        {"id":"action_probe","capability":"shell.test","operation":"execute","argv":["./probe.sh"]},
    ]));
    let mut all = vec![("probe.sh", script), ("out/.keep", "")];
    all.extend_from_slice(files);
    let ex = scratch_example(
        dir,
        profile,
        &[("shell.test", &["./probe.sh"], &["execute"])],
        steps,
        &all,
    );
    make_executable(&ex.join("workspace/probe.sh"));
    ex
}

fn read(ws: &Path, name: &str) -> String {
    std::fs::read_to_string(ws.join("out").join(name)).unwrap_or_default()
}

/// Symlinks in the repository — to the home and its keys, to ancestors, to the outside, to
/// themselves — never become sandbox rules: nothing is read or written through them, and the
/// run ends normally (no endless walk).
#[test]
fn issue_18_symlinks_in_the_workspace_never_become_rules() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside-secret\n").unwrap();
    let home = dir.path().join("home");
    // Every kind of link, at the root and nested.
    let targets: Vec<(String, String)> = vec![
        ("k".into(), home.join("keys").display().to_string()),
        (
            "kf".into(),
            home.join("keys/signing.key.pem").display().to_string(),
        ),
        ("h".into(), home.display().to_string()),
        ("runs".into(), home.join("runs").display().to_string()),
        ("up".into(), "..".into()),
        ("up2".into(), "../..".into()),
        ("root".into(), "/".into()),
        ("self".into(), ".".into()),
        ("loop".into(), "loop".into()),
        ("out-dir".into(), outside.display().to_string()),
        ("etc".into(), "/etc".into()),
        ("sub/deep/k".into(), home.join("keys").display().to_string()),
        ("sub/deep/up".into(), "../../..".into()),
        ("sub/deep/out".into(), outside.display().to_string()),
    ];
    let mut script = String::from("#!/bin/sh\n");
    for (name, _) in &targets {
        let tag = name.replace('/', "_");
        script.push_str(&format!(
            "cat {name}/signing.key.pem {name}/secret.txt {name}/keys/signing.key.pem 2>/dev/null | grep -q . && echo {tag} >> out/read.txt\n\
             echo pwned > {name}/planted-{tag} 2>/dev/null && echo {tag} >> out/wrote.txt\n"
        ));
    }
    script.push_str("cat kf 2>/dev/null | grep -q PRIVATE && echo kf >> out/read.txt\nexit 0\n");
    let ex = probe_example(
        dir.path(),
        "trusted-local",
        &script,
        &[("sub/deep/.keep", "")],
    );
    for (name, target) in &targets {
        std::os::unix::fs::symlink(target, ex.join("workspace").join(name)).unwrap();
    }
    let (out, id) = run(&ex, &home, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let ws = home.join("runs").join(&id).join("workspace");
    assert_eq!(read(&ws, "read.txt"), "", "read through a link");
    assert_eq!(read(&ws, "wrote.txt"), "", "wrote through a link");
    let planted: Vec<_> = walk(&home.join("keys"))
        .into_iter()
        .chain(walk(&outside))
        .filter(|p| p.to_string_lossy().contains("planted"))
        .collect();
    assert_eq!(planted, Vec::<PathBuf>::new());
    verify_run(&home, &id, false);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// An archive planting every protected path (git config and hooks, CI workflows, `.envrc`,
/// editor config, agent instructions, ADRs) and files outside the write scope: a granted
/// `tar -xf` extracts only into its scope; every protected file is as before, nothing
/// planted exists, and the outcome receipt lists what the command changed.
#[test]
fn issue_18_an_archive_cannot_plant_protected_paths() {
    if !confinement_available() {
        return;
    }
    let planted = [
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/info/attributes",
        ".github/workflows/ci.yml",
        ".envrc",
        ".vscode/settings.json",
        "AGENTS.md",
        "src/lib.rs",
        "src/new.rs",
        "sub/.git/config",
        "new-top.txt",
        // Craik's own inputs and other tools' config, at the root and nested in scope (found
        // by outside testing: a rewritten craik.toml planted a permit for the next run).
        "craik.toml",
        "out/craik.toml",
        "out/.craik-grants/g.json",
        "out/.hg/hgrc",
        "out/.gdbinit",
        // Outside testing round 5: nested CI and more tools that run what they find.
        "out/.github/workflows/ci.yml",
        "out/.github/copilot-instructions.md",
        "out/.devcontainer.json",
        "out/.forgejo/workflows/x.yml",
        "out/.pdbrc",
        "out/.vimrc",
        "out/.roo/mcp.json",
        "out/.zed/settings.json",
        "out/ok.txt",
    ];
    for profile in ["trusted-local", "automation"] {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join("staging");
        for p in planted {
            let f = staging.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, format!("planted {p}\n")).unwrap();
        }
        let steps = act(json!([
            {"id":"action_x","capability":"shell.test","operation":"execute","argv":["tar","-xf","plant.tar"]},
        ]));
        let ex = scratch_example(
            dir.path(),
            profile,
            &[("shell.test", &["tar -xf"], &["execute"])],
            steps,
            &[
                (".git/config", "[core]\n\tbare = false\n"),
                (".git/hooks/.keep", ""),
                ("src/lib.rs", "pub fn f() {}\n"),
                ("sub/.git/config", "[core]\n"),
                ("craik.toml", "[run]\nprofile = \"strict\"\n"),
                ("out/.keep", ""),
            ],
        );
        grant_writes(&ex, 0, &["out/**"]);
        let tar = std::process::Command::new("tar")
            .arg("-cf")
            .arg(ex.join("workspace/plant.tar"))
            .arg("-C")
            .arg(&staging)
            .args(planted)
            .status()
            .unwrap();
        assert!(tar.success());
        let home = dir.path().join("home");
        let (out, id) = run(&ex, &home, &[]);
        let text = crate::transcript(&out);
        let ws = home.join("runs").join(&id).join("workspace");
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/config")).unwrap(),
            "[core]\n\tbare = false\n",
            "{profile}: {text}"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("src/lib.rs")).unwrap(),
            "pub fn f() {}\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("sub/.git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("craik.toml")).unwrap(),
            "[run]\nprofile = \"strict\"\n"
        );
        for p in [
            ".git/hooks/pre-commit",
            ".git/info/attributes",
            ".github/workflows/ci.yml",
            ".envrc",
            ".vscode/settings.json",
            "AGENTS.md",
            "src/new.rs",
            "new-top.txt",
            "out/craik.toml",
            "out/.craik-grants",
            "out/.hg",
            "out/.gdbinit",
            "out/.github/workflows",
            "out/.github/copilot-instructions.md",
            "out/.devcontainer.json",
            "out/.forgejo",
            "out/.pdbrc",
            "out/.vimrc",
            "out/.roo",
            "out/.zed",
        ] {
            assert!(!ws.join(p).exists(), "{profile}: {p} was planted: {text}");
        }
        // The in-scope file landed and the receipt names it with its hash.
        assert_eq!(
            std::fs::read_to_string(ws.join("out/ok.txt")).unwrap(),
            "planted out/ok.txt\n"
        );
        let o = outcomes(&home, &id);
        assert_eq!(o.len(), 1, "{profile}: {text}");
        let files = o[0]["result"]["metadata"]["files"].as_array().unwrap();
        let ok = files.iter().find(|f| f["path"] == "out/ok.txt").unwrap();
        assert_eq!(ok["change"], "created");
        assert!(ok["sha256"].as_str().unwrap().starts_with("sha256:"));
        // tar could not create the rest: the step failed, and the run says so.
        assert_eq!(o[0]["result"]["status"], "failed", "{profile}: {text}");
        verify_run(&home, &id, false);
        // `craik audit` answers "which command changed this file".
        let audit = crate::craik()
            .args(["audit", &id, "--home"])
            .arg(&home)
            .output()
            .unwrap();
        let shown = String::from_utf8_lossy(&audit.stdout);
        assert!(
            shown.contains("file created out/ok.txt sha256:"),
            "{}",
            crate::transcript(&audit)
        );
    }
}

/// Nothing ambient reaches a confined command: no capability (bounding set empty as root),
/// `no_new_privs`, a seccomp filter, no `/dev` but the harmless devices, no `/etc/shadow`,
/// no descriptor Craik inherited, no socket of any family (socketpair stays).
#[test]
fn issue_18_no_ambient_authority_reaches_a_command() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unix_path = dir.path().join("listen.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
    let leak = dir.path().join("leak.txt");
    std::fs::write(&leak, "").unwrap();
    let script = r#"#!/bin/sh
while read -r l; do case $l in CapInh:*|CapPrm:*|CapEff:*|CapBnd:*|CapAmb:*|NoNewPrivs:*|Seccomp:*) echo "$l";; esac; done < /proc/self/status > out/status.txt
ls /dev > out/dev.txt 2>&1 || echo DENIED >> out/dev.txt
for d in /dev/sda /dev/vda /dev/nvme0n1 /dev/loop0 /dev/mem /dev/kmsg /dev/tty /dev/console; do
  [ -e "$d" ] && (head -c 1 "$d" >/dev/null 2>&1 && echo "$d" >> out/devread.txt)
done
cat /etc/shadow > /dev/null 2>&1 && echo READ > out/shadow.txt
ls /etc > /dev/null 2>&1 && echo LISTED > out/etc.txt
for f in /proc/self/fd/*; do echo "${f##*/}"; done > out/fds.txt
for fd in 3 4 5 6 7 8 9; do (echo leaked >&$fd) 2>/dev/null && echo $fd >> out/fdwrite.txt; done
/usr/bin/python3 - > out/sockets.txt 2>&1 <<'PY'
import socket
cases = [("inet-stream", socket.AF_INET, socket.SOCK_STREAM, 0), ("inet-dgram", socket.AF_INET, socket.SOCK_DGRAM, 0),
         ("inet6-stream", socket.AF_INET6, socket.SOCK_STREAM, 0), ("inet-raw", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
         ("unix-stream", socket.AF_UNIX, socket.SOCK_STREAM, 0), ("unix-dgram", socket.AF_UNIX, socket.SOCK_DGRAM, 0),
         ("netlink", socket.AF_NETLINK, socket.SOCK_RAW, 0), ("packet", 17, socket.SOCK_RAW, 0)]
for name, fam, typ, proto in cases:
    try:
        s = socket.socket(fam, typ, proto); print("OPEN", name)
    except OSError as e:
        print("refused", name, e.errno)
a, b = socket.socketpair(); a.send(b"x"); print("socketpair", b.recv(1))
import ctypes, os, platform
if platform.machine() == "x86_64":
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    # The x32 ABI's numbers (bit 30 set): socket(AF_INET, SOCK_STREAM), getpid, unshare.
    for name, nr, args in [("socket", 41, (2, 1, 0)), ("getpid", 39, ()), ("unshare", 272, (0x20000,))]:
        r = libc.syscall(ctypes.c_long(0x40000000 | nr), *[ctypes.c_long(a) for a in args])
        print("x32", name, "ran" if r >= 0 else "errno %d" % ctypes.get_errno())
import resource
# Craik's own limits (its parent here) are out of reach, even to read; its own stay usable.
for name, pid in [("parent", os.getppid()), ("own-pid", os.getpid())]:
    try:
        resource.prlimit(pid, resource.RLIMIT_CORE); print("prlimit", name, "ran")
    except OSError as e:
        print("prlimit", name, "errno", e.errno)
print("prlimit self", resource.prlimit(0, resource.RLIMIT_NOFILE)[0] > 0)
for name, call in [("setpriority-user", lambda: os.setpriority(os.PRIO_USER, 0, 5)),
                   ("sched-parent", lambda: os.sched_setaffinity(os.getppid(), {0}))]:
    try:
        call(); print(name, "ran")
    except OSError as e:
        print(name, "errno", e.errno)
os.nice(1); print("nice ok")
print("fsize", resource.getrlimit(resource.RLIMIT_FSIZE)[1], "core", resource.getrlimit(resource.RLIMIT_CORE)[1])
try:
    with open("out/big.bin", "wb") as f:
        f.truncate(9 << 30)
    print("truncate ran")
except OSError as e:
    print("truncate errno", e.errno)
PY
exit 0
"#;
    // Craik inherits descriptors 7, 8 and 9 from its caller (append to a file outside).
    let ex = probe_example(dir.path(), "trusted-local", script, &[]);
    let home = dir.path().join("home");
    let exe = assert_cmd::cargo::cargo_bin("craik");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec 7>>'{leak}' 8>>'{leak}' 9<'{leak}'; exec '{exe}' run '{ex}' --home '{home}'",
            leak = leak.display(),
            exe = exe.display(),
            ex = ex.display(),
            home = home.display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let id = crate::run_id_of(&out.stdout);
    let ws = home.join("runs").join(&id).join("workspace");
    let status = read(&ws, "status.txt");
    for field in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    assert!(
        read(&ws, "dev.txt").contains("DENIED"),
        "{}",
        read(&ws, "dev.txt")
    );
    assert_eq!(read(&ws, "devread.txt"), "");
    assert_eq!(read(&ws, "shadow.txt"), "");
    assert_eq!(read(&ws, "etc.txt"), "", "the whole of /etc is listable");
    assert_eq!(
        read(&ws, "fdwrite.txt"),
        "",
        "an inherited descriptor reached the command"
    );
    assert_eq!(std::fs::read_to_string(&leak).unwrap(), "");
    let sockets = read(&ws, "sockets.txt");
    assert!(!sockets.contains("OPEN"), "{sockets}");
    assert_eq!(sockets.matches("refused").count(), 8, "{sockets}");
    assert!(sockets.contains("socketpair b'x'"), "{sockets}");
    for refused in [
        "prlimit parent errno 1",
        "prlimit own-pid errno 1",
        "setpriority-user errno 1",
        "sched-parent errno 1",
    ] {
        assert!(sockets.contains(refused), "{refused}: {sockets}");
    }
    assert!(sockets.contains("prlimit self True"), "{sockets}");
    assert!(sockets.contains("nice ok"), "{sockets}");
    // Resource limits (outside testing: a 40 GB sparse file cost 91 s of hashing): files up
    // to 8 GiB, no core dumps.
    assert!(
        sockets.contains(&format!("fsize {} core 0", 8_u64 << 30)),
        "{sockets}"
    );
    assert!(sockets.contains("truncate errno 27"), "EFBIG: {sockets}");
    if cfg!(target_arch = "x86_64") {
        // Every x32 call answers ENOSYS (38), whatever it is. (On a kernel built without x32
        // this holds anyway; `seccomp::tests` checks the guard is the filter's first words.)
        for name in ["socket", "getpid", "unshare"] {
            assert!(
                sockets.contains(&format!("x32 {name} errno 38")),
                "{sockets}"
            );
        }
    }
    verify_run(&home, &id, false);
}

/// Craik started with `SIGCHLD` ignored (a parent's `SIG_IGN` survives `exec`) still waits
/// for its commands and records what they did (outside testing: every command was recorded
/// "not run" though it ran, because the kernel had reaped it first), and the command starts
/// with no signal ignored.
#[test]
fn issue_18_an_inherited_ignored_sigchld_does_not_falsify_the_record() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\nwhile read -r l; do case $l in SigIgn:*) echo \"$l\";; esac; done < /proc/self/status > out/sig.txt\necho ran > out/ran.txt\nexit 0\n";
    let ex = probe_example(dir.path(), "trusted-local", script, &[]);
    let home = dir.path().join("home");
    let exe = assert_cmd::cargo::cargo_bin("craik");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "trap '' CHLD; exec '{exe}' run '{ex}' --home '{home}'",
            exe = exe.display(),
            ex = ex.display(),
            home = home.display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let id = crate::run_id_of(&out.stdout);
    let ws = home.join("runs").join(&id).join("workspace");
    assert_eq!(read(&ws, "ran.txt"), "ran\n");
    assert_eq!(read(&ws, "sig.txt"), "SigIgn:\t0000000000000000\n");
    verify_run(&home, &id, false);
}

/// The same ambient checks as an unprivileged user (where `setpriv` exists): no capability
/// and no socket either way.
#[test]
fn issue_18_an_unprivileged_craik_confines_the_same() {
    if !confinement_available() || !rustix_is_root() || which("setpriv").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Also (outside testing): the mount namespace must be built for an unprivileged Craik too
    // (a non-dumpable Craik once made every child fail to write its uid map, so nothing was
    // read-only and the signing key could be chmod-ed), and System V IPC is refused.
    let script = "#!/bin/sh\nwhile read -r l; do case $l in CapEff:*|CapPrm:*|NoNewPrivs:*|Seccomp:*) echo \"$l\";; esac; done < /proc/self/status > out/status.txt\n/usr/bin/python3 -c 'import socket; socket.socket()' 2> out/sock.txt\nchmod 0666 ../../../keys/signing.key.pem 2> out/chmod.txt; echo \"rc $?\" >> out/chmod.txt\n/usr/bin/python3 -c 'import ctypes; print(ctypes.CDLL(None).shmget(0x5eed1, 4096, 0o1666))' > out/shm.txt\nexit 0\n";
    let ex = probe_example(dir.path(), "trusted-local", script, &[]);
    let home = dir.path().join("home");
    std::process::Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir.path())
        .status()
        .unwrap();
    let exe = assert_cmd::cargo::cargo_bin("craik");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(exe)
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let id = crate::run_id_of(&out.stdout);
    let ws = home.join("runs").join(&id).join("workspace");
    let status = read(&ws, "status.txt");
    assert!(status.contains("CapEff:\t0000000000000000"), "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    assert!(
        read(&ws, "sock.txt").contains("Permission denied"),
        "{}",
        read(&ws, "sock.txt")
    );
    let chmod = read(&ws, "chmod.txt");
    assert!(chmod.contains("Read-only file system"), "{chmod}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(home.join("keys/signing.key.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("WARNING"),
        "{}",
        crate::transcript(&out)
    );
    // System V IPC is refused (seccomp): no segment is made, none reaches the host.
    assert_eq!(read(&ws, "shm.txt").trim(), "-1");
    let ipcs = std::process::Command::new("ipcs")
        .arg("-m")
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&ipcs.stdout).contains("0x0005eed1"),
        "{}",
        String::from_utf8_lossy(&ipcs.stdout)
    );
}

fn rustix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

fn which(name: &str) -> Option<PathBuf> {
    ["/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Toolchain roots are readable, their credential files never are.
#[test]
fn issue_18_toolchain_credentials_are_never_readable() {
    if !confinement_available() {
        return;
    }
    let tools = tempfile::tempdir().unwrap();
    let cargo_home = tools.path().join("cargo");
    std::fs::create_dir_all(cargo_home.join("bin")).unwrap();
    std::fs::create_dir_all(cargo_home.join("registry")).unwrap();
    std::fs::create_dir_all(tools.path().join("rustup")).unwrap();
    std::fs::write(cargo_home.join("registry/ok.txt"), "fine\n").unwrap();
    let creds = [
        "credentials",
        "credentials.toml",
        ".npmrc",
        ".pypirc",
        ".netrc",
        ".git-credentials",
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".config/gh/hosts.yml",
        ".docker/config.json",
    ];
    for c in creds {
        let p = cargo_home.join(c);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "TOKEN-hunter2\n").unwrap();
    }
    let mut script = String::from("#!/bin/sh\ncat \"$CARGO_HOME/registry/ok.txt\" > out/ok.txt\n");
    for c in creds {
        script.push_str(&format!(
            "cat \"$CARGO_HOME/{c}\" 2>/dev/null | grep -q hunter2 && echo '{c}' >> out/read.txt\n"
        ));
    }
    script.push_str("ls -a \"$CARGO_HOME\" > out/listing.txt 2>&1\nexit 0\n");
    let cargo = cargo_home.display().to_string();
    let rustup = tools.path().join("rustup").display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let ex = probe_example(dir.path(), "trusted-local", &script, &[]);
    let home = dir.path().join("home");
    let out = crate::craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .args(["--toolchain", "rust"])
        .env("CARGO_HOME", &cargo)
        .env("RUSTUP_HOME", &rustup)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let id = crate::run_id_of(&out.stdout);
    let ws = home.join("runs").join(&id).join("workspace");
    assert_eq!(read(&ws, "ok.txt"), "fine\n");
    assert_eq!(read(&ws, "read.txt"), "", "credential files were readable");
    // The toolchain is signed into the run's inputs.
    let inputs = std::fs::read_to_string(home.join("runs").join(&id).join("inputs.json")).unwrap();
    assert!(inputs.contains(&cargo), "{inputs}");
    verify_run(&home, &id, false);
}

/// Real toolchains run confined under a `shell.test` grant with a write scope: `cargo test`
/// on a crate with a registry dependency (offline, from the cache), `npm test` and
/// `python3 -m pytest`. In CI a missing tool fails the test; elsewhere it is skipped, loudly.
#[test]
#[expect(
    clippy::print_stderr,
    reason = "a skipped toolchain must say so loudly"
)]
fn issue_18_real_toolchains_run_confined() {
    if !confinement_available() {
        return;
    }
    let ci = std::env::var_os("CI").is_some();
    let have = |program: &str, args: &[&str]| {
        std::process::Command::new(program)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str], bool);
    let cases: [Case<'_>; 3] = [
        (
            "rust",
            &["cargo", "test"],
            &["target/**"],
            &["--toolchain", "rust"],
            have("cargo", &["--version"]),
        ),
        (
            "node",
            &["npm", "test"],
            &[],
            &["--toolchain", "node"],
            have("npm", &["--version"]),
        ),
        (
            "python",
            &["python3", "-m", "pytest", "-q"],
            &[".pytest_cache/**"],
            &["--toolchain", "python"],
            have("python3", &["-m", "pytest", "--version"]),
        ),
    ];
    for (name, argv, writes, extra, available) in cases {
        if !available {
            assert!(
                !ci,
                "{name}: its toolchain is missing in CI (.ci/run installs it)"
            );
            eprintln!("SKIPPED {name}: toolchain not installed here");
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let steps = act(json!([
            {"id":"action_test","capability":"shell.test","operation":"execute","argv":argv,"timeout_ms":110000},
        ]));
        let prefix = argv.join(" ");
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[("shell.test", &[prefix.as_str()], &["execute"])],
            steps,
            &toolchain_project(),
        );
        grant_writes(&ex, 0, writes);
        let home = dir.path().join("home");
        let (out, id) = run(&ex, &home, extra);
        let outputs = std::fs::read_to_string(home.join("runs").join(&id).join("events.jsonl"))
            .unwrap_or_default();
        let text = format!("{}\n{outputs}", crate::transcript(&out));
        assert_eq!(out.status.code(), Some(0), "{name}: {text}");
        let o = outcomes(&home, &id);
        assert_eq!(o.len(), 1, "{name}: {text}");
        assert_eq!(o[0]["result"]["status"], "passed", "{name}: {}", o[0]);
        let summary = o[0]["result"]["summary"].as_str().unwrap();
        assert!(
            summary.contains("exited 0") && summary.contains("landlock abi"),
            "{summary}"
        );
        verify_run(&home, &id, false);
    }
}

/// One small project with a crate (registry dependency `itoa`, pinned by its lock file to
/// the version Craik's own lock file holds, so the cache has it), a Node package and a
/// pytest suite.
fn toolchain_project() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "Cargo.toml",
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"1\"\n",
        ),
        (
            "Cargo.lock",
            "# This file is automatically @generated by Cargo.\n# It is not intended for manual editing.\nversion = 4\n\n[[package]]\nname = \"itoa\"\nversion = \"1.0.18\"\nsource = \"registry+https://github.com/rust-lang/crates.io-index\"\nchecksum = \"8f42a60cbdf9a97f5d2305f08a87dc4e09308d1276d28c869c684d7777685682\"\n\n[[package]]\nname = \"tiny\"\nversion = \"0.1.0\"\ndependencies = [\n \"itoa\",\n]\n",
        ),
        (
            "src/lib.rs",
            "pub fn f(n: u64) -> String {\n    itoa::Buffer::new().format(n).to_owned()\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn formats() {\n        assert_eq!(super::f(42), \"42\");\n    }\n}\n",
        ),
        (
            "package.json",
            "{\"name\":\"tiny\",\"version\":\"1.0.0\",\"private\":true,\"scripts\":{\"test\":\"node test.js\"}}\n",
        ),
        (
            "test.js",
            "const assert = require('assert');\nassert.strictEqual(6 * 7, 42);\nconsole.log('node ok');\n",
        ),
        (
            "test_tiny.py",
            "def test_answer():\n    assert 6 * 7 == 42\n",
        ),
    ]
}

/// A fork chain (each process forks the next and exits at once) started by a command does not
/// outlive its step: the command's PID namespace ends with it (issue 30 item 5) or, where it
/// has none, Craik freezes every descendant before it kills any, so no generation escapes the
/// sweep; nothing writes into the workspace after the step's check.
#[test]
fn issue_18_a_fork_chain_does_not_outlive_its_step() {
    if !confinement_available() {
        return;
    }
    // Every generation starts the next in a new session (so no process-group kill reaches
    // it) and exits; the last one writes after the step has ended.
    let script = "#!/bin/sh\nn=${1:-300}\nif [ \"$n\" -gt 0 ]; then\n  ( setsid ./chain.sh $((n - 1)) & )\n  exit 0\nfi\nsleep 2\necho late > out/late.txt\n";
    let dir = tempfile::tempdir().unwrap();
    let steps = act(json!([
        {"id":"action_chain","capability":"shell.test","operation":"execute","argv":["./chain.sh"]},
    ]));
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("shell.test", &["./chain.sh"], &["execute"])],
        steps,
        &[("chain.sh", script), ("out/.keep", "")],
    );
    make_executable(&ex.join("workspace/chain.sh"));
    let home = dir.path().join("home");
    let (out, id) = run(&ex, &home, &[]);
    assert!(out.status.code().is_some(), "{}", crate::transcript(&out));
    std::thread::sleep(std::time::Duration::from_secs(3));
    let ws = home.join("runs").join(&id).join("workspace");
    assert!(
        !ws.join("out/late.txt").exists(),
        "a chain member wrote after the step"
    );
}

/// Metadata outside the write scope cannot change (a private mount namespace leaves every
/// other mount read-only), and no set-id file is ever made: a command's `chmod` of Craik's
/// signing key, of a file outside everything, of the workspace root or `.git/` fails or is
/// undone, and a setuid copy of a shell in its scope is refused.
#[test]
fn issue_18_metadata_outside_the_write_scope_cannot_change() {
    use std::os::unix::fs::PermissionsExt;
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "v").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let home = dir.path().join("home");
    let script = format!(
        "#!/bin/sh\nchmod 0644 '{key}' 2>/dev/null && echo key >> out/changed.txt\nchmod 0777 '{victim}' 2>/dev/null && echo victim >> out/changed.txt\ncp /bin/sh out/rootsh && chmod 4755 out/rootsh 2>/dev/null && echo setuid >> out/changed.txt\nchmod 0777 . .git 2>/dev/null\nexit 0\n",
        key = home.join("keys/signing.key.pem").display(),
        victim = victim.display(),
    );
    let ex = probe_example(
        dir.path(),
        "trusted-local",
        &script,
        &[(".git/config", "[core]\n")],
    );
    let (out, id) = run(&ex, &home, &[]);
    let text = crate::transcript(&out);
    let ws = home.join("runs").join(&id).join("workspace");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(read(&ws, "changed.txt"), "", "{text}");
    assert_eq!(mode(&home.join("keys/signing.key.pem")), 0o600);
    assert_eq!(mode(&victim), 0o600);
    assert_eq!(mode(&ws.join("out/rootsh")) & 0o6000, 0);
    assert_ne!(mode(&ws), 0o777, "{text}");
    assert_ne!(mode(&ws.join(".git")), 0o777, "{text}");
    // The receipt names the confinement that stopped them.
    let o = outcomes(&home, &id);
    let summary = o[0]["result"]["summary"].as_str().unwrap();
    assert!(summary.contains("other mounts read-only"), "{summary}");
    verify_run(&home, &id, false);
}

/// A workspace inside Craik's home (its keys, its runs) is refused before anything runs.
#[test]
fn issue_18_a_workspace_inside_the_home_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[],
        act(json!([])),
        &[("a.md", "a\n")],
    );
    let home = dir.path().join("home");
    // A first run creates the home and its keys.
    let (out, _) = run(&ex, &home, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    for inside in [home.join("keys"), home.join("runs"), home.clone()] {
        let before = walk(&home).len();
        let out = crate::craik()
            .arg("run")
            .arg(ex.join("task_request.json"))
            .arg("--runner")
            .arg(format!("fixture:{}", ex.join("scenario.json").display()))
            .arg("--envelope")
            .arg(ex.join("policy_envelope.json"))
            .arg("--workspace")
            .arg(&inside)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}: {}",
            inside.display(),
            crate::transcript(&out)
        );
        assert!(err.contains("inside"), "{err}");
        assert_eq!(
            walk(&home).len(),
            before,
            "{}: a refused run left files",
            inside.display()
        );
    }
}

/// A write scope the sandbox could not enforce exactly, or one on a grant that runs no
/// command, is refused when the run starts, naming the grant, the field and the value.
#[test]
fn issue_18_unenforceable_write_scopes_are_refused_at_load() {
    for (capability, writes, expect) in [
        ("shell.test", "*.log", "`*.log`"),
        ("shell.test", "../out/**", "`../out/**`"),
        ("shell.test", ".git/**", "protected"),
        ("repo.read", "out/**", "shell.* grants only"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let ex = scratch_example(
            dir.path(),
            "trusted-local",
            &[(capability, &["./probe.sh"], &["execute"])],
            act(json!([])),
            &[("a.md", "a\n")],
        );
        grant_writes(&ex, 0, &[writes]);
        let home = dir.path().join("home");
        let (out, _) = run(&ex, &home, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{}", crate::transcript(&out));
        assert!(
            err.contains("grant `grant_g0`") && err.contains(expect),
            "{writes}: {err}"
        );
        assert!(!home.join("runs").exists() || walk(&home.join("runs")).is_empty());
    }
}

/// Outside testing (round 3): a command rewrote an ADR in a repository without a craik.toml,
/// and files the intent lock puts out of scope, and the run completed. Without a config ADRs
/// are immutable; the intent lock's out-of-scope paths are immutable to commands: the sandbox
/// keeps them read-only and the check undoes what got through (a hard link included).
#[test]
fn issue_18_commands_never_change_adrs_or_out_of_scope_paths() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\n\
        echo 'Status: superseded' > docs/adr/0001.md 2> out/adr.txt; echo \"adr $?\" >> out/adr.txt\n\
        echo 'pub fn evil() {}' > src/lib.rs 2> out/src.txt; echo \"src $?\" >> out/src.txt\n\
        echo new > src/new.rs 2>> out/src.txt\n\
        ln docs/guide.md docs/adr/0002.md 2>> out/adr.txt\n\
        echo ok > docs/guide.md\n\
        exit 0\n";
    let ex = probe_example(
        dir.path(),
        "trusted-local",
        script,
        &[
            ("docs/adr/0001.md", "# ADR 1\nStatus: accepted\n"),
            ("docs/guide.md", "# Guide\n"),
            ("src/lib.rs", "pub fn f() {}\n"),
        ],
    );
    std::fs::write(
        ex.join("intent_lock.json"),
        serde_json::to_string_pretty(&json!({
            "schema": "craik.intent_lock", "version": "0.1.0", "id": "intent_scratch",
            "task_id": "task_scratch", "original_request": "Fix the docs.",
            "objective": "Docs only.", "accepted_interpretation": "Docs, not code.",
            "in_scope": [], "out_of_scope": ["src/"], "allowed_autonomy": [],
            "stop_conditions": [], "scope_change_rules": [],
            "created_at": "2026-11-20T09:01:00Z"
        }))
        .unwrap(),
    )
    .unwrap();
    let home = dir.path().join("home");
    let (out, id) = run(&ex, &home, &[]);
    let text = crate::transcript(&out);
    let ws = home.join("runs").join(&id).join("workspace");
    assert_eq!(
        std::fs::read_to_string(ws.join("docs/adr/0001.md")).unwrap(),
        "# ADR 1\nStatus: accepted\n",
        "{text}"
    );
    assert!(!ws.join("docs/adr/0002.md").exists(), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.join("src/lib.rs")).unwrap(),
        "pub fn f() {}\n",
        "{text}"
    );
    assert!(!ws.join("src/new.rs").exists(), "{text}");
    // The sandbox refused the writes themselves; what is in scope went through.
    assert!(
        !read(&ws, "adr.txt").contains("adr 0"),
        "{}",
        read(&ws, "adr.txt")
    );
    assert!(
        !read(&ws, "src.txt").contains("src 0"),
        "{}",
        read(&ws, "src.txt")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("docs/guide.md")).unwrap(),
        "ok\n"
    );
    verify_run(&home, &id, false);
}

/// Outside testing (round 3b): a command that planted and then slept until the operator's
/// Ctrl-C (or a CI cancel) kept its plant: an interrupted Craik killed it and exited. Now the
/// interrupt kills the command, checks the workspace and undoes what is forbidden first.
#[test]
fn issue_18_an_interrupt_still_checks_the_workspace() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\nmkdir -p out/sub/.git\necho '[core]' > out/sub/.git/config\necho evil > out/.envrc\necho fine > out/fine.txt\ntouch out/started\nsleep 60\n";
    let ex = probe_example(dir.path(), "trusted-local", script, &[]);
    let home = dir.path().join("home");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let ws = loop {
        let found = std::fs::read_dir(home.join("runs"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("workspace"))
            .find(|w| w.join("out/started").exists());
        if let Some(ws) = found {
            break ws;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(ws.join("out/.envrc").exists());
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    // The first signal stops the run cleanly (issue 22): the command is killed, its outcome
    // is checked and signed like any other, and the run is signed interrupted.
    assert!(stderr.contains("SIGTERM: stopping the run"), "{stderr}");
    let run_dir = ws.parent().unwrap();
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "interrupted", "{stderr}");
    assert!(!ws.join("out/.envrc").exists(), "{stderr}");
    assert!(!ws.join("out/sub/.git").exists(), "{stderr}");
    assert!(ws.join("out/fine.txt").exists(), "in scope: kept");
}

/// Outside testing round 5: directories protected by what they hold (a bare git repository
/// under any name, a Craik task directory) are read-only to commands, not only checked after;
/// the write roots Craik makes itself are not blamed on the command; an intent-lock glob is
/// refused at load rather than protecting nothing.
#[test]
fn issue_18_round_5_content_protected_dirs_own_mkdirs_and_intent_globs() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\n\
        echo evil > vault/config 2> out/bare.txt; echo \"bare $?\" >> out/bare.txt\n\
        chmod 777 vault 2>> out/bare.txt; echo \"chmod $?\" >> out/bare.txt\n\
        echo '{}' > tasks/b/task_request.json 2> out/task.txt; echo \"task $?\" >> out/task.txt\n\
        exit 0\n";
    let ex = probe_example(
        dir.path(),
        "trusted-local",
        script,
        &[
            ("vault/HEAD", "ref: refs/heads/main\n"),
            ("vault/config", "[core]\n\tbare = true\n"),
            ("vault/objects/.keep", ""),
            ("vault/refs/.keep", ""),
            (
                "tasks/b/task_request.json",
                "{\"schema\":\"craik.task_request\"}\n",
            ),
        ],
    );
    let home = dir.path().join("home");
    let (out, id) = run(&ex, &home, &[]);
    let text = crate::transcript(&out);
    let ws = home.join("runs").join(&id).join("workspace");
    assert!(
        !read(&ws, "bare.txt").contains("bare 0"),
        "{}",
        read(&ws, "bare.txt")
    );
    assert!(
        !read(&ws, "bare.txt").contains("chmod 0"),
        "{}",
        read(&ws, "bare.txt")
    );
    assert!(
        !read(&ws, "task.txt").contains("task 0"),
        "{}",
        read(&ws, "task.txt")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("vault/config")).unwrap(),
        "[core]\n\tbare = true\n",
        "{text}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(
        std::fs::metadata(ws.join("vault"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o777
    );
    // A write scope whose directory does not exist yet: Craik makes it, the command writes
    // in it, nothing is forbidden and the step succeeds.
    let dir2 = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\necho built > target/debug/app\n";
    let ex = probe_example(dir2.path(), "trusted-local", script, &[]);
    grant_writes(&ex, 0, &["target/debug/**"]);
    let home = dir2.path().join("home");
    let (out, id) = run(&ex, &home, &[]);
    let text = crate::transcript(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let ws = home.join("runs").join(&id).join("workspace");
    assert_eq!(
        std::fs::read_to_string(ws.join("target/debug/app")).unwrap(),
        "built\n",
        "{text}"
    );
    let o = outcomes(&home, &id);
    assert!(
        !o[0]["result"]["summary"]
            .as_str()
            .unwrap()
            .contains("FORBIDDEN"),
        "{}",
        o[0]
    );
    // A glob in an intent lock's scope: refused before anything runs, naming it.
    std::fs::write(
        ex.join("intent_lock.json"),
        serde_json::to_string_pretty(&json!({
            "schema": "craik.intent_lock", "version": "0.1.0", "id": "intent_scratch",
            "task_id": "task_scratch", "original_request": "Fix the docs.",
            "objective": "Docs only.", "accepted_interpretation": "Docs, not code.",
            "in_scope": [], "out_of_scope": ["src/vendor/**"], "allowed_autonomy": [],
            "stop_conditions": [], "scope_change_rules": [],
            "created_at": "2026-11-20T09:01:00Z"
        }))
        .unwrap(),
    )
    .unwrap();
    let out = crate::craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(dir2.path().join("home2"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", crate::transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("out_of_scope") && err.contains("src/vendor/**") && err.contains("not a glob"),
        "{err}"
    );
}

/// A real project (the workspace is the repository) run with `task new`'s grant for
/// `sh ./a.sh`, trusted-local: `files` are written, `links` are hard links `(name in the
/// repo, file outside it)`. Returns (home, run id, transcript).
fn project_run(
    dir: &Path,
    script: &str,
    files: &[(&str, &str)],
    links: &[(&str, &Path)],
    git_config: &[(&str, &str)],
) -> (PathBuf, String, String) {
    project_run_with(dir, script, files, links, git_config, &|_| {})
}

/// [`project_run`], with `plant` run on the repository after its files and configuration are
/// written and before the first commit.
fn project_run_with(
    dir: &Path,
    script: &str,
    files: &[(&str, &str)],
    links: &[(&str, &Path)],
    git_config: &[(&str, &str)],
    plant: &dyn Fn(&Path),
) -> (PathBuf, String, String) {
    let repo = dir.join("repo");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&repo)
            .args(["-c", "user.email=a@b", "-c", "user.name=a"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", crate::transcript(&out));
    };
    std::fs::create_dir_all(repo.join("out")).unwrap();
    git(&["init", "-q", "."]);
    std::fs::write(repo.join("a.sh"), script).unwrap();
    std::fs::write(repo.join("out/.keep"), "").unwrap();
    for (name, text) in files {
        let path = repo.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    for (name, target) in links {
        let path = repo.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::hard_link(target, path).unwrap();
    }
    for (key, value) in git_config {
        git(&["config", key, value]);
    }
    plant(&repo);
    let new = crate::craik()
        .current_dir(&repo)
        .args([
            "task",
            "new",
            "--title",
            "t",
            "--project",
            "project_p",
            "--goal",
            "g",
        ])
        .args(["--requested-by", "user:op", "--verify", "sh ./a.sh"])
        .args(["--profile", "trusted-local", "--id", "task_a"])
        .output()
        .unwrap();
    assert_eq!(new.status.code(), Some(0), "{}", crate::transcript(&new));
    git(&["add", "-A"]);
    git(&["commit", "-qm", "init"]);
    let scenario = dir.join("scenario.json");
    std::fs::write(
        &scenario,
        serde_json::to_vec(&json!({
            "schema": "craik.fixture_scenario", "version": "0.1.0", "id": "scenario_x",
            "description": "x", "runner_trust": "medium",
            "steps": [
                {"phase": "plan", "summary": "p"},
                {"phase": "act", "summary": "a", "proposed_actions": [
                    {"id": "action_a0", "capability": "shell.test", "operation": "execute",
                     "argv": ["sh", "./a.sh"], "timeout_ms": 30000}]},
                {"phase": "observe", "summary": "o"},
                {"phase": "evaluate", "summary": "e", "next": "stop"}
            ]
        }))
        .unwrap(),
    )
    .unwrap();
    let home = dir.join("home");
    let out = crate::craik()
        .current_dir(&repo)
        .arg("run")
        .arg(".craik-tasks/task_a")
        .arg("--home")
        .arg(&home)
        .arg("--runner")
        .arg(format!("fixture:{}", scenario.display()))
        .output()
        .unwrap();
    let id = crate::run_id_of(&out.stdout);
    (home, id, crate::transcript(&out))
}

/// Round 6, R6-H: a file of the write scope hard-linked to a file outside the workspace (a
/// pnpm store) is read-only to commands; nothing outside changes, and the run says why.
#[test]
fn issue_18_round_6_hard_links_out_of_the_workspace_are_read_only() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let outside = store.join("index.js");
    std::fs::write(&outside, "module.exports = 1\n").unwrap();
    let script = "echo pwned >> node_modules/lodash/index.js 2> out/w.txt; echo \"append $?\" >> out/w.txt\n\
        printf x | dd of=node_modules/lodash/index.js conv=notrunc 2>> out/w.txt; echo \"dd $?\" >> out/w.txt\n\
        chmod 777 node_modules/lodash/index.js 2>> out/w.txt; echo \"chmod $?\" >> out/w.txt\n\
        ln node_modules/lodash/index.js out/again 2>> out/w.txt; echo \"link $?\" >> out/w.txt\n\
        echo fine > out/ok.txt\n";
    let (home, id, text) = project_run(
        dir.path(),
        script,
        &[(".gitignore", "node_modules\nout/*.txt\nout/again\n")],
        &[("node_modules/lodash/index.js", &outside)],
        &[],
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "module.exports = 1\n",
        "{text}"
    );
    let w = std::fs::read_to_string(dir.path().join("repo/out/w.txt")).unwrap();
    for what in ["append", "dd", "chmod", "link"] {
        assert!(!w.contains(&format!("{what} 0")), "{what}: {w}\n{text}");
    }
    // The rest of the write scope stays writable.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("repo/out/ok.txt")).unwrap(),
        "fine\n",
        "{text}"
    );
    assert!(!id.is_empty(), "{text}");
    assert!(home.join("runs").join(&id).exists());
}

/// Round 6, R6-C, generated: an intent-lock entry that looks like a path but would protect
/// nothing (absolute, `..`, a backslash, edge whitespace, a control character; also as a
/// `path:` stop condition) is refused before anything runs, naming field and entry; prose
/// (inner spaces) is kept and the run goes on.
#[test]
fn issue_18_round_6_intent_lock_entries_are_paths_or_prose() {
    let dir = tempfile::tempdir().unwrap();
    let ex = probe_example(dir.path(), "trusted-local", "#!/bin/sh\nexit 0\n", &[]);
    let lock = |out_of_scope: &str, stop: &str| {
        std::fs::write(
            ex.join("intent_lock.json"),
            serde_json::to_string_pretty(&json!({
                "schema": "craik.intent_lock", "version": "0.1.0", "id": "intent_scratch",
                "task_id": "task_scratch", "original_request": "Fix the docs.",
                "objective": "Docs only.", "accepted_interpretation": "Docs, not code.",
                "in_scope": [], "out_of_scope": [out_of_scope], "allowed_autonomy": [],
                "stop_conditions": [stop], "scope_change_rules": [],
                "created_at": "2026-11-20T09:01:00Z"
            }))
            .unwrap(),
        )
        .unwrap();
    };
    let run_code = |n: usize| {
        let out = crate::craik()
            .arg("run")
            .arg(&ex)
            .arg("--home")
            .arg(dir.path().join(format!("home{n}")))
            .output()
            .unwrap();
        (out.status.code(), crate::transcript(&out))
    };
    let bad = [
        ("/src/vendor/", "absolute"),
        ("/work/src/vendor/", "absolute"),
        (" src/vendor/", "whitespace"),
        ("src/vendor/ ", "whitespace"),
        ("src/vendor/\t", "control"),
        ("../src/vendor/", "`..`"),
        ("src/../../vendor", "`..`"),
        ("src\\vendor/", "backslash"),
        ("src/vendor/\u{7}", "control"),
        // Round 7: look-alikes and encodings.
        ("\u{ff53}rc/vendor/", "ASCII"),
        ("src\u{2215}vendor/", "ASCII"),
        ("src/vendo\u{301}r/", "ASCII"),
        ("src%2Fvendor/", "percent"),
        ("src/vendor%2F", "percent"),
        // Round 8: a stop condition's form, prose naming a path.
        ("path:src/vendor/", "stop condition"),
        ("src/vendor/ (third party)", "prose naming a path"),
    ];
    for (n, (entry, why)) in bad.iter().enumerate() {
        lock(entry, "capability:shell.network");
        let (code, text) = run_code(n);
        assert_eq!(code, Some(3), "{entry:?}: {text}");
        assert!(
            text.contains("out_of_scope") && text.contains(why),
            "{entry:?}: {text}"
        );
        if entry.starts_with(' ') {
            // `path: X` is `path:X`: a space after the colon is allowed.
            continue;
        }
        lock("src/vendor/", &format!("path:{entry}"));
        let (code, text) = run_code(100 + n);
        assert_eq!(code, Some(3), "path:{entry:?}: {text}");
        assert!(
            text.contains("stop_conditions") && text.contains(why),
            "path:{entry:?}: {text}"
        );
    }
    // Prose is kept for the record and the run proceeds; `path: X` is `path:X`.
    lock("Policy enforcement", "path: docs/adr/");
    let (code, text) = run_code(999);
    assert_eq!(code, Some(0), "{text}");
}

/// Round 7: what the repository's git configuration names — a hooks directory (existing or
/// not), an included file, an alias's and a filter's script — is read-only to commands: each
/// write fails or is undone, and the record names it.
#[test]
fn issue_18_round_7_what_git_configuration_names_is_protected() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = "for f in out/hooks/pre-commit out/s/lint.sh out/s/clean.sh out/s/git.inc; do\n\
          mkdir -p $(dirname $f) 2>/dev/null; echo 'touch /tmp/pwned' >> $f 2>/dev/null; echo \"$f $?\" >> out/r/w.txt\n\
        done\n\
        echo fine > out/r/ok.txt\n";
    let (home, id, text) = project_run(
        dir.path(),
        script,
        &[
            (".gitignore", "out/r/\n"),
            ("out/r/.keep", ""),
            ("out/s/lint.sh", "echo lint\n"),
            ("out/s/clean.sh", "cat\n"),
            ("out/s/git.inc", "[core]\n"),
        ],
        &[],
        &[
            ("core.hooksPath", "out/hooks"),
            ("alias.lint", "!sh out/s/lint.sh"),
            ("filter.x.clean", "./out/s/clean.sh"),
            ("include.path", "../out/s/git.inc"),
        ],
    );
    let repo = dir.path().join("repo");
    assert_eq!(
        std::fs::read_to_string(repo.join("out/s/lint.sh")).unwrap(),
        "echo lint\n",
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("out/s/clean.sh")).unwrap(),
        "cat\n",
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("out/s/git.inc")).unwrap(),
        "[core]\n",
        "{text}"
    );
    assert!(!repo.join("out/hooks/pre-commit").exists(), "{text}");
    assert_eq!(
        std::fs::read_to_string(repo.join("out/r/ok.txt")).unwrap(),
        "fine\n",
        "{text}"
    );
    let w = std::fs::read_to_string(repo.join("out/r/w.txt")).unwrap();
    assert_eq!(w.lines().count(), 4, "{w}");
    assert!(w.lines().all(|l| !l.ends_with(" 0")), "{w}\n{text}");
    assert!(!id.is_empty() && home.join("runs").join(&id).is_dir());
}

/// Round 7 (R7-6): a protected file (CI workflow, `.envrc`, an ADR) hard-linked into the write
/// scope under another name is read-only under that name too: nothing writes through it.
#[test]
fn issue_18_round_7_protected_files_linked_into_the_scope_are_read_only() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let protected = [".github/workflows/ci.yml", ".envrc", "docs/adr/0001.md"];
    for p in protected {
        let f = repo.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, format!("{p}\n")).unwrap();
    }
    let links: Vec<(String, PathBuf)> = protected
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("out/l/{i}"), repo.join(p)))
        .collect();
    let links: Vec<(&str, &Path)> = links
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_path()))
        .collect();
    let script = "for f in out/l/0 out/l/1 out/l/2; do echo pwned >> $f 2>/dev/null; echo \"$f $?\" >> out/r/w.txt; done\n";
    let (_, _, text) = project_run(
        dir.path(),
        script,
        &[(".gitignore", "out/r/\n"), ("out/r/.keep", "")],
        &links,
        &[],
    );
    for p in protected {
        assert_eq!(
            std::fs::read_to_string(repo.join(p)).unwrap(),
            format!("{p}\n"),
            "{text}"
        );
    }
    let w = std::fs::read_to_string(repo.join("out/r/w.txt")).unwrap();
    assert!(
        w.lines().count() == 3 && w.lines().all(|l| !l.ends_with(" 0")),
        "{w}\n{text}"
    );
}

/// Issue 30 item 7: a relative `--home` is made absolute before anything derives from it: a
/// command's `HOME` and `TMPDIR` are absolute, outside the workspace.
#[test]
fn issue_30_a_relative_home_gives_commands_absolute_home_and_tmpdir() {
    let dir = tempfile::tempdir().unwrap();
    let ex = probe_example(
        dir.path(),
        "trusted-local",
        "#!/bin/sh\nprintf '%s\\n%s\\n' \"$HOME\" \"$TMPDIR\" > out/env.txt\n",
        &[],
    );
    grant_writes(&ex, 0, &["out/**"]);
    let out = crate::craik()
        .current_dir(dir.path())
        .arg("run")
        .arg(&ex)
        .args(["--home", "rel/home"])
        .output()
        .unwrap();
    let id = crate::run_id_of(&out.stdout);
    let home = dir.path().join("rel/home");
    assert!(
        home.join("runs").join(&id).is_dir(),
        "{}",
        crate::transcript(&out)
    );
    let ws = home.join("runs").join(&id).join("workspace");
    let env = read(&ws, "env.txt");
    let lines: Vec<&str> = env.lines().collect();
    assert_eq!(lines.len(), 2, "{env}\n{}", crate::transcript(&out));
    for l in lines {
        assert!(l.starts_with('/'), "{l}");
        assert!(!Path::new(l).starts_with(&ws), "{l}");
        assert!(
            Path::new(l).starts_with(dir.path().canonicalize().unwrap())
                || Path::new(l).starts_with(dir.path()),
            "{l}"
        );
    }
}

/// Issue 30 item 2: what the operator's git runs is asked of git, so each spelling the
/// replaced parser read differently — a BOM before `[core]`, a comment line ending in `\`, an
/// absolute `core.hooksPath` through a linked directory, the key after the first MiB, an
/// include — and a hooks file or the hooks directory linked to tracked files (no unusual
/// configuration at all) is protected: a granted command rewrites or plants the hook, and the
/// operator's real `git commit` afterwards runs nothing planted.
#[test]
fn issue_30_the_operators_next_git_commit_runs_nothing_planted() {
    if !confinement_available() {
        return;
    }
    type Plant = Box<dyn Fn(&Path, &Path)>;
    let append = |text: Vec<u8>| -> Plant {
        Box::new(move |repo: &Path, _: &Path| {
            let path = repo.join(".git/config");
            let mut config = std::fs::read(&path).unwrap();
            config.extend_from_slice(&text);
            std::fs::write(path, config).unwrap();
        })
    };
    let hook = "#!/bin/sh\nexit 0\n";
    let cases: Vec<(&str, Plant)> = vec![
        (
            "bom",
            Box::new(|repo: &Path, _: &Path| {
                let path = repo.join(".git/config");
                let mut config = b"\xef\xbb\xbf[core]\n\thooksPath = out/hooks\n".to_vec();
                config.extend(std::fs::read(&path).unwrap());
                std::fs::write(path, config).unwrap();
            }),
        ),
        (
            "comment continuation",
            append(b"[core]\n# a note \\\n\thooksPath = out/hooks\n".to_vec()),
        ),
        ("oversized", {
            let mut text = b"[user]\n".to_vec();
            for _ in 0..(1 << 20) / 30 + 100 {
                text.extend_from_slice(b"# padding padding padding pad\n");
            }
            text.extend_from_slice(b"[core]\n\thooksPath = out/hooks\n");
            append(text)
        }),
        (
            "absolute through a link",
            Box::new(|repo: &Path, dir: &Path| {
                std::os::unix::fs::symlink(repo, dir.join("via")).unwrap();
                let path = repo.join(".git/config");
                let mut config = std::fs::read(&path).unwrap();
                config.extend_from_slice(
                    format!(
                        "[core]\n\thooksPath = {}\n",
                        dir.join("via/out/hooks").display()
                    )
                    .as_bytes(),
                );
                std::fs::write(path, config).unwrap();
            }),
        ),
        (
            "include",
            append(b"[include]\n\tpath = ../out/inc/git.inc\n".to_vec()),
        ),
        (
            "hooks file linked to a tracked file",
            Box::new(|repo: &Path, _: &Path| {
                std::os::unix::fs::symlink(
                    "../../out/tracked/pre-commit",
                    repo.join(".git/hooks/pre-commit"),
                )
                .unwrap();
            }),
        ),
        (
            "hooks directory linked to a tracked one",
            Box::new(|repo: &Path, _: &Path| {
                std::fs::remove_dir_all(repo.join(".git/hooks")).unwrap();
                std::os::unix::fs::symlink("../out/tracked-hooks", repo.join(".git/hooks"))
                    .unwrap();
            }),
        ),
    ];
    let mut ran = Vec::new();
    for (what, plant) in cases {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let marker = dir.join("planted-hook-ran");
        let payload = format!("#!/bin/sh\ntouch {}\n", marker.display());
        let script = format!(
            "for f in out/hooks/pre-commit out/tracked/pre-commit out/tracked-hooks/pre-commit out/h2/pre-commit; do\n\
               mkdir -p $(dirname $f) 2>/dev/null; printf '{payload}' > $f 2>/dev/null; chmod +x $f 2>/dev/null\n\
             done\n\
             printf '[core]\\n\\thooksPath = out/h2\\n' >> out/inc/git.inc 2>/dev/null\n\
             echo fine > out/r/ok.txt\n",
            payload = payload.replace('\n', "\\n"),
        );
        let (_, _, text) = project_run_with(
            dir,
            &script,
            &[
                (".gitignore", "out/r/\n"),
                ("out/r/.keep", ""),
                ("out/tracked/pre-commit", hook),
                ("out/tracked-hooks/README", "hooks\n"),
                ("out/inc/git.inc", "[user]\n"),
            ],
            &[],
            &[],
            &|repo| {
                make_executable(&repo.join("out/tracked/pre-commit"));
                plant(repo, dir);
            },
        );
        let repo = dir.join("repo");
        assert_eq!(
            std::fs::read_to_string(repo.join("out/r/ok.txt")).unwrap_or_default(),
            "fine\n",
            "{what}: the command did not run\n{text}"
        );
        // The operator's next commit, with the operator's git and environment.
        let commit = std::process::Command::new("git")
            .current_dir(&repo)
            .args(["-c", "user.email=a@b", "-c", "user.name=a"])
            .args(["commit", "-q", "--allow-empty", "-m", "after the run"])
            .output()
            .unwrap();
        if marker.exists() || !commit.status.success() {
            ran.push(format!(
                "{what}: planted hook ran: {}\n{}\n{text}",
                marker.exists(),
                crate::transcript(&commit)
            ));
        }
    }
    assert!(ran.is_empty(), "{}", ran.join("\n\n"));
}

/// Issue 30 item 2: `craik run` names the hooks git will run (through their links) and says
/// that what a hook runs in turn is not modelled.
#[test]
fn issue_30_craik_run_names_the_hooks_it_found() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, _, text) = project_run_with(
        dir.path(),
        "true\n",
        &[("tools/pre-commit", "#!/bin/sh\nexit 0\n")],
        &[],
        &[],
        &|repo| {
            make_executable(&repo.join("tools/pre-commit"));
            std::os::unix::fs::symlink(
                "../../tools/pre-commit",
                repo.join(".git/hooks/pre-commit"),
            )
            .unwrap();
        },
    );
    assert!(
        text.contains(
            "craik: git hooks found (protected from commands): .git/hooks/pre-commit -> tools/pre-commit\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("craik: what a hook runs in turn (a script it calls, husky's tracked scripts) is not modelled and not protected: review the hooks\n"),
        "{text}"
    );
}

/// Issue 30 item 8: a command that fails writing a protected path inside its write scope (an
/// ADR under a `**` scope) says so in its outcome, naming the path.
#[test]
fn issue_30_a_write_to_a_protected_path_says_why_it_failed() {
    if !confinement_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ex = probe_example(
        dir.path(),
        "trusted-local",
        "#!/bin/sh\nset -e\ntouch docs/adr/0001-record.md\n",
        &[("docs/adr/0001-record.md", "# ADR 1\n")],
    );
    grant_writes(&ex, 0, &["**"]);
    let home = dir.path().join("home");
    let (out, id) = run(&ex, &home, &[]);
    let o = outcomes(&home, &id);
    let summary = o[0]["result"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("read-only inside its write scope") && summary.contains("`docs/adr`"),
        "{summary}\n{}",
        crate::transcript(&out)
    );
}

/// Issue 30 item 5: how a run of `script` (as `./probe.sh`, one action, `timeout_ms`) went,
/// as root or as an unprivileged user (`setpriv`); `None` where that cannot be tried.
fn issue_30_run(
    dir: &Path,
    script: &str,
    timeout_ms: u64,
    unprivileged: bool,
) -> Option<(Output, PathBuf, String, std::time::Duration)> {
    if !confinement_available()
        || (unprivileged && (!rustix_is_root() || which("setpriv").is_none()))
    {
        return None;
    }
    let steps = act(json!([
        {"id":"action_probe","capability":"shell.test","operation":"execute","argv":["./probe.sh"],"timeout_ms":timeout_ms},
    ]));
    let ex = scratch_example(
        dir,
        "trusted-local",
        &[("shell.test", &["./probe.sh"], &["execute"])],
        steps,
        &[("probe.sh", script), ("out/.keep", "")],
    );
    make_executable(&ex.join("workspace/probe.sh"));
    let home = dir.join("home");
    let mut command = if unprivileged {
        std::process::Command::new("chmod")
            .args(["-R", "a+rwX"])
            .arg(dir)
            .status()
            .unwrap();
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(assert_cmd::cargo::cargo_bin("craik"))
            .env("HOME", dir);
        c
    } else {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
    };
    let started = std::time::Instant::now();
    let out = command
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .output()
        .unwrap();
    let took = started.elapsed();
    let id = crate::run_id_of(&out.stdout);
    Some((out, home, id, took))
}

/// Every live process whose command line holds `token`.
fn processes_holding(token: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            text.contains(token)
                .then(|| format!("{}: {text}", e.file_name().to_string_lossy()))
        })
        .collect()
}

/// Whether a command ran as pid 2 of a PID namespace of its own (its init being pid 1): where
/// Craik runs as root, or unprivileged with private mounts (the same user namespace).
fn issue_30_contained(ws: &Path, out: &Output, unprivileged: bool) -> bool {
    let pid = read(ws, "pid.txt");
    let expected = !unprivileged || !String::from_utf8_lossy(&out.stderr).contains("WARNING");
    if expected {
        assert_eq!(pid.trim(), "2", "{}", crate::transcript(out));
    }
    pid.trim() == "2"
}

/// Issue 30 item 5 (outside testing: a fork chain kept Craik in its sweep for 54 s until the
/// un-reaped zombies filled the pid table): a fork chain — each generation starts the next and
/// exits, every other one in a new session — still running when its 10 s step times out ends
/// with the step, promptly, and nothing of it survives. The chain is bounded (5000
/// generations), so even a Craik without PID namespaces could not fill the pid table with it.
#[test]
#[allow(clippy::print_stderr, reason = "skips and measured times must be seen")]
fn issue_30_a_fork_chain_ends_with_its_step() {
    for unprivileged in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let token = format!("chain-{}", std::process::id());
        let script = format!(
            "#!/bin/sh\nif [ \"$1\" = {token} ]; then\n  n=$2\n  echo $n >> out/gen.txt\n  if [ \"$n\" -gt 0 ]; then\n    if [ $((n % 2)) = 0 ]; then ( setsid ./probe.sh {token} $((n - 1)) & ); else ( ./probe.sh {token} $((n - 1)) & ); fi\n  fi\n  exit 0\nfi\necho $$ > out/pid.txt\n./probe.sh {token} 5000\nexec sleep 60\n"
        );
        let Some((out, home, id, took)) = issue_30_run(dir.path(), &script, 10_000, unprivileged)
        else {
            continue;
        };
        eprintln!(
            "fork chain under a 10 s step (unprivileged: {unprivileged}): the run took {took:?}"
        );
        let ws = home.join("runs").join(&id).join("workspace");
        issue_30_contained(&ws, &out, unprivileged);
        let outcome = outcomes(&home, &id);
        let text = serde_json::to_string(&outcome).unwrap();
        assert!(text.contains("timed out"), "{text}");
        // The step ends at its timeout, not after a sweep racing the chain.
        assert!(
            took < std::time::Duration::from_secs(40),
            "took {took:?}: {}",
            crate::transcript(&out)
        );
        let generation = read(&ws, "gen.txt");
        let last = generation.lines().last().unwrap_or_default();
        assert!(
            last.parse::<u32>().unwrap_or(1) > 0,
            "the chain ran to its end before the timeout; nothing was tested"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert_eq!(processes_holding(&token), Vec::<String>::new());
        assert_eq!(read(&ws, "gen.txt"), generation, "a chain member ran on");
        verify_run(&home, &id, false);
    }
}

/// Issue 30 item 5: a daemon — a double fork into a new session (`setsid`), and a background
/// process ignoring SIGHUP and SIGTERM — does not outlive the command that started it, and
/// does not hold the step open by its copy of the output pipes.
#[test]
#[allow(clippy::print_stderr, reason = "skips and measured times must be seen")]
fn issue_30_a_daemon_does_not_outlive_its_command() {
    for unprivileged in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let token = format!("daemon-{}", std::process::id());
        let script = format!(
            "#!/bin/sh\nif [ \"$1\" = {token} ]; then\n  trap '' HUP TERM\n  sleep 8\n  echo late > out/late-$2.txt\n  exit 0\nfi\necho $$ > out/pid.txt\n( setsid ./probe.sh {token} setsid & )\n./probe.sh {token} background &\necho started\nexit 0\n"
        );
        let Some((out, home, id, took)) = issue_30_run(dir.path(), &script, 60_000, unprivileged)
        else {
            continue;
        };
        eprintln!("daemons (unprivileged: {unprivileged}): the run took {took:?}");
        assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
        let ws = home.join("runs").join(&id).join("workspace");
        let contained = issue_30_contained(&ws, &out, unprivileged);
        let text = serde_json::to_string(&outcomes(&home, &id)).unwrap();
        assert!(text.contains("exited 0"), "{text}");
        // Held open by the daemons' copies of its output pipes, the run would last 8 s.
        assert!(
            took < std::time::Duration::from_secs(8),
            "took {took:?}: the daemons held the step open"
        );
        assert_eq!(processes_holding(&token), Vec::<String>::new());
        std::thread::sleep(std::time::Duration::from_secs(9) - took);
        for which in ["setsid", "background"] {
            assert!(
                !ws.join(format!("out/late-{which}.txt")).exists(),
                "the {which} daemon outlived its command (contained: {contained})"
            );
        }
        verify_run(&home, &id, false);
    }
}

/// Issue 30 item 5: a process flood is bounded where a limit holds it, and ends with its
/// command: at most 4096 processes — the `pid_max` of the command's PID namespace (Linux ≥
/// 6.14 keeps one per namespace; as root too) and, for a Craik that is not root,
/// `RLIMIT_NPROC` counted in the sandbox's private user namespace. Never an unbounded flood:
/// the script stops at 6000 processes whatever happens, and floods only in its own PID
/// namespace (`$$` is 2). As root on an older kernel no limit holds (no cgroup is used): the
/// test says so and does not flood.
#[test]
#[allow(clippy::print_stderr, reason = "skips and measured times must be seen")]
fn issue_30_a_process_flood_is_bounded_where_a_limit_holds() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    let per_namespace_pid_max = (numbers.next(), numbers.next()) >= (Some(6), Some(14));
    for unprivileged in [false, true] {
        if !unprivileged && !per_namespace_pid_max {
            eprintln!(
                "issue 30: as root on Linux {} (< 6.14: one pid_max for the machine), RLIMIT_NPROC does not bind and no pids cgroup is used: a flood would be bounded only by its step's timeout; not run",
                release.trim()
            );
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = "#!/bin/sh\necho $$ > out/pid.txt\n[ $$ = 2 ] || exit 3\ni=0\nwhile [ $i -lt 6000 ]; do\n  sleep 30 &\n  i=$((i + 1))\n  [ $((i % 100)) = 0 ] && echo $i >> out/n.txt\ndone\necho all >> out/n.txt\nexec sleep 60\n";
        let Some((out, home, id, took)) = issue_30_run(dir.path(), script, 60_000, unprivileged)
        else {
            continue;
        };
        let ws = home.join("runs").join(&id).join("workspace");
        if read(&ws, "pid.txt").trim() != "2" {
            assert!(unprivileged, "{}", crate::transcript(&out));
            eprintln!("issue 30: no PID namespace for an unprivileged Craik here; no flood run");
            continue;
        }
        let counts = read(&ws, "n.txt");
        let last = counts.lines().last().unwrap_or_default();
        assert_ne!(last, "all", "the flood was not bounded");
        let last: u64 = last.parse().unwrap();
        assert!(
            (1000..=4096).contains(&last),
            "{counts}: {}",
            crate::transcript(&out)
        );
        eprintln!(
            "issue 30 (unprivileged: {unprivileged}): the flood stopped after {last} processes (of 6000), in {took:?}"
        );
        let text = serde_json::to_string(&outcomes(&home, &id)).unwrap();
        assert!(!text.contains("timed out"), "{text}");
        assert!(took < std::time::Duration::from_secs(50), "took {took:?}");
        // Every process of the flood ended with its command.
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter_map(|e| {
                let sleeping = std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| c.starts_with(b"sleep\x0030\x00"));
                let ours = std::fs::read_link(e.path().join("cwd"))
                    .is_ok_and(|cwd| cwd.starts_with(dir.path()));
                (sleeping && ours).then(|| e.file_name().to_string_lossy().into_owned())
            })
            .collect();
        assert_eq!(left, Vec::<String>::new());
    }
}
