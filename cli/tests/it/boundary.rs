//! The reference monitor's boundary (issues 11 and 12): what is decided is exactly what runs.
//! Each test names the attack class it closes and runs generated variants through the real
//! binary.

use serde_json::{Value, json};

use crate::runs::{receipts, run_example, run_json, scratch_example, verify_run};

fn act(actions: Value) -> Value {
    json!([
        {"phase":"plan","summary":"plan"},
        {"phase":"act","summary":"act","proposed_actions":actions},
        {"phase":"observe","summary":"observe"},
        {"phase":"evaluate","summary":"done","next":"stop"}
    ])
}

/// Issue 11 item 1 (label vs effect): a capability carrying another capability's operation is
/// refused by the kernel and no executor runs, under every profile, whatever the grants.
#[test]
fn issue_11_a_capability_never_runs_another_capabilitys_executor() {
    let files = [
        ("AGENTS.md", "agent rules\n"),
        ("src/lib.rs", "fn main() {}\n"),
        ("docs/adr/0001.md", "decision\n"),
    ];
    let mut variants: Vec<Value> = Vec::new();
    for target in ["AGENTS.md", "src/lib.rs", "docs/adr/0001.md"] {
        for capability in ["repo.read", "shell.test", "memory.read", "net.fetch"] {
            variants.push(
                json!({"id":"action_x","capability":capability,"operation":"write",
                "target":target,"content":"pwned\n"}),
            );
            variants.push(
                json!({"id":"action_x","capability":capability,"operation":"patch",
                "target":target,"edits":[{"old":"\n","new":"pwned\n"}]}),
            );
        }
    }
    for capability in ["repo.read", "repo.write.docs", "memory.propose"] {
        variants.push(
            json!({"id":"action_x","capability":capability,"operation":"execute",
            "argv":["touch","src/lib.rs"],"target":"src/lib.rs"}),
        );
    }
    for profile in ["strict", "trusted-local", "automation"] {
        for action in &variants {
            let dir = tempfile::tempdir().unwrap();
            let ex = scratch_example(
                dir.path(),
                profile,
                &[
                    (
                        "repo.write.docs",
                        &["**"],
                        &["read", "write", "patch", "execute"],
                    ),
                    ("shell.test", &["touch"], &["execute", "write"]),
                ],
                act(json!([action])),
                &files,
            );
            let home = dir.path().join("home");
            let (exit, id, text) = run_example(&home, &ex, &[]);
            assert_eq!(exit, 1, "{profile} {action}: {text}");
            assert_eq!(run_json(&home, &id)["status"], "blocked", "{action}");
            let ws = home.join("runs").join(&id).join("workspace");
            for (path, text) in files {
                assert_eq!(
                    std::fs::read_to_string(ws.join(path)).unwrap(),
                    text,
                    "{profile} {action}: {path} changed"
                );
            }
            let rs = receipts(&home, &id);
            let decision = rs
                .iter()
                .find(|r| r["decided_by"]["kind"] != "outcome")
                .unwrap();
            assert_eq!(decision["decision"], "deny", "{action}");
            assert_eq!(
                decision["determining_policies"],
                json!(["kernel.invalid-request"]),
                "{action}"
            );
            assert!(
                rs.iter()
                    .filter(|r| r["decided_by"]["kind"] == "outcome")
                    .all(|r| r["result"]["status"] != "passed"),
                "{action}: an executor ran"
            );
            verify_run(&home, &id, false);
        }
    }
}
