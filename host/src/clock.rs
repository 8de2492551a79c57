//! Where the host's time comes from. The kernel takes the time of each decision as an
//! argument; the host reads it from a [`Clock`] it is given, so a front end (or a test) decides
//! what "now" is.

use time::OffsetDateTime;

/// A source of the current time (UTC).
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> OffsetDateTime;
}

/// The system's wall clock. In test builds (the `crash-points` feature) it can be moved ahead
/// at each runner step ([`test_step_tick`]); release builds have no such hook.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[cfg(feature = "crash-points")]
static TEST_SKEW_SECS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        let now = OffsetDateTime::now_utc();
        #[cfg(feature = "crash-points")]
        let now = now
            + time::Duration::seconds(TEST_SKEW_SECS.load(std::sync::atomic::Ordering::Relaxed));
        now
    }
}

/// Test builds only: `CRAIK_TEST_CLOCK_STEP_SECS=N` moves [`SystemClock`] N seconds ahead
/// each time a runner is asked for a step, so a test can spend a wall-clock budget
/// deterministically. A no-op otherwise.
pub fn test_step_tick() {
    #[cfg(feature = "crash-points")]
    if let Some(secs) = std::env::var("CRAIK_TEST_CLOCK_STEP_SECS")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
    {
        TEST_SKEW_SECS.fetch_add(secs, std::sync::atomic::Ordering::Relaxed);
    }
}
