//! The `schema` and `version` fields every persisted contract carries.
//!
//! Both are zero-sized on the Rust side: they always serialise to the one value they stand for,
//! and on input they are either absent (the default) or exactly that value. Anything else is an
//! error that names the value found and the value expected.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The only contract version this build reads and writes.
pub const CONTRACT_VERSION: &str = "0.1.0";

/// A contract's schema name, such as `craik.task_request`.
pub trait SchemaName {
    /// The full schema name, with the `craik.` prefix.
    const NAME: &'static str;
}

/// The `schema` field of contract `M`.
pub struct SchemaTag<M>(PhantomData<M>);

impl<M> SchemaTag<M> {
    /// The tag (there is only one value).
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<M> Default for SchemaTag<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M> Clone for SchemaTag<M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for SchemaTag<M> {}

impl<M> PartialEq for SchemaTag<M> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<M> Eq for SchemaTag<M> {}

impl<M: SchemaName> fmt::Debug for SchemaTag<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(M::NAME)
    }
}

impl<M: SchemaName> Serialize for SchemaTag<M> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(M::NAME)
    }
}

impl<'de, M: SchemaName> Deserialize<'de> for SchemaTag<M> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ExactStr {
            expected: M::NAME,
            what: "schema",
        })?;
        Ok(Self::new())
    }
}

impl<M: SchemaName> JsonSchema for SchemaTag<M> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Owned(format!("SchemaTag_{}", M::NAME))
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Contract name; optional on input, always written.",
            "type": "string",
            "const": M::NAME,
        })
    }
}

/// The `version` field: always `0.1.0`.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Version;

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(CONTRACT_VERSION)
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(CONTRACT_VERSION)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(ExactStr {
            expected: CONTRACT_VERSION,
            what: "version",
        })?;
        Ok(Self)
    }
}

impl JsonSchema for Version {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Version")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Contract version; optional on input, always written.",
            "type": "string",
            "const": CONTRACT_VERSION,
        })
    }
}

/// Accepts exactly one string and names both values when it sees another.
struct ExactStr {
    expected: &'static str,
    what: &'static str,
}

impl Visitor<'_> for ExactStr {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the string `{}`", self.expected)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        if v == self.expected {
            Ok(())
        } else if self.what == "version" {
            Err(E::custom(format_args!(
                "unsupported version `{}`, expected `{}`",
                crate::display::Truncated(v),
                self.expected
            )))
        } else {
            Err(E::custom(format_args!(
                "wrong schema `{}`, expected `{}`",
                crate::display::Truncated(v),
                self.expected
            )))
        }
    }
}
