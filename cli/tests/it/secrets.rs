//! Issue 30 item 3: every secret rule's positive sample (gitleaks v8.30.1's default set and
//! Craik's own, `kernel/tests/redaction/samples.toml`) placed in a command's output and in the
//! workspace's docs (headings, named paths) reaches none of what Craik keeps or sends: step
//! requests and events, outputs, the journal, the case file, the compiled prompt, the audit
//! (human, JSON, HTML).

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::adapters::make_executable;
use crate::policy::copy_dir;
use crate::runs::{example, run_example};
use crate::{craik, transcript};

const SAMPLES: &str = include_str!("../../../kernel/tests/redaction/samples.toml");

#[derive(serde::Deserialize)]
struct Samples {
    sample: Vec<Sample>,
}

#[derive(serde::Deserialize)]
struct Sample {
    id: String,
    positive: String,
}

/// Every file under `dir`, but not the run's workspace copy (the repository's own files) nor
/// the home's signing key (a private key, by design).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            if !p.ends_with("workspace") && !p.ends_with("sandbox") && !p.ends_with("keys") {
                out.extend(files(&p));
            }
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn issue_30_no_rule_sample_reaches_requests_journal_case_prompt_or_audit() {
    let samples: Vec<Sample> = toml::from_str::<Samples>(SAMPLES).unwrap().sample;
    let rules = craik_kernel::secret_rules().unwrap();
    // What redaction must remove: each sample's secrets as the rules find them (long enough to
    // be unambiguous when searched for in whole files).
    let mut secrets: Vec<(String, String)> = Vec::new();
    for s in &samples {
        for f in rules.find(&s.positive) {
            let secret = s.positive[f.span].to_owned();
            if secret.len() >= 12 && secret.chars().filter(char::is_ascii_alphanumeric).count() >= 8
            {
                secrets.push((s.id.clone(), secret));
            }
        }
    }
    assert!(
        secrets.len() >= 200,
        "only {} secrets to look for",
        secrets.len()
    );

    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("docs-review");
    copy_dir(&example("docs-review"), &ex);
    let ws = ex.join("workspace");
    // A PEM header without its END line is redacted to the end of the text (a cut-off key):
    // those go last, so the rest of the output is shown and checked piece by piece.
    let mut ordered: Vec<&Sample> = samples.iter().collect();
    ordered.sort_by_key(|s| s.id.contains("private-key"));
    let all: String = ordered
        .iter()
        .map(|s| format!("{}\n", s.positive))
        .collect();
    std::fs::write(ws.join("samples.txt"), &all).unwrap();
    std::fs::write(ws.join("show.sh"), "#!/bin/sh\ncat samples.txt\n").unwrap();
    make_executable(&ws.join("show.sh"));
    // In the docs: as a heading (the case file's evidence) and as a named path that does not
    // exist (a stale-risk line), one doc per sample.
    for (i, s) in samples.iter().enumerate() {
        std::fs::write(
            ws.join(format!("docs/s{i:03}.md")),
            format!("# {}\n\nSee `gone/{}`.\n", s.positive, s.positive),
        )
        .unwrap();
    }
    std::fs::write(
        ex.join("grants/show.json"),
        serde_json::to_string(&json!({
            "schema": "craik.capability_grant", "id": "grant_show", "task_id": "task_docs_review",
            "capability": "shell.test", "target": {"paths": ["./show.sh"], "exclude": []},
            "operations": ["execute"], "expires_at": "2030-01-01T00:00:00Z",
            "reason": "test", "approved_by": "user:t"
        }))
        .unwrap(),
    )
    .unwrap();
    std::fs::write(
        ex.join("scenario.json"),
        serde_json::to_string(&json!({
            "schema": "craik.fixture_scenario", "id": "scenario_secrets", "description": "t",
            "steps": [
                {"phase": "plan", "summary": "show the samples"},
                {"phase": "act", "summary": "run it", "proposed_actions": [
                    {"id": "action_show", "capability": "shell.test", "operation": "execute",
                     "argv": ["./show.sh"]},
                    {"id": "action_read", "capability": "repo.read", "operation": "read",
                     "target": "docs/s000.md"}]},
                {"phase": "observe", "summary": "seen"},
                {"phase": "evaluate", "summary": "done", "next": "stop"}
            ]
        }))
        .unwrap(),
    )
    .unwrap();

    let home = dir.path().join("home");
    let (_, id, text) = run_example(&home, &ex, &[]);
    let run = home.join("runs").join(&id);
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    // The command ran and its (redacted) output went back to the runner in a step request.
    assert!(events.contains("\"action_show\""), "{text}\n{events}");
    assert!(
        events.matches("[REDACTED]").count() >= samples.len() / 2,
        "the samples did not reach the step requests redacted: {text}"
    );
    let case = std::fs::read_to_string(run.join("case_file.json")).unwrap();
    assert!(case.contains("missing-path"), "no stale risk in {case}");

    let page = dir.path().join("audit.html");
    let mut shown = Vec::new();
    for args in [
        vec![
            "audit",
            run.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ],
        vec!["audit", run.to_str().unwrap(), "--format", "json"],
        vec!["audit", run.to_str().unwrap(), "--format", "jsonl"],
        vec!["prompt", "compile", ex.to_str().unwrap()],
    ] {
        let out = craik()
            .args(&args)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {}",
            transcript(&out)
        );
        shown.push((
            format!("{args:?}"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    assert!(shown.iter().all(|(_, t)| !t.is_empty()));
    shown.push(("audit.html".into(), std::fs::read_to_string(&page).unwrap()));
    for file in files(&home) {
        let bytes = std::fs::read(&file).unwrap();
        shown.push((
            file.display().to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    assert!(shown.iter().any(|(w, _)| w.ends_with("receipts.jsonl")));
    assert!(
        shown
            .iter()
            .any(|(w, _)| w.ends_with("compiled_prompt.json"))
    );
    for (what, text) in &shown {
        for (rule, secret) in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "{what} holds `{rule}`'s sample secret {secret:?}"
            );
        }
    }
}

/// Every string in `text`: each JSON line's string values (what a reader of the JSON sees,
/// escapes decoded), else the text itself.
fn strings(text: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(m) => m.iter().for_each(|(k, v)| {
                out.push(k.clone());
                walk(v, out);
            }),
            _ => {}
        }
    }
    let mut out = vec![text.to_owned()];
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        walk(&v, &mut out);
    }
    for line in text.lines() {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            walk(&v, &mut out);
        }
    }
    out
}

/// What a terminal or a model reads: escape sequences, controls (but `\n`), format and
/// default-ignorable characters, and tabs inside a word gone.
fn read(text: &str) -> String {
    let escapes = regex::Regex::new(
        r"(?:\x1b|\x{9b})\[?[0-?]*[ -/]*[@-~]|(?:\x1b\]|\x{9d})[^\x07\x1b\n]*(?:\x07|\x1b\\)?|[^\n]\x08",
    )
    .unwrap();
    let invisible =
        regex::Regex::new(r"[[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}]--[\n]]").unwrap();
    invisible
        .replace_all(&escapes.replace_all(text, ""), "")
        .into_owned()
}

/// Red team round 12, F1: a granted command prints real-format tokens coloured by
/// `grep --color=always`, split by a zero-width space, a NUL, a soft hyphen, a backspace or a
/// tab, and glued to a word character. The next step request (the observe request in
/// `events.jsonl`), the journal and everything else the run keeps hold none of them, even
/// once escape sequences and invisible characters are dropped.
#[test]
fn r12_f1_coloured_split_and_glued_tokens_reach_neither_the_runner_nor_the_journal() {
    let tokens = [
        "AKIAUJZDEGXDNCF32EPF",
        "sk-ant-api03-r3yBdGBLEPH1qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY-uCu3ZR1zTOlUcR64cXQAA",
        "sk_live_3RZJzzzzgEOzdmenCkhvMdga",
        "ghp_JBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0RlgLK",
        "xoxb-276842684656-3212233079244-ajAIxNKu8iS2G8NPRVdD53X8",
        "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",
        "npm_BkdfQ1y3GQsMpSscDlkrCaqx9vJupc94tnwl",
        "AIzaSyD3xQ9vLmN2pR7tK4wJ8hF6gC1bE5aZ0yX",
    ];
    let mut env = String::new();
    let mut printed = String::new();
    for (i, t) in tokens.iter().enumerate() {
        env.push_str(&format!("T{i}_TOKEN={t}\n"));
        let (a, b) = t.split_at(6);
        // The prefix is what `grep --color=always` is asked for, coloured; then split tokens.
        printed.push_str(&format!(
            "id_{t}\n9{t}\n{a}\u{200b}{b}\n{a}\\000{b}\n{a}\u{ad}{b}\n{a}Q\\b{b}\n{a}\\t{b}\n"
        ));
    }
    let mut probe = String::from("#!/bin/sh\n");
    for t in &tokens {
        probe.push_str(&format!("grep --color=always '{}' .env\n", &t[..4]));
    }
    probe.push_str("printf \"$(cat printed.txt)\\n\"\n");
    let dir = tempfile::tempdir().unwrap();
    let ex = crate::runs::scratch_example(
        dir.path(),
        "trusted-local",
        &[("shell.test", &["./probe.sh"], &["execute"])],
        crate::runs::act(json!([
            {"id":"action_probe","capability":"shell.test","operation":"execute","argv":["./probe.sh"]},
        ])),
        &[
            ("probe.sh", &probe),
            (".env", &env),
            ("printed.txt", &printed),
        ],
    );
    make_executable(&ex.join("workspace/probe.sh"));
    let home = dir.path().join("home");
    let (_, id, text) = run_example(&home, &ex, &[]);
    let run = home.join("runs").join(&id);
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let observe = events
        .lines()
        .find(|l| l.contains("\"outcomes\""))
        .unwrap_or_else(|| panic!("no observe request: {text}\n{events}"));
    // The command ran, printed, and its output reached the runner redacted.
    assert!(
        observe.matches("[REDACTED]").count() >= tokens.len() * 7,
        "{observe}"
    );
    let mut kept: Vec<(String, String)> = vec![("observe request".into(), observe.to_owned())];
    for file in files(&home) {
        let bytes = std::fs::read(&file).unwrap();
        kept.push((
            file.display().to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    assert!(kept.iter().any(|(w, _)| w.ends_with("receipts.jsonl")));
    for (what, text) in &kept {
        for s in strings(text) {
            let seen = read(&s);
            for t in &tokens {
                assert!(!s.contains(t), "{what} holds {t}: {s:?}");
                // A tab between two parts of a token: read as one word.
                let joined = seen.replace('\t', "");
                assert!(!joined.contains(t), "{what} holds {t} once read: {s:?}");
            }
        }
    }
}
