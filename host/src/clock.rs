//! Where the host's time comes from. The kernel takes the time of each decision as an
//! argument; the host reads it from a [`Clock`] it is given, so a front end (or a test) decides
//! what "now" is.

use time::OffsetDateTime;

/// A source of the current time (UTC).
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> OffsetDateTime;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}
