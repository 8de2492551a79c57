//! Reading a model's final answer, shared by the adapters that talk to models (prompt
//! handoff, provider) through `#[path]`.

use craik_contracts::{Object, ResultStatus, RunnerStepRequest, RunnerStepResult};
use serde_json::{Map, Value};

/// The last top-level JSON object in `text` (bare or in a fenced block).
pub(crate) fn last_json_object(text: &str) -> Option<Map<String, Value>> {
    let mut end = text.len();
    while let Some(close) = text.get(..end).and_then(|t| t.rfind('}')) {
        let mut depth = 0i32;
        for (i, c) in text.get(..=close)?.char_indices().rev() {
            match c {
                '}' => depth += 1,
                '{' => {
                    depth -= 1;
                    if depth == 0 {
                        if let Ok(Value::Object(m)) = serde_json::from_str(text.get(i..=close)?) {
                            return Some(m);
                        }
                        break;
                    }
                }
                _ => {}
            }
        }
        end = close;
    }
    None
}

/// A step result from the model's final text: its JSON answer's `status`, `summary`, `next`,
/// `memory_proposals` (and `proposed_actions`, when the model wrote them there), merged into
/// `observed`; without a JSON answer, a `partial` step carrying the text.
pub(crate) fn result_from_text(
    request: &RunnerStepRequest,
    text: &str,
    mut observed: Map<String, Value>,
) -> RunnerStepResult {
    let mut status = ResultStatus::Partial;
    let mut summary: String = text.trim().chars().take(500).collect();
    let mut diagnostics = Vec::new();
    match last_json_object(text) {
        Some(answer) => {
            for key in ["proposed_actions", "memory_proposals", "next"] {
                if let Some(v) = answer.get(key) {
                    observed.entry(key).or_insert_with(|| v.clone());
                }
            }
            status = match answer.get("status").and_then(Value::as_str) {
                Some("completed") => ResultStatus::Completed,
                Some("blocked") => ResultStatus::Blocked,
                Some("failed") => ResultStatus::Failed,
                _ => ResultStatus::Partial,
            };
            if let Some(s) = answer.get("summary").and_then(Value::as_str) {
                summary = s.chars().take(500).collect();
            }
        }
        None => diagnostics
            .push("the model's answer held no JSON object; recorded as partial".to_owned()),
    }
    if summary.is_empty() {
        summary = "(no text)".into();
    }
    RunnerStepResult::answering(request, status, summary, Object(observed), diagnostics)
}
