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

/// An allowed program's own ways to run other code or write files it names, as that
/// program parses its options.
struct Hatches {
    program: &'static str,
    /// GNU long options (without `--`): any unambiguous *or ambiguous* prefix of one, with or
    /// without `=value`, counts (getopt_long accepts abbreviations).
    long: &'static [&'static str],
    /// Short option letters: anywhere in a cluster (`-xIprog`, `-fx`, `-oProxyCommand=…`).
    short: &'static [char],
    /// Single-dash long options matched exactly (find's `-exec`, `-fprint0`, ...).
    words: &'static [&'static str],
    /// Arguments that are hatches by themselves (`npm exec`, make's `SHELL=`), exact or as
    /// a prefix ending in `=`.
    operands: &'static [&'static str],
    /// The program is a hatch whatever its arguments (pagers, editors, `npx`).
    always: bool,
}

const HATCHES: &[Hatches] = &[
    Hatches {
        program: "find",
        long: &[],
        short: &[],
        words: &[
            "-exec", "-execdir", "-ok", "-okdir", "-fprintf", "-fprint", "-fprint0", "-fls",
            "-delete",
        ],
        operands: &[],
        always: false,
    },
    Hatches {
        program: "git",
        long: &[
            "config-env",
            "exec-path",
            "upload-pack",
            "receive-pack",
            "ext-diff",
            "textconv",
            "output",
            "git-dir",
            "work-tree",
            "namespace",
            "super-prefix",
            "exec",
            "extcmd",
            "tool",
            "run",
        ],
        short: &['c', 'C'],
        words: &[],
        operands: &[],
        always: false,
    },
    Hatches {
        program: "cargo",
        long: &["config", "manifest-path", "target-dir", "artifact-dir"],
        short: &['Z'],
        words: &[],
        operands: &[],
        always: false,
    },
    Hatches {
        program: "tar",
        long: &[
            "to-command",
            "use-compress-program",
            "checkpoint-action",
            "info-script",
            "new-volume-script",
            "rsh-command",
            "rmt-command",
            "index-file",
        ],
        short: &['I', 'F'],
        words: &[],
        operands: &[],
        always: false,
    },
    Hatches {
        program: "rsync",
        long: &["rsh", "rsync-path"],
        short: &['e'],
        words: &[],
        operands: &[],
        always: false,
    },
    Hatches {
        program: "make",
        long: &["file", "makefile", "eval", "directory", "include-dir"],
        short: &['f', 'E', 'C', 'I'],
        words: &[],
        operands: &["SHELL=", ".SHELLFLAGS=", "MAKEFLAGS=", "MAKEFILES="],
        always: false,
    },
    Hatches {
        program: "npm",
        long: &[
            "script-shell",
            "prefix",
            "userconfig",
            "globalconfig",
            "node-options",
        ],
        short: &[],
        words: &[],
        operands: &["exec", "x", "explore"],
        always: false,
    },
    Hatches {
        program: "pytest",
        long: &["rootdir", "confcutdir", "override-ini", "basetemp"],
        short: &['p', 'c', 'o'],
        words: &[],
        operands: &[],
        always: false,
    },
    Hatches {
        program: "zip",
        long: &["unzip-command"],
        short: &['T'],
        words: &[],
        operands: &[],
        always: false,
    },
    Hatches {
        program: "ssh",
        long: &[],
        short: &['o', 'F'],
        words: &[],
        operands: &["ProxyCommand=", "LocalCommand="],
        always: false,
    },
    Hatches::always("npx"),
    Hatches::always("less"),
    Hatches::always("vim"),
    Hatches::always("vi"),
];

impl Hatches {
    /// A program that is a hatch whatever its arguments.
    const fn always(program: &'static str) -> Self {
        Self {
            program,
            long: &[],
            short: &[],
            words: &[],
            operands: &[],
            always: true,
        }
    }
}

/// True when `arg` spells one of the program's hatches, as the program would parse it.
fn is_hatch(h: &Hatches, arg: &str) -> bool {
    if h.always {
        return true;
    }
    if h.operands
        .iter()
        .any(|o| arg == *o || (o.ends_with('=') && arg.starts_with(o)))
    {
        return true;
    }
    if h.words.contains(&arg) {
        return true;
    }
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or_default();
        // An abbreviation names the option it prefixes (GNU getopt_long); when in doubt, deny.
        return !name.is_empty() && h.long.iter().any(|l| l.starts_with(name));
    }
    if let Some(cluster) = arg.strip_prefix('-') {
        // Any letter of a short-option cluster; a value attached to an earlier letter may
        // hide one too, so the whole cluster is searched (false positives deny, never allow).
        return cluster.chars().any(|c| h.short.contains(&c));
    }
    false
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
    let hatch = HATCHES
        .iter()
        .filter(|h| h.program == base)
        .any(|h| h.always || args.iter().any(|a| is_hatch(h, a)));
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

    /// Issue 11 item 3: escape hatches by parsing, not spelling. Every spelling the tool itself
    /// accepts (abbreviated long options, `--opt=value`, attached short values, clusters) is
    /// caught, generated over every hatch of every tool.
    #[test]
    fn issue_11_escape_hatches_are_caught_however_spelled() {
        for line in [
            "tar --to-comm=sh -xf a.tar",
            "tar --to-c sh -xf a.tar",
            "tar -Iprog -xf a.tar",
            "tar -xIprog -f a.tar",
            "tar --checkpoint-act=exec=sh -cf a.tar .",
            "make -fx",
            "make --fil=x",
            "make -Cdir",
            "make SHELL=/bin/sh",
            "npm --script-she=sh test",
            "npm exec foo",
            "cargo -Zunstable-options test",
            "cargo test --conf=x",
            "rsync -essh a b",
            "ssh -oProxyCommand=sh host",
            "ssh -o ProxyCommand=sh host",
            "find . -fprint0 /abs",
            "find . -fprint /abs",
            "git diff --output=../events.jsonl",
            "git diff --out=x",
            "git --exec=/x status",
            "git -cx=y log",
            "pytest -p evil",
            "pytest -pevil",
        ] {
            let f = analyse(&split(line)).unwrap();
            assert!(f.wrapper, "{line}: {f:?}");
        }
        // Generated: every long hatch, every abbreviation of it down to one letter, bare and
        // with `=value`; every short hatch alone, clustered and with an attached value.
        for h in HATCHES.iter().filter(|h| !h.always) {
            for long in h.long {
                for end in 1..=long.len() {
                    let prefix = &long[..end];
                    for arg in [format!("--{prefix}"), format!("--{prefix}=x")] {
                        let argv = vec![h.program.to_owned(), arg.clone()];
                        assert!(analyse(&argv).unwrap().wrapper, "{} {arg}", h.program);
                    }
                }
            }
            for c in h.short {
                for arg in [format!("-{c}"), format!("-x{c}"), format!("-{c}value")] {
                    let argv = vec![h.program.to_owned(), arg.clone()];
                    assert!(analyse(&argv).unwrap().wrapper, "{} {arg}", h.program);
                }
            }
        }
        // Ordinary uses stay ordinary.
        for line in [
            "git diff --check",
            "git status --short",
            "cargo test --color=always",
            "tar -xzf a.tar",
            "make test",
            "make -j4 test",
            "npm test",
            "pytest -q tests",
            "find . -name x.rs",
        ] {
            let f = analyse(&split(line)).unwrap();
            assert!(!f.wrapper && !f.shell, "{line}: {f:?}");
        }
    }

    /// Issue 11 item 3: arguments that name paths get a target's normalisation.
    #[test]
    fn issue_11_argument_paths_stay_in_the_workspace() {
        let root = "/ws";
        for line in [
            "find . -name /etc/passwd",
            "cat /etc/passwd",
            "cat ../secret",
            "git diff --output=../events.jsonl",
            "cargo test --manifest-path=/tmp/x/Cargo.toml",
            "gcc -o/tmp/x a.c",
            "cat .git/config",
            "cat docs/../.craik/keys/signing.key.pem",
            "cat sub/.git/hooks/pre-commit",
            "cat ~/.ssh/id_rsa",
            "cat ~root/x",
            "ls /ws/../etc",
            "cat .github/workflows/ci.yml",
            "cat a://b/../../../etc/passwd",
            "cat --from=x://y/../../../../etc/shadow",
        ] {
            assert!(check_argument_paths(&split(line), root).is_err(), "{line}");
        }
        for line in [
            "pytest tests/unit",
            "cargo test -p craik",
            "ls .",
            "ls ./",
            "cat /ws/docs/a.md",
            "cat ./docs/a.md",
            "curl https://example.com/x",
            "make -j4",
        ] {
            assert_eq!(check_argument_paths(&split(line), root), Ok(()), "{line}");
        }
    }

    #[test]
    fn limits_are_refused() {
        assert!(analyse(&[]).is_err());
        assert!(analyse(&vec!["a".to_owned(); MAX_ARGS + 1]).is_err());
        assert!(analyse(&["x".repeat(MAX_COMMAND_BYTES + 1)]).is_err());
    }
}
