//! Free-form JSON inside contracts (`metadata`, `context`, `observed_output`, ...) and the
//! few numeric field types with ranges.
//!
//! `serde_json::Value` silently keeps the last of two equal keys; a reviewer and the kernel could
//! then read different documents from the same bytes. [`Object`] rejects duplicate keys at every
//! depth instead.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Number, Value};

use crate::display::Truncated;

/// Deepest nesting accepted inside free-form values (serde_json stops at 128 anyway; this keeps
/// the limit explicit and independent of the parser).
pub const MAX_DEPTH: usize = 64;

/// A JSON object whose keys are unique at every depth.
#[derive(Clone, Default, PartialEq)]
pub struct Object(pub Map<String, Value>);

impl Object {
    /// An empty object.
    pub fn new() -> Self {
        Self(Map::new())
    }

    /// True when there are no keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(StrictValue { depth: 0 })? {
            Value::Object(map) => Ok(Self(map)),
            other => Err(de::Error::custom(format_args!(
                "invalid type: {}, expected a JSON object",
                kind_of(&other)
            ))),
        }
    }
}

impl JsonSchema for Object {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Object")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "object" })
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Builds a `serde_json::Value`, failing on duplicate keys and on nesting beyond [`MAX_DEPTH`].
#[derive(Clone, Copy)]
struct StrictValue {
    depth: usize,
}

impl StrictValue {
    fn deeper<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            Err(E::custom(format_args!(
                "nested deeper than {MAX_DEPTH} levels"
            )))
        } else {
            Ok(Self {
                depth: self.depth + 1,
            })
        }
    }
}

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.deeper()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    Truncated(&key)
                )));
            }
            let value = map.next_value_seed(inner)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// A number in `0.0..=1.0` (fact confidence).
#[derive(Clone, Copy, PartialEq, PartialOrd, Debug)]
pub struct Probability(f64);

impl Probability {
    /// `Some` when `v` is finite and within `0.0..=1.0`.
    pub fn new(v: f64) -> Option<Self> {
        (v.is_finite() && (0.0..=1.0).contains(&v)).then_some(Self(v))
    }

    /// The value.
    pub const fn get(self) -> f64 {
        self.0
    }
}

impl Serialize for Probability {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Probability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(deserializer)?;
        Self::new(v).ok_or_else(|| {
            de::Error::custom(format_args!(
                "out of range `{v}`, expected a number from 0 to 1"
            ))
        })
    }
}

impl JsonSchema for Probability {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Probability")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "number", "minimum": 0.0, "maximum": 1.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_duplicate_keys_at_any_depth() {
        let err = serde_json::from_str::<Object>(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate key `a`"), "{err}");
        let err = serde_json::from_str::<Object>(r#"{"a":[{"b":{"c":1,"c":1}}]}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate key `c`"), "{err}");
    }

    #[test]
    fn rejects_non_objects_and_deep_nesting() {
        assert!(serde_json::from_str::<Object>("[]").is_err());
        let deep = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        let err = serde_json::from_str::<Object>(&deep).unwrap_err();
        assert!(err.to_string().contains("nested deeper"), "{err}");
    }

    #[test]
    fn keeps_key_order_and_values() {
        let obj: Object = serde_json::from_str(r#"{"z":1,"a":{"x":[true,null,1.5,"s"]}}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&obj).unwrap(),
            r#"{"z":1,"a":{"x":[true,null,1.5,"s"]}}"#
        );
    }

    #[test]
    fn probability_bounds() {
        assert!(serde_json::from_str::<Probability>("0.95").is_ok());
        assert!(serde_json::from_str::<Probability>("1").is_ok());
        assert!(serde_json::from_str::<Probability>("1.01").is_err());
        assert!(serde_json::from_str::<Probability>("-0.1").is_err());
    }
}
