//! What the kernel can tell about a command before any policy sees it.
//!
//! Commands run by argv, never through a shell. A command given as one string is split on
//! single spaces only; anything that would need a shell to mean what it says (separators,
//! substitution, redirections, quotes, globs, leading `VAR=` assignments) marks it `shell`.
//! Programs whose job is to run other programs (`env`, `timeout`, `xargs`, `sudo`, pagers,
//! editors, `npx`, interpreters given code with `-c`/`-e`) mark it `wrapper`. Base policies
//! deny both.
//!
//! Programs that *can* run other programs or read hidden arguments (git, cargo, find, tar,
//! make, npm, pytest, rsync, zip, ssh, interpreters, ... — the multiplexers of `tools`) are
//! read against an allow-list of the subcommands, options and operands known to be safe;
//! anything else marks the command `unvetted`, which needs a human approval (and is therefore
//! denied in automation). Issue 18 item 7: allow-list what is known safe, never deny-list
//! what is known bad.

use crate::policy::grant::SHELL_META;

mod git_options;
mod hatches;
mod scan;
#[cfg(test)]
mod tests;
mod tools;

/// Longest accepted command line, in bytes; longer is refused (too long to analyse).
pub const MAX_COMMAND_BYTES: usize = 8192;
/// Most accepted argv entries.
pub const MAX_ARGS: usize = 256;

/// The analysed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandFacts {
    /// argv[0] as given.
    pub program: String,
    /// argv joined with single spaces.
    pub line: String,
    /// Needs shell interpretation.
    pub shell: bool,
    /// Runs other programs.
    pub wrapper: bool,
    /// argv[0] is a multiplexer (a program that can run other programs) and some subcommand,
    /// option or operand is not on its allow-list.
    pub unvetted: bool,
    /// The first argument not on the allow-list, for people: "`git grep -O` is not on git's
    /// allow-list".
    pub unvetted_because: Option<String>,
}

/// Programs whose job is to run another program.
const WRAPPERS: &[&str] = &[
    "env", "timeout", "nice", "nohup", "sudo", "doas", "su", "xargs", "time", "stdbuf", "ionice",
    "chroot", "setsid", "strace", "ltrace", "gdb", "watch", "flock", "unshare", "nsenter",
    "runuser", "script", "parallel", "busybox", "exec", "command", "builtin", "eval",
];

/// Programs that run whatever a person (or a file) types into them, or a package fetched to be
/// run, whatever their arguments: pagers (`!cmd`, `v` to edit), editors (`:!cmd`), browsers,
/// `man` (runs a pager and preprocessors), package runners.
const ALWAYS_WRAPPERS: &[&str] = &[
    "less",
    "more",
    "most",
    "pg",
    "lv",
    "man",
    "info",
    "pager",
    "sensible-pager",
    "vi",
    "vim",
    "nvim",
    "gvim",
    "rvim",
    "view",
    "rview",
    "vimdiff",
    "nvim-qt",
    "evim",
    "ex",
    "ed",
    "red",
    "emacs",
    "emacsclient",
    "nano",
    "pico",
    "joe",
    "jed",
    "mcedit",
    "micro",
    "kak",
    "hx",
    "editor",
    "sensible-editor",
    "w3m",
    "lynx",
    "links",
    "elinks",
    "tig",
    "xdg-open",
    "sensible-browser",
    "x-www-browser",
    "npx",
    "pnpx",
    "bunx",
];

/// Shells and interpreters: with `-c`, `-e` or similar they run a string as code.
const INTERPRETERS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "mksh",
    "ash",
    "fish",
    "csh",
    "tcsh",
    "python",
    "pypy",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "luajit",
    "pwsh",
    "powershell",
    "osascript",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "sed",
    "gsed",
    "tclsh",
    "wish",
    "expect",
];

/// True when an interpreter is handed code in an argument: an option spelling a code flag
/// (`-c`, `-e`, `-i`, node's `-p`, php's `-r`; PowerShell's case-insensitively), `-` (stdin),
/// or any long option. Every argument is searched, so false positives deny, never allow.
fn interpreter_code(base: &str, args: &[String]) -> bool {
    let extra = match base {
        "node" | "nodejs" | "deno" | "bun" => "p",
        "php" => "r",
        _ => "",
    };
    let fold = matches!(base, "pwsh" | "powershell");
    args.iter().any(|a| {
        let a = if fold {
            a.to_ascii_lowercase()
        } else {
            a.clone()
        };
        a.starts_with('-')
            && (a.contains(['c', 'e', 'i'])
                || a.contains(|c| extra.contains(c))
                || a == "-"
                || a.starts_with("--"))
    })
}

/// argv[0]'s base name as the tables spell it (`/usr/bin/Python3.12` → `python`), and the
/// same before its first dot (`vim.basic` → `vim`).
fn base_names(program: &str) -> (String, String) {
    let trim = |name: &str| {
        let lower = name.to_ascii_lowercase();
        let trimmed = lower.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if trimmed.is_empty() {
            lower.clone()
        } else {
            trimmed.to_owned()
        }
    };
    let last = program.rsplit('/').next().unwrap_or(program);
    let base = trim(last);
    let first = trim(last.split('.').next().unwrap_or(last));
    (base, first)
}

/// Analyses argv (or a command line, split on single spaces).
pub fn analyse(argv: &[String]) -> Result<CommandFacts, String> {
    let Some(program) = argv.first().filter(|p| !p.is_empty()) else {
        return Err("empty command".into());
    };
    if argv.len() > MAX_ARGS {
        return Err(format!(
            "more than {MAX_ARGS} arguments; too long to analyse"
        ));
    }
    let line = argv.join(" ");
    if line.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "longer than {MAX_COMMAND_BYTES} bytes; too long to analyse"
        ));
    }
    let shell = argv.iter().any(|a| {
        a.is_empty()
            || a.chars()
                .any(|c| SHELL_META.contains(&c) || c.is_control() || c == ' ')
    }) || is_assignment(program);
    let (base, first) = base_names(program);
    let names = [base.as_str(), first.as_str()];
    let args = argv.get(1..).unwrap_or_default();
    let listed = |table: &[&str]| names.iter().any(|n| table.contains(n));
    let interpreter_code = names
        .iter()
        .any(|n| INTERPRETERS.contains(n) && interpreter_code(n, args));
    // The base name if it names a multiplexer, else the name before its first dot.
    let tool = names.into_iter().find(|n| {
        tools::multiplexer(n).is_some() || n.starts_with("git-") || n.starts_with("cargo-")
    });
    let unvetted_because = tool.and_then(|n| tools::vet(n, args));
    // A command off its tool's allow-list that also spells a known escape hatch is denied
    // outright (a wrapper), not held for approval: known-bad is never approvable.
    // `git-SUB` (a git-core program run directly) has git's hatches.
    let git_direct = names.iter().any(|n| n.starts_with("git-"));
    let hatch = unvetted_because.is_some()
        && (hatches::HATCHES
            .iter()
            .filter(|h| names.contains(&h.program) || (git_direct && h.program == "git"))
            .any(|h| h.always || args.iter().any(|a| hatches::is_hatch(h, a)))
            || hatches::git_short_hatch(&names, args));
    let wrapper = listed(WRAPPERS)
        || listed(ALWAYS_WRAPPERS)
        || hatch
        || interpreter_code
        || program.contains("/./")
        || program.contains("..");
    Ok(CommandFacts {
        program: program.clone(),
        line,
        shell,
        wrapper,
        unvetted: unvetted_because.is_some(),
        unvetted_because,
    })
}

/// Issue 11 item 3: every argument that names a path (or carries one as an option value:
/// `--opt=path`, `-opath`) must name one inside the workspace that is not protected — the
/// same normalisation a `repo.*` target gets. A command may not reach outside the workspace,
/// into `.git/`, `.craik/` or agent configuration through its arguments.
pub(crate) fn check_argument_paths(argv: &[String], root: &str) -> Result<(), String> {
    for arg in argv.iter().skip(1) {
        let mut candidates: Vec<&str> = Vec::new();
        if let Some(long) = arg.strip_prefix("--") {
            if let Some((_, value)) = long.split_once('=') {
                candidates.push(value);
            }
        } else if arg.len() > 2 && arg.starts_with('-') {
            let attached = arg.get(2..).unwrap_or_default();
            candidates.push(attached.split_once('=').map_or(attached, |(_, v)| v));
        } else {
            candidates.push(arg);
        }
        for candidate in candidates {
            // A URL is a path to the program too (`a://b/../../x` climbs out of the cwd), so
            // it gets the same normalisation: `https://host/x` stays inside and passes.
            let looks_like_path =
                candidate.contains('/') || candidate.starts_with('.') || candidate.starts_with('~');
            if !looks_like_path || matches!(candidate, "." | "./") {
                continue;
            }
            let path = crate::path::TargetPath::normalize(root, candidate).map_err(|e| {
                format!(
                    "argument `{}` names a path the command may not reach: {e}",
                    craik_contracts::Truncated(arg)
                )
            })?;
            if let Some(p) = path.protected() {
                return Err(format!(
                    "argument `{}` names `{path}`, a protected path ({})",
                    craik_contracts::Truncated(arg),
                    p.name()
                ));
            }
        }
    }
    Ok(())
}

/// Issue 19 item 5: the workspace paths a command's arguments could name, normalised as a
/// `repo.*` target is, for policies (`resource.paths`, `resource.dirs`). Every operand counts
/// (`ls scripts` names `scripts` though it has no `/`), and every option value (`--opt=x`,
/// `-ox`); bare options and arguments that are no workspace path (URLs, paths outside, which
/// `check_argument_paths` refuses when they look like paths) are left out. Over-inclusion is
/// deliberate: a forbid on a directory must not miss an operand that happens to be a word.
pub(crate) fn argument_paths(argv: &[String], root: &str) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    for arg in argv.iter().skip(1) {
        let candidate = if let Some(long) = arg.strip_prefix("--") {
            long.split_once('=').map(|(_, v)| v)
        } else if arg.starts_with('-') && arg.len() > 2 {
            arg.get(2..)
                .map(|a| a.split_once('=').map_or(a, |(_, v)| v))
        } else if arg.starts_with('-') {
            None
        } else {
            Some(arg.as_str())
        };
        let Some(candidate) = candidate.filter(|c| !c.is_empty() && !c.contains("://")) else {
            continue;
        };
        if let Ok(path) = crate::path::TargetPath::normalize(root, candidate) {
            out.insert(path.as_str().to_owned());
        }
    }
    out.into_iter().collect()
}

/// Splits a command string on single spaces (no quoting: quoting needs a shell).
pub fn split(line: &str) -> Vec<String> {
    line.split(' ').map(str::to_owned).collect()
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        None => false,
    }
}
