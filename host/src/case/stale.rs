//! The stale-risk rules (docs/context.md, "Stale risks"): each a pure function of the walk,
//! the docs' first bytes and the repository state, so each is tested on its own.
//!
//! - `missing-path`: a doc names a repository path (in backticks, or as a relative Markdown
//!   link) that does not exist;
//! - `older-than-named`: a doc was last modified before every existing file it names;
//! - `immutable-dirty`: an immutable path (an ADR) has uncommitted changes;
//! - `profile`: what the profile check found (no git repository, a glob matching no file),
//!   when a run goes on without it.

use crate::case::scan::Tree;
use crate::project::Specs;

/// Most paths taken from one doc.
pub const MAX_MENTIONS: usize = 200;

/// File extensions that make a backticked word without `/` a path (`README.md`).
const EXTENSIONS: &[&str] = &[
    "md", "rs", "toml", "json", "yaml", "yml", "txt", "py", "ts", "js", "go", "c", "h", "sh",
    "rst", "adoc", "cedar", "html", "css", "lock",
];

/// A doc as the rules see it.
#[derive(Debug, Clone)]
pub struct DocText<'a> {
    pub path: &'a str,
    /// Its first bytes as text (`None`: binary, or not read).
    pub text: Option<&'a str>,
}

fn path_like(word: &str) -> bool {
    if word.is_empty()
        || word.len() > 256
        || word.starts_with(['/', '-', '.'])
        || word.ends_with('.')
        || word.contains("..") && !word.starts_with("../")
        || !word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
    {
        return false;
    }
    let last = word
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let ext = last.rsplit_once('.').map(|(_, e)| e);
    word.contains('/') && last.contains('.')
        || ext.is_some_and(|e| EXTENSIONS.contains(&e))
        || word.ends_with('/') && word.len() > 1
}

/// The repository paths `text` (the doc at `doc`) names, each as (as written, as resolved
/// relative to the repository root), in order of appearance, at most [`MAX_MENTIONS`].
/// Backticked words are relative to the root; Markdown link targets to the doc's directory.
pub fn mentions(text: &str, doc: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let dir = doc.rsplit_once('/').map_or("", |(d, _)| d);
    let mut push = |written: &str, resolved: &str| {
        if out.len() < MAX_MENTIONS
            && let Ok(t) = craik_kernel::TargetPath::normalize("/r", resolved)
            && !out.iter().any(|(_, r)| r == t.as_str())
        {
            out.push((written.to_owned(), t.as_str().to_owned()));
        }
    };
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 1 && path_like(span) && !span.starts_with("../") {
            push(span, span.trim_end_matches('/'));
        }
    }
    let mut rest = text;
    // `find(char)` is a memchr; a two-byte pattern search costs far more on long docs.
    while let Some(at) = rest.find(']') {
        let Some(after) = rest.get(at + 1..).and_then(|r| r.strip_prefix('(')) else {
            rest = rest.get(at + 1..).unwrap_or_default();
            continue;
        };
        let Some(end) = after.find(')') else { break };
        let target = after.get(..end).unwrap_or_default();
        let target = target.split(['#', '?']).next().unwrap_or_default();
        if !target.contains(':') && path_like(target.trim_start_matches("./"))
            || target.starts_with("../")
        {
            let clean = target.trim_start_matches("./").trim_end_matches('/');
            let resolved = if dir.is_empty() {
                clean.to_owned()
            } else {
                format!("{dir}/{clean}")
            };
            if !clean.is_empty() && !clean.contains(char::is_whitespace) {
                push(target, &resolved);
            }
        }
        rest = after.get(end..).unwrap_or_default();
    }
    out
}

/// `missing-path` and `older-than-named` over `docs`; one line each, sorted by the caller.
pub fn doc_rules(docs: &[DocText<'_>], tree: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    if tree.skipped.truncated {
        // What a truncated walk did not see is not missing.
        return out;
    }
    for doc in docs {
        let Some(text) = doc.text else { continue };
        let named = mentions(text, doc.path);
        let mut existing = Vec::new();
        for (written, rel) in &named {
            if rel == doc.path {
                continue;
            }
            if tree.exists(rel) {
                if let Some(meta) = tree.files.get(rel) {
                    existing.push((rel.as_str(), meta.mtime));
                }
            } else {
                out.push(format!(
                    "missing-path: {} names `{}`, which does not exist",
                    doc.path,
                    craik_contracts::Truncated(written)
                ));
            }
        }
        if let (Some(own), Some(newest_first)) = (
            tree.files.get(doc.path),
            existing.iter().map(|(_, m)| *m).min(),
        ) && own.mtime < newest_first
        {
            let mut names: Vec<&str> = existing.iter().map(|(p, _)| *p).collect();
            names.truncate(3);
            out.push(format!(
                "older-than-named: {} was last modified before every file it names ({}{})",
                doc.path,
                names.join(", "),
                if existing.len() > 3 { ", …" } else { "" }
            ));
        }
    }
    out
}

/// `immutable-dirty`: uncommitted changes to immutable paths.
pub fn immutable_rules(dirty: &[(String, String)], immutable: &Specs) -> Vec<String> {
    dirty
        .iter()
        .filter(|(p, _)| immutable.matching(p).is_some())
        .map(|(p, code)| {
            format!("immutable-dirty: {p} is an immutable path with uncommitted changes (`{code}`)")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::scan::FileMeta;

    fn tree(files: &[(&str, i64)], dirs: &[&str]) -> Tree {
        let mut t = Tree::default();
        for (p, mtime) in files {
            t.files.insert(
                (*p).to_owned(),
                FileMeta {
                    size: 1,
                    mtime: (*mtime, 0),
                },
            );
        }
        for d in dirs {
            t.dirs.insert((*d).to_owned());
        }
        t
    }

    #[test]
    fn mentions_take_backticked_paths_and_relative_links_only() {
        let text = "See `src/lib.rs`, `README.md`, `cargo test`, `/etc/passwd`, `a b/c.md`,\n\
                    [x](../README.md), [y](https://example.com/a.md), [z](adr/0001.md#top), \
                    [w](mailto:a@b), `$HOME/x.md`, `../../../etc/x.md`";
        let got: Vec<String> = mentions(text, "docs/guide.md")
            .into_iter()
            .map(|(_, r)| r)
            .collect();
        assert_eq!(
            got,
            vec!["src/lib.rs", "README.md", "docs/adr/0001.md"],
            "{got:?}"
        );
    }

    #[test]
    fn issue_21_missing_path_rule() {
        let t = tree(&[("docs/a.md", 10), ("src/lib.rs", 5)], &["docs", "src"]);
        let text = "Uses `src/lib.rs` and `src/gone.rs`; see [old](old.md).";
        let got = doc_rules(
            &[DocText {
                path: "docs/a.md",
                text: Some(text),
            }],
            &t,
        );
        assert_eq!(
            got,
            vec![
                "missing-path: docs/a.md names `src/gone.rs`, which does not exist",
                "missing-path: docs/a.md names `old.md`, which does not exist",
            ]
        );
        // A truncated walk runs no path rule: what it did not see is not missing.
        let mut cut = t.clone();
        cut.skipped.truncated = true;
        assert!(
            doc_rules(
                &[DocText {
                    path: "docs/a.md",
                    text: Some(text)
                }],
                &cut
            )
            .is_empty()
        );
    }

    #[test]
    fn issue_21_older_than_named_rule() {
        let doc = |t: &Tree| {
            doc_rules(
                &[DocText {
                    path: "docs/a.md",
                    text: Some("See `src/a.rs` and `src/b.rs`."),
                }],
                t,
            )
        };
        // Older than both: a risk.
        let old = tree(&[("docs/a.md", 1), ("src/a.rs", 5), ("src/b.rs", 7)], &[]);
        assert_eq!(
            doc(&old),
            vec![
                "older-than-named: docs/a.md was last modified before every file it names (src/a.rs, src/b.rs)"
            ]
        );
        // Newer than one of them: none.
        let fresh = tree(&[("docs/a.md", 6), ("src/a.rs", 5), ("src/b.rs", 7)], &[]);
        assert!(doc(&fresh).is_empty());
        // A doc naming only directories or nothing that exists: no age comparison.
        let none = tree(&[("docs/a.md", 1)], &["src"]);
        let got = doc(&none);
        assert!(got.iter().all(|r| r.starts_with("missing-path")), "{got:?}");
    }

    #[test]
    fn issue_21_immutable_dirty_rule() {
        let specs = Specs::new(&["docs/adr/".to_owned()]).unwrap();
        let dirty = vec![
            ("docs/adr/0001.md".to_owned(), "M".to_owned()),
            ("docs/status.md".to_owned(), "M".to_owned()),
            ("docs/adr-notes.md".to_owned(), "??".to_owned()),
        ];
        assert_eq!(
            immutable_rules(&dirty, &specs),
            vec![
                "immutable-dirty: docs/adr/0001.md is an immutable path with uncommitted changes (`M`)"
            ]
        );
    }
}
