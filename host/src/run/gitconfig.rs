//! Workspace paths a git configuration names as something git runs or reads as configuration:
//! a hooks directory, an included file, a script behind an alias, a filter, a pager, a diff or
//! merge driver. The configuration itself is protected (`.git/`, a git directory under any
//! name); what it names must be too, or a command rewrites the script and the operator's next
//! `git commit` runs it unconfined (outside testing round 7: `core.hooksPath`, `include.path`,
//! `filter.*.clean` and `alias.* = !sh …` pointing into the workspace).
//!
//! Read: the repository's own configuration (`.git/config`, `config.worktree`, a gitfile's
//! directory and its `commondir`), every git directory's `config` the manifest shows, the
//! operator's (`~/.gitconfig`, `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`: their
//! relative paths name workspace files too), and what any of them includes. Nothing is run:
//! the files are parsed here, never by git.

use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Keys whose value is a path (a directory may be named): the rest are commands, and only the
/// regular files they name are taken.
const PATH_KEYS: &[&str] = &[
    "core.hookspath",
    "core.excludesfile",
    "core.attributesfile",
    "core.worktree",
    "include.path",
    "commit.template",
    "init.templatedir",
    "blame.ignorerevsfile",
    "mailmap.file",
];

/// Largest configuration file read (bytes); larger ones are read up to this.
const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// How deep includes are followed.
const MAX_INCLUDE_DEPTH: usize = 8;

/// One `key = value` of a configuration file: the key lowercased (`section.sub.name`, the
/// subsection as written), the value unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub key: String,
    pub value: String,
}

/// Parses git's configuration syntax leniently: sections `[a]`, `[a "sub"]`, `[a.b]`;
/// `key = value` and bare `key`; `#`/`;` comments outside quotes; quotes and `\"`, `\\`,
/// `\n`, `\t` escapes; a trailing `\` continues the line. What it cannot read it skips (it
/// is used to find more paths to protect, never fewer).
pub fn parse(text: &str) -> Vec<Setting> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut line = line.to_owned();
        while line.ends_with('\\') && !line.ends_with("\\\\") {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next),
                None => break,
            }
        }
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix('[') {
            let Some(end) = rest.find(']') else { continue };
            let header = rest.get(..end).unwrap_or_default().trim();
            section = match header.split_once(char::is_whitespace) {
                Some((name, sub)) => {
                    let sub = sub.trim().trim_matches('"').replace("\\\"", "\"");
                    format!("{}.{sub}", name.to_ascii_lowercase())
                }
                None => header.to_ascii_lowercase(),
            };
            // `[a] key = v` on one line.
            let after = rest.get(end + 1..).unwrap_or_default();
            if let Some(s) = setting(&section, after) {
                out.push(s);
            }
            continue;
        }
        if let Some(s) = setting(&section, trimmed) {
            out.push(s);
        }
    }
    out
}

fn setting(section: &str, line: &str) -> Option<Setting> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return None;
    }
    let (name, raw) = match line.split_once('=') {
        Some((n, v)) => (n.trim(), v),
        None => (line, ""),
    };
    let mut value = String::new();
    let mut quoted = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => value.push('\n'),
                Some('t') => value.push('\t'),
                Some(other) => value.push(other),
                None => {}
            },
            '#' | ';' if !quoted => break,
            c => value.push(c),
        }
    }
    Some(Setting {
        key: format!("{section}.{}", name.to_ascii_lowercase()),
        value: value.trim().to_owned(),
    })
}

/// Reads a configuration file without following a link at its last component, bounded, a
/// regular file only (a FIFO never stalls the read).
fn read_config(path: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// `path` made lexically absolute-normal (`..` resolved), relative to `root` when it lies in
/// it (never the root itself).
fn inside(root: &Path, path: &Path) -> Option<PathBuf> {
    let out = crate::fsio::lexical(path);
    let rel = out.strip_prefix(root).ok()?;
    (!rel.as_os_str().is_empty()).then(|| rel.to_path_buf())
}

/// The shell words of a command value, quotes removed the way `sh` removes them (`s''/x.sh`
/// is `s/x.sh`), split at unquoted blanks and operators; `!` of an alias dropped.
fn shell_words(value: &str) -> Vec<String> {
    let value = value.trim_start().trim_start_matches('!');
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() || ";|&()<>`=,".contains(c) => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// What a command value may run or read in the workspace, as paths relative to where git runs
/// it (the working tree's top) and to every directory it `cd`s into; a leading `$VAR/` (`$PWD`,
/// `${GIT_PREFIX}`, `$(pwd)`) read as that top. Words with another `$` cannot be known and are
/// skipped (said in SECURITY.md).
fn command_words(value: &str, home: Option<&Path>) -> Vec<PathBuf> {
    let words = shell_words(value);
    let mut bases = vec![PathBuf::new()];
    for pair in words.windows(2) {
        if let [cd, dir] = pair
            && (cd == "cd" || cd == "pushd")
        {
            bases.push(PathBuf::from(strip_variable(dir)));
        }
    }
    let mut out = Vec::new();
    for w in &words {
        let w = strip_variable(w);
        if w.is_empty() || w.starts_with('-') || w.contains('$') {
            continue;
        }
        let path = match w.strip_prefix("~/") {
            Some(rest) => match home {
                Some(h) => h.join(rest),
                None => continue,
            },
            None => PathBuf::from(w),
        };
        if path.is_absolute() {
            out.push(path);
        } else {
            out.extend(bases.iter().map(|b| b.join(&path)));
        }
    }
    out
}

/// `$VAR/rest`, `${VAR}/rest`, `$(cmd)/rest` as `rest` (relative to the top), else the word.
fn strip_variable(word: &str) -> &str {
    if word.starts_with('$')
        && let Some(slash) = word.find('/')
    {
        return word.get(slash + 1..).unwrap_or_default();
    }
    word
}

/// A path-valued setting's one path, `~/` expanded.
fn words_of_path(value: &str, home: Option<&Path>) -> Vec<PathBuf> {
    if value.is_empty() {
        return Vec::new();
    }
    match value.strip_prefix("~/") {
        Some(rest) => home.map(|h| h.join(rest)).into_iter().collect(),
        None => vec![PathBuf::from(value)],
    }
}

/// What the configuration files in `files` (and what they include) name inside `root`.
/// `home` expands `~/`.
pub fn named_paths(root: &Path, files: Vec<PathBuf>, home: Option<&Path>) -> BTreeSet<PathBuf> {
    let mut named = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut todo: Vec<(PathBuf, usize)> = files.into_iter().map(|f| (f, 0)).collect();
    while let Some((file, depth)) = todo.pop() {
        if !seen.insert(file.clone()) {
            continue;
        }
        let Some(text) = read_config(&file) else {
            continue;
        };
        let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        for s in parse(&text) {
            let include = s.key == "include.path"
                || (s.key.starts_with("includeif.") && s.key.ends_with(".path"));
            let path_key = include || PATH_KEYS.contains(&s.key.as_str());
            let words = if path_key {
                words_of_path(&s.value, home)
            } else {
                command_words(&s.value, home)
            };
            for word in words {
                // Includes are relative to the including file's directory; everything else
                // to the working tree's top (hooks, aliases, filters and pagers run there).
                let place = if word.is_absolute() {
                    word
                } else if include {
                    dir.join(&word)
                } else {
                    root.join(&word)
                };
                if include && depth < MAX_INCLUDE_DEPTH {
                    todo.push((place.clone(), depth + 1));
                }
                let Some(rel) = inside(root, &place) else {
                    continue;
                };
                // A path-valued setting's path, and of a command's words: a file (or a link)
                // there, or one that may be created there — a word with a `/` or a `.`
                // (outside testing round 8: a filter script named before it existed).
                let meta = std::fs::symlink_metadata(root.join(&rel));
                let text = rel.to_string_lossy().into_owned();
                let may_be_file = match &meta {
                    Ok(m) => !m.is_dir(),
                    Err(_) => text.contains('/') || text.contains('.'),
                };
                if path_key || may_be_file {
                    // What a link there leads to, when it is in the workspace, too.
                    if meta.as_ref().is_ok_and(|m| m.file_type().is_symlink())
                        && let Some(target) = root
                            .join(&rel)
                            .canonicalize()
                            .ok()
                            .and_then(|real| inside_real(root, &real))
                    {
                        named.insert(target);
                    }
                    named.insert(rel);
                }
            }
        }
    }
    named
}

/// Immutable-path globs covering `named` ([`named_paths`]): each path exactly and everything
/// under it, and a word the shell would expand (`s/x[5].sh`) as the glob it is.
pub fn globs(named: &BTreeSet<PathBuf>) -> Vec<String> {
    let mut out = Vec::new();
    for rel in named {
        let rel = crate::run::manifest::shown(rel);
        out.push(craik_kernel::ImmutablePaths::glob_for(&rel, false));
        out.push(craik_kernel::ImmutablePaths::glob_for(&rel, true));
        if rel.contains(['*', '?', '['])
            && craik_kernel::ImmutablePaths::new(std::slice::from_ref(&rel)).is_ok()
        {
            out.push(rel);
        }
    }
    out
}

/// What the repository's and the operator's configurations (and `more` files: the git
/// directories a manifest shows) name inside `root`, `~/` taken from Craik's `HOME`.
pub fn named_in(root: &Path, more: Vec<PathBuf>) -> BTreeSet<PathBuf> {
    let mut files = repository_files(root);
    files.extend(operator_files());
    files.extend(more);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    named_paths(root, files, home.as_deref())
}

/// `real` (a resolved path) relative to `root`'s real path, when it lies in it.
fn inside_real(root: &Path, real: &Path) -> Option<PathBuf> {
    let root = root.canonicalize().ok()?;
    let rel = real.strip_prefix(root).ok()?;
    (!rel.as_os_str().is_empty()).then(|| rel.to_path_buf())
}

/// The operator's configuration files (git reads them for every repository): the system and
/// global files, and the ones `GIT_CONFIG_GLOBAL` / `GIT_CONFIG_SYSTEM` name instead.
pub fn operator_files() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut files = vec![PathBuf::from("/etc/gitconfig")];
    for var in ["GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            files.push(PathBuf::from(v));
        }
    }

    if let Some(h) = &home {
        files.push(h.join(".gitconfig"));
    }
    match std::env::var_os("XDG_CONFIG_HOME") {
        Some(x) if !x.is_empty() => files.push(PathBuf::from(x).join("git/config")),
        _ => files.extend(home.iter().map(|h| h.join(".config/git/config"))),
    }
    files
}

/// The repository's own configuration files at `root`: `.git/config` and `config.worktree`,
/// or, for a gitfile (`gitdir: X`), X's and its `commondir`'s.
pub fn repository_files(root: &Path) -> Vec<PathBuf> {
    let dot_git = root.join(".git");
    let mut dirs = Vec::new();
    match std::fs::symlink_metadata(&dot_git) {
        Ok(m) if m.is_dir() => dirs.push(dot_git),
        Ok(m) if m.is_file() => {
            if let Some(dir) = read_config(&dot_git).and_then(|t| {
                t.trim()
                    .strip_prefix("gitdir:")
                    .map(|d| d.trim().to_owned())
            }) {
                let dir = root.join(dir);
                if let Some(common) = read_config(&dir.join("commondir")) {
                    dirs.push(dir.join(common.trim()));
                }
                dirs.push(dir);
            }
        }
        _ => {}
    }
    dirs.iter()
        .flat_map(|d| [d.join("config"), d.join("config.worktree")])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_syntax_is_read_as_git_reads_it() {
        let text = "[core]\n\thooksPath = tools/hooks ; a comment\n[alias]\n\tlint = \"!sh scripts/lint.sh\"\n\
                    [filter \"x\"]\n\tclean = ./scripts/clean.sh %f\n[include]\npath = \\\n  ../.gitconfig\n\
                    [diff] external = bin/d\n# [core] pager = no\n";
        let got: Vec<(String, String)> =
            parse(text).into_iter().map(|s| (s.key, s.value)).collect();
        assert_eq!(
            got,
            vec![
                ("core.hookspath".into(), "tools/hooks".into()),
                ("alias.lint".into(), "!sh scripts/lint.sh".into()),
                ("filter.x.clean".into(), "./scripts/clean.sh %f".into()),
                ("include.path".into(), "../.gitconfig".into()),
                ("diff.external".into(), "bin/d".into()),
            ]
        );
    }

    /// Outside testing round 8, generated: a script named through quotes, after a `cd`,
    /// behind `$PWD`, before it exists, through a link, by a glob, or in a file
    /// `GIT_CONFIG_GLOBAL`-style names; never an option or a directory a command merely
    /// names (over-naming is safe: a path that does not exist is only kept from being made).
    #[test]
    fn indirect_spellings_of_a_script_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("s")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("s/real.sh"), "x").unwrap();
        std::os::unix::fs::symlink("real.sh", root.join("s/lnk.sh")).unwrap();
        std::fs::write(
            root.join(".git/config"),
            "[alias]\n\tx1 = !sh s/new1.sh\n\tx2 = !sh s''/x2.sh\n\tx3 = !cd s && sh x3.sh\n\
             \tx4 = !sh \"$PWD\"/s/x4.sh\n\tx5 = !sh s/x[5].sh\n\tk1 = !sh s/lnk.sh\n\
             \tno = !sh $HOME$X/y.sh --flag\n[filter \"f\"]\n\tclean = s/new2.sh\n[core]\n\tfsmonitor = s/fsm.sh\n",
        )
        .unwrap();
        let named = named_paths(&root, repository_files(&root), None);
        for want in [
            "s/new1.sh",
            "s/x2.sh",
            "s/x3.sh",
            "s/x4.sh",
            "s/x[5].sh",
            "s/lnk.sh",
            "s/real.sh",
            "s/new2.sh",
            "s/fsm.sh",
        ] {
            assert!(named.contains(Path::new(want)), "{want}: {named:?}");
        }
        assert!(!named.contains(Path::new("s")), "{named:?}");
        assert!(
            !named.iter().any(|p| p.to_string_lossy().contains("flag")),
            "{named:?}"
        );
    }

    /// Outside testing round 7: a hooks directory (existing or not), an included file and what
    /// it names, an alias's and a filter's script; not directories a command merely names, not
    /// paths outside the workspace, never the workspace itself.
    #[test]
    fn what_a_configuration_names_in_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        for d in [".git", "scripts", "src", "bin"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "scripts/lint.sh",
            "scripts/clean.sh",
            "bin/pager",
            "src/a.rs",
        ] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        std::fs::write(
            root.join(".git/config"),
            "[core]\n\thooksPath = tools/hooks\n\tworktree = .\n\texcludesFile = /etc/x\n[alias]\n\tlint = !sh scripts/lint.sh && make -C src\n\
             \tup = !cd .. && true\n[filter \"x\"]\n\tclean = ./scripts/clean.sh\n[include]\n\tpath = ../.gitconfig\n",
        )
        .unwrap();
        std::fs::write(root.join(".gitconfig"), "[core]\n\tpager = bin/pager\n").unwrap();
        let named = named_paths(&root, repository_files(&root), None);
        let want: BTreeSet<PathBuf> = [
            "tools/hooks",
            "scripts/lint.sh",
            "scripts/clean.sh",
            ".gitconfig",
            "bin/pager",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(named, want);
    }
}
