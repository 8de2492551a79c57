//! What the kernel can tell about a command before any policy sees it.
//!
//! Commands run by argv, never through a shell. A command given as one string is split on
//! single spaces only; anything that would need a shell to mean what it says (separators,
//! substitution, redirections, quotes, globs, leading `VAR=` assignments) marks it `shell`.
//! Programs that run other programs (`env`, `timeout`, `xargs`, interpreters with `-c`/`-e`,
//! `find -exec`, `git -c`, ...) mark it `wrapper`. Base policies deny both.

use crate::policy::grant::SHELL_META;

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
}

/// Programs whose job is to run another program.
const WRAPPERS: &[&str] = &[
    "env", "timeout", "nice", "nohup", "sudo", "doas", "su", "xargs", "time", "stdbuf", "ionice",
    "chroot", "setsid", "strace", "ltrace", "gdb", "watch", "flock", "unshare", "nsenter",
    "runuser", "script", "parallel", "busybox", "exec", "command", "builtin", "eval",
];

/// Shells and interpreters: with `-c`, `-e` or similar they run a string as code.
const INTERPRETERS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "deno",
    "bun",
    "php",
    "lua",
    "pwsh",
    "powershell",
    "osascript",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "sed",
    "tclsh",
    "expect",
];

/// Arguments of otherwise allowed programs that execute arbitrary commands.
const ESCAPE_HATCHES: &[(&str, &[&str])] = &[
    (
        "find",
        &[
            "-exec", "-execdir", "-ok", "-okdir", "-fprintf", "-fprint", "-fls", "-delete",
        ],
    ),
    (
        "git",
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "--upload-pack",
            "--receive-pack",
            "--ext-diff",
            "--textconv",
            "-C",
        ],
    ),
    ("cargo", &["--config", "-Z"]),
    (
        "tar",
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
        ],
    ),
    ("rsync", &["-e", "--rsh", "--rsync-path"]),
    ("make", &["-f", "--file", "--eval", "SHELL="]),
    ("npm", &["exec", "x", "--script-shell"]),
    ("npx", &[""]),
    ("zip", &["-T", "--unzip-command", "-TT"]),
    ("ssh", &["-o", "ProxyCommand"]),
    ("less", &[""]),
    ("vim", &[""]),
    ("vi", &[""]),
];

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
    let base = program
        .rsplit('/')
        .next()
        .unwrap_or(program)
        .to_ascii_lowercase();
    let base = base
        .trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
        .to_owned();
    let base = if base.is_empty() {
        program.to_ascii_lowercase()
    } else {
        base
    };
    let args = argv.get(1..).unwrap_or_default();
    let interpreter_code = INTERPRETERS.contains(&base.as_str())
        && args.iter().any(|a| {
            a.starts_with('-')
                && (a.contains('c')
                    || a.contains('e')
                    || a.contains('i')
                    || a == "-"
                    || a.starts_with("--"))
        });
    let hatch = ESCAPE_HATCHES.iter().any(|(prog, flags)| {
        base == *prog
            && args.iter().any(|a| {
                flags.iter().any(|f| {
                    f.is_empty()
                        || a == f
                        || (f.ends_with('=') && a.starts_with(f))
                        || (f.starts_with("--") && a.starts_with(&format!("{f}=")))
                })
            })
    });
    let wrapper = WRAPPERS.contains(&base.as_str())
        || interpreter_code
        || hatch
        || program.contains("/./")
        || program.contains("..");
    Ok(CommandFacts {
        program: program.clone(),
        line,
        shell,
        wrapper,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(line: &str) -> CommandFacts {
        analyse(&split(line)).unwrap()
    }

    #[test]
    fn plain_commands_are_neither_shell_nor_wrapper() {
        for line in [
            "cargo test",
            "cargo test -p craik",
            "pytest tests/unit",
            "git diff --check",
            "npm test",
        ] {
            let f = facts(line);
            assert!(!f.shell && !f.wrapper, "{line}: {f:?}");
        }
    }

    #[test]
    fn shell_syntax_is_flagged() {
        for line in [
            "cargo test; rm -rf /",
            "cargo test && curl x",
            "cargo test || true",
            "cargo test | sh",
            "cargo test & disown",
            "echo $(id)",
            "echo `id`",
            "cat <(id)",
            "cargo test > /etc/passwd",
            "cargo test\nrm -rf /",
            "cargo test\rrm",
            "LD_PRELOAD=/tmp/x.so cargo test",
            "PATH=/tmp cargo",
            "echo ~root",
            "ls *",
            "echo 'quoted'",
            "echo \"x\"",
            "a  b",
        ] {
            let argv = if line.contains('\n') || line.contains('\r') {
                vec![line.to_owned()]
            } else {
                split(line)
            };
            assert!(analyse(&argv).unwrap().shell, "{line:?}");
        }
    }

    #[test]
    fn wrappers_interpreters_and_escape_hatches_are_flagged() {
        for line in [
            "env cargo test",
            "timeout 5 cargo test",
            "nice cargo test",
            "sudo cargo test",
            "xargs rm",
            "/usr/bin/env cargo",
            "sh -c id",
            "bash -c id",
            "python3 -c print",
            "python3.12 -c x",
            "perl -e x",
            "node -e x",
            "ruby -e x",
            "find . -exec rm {} +",
            "find . -delete",
            "git -c core.pager=sh log",
            "git -C /tmp status",
            "cargo --config x test",
            "tar --to-command=sh -xf a.tar",
            "./../bin/cargo test",
            "npx something",
            "awk -e x",
            "sed -i s/a/b/ f",
        ] {
            let argv = split(line);
            let f = analyse(&argv).unwrap();
            assert!(f.wrapper || f.shell, "{line}: {f:?}");
        }
    }

    #[test]
    fn limits_are_refused() {
        assert!(analyse(&[]).is_err());
        assert!(analyse(&vec!["a".to_owned(); MAX_ARGS + 1]).is_err());
        assert!(analyse(&["x".repeat(MAX_COMMAND_BYTES + 1)]).is_err());
    }
}
