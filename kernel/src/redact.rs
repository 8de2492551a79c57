//! Redaction: secrets are replaced before anything a runner or a command produced is persisted
//! or shown. This file owns the replacing; which text is a secret is data (`redact/rules.rs`).
//!
//! The rules are gitleaks' default set, vendored at [`GITLEAKS_VERSION`]
//! (`kernel/rules/gitleaks/`), plus Craik's own (`kernel/rules/craik.toml`: secret-named
//! `key=value` pairs and flags, URL credentials, cut-off PEM blocks, bare key bodies, formats
//! gitleaks lacks, short pieces of prefixed tokens). Each finding's *secret* (its secret group,
//! else its first non-empty group, else the match) is replaced by `[REDACTED]`; the rest of the
//! text stays. Redaction runs to a fixed point, so its output holds nothing any rule finds.
//!
//! Every entry point ([`redact_text`], [`redact_checked`], [`redact_value`], [`still_secret`])
//! works on the text's canonical form (`redact/canon.rs`: ANSI/VT escape sequences, control
//! characters but `\n` and `\t`, and Unicode format and default-ignorable characters
//! removed; backspaces and carriage returns resolved as a terminal shows them), and its
//! output is that form: what a terminal or a model reads is what the rules saw. There is no
//! entry point whose rules skip it (red team round 12, F1: a colour code inside a token hid
//! its tail from the rules and not from the reader). A text whose canonical form differs is
//! reported as changed ([`Redacted::removed`]) even when nothing was a secret. Records keep
//! their bytes where no secret is found: [`redact_record`] and [`redact_value`] (events, case
//! file, step-request context, the audit's receipts, the live status line, which escapes
//! controls visibly) change only text holding a secret, and the host keeps a proposal's content,
//! edits and argv verbatim unless a secret is found in them — recovery re-hashes recorded
//! proposals against their approvals, and bytes Craik writes or runs are not reformatted.
//!
//! The rules also read a view of the canonical text (`redact/view.rs`): a tab pushed into a
//! token, JSON `\u` and HTML escapes of ASCII characters and look-alike Cyrillic or Greek
//! letters are undone there, and what the rules find in the view is replaced over exactly the
//! bytes of the text that spell it. A word character glued before a token with a distinctive
//! prefix (`id_AKIA…`) does not hide it (`redact/rules.rs`, "glued prefixes"). Not handled,
//! and why, is written in `redact/view.rs` and SECURITY.md: a token split by a space or a line
//! break, look-alikes beyond a small table, decoding (base64, hex, percent).
//!
//! Fail closed where it is needed: if the rule set did not load (a file that does not parse, a
//! rule that does not compile), [`redact_text`] returns only `[REDACTED]` and
//! [`still_secret`]/[`redact_checked`] refuse every text. A text is never refused because one
//! short token-shaped string is in it (issue 30): such strings are rules, and are replaced.

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

mod canon;
mod literals;
mod rules;
mod view;
mod window;

use view::View;

pub use rules::{GITLEAKS_VERSION, RuleSetError, SecretFinding, SecretRules};

/// The replacement text.
pub const REDACTED: &str = "[REDACTED]";

/// At most this many passes; a text still holding a secret after them is refused.
const MAX_PASSES: usize = 8;

/// The compiled rule set, loaded once; the error if it could not be.
pub fn secret_rules() -> Result<&'static SecretRules, &'static RuleSetError> {
    static RULES: OnceLock<Result<SecretRules, RuleSetError>> = OnceLock::new();
    RULES.get_or_init(SecretRules::load).as_ref()
}

const UNCHECKABLE: &str = "text the redactor cannot check (the secret rule set did not load)";

/// Text with its secrets replaced, and how many replacements were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    /// Secrets replaced by [`REDACTED`].
    pub replaced: usize,
    /// Escape sequences and invisible characters removed or changed by canonicalisation
    /// (`redact/canon.rs`); not secrets.
    pub removed: usize,
}

impl Redacted {
    /// Whether the text differs from the one given.
    pub fn changed(&self) -> bool {
        self.replaced > 0 || self.removed > 0
    }

    /// Everything withheld: the rule set or the Unicode tables did not load, or an invariant
    /// broke.
    fn withheld(replaced: usize) -> (Redacted, bool) {
        (
            Redacted {
                text: REDACTED.to_owned(),
                replaced: replaced + 1,
                removed: 0,
            },
            false,
        )
    }
}

/// Replaces every recognised secret in `text`, in its canonical form.
pub fn redact_text(text: &str) -> Redacted {
    redact_to_fixed_point(text).0
}

/// The redacted canonical text, and whether it is clean (neither it nor its view holds
/// anything a rule finds).
// INVARIANT: this is the only way text is redacted, so every caller gets the canonical form
// and the view: there is no entry point that skips them.
fn redact_to_fixed_point(text: &str) -> (Redacted, bool) {
    let Ok(rules) = secret_rules() else {
        return Redacted::withheld(0);
    };
    let Some((canonical, removed)) = canon::canonical(text) else {
        return Redacted::withheld(0);
    };
    let done = |text: String, replaced: usize, clean: bool| {
        (
            Redacted {
                text,
                replaced,
                removed,
            },
            clean,
        )
    };
    let mut out = canonical.into_owned();
    let mut replaced = 0;
    for _ in 0..MAX_PASSES {
        // The view first (tabs in a token, JSON and HTML escapes, look-alike letters): a token
        // it reads whole is replaced whole, over the bytes that spell it, before a rule on the
        // text takes a piece of it.
        let mut view_found = false;
        if let Some(view) = View::of(&out) {
            let pass = rules.spans(&view.text);
            if pass.broken {
                return Redacted::withheld(replaced);
            }
            if !pass.spans.is_empty() {
                let spans = rules::merge(pass.spans.iter().map(|s| view.original(s)).collect());
                let Some((next, _)) = replace_spans(&out, &spans) else {
                    return Redacted::withheld(replaced);
                };
                replaced += spans.len();
                out = next;
                view_found = true;
            }
        }
        let Some((next, more, clean)) = fixed_point(rules, out) else {
            return Redacted::withheld(replaced);
        };
        out = next;
        replaced += more;
        if !clean {
            return done(out, replaced, false);
        }
        // Clean, and so is its view: the one just scanned (nothing replaced since), or none.
        if !view_found && (more == 0 || View::of(&out).is_none()) {
            return done(out, replaced, true);
        }
    }
    let clean = rules.first(&out).is_none()
        && View::of(&out).is_none_or(|v| rules.first(&v.text).is_none());
    done(out, replaced, clean)
}

/// `text` with each of `spans` (sorted, disjoint char-boundary ranges) replaced by
/// [`REDACTED`], and where the markers are in the result; `None` if a span is not on char
/// boundaries.
fn replace_spans(text: &str, spans: &[Range<usize>]) -> Option<(String, Vec<Range<usize>>)> {
    let mut next = String::with_capacity(text.len());
    let mut markers = Vec::with_capacity(spans.len());
    let mut at = 0;
    for span in spans {
        next.push_str(text.get(at..span.start)?);
        text.get(span.clone())?;
        markers.push(next.len()..next.len() + REDACTED.len());
        next.push_str(REDACTED);
        at = span.end;
    }
    next.push_str(text.get(at..)?);
    Some((next, markers))
}

/// Redacts `text` (as given) to a fixed point: the text, the replacements made, and whether
/// the last pass found nothing. `None`: a rule that had to be tried does not compile, or an
/// invariant broke.
fn fixed_point(rules: &SecretRules, text: String) -> Option<(String, usize, bool)> {
    let mut out = text;
    let mut replaced = 0;
    let mut pass = rules.spans(&out);
    for _ in 0..MAX_PASSES {
        if pass.broken {
            return None;
        }
        if pass.spans.is_empty() {
            return Some((out, replaced, true));
        }
        // INVARIANT: spans come from matches on `out`, so they are char boundaries.
        let (next, markers) = replace_spans(&out, &pass.spans)?;
        replaced += pass.spans.len();
        out = next;
        pass = rules.respans(&out, &pass, &markers);
    }
    let clean = rules.first(&out).is_none();
    Some((out, replaced, clean))
}

/// What still looks like a secret in `text` (after redaction), if anything: in its canonical
/// form or in that form's view.
pub fn still_secret(text: &str) -> Option<&'static str> {
    let Ok(rules) = secret_rules() else {
        return Some(UNCHECKABLE);
    };
    let Some((canonical, _)) = canon::canonical(text) else {
        return Some(UNCHECKABLE);
    };
    rules
        .first(&canonical)
        .or_else(|| View::of(&canonical).and_then(|v| rules.first(&v.text)))
}

/// Redacts `text`; refuses it only if the rule set did not load or a secret survived every
/// pass (never because a secret was in it: that secret is replaced).
pub fn redact_checked(text: &str) -> Result<Redacted, &'static str> {
    match redact_to_fixed_point(text) {
        (redacted, true) => Ok(redacted),
        (redacted, false) => Err(still_secret(&redacted.text).unwrap_or(UNCHECKABLE)),
    }
}

/// Redacts a record's or a display's text: `text` itself, byte for byte, when no secret is
/// found in its canonical form or view; else its canonical, redacted form (as
/// [`redact_checked`]). For text whose exact bytes matter (recorded proposals are hashed
/// again at recovery; the audit shows signed receipts as signed) or whose display escapes
/// every control visibly (`craik_contracts::one_line`), where removing an escape would also
/// hide that a runner tried one.
pub fn redact_record(text: &str) -> Result<Redacted, &'static str> {
    let r = redact_checked(text)?;
    Ok(if r.replaced > 0 {
        r
    } else {
        Redacted {
            text: text.to_owned(),
            replaced: 0,
            removed: 0,
        }
    })
}

/// Redacts every string (keys included) of a JSON value in place; returns the replacements
/// made, or what still looked like a secret. A JSON value is a record (an event, a case file,
/// a step request's context): a string in which no secret is found keeps its bytes, escape
/// sequences and invisible characters included (recovery replays recorded proposals and hashes
/// them; the display layers escape controls); one in which a secret is found — in its
/// canonical form or its view, like every entry point — is replaced by its canonical,
/// redacted form.
pub fn redact_value(value: &mut Value) -> Result<usize, &'static str> {
    match value {
        Value::String(s) => {
            let r = redact_checked(s)?;
            if r.replaced > 0 {
                *s = r.text;
            }
            Ok(r.replaced)
        }
        Value::Array(items) => items
            .iter_mut()
            .try_fold(0, |n, v| Ok(n + redact_value(v)?)),
        Value::Object(map) => {
            let mut n = 0;
            let old = std::mem::take(map);
            for (key, mut v) in old {
                let k = redact_checked(&key)?;
                n += k.replaced + redact_value(&mut v)?;
                // A key that names a secret (in its canonical form) hides its whole (string)
                // value.
                if is_secret_key(&k.text)
                    && let Value::String(s) = &mut v
                    && s != REDACTED
                    && !s.is_empty()
                {
                    *s = REDACTED.to_owned();
                    n += 1;
                }
                map.insert(if k.replaced > 0 { k.text } else { key }, v);
            }
            Ok(n)
        }
        _ => Ok(0),
    }
}

fn is_secret_key(key: &str) -> bool {
    static KEY: OnceLock<Option<Regex>> = OnceLock::new();
    KEY.get_or_init(|| Regex::new(&format!(r"(?i)^{}$", rules::SECRET_KEYS)).ok())
        .as_ref()
        .is_none_or(|re| re.is_match(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles() {
        let rules = secret_rules().unwrap();
        assert!(rules.ids().count() > 200);
        rules.compile_all().unwrap();
    }

    #[test]
    fn idempotent_and_counted() {
        let once = redact_text("token=abc123 and Bearer abcdefgh12345678");
        assert_eq!(once.replaced, 2);
        let twice = redact_text(&once.text);
        assert_eq!(twice.text, once.text);
        assert_eq!(twice.replaced, 0);
    }
}
