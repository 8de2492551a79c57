//! Reading a program's arguments the way the program reads them, against an allow-list.
//!
//! Owns the option grammar the multiplexers in [`super::tools`] share: GNU long options with
//! abbreviations and `=value`, short-option clusters with attached values, values in the next
//! argument, `--`. It decides nothing about safety: the tables in `tools` do.
//!
//! INVARIANT: wherever this reading could differ from the program's own, the argument is a
//! [`Miss`] (not on the allow-list), never accepted: an abbreviation that could expand to an
//! option off the list, a separate value that the program might read as an option, an option
//! given a value it does not take.

/// An allow-list, or a list of a tool's documented options: entries separated by whitespace,
/// each `name` (takes no value), `name=` (takes a value, attached or as the next argument),
/// `name?` (an optional value, attached only) or `name~` (the next argument is its value unless
/// it is the last: git's `--contains [<commit>]`). A one-character name is a short option, a
/// longer one a long option.
pub(super) type Table = &'static str;

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Takes {
    Nothing,
    Value,
    Optional,
    ValueUnlessLast,
}

/// The entries of a table, with how each takes its value.
pub(super) fn entries(table: Table) -> impl Iterator<Item = (&'static str, Takes)> {
    table.split_ascii_whitespace().map(|e| {
        if let Some(n) = e.strip_suffix('=') {
            (n, Takes::Value)
        } else if let Some(n) = e.strip_suffix('?') {
            (n, Takes::Optional)
        } else if let Some(n) = e.strip_suffix('~') {
            (n, Takes::ValueUnlessLast)
        } else {
            (e, Takes::Nothing)
        }
    })
}

/// How one program (or one subcommand) reads its options.
#[derive(Debug, Clone, Copy)]
pub(super) struct Syntax {
    /// The allow-list: the union of these tables.
    pub(super) allowed: &'static [Table],
    /// Every long option the tool is known to have, allowed or not: an abbreviation is read
    /// as the tool would expand it, and is accepted only when every option it could expand to
    /// is on the allow-list.
    pub(super) documented: &'static [Table],
    /// `-<digits>` is an allowed option (`git log -3`, `git grep -2`, `zip -9`).
    pub(super) numeric: bool,
    /// Short options are whole arguments, never clustered and never with an attached value
    /// (npm's nopt, zip's multi-letter single-dash options).
    pub(super) whole_shorts: bool,
    /// Options end at the first operand (POSIX getopt, git's and cargo's global options);
    /// otherwise they may follow operands (GNU getopt permutes).
    pub(super) stop_at_operand: bool,
}

impl Syntax {
    /// A permuting syntax with these allowed and documented tables.
    pub(super) const fn new(allowed: &'static [Table], documented: &'static [Table]) -> Self {
        Self {
            allowed,
            documented,
            numeric: false,
            whole_shorts: false,
            stop_at_operand: false,
        }
    }

    pub(super) const fn numeric(mut self) -> Self {
        self.numeric = true;
        self
    }

    pub(super) const fn whole_shorts(mut self) -> Self {
        self.whole_shorts = true;
        self
    }

    pub(super) const fn stop_at_operand(mut self) -> Self {
        self.stop_at_operand = true;
        self
    }

    /// The allowed entry spelled exactly `name` (the first one, in table order).
    pub(super) fn allowed(&self, name: &str) -> Option<(&'static str, Takes)> {
        self.allowed
            .iter()
            .flat_map(|t| entries(t))
            .find(|(n, _)| *n == name)
    }

    /// Reads a long option name (without `--` and `=value`) as the tool would: exactly, or as
    /// an abbreviation accepted only when every option it could expand to is allowed and all
    /// of them take their value the same way.
    fn long(&self, name: &str) -> Result<(&'static str, Takes), Miss> {
        let spelled = || format!("--{name}");
        if name.is_empty() {
            return Err(Miss::new(spelled()));
        }
        let is_long = |n: &&str| n.chars().nth(1).is_some();
        let mut allowed: Vec<(&'static str, Takes)> = Vec::new();
        for (n, takes) in self.allowed.iter().flat_map(|t| entries(t)) {
            if is_long(&n) && n == name {
                return Ok((n, takes));
            }
            if is_long(&n) && n.starts_with(name) && !allowed.iter().any(|(a, _)| *a == n) {
                allowed.push((n, takes));
            }
        }
        // (Most entries do not start with `name`: skip them before parsing a suffix.)
        let documented = self
            .documented
            .iter()
            .flat_map(|t| t.split_ascii_whitespace())
            .filter(|raw| raw.starts_with(name))
            .flat_map(entries);
        for (n, _) in documented {
            if is_long(&n) && n.starts_with(name) && !allowed.iter().any(|(a, _)| *a == n) {
                return Err(if n == name {
                    Miss::new(spelled())
                } else {
                    Miss::new(spelled()).because(format!("it may abbreviate `--{n}`"))
                });
            }
        }
        let (first, rest) = allowed.split_first().ok_or_else(|| Miss::new(spelled()))?;
        if let Some((other, _)) = rest.iter().find(|(_, takes)| *takes != first.1) {
            return Err(Miss::new(spelled()).because(format!(
                "an abbreviation of options that take values differently (`--{other}`)"
            )));
        }
        Ok(*first)
    }

    /// The allowed short option `c`.
    fn short(&self, c: &str) -> Option<(&'static str, Takes)> {
        self.allowed(c).filter(|(n, _)| n.chars().nth(1).is_none())
    }
}

/// An argument that is not on the allow-list, as the user spelled it (without any value), and
/// why when the spelling alone does not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Miss {
    pub(super) spelled: String,
    pub(super) because: Option<String>,
}

impl Miss {
    pub(super) fn new(spelled: impl Into<String>) -> Self {
        Self {
            spelled: spelled.into(),
            because: None,
        }
    }

    pub(super) fn because(mut self, why: impl Into<String>) -> Self {
        self.because = Some(why.into());
        self
    }
}

/// What [`read`] found.
#[derive(Debug, Default)]
pub(super) struct Read<'a> {
    /// Operands before `--` (or before the first operand's position, with
    /// [`Syntax::stop_at_operand`]: then only up to it).
    pub(super) operands: Vec<&'a str>,
    /// The options given, by their listed name, with their values.
    pub(super) options: Vec<(&'static str, Option<&'a str>)>,
    /// The arguments after `--`, when it was given.
    pub(super) after: Option<&'a [String]>,
    /// With [`Syntax::stop_at_operand`]: the index of the first operand (or `args.len()`).
    pub(super) stop: usize,
}

impl Read<'_> {
    /// True when the option listed as `name` was given.
    pub(super) fn has(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| *n == name)
    }
}

/// Reads `args` as `syntax` says; the first argument not on the allow-list is a miss.
pub(super) fn read<'a>(syntax: &Syntax, args: &'a [String]) -> Result<Read<'a>, Miss> {
    let mut out = Read {
        stop: args.len(),
        ..Read::default()
    };
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            if syntax.stop_at_operand {
                // `--` before the first operand belongs to whoever reads next; leave it.
                out.stop = i;
                return Ok(out);
            }
            out.after = Some(args.get(i + 1..).unwrap_or_default());
            return Ok(out);
        }
        i += 1;
        if arg == "-" || !arg.starts_with('-') {
            if syntax.stop_at_operand {
                out.stop = i - 1;
                return Ok(out);
            }
            out.operands.push(arg);
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            let (listed, takes) = syntax.long(name)?;
            let value = match (takes, attached) {
                (Takes::Nothing, Some(_)) => {
                    return Err(Miss::new(format!("--{name}=")).because("a value it does not take"));
                }
                (Takes::Nothing | Takes::Optional, None) => None,
                (_, Some(value)) => Some(value),
                (Takes::Value | Takes::ValueUnlessLast, None) => {
                    next_value(args, &mut i, takes, || format!("--{name}"))?
                }
            };
            out.options.push((listed, value));
            continue;
        }
        let body = arg.get(1..).unwrap_or_default();
        if syntax.numeric && body.bytes().all(|b| b.is_ascii_digit()) {
            out.options.push(("-<n>", Some(body)));
            continue;
        }
        for (at, c) in body.char_indices() {
            let end = at + c.len_utf8();
            let letter = body.get(at..end).unwrap_or_default();
            let Some((listed, takes)) = syntax.short(letter) else {
                return Err(Miss::new(format!("-{c}")));
            };
            let rest = body.get(end..).unwrap_or_default();
            if syntax.whole_shorts && !rest.is_empty() {
                return Err(Miss::new(arg.clone()));
            }
            match takes {
                Takes::Nothing => out.options.push((listed, None)),
                Takes::Optional => {
                    out.options
                        .push((listed, Some(rest).filter(|r| !r.is_empty())));
                    break;
                }
                Takes::Value | Takes::ValueUnlessLast => {
                    let value = if rest.is_empty() {
                        next_value(args, &mut i, takes, || format!("-{c}"))?
                    } else {
                        Some(rest)
                    };
                    out.options.push((listed, value));
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// The next argument as an option's value. A value that starts with `-` (other than `-`
/// itself) could be read by the program as an option instead: a miss. A missing value is one
/// too, unless the option defaults when last.
fn next_value<'a>(
    args: &'a [String],
    i: &mut usize,
    takes: Takes,
    spelled: impl Fn() -> String,
) -> Result<Option<&'a str>, Miss> {
    match args.get(*i) {
        None if takes == Takes::ValueUnlessLast => Ok(None),
        None => Err(Miss::new(spelled()).because("its value is missing")),
        Some(v) if v.starts_with('-') && v != "-" => Err(Miss::new(format!("{} {v}", spelled()))
            .because("a value that could be read as an option")),
        Some(v) => {
            *i += 1;
            Ok(Some(v))
        }
    }
}
