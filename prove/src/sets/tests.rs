//! Unit tests of the Cedar sets.
