//! `craik runners matrix` (and, with the channel, `craik runners conformance`).

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// `craik runners matrix [--runner ID]`.
pub(crate) fn matrix(out: &mut Out, format: Format, runner: Option<&str>) -> Result<Exit, Failure> {
    let names: Vec<&str> = match runner {
        Some(r) => vec![r],
        None => craik_host::runners::names().collect(),
    };
    let matrices = names
        .iter()
        .map(|n| craik_host::runners::matrix(n))
        .collect::<Result<Vec<_>, _>>()?;
    match format {
        Format::Json | Format::Junit => out.json(&matrices)?,
        Format::Human => {
            for (i, m) in matrices.iter().enumerate() {
                if i > 0 {
                    out.line("")?;
                }
                out.line(format_args!(
                    "{} ({}) — mode {}, trust {}, {}",
                    m.runner.id,
                    m.runner.name,
                    m.runner.mode.as_str(),
                    m.trust.level.as_str(),
                    m.trust.default_grant_posture.as_str()
                ))?;
                out.line(format_args!("  boundary: {}", m.trust.boundary))?;
                out.line(format_args!(
                    "  confinement: {}",
                    craik_host::confine::adapter_summary()
                ))?;
                out.line(format_args!(
                    "  receipts required: {}; redaction required: {}",
                    m.trust.requires_receipts, m.trust.requires_redaction
                ))?;
                let width = m
                    .capabilities
                    .iter()
                    .map(|c| c.name.len())
                    .max()
                    .unwrap_or(0);
                for c in &m.capabilities {
                    let effect = match c.support {
                        craik_contracts::RunnerCapabilitySupport::Unsupported => {
                            "blocked before policy"
                        }
                        craik_contracts::RunnerCapabilitySupport::PromptHandoff => {
                            "review: needs approval"
                        }
                        craik_contracts::RunnerCapabilitySupport::Supported => {
                            "policy and grants decide"
                        }
                    };
                    out.line(format_args!(
                        "  {:<width$}  {:<14} {:<22} {}{}",
                        c.name,
                        c.support.as_str(),
                        effect,
                        if c.grant_required {
                            "grant required"
                        } else {
                            "no grant needed"
                        },
                        c.notes
                            .as_deref()
                            .map(|n| format!(" — {n}"))
                            .unwrap_or_default()
                    ))?;
                }
                for note in &m.policy_notes {
                    out.line(format_args!("  policy: {note}"))?;
                }
            }
            out.line("")?;
            out.line("Capabilities not listed are unsupported. A family entry (`repo.write`) covers its members.")?;
        }
    }
    Ok(Exit::Ok)
}

/// `craik runners conformance -- CMD [ARGS]`.
pub(crate) fn conformance(
    out: &mut Out,
    format: Format,
    command: &[String],
) -> Result<Exit, Failure> {
    let checks = craik_host::conformance::run(command)?;
    let failed = checks.iter().filter(|c| !c.passed && !c.skipped).count();
    let skipped = checks.iter().filter(|c| c.skipped).count();
    match format {
        Format::Json | Format::Junit => out.json(&checks)?,
        Format::Human => {
            for c in &checks {
                out.line(format_args!(
                    "{}  {:<34} {}",
                    if c.passed {
                        "pass"
                    } else if c.skipped {
                        "skip"
                    } else {
                        "FAIL"
                    },
                    c.scenario,
                    c.detail
                ))?;
            }
            out.line(format_args!(
                "{} scenario(s): {} passed, {failed} failed, {skipped} not run",
                checks.len(),
                checks.len() - failed - skipped
            ))?;
        }
    }
    let all = craik_host::conformance::scenarios().count();
    Ok(if failed == 0 && skipped == 0 && checks.len() == all {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}
