//! The reports as people read them: a table like `terraform plan`, one line per change.
//! Everything that came from a policy, a model or a request is escaped.

use std::fmt::Write as _;

use craik_kernel::{DecisionRequest, Verdict};

use crate::classify::{Class, DiffReport, Finding, Status, word};
use crate::errors::NeverErrorsReport;
use crate::escape;
use crate::query::PropertyReport;
use crate::solver::SolverCheck;

fn solver_line(s: &SolverCheck) -> String {
    format!(
        "solver: cvc5 {} ({}){}; canaries passed: {}",
        escape(&s.version),
        escape(&s.program),
        if s.version_override {
            " [NOT the documented 1.3.1: --allow-solver-version]"
        } else {
            ""
        },
        s.canaries.len()
    )
}

/// `capability target (operation) under profile, runner trust, ...`, one line.
pub(crate) fn describe(r: &DecisionRequest) -> String {
    let intent = match &r.intent {
        Some(i) => format!(
            ", intent out={:?} in={:?} stop={:?}",
            i.out_of_scope, i.in_scope, i.stop_conditions
        ),
        None => String::new(),
    };
    escape(&format!(
        "{} `{}` ({}) under {}, runner {} trust {} mode {}, task {}, phase {}, iteration {}/{}{intent}",
        r.capability,
        r.target.as_deref().unwrap_or(""),
        r.operation,
        r.profile.as_str(),
        r.runner.id,
        name(&r.runner.trust),
        name(&r.runner.mode),
        r.task_id,
        name(&r.phase),
        r.iteration,
        r.max_iterations
    ))
}

/// An enum as its contract spells it (`prompt-handoff`, not `PromptHandoff`).
fn name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "?".to_owned(),
    }
}

fn verdict(v: Option<&Verdict>) -> String {
    match v {
        Some(v) if v.determining.is_empty() => word(v.decision).to_owned(),
        Some(v) => format!(
            "{} [{}]",
            word(v.decision),
            escape(&v.determining.join(", "))
        ),
        None => "-".to_owned(),
    }
}

fn finding(f: &Finding) -> String {
    let status = match &f.status {
        Status::Confirmed => "confirmed".to_owned(),
        Status::Spurious(why) => format!("spurious (solver only): {}", escape(why)),
    };
    match &f.request {
        Some(r) => format!(
            "{status}; OLD {} -> NEW {}; {} at {}",
            verdict(f.old.as_ref()),
            verdict(f.new.as_ref()),
            describe(r),
            f.now.as_deref().unwrap_or("?")
        ),
        None => format!("{status}; model: {}", f.model),
    }
}

/// The diff as a table: every row that is not equivalent, then a summary.
pub fn render_diff(report: &DiffReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", solver_line(&report.solver));
    if report.moved.is_empty() {
        let _ = writeln!(
            out,
            "policies moved: none (the two sides hold the same policies)"
        );
    } else {
        let _ = writeln!(out, "policies moved: {}", escape(&report.moved.join(" ")));
    }
    let _ = writeln!(
        out,
        "{:<22} {:<11} {:<13} COUNTEREXAMPLE (replayed through the kernel)",
        "ACTION", "LEVEL", "CHANGE"
    );
    let mut counts = [0usize; 4];
    let (mut confirmed, mut spurious) = (0, 0);
    for row in &report.rows {
        let slot = match row.class {
            Class::Equivalent => 0,
            Class::Narrower => 1,
            Class::Broader => 2,
            Class::Incomparable => 3,
        };
        if let Some(c) = counts.get_mut(slot) {
            *c += 1;
        }
        if row.class == Class::Equivalent {
            continue;
        }
        let mut first = true;
        for f in &row.findings {
            match f.status {
                Status::Confirmed => confirmed += 1,
                Status::Spurious(_) => spurious += 1,
            }
            // A class no replay confirmed is the solver's alone: marked `*`.
            let class = if row.confirmed() {
                row.class.as_str().to_owned()
            } else {
                format!("{}*", row.class.as_str())
            };
            let (a, l, c) = if first {
                (row.action.as_str(), row.level.as_str(), class.as_str())
            } else {
                ("", "", "")
            };
            if first && !row.moved.is_empty() {
                let _ = writeln!(
                    out,
                    "{a:<22} {l:<11} {c:<13} moved here: {}",
                    escape(&row.moved.join(" "))
                );
            }
            let (a, l, c) = if first && !row.moved.is_empty() {
                ("", "", "")
            } else {
                (a, l, c)
            };
            first = false;
            let dir = match f.direction {
                crate::Direction::Broader => "+",
                crate::Direction::Narrower => "-",
            };
            let _ = writeln!(out, "{a:<22} {l:<11} {c:<13} {dir} {}", finding(f));
        }
    }
    if report
        .rows
        .iter()
        .any(|r| r.class != Class::Equivalent && !r.confirmed())
    {
        let _ = writeln!(
            out,
            "* solver only: the kernel confirmed no counterexample of this row (not a proof that none is reachable)"
        );
    }
    let [eq, narrower, broader, incomparable] = counts;
    let _ = writeln!(
        out,
        "{} rows (action x level): {eq} equivalent, {narrower} narrower, {broader} broader, {incomparable} incomparable; {confirmed} confirmed counterexample(s), {spurious} spurious (solver only); {} solver queries; every equivalent row cross-checked on {} requests through the kernel",
        report.rows.len(),
        report.queries,
        report.sampled
    );
    out
}

/// `validate --prove never-errors`.
pub fn render_never_errors(report: &NeverErrorsReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", solver_line(&report.solver));
    for e in &report.errors {
        let status = match &e.status {
            Status::Confirmed => "can error (confirmed)".to_owned(),
            Status::Spurious(why) => format!("spurious (solver only): {}", escape(why)),
        };
        let what = match &e.request {
            Some(r) => format!("{}; kernel: {}", describe(r), verdict(e.verdict.as_ref())),
            None => format!("model: {}", e.model),
        };
        let _ = writeln!(
            out,
            "{} on {}: {status}; {what}",
            escape(&e.policy),
            e.action
        );
    }
    if report.errors.is_empty() {
        let _ = writeln!(
            out,
            "never errors: proven for {} policy x action pairs; cross-checked on {} requests through the kernel",
            report.checked, report.sampled
        );
    } else {
        let _ = writeln!(
            out,
            "{} policy x action pair(s) of {} can error ({} confirmed by the kernel)",
            report.errors.len(),
            report.checked,
            report.confirmed()
        );
    }
    out
}

/// `policy prove`.
pub fn render_properties(report: &PropertyReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", solver_line(&report.solver));
    let mut failed = 0;
    for r in &report.results {
        let outcome = if r.holds {
            "holds".to_owned()
        } else if r.confirmed() {
            failed += 1;
            "FAILS".to_owned()
        } else {
            failed += 1;
            "NOT PROVEN (solver-only counterexample)".to_owned()
        };
        let _ = writeln!(
            out,
            "{outcome:<8} {} ({} env checks): {}",
            escape(&r.name),
            r.envs,
            escape(&r.query)
        );
        for w in &r.counterexamples {
            let status = match &w.status {
                Status::Confirmed => "confirmed".to_owned(),
                Status::Spurious(why) => format!("spurious (solver only): {}", escape(why)),
            };
            let what = match &w.request {
                Some(q) => format!("{}; kernel: {}", describe(q), verdict(w.verdict.as_ref())),
                None => format!("model: {}", w.model),
            };
            let _ = writeln!(out, "  {}: {status}; {what}", w.action);
        }
    }
    let _ = writeln!(
        out,
        "{} of {} properties hold ({} solver queries)",
        report.results.len() - failed,
        report.results.len(),
        report.queries
    );
    out
}
