//! The governed loop as a state machine over `craik.task_run`.
//!
//! Sans-io: the host asks [`RunLoop::gate`] before every runner request, reports each step
//! result with [`RunLoop::accept`], and ends the run with [`RunLoop::halt`]. The machine owns
//! the phase order (plan → act → observe → evaluate → continue | stop), the iteration ceiling
//! and the wall-clock budget; the runner only answers for the phase it was asked.
//!
//! Laws (property-tested): a terminal run never changes again; `iteration` never exceeds
//! `max_iterations`; the runner is never asked for a step once the ceiling or the budget is
//! reached; `ended_at` is set exactly when the status is terminal.

use craik_contracts::{Phase, ResultStatus, TaskRun, TaskRunStatus, Timestamp};
use time::{Duration, OffsetDateTime};

/// What the runner's evaluate step asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Continue,
    Stop,
}

/// The answer to "may the runner be asked for another step?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Ask the runner for this phase.
    Ask(Phase),
    /// The run must stop first, with this status and reason.
    Stop(TaskRunStatus, String),
    /// The run is already over.
    Over,
}

/// A step result the machine refuses (the host fails the run with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoopError {
    #[error("the run is {0}; it takes no more steps")]
    Terminal(&'static str),
    #[error("the run is {0}, not running")]
    NotRunning(&'static str),
    #[error("step answered phase `{got}` but `{expected}` was asked")]
    WrongPhase {
        expected: &'static str,
        got: &'static str,
    },
    #[error("evaluate must say `continue` or `stop`")]
    NoNext,
}

/// True for completed, blocked, failed and interrupted.
pub fn is_terminal(status: TaskRunStatus) -> bool {
    matches!(
        status,
        TaskRunStatus::Completed
            | TaskRunStatus::Blocked
            | TaskRunStatus::Failed
            | TaskRunStatus::Interrupted
    )
}

/// One run's state and its transitions.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLoop {
    run: TaskRun,
    budget: Option<Duration>,
    /// Time the run spent parked waiting for a person (not counted against the budget).
    paused: Duration,
}

impl RunLoop {
    /// Wraps a run (new or recovered); `budget` bounds its wall-clock time from `started_at`.
    pub fn new(run: TaskRun, budget: Option<Duration>) -> Self {
        Self {
            run,
            budget,
            paused: Duration::ZERO,
        }
    }

    /// Credits time the run spent waiting for a person (parked for an approval, from its
    /// `parked` to its `reopened`): it does not count against the wall-clock budget.
    /// A negative span (a clock that ran backwards) credits nothing.
    pub fn credit_wait(&mut self, waited: Duration) {
        if waited.is_positive() {
            self.paused = self.paused.saturating_add(waited);
        }
    }

    /// Wall-clock time the run has used by `now`: since `started_at`, waits for people
    /// excluded, never negative.
    pub fn wall_clock_used(&self, now: OffsetDateTime) -> Duration {
        let end = self.run.ended_at.map_or(now, |e| e.get());
        let used = (end - self.run.started_at.get()).saturating_sub(self.paused);
        if used.is_negative() {
            Duration::ZERO
        } else {
            used
        }
    }

    /// What is left of the wall-clock budget at `now` (`None`: no budget).
    pub fn wall_clock_left(&self, now: OffsetDateTime) -> Option<Duration> {
        self.budget.map(|b| {
            let left = b.saturating_sub(self.wall_clock_used(now));
            if left.is_negative() {
                Duration::ZERO
            } else {
                left
            }
        })
    }

    /// The contract record, as it is persisted.
    pub fn run(&self) -> &TaskRun {
        &self.run
    }

    /// pending → running (a parked, blocked run may also be reopened by [`RunLoop::reopen`]).
    pub fn start(&mut self, now: OffsetDateTime) -> Result<(), LoopError> {
        match self.run.status {
            TaskRunStatus::Pending => {
                self.run.status = TaskRunStatus::Running;
                self.touch(now);
                Ok(())
            }
            TaskRunStatus::Running => Ok(()),
            other => Err(LoopError::NotRunning(other.as_str())),
        }
    }

    /// A run parked as blocked (awaiting approval, or interrupted by a crash) is running again.
    pub fn reopen(&mut self, now: OffsetDateTime) {
        if self.run.ended_at.is_some() {
            return; // an ended run stays ended
        }
        self.run.status = TaskRunStatus::Running;
        self.run.ended_at = None;
        self.run.stop_reason = None;
        self.touch(now);
    }

    /// Before every runner request: the iteration ceiling and the budget.
    pub fn gate(&self, now: OffsetDateTime) -> Gate {
        if is_terminal(self.run.status) {
            return Gate::Over;
        }
        if self.run.iteration >= self.run.max_iterations {
            return Gate::Stop(
                TaskRunStatus::Interrupted,
                format!(
                    "iteration ceiling: {} of max_iterations {} done",
                    self.run.iteration, self.run.max_iterations
                ),
            );
        }
        if let Some(budget) = self.budget {
            let spent = self.wall_clock_used(now);
            if spent >= budget {
                return Gate::Stop(
                    TaskRunStatus::Interrupted,
                    format!(
                        "wall-clock budget of {}s spent ({}s)",
                        budget.whole_seconds(),
                        spent.whole_seconds()
                    ),
                );
            }
        }
        Gate::Ask(self.run.phase)
    }

    /// Records the runner's answer for the current phase and moves on. Returns the gate for the
    /// next step (the host stops the run when it says so).
    pub fn accept(
        &mut self,
        phase: Phase,
        status: ResultStatus,
        next: Option<Next>,
        now: OffsetDateTime,
    ) -> Result<Gate, LoopError> {
        if is_terminal(self.run.status) {
            return Err(LoopError::Terminal(self.run.status.as_str()));
        }
        if self.run.status != TaskRunStatus::Running {
            return Err(LoopError::NotRunning(self.run.status.as_str()));
        }
        if phase != self.run.phase {
            return Err(LoopError::WrongPhase {
                expected: self.run.phase.as_str(),
                got: phase.as_str(),
            });
        }
        match status {
            ResultStatus::Blocked => {
                self.halt(
                    TaskRunStatus::Blocked,
                    format!("runner reported blocked in {}", phase.as_str()),
                    now,
                );
                return Ok(Gate::Over);
            }
            ResultStatus::Failed => {
                self.halt(
                    TaskRunStatus::Failed,
                    format!("runner reported failure in {}", phase.as_str()),
                    now,
                );
                return Ok(Gate::Over);
            }
            ResultStatus::Completed | ResultStatus::Partial => {}
        }
        self.run.phase = match phase {
            Phase::Plan => Phase::Act,
            Phase::Act => Phase::Observe,
            Phase::Observe => Phase::Evaluate,
            Phase::Evaluate => match next.ok_or(LoopError::NoNext)? {
                Next::Stop if status == ResultStatus::Completed => {
                    self.run.phase = Phase::Stop;
                    self.halt(
                        TaskRunStatus::Completed,
                        "runner evaluated the task as done".into(),
                        now,
                    );
                    return Ok(Gate::Over);
                }
                Next::Stop => {
                    self.run.phase = Phase::Stop;
                    self.halt(
                        TaskRunStatus::Interrupted,
                        "runner stopped with partial work".into(),
                        now,
                    );
                    return Ok(Gate::Over);
                }
                Next::Continue => {
                    self.run.iteration = self.run.iteration.saturating_add(1);
                    Phase::Plan
                }
            },
            Phase::Continue => Phase::Plan,
            Phase::Stop => return Err(LoopError::Terminal("stopped")),
        };
        self.touch(now);
        Ok(self.gate(now))
    }

    /// Ends the run (idempotent on an ended run: the first ending stands). A parked run
    /// (blocked, not ended) can be ended.
    pub fn halt(&mut self, status: TaskRunStatus, reason: String, now: OffsetDateTime) {
        if self.run.ended_at.is_some() {
            return;
        }
        self.run.status = status;
        self.run.stop_reason = Some(reason);
        self.touch(now);
        self.run.ended_at = Some(self.run.updated_at);
    }

    /// Restores the ending the run's record names (its signed closing receipt, or the
    /// `halted` event that was written with it): unlike [`RunLoop::halt`] it replaces an
    /// ending the replayed steps reached, because the host may have refused that completion
    /// ([`RunLoop::refuse_completion`]) before it recorded the halt.
    pub fn restore_end(&mut self, status: TaskRunStatus, reason: String, now: OffsetDateTime) {
        self.run.status = status;
        self.run.stop_reason = Some(reason);
        if self.run.ended_at.is_none() {
            self.touch(now);
            self.run.ended_at = Some(self.run.updated_at);
        }
    }

    /// A run the loop would end `completed` whose host-side obligations are unmet (a side
    /// effect failed, a required verification never passed) ends with `status` and `reason`
    /// instead: no claiming work that did not complete. Any other ending is left as it is.
    pub fn refuse_completion(
        &mut self,
        status: TaskRunStatus,
        reason: String,
        now: OffsetDateTime,
    ) {
        if self.run.status != TaskRunStatus::Completed {
            return;
        }
        self.run.status = status;
        self.run.stop_reason = Some(reason);
        self.touch(now);
    }

    /// Parks the run as blocked without ending it for good (awaiting an approval); a later
    /// [`RunLoop::reopen`] continues from the same phase.
    pub fn park(&mut self, reason: String, now: OffsetDateTime) {
        if is_terminal(self.run.status) {
            return;
        }
        self.run.status = TaskRunStatus::Blocked;
        self.run.stop_reason = Some(reason);
        self.touch(now);
    }

    /// Records a receipt id on the run.
    pub fn note_receipt(&mut self, id: String) {
        self.run.receipt_ids.push(id);
    }

    /// Records the handoff that closed the run.
    pub fn set_handoff(&mut self, id: String) {
        self.run.handoff_id = Some(id);
    }

    fn touch(&mut self, now: OffsetDateTime) {
        // Time never runs backwards in the record, whatever the host clock does.
        let now = Timestamp::new(now.to_offset(time::UtcOffset::UTC));
        if now > self.run.updated_at {
            self.run.updated_at = now;
        }
        if self.run.phase_started_at < self.run.updated_at {
            self.run.phase_started_at = self.run.updated_at;
        }
    }
}
