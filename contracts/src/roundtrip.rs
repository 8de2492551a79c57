//! Compares a record as read with the same record as this build writes it, for interop with
//! payloads from the Python reference implementation.

use serde::Serialize;
use serde_json::Value;

/// How the re-serialised record differs from its input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RoundTrip {
    /// Paths present in the input whose value changed or disappeared: a real interop failure.
    pub changed: Vec<String>,
    /// Paths the input omitted and this build wrote with their default value.
    pub defaults_added: Vec<String>,
}

impl RoundTrip {
    /// True when nothing from the input was lost or altered.
    pub fn is_faithful(&self) -> bool {
        self.changed.is_empty()
    }
}

/// Compares `input` with `output`, recursively.
pub fn compare(input: &Value, output: &Value) -> RoundTrip {
    let mut report = RoundTrip::default();
    walk("$", input, output, &mut report);
    report
}

fn walk(path: &str, input: &Value, output: &Value, report: &mut RoundTrip) {
    match (input, output) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, av) in a {
                let child = format!("{path}.{key}");
                match b.get(key) {
                    Some(bv) => walk(&child, av, bv, report),
                    None => report.changed.push(child),
                }
            }
            for key in b.keys().filter(|k| !a.contains_key(*k)) {
                report.defaults_added.push(format!("{path}.{key}"));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (av, bv)) in a.iter().zip(b).enumerate() {
                walk(&format!("{path}[{i}]"), av, bv, report);
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            // `1` read into a float field is written `1.0`: the same number.
            let same = a == b || matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if x == y);
            if !same {
                report.changed.push(path.to_owned());
            }
        }
        (a, b) => {
            if a != b {
                report.changed.push(path.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_changes_and_added_defaults() {
        let input = json!({"a": 1, "b": {"c": [1, 2]}, "gone": true, "n": 1});
        let output = json!({"a": 2, "b": {"c": [1, 2], "d": []}, "n": 1.0});
        let report = compare(&input, &output);
        assert_eq!(report.changed, vec!["$.a", "$.gone"]);
        assert_eq!(report.defaults_added, vec!["$.b.d"]);
        assert!(!report.is_faithful());
        assert!(compare(&input, &input).is_faithful());
    }
}
