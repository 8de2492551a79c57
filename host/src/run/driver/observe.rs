//! The run's observer: a callback the driver calls right after it records something (an
//! event written to `events.jsonl`, a decision receipt appended to the journal), so a front
//! end shows exactly what was recorded, as it is recorded; and the runner's streamed text,
//! which is shown, never recorded. It must not print or decide anything here: what is shown,
//! and how it is escaped, is the front end's.

use std::cell::RefCell;
use std::rc::Rc;

use craik_contracts::Timestamp;
use craik_kernel::{Mode, Verdict};
use serde::Serialize;

use super::decisions::decision_name;
use super::*;

/// What the observer is told.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// An event of the run's own journal, just written to `events.jsonl`.
    Event(&'a Event),
    /// A decision receipt, just appended to the receipt journal.
    Decision(&'a DecisionNote),
    /// Text the runner streams during a step (an adapter's `text_delta` events): untrusted,
    /// not recorded anywhere, for a status line only.
    Text(&'a str),
}

/// A decision as its receipt records it.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionNote {
    pub at: Timestamp,
    /// The action's id (`action_<step>_<k>`).
    pub action: String,
    /// The runner's own label for it (untrusted).
    pub label: String,
    pub capability: String,
    pub operation: String,
    /// The target path, or the argv as JSON (untrusted, redacted).
    pub target: String,
    /// `allow`, `requires_approval` or `deny`.
    pub decision: &'static str,
    /// `enforce`, or `shadow` (decided and receipted, nothing performed).
    pub mode: &'static str,
    pub policies: Vec<String>,
    pub reasons: Vec<String>,
    /// The decision receipt's id.
    pub receipt: String,
}

impl DecisionNote {
    pub(super) fn of(
        at: Timestamp,
        action: &ActionRecord,
        verdict: &Verdict,
        receipt: &str,
    ) -> Self {
        Self {
            at,
            action: action.id.clone(),
            label: action.proposed.id.clone(),
            capability: action.proposed.capability.clone(),
            operation: action.proposed.operation.clone(),
            target: action.shown(),
            decision: decision_name(verdict.decision),
            mode: match verdict.mode {
                Mode::Enforce => "enforce",
                Mode::Shadow => "shadow",
            },
            policies: verdict.determining.clone(),
            reasons: verdict.reasons.clone(),
            receipt: receipt.to_owned(),
        }
    }
}

/// The callback a front end installs with [`Host::observe`].
pub type Observer = Box<dyn FnMut(Observed<'_>)>;

/// The observer, shared by the host and (for streamed text) its runner.
pub(super) type Shared = Rc<RefCell<Observer>>;

/// Calls the observer; a call made while it is already running (it cannot be, the driver is
/// single-threaded) is dropped rather than panicking.
pub(super) fn tell(observer: &Shared, what: Observed<'_>) {
    if let Ok(mut f) = observer.try_borrow_mut() {
        f(what);
    }
}

impl Host {
    /// Installs `observer`: from now on it is called right after each event is written to
    /// `events.jsonl` and each decision receipt is appended to the journal (in the order they
    /// are written), and with the text the runner streams during a step.
    pub fn observe(&mut self, observer: Observer) {
        let shared: Shared = Rc::new(RefCell::new(observer));
        let for_runner = Rc::clone(&shared);
        self.runner.stream_text(Box::new(move |text| {
            tell(&for_runner, Observed::Text(text))
        }));
        self.observer = Some(shared);
    }

    /// Tells the observer about a decision receipt just appended.
    pub(super) fn observe_decision(&self, note: impl FnOnce() -> DecisionNote) {
        if let Some(observer) = &self.observer {
            tell(observer, Observed::Decision(&note()));
        }
    }

    /// Tells the observer about events just written.
    pub(super) fn observe_events(&mut self, events: Vec<Event>) {
        if let Some(observer) = &self.observer {
            for event in &events {
                tell(observer, Observed::Event(event));
            }
        }
    }
}
