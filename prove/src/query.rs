//! `policy prove 'QUERY'`: the questions a security team asks of a bundle, in a small query
//! form whose condition is a Cedar expression (Cedar's parser and symcc's type checker read
//! it; there is no second expression language):
//!
//! ```text
//! QUERY   := VERB ACTIONS [under profile NAME] [for any grant] [when CEDAR_EXPR]
//! VERB    := deny | allow | approval | no-clean-allow | grant-only
//! ACTIONS := * | ACTION (, ACTION)*      (a capability or a family: repo.write, shell)
//! ```
//!
//! `deny`: no matching request is let through (allow or requires approval). `allow`: every
//! matching request is allowed outright. `no-clean-allow`: none is allowed without an
//! approval. `approval`: every one is held for approval, none allowed outright.
//! `grant-only`: with no grants, none is let through (every allow is backed by a grant).
//! `for any grant` adds a permit that stands for every grant a task could hold (forbids still
//! win), so a `deny` that holds with it holds whatever grants say.

use cedar_policy::{Policy, PolicyId, PolicySet, RequestEnv, Schema};
use cedar_policy_symcc::solver::LocalSolver;
use cedar_policy_symcc::{CedarSymCompiler, CompiledPolicySet, Env};
use craik_contracts::CapabilityGrant;
use serde::{Deserialize, Serialize};

use crate::classify::{Side, Status, envs};
use crate::replay::{cedar_allows, to_request};
use crate::sets::{CedarBundle, Level, guards};
use crate::solver::{SolverCheck, SolverConfig, canaries, compile};
use crate::{ProveError, block_on, bounded, escape};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    Deny,
    Allow,
    Approval,
    NoCleanAllow,
    GrantOnly,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Query {
    pub verb: Verb,
    /// Capabilities or families; empty for `*`.
    pub actions: Vec<String>,
    pub profile: Option<String>,
    pub any_grant: bool,
    pub when: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query `{query}`: {why}")]
pub struct QueryError {
    pub query: String,
    pub why: String,
}

/// Parses the query form above.
pub fn parse(text: &str) -> Result<Query, QueryError> {
    let err = |why: String| QueryError {
        query: escape(text),
        why,
    };
    let (head, when) = match text.split_once(" when ") {
        Some((h, w)) if !w.trim().is_empty() => (h, Some(w.trim().to_owned())),
        Some(_) => return Err(err("`when` needs a Cedar expression".into())),
        None => (text, None),
    };
    let mut words = head.split_whitespace();
    let verb = match words.next() {
        Some("deny") => Verb::Deny,
        Some("allow") => Verb::Allow,
        Some("approval") => Verb::Approval,
        Some("no-clean-allow") => Verb::NoCleanAllow,
        Some("grant-only") => Verb::GrantOnly,
        Some(other) => {
            return Err(err(format!(
                "unknown verb `{}`; expected deny, allow, approval, no-clean-allow or grant-only",
                escape(other)
            )));
        }
        None => return Err(err("empty query".into())),
    };
    let rest: Vec<&str> = words.collect();
    let end = rest
        .iter()
        .position(|w| *w == "under" || *w == "for")
        .unwrap_or(rest.len());
    let (list, tail) = rest.split_at(end);
    let list = list.join(" ");
    let actions: Vec<String> = list
        .split(',')
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .collect();
    if actions.is_empty() {
        return Err(err("no actions; name a capability, a family or `*`".into()));
    }
    let actions = if actions == ["*"] {
        Vec::new()
    } else {
        actions
    };
    let (profile, any_grant) = match tail {
        [] => (None, false),
        ["for", "any", "grant"] => (None, true),
        ["under", "profile", p] => (Some((*p).to_owned()), false),
        ["under", "profile", p, "for", "any", "grant"] => (Some((*p).to_owned()), true),
        _ => {
            return Err(err(format!(
                "expected `under profile NAME` and/or `for any grant` after the actions, got `{}`",
                escape(&tail.join(" "))
            )));
        }
    };
    if let Some(p) = &profile
        && !["strict", "trusted-local", "automation", "custom"].contains(&p.as_str())
    {
        return Err(err(format!("unknown profile `{}`", escape(p))));
    }
    if verb == Verb::GrantOnly && any_grant {
        return Err(err("`grant-only` with `for any grant` asks nothing".into()));
    }
    Ok(Query {
        verb,
        actions,
        profile,
        any_grant,
        when,
    })
}

/// A named query from a property library.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Property {
    pub name: String,
    pub query: String,
    #[serde(default)]
    pub why: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Library {
    property: Vec<Property>,
}

/// A property library (TOML: `[[property]] name, query, why`); each query is parsed.
pub fn parse_library(label: &str, text: &str) -> Result<Vec<Property>, QueryError> {
    let lib: Library = toml::from_str(text).map_err(|e| QueryError {
        query: label.to_owned(),
        why: craik_contracts::one_line(&e.to_string()),
    })?;
    for p in &lib.property {
        parse(&p.query).map_err(|e| QueryError {
            query: format!("{label}: property `{}`", escape(&p.name)),
            why: e.why,
        })?;
    }
    Ok(lib.property)
}

/// The outcome of one property.
#[derive(Debug, Clone, Serialize)]
pub struct PropertyResult {
    pub name: String,
    pub query: String,
    /// Holds on every request environment it covers.
    pub holds: bool,
    pub envs: usize,
    pub counterexamples: Vec<Witness>,
}

impl PropertyResult {
    pub fn confirmed(&self) -> bool {
        self.counterexamples
            .iter()
            .any(|w| w.status == Status::Confirmed)
    }
}

/// A request that breaks a property, replayed.
#[derive(Debug, Clone, Serialize)]
pub struct Witness {
    pub action: String,
    pub status: Status,
    pub request: Option<craik_kernel::DecisionRequest>,
    pub verdict: Option<craik_kernel::Verdict>,
    pub model: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PropertyReport {
    pub solver: SolverCheck,
    pub results: Vec<PropertyResult>,
    pub queries: usize,
}

/// Proves each property of `properties` on `side`.
pub fn prove(
    side: Side<'_>,
    properties: &[Property],
    grants: &[CapabilityGrant],
    config: &SolverConfig,
) -> Result<PropertyReport, ProveError> {
    let schema = side.schema()?;
    let guards = guards(&schema)?;
    let with = side.cedar(grants)?;
    let without = side.cedar(&[])?;
    block_on(|| async {
        let solver = canaries(config, &schema).await?;
        let mut compiler = config.start()?;
        let mut results = Vec::new();
        let mut queries = 0;
        for p in properties {
            let q = parse(&p.query).map_err(|e| ProveError::Bundle(e.to_string()))?;
            let (cedar, grants) = if q.verb == Verb::GrantOnly {
                (&without, &[][..])
            } else {
                (&with, grants)
            };
            let ctx = Ctx {
                schema: &schema,
                guards: &guards,
                cedar,
                grants,
                side,
                config,
            };
            let r = one(&mut compiler, &ctx, p, &q, &mut queries).await?;
            results.push(r);
        }
        Ok(PropertyReport {
            solver,
            results,
            queries,
        })
    })
}

struct Ctx<'a> {
    schema: &'a Schema,
    guards: &'a [Policy],
    cedar: &'a CedarBundle,
    grants: &'a [CapabilityGrant],
    side: Side<'a>,
    config: &'a SolverConfig,
}

/// The sets a query compares: the bundle at a level (with `for any grant`'s permit), and
/// the query's own matches (with the guards).
fn sets(ctx: &Ctx<'_>, q: &Query, level: Level) -> Result<(PolicySet, PolicySet), ProveError> {
    let mut bundle = ctx.cedar.level_set(level, ctx.guards)?;
    if q.any_grant {
        let any = Policy::parse(
            Some(PolicyId::new("prove.any-grant")),
            "permit (principal, action, resource);",
        )
        .map_err(|e| ProveError::Internal(e.to_string()))?;
        bundle
            .add(any)
            .map_err(|e| ProveError::Internal(e.to_string()))?;
    }
    let scope = if q.actions.is_empty() {
        "action".to_owned()
    } else {
        let list: Vec<String> = q
            .actions
            .iter()
            .map(|a| format!("Craik::Action::{a:?}"))
            .collect();
        format!("action in [{}]", list.join(", "))
    };
    let mut conds = Vec::new();
    if let Some(p) = &q.profile {
        conds.push(format!("context.profile == {p:?}"));
    }
    if let Some(w) = &q.when {
        conds.push(format!("({w})"));
    }
    let when = if conds.is_empty() {
        String::new()
    } else {
        format!(" when {{ {} }}", conds.join(" && "))
    };
    let text = format!("permit (principal, {scope}, resource){when};");
    let matches = Policy::parse(Some(PolicyId::new("prove.query")), &text)
        .map_err(|e| ProveError::Bundle(format!("query condition: {}", escape(&e.to_string()))))?;
    let query =
        PolicySet::from_policies(std::iter::once(matches).chain(ctx.guards.iter().cloned()))
            .map_err(|e| ProveError::Internal(e.to_string()))?;
    Ok((bundle, query))
}

/// Whether `env`'s action is one the query names (itself or a family of it).
fn covers(side: Side<'_>, q: &Query, env: &RequestEnv) -> bool {
    let capability = env.action().id().unescaped();
    q.actions.is_empty()
        || q.actions
            .iter()
            .any(|a| a == capability || side.bundle.families_of(capability).iter().any(|f| f == a))
}

/// The checks a verb makes: (level, the bundle must imply the query (`true`) or be disjoint
/// from it (`false`)... expressed as which side a counterexample comes from).
fn checks(verb: Verb) -> &'static [(Level, Check)] {
    match verb {
        Verb::Deny | Verb::GrantOnly => &[(Level::NotDenied, Check::Disjoint)],
        Verb::Allow => &[(Level::Allow, Check::QueryImplies)],
        Verb::NoCleanAllow => &[(Level::Allow, Check::Disjoint)],
        Verb::Approval => &[
            (Level::Allow, Check::Disjoint),
            (Level::NotDenied, Check::QueryImplies),
        ],
    }
}

#[derive(Debug, Clone, Copy)]
enum Check {
    /// No request both matches and is let through at the level.
    Disjoint,
    /// Every matching request is let through at the level.
    QueryImplies,
}

async fn one(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    ctx: &Ctx<'_>,
    p: &Property,
    q: &Query,
    queries: &mut usize,
) -> Result<PropertyResult, ProveError> {
    let mut counterexamples = Vec::new();
    let mut covered = 0;
    let envs: Vec<RequestEnv> = envs(ctx.schema)
        .into_iter()
        .filter(|e| covers(ctx.side, q, e))
        .collect();
    if envs.is_empty() {
        return Err(ProveError::Bundle(format!(
            "property `{}`: `{}` names no action of the schema",
            escape(&p.name),
            escape(&q.actions.join(", "))
        )));
    }
    for &(level, check) in checks(q.verb) {
        let (bundle, query) = sets(ctx, q, level)?;
        for env in &envs {
            covered += 1;
            *queries += 1;
            let action = env.action().id().unescaped().to_owned();
            let (b, m) = (
                compile(&bundle, env, ctx.schema)?,
                compile(&query, env, ctx.schema)?,
            );
            let cex = run(compiler, ctx.config, check, &b, &m, &action).await?;
            if let Some(cex) = cex {
                let ok = match check {
                    Check::Disjoint => cedar_allows(&cex, &bundle) && cedar_allows(&cex, &query),
                    Check::QueryImplies => {
                        cedar_allows(&cex, &query) && !cedar_allows(&cex, &bundle)
                    }
                };
                if !ok {
                    return Err(ProveError::Unsound(format!(
                        "property `{}` on {action}: the solver's counterexample does not evaluate as it claimed under Cedar's authorizer; nothing is reported",
                        escape(&p.name)
                    )));
                }
                counterexamples.push(witness(ctx, q, level, check, action, &cex));
            }
        }
    }
    Ok(PropertyResult {
        name: p.name.clone(),
        query: p.query.clone(),
        holds: counterexamples.is_empty(),
        envs: covered,
        counterexamples,
    })
}

async fn run(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    config: &SolverConfig,
    check: Check,
    bundle: &CompiledPolicySet,
    query: &CompiledPolicySet,
    action: &str,
) -> Result<Option<Env>, ProveError> {
    match check {
        Check::Disjoint => {
            bounded(
                config.per_query,
                action,
                compiler.check_disjoint_with_counterexample_opt(bundle, query),
            )
            .await
        }
        Check::QueryImplies => {
            bounded(
                config.per_query,
                action,
                compiler.check_implies_with_counterexample_opt(query, bundle),
            )
            .await
        }
    }
}

/// Replays a property's counterexample: confirmed when the kernel's verdict breaks the
/// property as the solver said (with a grant synthesised for the witness under `for any
/// grant`).
fn witness(
    ctx: &Ctx<'_>,
    q: &Query,
    level: Level,
    check: Check,
    action: String,
    cex: &Env,
) -> Witness {
    let model = escape(&cex.to_string());
    let r = match to_request(cex) {
        Ok(r) => r,
        Err(why) => {
            return Witness {
                action,
                status: Status::Spurious(format!(
                    "no request the kernel decides maps to this model: {why}"
                )),
                request: None,
                verdict: None,
                model,
            };
        }
    };
    let mut grants = ctx.grants.to_vec();
    if q.any_grant {
        grants.extend(r.synthetic_grant());
    }
    let (status, verdict) = match r.decide(ctx.side.bundle, &grants) {
        Err(e) => (Status::Spurious(format!("replay refused: {e}")), None),
        Ok(v) => {
            let through = level.admits(v.decision);
            let broken = match check {
                Check::Disjoint => through,
                Check::QueryImplies => !through,
            };
            let status = if broken {
                Status::Confirmed
            } else {
                Status::Spurious(format!(
                    "the kernel decides it {}",
                    crate::classify::word(v.decision)
                ))
            };
            (status, Some(v))
        }
    };
    Witness {
        action,
        status,
        request: Some(r.request),
        verdict,
        model,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse() {
        let q = parse("deny repo.write, git.commit under profile automation for any grant when resource.protected == \"git\"").unwrap();
        assert_eq!(
            q,
            Query {
                verb: Verb::Deny,
                actions: vec!["repo.write".into(), "git.commit".into()],
                profile: Some("automation".into()),
                any_grant: true,
                when: Some("resource.protected == \"git\"".into()),
            }
        );
        let q = parse("grant-only shell").unwrap();
        assert_eq!(q.verb, Verb::GrantOnly);
        assert_eq!(parse("allow *").unwrap().actions, Vec::<String>::new());
    }

    #[test]
    fn bad_queries_are_refused_with_a_reason() {
        for (text, why) in [
            ("", "empty query"),
            ("can repo.read", "unknown verb `can`"),
            ("deny", "no actions"),
            ("deny repo under profile nope", "unknown profile `nope`"),
            ("deny repo for all grants", "expected `under profile NAME`"),
            ("deny repo when ", "`when` needs"),
            ("grant-only shell for any grant", "asks nothing"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.why.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn libraries_parse_and_name_the_bad_property() {
        let lib = "[[property]]\nname = \"a\"\nquery = \"deny git.force_push for any grant\"\n";
        assert_eq!(parse_library("p.toml", lib).unwrap().len(), 1);
        let bad = "[[property]]\nname = \"b\"\nquery = \"maybe repo\"\n";
        let e = parse_library("p.toml", bad).unwrap_err();
        assert!(e.to_string().contains("property `b`"), "{e}");
        assert!(parse_library("p.toml", "[[property]]\nnom = 1\n").is_err());
    }
}
