//! `policy diff --prove`: for every request environment of the schema and both verdict levels,
//! whether NEW lets through exactly what OLD does (equivalent), less (narrower), more
//! (broader) or neither (incomparable), with a counterexample per difference, each checked by
//! Cedar's authorizer and replayed through the kernel.

use cedar_policy::{PolicySet, RequestEnv, Schema};
use cedar_policy_symcc::solver::LocalSolver;
use cedar_policy_symcc::{CedarSymCompiler, Env};
use craik_contracts::CapabilityGrant;
use craik_kernel::{Bundle, GrantSet, SourceFile};
use serde::Serialize;

use crate::replay::{Replayed, cedar_allows, to_request};
use crate::sets::{CedarBundle, Level, guards};
use crate::solver::{SolverCheck, SolverConfig, canaries, compile};
use crate::{ProveError, block_on, bounded, escape};

/// One side of a diff: the kernel's load of a bundle and the files it came from.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub bundle: &'a Bundle,
    pub schema: &'a SourceFile,
    pub files: &'a [SourceFile],
}

impl Side<'_> {
    pub(crate) fn schema(&self) -> Result<Schema, ProveError> {
        Schema::from_cedarschema_str(&self.schema.text)
            .map(|(s, _)| s)
            .map_err(|e| ProveError::Bundle(format!("{}: {e}", self.schema.name)))
    }

    pub(crate) fn cedar(&self, grants: &[CapabilityGrant]) -> Result<CedarBundle, ProveError> {
        let set = GrantSet::compile(self.bundle, grants)
            .map_err(|e| ProveError::Bundle(format!("grants: {e}")))?;
        let compiled: Vec<_> = set.all().cloned().collect();
        CedarBundle::new(self.bundle, self.files, &compiled)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Equivalent,
    Narrower,
    Broader,
    Incomparable,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equivalent => "equivalent",
            Self::Narrower => "narrower",
            Self::Broader => "broader",
            Self::Incomparable => "incomparable",
        }
    }
}

/// Which way a counterexample goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// NEW lets it through, OLD did not.
    Broader,
    /// OLD let it through, NEW does not.
    Narrower,
}

/// What the replay through the kernel said about a counterexample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "why", rename_all = "snake_case")]
pub enum Status {
    /// The kernel's verdicts differ as the solver said.
    Confirmed,
    /// The kernel never gives this difference (it builds other attributes, refuses the
    /// request, ...): solver only, not a finding.
    Spurious(String),
}

/// One counterexample.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub direction: Direction,
    pub status: Status,
    /// The request as replayed (absent when the model maps to no request).
    pub request: Option<craik_kernel::DecisionRequest>,
    /// The clock it was decided at (RFC 3339).
    pub now: Option<String>,
    /// `decision` / `deny_kind` / determining policies on each side.
    pub old: Option<craik_kernel::Verdict>,
    pub new: Option<craik_kernel::Verdict>,
    /// The solver's model, one line.
    pub model: String,
}

/// One request environment at one level.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub action: String,
    pub principal: String,
    pub resource: String,
    pub level: Level,
    pub class: Class,
    /// The moved policies whose scope covers this action (`+` added, `-` removed, `~` changed).
    pub moved: Vec<String>,
    /// Decided without a solver call: both sides hold the same policies.
    pub syntactic: bool,
    pub findings: Vec<Finding>,
}

impl Row {
    pub fn confirmed(&self) -> bool {
        self.findings.iter().any(|f| f.status == Status::Confirmed)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    pub solver: SolverCheck,
    /// Policies added (`+id`), removed (`-id`) or changed (`~id`).
    pub moved: Vec<String>,
    pub rows: Vec<Row>,
    /// Requests decided by the kernel on both sides to cross-check every "equivalent" row.
    pub sampled: usize,
    pub queries: usize,
}

/// Classifies NEW against OLD. Both must have the same schema.
pub fn diff(
    old: Side<'_>,
    new: Side<'_>,
    grants: &[CapabilityGrant],
    config: &SolverConfig,
) -> Result<DiffReport, ProveError> {
    if old.schema.text != new.schema.text {
        return Err(ProveError::Bundle(
            "the two sides have different schemas; a proof compares policies over one schema"
                .into(),
        ));
    }
    let schema = old.schema()?;
    let (old_c, new_c) = (old.cedar(grants)?, new.cedar(grants)?);
    let moved = old_c.moved(&new_c);
    let guards = guards(&schema)?;
    let (solver, rows, queries) = block_on(|| async {
        let check = canaries(config, &schema).await?;
        let mut compiler = config.start()?;
        let mut rows = Vec::new();
        let mut queries = 0;
        for level in Level::ALL {
            let sets = (
                old_c.level_set(level, &guards)?,
                new_c.level_set(level, &guards)?,
            );
            for env in envs(&schema) {
                let row = if moved.is_empty() {
                    row_of(&env, level, Class::Equivalent, true, Vec::new())
                } else {
                    queries += 2;
                    classify(
                        &mut compiler,
                        config,
                        &schema,
                        &env,
                        level,
                        &sets,
                        grants,
                        (old, new),
                    )
                    .await?
                };
                rows.push(row);
            }
        }
        Ok::<_, ProveError>((check, rows, queries))
    })?;
    let mut rows = rows;
    for row in &mut rows {
        let families = old.bundle.families_of(&row.action);
        row.moved = old_c.moved_for(&new_c, &moved, &row.action, families);
    }
    let sampled = crate::sample::cross_check(old, new, grants, &rows)?;
    Ok(DiffReport {
        solver,
        moved,
        rows,
        sampled,
        queries,
    })
}

/// The schema's request environments, in action order.
pub(crate) fn envs(schema: &Schema) -> Vec<RequestEnv> {
    let mut envs: Vec<RequestEnv> = schema.request_envs().collect();
    envs.sort_by_key(|e| e.action().id().unescaped().to_owned());
    envs
}

fn row_of(
    env: &RequestEnv,
    level: Level,
    class: Class,
    syntactic: bool,
    findings: Vec<Finding>,
) -> Row {
    Row {
        action: env.action().id().unescaped().to_owned(),
        principal: env.principal().to_string(),
        resource: env.resource().to_string(),
        level,
        class,
        moved: Vec::new(),
        syntactic,
        findings,
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one call site; the pieces of one query"
)]
async fn classify(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    config: &SolverConfig,
    schema: &Schema,
    env: &RequestEnv,
    level: Level,
    (old_set, new_set): &(PolicySet, PolicySet),
    grants: &[CapabilityGrant],
    (old, new): (Side<'_>, Side<'_>),
) -> Result<Row, ProveError> {
    let (o, n) = (
        compile(old_set, env, schema)?,
        compile(new_set, env, schema)?,
    );
    let what = format!("{} ({})", env.action().id().unescaped(), level.as_str());
    let lost = bounded(
        config.per_query,
        &what,
        compiler.check_implies_with_counterexample_opt(&o, &n),
    )
    .await?;
    let gained = bounded(
        config.per_query,
        &what,
        compiler.check_implies_with_counterexample_opt(&n, &o),
    )
    .await?;
    let class = match (&lost, &gained) {
        (None, None) => Class::Equivalent,
        (None, Some(_)) => Class::Broader,
        (Some(_), None) => Class::Narrower,
        (Some(_), Some(_)) => Class::Incomparable,
    };
    let mut findings = Vec::new();
    for (cex, direction) in [(gained, Direction::Broader), (lost, Direction::Narrower)] {
        let Some(cex) = cex else { continue };
        let (admits, denies) = match direction {
            Direction::Broader => (new_set, old_set),
            Direction::Narrower => (old_set, new_set),
        };
        if !cedar_allows(&cex, admits) || cedar_allows(&cex, denies) {
            return Err(ProveError::Unsound(format!(
                "{what}: the solver's counterexample does not evaluate as it claimed under Cedar's authorizer; the solver or its decoding is broken, nothing is reported: {}",
                escape(&cex.to_string())
            )));
        }
        findings.push(replay(
            &cex, direction, level, grants, old.bundle, new.bundle,
        ));
    }
    Ok(row_of(env, level, class, false, findings))
}

/// Replays a counterexample on both sides.
pub(crate) fn replay(
    cex: &Env,
    direction: Direction,
    level: Level,
    grants: &[CapabilityGrant],
    old: &Bundle,
    new: &Bundle,
) -> Finding {
    let model = escape(&cex.to_string());
    let r: Replayed = match to_request(cex) {
        Ok(r) => r,
        Err(why) => {
            return Finding {
                direction,
                status: Status::Spurious(format!(
                    "no request the kernel decides maps to this model: {why}"
                )),
                request: None,
                now: None,
                old: None,
                new: None,
                model,
            };
        }
    };
    let confirms = |c: &Replayed| match (c.decide(old, grants), c.decide(new, grants)) {
        (Ok(o), Ok(n)) => {
            let (wider, narrower) = match direction {
                Direction::Broader => (n, o),
                Direction::Narrower => (o, n),
            };
            level.admits(wider.decision) && !level.admits(narrower.decision)
        }
        _ => false,
    };
    let r = if confirms(&r) {
        crate::replay::simplify(r, &confirms)
    } else {
        r
    };
    let (o, n) = (r.decide(old, grants), r.decide(new, grants));
    let status = match (&o, &n) {
        (Ok(o), Ok(n)) => {
            let (wider, narrower) = match direction {
                Direction::Broader => (n, o),
                Direction::Narrower => (o, n),
            };
            if level.admits(wider.decision) && !level.admits(narrower.decision) {
                Status::Confirmed
            } else {
                Status::Spurious(format!(
                    "the kernel decides it {} on OLD and {} on NEW",
                    word(o.decision),
                    word(n.decision)
                ))
            }
        }
        (Err(e), _) | (_, Err(e)) => Status::Spurious(format!("replay refused: {e}")),
    };
    Finding {
        direction,
        status,
        now: r
            .now
            .format(&time::format_description::well_known::Rfc3339)
            .ok(),
        request: Some(r.request),
        old: o.ok(),
        new: n.ok(),
        model,
    }
}

pub(crate) fn word(d: craik_kernel::Decision) -> &'static str {
    match d {
        craik_kernel::Decision::Allow => "allow",
        craik_kernel::Decision::RequiresApproval => "requires_approval",
        craik_kernel::Decision::Deny => "deny",
    }
}
