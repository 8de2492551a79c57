//! Craik's trusted host: everything between the kernel's decisions and the machine.
//!
//! - [`run`]: a governed run — its store on disk ([`run::store`]), the driver and recovery
//!   ([`run::driver`]), the side-effect executors ([`run::exec`]);
//! - [`confine`]: the Landlock sandbox every command and adapter starts in;
//! - [`adapter`]: untrusted runner processes over the JSON-lines channel, supervised;
//! - [`conformance`]: the canonical scenarios an adapter must pass;
//! - [`launch`]: the runner a run names, built (in process, or an adapter process);
//! - [`runners`]: the shipped runners' capability matrices (trusted data);
//! - [`registry`]: the runner registry (`runners.toml`), installs and the pins every launch checks;
//! - [`journal`]: a run's receipt journal on disk;
//! - [`keys`]: the receipt signing key on disk;
//! - [`ledger`]: the home ledger naming every journal of a home, and the check against it;
//!   [`audits`]: the audit summaries it names;
//! - [`policies`], [`embedded`]: policy bundles and grants from files, and the default bundle;
//! - [`project`], [`case`], [`prompt`]: the project profile, the case file and the compiled
//!   prompt assembled before a run;
//! - [`policytest`]: policy test suites (Craik's format and Cedar's `run-tests`), coverage, JUnit.
//!
//! Front ends (the `craik` CLI today) sit on top: they parse arguments, print, and map
//! [`Error`]s to their own codes. Nothing here prints or exits. Time comes from a [`Clock`].
//!
//! A front end that runs commands must route its own `__craik-confine --probe` invocation to
//! [`confine::trampoline`] before anything else: the once-per-process probe of what this
//! kernel confines re-executes the running binary (see [`confine`]).

pub mod adapter;
pub mod audits;
pub mod case;
pub mod clock;
pub mod config;
pub mod confine;
pub mod conformance;
pub mod digest;
pub mod embedded;
pub mod error;
pub mod fsio;
pub mod journal;
pub mod keys;
pub mod launch;
pub mod ledger;
pub mod policies;
pub mod policytest;
pub mod project;
pub mod prompt;
pub mod registry;
pub mod run;
pub mod runners;

pub use clock::{Clock, SystemClock};
pub use error::{Error, ErrorKind};
