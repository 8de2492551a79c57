//! One module per command family.

pub(crate) mod contracts;
pub(crate) mod schema;
