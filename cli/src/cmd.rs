//! One module per command family.

pub(crate) mod contracts;
pub(crate) mod policy;
pub(crate) mod schema;
