//! What an operator may configure of a wrapped agent CLI (issue 32): the model endpoint it
//! talks to, its model, the name of the variable holding its key, and further flags from a
//! per-CLI allow-list (never free text: a flag not listed here is refused).
//!
//! Checked twice, by the same code: by the host when a registry file loads (a refusal names the
//! file, field and value) and by the shipped handoff adapter that builds the CLI's argv from
//! what the host passed. Validation only: no I/O, no process.

/// The directory, in a handoff adapter's working directory, holding the private `HOME` and
/// `TMPDIR` of the CLI it runs (new for each invocation, removed after it; the host removes
/// it too once the adapter is stopped, so a CLI killed mid-step leaves nothing of it — its
/// session files, a shell snapshot quoting the key — in the run's directory).
pub const PRIVATE_HOME: &str = ".craik-cli";

/// Why `name` is not an environment variable's name as Craik passes them (`None`: it is):
/// uppercase ASCII letters, digits and `_`, not starting with a digit. Names only, never
/// values (a `key_env` holding the key itself is refused here). The host's registry and the
/// handoff adapters check with this one rule.
pub fn variable_name_problem(name: &str) -> Option<&'static str> {
    let valid = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    (!valid).then_some(
        "a variable name is uppercase ASCII letters, digits and `_` (names only, never values)",
    )
}

/// The agent CLIs the shipped handoff adapters wrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentCli {
    Codex,
    Claude,
    Gemini,
}

impl AgentCli {
    /// `codex`, `claude` or `gemini` (a `cli` entry's `adapter`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "codex" => Some(Self::Codex),
            "claude" => Some(Self::Claude),
            "gemini" => Some(Self::Gemini),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Codex => "codex",
            Self::Claude => "claude",
            Self::Gemini => "gemini",
        }
    }

    fn flags(self) -> &'static [Flag] {
        match self {
            Self::Codex => CODEX_FLAGS,
            Self::Claude => CLAUDE_FLAGS,
            Self::Gemini => GEMINI_FLAGS,
        }
    }

    /// The allowed flags, as an error message lists them (`--effort LEVEL (low, …), …`).
    pub fn allowed(self) -> String {
        let flags: Vec<String> = self.flags().iter().map(Flag::shown).collect();
        if flags.is_empty() {
            "none".into()
        } else {
            flags.join(", ")
        }
    }
}

/// What follows an allowed flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// Nothing: a switch.
    None,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A non-negative integer of at most 12 digits.
    Integer,
    /// A non-negative decimal (`2`, `2.50`).
    Decimal,
    /// A model name ([`model_problem`]).
    Model,
    /// codex's `-c KEY=VALUE`: KEY one of these settings, VALUE as the setting says.
    Settings(&'static [(&'static str, Value)]),
}

/// One allowed flag: its spellings (the first is the one passed on) and its value.
#[derive(Debug)]
struct Flag {
    names: &'static [&'static str],
    value: Value,
}

impl Flag {
    fn shown(&self) -> String {
        let name = self.names.first().copied().unwrap_or_default();
        match self.value {
            Value::None => name.to_owned(),
            Value::OneOf(words) => format!("{name} ({})", words.join("|")),
            Value::Integer => format!("{name} N"),
            Value::Decimal => format!("{name} AMOUNT"),
            Value::Model => format!("{name} MODEL"),
            Value::Settings(settings) => settings
                .iter()
                .map(|(key, value)| match value {
                    Value::OneOf(words) => format!("{name} {key}={}", words.join("|")),
                    Value::Integer => format!("{name} {key}=N"),
                    _ => format!("{name} {key}=…"),
                })
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

const BOOL: &[&str] = &["true", "false"];

/// codex 0.169.0 (`codex exec --help`): only `-c` settings that tune how the model answers.
/// Everything else (`--sandbox`, `--add-dir`, `--dangerously-*`, `--profile`, `--oss`, `-c`
/// of any other key, `--enable`) widens what codex may do or where it talks, or undoes a flag
/// the adapter sets.
const CODEX_FLAGS: &[Flag] = &[Flag {
    names: &["-c", "--config"],
    value: Value::Settings(&[
        (
            "model_reasoning_effort",
            Value::OneOf(&["none", "minimal", "low", "medium", "high", "xhigh"]),
        ),
        (
            "model_reasoning_summary",
            Value::OneOf(&["auto", "concise", "detailed", "none"]),
        ),
        ("model_verbosity", Value::OneOf(&["low", "medium", "high"])),
        ("model_context_window", Value::Integer),
        ("model_auto_compact_token_limit", Value::Integer),
        ("hide_agent_reasoning", Value::OneOf(BOOL)),
    ]),
}];

/// claude-code 2.1.328 (`claude --help`): effort, spending and prompt-shape flags, and those
/// that only turn things off. Never `--tools`, `--allowed-tools`, `--permission-mode`,
/// `--dangerously-*`, `--add-dir`, `--mcp-config`, `--settings`, `--plugin-*`, `--agents`,
/// `--system-prompt*`, `--resume`.
const CLAUDE_FLAGS: &[Flag] = &[
    Flag {
        names: &["--effort"],
        value: Value::OneOf(&["low", "medium", "high", "xhigh", "max"]),
    },
    Flag {
        names: &["--max-budget-usd"],
        value: Value::Decimal,
    },
    Flag {
        names: &["--fallback-model"],
        value: Value::Model,
    },
    Flag {
        names: &["--exclude-dynamic-system-prompt-sections"],
        value: Value::None,
    },
    Flag {
        names: &["--disable-slash-commands"],
        value: Value::None,
    },
    Flag {
        names: &["--include-partial-messages"],
        value: Value::None,
    },
    Flag {
        names: &["--safe-mode"],
        value: Value::None,
    },
    Flag {
        names: &["--bare"],
        value: Value::None,
    },
];

/// gemini-cli 0.61.0 (`gemini --help`): its other flags widen what it may do or read
/// (`--yolo`, `--approval-mode`, `--include-directories`, `--policy`, `--extensions`,
/// `--sandbox`) or change its output (`--raw-output`, `--output-format`).
const GEMINI_FLAGS: &[Flag] = &[Flag {
    names: &["-d", "--debug"],
    value: Value::None,
}];

/// A refused CLI argument: its index in the list, the value, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}[{index}] `{}`: {why}", "cli_args", crate::Truncated(value))]
pub struct CliArgError {
    pub index: usize,
    pub value: String,
    pub why: String,
}

/// Checks an operator's further flags for `cli` against its allow-list and returns them as
/// passed to the CLI (each flag then its value as a separate argument; a `--flag=value` is
/// split). A flag not on the list, a missing or bad value, is refused.
pub fn check_cli_args(cli: AgentCli, args: &[String]) -> Result<Vec<String>, CliArgError> {
    let mut out = Vec::with_capacity(args.len());
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let refuse = |index: usize, value: &str, why: String| CliArgError {
            index,
            value: value.to_owned(),
            why,
        };
        let (name, attached) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with('-') => (n, Some(v)),
            _ => (arg.as_str(), None),
        };
        let Some(flag) = cli.flags().iter().find(|f| f.names.contains(&name)) else {
            return Err(refuse(
                i,
                arg,
                format!(
                    "not a flag Craik passes to {} (allowed: {})",
                    cli.name(),
                    cli.allowed()
                ),
            ));
        };
        let canonical = flag.names.first().copied().unwrap_or(name);
        if flag.value == Value::None {
            if attached.is_some() {
                return Err(refuse(i, arg, format!("`{canonical}` takes no value")));
            }
            out.push(canonical.to_owned());
            i += 1;
            continue;
        }
        let (value, at) = match attached {
            Some(v) => (v, i),
            None => match args.get(i + 1) {
                Some(v) => (v.as_str(), i + 1),
                None => {
                    return Err(refuse(
                        i,
                        arg,
                        format!("`{canonical}` needs a value: {}", flag.shown()),
                    ));
                }
            },
        };
        value_problem(flag.value, value)
            .map_err(|why| refuse(at, value, format!("{}: {why}", flag.shown())))?;
        out.push(canonical.to_owned());
        out.push(value.to_owned());
        i = at + 1;
    }
    Ok(out)
}

fn value_problem(kind: Value, value: &str) -> Result<(), String> {
    let digits = |s: &str| !s.is_empty() && s.len() <= 12 && s.bytes().all(|b| b.is_ascii_digit());
    match kind {
        Value::None => Err("takes no value".into()),
        Value::OneOf(words) if words.contains(&value) => Ok(()),
        Value::OneOf(words) => Err(format!("expected one of {}", words.join(", "))),
        Value::Integer if digits(value) => Ok(()),
        Value::Integer => Err("expected a non-negative integer".into()),
        Value::Decimal => match value.split_once('.') {
            None if digits(value) => Ok(()),
            Some((whole, fraction)) if digits(whole) && digits(fraction) => Ok(()),
            _ => Err("expected a non-negative amount such as `2.50`".into()),
        },
        Value::Model => model_problem(value).map_or(Ok(()), |why| Err(why.into())),
        Value::Settings(settings) => {
            let (key, setting) = value
                .split_once('=')
                .ok_or_else(|| "expected KEY=VALUE".to_owned())?;
            let (_, kind) = settings
                .iter()
                .find(|(k, _)| *k == key)
                .ok_or_else(|| format!("`{}` is not an allowed setting", crate::Truncated(key)))?;
            value_problem(*kind, setting)
        }
    }
}

/// Why `model` cannot be passed as a CLI's model (`None`: it can): 1 to 200 ASCII letters,
/// digits and `-._:/@`, not starting with `-` (it would read as a flag).
pub fn model_problem(model: &str) -> Option<&'static str> {
    let ok = !model.is_empty()
        && model.len() <= 200
        && !model.starts_with('-')
        && model.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':' | b'/' | b'@')
        });
    (!ok).then_some(
        "a model name is 1 to 200 ASCII letters, digits and `-._:/@`, not starting with `-`",
    )
}

/// Why `url` cannot be a CLI's model endpoint (`None`: it can): `http://` or `https://`, a
/// host (a name, an IPv4 address or a bracketed IPv6 one) with an optional port, and a path of
/// plain characters. No user or password (a credential in a URL would be recorded and shown:
/// name the key's variable in `key_env` instead), no query or fragment, at most 2048 bytes.
pub fn endpoint_problem(url: &str) -> Option<&'static str> {
    if url.len() > 2048 {
        return Some("an endpoint is at most 2048 bytes");
    }
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return Some("an endpoint starts with `http://` or `https://`");
    };
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    if authority.contains('@') {
        return Some(
            "no user or password in an endpoint: name the variable holding the key in `key_env`",
        );
    }
    if path.contains(['?', '#']) || authority.contains(['?', '#']) {
        return Some(
            "no query or fragment in an endpoint (a key there would be recorded: use `key_env`)",
        );
    }
    let (host, port, bracketed) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return Some("a bracketed IPv6 host needs its `]`");
        };
        if addr.is_empty()
            || !addr
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return Some("a bracketed IPv6 host is hex digits, `:` and `.`");
        }
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':') {
                Some(p) => Some(p),
                None => return Some("an endpoint's port follows `:`"),
            },
        };
        (addr, port, true)
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p), false),
            None => (authority, None, false),
        }
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && (bracketed
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'));
    if !host_ok {
        return Some(
            "an endpoint's host is letters, digits, `-` and `.` (or a bracketed IPv6 address)",
        );
    }
    if let Some(port) = port
        && !port
            .parse::<u16>()
            .is_ok_and(|p| p > 0 && port.bytes().all(|b| b.is_ascii_digit()))
    {
        return Some("an endpoint's port is a number from 1 to 65535");
    }
    if !path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_' | b'~' | b'%'))
    {
        return Some("an endpoint's path is letters, digits and `/-._~%`");
    }
    None
}

/// The host of a valid endpoint (what a model-step report names), lowercased; `None` for one
/// [`endpoint_problem`] refuses.
pub fn endpoint_host(url: &str) -> Option<String> {
    if endpoint_problem(url).is_some() {
        return None;
    }
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split('/').next()?;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    Some(host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn issue_32_cli_args_are_allow_listed_per_cli() {
        assert_eq!(
            check_cli_args(
                AgentCli::Claude,
                &strings(&["--effort=high", "--max-budget-usd", "2.50", "--bare"])
            )
            .unwrap(),
            strings(&["--effort", "high", "--max-budget-usd", "2.50", "--bare"])
        );
        assert_eq!(
            check_cli_args(
                AgentCli::Codex,
                &strings(&[
                    "--config",
                    "model_reasoning_effort=high",
                    "-c=model_context_window=4000"
                ])
            )
            .unwrap(),
            strings(&[
                "-c",
                "model_reasoning_effort=high",
                "-c",
                "model_context_window=4000"
            ])
        );
        assert_eq!(
            check_cli_args(AgentCli::Gemini, &strings(&["--debug"])).unwrap(),
            strings(&["-d"])
        );
        for (cli, args, index) in [
            (AgentCli::Claude, &["--dangerously-skip-permissions"][..], 0),
            (AgentCli::Claude, &["--tools", "Bash"][..], 0),
            (AgentCli::Claude, &["--effort"][..], 0),
            (AgentCli::Claude, &["--effort", "extreme"][..], 1),
            (AgentCli::Claude, &["--bare=1"][..], 0),
            (AgentCli::Claude, &["--max-budget-usd", "-1"][..], 1),
            (AgentCli::Claude, &["--fallback-model", "--tools"][..], 1),
            (
                AgentCli::Codex,
                &["-c", "sandbox_mode=danger-full-access"][..],
                1,
            ),
            (AgentCli::Codex, &["-c", "model_reasoning_effort"][..], 1),
            (AgentCli::Codex, &["--sandbox", "workspace-write"][..], 0),
            (AgentCli::Codex, &["--enable", "shell_tool"][..], 0),
            (AgentCli::Codex, &["-c", "model_context_window=1e9"][..], 1),
            (AgentCli::Gemini, &["--yolo"][..], 0),
            (
                AgentCli::Gemini,
                &["--debug", "--approval-mode=yolo"][..],
                1,
            ),
            (AgentCli::Gemini, &["-d", "x"][..], 1),
        ] {
            let err = check_cli_args(cli, &strings(args)).unwrap_err();
            assert_eq!(err.index, index, "{cli:?} {args:?}: {err}");
        }
        let err = check_cli_args(AgentCli::Gemini, &strings(&["--yolo"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cli_args[0] `--yolo`: not a flag Craik passes to gemini (allowed: -d)"
        );
    }

    #[test]
    fn issue_32_endpoints_carry_no_credentials() {
        for good in [
            "http://127.0.0.1:8080/v1",
            "https://api.openai.com/v1",
            "https://gateway.example.com",
            "http://[::1]:9000/anthropic",
            "http://localhost:1",
        ] {
            assert_eq!(endpoint_problem(good), None, "{good}");
        }
        for bad in [
            "ftp://x",
            "127.0.0.1:8080",
            "https://user:pw@example.com/v1",
            "https://example.com/v1?key=sk-1",
            "https://example.com/#x",
            "https://",
            "https://exa mple.com",
            "https://example.com:0",
            "https://example.com:99999",
            "https://example.com:8080x",
            "https://example.com/v1\n",
            "https://example.com/\"",
            "http://[::1",
            "http://[zz]:1",
            "HTTP://example.com",
        ] {
            assert!(endpoint_problem(bad).is_some(), "{bad}");
        }
        assert_eq!(
            endpoint_host("http://127.0.0.1:8080/v1").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            endpoint_host("https://API.example.com").as_deref(),
            Some("api.example.com")
        );
        assert_eq!(endpoint_host("http://[::1]:9/x").as_deref(), Some("::1"));
        assert_eq!(endpoint_host("https://u@x"), None);
        assert_eq!(model_problem("gpt-5.1"), None);
        assert_eq!(model_problem("models/gemini-2.5-pro"), None);
        for bad in ["", "-x", "a b", "a\"b", "m\n"] {
            assert!(model_problem(bad).is_some(), "{bad:?}");
        }
    }
}
