//! Issue 30 item 3: the secret rules are gitleaks' default set (vendored, pinned) plus Craik's
//! own; every rule has a positive and a negative sample (`tests/redaction/samples.toml`,
//! generated from each rule's own pattern by the ignored `regenerate_samples` test), and the
//! covered ids equal gitleaks' default id list committed beside the rule file.

use std::collections::BTreeSet;

use craik_kernel::{GITLEAKS_VERSION, REDACTED, redact_checked, redact_text, secret_rules};
use regex_syntax::hir::{Class, Hir, HirKind};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const SAMPLES: &str = include_str!("../redaction/samples.toml");
const SAMPLES_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/redaction/samples.toml");
const DEFAULT_IDS: &str = include_str!("../../rules/gitleaks/default-ids.txt");
const GITLEAKS_TOML: &str = include_str!("../../rules/gitleaks/gitleaks.toml");
const PROVENANCE: &str = include_str!("../../rules/gitleaks/PROVENANCE.md");

#[derive(Serialize, Deserialize)]
struct Samples {
    sample: Vec<Sample>,
}

#[derive(Serialize, Deserialize)]
struct Sample {
    id: String,
    positive: String,
    negative: String,
}

fn samples() -> Vec<Sample> {
    toml::from_str::<Samples>(SAMPLES).unwrap().sample
}

/// Whether rule `id` finds something in `text`; the secrets it finds.
fn fires(id: &str, text: &str) -> Vec<String> {
    secret_rules()
        .unwrap()
        .find(text)
        .into_iter()
        .filter(|f| f.rule_id == id)
        .map(|f| text[f.span].to_owned())
        .collect()
}

#[test]
fn issue_30_covered_ids_equal_gitleaks_default_ids() {
    let rules = secret_rules().unwrap();
    // Every rule compiles (they are compiled on first use; one that did not would refuse
    // every text it had to check).
    rules.compile_all().unwrap();
    let committed: Vec<&str> = DEFAULT_IDS
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert!(DEFAULT_IDS.starts_with(&format!("# gitleaks {GITLEAKS_VERSION} ")));
    assert_eq!(committed.len(), 222);
    assert_eq!(rules.gitleaks_ids(), committed.as_slice());
    let loaded: BTreeSet<&str> = rules.ids().collect();
    for id in &committed {
        assert!(loaded.contains(id), "gitleaks rule `{id}` not loaded");
    }
    // The vendored file is the one the provenance note names.
    let sha = craik_kernel::to_hex(&Sha256::digest(GITLEAKS_TOML.as_bytes()));
    assert!(
        PROVENANCE.contains(&sha),
        "PROVENANCE.md does not name sha256 {sha}"
    );
    assert!(PROVENANCE.contains(GITLEAKS_VERSION));
}

#[test]
fn issue_30_every_rule_has_a_positive_and_a_negative_sample() {
    let rules = secret_rules().unwrap();
    let samples = samples();
    let sampled: BTreeSet<&str> = samples.iter().map(|s| s.id.as_str()).collect();
    let text_rules: BTreeSet<&str> = rules.text_rule_ids().collect();
    assert_eq!(sampled, text_rules);
    // Only path-only rules have no text sample.
    let all: BTreeSet<&str> = rules.ids().collect();
    let no_text: Vec<&&str> = all.difference(&text_rules).collect();
    assert_eq!(no_text, vec![&"pkcs12-file"]);
    for s in &samples {
        let secrets = fires(&s.id, &s.positive);
        assert!(
            !secrets.is_empty(),
            "`{}` misses its positive {:?}",
            s.id,
            s.positive
        );
        let out = redact_checked(&s.positive).unwrap();
        assert!(out.replaced > 0, "{}", s.id);
        for secret in secrets {
            assert!(
                !out.text.contains(&secret),
                "`{}` left {secret:?}: {:?}",
                s.id,
                out.text
            );
        }
        assert_eq!(
            redact_text(&out.text).text,
            out.text,
            "not idempotent: {}",
            s.id
        );
        assert!(
            fires(&s.id, &s.negative).is_empty(),
            "`{}` fires on its negative {:?}",
            s.id,
            s.negative
        );
    }
}

#[test]
fn issue_30_all_positive_samples_in_one_text_are_redacted() {
    // All samples in one text, one per line: every byte of every sample's secret is inside
    // some finding (of any rule: a multi-line rule may start in an earlier line), so
    // redaction, which replaces every finding, removes it there too.
    let samples = samples();
    let rules = secret_rules().unwrap();
    let mut text = String::new();
    let mut starts = Vec::new();
    for s in &samples {
        starts.push(text.len());
        text.push_str(&s.positive);
        text.push('\n');
    }
    let findings = rules.find(&text);
    for (s, start) in samples.iter().zip(&starts) {
        for own in rules
            .find(&s.positive)
            .into_iter()
            .filter(|f| f.rule_id == s.id)
        {
            for at in own.span.clone() {
                assert!(
                    findings.iter().any(|f| f.span.contains(&(start + at))),
                    "`{}`: byte {at} of its secret is not found among the other samples",
                    s.id
                );
            }
        }
    }
    let out = redact_checked(&text).unwrap();
    for s in &samples {
        for secret in fires(&s.id, &s.positive) {
            if text.matches(secret.as_str()).count() == 1 {
                assert!(!out.text.contains(&secret), "`{}` left {secret:?}", s.id);
            }
        }
    }
}

#[test]
fn issue_30_formats_outside_testing_found_are_redacted() {
    let cases = [
        (
            "huggingface",
            "HF_TOKEN hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
            "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh",
        ),
        (
            "pypi",
            "password = pypi-AgEIcHlwaS5vcmcCJDkyZWFlMjNlLWEzNjUtNDNhYy1hYWE1LWE2OTQ0MzM3ZTYzNAACKlszLCJmZjgxNzY1OS1hN2U2LTRkMzEtOGZmYi1jMmM4NmIzNTgyMjciXQAABiBSlw",
            "AgEIcHlwaS5vcmcCJDkyZWFlMjNlLWEzNjUtNDNhYy1hYWE1LWE2OTQ0MzM3ZTYzNA",
        ),
        (
            "sendgrid",
            "SENDGRID=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",
            "ngeVfQFYQlKU0ufo8x5d1A",
        ),
        (
            "digitalocean",
            "doctl auth init -t dop_v1_3f1c9a7b2e5d4c6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f",
            "3f1c9a7b2e5d4c6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f",
        ),
        (
            "shopify",
            "X-Shopify-Access-Token: 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",
            "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        ),
        (
            "twilio",
            "twilio api key SK0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
        ),
        (
            "google oauth",
            "client_secret_x GOCSPX-AbCdEfGhIjKlMnOpQrStUvWxYz12",
            "AbCdEfGhIjKlMnOpQrStUvWxYz12",
        ),
        (
            "docker",
            "docker login -u me -p dckr_pat_AbCdEfGhIjKlMnOpQrStUvWxYz0",
            "AbCdEfGhIjKlMnOpQrStUvWxYz0",
        ),
        (
            "databricks",
            "host=x dapi0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef",
        ),
        (
            "azure sas",
            "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-12-01&sp=r&sig=Zm9vYmFyYmF6cXV4%2B1234567890abcdEFGH%3D",
            "Zm9vYmFyYmF6cXV4%2B1234567890abcdEFGH",
        ),
        (
            "npmrc",
            "//registry.npmjs.org/:_authToken=9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0",
            "9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0",
        ),
        (
            "gcp key file",
            r#"{"type": "service_account", "private_key_id": "0123456789abcdef0123456789abcdef01234567"}"#,
            "0123456789abcdef0123456789abcdef01234567",
        ),
    ];
    for (what, text, secret) in cases {
        let out = redact_checked(text).unwrap();
        assert!(!out.text.contains(secret), "{what}: {:?}", out.text);
        assert!(out.text.contains(REDACTED), "{what}");
    }
}

#[test]
fn issue_30_one_token_does_not_withhold_the_text() {
    let text = "compiling craik\nkey sk-AbCdEf123456 seen\n142 tests passed\n";
    let out = redact_checked(text).unwrap();
    assert_eq!(
        out.text,
        "compiling craik\nkey [REDACTED] seen\n142 tests passed\n"
    );
}

#[test]
fn issue_30_a_cut_token_keeps_its_prefixed_piece_redacted() {
    // `cut -c1-14` of real tokens: the piece with the prefix is still redacted. The other
    // piece has no prefix and no context; it cannot be told from any other string (see
    // SECURITY.md).
    for piece in [
        "ghp_AbCdEfGhIj",
        "hf_AbCdEfGhIjK",
        "glpat-AbCdEfGh",
        "xoxb-12345678",
        "sk-proj-AbCdEf",
        "dop_v1_3f1c9a7b",
        "shpat_9f8e7d6c",
        "dckr_pat_AbCdEfGh",
        "AKIAIOSFODNN7E",
        "GOCSPX-AbCdEfGh",
    ] {
        let out = redact_text(&format!("line {piece}\n"));
        assert!(!out.text.contains(piece), "{piece}: {:?}", out.text);
    }
}

/// Regenerates `tests/redaction/samples.toml` from the rules' own patterns:
/// `cargo test -p craik-kernel --test it regenerate_samples -- --ignored`.
#[test]
#[ignore = "writes the samples file; run by hand after the rule files change"]
fn regenerate_samples() {
    let rules = secret_rules().unwrap();
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for id in rules.text_rule_ids() {
        let pattern = rules.pattern(id).unwrap();
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(pattern)
            .unwrap();
        match positive(id, &hir).and_then(|p| negative(id, &p).map(|n| (p, n))) {
            Some((positive, negative)) => out.push(Sample {
                id: id.to_owned(),
                positive,
                negative,
            }),
            None => missing.push(id),
        }
    }
    assert!(missing.is_empty(), "no samples for {missing:?}");
    let text = format!(
        "# Generated by `cargo test -p craik-kernel --test it regenerate_samples -- --ignored`\n\
         # from each rule's pattern: one positive (the rule finds it) and one negative (a near\n\
         # miss it must not find) per rule id.\n\n{}",
        toml::to_string(&Samples { sample: out }).unwrap()
    );
    std::fs::write(SAMPLES_PATH, text).unwrap();
}

fn positive(id: &str, hir: &Hir) -> Option<String> {
    // Each rule its own random stream: no two samples share a random run of characters (a
    // secret of one must not appear as plain text in another).
    let salt = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (0..2000u64).find_map(|seed| {
        let mut g = Gen {
            state: (salt ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
            plain: seed < 8,
        };
        let mut s = String::new();
        g.emit(hir, &mut s);
        // A keyword the pattern does not spell (`airtable`) goes in front, as in real text.
        let keyword = secret_rules()
            .unwrap()
            .keywords(id)
            .first()
            .cloned()
            .unwrap_or_default();
        [s.clone(), format!("{keyword}: {s}")]
            .into_iter()
            .find(|s| {
                !fires(id, s).is_empty()
                    && !fires(id, &format!("first line\n{s}\nlast line")).is_empty()
            })
    })
}

fn negative(id: &str, positive: &str) -> Option<String> {
    let secret = fires(id, positive).into_iter().next()?;
    let at = positive.find(&secret)?;
    let (before, after) = (&positive[..at], &positive[at + secret.len()..]);
    let first = secret.chars().next()?;
    let candidates = [
        format!(
            "{before}{}{after}",
            first.to_string().repeat(secret.chars().count())
        ),
        format!("{before}{}{after}", &secret[..secret.len() / 3]),
        format!("{before}{}{after}", "${SECRET_FROM_ENV}"),
        positive.chars().map(swap_case).collect(),
        positive.replacen(&secret, REDACTED, 1),
    ];
    candidates
        .into_iter()
        .find(|c| c != positive && fires(id, c).is_empty())
}

fn swap_case(c: char) -> char {
    if c.is_ascii_lowercase() {
        c.to_ascii_uppercase()
    } else {
        c.to_ascii_lowercase()
    }
}

/// Writes one string a pattern matches: literals as written, a class member chosen at random
/// (alphanumeric first, for entropy), repetitions at a length that fits.
struct Gen {
    state: u64,
    /// First alternatives and short optional parts (the first seeds); then random choices.
    plain: bool,
}

impl Gen {
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn emit(&mut self, hir: &Hir, out: &mut String) {
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Literal(lit) => out.push_str(&String::from_utf8_lossy(&lit.0)),
            HirKind::Class(class) => {
                let members: Vec<char> = match class {
                    Class::Unicode(c) => c
                        .ranges()
                        .iter()
                        .flat_map(|r| (r.start()..=r.end()).take(200))
                        .collect(),
                    Class::Bytes(c) => c
                        .ranges()
                        .iter()
                        .flat_map(|r| (r.start()..=r.end()).map(char::from))
                        .collect(),
                };
                // `.` (nearly every character): a dot, so `hooks.slack.com` stays itself.
                let any = members.len() > 150 && members.contains(&'.') && !members.contains(&'\n');
                let alnum: Vec<char> = members
                    .iter()
                    .copied()
                    .filter(char::is_ascii_alphanumeric)
                    .collect();
                let printable: Vec<char> = members
                    .iter()
                    .copied()
                    .filter(|c| c.is_ascii_graphic() || *c == ' ')
                    .collect();
                let pool = if !alnum.is_empty() {
                    alnum
                } else if !printable.is_empty() {
                    printable
                } else {
                    members
                };
                if any && self.plain {
                    out.push('.');
                    return;
                }
                let i = self.below(pool.len());
                out.push(pool[i]);
            }
            HirKind::Repetition(r) => {
                let upper = r.max.map_or(r.min + 24, |m| m.min(r.min + 48));
                let n = if self.plain {
                    if r.min == 0 {
                        0
                    } else {
                        r.min.max(24.min(upper))
                    }
                } else {
                    r.min + self.below((upper - r.min + 1) as usize) as u32
                };
                for _ in 0..n {
                    self.emit(&r.sub, out);
                }
            }
            HirKind::Capture(c) => self.emit(&c.sub, out),
            HirKind::Concat(hs) => hs.iter().for_each(|h| self.emit(h, out)),
            HirKind::Alternation(hs) => {
                let i = if self.plain { 0 } else { self.below(hs.len()) };
                self.emit(&hs[i], out);
            }
        }
    }
}
