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
//! Fail closed where it is needed: if the rule set did not load (a file that does not parse, a
//! rule that does not compile), [`redact_text`] returns only `[REDACTED]` and
//! [`still_secret`]/[`redact_checked`] refuse every text. A text is never refused because one
//! short token-shaped string is in it (issue 30): such strings are rules, and are replaced.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

mod rules;

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
    pub replaced: usize,
}

/// Replaces every recognised secret in `text`.
pub fn redact_text(text: &str) -> Redacted {
    redact_to_fixed_point(text).0
}

/// The redacted text, and whether it is clean (the last pass found nothing).
fn redact_to_fixed_point(text: &str) -> (Redacted, bool) {
    let Ok(rules) = secret_rules() else {
        return (
            Redacted {
                text: REDACTED.to_owned(),
                replaced: 1,
            },
            false,
        );
    };
    let mut out = text.to_owned();
    let mut replaced = 0;
    let mut pass = rules.spans(&out);
    for _ in 0..MAX_PASSES {
        if pass.broken {
            return (
                Redacted {
                    text: REDACTED.to_owned(),
                    replaced: replaced + 1,
                },
                false,
            );
        }
        if pass.spans.is_empty() {
            return (
                Redacted {
                    text: out,
                    replaced,
                },
                true,
            );
        }
        let mut next = String::with_capacity(out.len());
        let mut markers = Vec::with_capacity(pass.spans.len());
        let mut at = 0;
        for span in &pass.spans {
            let (Some(keep), true) = (out.get(at..span.start), out.is_char_boundary(span.end))
            else {
                // INVARIANT: spans come from matches on `out`, so they are char boundaries.
                return (
                    Redacted {
                        text: REDACTED.to_owned(),
                        replaced: replaced + 1,
                    },
                    false,
                );
            };
            next.push_str(keep);
            markers.push(next.len()..next.len() + REDACTED.len());
            next.push_str(REDACTED);
            at = span.end;
        }
        next.push_str(out.get(at..).unwrap_or(""));
        replaced += pass.spans.len();
        out = next;
        pass = rules.respans(&out, &pass, &markers);
    }
    let clean = rules.first(&out).is_none();
    (
        Redacted {
            text: out,
            replaced,
        },
        clean,
    )
}

/// What still looks like a secret in `text` (after redaction), if anything.
pub fn still_secret(text: &str) -> Option<&'static str> {
    match secret_rules() {
        Err(_) => Some(UNCHECKABLE),
        Ok(rules) => rules.first(text),
    }
}

/// Redacts `text`; refuses it only if the rule set did not load or a secret survived every
/// pass (never because a secret was in it: that secret is replaced).
pub fn redact_checked(text: &str) -> Result<Redacted, &'static str> {
    match redact_to_fixed_point(text) {
        (redacted, true) => Ok(redacted),
        (redacted, false) => Err(still_secret(&redacted.text).unwrap_or(UNCHECKABLE)),
    }
}

/// Redacts every string (keys included) of a JSON value in place; returns the replacements
/// made, or what still looked like a secret.
pub fn redact_value(value: &mut Value) -> Result<usize, &'static str> {
    match value {
        Value::String(s) => {
            let r = redact_checked(s)?;
            *s = r.text;
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
                // A key that names a secret hides its whole (string) value.
                if is_secret_key(&k.text)
                    && let Value::String(s) = &mut v
                    && s != REDACTED
                    && !s.is_empty()
                {
                    *s = REDACTED.to_owned();
                    n += 1;
                }
                map.insert(k.text, v);
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
