//! Redaction against a corpus of real-shaped secrets, and laws: idempotent, never leaves a
//! detectable secret, refuses what it cannot clean.

use craik_kernel::{REDACTED, redact_checked, redact_text, redact_value, still_secret};
use proptest::prelude::*;
use serde_json::json;

fn corpus() -> Vec<(String, String, String)> {
    let text = include_str!("../redaction/corpus.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (what, rest) = l.split_once(" | ").unwrap();
            let (input, secret) = rest.rsplit_once(" SECRET=").unwrap();
            (
                what.to_owned(),
                input.replace("\\n", "\n"),
                secret.to_owned(),
            )
        })
        .collect()
}

#[test]
fn every_corpus_secret_is_removed_and_nothing_detectable_remains() {
    let corpus = corpus();
    assert!(corpus.len() >= 25, "corpus has {} lines", corpus.len());
    for (what, input, secret) in corpus {
        let out = redact_text(&input);
        assert!(
            !out.text.contains(&secret),
            "{what}: secret survived: {:?}",
            out.text
        );
        assert!(out.replaced > 0, "{what}: nothing replaced");
        assert!(out.text.contains("REDACTED"), "{what}: {:?}", out.text);
        assert_eq!(still_secret(&out.text), None, "{what}: {:?}", out.text);
        assert!(redact_checked(&input).is_ok(), "{what}");
    }
}

#[test]
fn ordinary_text_is_left_alone() {
    for text in [
        "cargo test -p craik",
        "The token bucket refills every second.",
        "see https://example.com/docs/tokens",
        "sk-learn is a library",
        "password policy: at least 12 characters",
        "AKIA is the prefix of AWS access keys",
    ] {
        let out = redact_text(text);
        assert_eq!(out.text, text, "changed: {text}");
    }
}

#[test]
fn issue_30_short_token_shapes_are_replaced_not_refused() {
    // Short, but still recognisably a credential: replaced, and the text around it kept
    // (until issue 30 the whole text was refused).
    for (text, kept) in [
        ("key sk-AbCdEf123456", "key [REDACTED]"),
        ("ghp_shortTOKEN1234 end", "[REDACTED] end"),
        ("x\n-----BEGIN EC PRIVATE KEY", "x\n[REDACTED]"),
    ] {
        let r = redact_checked(text).unwrap();
        assert_eq!(r.text, kept);
        assert_eq!(still_secret(&r.text), None, "{text}");
    }
}

#[test]
fn json_values_are_redacted_in_keys_and_values() {
    let mut value = json!({
        "api_key": "plainvalue",
        "nested": [{"note": "Bearer abcdefghijklmnop"}, 3, null],
        "ok": "nothing here",
    });
    let n = redact_value(&mut value).unwrap();
    assert!(n >= 2);
    assert_eq!(value["api_key"], REDACTED);
    assert_eq!(value["nested"][0]["note"], "Bearer [REDACTED]");
    assert_eq!(value["ok"], "nothing here");
    let mut short = json!({"x": ["key sk-AbCdEf123456"]});
    assert_eq!(redact_value(&mut short).unwrap(), 1);
    assert_eq!(short, json!({"x": ["key [REDACTED]"]}));
}

proptest! {
    /// Redaction is idempotent and its output never holds a detectable secret or the
    /// planted one, wherever it sits in arbitrary text.
    #[test]
    fn idempotent_and_clean(prefix in "[ -~]{0,40}", suffix in "[ -~]{0,40}", pick in 0usize..25) {
        let corpus = corpus();
        let (_, input, secret) = &corpus[pick % corpus.len()];
        let text = format!("{prefix} {input} {suffix}");
        let once = redact_text(&text);
        let twice = redact_text(&once.text);
        prop_assert_eq!(&twice.text, &once.text);
        prop_assert!(!once.text.contains(secret.as_str()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Issue 11 item 6: a secret-named variable is redacted whatever prefix, case, separator,
    /// quoting and spacing it is written with.
    #[test]
    fn prefixed_secret_names_are_redacted_in_every_spelling(
        prefix in prop::collection::vec("[A-Za-z][A-Za-z0-9]{0,6}", 0..3),
        joiner in prop_oneof![Just("_"), Just("-")],
        name in prop_oneof![
            Just("PASSWORD"), Just("password"), Just("API_KEY"), Just("api-key"), Just("ApiKey"),
            Just("SECRET"), Just("SESSION_TOKEN"), Just("ACCESS_TOKEN"), Just("AccountKey"),
            Just("client_secret"), Just("PRIVATE_KEY"), Just("passphrase"),
        ],
        sep in prop_oneof![Just("="), Just(": "), Just(" = "), Just(":")],
        quote in prop_oneof![Just(""), Just("\""), Just("'")],
        secret in "[A-Za-z0-9/+]{12,32}",
    ) {
        let mut full = prefix.join(joiner);
        if !full.is_empty() {
            full.push_str(joiner);
        }
        full.push_str(name);
        let text = format!("export {full}{sep}{quote}{secret}{quote} done");
        let out = redact_text(&text);
        prop_assert!(!out.text.contains(&secret), "{text} -> {}", out.text);
    }
}
