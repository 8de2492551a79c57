//! One module per command family.

pub(crate) mod audit;
pub(crate) mod bench;
pub(crate) mod case;
pub(crate) mod config;
pub(crate) mod contracts;
pub(crate) mod keys;
pub(crate) mod policy;
pub(crate) mod policy_prove;
pub(crate) mod proofs;
pub(crate) mod receipts;
pub(crate) mod runners;
pub(crate) mod runs;
pub(crate) mod scaffold;
pub(crate) mod schema;
