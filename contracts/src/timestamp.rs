//! RFC 3339 timestamps, parsed with `time` and always written back in RFC 3339.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::display::Truncated;

/// An instant with its UTC offset, as written in a contract (`2026-05-15T22:30:00Z`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(OffsetDateTime);

impl Timestamp {
    /// Wraps an instant.
    pub const fn new(at: OffsetDateTime) -> Self {
        Self(at)
    }

    /// The instant.
    pub const fn get(self) -> OffsetDateTime {
        self.0
    }

    /// Parses RFC 3339 text (an offset is required; `Z` or `±hh:mm`).
    pub fn parse(text: &str) -> Result<Self, time::error::Parse> {
        OffsetDateTime::parse(text, &Rfc3339).map(Self)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.format(&Rfc3339) {
            Ok(s) => f.write_str(&s),
            // Years outside 0..=9999 have no RFC 3339 form; parse() never produces them.
            Err(_) => write!(f, "{}", self.0),
        }
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self.0.format(&Rfc3339).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp such as `2026-05-15T22:30:00Z`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse(v).map_err(|e| {
                    E::custom(format_args!(
                        "invalid timestamp `{}` ({e}), expected RFC 3339 such as `2026-05-15T22:30:00Z`",
                        Truncated(v)
                    ))
                })
            }
        }
        deserializer.deserialize_str(V)
    }
}

impl JsonSchema for Timestamp {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Timestamp")
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "date-time" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_utc_and_offsets() {
        for text in [
            "2026-05-15T22:30:00Z",
            "2026-05-15T22:30:00.123456Z",
            "2026-05-15T22:30:00+02:00",
        ] {
            let ts = Timestamp::parse(text).unwrap();
            let json = serde_json::to_string(&ts).unwrap();
            assert_eq!(json, format!("\"{text}\""));
        }
    }

    #[test]
    fn rejects_naive_and_garbage() {
        for bad in [
            "2026-05-15T22:30:00",
            "2026-05-15",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "",
        ] {
            let err = serde_json::from_str::<Timestamp>(&format!("\"{bad}\"")).unwrap_err();
            assert!(
                err.to_string().contains("invalid timestamp"),
                "{bad}: {err}"
            );
        }
    }
}
