//! Known escape hatches of allowed programs: the options and operands through which a
//! program runs other code or writes a file it names. A command spelling one is a `wrapper`
//! and denied outright by the base policies (DESIGN §3: denied unless a policy names them);
//! the allow-lists of [`super::tools`] then hold everything *not known to be safe* for a
//! human's approval. Together: known-bad is denied, unknown is approved or not by a person,
//! only known-safe runs on a grant alone.

/// An allowed program's own ways to run other code or write files it names, as that
/// program parses its options.
pub(super) struct Hatches {
    pub(super) program: &'static str,
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
    pub(super) always: bool,
}

pub(super) const HATCHES: &[Hatches] = &[
    Hatches {
        program: "find",
        long: &[],
        short: &[],
        words: &[
            "-exec",
            "-execdir",
            "-ok",
            "-okdir",
            "-fprintf",
            "-fprint",
            "-fprint0",
            "-fls",
            "-delete",
            "-files0-from",
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
            "open-files-in-pager",
            "ext-grep",
            // `clone`/`init --template=DIR` installs DIR's hooks, which clone then runs;
            // `clone --config` sets any configuration (a hooks path, an fsmonitor) first.
            "template",
            "config",
        ],
        short: &['c', 'C', 'O', 'x'],
        words: &[],
        operands: &[
            "foreach",
            "bisect",
            "difftool",
            "mergetool",
            "filter-branch",
            "filter-repo",
        ],
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
            "files-from",
        ],
        short: &['I', 'F', 'T'],
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
    Hatches {
        program: "unzip",
        long: &[],
        short: &[],
        words: &[],
        operands: &[],
        always: false,
    },
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
pub(super) fn is_hatch(h: &Hatches, arg: &str) -> bool {
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

/// Whether a git command (`git SUB …`, or `git-SUB …` run directly: `names` are argv[0]'s
/// base names) gives one of its subcommand's short options that stands for one of git's exec
/// options above (`clone -u CMD`, `clone -uCMD` for `--upload-pack`, `archive -o` for
/// `--output`), as git's own generated tables ([`super::git_options`]) map the letters: the
/// short form is denied as the long one is (issue 30 item 2). A letter anywhere in a cluster
/// counts (a value attached to an earlier letter may hide one: false positives deny).
pub(super) fn git_short_hatch(names: &[&str], args: &[String]) -> bool {
    let Some(git) = HATCHES.iter().find(|h| h.program == "git") else {
        return false;
    };
    super::git_options::GIT_OPTIONS.iter().any(|table| {
        let direct = names
            .iter()
            .any(|n| n.strip_prefix("git-") == Some(table.sub));
        let via = names.contains(&"git") && args.iter().any(|a| a == table.sub);
        (direct || via)
            && args
                .iter()
                .filter_map(|a| a.strip_prefix('-'))
                .filter(|cluster| !cluster.starts_with('-'))
                .any(|cluster| {
                    cluster.chars().any(|c| {
                        table.short.split_ascii_whitespace().any(|pair| {
                            pair.split_once('=').is_some_and(|(letter, long)| {
                                letter.chars().eq([c]) && git.long.contains(&long)
                            })
                        })
                    })
                })
    })
}
