//! The Cedar inputs of one decision — principal, action, resource, context and entities —
//! described once as plain data ([`Spec`]) and built two ways:
//!
//! - [`Spec::build_public`] through cedar-policy's public API (`Entity::new`,
//!   `Context::from_pairs`, `Entities::add_entities` computing the transitive closure, and in
//!   debug builds `Request::new` checked against the schema). The reference construction: the
//!   naive baseline uses it.
//! - [`Spec::build_core`] directly as cedar-policy-core values: attribute values are literals,
//!   so nothing needs evaluating, and every ancestor set is listed transitively closed, so no
//!   closure needs computing. The fast path every sliced decision takes.
//!
//! INVARIANT: both constructions yield the same request and the same entities. Debug builds
//! (every test) build both on each sliced decision and panic on any difference
//! ([`Spec::build`]), and the sliced-equals-naive law tests compare verdicts across them.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;

use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request, RestrictedExpression,
    Schema,
};
use cedar_policy_core::ast;
use cedar_policy_core::entities::{Entities as CoreEntities, TCComputation};
use cedar_policy_core::extensions::Extensions;

/// An attribute value: only literals, so the core construction evaluates nothing.
#[derive(Debug, Clone)]
pub(crate) enum Attr<'a> {
    Str(Cow<'a, str>),
    Bool(bool),
    Long(i64),
    /// A set of entity references (`Set<Path>`, `Set<Dir>`), by id.
    Uids(Kind, Vec<String>),
    /// A Cedar `datetime`, from its literal (`2026-11-20T10:00:00.000Z`).
    Datetime(String),
}

/// The entity types a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Task,
    Runner,
    Action,
    Dir,
    Path,
    Command,
    Memory,
    Url,
    Repo,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Task => "Craik::Task",
            Kind::Runner => "Craik::Runner",
            Kind::Action => "Craik::Action",
            Kind::Dir => "Craik::Dir",
            Kind::Path => "Craik::Path",
            Kind::Command => "Craik::Command",
            Kind::Memory => "Craik::Memory",
            Kind::Url => "Craik::Url",
            Kind::Repo => "Craik::Repo",
        }
    }
}

/// One entity type, in both APIs' types.
#[derive(Debug, Clone)]
struct Type {
    public: EntityTypeName,
    core: ast::EntityType,
}

/// Entity type names, parsed once per bundle.
#[derive(Debug, Clone)]
pub(crate) struct Types {
    task: Type,
    runner: Type,
    action: Type,
    dir: Type,
    path: Type,
    command: Type,
    memory: Type,
    url: Type,
    repo: Type,
    /// The `datetime` extension constructor's name, parsed once (parsing runs Cedar's parser).
    datetime: ast::Name,
}

impl Types {
    pub(crate) fn new() -> Result<Self, String> {
        let t = |kind: Kind| {
            let public = EntityTypeName::from_str(kind.name()).map_err(|e| e.to_string())?;
            Ok::<_, String>(Type {
                core: public.as_ref().clone(),
                public,
            })
        };
        Ok(Self {
            task: t(Kind::Task)?,
            runner: t(Kind::Runner)?,
            action: t(Kind::Action)?,
            dir: t(Kind::Dir)?,
            path: t(Kind::Path)?,
            command: t(Kind::Command)?,
            memory: t(Kind::Memory)?,
            url: t(Kind::Url)?,
            repo: t(Kind::Repo)?,
            datetime: ast::Name::parse_unqualified_name("datetime").map_err(|e| e.to_string())?,
        })
    }

    fn of(&self, kind: Kind) -> &Type {
        match kind {
            Kind::Task => &self.task,
            Kind::Runner => &self.runner,
            Kind::Action => &self.action,
            Kind::Dir => &self.dir,
            Kind::Path => &self.path,
            Kind::Command => &self.command,
            Kind::Memory => &self.memory,
            Kind::Url => &self.url,
            Kind::Repo => &self.repo,
        }
    }

    fn public_uid(&self, kind: Kind, id: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(self.of(kind).public.clone(), EntityId::new(id))
    }

    fn core_uid(&self, kind: Kind, id: &str) -> ast::EntityUID {
        ast::EntityUID::from_components(self.of(kind).core.clone(), ast::Eid::new(id), None)
    }
}

/// One entity: its attributes and *every* ancestor (the set is transitively closed).
#[derive(Debug, Clone)]
pub(crate) struct EntitySpec<'a> {
    pub(crate) kind: Kind,
    pub(crate) id: Cow<'a, str>,
    pub(crate) attrs: Vec<(&'static str, Attr<'a>)>,
    pub(crate) ancestors: Vec<(Kind, Cow<'a, str>)>,
}

/// A capability's action entity and its families', prebuilt in both APIs.
#[derive(Debug, Clone)]
pub(crate) struct ActionStore {
    public: Entities,
    core: CoreEntities,
    action: ast::EntityUID,
}

impl ActionStore {
    /// `entities` must be the capability's action and its families (transitively closed).
    pub(crate) fn new(types: &Types, capability: &str, public: Entities) -> Self {
        Self {
            core: public.as_ref().clone(),
            action: types.core_uid(Kind::Action, capability),
            public,
        }
    }
}

/// Everything one Cedar evaluation needs, as plain data.
#[derive(Debug, Clone)]
pub(crate) struct Spec<'a> {
    /// The runner; its ancestors name the task.
    pub(crate) principal: EntitySpec<'a>,
    /// The capability (an action id).
    pub(crate) action: &'a str,
    pub(crate) resource: EntitySpec<'a>,
    pub(crate) context: Vec<(&'static str, Attr<'a>)>,
}

/// A request and entities ready for cedar-policy-core's authorizer.
#[derive(Debug, Clone)]
pub(crate) struct Inputs {
    pub(crate) request: ast::Request,
    pub(crate) entities: CoreEntities,
}

impl Spec<'_> {
    /// The fast construction, cross-checked against the public one in debug builds.
    pub(crate) fn build(
        &self,
        types: &Types,
        store: &ActionStore,
        schema: &Schema,
    ) -> Result<Inputs, String> {
        let fast = self.build_core(types, store)?;
        if cfg!(debug_assertions) {
            let reference = self.build_public(types, store, schema)?;
            assert_same(&fast, &reference);
        }
        Ok(fast)
    }

    /// Directly as cedar-policy-core values: no evaluation, no closure computation.
    pub(crate) fn build_core(&self, types: &Types, store: &ActionStore) -> Result<Inputs, String> {
        let entity = |spec: &EntitySpec<'_>| -> Result<Arc<ast::Entity>, String> {
            let attrs = spec
                .attrs
                .iter()
                .map(|(k, v)| Ok(((*k).into(), ast::PartialValue::Value(core_value(types, v)?))))
                .collect::<Result<Vec<_>, String>>()?;
            let ancestors: HashSet<ast::EntityUID> = spec
                .ancestors
                .iter()
                .map(|(kind, id)| types.core_uid(*kind, id))
                .collect();
            Ok(Arc::new(ast::Entity::new_with_attr_partial_value(
                types.core_uid(spec.kind, &spec.id),
                attrs,
                HashSet::new(),
                ancestors,
                [],
            )))
        };
        let principal = entity(&self.principal)?;
        let resource = entity(&self.resource)?;
        let context = self
            .context
            .iter()
            .map(|(k, v)| Ok(((*k).into(), core_value(types, v)?)))
            .collect::<Result<BTreeMap<_, _>, String>>()?;
        let request = ast::Request::new_unchecked(
            ast::EntityUIDEntry::known(principal.uid().clone(), None),
            ast::EntityUIDEntry::known(store.action.clone(), None),
            ast::EntityUIDEntry::known(resource.uid().clone(), None),
            Some(ast::Context::Value(Arc::new(context))),
        );
        // INVARIANT: ancestor sets are listed closed (the runner's names its task, which has no
        // entity; a path's names every directory above it, which have none), the new entities
        // are nobody's ancestors, and the action store was closed when the bundle was loaded.
        // Debug builds check this against the public construction, which computes the closure.
        let entities = store
            .core
            .clone()
            .add_entities(
                [principal, resource],
                None::<&cedar_policy_core::entities::NoEntitiesSchema>,
                TCComputation::AssumeAlreadyComputed,
                Extensions::none(),
            )
            .map_err(|e| e.to_string())?;
        Ok(Inputs { request, entities })
    }

    /// Through cedar-policy's public API: the reference construction.
    pub(crate) fn build_public(
        &self,
        types: &Types,
        store: &ActionStore,
        schema: &Schema,
    ) -> Result<Inputs, String> {
        let entity = |spec: &EntitySpec<'_>| {
            let attrs = spec
                .attrs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), public_value(types, v)))
                .collect();
            let parents = spec
                .ancestors
                .iter()
                .map(|(kind, id)| types.public_uid(*kind, id))
                .collect();
            Entity::new(types.public_uid(spec.kind, &spec.id), attrs, parents)
                .map_err(|e| e.to_string())
        };
        let principal = entity(&self.principal)?;
        let resource = entity(&self.resource)?;
        let context = Context::from_pairs(
            self.context
                .iter()
                .map(|(k, v)| ((*k).to_owned(), public_value(types, v))),
        )
        .map_err(|e| e.to_string())?;
        let request = Request::new(
            principal.uid(),
            types.public_uid(Kind::Action, self.action),
            resource.uid(),
            context,
            // Built from checked values; debug builds (every test) still validate it.
            if cfg!(debug_assertions) {
                Some(schema)
            } else {
                None
            },
        )
        .map_err(|e| e.to_string())?;
        let entities = store
            .public
            .clone()
            .add_entities([principal, resource], None)
            .map_err(|e| e.to_string())?;
        Ok(Inputs {
            request: request.as_ref().clone(),
            entities: entities.as_ref().clone(),
        })
    }
}

fn core_value(types: &Types, attr: &Attr<'_>) -> Result<ast::Value, String> {
    Ok(match attr {
        Attr::Str(s) => ast::Value::from(s.as_ref()),
        Attr::Bool(b) => ast::Value::from(*b),
        Attr::Long(n) => ast::Value::from(*n),
        Attr::Uids(kind, ids) => ast::Value::set(
            ids.iter()
                .map(|id| ast::Value::from(types.core_uid(*kind, id))),
            None,
        ),
        Attr::Datetime(text) => {
            let function = Extensions::all_available()
                .func(&types.datetime)
                .map_err(|e| e.to_string())?;
            match function
                .call(&[ast::Value::from(text.as_str())])
                .map_err(|e| e.to_string())?
            {
                ast::PartialValue::Value(value) => value,
                ast::PartialValue::Residual(_) => {
                    return Err(format!("datetime `{text}` did not evaluate"));
                }
            }
        }
    })
}

fn public_value(types: &Types, attr: &Attr<'_>) -> RestrictedExpression {
    match attr {
        Attr::Str(s) => RestrictedExpression::new_string(s.clone().into_owned()),
        Attr::Bool(b) => RestrictedExpression::new_bool(*b),
        Attr::Long(n) => RestrictedExpression::new_long(*n),
        Attr::Uids(kind, ids) => RestrictedExpression::new_set(
            ids.iter()
                .map(|id| RestrictedExpression::new_entity_uid(types.public_uid(*kind, id))),
        ),
        Attr::Datetime(text) => RestrictedExpression::new_datetime(text),
    }
}

/// Panics unless the two constructions agree (debug builds only call it).
#[allow(clippy::panic, reason = "a debug-build invariant check")]
fn assert_same(fast: &Inputs, reference: &Inputs) {
    let (a, b) = (&fast.request, &reference.request);
    let same_request = a.principal().uid() == b.principal().uid()
        && a.action().uid() == b.action().uid()
        && a.resource().uid() == b.resource().uid()
        && a.context() == b.context();
    if !same_request {
        panic!("core request {a} differs from the public API's {b}");
    }
    if !fast.entities.deep_eq(&reference.entities) {
        panic!(
            "core entities differ from the public API's:\n{:?}\n{:?}",
            fast.entities, reference.entities
        );
    }
}
