//! The loop's laws, as property tests over arbitrary runner answers:
//! - a terminal run never changes again, and `ended_at` is set exactly when it is terminal;
//! - `iteration` never exceeds `max_iterations`, and the gate never asks the runner for a step
//!   once the ceiling is reached;
//! - phases follow plan → act → observe → evaluate → plan;
//! - a wrong phase is refused without changing the run.

use craik_contracts::{Phase, ResultStatus, TaskRun, TaskRunStatus, Timestamp};
use craik_kernel::{Gate, LoopError, Next, RunLoop, is_terminal};
use proptest::prelude::*;
use time::Duration;
use time::macros::datetime;

fn run(max: u32) -> TaskRun {
    let at = Timestamp::new(datetime!(2026-11-22 00:00 UTC));
    TaskRun {
        schema: Default::default(),
        version: Default::default(),
        id: "run_law".into(),
        task_id: "task_law".into(),
        case_file_id: "case_law".into(),
        policy_envelope_id: "policy_law".into(),
        intent_lock_id: None,
        runner_id: "runner_fixture".into(),
        runner_mode: craik_contracts::RunnerMode::Fixture,
        status: TaskRunStatus::Pending,
        phase: Phase::Plan,
        iteration: 0,
        max_iterations: max,
        started_at: at,
        phase_started_at: at,
        updated_at: at,
        ended_at: None,
        stop_reason: None,
        receipt_ids: Vec::new(),
        handoff_id: None,
        runner_metadata: Vec::new(),
        provider_token_budget: None,
        wall_clock_budget_seconds: None,
    }
}

fn answer() -> impl Strategy<Value = (u8, u8, u8)> {
    // (phase choice: 0 = the asked one, else a random phase), status, next
    (0u8..8, 0u8..10, 0u8..3)
}

const PHASES: [Phase; 6] = [
    Phase::Plan,
    Phase::Act,
    Phase::Observe,
    Phase::Evaluate,
    Phase::Continue,
    Phase::Stop,
];

proptest! {
    #[test]
    fn laws_hold_for_any_sequence_of_answers(
        max in 1u32..6,
        answers in prop::collection::vec(answer(), 0..80),
    ) {
        let mut lp = RunLoop::new(run(max), None);
        let mut at = datetime!(2026-11-22 00:00 UTC);
        lp.start(at).unwrap();
        let mut asked_after_ceiling = false;
        for (phase_pick, status_pick, next_pick) in answers {
            at += time::Duration::seconds(1);
            let before = lp.run().clone();
            let gate = lp.gate(at);
            let asked = match gate {
                Gate::Ask(p) => p,
                Gate::Stop(status, reason) => {
                    prop_assert_eq!(status, TaskRunStatus::Interrupted);
                    prop_assert!(before.iteration >= before.max_iterations);
                    lp.halt(status, reason, at);
                    continue;
                }
                Gate::Over => {
                    prop_assert!(is_terminal(before.status));
                    // Terminal: every answer is refused and nothing changes.
                    let refused = lp.accept(Phase::Plan, ResultStatus::Completed, None, at);
                    prop_assert!(matches!(refused, Err(LoopError::Terminal(_))));
                    prop_assert_eq!(lp.run(), &before);
                    continue;
                }
            };
            if before.iteration >= before.max_iterations {
                asked_after_ceiling = true;
            }
            let phase = if phase_pick == 0 || phase_pick > 6 { asked } else { PHASES[usize::from(phase_pick - 1)] };
            let status = match status_pick {
                0 => ResultStatus::Blocked,
                1 => ResultStatus::Failed,
                2 => ResultStatus::Partial,
                _ => ResultStatus::Completed,
            };
            let next = match next_pick { 0 => None, 1 => Some(Next::Continue), _ => Some(Next::Stop) };
            match lp.accept(phase, status, next, at) {
                Err(LoopError::WrongPhase { .. }) => {
                    prop_assert!(phase != asked);
                    prop_assert_eq!(lp.run(), &before);
                }
                Err(LoopError::NoNext) => {
                    prop_assert_eq!(asked, Phase::Evaluate);
                    prop_assert!(next.is_none());
                }
                Err(e) => prop_assert!(false, "unexpected refusal {e}"),
                Ok(_) => {
                    let after = lp.run();
                    prop_assert_eq!(phase, asked);
                    match (status, asked, next) {
                        (ResultStatus::Blocked, _, _) => prop_assert_eq!(after.status, TaskRunStatus::Blocked),
                        (ResultStatus::Failed, _, _) => prop_assert_eq!(after.status, TaskRunStatus::Failed),
                        (_, Phase::Plan, _) => prop_assert_eq!(after.phase, Phase::Act),
                        (_, Phase::Act, _) => prop_assert_eq!(after.phase, Phase::Observe),
                        (_, Phase::Observe, _) => prop_assert_eq!(after.phase, Phase::Evaluate),
                        (_, Phase::Evaluate, Some(Next::Continue)) => {
                            prop_assert_eq!(after.phase, Phase::Plan);
                            prop_assert_eq!(after.iteration, before.iteration + 1);
                        }
                        (s, Phase::Evaluate, Some(Next::Stop)) => {
                            prop_assert_eq!(after.phase, Phase::Stop);
                            let expected = if s == ResultStatus::Completed { TaskRunStatus::Completed } else { TaskRunStatus::Interrupted };
                            prop_assert_eq!(after.status, expected);
                        }
                        other => prop_assert!(false, "unexpected transition {other:?}"),
                    }
                }
            }
            let r = lp.run();
            prop_assert!(r.iteration <= r.max_iterations);
            prop_assert_eq!(r.ended_at.is_some(), is_terminal(r.status));
            prop_assert!(r.updated_at >= r.started_at);
        }
        prop_assert!(!asked_after_ceiling, "the runner was asked after the ceiling");
    }
}

#[test]
fn the_budget_interrupts_before_the_runner_is_asked() {
    let mut lp = RunLoop::new(run(5), Some(time::Duration::seconds(30)));
    let start = datetime!(2026-11-22 00:00 UTC);
    lp.start(start).unwrap();
    assert_eq!(
        lp.gate(start + time::Duration::seconds(29)),
        Gate::Ask(Phase::Plan)
    );
    match lp.gate(start + time::Duration::seconds(30)) {
        Gate::Stop(TaskRunStatus::Interrupted, reason) => {
            assert!(reason.contains("budget"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_parked_run_reopens_in_the_same_phase() {
    let mut lp = RunLoop::new(run(5), None);
    let at = datetime!(2026-11-22 00:00 UTC);
    lp.start(at).unwrap();
    lp.accept(Phase::Plan, ResultStatus::Completed, None, at)
        .unwrap();
    lp.accept(Phase::Act, ResultStatus::Completed, None, at)
        .unwrap();
    lp.park("awaiting approval".into(), at);
    assert_eq!(lp.run().status, TaskRunStatus::Blocked);
    assert_eq!(lp.run().ended_at, None);
    assert_eq!(lp.gate(at), Gate::Over);
    lp.reopen(at);
    assert_eq!(lp.gate(at), Gate::Ask(Phase::Observe));
}

#[test]
fn issue_21_time_waiting_for_a_person_is_not_wall_clock_budget() {
    let start = datetime!(2026-11-22 00:00 UTC);
    let mut machine = RunLoop::new(run(5), Some(Duration::seconds(100)));
    machine.start(start).unwrap();
    // 90 s in: within the budget, 10 s left.
    assert_eq!(
        machine.gate(start + Duration::seconds(90)),
        Gate::Ask(Phase::Plan)
    );
    assert_eq!(
        machine.wall_clock_left(start + Duration::seconds(90)),
        Some(Duration::seconds(10))
    );
    // A day waiting for an approval is credited: still 10 s left.
    machine.credit_wait(Duration::days(1));
    let later = start + Duration::days(1) + Duration::seconds(90);
    assert_eq!(machine.gate(later), Gate::Ask(Phase::Plan));
    assert_eq!(machine.wall_clock_used(later), Duration::seconds(90));
    // A negative wait (a clock that ran backwards) credits nothing.
    machine.credit_wait(Duration::seconds(-1000));
    assert_eq!(machine.wall_clock_used(later), Duration::seconds(90));
    // Past the budget: interrupted, naming it.
    match machine.gate(later + Duration::seconds(10)) {
        Gate::Stop(TaskRunStatus::Interrupted, reason) => {
            assert_eq!(reason, "wall-clock budget of 100s spent (100s)")
        }
        other => panic!("{other:?}"),
    }
}
