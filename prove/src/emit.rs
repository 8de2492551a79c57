//! `--emit-tests DIR`: each confirmed finding of a diff as a `craik policy test` case that
//! expects NEW's verdict (so it passes on NEW and fails on OLD). Spurious findings are never
//! emitted.

use craik_contracts::CapabilityGrant;
use serde_json::{Value, json};

use crate::classify::{DiffReport, Direction, Status};

/// A suite file to write.
#[derive(Debug, Clone)]
pub struct EmittedSuite {
    pub file_name: String,
    pub suite: Value,
    pub cases: usize,
}

/// The confirmed findings of `report` as one Craik suite per clock (cases of a suite share
/// its `now`), in the format `policy-tests/README.md` documents.
pub fn emit_tests(report: &DiffReport, grants: &[CapabilityGrant]) -> Vec<EmittedSuite> {
    let mut by_now: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    for row in &report.rows {
        for (i, f) in row.findings.iter().enumerate() {
            let (Status::Confirmed, Some(request), Some(new), Some(old), Some(now)) =
                (&f.status, &f.request, &f.new, &f.old, &f.now)
            else {
                continue;
            };
            let direction = match f.direction {
                Direction::Broader => "broader",
                Direction::Narrower => "narrower",
            };
            by_now.entry(now.clone()).or_default().push(json!({
                "name": format!("{} {} {direction} #{i}: OLD {} -> NEW {}", row.action, row.level.as_str(),
                    crate::classify::word(old.decision), crate::classify::word(new.decision)),
                "request": request,
                "grants": grants,
                "expect": {
                    "decision": new.decision,
                    "deny_kind": new.deny_kind,
                    "determining": new.determining,
                }
            }));
        }
    }
    by_now
        .into_iter()
        .enumerate()
        .map(|(i, (now, cases))| EmittedSuite {
            file_name: format!("prove-diff-{i}.json"),
            cases: cases.len(),
            suite: json!({
                "suite": "policy diff --prove",
                "description": "confirmed counterexamples of `craik policy diff --prove`: each expects the NEW bundle's verdict, so it passes on NEW and fails on OLD",
                "now": now,
                "workspace_root": crate::WORKSPACE_ROOT,
                "cases": cases,
            }),
        })
        .collect()
}
