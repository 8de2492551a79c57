//! Redaction cost per MB (issue 30 item 3): the rule set (gitleaks v8.30.1 default set +
//! Craik's rules, `redact_checked`) against the baseline — a copy, below, of the hand-picked
//! pattern list redaction used before issue 30 (redact, then the detect pass) — in the same run,
//! on the same 1 MiB corpora. Prints a ratio table at the end; the target is at most 2×.
//!
//! Run: `cargo bench -p craik-kernel --bench redact`

#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::print_stdout,
    reason = "benchmark setup fails loudly; the report is the output"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use regex::Regex;

// The `craik` binary's allocator, so the numbers are the ones users get.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MIB: usize = 1 << 20;

/// BASELINE ONLY: the redaction of `kernel/src/redact.rs` before issue 30 (commit 84796f0),
/// copied so the two can be measured side by side. Not used by Craik.
mod baseline {
    use super::Regex;

    const SECRET_KEYS: &str = r"(?:api[-_]?key|apikey|account[-_]?key|shared[-_]?access[-_]?key|access[-_]?key(?:[-_]?id)?|secret(?:[-_]?access)?(?:[-_]?key)?|client[-_]?secret|aws[-_]?secret[-_]?access[-_]?key|auth[-_]?token|access[-_]?token|refresh[-_]?token|id[-_]?token|token|password|passwd|pwd|passphrase|private[-_]?key|credentials?|session[-_]?token)";
    const REDACTED: &str = "[REDACTED]";

    pub(crate) struct Patterns {
        redact: Vec<(Regex, &'static str)>,
        detect: Vec<Regex>,
    }

    pub(crate) fn patterns() -> Patterns {
        let key_value =
            format!(r#"(?i)(\b(?:[a-z0-9]+[-_])*{SECRET_KEYS}["']?\s*[:=]\s*["']?)[^\s"',;&]+"#);
        let flag = format!(r"(?i)(--{SECRET_KEYS}(?:=|\s+))[^\s]+");
        let redact: Vec<(&str, &'static str)> = vec![
            (
                r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\z)",
                "[REDACTED PRIVATE KEY]",
            ),
            (
                r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+@",
                "${1}[REDACTED]@",
            ),
            (
                r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9\-._~+/]{8,}=*",
                "${1} [REDACTED]",
            ),
            (
                r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}",
                REDACTED,
            ),
            (r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{10,}", REDACTED),
            (r"\bglpat-[A-Za-z0-9_\-]{20,}", REDACTED),
            (r"\bnpm_[A-Za-z0-9]{36}", REDACTED),
            (
                r"(?i)https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_\-]+",
                "https://hooks.slack.com/[REDACTED]",
            ),
            (r"\bMC4CAQAwBQYDK2Vw[A-Za-z0-9+/=]{20,}", REDACTED),
            (r"\bMI[IG][A-Za-z0-9+/]{60,}={0,2}", REDACTED),
            (r"\bgh[pousr]_[A-Za-z0-9]{20,}", REDACTED),
            (r"\bgithub_pat_[A-Za-z0-9_]{20,}", REDACTED),
            (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", REDACTED),
            (r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b", REDACTED),
            (r"\bAIza[0-9A-Za-z_\-]{35}", REDACTED),
            (
                r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",
                REDACTED,
            ),
            (&flag, "${1}[REDACTED]"),
            (&key_value, "${1}[REDACTED]"),
        ];
        let detect = [
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY",
            r"\bsk-[A-Za-z0-9]{10,}",
            r"\bgh[pousr]_[A-Za-z0-9]{10,}",
            r"\bgithub_pat_[A-Za-z0-9_]{10,}",
            r"\bxox[abposr]-[A-Za-z0-9]{6,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{12,}",
            r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s@]*:[^/\s@\[]+@",
            r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{6,}",
            r"\bglpat-[A-Za-z0-9_\-]{10,}",
            r"\bnpm_[A-Za-z0-9]{20,}",
            r"(?i)hooks\.slack\.com/services/T[A-Za-z0-9]+",
            r"\bMC4CAQAwBQYDK2Vw",
            r"\bMII[A-Za-z0-9+/]{40,}",
        ];
        Patterns {
            redact: redact
                .into_iter()
                .map(|(p, r)| (Regex::new(p).unwrap(), r))
                .collect(),
            detect: detect.iter().map(|p| Regex::new(p).unwrap()).collect(),
        }
    }

    /// `redact_checked` as it was: every pattern replaced, then the detect pass.
    pub(crate) fn redact_checked(p: &Patterns, text: &str) -> Result<(String, usize), ()> {
        let mut out = text.to_owned();
        let mut replaced = 0;
        for (re, replacement) in &p.redact {
            let count = re
                .find_iter(&out)
                .filter(|m| !m.as_str().ends_with(REDACTED))
                .count();
            if count > 0 {
                replaced += count;
                out = re.replace_all(&out, *replacement).into_owned();
            }
        }
        if p.detect.iter().any(|re| re.is_match(&out)) {
            return Err(());
        }
        Ok((out, replaced))
    }
}

/// The corpora: what Craik redacts most — build/test output, source and docs, JSON logs,
/// configuration files — each 1 MiB, with a secret every ~16 KiB in `mixed`. Configuration
/// (`key = value` on nearly every line, no secret) is where keyword-shaped rules such as
/// gitleaks' `generic-api-key` find the most places to look at.
fn corpora() -> Vec<(&'static str, String)> {
    let build = [
        "   Compiling serde_json v1.0.140",
        "   Compiling craik-kernel v0.1.0 (/work/craik/kernel)",
        "warning: unused variable: `token_count`",
        "  --> host/src/run/driver/mod.rs:412:13",
        "test run::driver::tests::issue_21_resume_after_crash ... ok",
        "test result: ok. 142 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
        "    Finished `dev` profile [unoptimized + debuginfo] target(s) in 41.37s",
        "error[E0308]: mismatched types: expected `&str`, found `String`",
    ];
    let source = [
        "fn load_key(path: &Path) -> Result<SigningKey, KeyError> {",
        "    let pem = std::fs::read_to_string(path).map_err(KeyError::Read)?;",
        "    // The access token is refreshed by the provider adapter, never stored here.",
        "    let api_base = config.get(\"api_base\").unwrap_or(DEFAULT_API_BASE);",
        "## Secrets\n\nSet `OPENAI_API_KEY` in the runner profile; Craik never reads it.",
        "| capability | operations | note |\n|---|---|---|\n| repo.read | read | any path |",
        "    headers.insert(\"Authorization\", format!(\"Bearer {}\", self.key));",
    ];
    let config = [
        "DATABASE_URL=postgres://localhost:5432/app",
        "api_base: https://api.example.com/v1",
        "token_ttl_seconds = 3600",
        "  access_log: /var/log/nginx/access.log",
        "AUTH_MODE=oidc",
        "secret_store: vault # the key is read at start",
        "password_min_length: 12",
        "KEY_ROTATION_DAYS=90",
        "credentials_file = ~/.aws/credentials",
        "client_id: craik-ci",
    ];
    let json = [
        r#"{"event":"outcome","at":"2026-11-20T10:00:00Z","outcome":{"action":"action_3","ok":true,"summary":"cargo exited 0"}}"#,
        r#"{"schema":"craik.capability_receipt","id":"receipt_0001","request_hash":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}"#,
        r#"{"level":"info","msg":"token bucket refilled","keys":12,"password_policy":"min 12"}"#,
    ];
    let secrets = [
        "export GITHUB_TOKEN=ghp_R2d2C3poBb8Ll0nGt0k3nV4lu3xYz0123456",
        "hf_token: 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",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "curl -H 'Authorization: Bearer sk-proj-AbCdEfGhIjKlMnOpQrStUvWx123456'",
        "postgres://app:Sup3rS3cr3tPw@db.internal:5432/app",
    ];
    let fill = |lines: &[&str], every_secret: Option<usize>| {
        let mut out = String::with_capacity(MIB + 256);
        let mut i = 0usize;
        while out.len() < MIB {
            if let Some(n) = every_secret
                && i % n == n - 1
            {
                out.push_str(secrets[(i / n) % secrets.len()]);
            } else {
                out.push_str(lines[i % lines.len()]);
            }
            out.push('\n');
            i += 1;
        }
        out
    };
    let all: Vec<&str> = build.iter().chain(&source).chain(&json).copied().collect();
    vec![
        ("build-output", fill(&build, None)),
        ("source-and-docs", fill(&source, None)),
        ("json-logs", fill(&json, None)),
        ("mixed-with-secrets", fill(&all, Some(256))),
        ("config-files", fill(&config, None)),
    ]
}

fn bench(c: &mut Criterion) {
    let old = baseline::patterns();
    // Loaded before timing, as in the binary (once per process).
    craik_kernel::secret_rules().unwrap();
    let mut group = c.benchmark_group("redact_1MiB");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(6));
    group.throughput(Throughput::Bytes(MIB as u64));
    for (name, text) in corpora() {
        group.bench_with_input(BenchmarkId::new("baseline", name), &text, |b, t| {
            b.iter(|| black_box(baseline::redact_checked(&old, t).ok()))
        });
        group.bench_with_input(BenchmarkId::new("rules", name), &text, |b, t| {
            b.iter(|| black_box(craik_kernel::redact_checked(t).ok()))
        });
    }
    group.finish();
}

/// Median of `n` timed calls.
fn median(n: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[n / 2]
}

fn ratio_table() {
    let old = baseline::patterns();
    let t = Instant::now();
    let rules = craik_kernel::secret_rules().unwrap();
    let load = t.elapsed();
    println!();
    println!(
        "redaction per MiB (median of 15): baseline = pre-issue-30 list, rules = {} rules (gitleaks {} + Craik's)",
        rules.ids().count(),
        craik_kernel::GITLEAKS_VERSION
    );
    println!(
        "{:<20} {:>12} {:>12} {:>7}",
        "corpus", "baseline ms", "rules ms", "ratio"
    );
    let mut worst = 0.0f64;
    for (name, text) in corpora() {
        let b = median(15, || {
            black_box(baseline::redact_checked(&old, &text).ok());
        });
        let r = median(15, || {
            black_box(craik_kernel::redact_checked(&text).ok());
        });
        worst = worst.max(r / b);
        println!(
            "{name:<20} {:>12.2} {:>12.2} {:>6.2}x",
            b * 1e3,
            r * 1e3,
            r / b
        );
    }
    println!(
        "worst ratio {worst:.2}x (target <= 2x); rule set loaded in {load:?} (once per process)"
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    ratio_table();
}
