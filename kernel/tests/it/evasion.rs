//! Red team round 12, F1: a token split by what a reader does not see (ANSI colour codes,
//! controls, format characters, a tab), glued to a word character, or spelled with JSON/HTML
//! escapes or one look-alike letter is redacted whole. Every rule's positive sample, every
//! insertion class, every insertion position inside its secret; the check is the attack's
//! own: the secret is not in the output, nor in what a terminal or a model reads of it.

use craik_kernel::{redact_checked, secret_rules};
use regex::Regex;

const SAMPLES: &str = include_str!("../redaction/samples.toml");

#[derive(serde::Deserialize)]
struct Samples {
    sample: Vec<Sample>,
}

#[derive(serde::Deserialize)]
struct Sample {
    positive: String,
}

/// Each sample's secrets as the rules find them, long and varied enough to be unambiguous
/// when searched for: (rule, positive, secret span).
fn secrets() -> Vec<(String, String, std::ops::Range<usize>)> {
    let rules = secret_rules().unwrap();
    let samples = toml::from_str::<Samples>(SAMPLES).unwrap().sample;
    let mut out = Vec::new();
    for s in samples {
        // A cut-off PEM block is redacted to the end of the text: nothing to split.
        for f in rules.find(&s.positive) {
            let secret = &s.positive[f.span.clone()];
            if secret.len() >= 12 && secret.chars().filter(char::is_ascii_alphanumeric).count() >= 8
            {
                out.push((f.rule_id.to_owned(), s.positive.clone(), f.span));
            }
        }
    }
    assert!(out.len() >= 200, "only {} secrets", out.len());
    out
}

/// What a terminal shows, and a model reads as one word: escape sequences, controls but
/// `\n`, format and default-ignorable characters and tabs gone, a backspace overstriking.
/// Written independently of the kernel's canonical form.
fn read(text: &str) -> String {
    static ESCAPES: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    static INVISIBLE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let escapes = ESCAPES.get_or_init(|| {
        Regex::new(r"(?:\x1b|\x{9b})\[?[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x{9d})[^\x07\x1b\n]*(?:\x07|\x1b\\)?|[^\n]\x08")
            .unwrap()
    });
    let invisible = INVISIBLE.get_or_init(|| {
        Regex::new(r"[[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]--[\n\t]]").unwrap()
    });
    invisible
        .replace_all(&escapes.replace_all(text, ""), "")
        .into_owned()
}

/// Tabs between two non-whitespace characters left out (a model closes that gap; a tab next
/// to a space is a gap in the token's text anyway).
fn unglue_tabs(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if *c == '\t' {
            let before = chars[..i].iter().rev().find(|c| **c != '\t');
            let after = chars[i + 1..].iter().find(|c| **c != '\t');
            if before.is_some_and(|c| !c.is_whitespace())
                && after.is_some_and(|c| !c.is_whitespace())
            {
                continue;
            }
        }
        out.push(*c);
    }
    out
}

/// What is put inside a token: each is invisible to a reader, or (the tab) seen as a gap a
/// model closes.
const INSERTS: &[&str] = &[
    "\x1b[0m",
    "\x1b[m\x1b[K",
    "\x1b[01;31m\x1b[K",
    "\x1b]8;;https://x.invalid/\x1b\\",
    "\x1b]0;title\x07",
    "\x1b(B",
    "\u{9b}31m",
    "\0",
    "\x07",
    "\x7f",
    "\u{85}",
    "Q\x08",
    "\u{200b}",
    "\u{200d}",
    "\u{ad}",
    "\u{feff}",
    "\u{202e}",
    "\u{2066}",
    "\u{e0041}",
    "\u{fe0f}",
    "\u{3164}",
    "\t",
];

fn assert_hidden(what: &str, secret: &str, input: &str) {
    let out = match redact_checked(input) {
        Ok(r) => r.text,
        Err(e) => panic!("{what}: refused ({e}): {input:?}"),
    };
    assert!(!out.contains(secret), "{what}: {secret:?} in {out:?}");
    let seen = unglue_tabs(&read(&out));
    assert!(
        !seen.contains(secret),
        "{what}: {secret:?} read whole in {out:?} (input {input:?})"
    );
}

#[test]
fn r12_f1_a_token_split_by_what_a_reader_does_not_see_is_redacted_whole() {
    let mut checked = 0;
    for (rule, positive, span) in secrets() {
        let secret = &positive[span.clone()];
        for insert in INSERTS {
            // One text per sample and insert, a line per position (one redaction call: the
            // rules are line-independent for these samples, and any extra redaction a line
            // causes is allowed); every line is checked.
            let lines: Vec<String> = (span.start + 1..span.end)
                .filter(|&i| positive.is_char_boundary(i))
                .map(|at| format!("{}{insert}{}", &positive[..at], &positive[at..]))
                .collect();
            checked += lines.len();
            let input = lines.join("\n");
            let what = format!("{rule} {insert:?}");
            let out = match redact_checked(&input) {
                Ok(r) => r.text,
                Err(e) => panic!("{what}: refused ({e}): {input:?}"),
            };
            assert!(!out.contains(secret), "{what}: {secret:?} in {out:?}");
            let seen = unglue_tabs(&read(&out));
            if seen.contains(secret) {
                // Which line: each alone, for the message.
                for line in &lines {
                    assert_hidden(&what, secret, line);
                }
                panic!("{what}: {secret:?} read whole in {out:?}");
            }
        }
    }
    assert!(checked > 100_000, "{checked}");
}

#[test]
fn r12_f1_a_word_character_glued_before_a_prefixed_token_does_not_hide_it() {
    let rules = secret_rules().unwrap();
    let glued: Vec<&str> = rules.glued_ids().collect();
    // The formats the red team found leaking glued (`id_AKIA…`, `_sk-ant-…`, `xAIza…`) are
    // among the rules whose prefix is distinctive.
    for id in [
        "craik-aws-access-key-id",
        "anthropic-api-key",
        "openai-api-key",
        "craik-sk-named-key",
        "craik-stripe-key",
        "huggingface-access-token",
        "npm-access-token",
        "sendgrid-api-token",
        "digitalocean-pat",
        "databricks-api-token",
        "craik-google-api-key",
        "craik-jwt",
        "craik-github-token",
        "craik-slack-token",
    ] {
        assert!(glued.contains(&id), "{id} keeps its leading \\b");
    }
    // Short or undistinctive prefixes keep theirs (`risk-assessment-…` is not an `sk-` key;
    // `MII` is in every base64 text).
    for id in [
        "craik-openai-style-key",
        "craik-der-key-body",
        "craik-provider-token-piece",
        "generic-api-key",
    ] {
        assert!(!glued.contains(&id), "{id} lost its leading \\b");
    }
    let ordinary = "risk-assessment-document-v2 ATASK-PLANNING-ITEMS-123 the_hf_model_directory MSG.payload_size";
    assert_eq!(redact_checked(ordinary).unwrap().text, ordinary);
    let mut checked = 0;
    for (rule, positive, span) in secrets() {
        if !glued.contains(&rule.as_str()) {
            continue;
        }
        let secret = &positive[span.clone()];
        for glue in ["x", "_", "9", "id_", "Z"] {
            let input = format!(
                "{}{glue}{}",
                &positive[..span.start],
                &positive[span.start..]
            );
            assert_hidden(&format!("{rule} glued {glue:?}"), secret, &input);
            checked += 1;
        }
    }
    assert!(checked >= 5 * 60, "{checked}");
}

/// The red team's focused reproducer: `grep --color=always` output and glued tokens.
#[test]
fn r12_f1_coloured_grep_output_and_glued_tokens_of_the_reproducer() {
    let tokens = [
        "AKIAUJZDEGXDNCF32EPF",
        "sk-ant-api03-r3yBdGBLEPH1qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY-uCu3ZR1zTOlUcR64cXQAA",
        "sk-proj-tmUdjAWtGSU8po-799NksnRH9ucAUsdMlHUvTCQCyEZDz_TdT3BlbkFJdJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbn",
        "sk_live_3RZJzzzzgEOzdmenCkhvMdga",
        "ghp_JBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0RlgLK",
        "xoxb-276842684656-3212233079244-ajAIxNKu8iS2G8NPRVdD53X8",
        "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",
        "npm_BkdfQ1y3GQsMpSscDlkrCaqx9vJupc94tnwl",
    ];
    for t in tokens {
        // `grep --color=always AKIA .env`: the match coloured, the line's rest after `\e[m\e[K`.
        let (head, tail) = t.split_at(4);
        let grep = format!("X_TOKEN=\x1b[01;31m\x1b[K{head}\x1b[m\x1b[K{tail}\n");
        assert_hidden("coloured grep", t, &grep);
        assert_hidden("glued id_", t, &format!("id_{t}\n"));
        assert_hidden("glued 9", t, &format!("9{t}"));
    }
}

/// JSON `\u` escapes and HTML references of ASCII characters, and one look-alike letter, are
/// read through (the view, `redact/view.rs`); the replaced bytes are exactly the ones that
/// spelled the token.
#[test]
fn r12_f1_escaped_and_look_alike_spellings_are_redacted() {
    let tokens = [
        "sk-ant-api03-r3yBdGBLEPH1qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY-uCu3ZR1zTOlUcR64cXQAA",
        "sk_live_3RZJzzzzgEOzdmenCkhvMdga",
        "ghp_JBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0RlgLK",
        "xoxb-276842684656-3212233079244-ajAIxNKu8iS2G8NPRVdD53X8",
        "glpat-Xx3_kq8RZmnp2VbTw-9L",
        "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ];
    for t in tokens {
        let json_u = t.replace('_', "\\u005f").replace('-', "\\u002d");
        let html = t.replace('_', "&#95;").replace('-', "&#x2d;");
        let named = t.replace('_', "&lowbar;");
        let look_alike = t.replacen('p', "р", 1).replacen('a', "а", 1);
        for (what, spelled) in [
            ("json", &json_u),
            ("html", &html),
            ("named", &named),
            ("look-alike", &look_alike),
        ] {
            if spelled == t {
                continue;
            }
            let input = format!("{{\"note\": \"before {spelled} after\"}}");
            let out = redact_checked(&input).unwrap().text;
            assert!(!out.contains(spelled.as_str()), "{what}: {out:?}");
            assert_eq!(
                out, "{\"note\": \"before [REDACTED] after\"}",
                "{what}: {spelled:?}"
            );
        }
    }
    // Escapes that spell nothing stay as they are.
    let plain = r#"{"path":"a\/b","q":"\u00e9 &amp; &#233;","n":"\\u005f"}"#;
    assert_eq!(redact_checked(plain).unwrap().text, plain);
}

/// What is removed is what draws nothing; everything a reader needs stays.
#[test]
fn r12_f1_canonical_form_keeps_what_a_reader_needs() {
    let text = "\x1b[1mwarning\x1b[0m: unused `x`\r\n\tat src/main.rs:3\nProgress 10%\rProgress 20%\n\u{feff}Привет 😀 é\n";
    let r = redact_checked(text).unwrap();
    assert_eq!(
        r.text,
        "warning: unused `x`\n\tat src/main.rs:3\nProgress 10%\nProgress 20%\nПривет 😀 é\n"
    );
    assert_eq!(r.replaced, 0);
    assert!(r.changed());
    // Bidi controls, which reorder what is displayed, are gone.
    assert_eq!(
        redact_checked("access \u{202e}nimda\u{202c} granted")
            .unwrap()
            .text,
        "access nimda granted"
    );
    let plain = "ok\tfine\n";
    let r = redact_checked(plain).unwrap();
    assert_eq!((r.text.as_str(), r.changed()), (plain, false));
}

/// Records keep their bytes where no secret is found (recovery hashes recorded proposals
/// against their approvals: an edit writing `\e[2J` must replay as it was approved); a
/// string whose canonical form or view holds a secret is replaced by its redacted canonical
/// form.
#[test]
fn r12_f1_json_records_keep_their_bytes_unless_a_secret_is_found() {
    let mut value = serde_json::json!({
        "edit": "Status: current\u{1b}[2J\r\n",
        "out": "id_AKIA\u{1b}[m\u{1b}[KUJZDEGXDNCF32EPF done\u{200b}",
        "pass\u{200b}word": "hunter2hunter2",
    });
    let n = craik_kernel::redact_value(&mut value).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "edit": "Status: current\u{1b}[2J\r\n",
            "out": "id_[REDACTED] done",
            // The key is not a secret (kept); it names one in its canonical form.
            "pass\u{200b}word": "[REDACTED]",
        })
    );
    assert_eq!(n, 2);
}

/// A record or an escaping display keeps its bytes unless a secret is found (then the
/// canonical redacted form, as `redact_checked`).
#[test]
fn r12_f1_redact_record_changes_only_text_holding_a_secret() {
    let hostile = "ok\r\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202e}evil";
    let r = craik_kernel::redact_record(hostile).unwrap();
    assert_eq!((r.text.as_str(), r.replaced, r.removed), (hostile, 0, 0));
    let split = "key AKIA\u{1b}[0mUJZDEGXDNCF32EPF\u{202e} end";
    let r = craik_kernel::redact_record(split).unwrap();
    assert_eq!(r.text, "key [REDACTED] end");
    assert_eq!(r, redact_checked(split).unwrap());
}
