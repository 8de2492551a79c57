#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "test")]

use super::*;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A tree like an npm install prefix's `node_modules`: a launcher package whose optional
/// dependency (its platform binary) is a sibling package, which requires one more package.
fn prefix(root: &Path) -> PathBuf {
    let nm = root.join("prefix/node_modules");
    write(
        &nm.join("@x/cli/package.json"),
        r#"{"name":"@x/cli","bin":{"cli":"bin/cli.js"},"optionalDependencies":{"@x/cli-linux":"1","@x/cli-win32":"1"}}"#,
    );
    write(&nm.join("@x/cli/bin/cli.js"), "#!/usr/bin/env node\n");
    write(
        &nm.join("@x/cli-linux/package.json"),
        r#"{"name":"@x/cli-linux","dependencies":{"helper":"1"}}"#,
    );
    write(&nm.join("@x/cli-linux/vendor/cli"), "native");
    write(&nm.join("helper/package.json"), r#"{"name":"helper"}"#);
    nm.canonicalize().unwrap()
}

#[test]
fn the_digest_covers_content_modes_and_directories_not_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("a");
    write(&tree.join("bin/cli"), "#!/bin/sh\n");
    chmod(&tree.join("bin/cli"), 0o755);
    let first = digest(&tree).unwrap();
    assert!(first.starts_with("sha256:"), "{first}");

    // The same content elsewhere: the same digest.
    let copy = dir.path().join("b");
    write(&copy.join("bin/cli"), "#!/bin/sh\n");
    chmod(&copy.join("bin/cli"), 0o755);
    assert_eq!(digest(&copy).unwrap(), first);

    chmod(&tree.join("bin/cli"), 0o644);
    let unexecutable = digest(&tree).unwrap();
    assert_ne!(unexecutable, first, "a mode change is seen");
    chmod(&tree.join("bin/cli"), 0o755);
    assert_eq!(digest(&tree).unwrap(), first);

    std::fs::create_dir(tree.join("empty")).unwrap();
    assert_ne!(digest(&tree).unwrap(), first, "an empty directory is seen");
    std::fs::remove_dir(tree.join("empty")).unwrap();

    write(&tree.join("bin/cli"), "#!/bin/sh\n\n");
    assert_ne!(digest(&tree).unwrap(), first, "a content change is seen");

    std::os::unix::fs::symlink("/etc/passwd", tree.join("link")).unwrap();
    assert!(digest(&tree).unwrap_err().contains("links are refused"));
}

#[test]
fn a_tree_changed_after_its_digest_is_seen_even_when_restored() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    write(&tree.join("bundle/chunk.js"), "console.log(1)\n");
    write(&tree.join("bundle/main.js"), "import './chunk.js'\n");
    let (d, stat) = TreeStat::around(&tree, || digest(&tree)).unwrap();
    assert_eq!(d, digest(&tree).unwrap());
    assert_eq!(stat.changed(), None, "nothing changed");

    // Rewritten with the very same bytes (what an attacker restoring a file does): seen.
    write(&tree.join("bundle/chunk.js"), "console.log(1)\n");
    let what = stat.changed().unwrap();
    assert!(
        what.contains("chunk.js") && what.contains("modified"),
        "{what}"
    );

    // Each kind of change, from a fresh stat.
    type Change = fn(&Path);
    let changes: [(&str, Change); 5] = [
        ("mode", |t| chmod(&t.join("bundle/main.js"), 0o700)),
        ("added", |t| write(&t.join("bundle/extra.js"), "")),
        ("removed", |t| {
            std::fs::remove_file(t.join("bundle/chunk.js")).unwrap()
        }),
        ("replaced", |t| {
            write(&t.join("new.js"), "import './chunk.js'\n");
            std::fs::rename(t.join("new.js"), t.join("bundle/main.js")).unwrap();
        }),
        ("appended", |t| {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(t.join("bundle/main.js"))
                .unwrap();
            f.write_all(b"x").unwrap();
        }),
    ];
    for (name, change) in changes {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        write(&tree.join("bundle/chunk.js"), "console.log(1)\n");
        write(&tree.join("bundle/main.js"), "import './chunk.js'\n");
        let (_, stat) = TreeStat::around(&tree, || digest(&tree)).unwrap();
        change(&tree);
        assert!(stat.changed().is_some(), "{name}: not seen");
    }
}

#[test]
fn a_single_file_is_watched_too() {
    let dir = tempfile::tempdir().unwrap();
    let cli = dir.path().join("cli");
    write(&cli, "#!/bin/sh\n");
    let (d, stat) = TreeStat::around(&cli, || super::super::pin::digest_file(&cli)).unwrap();
    assert!(d.starts_with("sha256:"));
    assert_eq!(stat.changed(), None);
    write(&cli, "#!/bin/sh\n");
    assert!(stat.changed().is_some());
}

#[test]
fn a_change_while_hashing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("t");
    write(&tree.join("a"), "1");
    let err = TreeStat::around(&tree, || {
        write(&tree.join("a"), "2");
        digest(&tree)
    })
    .unwrap_err();
    assert!(err.contains("changed while it was being hashed"), "{err}");
}

#[test]
fn a_launcher_package_must_hold_what_it_loads() {
    let dir = tempfile::tempdir().unwrap();
    let nm = prefix(dir.path());
    let launcher = nm.join("@x/cli/bin/cli.js");

    // The install prefix's node_modules: the sibling and its dependency inside; the other
    // platform's optional package is nowhere, which is fine.
    assert_eq!(npm_escape(&nm, &launcher), None);

    // One level too deep (outside testing round r32 F5): the sibling resolves outside.
    let deep = nm.join("@x/cli");
    let why = npm_escape(&deep, &launcher).unwrap();
    assert!(
        why.contains("`@x/cli-linux`") && why.contains("outside the pinned tree"),
        "{why}"
    );

    // A transitive dependency installed outside the tree, found by node's walk upwards.
    let outer = dir.path().join("node_modules/helper");
    std::fs::create_dir_all(outer.parent().unwrap()).unwrap();
    std::fs::rename(nm.join("helper"), &outer).unwrap();
    let why = npm_escape(&nm, &launcher).unwrap();
    assert!(why.contains("`helper`") && why.contains("outside"), "{why}");

    // Nowhere at all: a required dependency is missing.
    std::fs::remove_dir_all(&outer).unwrap();
    let why = npm_escape(&nm, &launcher).unwrap();
    assert!(
        why.contains("`helper`") && why.contains("not installed"),
        "{why}"
    );

    // A link inside the tree pointing out of it resolves outside.
    std::fs::create_dir_all(dir.path().join("elsewhere/helper")).unwrap();
    write(&dir.path().join("elsewhere/helper/package.json"), "{}");
    std::os::unix::fs::symlink(dir.path().join("elsewhere/helper"), nm.join("helper")).unwrap();
    let why = npm_escape(&nm, &launcher).unwrap();
    assert!(why.contains("elsewhere"), "{why}");
}

#[test]
fn hostile_manifests_are_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let nm = prefix(dir.path());
    let launcher = nm.join("@x/cli/bin/cli.js");
    for (manifest, expect) in [
        (
            r#"{"dependencies":{"../../../etc":"1"}}"#,
            "not a package name",
        ),
        (r#"{"dependencies":{"":"1"}}"#, "not a package name"),
        (r#"{"dependencies":["helper"]}"#, "not an object"),
        ("not json", "package.json"),
    ] {
        write(&nm.join("@x/cli/package.json"), manifest);
        let why = npm_escape(&nm, &launcher).unwrap();
        assert!(why.contains(expect), "{manifest}: {why}");
    }
    // A launcher in no package: nothing to follow.
    let plain = dir.path().join("plain");
    write(&plain.join("cli"), "#!/bin/sh\n");
    assert_eq!(npm_escape(&plain, &plain.join("cli")), None);
}
