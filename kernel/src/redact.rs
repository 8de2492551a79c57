//! Redaction: secrets are replaced before anything a runner or a command produced is persisted
//! or shown.
//!
//! Two pattern sets. The *redaction* patterns are precise and replace what they match with
//! `[REDACTED]`. The *detection* patterns are broader (shorter tokens, bare key headers) and run
//! on the redacted text: whatever still looks like a secret there is refused, not stored — the
//! caller keeps a placeholder and a diagnostic instead. Redaction can over-redact; it must never
//! let a recognisable credential through.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

/// The replacement text.
pub const REDACTED: &str = "[REDACTED]";

/// Key names whose `key=value` / `key: value` values are secrets (case-insensitive; `-`, `_`
/// and nothing are interchangeable).
const SECRET_KEYS: &str = r"(?:api[-_]?key|apikey|account[-_]?key|shared[-_]?access[-_]?key|access[-_]?key(?:[-_]?id)?|secret(?:[-_]?access)?(?:[-_]?key)?|client[-_]?secret|aws[-_]?secret[-_]?access[-_]?key|auth[-_]?token|access[-_]?token|refresh[-_]?token|id[-_]?token|token|password|passwd|pwd|passphrase|private[-_]?key|credentials?|session[-_]?token)";

struct Patterns {
    /// (pattern, replacement) in application order.
    redact: Vec<(Regex, &'static str)>,
    /// Anything matching these after redaction is refused.
    detect: Vec<(Regex, &'static str)>,
    /// Every pattern compiled. If one did not, nothing is let through (fail closed).
    complete: bool,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let mut complete = true;
        let mut build = |list: &[(&str, &'static str)]| -> Vec<(Regex, &'static str)> {
            let built: Vec<(Regex, &'static str)> = list
                .iter()
                .filter_map(|(p, r)| Regex::new(p).ok().map(|re| (re, *r)))
                .collect();
            complete &= built.len() == list.len();
            built
        };
        // The name may carry any prefix joined by `_` or `-` (`DB_PASSWORD`, `OPENAI_API_KEY`,
        // `AWS_SESSION_TOKEN`): `\b` alone does not hold after `_`.
        let key_value = format!(
            r#"(?i)(\b(?:[a-z0-9]+[-_])*{SECRET_KEYS}["']?\s*[:=]\s*["']?)[^\s"',;&]+"#
        );
        let flag = format!(r"(?i)(--{SECRET_KEYS}(?:=|\s+))[^\s]+");
        let redact = build(&[
            // Private key blocks, terminated or cut off.
            (
                r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)",
                "[REDACTED PRIVATE KEY]",
            ),
            // Credentials in URLs: scheme://user:password@host.
            (
                r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+@",
                "${1}[REDACTED]@",
            ),
            (r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9\-._~+/]{8,}=*", "${1} [REDACTED]"),
            (r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}", REDACTED),
            (r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}", REDACTED),
            (r"\bglpat-[A-Za-z0-9_\-]{20,}", REDACTED),
            (r"\bnpm_[A-Za-z0-9]{36}", REDACTED),
            (
                r"(?i)https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+",
                "https://hooks.slack.com/[REDACTED]",
            ),
            // Bare private-key bodies (a PEM's base64 without its header): PKCS#8 Ed25519,
            // and DER sequences long enough to be RSA/EC keys.
            (r"\bMC4CAQAwBQYDK2Vw[A-Za-z0-9+/=]{20,}", REDACTED),
            (r"\bMI[IG][A-Za-z0-9+/]{60,}={0,2}", REDACTED),
            (r"\bgh[pousr]_[A-Za-z0-9]{20,}", REDACTED),
            (r"\bgithub_pat_[A-Za-z0-9_]{20,}", REDACTED),
            (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", REDACTED),
            (r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b", REDACTED),
            (r"\bAIza[0-9A-Za-z_\-]{35}", REDACTED),
            (r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}", REDACTED),
            (&flag, "${1}[REDACTED]"),
            (&key_value, "${1}[REDACTED]"),
        ]);
        let detect = build(&[
            (r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY", "a private key block"),
            (r"\bsk-[A-Za-z0-9]{10,}", "an `sk-` API key"),
            (r"\bgh[pousr]_[A-Za-z0-9]{10,}", "a GitHub token"),
            (r"\bgithub_pat_[A-Za-z0-9_]{10,}", "a GitHub token"),
            (r"\bxox[abposr]-[A-Za-z0-9]{6,}", "a Slack token"),
            (r"\b(?:AKIA|ASIA)[0-9A-Z]{12,}", "an AWS access key"),
            (r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s@]*:[^/\s@\[]+@", "a credential in a URL"),
            (r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{6,}", "a Stripe key"),
            (r"\bglpat-[A-Za-z0-9_\-]{10,}", "a GitLab token"),
            (r"\bnpm_[A-Za-z0-9]{20,}", "an npm token"),
            (r"(?i)hooks\.slack\.com/services/T[A-Za-z0-9]+", "a Slack webhook"),
            (r"\bMC4CAQAwBQYDK2Vw", "a private key body"),
            (r"\bMII[A-Za-z0-9+/]{40,}", "a key body"),
        ]);
        Patterns {
            redact,
            detect,
            complete,
        }
    })
}

/// Text with its secrets replaced, and how many replacements were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    pub replaced: usize,
}

/// Replaces every recognised secret in `text`.
pub fn redact_text(text: &str) -> Redacted {
    let mut out = text.to_owned();
    let mut replaced = 0;
    for (re, replacement) in &patterns().redact {
        let count = re
            .find_iter(&out)
            .filter(|m| !m.as_str().ends_with(REDACTED))
            .count();
        if count > 0 {
            replaced += count;
            out = re.replace_all(&out, *replacement).into_owned();
        }
    }
    Redacted {
        text: out,
        replaced,
    }
}

/// What still looks like a secret in `text` (after redaction), if anything.
pub fn still_secret(text: &str) -> Option<&'static str> {
    if !patterns().complete {
        return Some("text the redactor cannot check (a pattern failed to compile)");
    }
    patterns()
        .detect
        .iter()
        .find(|(re, _)| re.is_match(text))
        .map(|(_, what)| *what)
}

/// Redacts `text` and refuses it if something still looks like a secret.
pub fn redact_checked(text: &str) -> Result<Redacted, &'static str> {
    let redacted = redact_text(text);
    match still_secret(&redacted.text) {
        Some(what) => Err(what),
        None => Ok(redacted),
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
    KEY.get_or_init(|| Regex::new(&format!(r"(?i)^{SECRET_KEYS}$")).ok())
        .as_ref()
        .is_none_or(|re| re.is_match(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert!(super::patterns().complete);
        assert!(super::patterns().redact.len() >= 12);
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
