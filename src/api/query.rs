//! Query parameters: each route declares its parameters once ([`ParamSpec`]); the same declaration validates
//! requests (422 with the spec's `detail` shape, bounds inclusive) and describes them in `/openapi.json`.

use std::collections::HashMap;

use crate::error::{Error, FieldError, Result};

/// Type, bounds and default of a query parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// An integer in `min..=max` (no upper bound when `max` is None).
    Int {
        /// Lower bound.
        min: i64,
        /// Upper bound.
        max: Option<i64>,
        /// Value when absent.
        default: Option<i64>,
    },
    /// A finite number in `min..=max`.
    Num {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
        /// Value when absent.
        default: Option<f64>,
    },
    /// `true`/`false` (also `1`/`0`, `yes`/`no`, `on`/`off`).
    Bool {
        /// Value when absent.
        default: Option<bool>,
    },
    /// A string, optionally one of `choices`.
    Str {
        /// Value when absent.
        default: Option<&'static str>,
        /// Allowed values (any when empty).
        choices: &'static [&'static str],
    },
    /// A repeatable string (`labels=a&labels=b`).
    List,
}

/// One declared query parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    /// Name.
    pub name: &'static str,
    /// Type, bounds, default.
    pub kind: ParamKind,
    /// Whether it must be present.
    pub required: bool,
    /// One line for the OpenAPI document.
    pub description: &'static str,
}

/// Shorthand constructors for route tables.
pub const fn int(
    name: &'static str,
    min: i64,
    max: Option<i64>,
    default: Option<i64>,
    description: &'static str,
) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::Int { min, max, default }, required: false, description }
}
/// A number parameter.
pub const fn num(name: &'static str, min: f64, max: f64, default: Option<f64>, description: &'static str) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::Num { min, max, default }, required: false, description }
}
/// A boolean parameter.
pub const fn boolean(name: &'static str, default: Option<bool>, description: &'static str) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::Bool { default }, required: false, description }
}
/// A string parameter.
pub const fn string(name: &'static str, default: Option<&'static str>, description: &'static str) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::Str { default, choices: &[] }, required: false, description }
}
/// A string parameter restricted to `choices`.
pub const fn choice(
    name: &'static str,
    default: Option<&'static str>,
    choices: &'static [&'static str],
    description: &'static str,
) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::Str { default, choices }, required: false, description }
}
/// A required string parameter.
pub const fn required(name: &'static str, description: &'static str) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::Str { default: None, choices: &[] }, required: true, description }
}
/// A required boolean parameter.
pub const fn required_bool(name: &'static str, description: &'static str) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::Bool { default: None }, required: true, description }
}
/// A repeatable string parameter.
pub const fn list(name: &'static str, description: &'static str) -> ParamSpec {
    ParamSpec { name, kind: ParamKind::List, required: false, description }
}

/// A validated value.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i64),
    Num(f64),
    Bool(bool),
    Str(String),
    List(Vec<String>),
}

/// The validated query of one request: declared parameters with defaults applied. Undeclared parameters are
/// ignored, as clients send extras.
#[derive(Debug, Clone, Default)]
pub struct Query {
    values: HashMap<&'static str, Value>,
}

impl Query {
    /// Parses and validates `raw` (`a=1&b=x`, percent-encoded) against `specs`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] listing every bad or missing parameter.
    pub fn parse(raw: &str, specs: &[ParamSpec]) -> Result<Self> {
        let mut seen: HashMap<String, Vec<String>> = HashMap::new();
        for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
            seen.entry(k.into_owned()).or_default().push(v.into_owned());
        }
        let mut q = Query::default();
        let mut errs = Vec::new();
        for spec in specs {
            let given = seen.get(spec.name);
            let loc = ["query", spec.name];
            match (spec.kind, given) {
                (ParamKind::List, Some(v)) => {
                    let items: Vec<String> = v.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
                    q.values.insert(spec.name, Value::List(items));
                }
                (ParamKind::List, None) => {
                    q.values.insert(spec.name, Value::List(vec![]));
                }
                (kind, Some(v)) => {
                    let raw = v.last().map(String::as_str).unwrap_or("");
                    match parse_one(kind, raw, &loc) {
                        Ok(val) => {
                            q.values.insert(spec.name, val);
                        }
                        Err(e) => errs.push(*e),
                    }
                }
                (kind, None) => {
                    if spec.required {
                        errs.push(FieldError::new(&loc, "missing", "Field required", serde_json::Value::Null));
                    } else if let Some(d) = default_of(kind) {
                        q.values.insert(spec.name, d);
                    }
                }
            }
        }
        if errs.is_empty() { Ok(q) } else { Err(Error::invalid(errs)) }
    }

    /// The route's `limit`, as [`Query::parse`] checked it against the route's one declaration (bounds and
    /// default; every route that takes a `limit` declares both, which `tests/route_table.rs` checks): the one
    /// place a page size is checked. 0 when the route declares no `limit`.
    pub fn limit(&self) -> usize {
        self.int("limit").map_or(0, |v| usize::try_from(v).unwrap_or(0))
    }

    /// An integer parameter (None when absent without default).
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.values.get(name) {
            Some(Value::Int(v)) => Some(*v),
            _ => None,
        }
    }

    /// A number parameter.
    pub fn num(&self, name: &str) -> Option<f64> {
        match self.values.get(name) {
            Some(Value::Num(v)) => Some(*v),
            _ => None,
        }
    }

    /// A boolean parameter.
    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.values.get(name) {
            Some(Value::Bool(v)) => Some(*v),
            _ => None,
        }
    }

    /// A string parameter.
    pub fn str(&self, name: &str) -> Option<&str> {
        match self.values.get(name) {
            Some(Value::Str(v)) => Some(v.as_str()),
            _ => None,
        }
    }

    /// A repeatable parameter (empty when absent).
    pub fn list(&self, name: &str) -> &[String] {
        match self.values.get(name) {
            Some(Value::List(v)) => v,
            _ => &[],
        }
    }
}

fn default_of(kind: ParamKind) -> Option<Value> {
    match kind {
        ParamKind::Int { default, .. } => default.map(Value::Int),
        ParamKind::Num { default, .. } => default.map(Value::Num),
        ParamKind::Bool { default } => default.map(Value::Bool),
        ParamKind::Str { default, .. } => default.map(|s| Value::Str(s.to_string())),
        ParamKind::List => Some(Value::List(vec![])),
    }
}

/// The pydantic-style error for a value outside an inclusive bound (`ge` when `lower`, else `le`).
fn out_of_bounds(loc: &[&str], lower: bool, bound: serde_json::Value, input: serde_json::Value) -> Box<FieldError> {
    let (kind, word, key) =
        if lower { ("greater_than_equal", "greater", "ge") } else { ("less_than_equal", "less", "le") };
    let msg = format!("Input should be {word} than or equal to {bound}");
    Box::new(FieldError::new(loc, kind, msg, input).with_ctx(serde_json::json!({ key: bound })))
}

/// Parses one value; the error is boxed because a [`FieldError`] is large and this is a hot path.
fn parse_one(kind: ParamKind, raw: &str, loc: &[&str]) -> std::result::Result<Value, Box<FieldError>> {
    let input = serde_json::Value::from(raw);
    match kind {
        ParamKind::Int { min, max, .. } => {
            let v: i64 = raw.trim().parse().map_err(|_| {
                Box::new(FieldError::new(
                    loc,
                    "int_parsing",
                    "Input should be a valid integer, unable to parse string as an integer",
                    input.clone(),
                ))
            })?;
            if v < min {
                return Err(out_of_bounds(loc, true, min.into(), input));
            }
            if let Some(max) = max.filter(|m| v > *m) {
                return Err(out_of_bounds(loc, false, max.into(), input));
            }
            Ok(Value::Int(v))
        }
        ParamKind::Num { min, max, .. } => {
            let v: f64 = raw.trim().parse().ok().filter(|v: &f64| v.is_finite()).ok_or_else(|| {
                Box::new(FieldError::new(
                    loc,
                    "float_parsing",
                    "Input should be a valid number, unable to parse string as a number",
                    input.clone(),
                ))
            })?;
            if v < min {
                return Err(out_of_bounds(loc, true, min.into(), input));
            }
            if v > max {
                return Err(out_of_bounds(loc, false, max.into(), input));
            }
            Ok(Value::Num(v))
        }
        ParamKind::Bool { .. } => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(Value::Bool(true)),
            "false" | "0" | "no" | "off" => Ok(Value::Bool(false)),
            _ => Err(Box::new(FieldError::new(
                loc,
                "bool_parsing",
                "Input should be a valid boolean, unable to interpret input",
                input,
            ))),
        },
        ParamKind::Str { choices, .. } => {
            if !choices.is_empty() && !choices.contains(&raw) {
                return Err(Box::new(
                    FieldError::new(loc, "enum", format!("Input should be one of: {}", choices.join(", ")), input)
                        .with_ctx(serde_json::json!({"expected": choices.join(", ")})),
                ));
            }
            if raw.len() > 4096 {
                return Err(Box::new(
                    FieldError::new(loc, "string_too_long", "at most 4096 bytes", serde_json::Value::Null)
                        .with_ctx(serde_json::json!({"max_length": 4096})),
                ));
            }
            Ok(Value::Str(raw.to_string()))
        }
        ParamKind::List => Ok(Value::List(vec![raw.to_string()])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_defaults_and_lists() {
        let specs =
            [int("limit", 1, Some(100), Some(20), ""), list("labels", ""), boolean("x", None, ""), required("q", "")];
        let q = Query::parse("labels=a&labels=b%20c&q=hi+there", &specs).unwrap_or_default();
        assert_eq!(q.int("limit"), Some(20));
        assert_eq!(q.list("labels"), ["a", "b c"]);
        assert_eq!(q.bool("x"), None);
        assert_eq!(q.str("q"), Some("hi there"));
        let err = Query::parse("limit=0&x=maybe", &specs).err().map(|e| e.fields().to_vec()).unwrap_or_default();
        let kinds: Vec<&str> = err.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["greater_than_equal", "bool_parsing", "missing"]);
    }
}
