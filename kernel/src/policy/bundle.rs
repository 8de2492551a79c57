//! Loading a policy bundle: the Cedar schema, the `.cedar` files, strict validation.
//!
//! Owns: turning source text into a validated, indexed set of policies named by their `@id`,
//! and the stable hash of what was loaded. Refuses to load on any parse error, validation
//! error or validation warning, on a policy without `@id`, and on a duplicate `@id`; every
//! refusal names `file:line:column`. Must not: read files (callers pass text in).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;

use cedar_policy::{
    ActionConstraint, Effect, Entities, EntityUid, Policy, PolicyId, PolicySet, Schema,
    ValidationMode, Validator,
};
use craik_contracts::PolicyProfile;
use sha2::{Digest, Sha256};

use crate::policy::eval::Slice;

/// One source file, by the name diagnostics should use for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Shown in diagnostics and hashed: use a stable relative name (`base/intent.cedar`).
    pub name: String,
    /// UTF-8 text.
    pub text: String,
}

impl SourceFile {
    /// A source file.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            text: text.into(),
        }
    }
}

/// A problem at a place in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// File name as given in [`SourceFile::name`].
    pub file: String,
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// 1-based column (0 when unknown).
    pub column: usize,
    /// One line: what is wrong.
    pub message: String,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.column, self.message
            )
        }
    }
}

/// The bundle was refused; every problem found is listed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("policy bundle refused: {}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct LoadError {
    /// In file order.
    pub problems: Vec<Located>,
}

/// What the kernel knows about one loaded policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyInfo {
    /// The `@id`.
    pub id: String,
    /// The file it came from.
    pub file: String,
    /// 1-based line of its first token.
    pub line: usize,
    /// The `@reason`, shown to operators.
    pub reason: Option<String>,
    /// `permit` or `forbid`.
    pub forbid: bool,
    /// An approval rule (`@approval("required")`), evaluated after the decision.
    pub approval: bool,
}

/// A loaded, validated policy bundle.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub(crate) schema: Schema,
    /// Built once: validating a compiled grant must not clone the schema each time.
    pub(crate) validator: std::sync::Arc<Validator>,
    /// Per capability: its action entity and its families', added to every request's entities.
    pub(crate) action_stores: HashMap<String, crate::policy::inputs::ActionStore>,
    /// Leaf capabilities (actions that are not groups), e.g. `repo.write.docs`.
    pub(crate) capabilities: BTreeSet<String>,
    /// Ancestors (families) of each capability, outermost first.
    pub(crate) families: HashMap<String, Vec<String>>,
    pub(crate) info: BTreeMap<String, PolicyInfo>,
    /// Decision policies, sliced by capability and profile.
    pub(crate) decision_slices: HashMap<SliceKey, HashMap<String, Slice>>,
    /// Approval rules, sliced by capability and profile.
    pub(crate) approval_slices: HashMap<SliceKey, HashMap<String, Slice>>,
    /// Entity type names, parsed once.
    pub(crate) types: crate::policy::inputs::Types,
    /// Every decision policy (no approval rules), for Cedar-level tests.
    pub(crate) decision_all: PolicySet,
    /// Every policy (decision and approval), for lints.
    pub(crate) all: Vec<Policy>,
    hash: String,
}

/// Reserved `@id` prefix: compiled grants are named `grant.<grant id>`.
pub const GRANT_ID_PREFIX: &str = "grant.";

impl Bundle {
    /// Loads `schema` and `policies` (file order does not matter: ids are what counts).
    pub fn load(schema: &SourceFile, policies: &[SourceFile]) -> Result<Self, LoadError> {
        let mut problems = Vec::new();
        let schema_value = match Schema::from_cedarschema_str(&schema.text) {
            Ok((value, warnings)) => {
                for warning in warnings {
                    problems.push(locate(&schema.name, &schema.text, &warning, "warning: "));
                }
                Some(value)
            }
            Err(e) => {
                problems.push(locate(&schema.name, &schema.text, &e, ""));
                None
            }
        };

        let mut info = BTreeMap::new();
        let mut all = Vec::new();
        let mut sources: HashMap<String, &SourceFile> = HashMap::new();
        for file in policies {
            sources.insert(file.name.clone(), file);
            load_file(file, &mut info, &mut all, &mut problems);
        }

        let Some(schema_value) = schema_value else {
            return Err(LoadError { problems });
        };
        if all.is_empty() && problems.is_empty() {
            problems.push(Located {
                file: "<bundle>".into(),
                line: 0,
                column: 0,
                message: "no policies loaded; an empty policy set would deny everything silently"
                    .into(),
            });
        }

        let mut set = PolicySet::new();
        for policy in &all {
            if let Err(e) = set.add(policy.clone()) {
                problems.push(Located {
                    file: "<bundle>".into(),
                    line: 0,
                    column: 0,
                    message: e.to_string(),
                });
            }
        }
        let result = Validator::new(schema_value.clone()).validate(&set, ValidationMode::Strict);
        for e in result.validation_errors() {
            problems.push(locate_policy(
                &info,
                &sources,
                e.policy_id().to_string(),
                e,
                "",
            ));
        }
        for w in result.validation_warnings() {
            problems.push(locate_policy(
                &info,
                &sources,
                w.policy_id().to_string(),
                w,
                "warning: ",
            ));
        }
        if !problems.is_empty() {
            return Err(LoadError {
                problems: dedupe(problems),
            });
        }

        let action_entities = schema_value.action_entities().map_err(|e| LoadError {
            problems: vec![Located {
                file: schema.name.clone(),
                line: 0,
                column: 0,
                message: e.to_string(),
            }],
        })?;
        let groups: BTreeSet<String> = schema_value
            .action_groups()
            .map(|a| a.id().unescaped().to_owned())
            .collect();
        let mut capabilities = BTreeSet::new();
        let mut families = HashMap::new();
        for action in schema_value.actions() {
            let name = action.id().unescaped().to_owned();
            if groups.contains(&name) {
                continue;
            }
            let mut ancestors: Vec<String> = action_entities
                .ancestors(action)
                .map(|it| it.map(|a| a.id().unescaped().to_owned()).collect())
                .unwrap_or_default();
            // Outermost family first: `repo`, then `repo.write`.
            ancestors.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
            families.insert(name.clone(), ancestors);
            capabilities.insert(name);
        }

        let types = crate::policy::inputs::Types::new().map_err(|message| LoadError {
            problems: vec![Located {
                file: schema.name.clone(),
                line: 0,
                column: 0,
                message,
            }],
        })?;
        let mut action_stores = HashMap::new();
        for capability in &capabilities {
            let wanted: Vec<&str> = std::iter::once(capability.as_str())
                .chain(
                    families
                        .get(capability)
                        .into_iter()
                        .flatten()
                        .map(String::as_str),
                )
                .collect();
            let entities = action_entities
                .iter()
                .filter(|e| wanted.contains(&e.uid().id().unescaped()))
                .cloned();
            let store = Entities::from_entities(entities, None).map_err(|e| LoadError {
                problems: vec![Located {
                    file: schema.name.clone(),
                    line: 0,
                    column: 0,
                    message: e.to_string(),
                }],
            })?;
            action_stores.insert(
                capability.clone(),
                crate::policy::inputs::ActionStore::new(&types, capability, store),
            );
        }
        let mut decision_slices: HashMap<SliceKey, HashMap<String, Slice>> = HashMap::new();
        let mut approval_slices: HashMap<SliceKey, HashMap<String, Slice>> = HashMap::new();
        let guards: HashMap<String, Option<Guard>> =
            all.iter().map(|p| (p.id().to_string(), guard(p))).collect();
        let keys = PolicyProfile::ALL.iter().flat_map(|profile| {
            (0..1u8 << INTENT_FLAGS.len()).map(move |facts| SliceKey {
                profile: *profile,
                facts,
            })
        });
        for (capability, key) in capabilities
            .iter()
            .flat_map(|c| keys.clone().map(move |k| (c, k)))
        {
            let profile = key.profile;
            let ancestors = families
                .get(capability)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let profile_name = profile.as_str();
            let mut decision = PolicySet::new();
            let mut approval = PolicySet::new();
            for policy in &all {
                if !applies_to(&policy.action_constraint(), capability, ancestors) {
                    continue;
                }
                // A policy guarded by another profile, or by an intent fact that is false under
                // this key, can neither match nor error here.
                match guards.get(&policy.id().to_string()) {
                    Some(Some(Guard::Profile(p))) if p != profile_name => continue,
                    Some(Some(Guard::Flag(bit))) if key.facts & (1 << bit) == 0 => continue,
                    _ => {}
                }
                let is_approval = info
                    .get(&policy.id().to_string())
                    .is_some_and(|i: &PolicyInfo| i.approval);
                let target = if is_approval {
                    &mut approval
                } else {
                    &mut decision
                };
                // Ids are unique, so adding cannot fail.
                let _ = target.add(policy.clone());
            }
            decision_slices
                .entry(key)
                .or_default()
                .insert(capability.clone(), Slice::for_known_action(decision));
            approval_slices
                .entry(key)
                .or_default()
                .insert(capability.clone(), Slice::for_known_action(approval));
        }

        let mut decision_all = PolicySet::new();
        for policy in &all {
            if !info
                .get(&policy.id().to_string())
                .is_some_and(|i| i.approval)
            {
                let _ = decision_all.add(policy.clone());
            }
        }
        let hash = bundle_hash(schema, policies);

        Ok(Self {
            types,
            validator: std::sync::Arc::new(Validator::new(schema_value.clone())),
            action_stores,
            schema: schema_value,
            capabilities,
            families,
            info,
            decision_slices,
            approval_slices,
            decision_all,
            all,
            hash,
        })
    }

    /// `sha256:<hex>` over the schema's and every policy file's content, independent of file
    /// names, directories and order (see [`policy_set_hash`]). Goes into every receipt.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The policies, by `@id`.
    pub fn policies(&self) -> impl Iterator<Item = &PolicyInfo> {
        self.info.values()
    }

    /// One policy's details.
    pub fn policy(&self, id: &str) -> Option<&PolicyInfo> {
        self.info.get(id)
    }

    /// The capabilities (leaf actions) the schema declares.
    pub fn capabilities(&self) -> impl Iterator<Item = &str> {
        self.capabilities.iter().map(String::as_str)
    }

    /// True when `capability` is declared.
    pub fn knows(&self, capability: &str) -> bool {
        self.capabilities.contains(capability)
    }

    /// True when `entry` is a declared capability or a family of declared ones (`repo.write`,
    /// `shell`): what a policy-envelope entry may name.
    pub fn knows_entry(&self, entry: &str) -> bool {
        self.knows(entry)
            || self.capabilities.iter().any(|c| {
                c.strip_prefix(entry)
                    .is_some_and(|rest| rest.starts_with('.') && !entry.is_empty())
            })
    }

    /// The first policy-envelope entry that names no declared capability or family, with its
    /// field (`allowed_capabilities`, `denied_capabilities`, `approval_required`). Such an
    /// entry matches nothing: `repo.write.doc` under `approval_required` let the action run
    /// without the approval (issue 30). Refused at load; every decision denies while one
    /// is there.
    pub fn undeclared_envelope_entry<'a>(
        &self,
        rules: &'a crate::policy::EnvelopeRules,
    ) -> Option<(&'static str, &'a str)> {
        [
            ("allowed_capabilities", &rules.allowed),
            ("denied_capabilities", &rules.denied),
            ("approval_required", &rules.approval_required),
        ]
        .into_iter()
        .find_map(|(field, list)| {
            list.iter()
                .find(|e| !self.knows_entry(e))
                .map(|e| (field, e.as_str()))
        })
    }

    /// The families (action groups) `capability` belongs to.
    pub fn families_of(&self, capability: &str) -> &[String] {
        self.families
            .get(capability)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

/// The outcome of a raw Cedar evaluation (for Cedar's own `run-tests` format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawOutcome {
    /// Cedar's decision.
    pub allow: bool,
    /// Determining policy ids (`@id`s), sorted.
    pub reason: Vec<String>,
    /// Number of policies that failed to evaluate.
    pub errors: usize,
    /// Each evaluation error, one line worded as Cedar words it (`error while evaluating
    /// policy `…`: …`), sorted.
    pub error_messages: Vec<String>,
}

impl Bundle {
    /// Evaluates a Cedar request exactly as Cedar would, against every decision policy (not
    /// the approval rules): the semantics of `cedar run-tests`. Entity and context JSON use
    /// Cedar's formats; uids are written `Type::"id"`.
    pub fn evaluate_raw(
        &self,
        principal: &str,
        action: &str,
        resource: &str,
        context: serde_json::Value,
        entities: serde_json::Value,
    ) -> Result<RawOutcome, String> {
        use cedar_policy::{Context, Decision, Entities, Request};
        let uid = |s: &str| EntityUid::from_str(s).map_err(|e| error_chain(&e));
        let (p, a, r) = (uid(principal)?, uid(action)?, uid(resource)?);
        let context = Context::from_json_value(context, Some((&self.schema, &a)))
            .map_err(|e| error_chain(&e))?;
        let request =
            Request::new(p, a, r, context, Some(&self.schema)).map_err(|e| error_chain(&e))?;
        let entities =
            Entities::from_json_value(entities, Some(&self.schema)).map_err(|e| error_chain(&e))?;
        let evaluation = crate::policy::eval::evaluate_with_authorizer(
            &self.decision_all,
            &crate::policy::inputs::Inputs {
                request: request.as_ref().clone(),
                entities: entities.as_ref().clone(),
            },
        );
        Ok(RawOutcome {
            allow: evaluation.decision == Decision::Allow,
            reason: evaluation.reason,
            errors: evaluation.errors.len(),
            error_messages: evaluation.errors.into_iter().map(|(_, m)| m).collect(),
        })
    }
}

/// Sorts problems by place and folds repeats: Cedar's validator reports one error per request
/// environment (every action a policy could apply to) at the same place.
fn dedupe(mut problems: Vec<Located>) -> Vec<Located> {
    problems.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    let mut out: Vec<(Located, usize)> = Vec::new();
    for p in problems {
        match out.last_mut() {
            Some((last, n))
                if last.line != 0
                    && (&last.file, last.line, last.column) == (&p.file, p.line, p.column) =>
            {
                *n += 1
            }
            _ => out.push((p, 1)),
        }
    }
    out.into_iter()
        .map(|(mut p, n)| {
            if n > 1 {
                p.message
                    .push_str(&format!(" (and {} more like it at this place)", n - 1));
            }
            p
        })
        .collect()
}

/// Which slice a request evaluates: its profile and which intent-lock facts are true.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SliceKey {
    pub(crate) profile: PolicyProfile,
    /// Bit `i` set when the context attribute `INTENT_FLAGS[i]` is true.
    pub(crate) facts: u8,
}

/// Boolean context attributes policies may be guarded by (bit order of [`SliceKey::facts`]).
pub(crate) const INTENT_FLAGS: [&str; 3] =
    ["intent_out_of_scope", "intent_outside_scope", "intent_stop"];

/// What a policy's first condition requires before anything else is evaluated.
enum Guard {
    /// `context.profile == "<name>"`.
    Profile(String),
    /// `context.<flag>` for one of [`INTENT_FLAGS`].
    Flag(u8),
}

/// The guard of a policy: its first condition is a `when` whose leftmost conjunct is
/// `context.profile == "<name>"` or `context.<intent flag>`. Cedar evaluates that conjunct
/// first and stops when it is false, so where it is false the policy neither matches nor
/// errors, and leaving it out of that slice changes no verdict (a law test checks this).
fn guard(policy: &Policy) -> Option<Guard> {
    let est = policy.to_json().ok()?;
    let first = est.get("conditions")?.as_array()?.first()?;
    if first.get("kind")?.as_str()? != "when" {
        return None;
    }
    let mut expr = first.get("body")?;
    while let Some(and) = expr.get("&&") {
        expr = and.get("left")?;
    }
    let context_attr = |e: &serde_json::Value| -> Option<String> {
        let attr = e.get(".")?;
        (attr.get("left")?.get("Var")?.as_str()? == "context")
            .then(|| attr.get("attr")?.as_str().map(str::to_owned))?
    };
    if let Some(attr) = context_attr(expr) {
        let bit = INTENT_FLAGS.iter().position(|f| *f == attr)?;
        return u8::try_from(bit).ok().map(Guard::Flag);
    }
    let eq = expr.get("==")?;
    if context_attr(eq.get("left")?)? != "profile" {
        return None;
    }
    eq.get("right")?
        .get("Value")?
        .as_str()
        .map(|p| Guard::Profile(p.to_owned()))
}

/// The upper time bounds a policy states as conjuncts of its conditions:
/// `when { ... && context.now < datetime("...") }` (or `<=`), `unless { context.now >=
/// datetime("...") }` (or `>`), as (milliseconds since the epoch, the literal).
pub(crate) fn upper_time_bounds(policy: &Policy) -> Vec<(i64, String)> {
    let Ok(est) = policy.to_json() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for condition in est
        .get("conditions")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
    {
        // `when { context.now < X }` and `unless { context.now >= X }` both end at X.
        // (`unless { A || B }` is `when { !A && !B }`: there the disjuncts bound.)
        let (ops, split): (&[&str], &str) = match condition.get("kind").and_then(|k| k.as_str()) {
            Some("when") => (&["<", "<="], "&&"),
            Some("unless") => (&[">=", ">"], "||"),
            _ => continue,
        };
        let mut stack: Vec<&serde_json::Value> = condition.get("body").into_iter().collect();
        while let Some(expr) = stack.pop() {
            if let Some(both) = expr.get(split) {
                stack.extend(both.get("left"));
                stack.extend(both.get("right"));
                continue;
            }
            for op in ops {
                let Some(cmp) = expr.get(*op) else { continue };
                let is_now = cmp.get("left").and_then(|l| l.get(".")).is_some_and(|dot| {
                    dot.get("left")
                        .and_then(|v| v.get("Var"))
                        .and_then(|v| v.as_str())
                        == Some("context")
                        && dot.get("attr").and_then(|a| a.as_str()) == Some("now")
                });
                if !is_now {
                    continue;
                }
                let literal = cmp
                    .get("right")
                    .and_then(|r| r.get("datetime"))
                    .and_then(|args| args.as_array())
                    .and_then(|args| args.first())
                    .and_then(|a| a.get("Value"))
                    .and_then(|v| v.as_str());
                if let Some(text) = literal
                    && let Some(ms) = datetime_millis(text)
                {
                    out.push((ms, text.to_owned()));
                }
            }
        }
    }
    out
}

/// Milliseconds since the epoch of a Cedar `datetime` literal (`2026-11-21`,
/// `2026-11-21T09:00:00Z`, with optional `.SSS` and `+hhmm` / `-hhmm`).
pub(crate) fn datetime_millis(text: &str) -> Option<i64> {
    let date = time::macros::format_description!("[year]-[month]-[day]");
    if let Ok(d) = time::Date::parse(text, &date) {
        return Some(d.midnight().assume_utc().unix_timestamp() * 1000);
    }
    let formats = [
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z"),
        time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ),
    ];
    for f in formats {
        if let Ok(t) = time::PrimitiveDateTime::parse(text, &f) {
            let t = t.assume_utc();
            return Some(t.unix_timestamp() * 1000 + i64::from(t.millisecond()));
        }
    }
    let offsets = [
        time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory][offset_minute]"
        ),
        time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3][offset_hour sign:mandatory][offset_minute]"
        ),
    ];
    for f in offsets {
        if let Ok(t) = time::OffsetDateTime::parse(text, &f) {
            return Some(t.unix_timestamp() * 1000 + i64::from(t.millisecond()));
        }
    }
    None
}

/// An error and its sources, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    craik_contracts::one_line(&text)
}

fn applies_to(constraint: &ActionConstraint, capability: &str, ancestors: &[String]) -> bool {
    let covers = |uid: &EntityUid| {
        let name = uid.id().unescaped();
        name == capability || ancestors.iter().any(|a| a == name)
    };
    match constraint {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => uid.id().unescaped() == capability,
        ActionConstraint::In(uids) => uids.iter().any(covers),
    }
}

fn load_file(
    file: &SourceFile,
    info: &mut BTreeMap<String, PolicyInfo>,
    all: &mut Vec<Policy>,
    problems: &mut Vec<Located>,
) {
    let parsed = match PolicySet::from_str(&file.text) {
        Ok(set) => set,
        Err(e) => {
            problems.push(locate(&file.name, &file.text, &e, ""));
            return;
        }
    };
    if parsed.templates().next().is_some() {
        problems.push(Located {
            file: file.name.clone(),
            line: 0,
            column: 0,
            message: "templates (policies with ?principal or ?resource slots) are not supported in policy files".into(),
        });
    }
    let starts = policy_starts(&file.text);
    let mut ordered: Vec<&Policy> = parsed.policies().collect();
    ordered.sort_by_key(|p| ordinal(p.id()));
    for policy in ordered {
        let offset = starts.get(&policy.id().to_string()).copied().unwrap_or(0);
        let (line, column) = line_col(&file.text, offset);
        let at = |message: String| Located {
            file: file.name.clone(),
            line,
            column,
            message,
        };
        let Some(id) = policy.annotation("id").map(str::to_owned) else {
            problems.push(at(
                "policy has no @id annotation; every policy needs a unique @id(\"area.rule\")"
                    .into(),
            ));
            continue;
        };
        if id.is_empty() || id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            problems.push(at(format!(
                "invalid @id `{}`: must be non-empty without spaces",
                craik_contracts::Truncated(&id)
            )));
            continue;
        }
        if id.starts_with(GRANT_ID_PREFIX) {
            problems.push(at(format!("@id `{id}` uses the prefix `{GRANT_ID_PREFIX}`, reserved for compiled capability grants")));
            continue;
        }
        if let Some(first) = info.get(&id) {
            problems.push(at(format!(
                "duplicate @id `{id}`, first defined at {}:{}",
                first.file, first.line
            )));
            continue;
        }
        let approval = match policy.annotation("approval") {
            None => false,
            Some("required") => true,
            Some(other) => {
                problems.push(at(format!(
                    "@approval must be \"required\", found `{}`",
                    craik_contracts::Truncated(other)
                )));
                continue;
            }
        };
        let forbid = policy.effect() == Effect::Forbid;
        if approval && forbid {
            problems.push(at(format!(
                "approval rule `{id}` must be a permit; a forbid cannot require approval"
            )));
            continue;
        }
        info.insert(
            id.clone(),
            PolicyInfo {
                id: id.clone(),
                file: file.name.clone(),
                line,
                reason: policy.annotation("reason").map(str::to_owned),
                forbid,
                approval,
            },
        );
        all.push(policy.new_id(PolicyId::new(id)));
    }
}

/// `policy7` → 7, so policies keep file order.
fn ordinal(id: &PolicyId) -> usize {
    id.to_string()
        .strip_prefix("policy")
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Byte offset of each policy, by the id Cedar gives it when parsing the file (`policyN`).
fn policy_starts(text: &str) -> HashMap<String, usize> {
    match cedar_policy_core::parser::parse_policyset(text) {
        Ok(set) => set
            .policies()
            .filter_map(|p| p.loc().map(|loc| (p.id().to_string(), loc.start())))
            .collect(),
        Err(_) => HashMap::new(),
    }
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let prefix = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = prefix.matches('\n').count() + 1;
    let column = prefix.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn locate(file: &str, text: &str, diagnostic: &dyn miette::Diagnostic, prefix: &str) -> Located {
    let offset = diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|l| l.offset());
    let (line, column) = offset.map_or((0, 0), |o| line_col(text, o));
    let mut message = format!("{prefix}{diagnostic}");
    if let Some(help) = diagnostic.help() {
        message.push_str(&format!(" (help: {help})"));
    }
    Located {
        file: file.to_owned(),
        line,
        column,
        message: craik_contracts::one_line(&message),
    }
}

fn locate_policy(
    info: &BTreeMap<String, PolicyInfo>,
    sources: &HashMap<String, &SourceFile>,
    id: String,
    diagnostic: &dyn miette::Diagnostic,
    prefix: &str,
) -> Located {
    match info
        .get(&id)
        .and_then(|i| sources.get(&i.file).map(|s| (i, *s)))
    {
        Some((policy, source)) => {
            let mut located = locate(&source.name, &source.text, diagnostic, prefix);
            if located.line == 0 {
                located.line = policy.line;
                located.column = 1;
            }
            // Issue 19: `context.now` was epoch seconds (a Long) before it became a datetime.
            if located.message.contains("datetime") && located.message.contains("Long") {
                located.message.push_str(
                    " (help: `context.now` is a Cedar datetime; compare it with `datetime(\"2026-12-01T00:00:00Z\")`, not with epoch seconds)",
                );
            }
            located
        }
        None => Located {
            file: "<bundle>".into(),
            line: 0,
            column: 0,
            message: craik_contracts::one_line(&format!("{prefix}{diagnostic}")),
        },
    }
}

/// The policy-set hash, content-addressed per file (`craik.policy_set/2`): the SHA-256 of
///
/// ```text
/// craik.policy_set/2\n
/// schema <sha256 hex of the schema text>\n
/// policy <sha256 hex of one policy file's text>\n    (one line per file, sorted)
/// ```
///
/// File names and directories take no part: the same files hash the same wherever they sit
/// (embedded, `policies/`, a custom directory under any name) and in any order.
/// INVARIANT: a change to any byte of any file changes the hash.
pub fn policy_set_hash(schema: &str, policies: &[&str]) -> String {
    let mut lines: Vec<String> = policies
        .iter()
        .map(|text| format!("policy {}\n", hex(&Sha256::digest(text.as_bytes()))))
        .collect();
    lines.sort();
    let mut hasher = Sha256::new();
    hasher.update(b"craik.policy_set/2\n");
    hasher.update(format!("schema {}\n", hex(&Sha256::digest(schema.as_bytes()))).as_bytes());
    for line in &lines {
        hasher.update(line.as_bytes());
    }
    format!("sha256:{}", hex(&hasher.finalize()))
}

fn bundle_hash(schema: &SourceFile, policies: &[SourceFile]) -> String {
    let texts: Vec<&str> = policies.iter().map(|f| f.text.as_str()).collect();
    policy_set_hash(&schema.text, &texts)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Both nibbles are below 16, so `from_digit` always succeeds.
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0x0f), 16).unwrap_or('0'));
    }
    out
}
