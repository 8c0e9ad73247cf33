//! Tool arguments: typed, lenient where models are sloppy (numbers given as strings, labels as a comma list),
//! and strict where it matters (ranges, required fields). Every error is a 422 field error whose location ends
//! in the argument's name.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The arguments of one call. Unknown keys are ignored (clients send extras such as `space_id` to tools
/// that do not declare it).
#[derive(Debug, Clone, Default)]
pub struct Args(Map<String, Value>);

fn bad(name: &str, kind: &str, msg: impl Into<String>, input: &Value) -> Error {
    Error::invalid_field(&["arguments", name], kind, msg, input.clone())
}

/// The 422 of a required argument that is absent.
pub fn missing(name: &str) -> Error {
    Error::invalid_field(&["arguments", name], "missing", "Field required", Value::Null)
}

impl Args {
    /// Wraps an argument object.
    pub fn new(m: Map<String, Value>) -> Self {
        Args(m)
    }

    /// The raw value (None when absent or null).
    pub fn raw(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// An optional string (numbers and booleans are taken as their text).
    ///
    /// # Errors
    /// 422 `string_type` for arrays and objects.
    pub fn opt_str(&self, name: &str) -> Result<Option<String>> {
        match self.raw(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(v.to_string())),
            Some(v) => Err(bad(name, "string_type", "Input should be a valid string", v)),
        }
    }

    /// An optional string of at most `max_chars` characters; blank counts as absent.
    ///
    /// # Errors
    /// As [`Args::opt_str`]; 422 `string_too_long`.
    pub fn text(&self, name: &str, max_chars: usize) -> Result<Option<String>> {
        let Some(s) = self.opt_str(name)? else { return Ok(None) };
        if s.chars().count() > max_chars {
            return Err(bad(
                name,
                "string_too_long",
                format!("String should have at most {max_chars} characters"),
                &Value::String(s),
            ));
        }
        Ok(Some(s).filter(|s| !s.trim().is_empty()))
    }

    /// A required, non-blank string.
    ///
    /// # Errors
    /// 422 `missing` when absent or blank, or as [`Args::opt_str`].
    pub fn req_str(&self, name: &str) -> Result<String> {
        match self.opt_str(name)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            _ => Err(missing(name)),
        }
    }

    /// An integer in `lo..=hi`, `default` when absent (a numeric string is accepted).
    ///
    /// # Errors
    /// 422 `int_type` for other values, `range` outside the bounds.
    pub fn int(&self, name: &str, lo: i64, hi: i64, default: i64) -> Result<i64> {
        Ok(self.opt_int(name, lo, hi)?.unwrap_or(default))
    }

    /// An optional integer in `lo..=hi`.
    ///
    /// # Errors
    /// As [`Args::int`].
    pub fn opt_int(&self, name: &str, lo: i64, hi: i64) -> Result<Option<i64>> {
        let Some(v) = self.raw(name) else { return Ok(None) };
        let n = match v {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        let Some(n) = n else { return Err(bad(name, "int_type", "Input should be a valid integer", v)) };
        if !(lo..=hi).contains(&n) {
            return Err(bad(name, "range", format!("Input should be in {lo}..={hi}"), v));
        }
        Ok(Some(n))
    }

    /// An optional number in `lo..=hi`.
    ///
    /// # Errors
    /// 422 `float_type` or `range`.
    pub fn opt_num(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f64>> {
        let Some(v) = self.raw(name) else { return Ok(None) };
        let n = match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse::<f64>().ok(),
            _ => None,
        };
        let Some(n) = n.filter(|n| n.is_finite()) else {
            return Err(bad(name, "float_type", "Input should be a valid number", v));
        };
        if !(lo..=hi).contains(&n) {
            return Err(bad(name, "range", format!("Input should be in {lo}..={hi}"), v));
        }
        Ok(Some(n))
    }

    /// A boolean, `default` when absent (`"true"`/`"false"` strings are accepted).
    ///
    /// # Errors
    /// 422 `bool_type`.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool> {
        match self.raw(name) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(true),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(bad(name, "bool_type", "Input should be a valid boolean", v)),
        }
    }

    /// One of `choices`, `default` when absent.
    ///
    /// # Errors
    /// 422 `enum`.
    pub fn choice(&self, name: &str, choices: &[&str], default: &str) -> Result<String> {
        match self.opt_str(name)? {
            None => Ok(default.to_string()),
            Some(s) if choices.contains(&s.as_str()) => Ok(s),
            Some(s) => Err(bad(name, "enum", format!("Input should be one of: {}", choices.join(", ")), &s.into())),
        }
    }

    /// A list of strings given as an array or as one comma-separated string (brackets and quotes around the
    /// string form are stripped, as the reference product does). Blank items are dropped; None when absent.
    ///
    /// # Errors
    /// 422 `list_type` for other values.
    pub fn list(&self, name: &str) -> Result<Option<Vec<String>>> {
        let Some(v) = self.raw(name) else { return Ok(None) };
        let items: Vec<String> = match v {
            Value::String(s) => s
                .trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .split(',')
                .map(|p| p.trim().trim_matches(|c| c == '"' || c == '\'').trim().to_string())
                .collect(),
            Value::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                for x in a {
                    match x {
                        Value::String(s) => out.push(s.trim().to_string()),
                        Value::Number(_) => out.push(x.to_string()),
                        _ => return Err(bad(name, "list_type", "Input should be a list of strings", v)),
                    }
                }
                out
            }
            _ => {
                return Err(bad(name, "list_type", "Input should be a list of strings or a comma-separated string", v));
            }
        };
        Ok(Some(items.into_iter().filter(|s| !s.is_empty()).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Args {
        Args::new(v.as_object().cloned().unwrap_or_default())
    }

    #[test]
    fn labels_come_as_arrays_or_comma_strings() {
        let a = args(json!({"a": "x, y ,,z", "b": ["p", " q "], "c": "[\"m\", 'n']", "d": 3}));
        assert_eq!(a.list("a").ok().flatten(), Some(vec!["x".into(), "y".into(), "z".into()]));
        assert_eq!(a.list("b").ok().flatten(), Some(vec!["p".into(), "q".into()]));
        assert_eq!(a.list("c").ok().flatten(), Some(vec!["m".into(), "n".into()]));
        assert!(a.list("d").is_err());
        assert_eq!(a.list("missing").ok().flatten(), None);
    }

    #[test]
    fn numbers_are_range_checked_and_errors_name_the_argument() {
        let a = args(json!({"limit": "7", "big": 500, "f": 0.5, "s": "x"}));
        assert_eq!(a.int("limit", 1, 20, 10).ok(), Some(7));
        assert_eq!(a.int("absent", 1, 20, 10).ok(), Some(10));
        let e = a.int("big", 1, 20, 10).expect_err("range");
        assert_eq!(e.fields()[0].loc, vec![json!("arguments"), json!("big")]);
        assert_eq!(a.opt_num("f", 0.0, 1.0).ok().flatten(), Some(0.5));
        assert!(a.opt_num("s", 0.0, 1.0).is_err());
        assert!(a.req_str("absent").is_err());
    }
}
