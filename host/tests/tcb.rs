//! The trusted computing base, kept by CI (issue 33 item 5): `TCB.md` lists every file a
//! security reviewer must read, with its line count. This test fails when a listed file uses a
//! workspace file that is not listed (the list must be closed under imports), when a count
//! is stale, or when the total passes the budget written there.
//!
//! Counted: non-blank lines that are not only a comment, outside `#[cfg(test)]` items and
//! test files. Rewrite the table after a change with
//! `CRAIK_TCB_WRITE=1 cargo test -p craik-host --test tcb`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::print_stderr,
    reason = "tests fail loudly by design"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Workspace crates by the name code uses, and their source roots.
const CRATES: &[(&str, &str)] = &[
    ("craik_contracts", "contracts/src"),
    ("craik_kernel", "kernel/src"),
    ("craik_spawn", "spawn/src"),
    ("craik_host", "host/src"),
    ("craik", "cli/src"),
];

const TABLE_START: &str = "<!-- tcb-table: start (generated; see host/tests/tcb.rs) -->";
const TABLE_END: &str = "<!-- tcb-table: end -->";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The source root of the crate `file` (workspace-relative) is in.
fn crate_root(file: &str) -> &'static str {
    CRATES
        .iter()
        .map(|(_, src)| *src)
        .find(|src| file.starts_with(&format!("{src}/")))
        .unwrap_or_else(|| panic!("{file}: not in a workspace crate's src/"))
}

/// The file of module `segments` under `src` (`a::b` is `a/b.rs` or `a/b/mod.rs`; none is
/// the crate root), or of its longest prefix that is one.
fn module_file(src: &str, segments: &[String]) -> String {
    let root = root();
    for n in (1..=segments.len()).rev() {
        let base = format!("{src}/{}", segments[..n].join("/"));
        for candidate in [format!("{base}.rs"), format!("{base}/mod.rs")] {
            if root.join(&candidate).is_file() {
                return candidate;
            }
        }
    }
    let lib = format!("{src}/lib.rs");
    if root.join(&lib).is_file() {
        lib
    } else {
        format!("{src}/main.rs")
    }
}

/// The module path of `file` under its crate's `src` (`run/driver/mod.rs` → `run::driver`).
fn module_path(file: &str) -> Vec<String> {
    let src = crate_root(file);
    let rel = file.trim_start_matches(src).trim_start_matches('/');
    let rel = rel.trim_end_matches(".rs");
    rel.split('/')
        .filter(|s| *s != "mod" && *s != "lib" && *s != "main")
        .map(str::to_owned)
        .collect()
}

/// Identifier segments following `at` in `text` (`a::b::c`), stopping at anything else.
fn segments_at(text: &str) -> Vec<String> {
    text.split("::")
        .map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .take_while(|s| !s.is_empty())
        .collect()
}

/// The file's text without test-only items and comment-only lines: what is counted and
/// whose imports are followed.
fn trusted_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed == "#[cfg(test)]" {
            // The item after it: a `mod x;`, or a block closed at the attribute's indentation.
            let indent = line.len() - line.trim_start().len();
            if let Some(item) = lines.next()
                && !item.trim_end().ends_with(';')
            {
                for rest in lines.by_ref() {
                    let closes = rest.len() - rest.trim_start().len() == indent
                        && rest.trim_start().starts_with('}');
                    if closes {
                        break;
                    }
                }
            }
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        out.push(line);
    }
    out
}

/// The workspace files `file`'s trusted lines use: `crate::…`, `super::…`, another workspace
/// crate's `name::…`, and its own submodules named in a path.
fn uses(file: &str, text: &str) -> BTreeSet<String> {
    let src = crate_root(file);
    let own = module_path(file);
    let lines = trusted_lines(text);
    let children: Vec<String> = lines
        .iter()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'))
                .map(str::to_owned)
        })
        .collect();
    let mut out = BTreeSet::new();
    for line in &lines {
        for (at, _) in line.match_indices("crate::") {
            let before = line[..at].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            out.insert(module_file(src, &segments_at(&line[at + 7..])));
        }
        for (name, other) in CRATES {
            let needle = format!("{name}::");
            for (at, _) in line.match_indices(&needle) {
                let before = line[..at].chars().last();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                out.insert(module_file(other, &segments_at(&line[at + needle.len()..])));
            }
        }
        if line.contains("super::") {
            // The parent module's own file (`use super::*` reaches its items).
            let parent = &own[..own.len().saturating_sub(1)];
            out.insert(module_file(src, parent));
        }
        for child in &children {
            let needle = format!("{child}::");
            for (at, _) in line.match_indices(&needle) {
                let before = line[..at].chars().last();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut path = own.clone();
                path.push(child.clone());
                path.extend(segments_at(&line[at + needle.len()..]));
                out.insert(module_file(src, &path));
            }
        }
    }
    out.remove(file);
    out
}

struct Listed {
    files: BTreeMap<String, usize>,
    budget: usize,
    core_budget: usize,
    core: BTreeSet<String>,
}

/// The table and budgets of `TCB.md`: rows `| core? | `path` | lines |`.
fn listed(doc: &str) -> Listed {
    let number = |key: &str| -> usize {
        doc.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.replace(',', "").parse().ok())
            .unwrap_or_else(|| panic!("TCB.md: no `{key}` line"))
    };
    let mut files = BTreeMap::new();
    let mut core = BTreeSet::new();
    let start = doc.find(TABLE_START).expect("TCB.md: table start marker");
    let end = doc.find(TABLE_END).expect("TCB.md: table end marker");
    for row in doc[start..end].lines().filter(|l| l.starts_with("| ")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (kind, path, lines) = (cells[1], cells[2].trim_matches('`'), cells[3]);
        let Ok(lines) = lines.parse::<usize>() else {
            continue;
        };
        if kind == "core" {
            core.insert(path.to_owned());
        }
        files.insert(path.to_owned(), lines);
    }
    Listed {
        files,
        budget: number("Budget, trusted base:"),
        core_budget: number("Budget, core:"),
        core,
    }
}

fn count(file: &str) -> usize {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    trusted_lines(&text).len()
}

fn table(files: &BTreeMap<String, usize>, core: &BTreeSet<String>) -> String {
    let mut out = format!("{TABLE_START}\n| part | file | lines |\n|---|---|---:|\n");
    for (file, lines) in files {
        let kind = if core.contains(file) { "core" } else { "base" };
        out.push_str(&format!("| {kind} | `{file}` | {lines} |\n"));
    }
    let total: usize = files.values().sum();
    let core_total: usize = files
        .iter()
        .filter(|(f, _)| core.contains(*f))
        .map(|(_, n)| n)
        .sum();
    out.push_str(&format!(
        "\nTotal: {total} lines in {} files; core: {core_total} lines in {} files.\n{TABLE_END}",
        files.len(),
        core.len()
    ));
    out
}

#[test]
fn the_trusted_base_is_listed_closed_and_within_its_budget() {
    let path = root().join("TCB.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let listed = listed(&doc);
    assert!(!listed.files.is_empty(), "TCB.md lists no file");
    // Closed under imports: what a listed file uses is listed.
    let mut missing = BTreeMap::<String, Vec<String>>::new();
    for file in listed.files.keys() {
        let text = std::fs::read_to_string(root().join(file))
            .unwrap_or_else(|e| panic!("TCB.md lists {file}: {e}"));
        for used in uses(file, &text) {
            if !listed.files.contains_key(&used) {
                missing.entry(used).or_default().push(file.clone());
            }
        }
    }
    let measured: BTreeMap<String, usize> =
        listed.files.keys().map(|f| (f.clone(), count(f))).collect();
    let regenerated = table(&measured, &listed.core);
    if std::env::var_os("CRAIK_TCB_WRITE").is_some() {
        let start = doc.find(TABLE_START).unwrap();
        let end = doc.find(TABLE_END).unwrap() + TABLE_END.len();
        // Listed files plus everything they use, to a fixed point.
        let mut files = measured.clone();
        let mut queue: Vec<String> = missing.keys().cloned().collect();
        while let Some(used) = queue.pop() {
            if files.contains_key(&used) {
                continue;
            }
            files.insert(used.clone(), count(&used));
            let text = std::fs::read_to_string(root().join(&used)).unwrap();
            queue.extend(uses(&used, &text));
        }
        let text = format!(
            "{}{}{}",
            &doc[..start],
            table(&files, &listed.core),
            &doc[end..]
        );
        std::fs::write(&path, text).unwrap();
        eprintln!("TCB.md rewritten ({} files)", files.len());
        return;
    }
    assert!(
        missing.is_empty(),
        "files outside TCB.md used by files in it (list them, or stop using them): {missing:#?}"
    );
    let stale: Vec<_> = measured
        .iter()
        .filter(|(f, n)| listed.files.get(*f) != Some(n))
        .map(|(f, n)| format!("{f}: listed {}, now {n}", listed.files[f]))
        .collect();
    assert!(
        stale.is_empty(),
        "TCB.md's counts are stale (rewrite with CRAIK_TCB_WRITE=1 cargo test -p craik-host --test tcb): {stale:#?}"
    );
    let total: usize = measured.values().sum();
    let core: usize = measured
        .iter()
        .filter(|(f, _)| listed.core.contains(*f))
        .map(|(_, n)| n)
        .sum();
    assert!(
        total <= listed.budget,
        "the trusted base grew past its budget: {total} > {}",
        listed.budget
    );
    assert!(
        core <= listed.core_budget,
        "the core grew past its budget: {core} > {}",
        listed.core_budget
    );
    assert!(
        doc.contains(&regenerated),
        "TCB.md's table differs from the files it lists (rewrite it)"
    );
}

#[test]
fn test_items_and_comments_are_not_counted() {
    let text = "//! doc\nuse a;\n\n// note\nfn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() {}\n}\nfn h() {}\n#[cfg(test)]\nmod more;\n";
    assert_eq!(trusted_lines(text), ["use a;", "fn f() {}", "fn h() {}"]);
}
