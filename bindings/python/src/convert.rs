//! Conversions between Python values and the engine's: JSON values, vectors (numpy arrays or sequences),
//! datetimes, and the keyword arguments of `add`, `search` and their filters.

use engram::{
    Label, MemoryFilter, MemoryState, NewMemory, SearchMode, SearchOptions, SearchQuery, TemporalContext, UnitType,
};
use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::*;

// ---------------------------------------------------------------------------------------------------------
// JSON <-> Python

pub(crate) fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (_, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(json_to_py(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => {
            let dict = PyDict::new(py);
            for (k, x) in o {
                dict.set_item(k, json_to_py(py, x)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python value as JSON: None, bool, int, float, str, lists and tuples, dicts with str keys. `field` names
/// the argument in the error.
pub(crate) fn py_to_json(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &str) -> PyResult<serde_json::Value> {
    use serde_json::Value;
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(invalid(py, field, "an integer outside the 64-bit range"));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        return serde_json::Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| invalid(py, field, "NaN and infinity are not JSON numbers"));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (k, v) in d.iter() {
            let key = k.cast::<PyString>().map_err(|_| invalid(py, field, "dict keys must be strings"))?;
            map.insert(key.to_cow()?.into_owned(), py_to_json(py, &v, field)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for x in obj.try_iter()? {
            out.push(py_to_json(py, &x?, field)?);
        }
        return Ok(Value::Array(out));
    }
    Err(invalid(py, field, format!("cannot be stored as JSON: {}", obj.get_type().name()?)))
}

// ---------------------------------------------------------------------------------------------------------
// Vectors

/// The `numpy` module, imported once per interpreter (searches pass a query vector on every call).
pub(crate) fn numpy_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    Ok(NUMPY.get_or_try_init(py, || py.import("numpy").map(Bound::unbind))?.bind(py))
}

/// One vector from a 1-D numpy array (any float dtype, cast to `float32`) or a sequence of numbers. Checks
/// the shape and that every component is finite; the dimension is checked by the store.
pub(crate) fn vector_arg(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<f32>> {
    // Fast path: a 1-D float32 array (a search's usual query) is read in place, with no numpy call.
    if let Ok(arr) = obj.cast::<PyArray1<f32>>() {
        let v: Vec<f32> = arr.readonly().as_array().iter().copied().collect();
        return finite(py, v, field);
    }
    let np = numpy_module(py)?;
    let arr = if obj.hasattr("__array__")? || obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        np.call_method1("asarray", (obj, np.getattr("float32")?))
            .map_err(|e| invalid(py, field, format!("not a vector of numbers ({e})")))?
    } else {
        return Err(invalid(py, field, "expected a 1-D numpy array or a list of floats"));
    };
    let arr = arr.cast_into::<PyArray1<f32>>().map_err(|_| {
        let ndim = obj.getattr("ndim").and_then(|n| n.extract::<usize>()).unwrap_or(0);
        invalid(py, field, format!("expected a 1-D vector, got {ndim} dimensions"))
    })?;
    let v = arr.to_vec().map_err(|e| invalid(py, field, e.to_string()))?;
    finite(py, v, field)
}

/// `v` when every component is finite, else `InvalidInput` naming `field` and the first bad component.
pub(crate) fn finite(py: Python<'_>, v: Vec<f32>, field: &str) -> PyResult<Vec<f32>> {
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(invalid(py, field, format!("component {i} is not a finite number"))),
        None => Ok(v),
    }
}

/// `n` vectors from a 2-D numpy array (`n x dim`) or a sequence of 1-D vectors.
pub(crate) fn vectors_arg(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &str, n: usize) -> PyResult<Vec<Vec<f32>>> {
    let np = numpy_module(py)?;
    let out: Vec<Vec<f32>> = if obj.hasattr("ndim")? {
        let arr = np.call_method1("ascontiguousarray", (obj, np.getattr("float32")?))?;
        let arr = arr.cast_into::<numpy::PyArray2<f32>>().map_err(|_| {
            let ndim = obj.getattr("ndim").and_then(|n| n.extract::<usize>()).unwrap_or(0);
            invalid(py, field, format!("expected a 2-D array (one row per item), got {ndim} dimensions"))
        })?;
        let ro = arr.readonly();
        let [rows, cols] = [ro.shape()[0], ro.shape()[1]];
        let flat = ro.as_slice().map_err(|e| invalid(py, field, e.to_string()))?;
        (0..rows).map(|r| flat[r * cols..(r + 1) * cols].to_vec()).collect()
    } else {
        let mut out = Vec::new();
        for (i, row) in
            obj.try_iter().map_err(|_| invalid(py, field, "expected a 2-D array or a list of vectors"))?.enumerate()
        {
            out.push(vector_arg(py, &row?, &format!("{field}[{i}]"))?);
        }
        out
    };
    if out.len() != n {
        return Err(invalid(py, field, format!("{} vectors for {n} items", out.len())));
    }
    for (r, v) in out.iter().enumerate() {
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(invalid(py, field, format!("row {r}, component {i} is not a finite number")));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------------
// Datetimes and keyword arguments

/// Seconds since the Unix epoch (UTC) of a millisecond timestamp, as an aware `datetime.datetime`.
pub(crate) fn datetime<'py>(py: Python<'py>, ms: i64) -> PyResult<Bound<'py, PyAny>> {
    static UTC: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static DT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let dt = DT.get_or_try_init(py, || py.import("datetime")?.getattr("datetime").map(Bound::unbind))?.bind(py);
    let utc = UTC
        .get_or_try_init(py, || py.import("datetime")?.getattr("timezone")?.getattr("utc").map(Bound::unbind))?
        .bind(py);
    dt.call_method1("fromtimestamp", (ms as f64 / 1000.0, utc))
}

/// The engine's query from `Store.search`'s arguments (see there); `InvalidInput` names the bad argument.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search_query(
    py: Python<'_>,
    query: String,
    limit: usize,
    mode: &str,
    filters: Option<&Bound<'_, PyAny>>,
    query_embedding: Option<&Bound<'_, PyAny>>,
    include_context: Option<&Bound<'_, PyAny>>,
    space: &str,
    priors: bool,
) -> PyResult<SearchQuery> {
    let mode = match mode {
        "hybrid" => SearchMode::Hybrid,
        "lexical" => SearchMode::Lexical,
        "vector" => SearchMode::Vector,
        _ => return Err(invalid(py, "mode", format!("expected hybrid, lexical or vector, got '{mode}'"))),
    };
    let context = match include_context.filter(|c| !c.is_none()) {
        None => None,
        Some(c) if c.is_instance_of::<PyBool>() => c.extract::<bool>()?.then_some(1),
        Some(c) => Some(c.extract::<usize>().map_err(|_| invalid(py, "include_context", "expected a bool or 1..=10"))?),
    };
    Ok(SearchQuery {
        query,
        space_id: space.to_owned(),
        limit,
        filter: filter_arg(py, filters)?,
        mode,
        fusion: None,
        query_embedding: query_embedding
            .filter(|e| !e.is_none())
            .map(|e| vector_arg(py, e, "query_embedding"))
            .transpose()?,
        options: SearchOptions { include_context: context, priors: (!priors).then_some(false), ..Default::default() },
    })
}

pub(crate) fn parse_unit(py: Python<'_>, s: Option<&str>, field: &str) -> PyResult<Option<UnitType>> {
    s.map(|s| UnitType::parse(s).ok_or_else(|| invalid(py, field, format!("unknown unit type '{s}'")))).transpose()
}

pub(crate) fn parse_temporal(py: Python<'_>, s: Option<&str>) -> PyResult<Option<TemporalContext>> {
    s.map(|s| {
        TemporalContext::parse(s).ok_or_else(|| {
            invalid(py, "temporal_context", format!("expected past, present, future or timeless, got '{s}'"))
        })
    })
    .transpose()
}

pub(crate) fn metadata_arg(
    py: Python<'_>,
    obj: Option<&Bound<'_, PyAny>>,
    field: &str,
) -> PyResult<Option<engram::Metadata>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => match py_to_json(py, o, field)? {
            serde_json::Value::Object(m) => Ok(Some(engram::Metadata(m))),
            _ => Err(invalid(py, field, "expected a dict")),
        },
    }
}

/// An expiry time from an aware `datetime.datetime` or a str (RFC 3339, or `YYYY-MM-DD` for midnight UTC).
/// A naive datetime is refused: its zone is unknown.
pub(crate) fn expiry_arg(
    py: Python<'_>,
    obj: Option<&Bound<'_, PyAny>>,
    field: &str,
) -> PyResult<Option<engram::Timestamp>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    if let Ok(s) = obj.cast::<PyString>() {
        let s = s.to_cow()?;
        return engram::Timestamp::parse(&s)
            .map(Some)
            .ok_or_else(|| invalid(py, field, format!("'{s}' is not RFC 3339 (2026-12-31T23:59:59Z) or a date")));
    }
    let aware = obj.hasattr("timestamp")? && obj.getattr("tzinfo").is_ok_and(|z| !z.is_none());
    if !aware {
        return Err(invalid(py, field, "expected an aware datetime (with tzinfo) or an RFC 3339 str"));
    }
    let secs: f64 = obj.call_method0("timestamp")?.extract()?;
    Ok(Some(engram::Timestamp((secs * 1000.0).round() as i64)))
}

/// Keyword fields of a memory, from `add`'s arguments or one item of `add_many`.
pub(crate) fn new_memory(py: Python<'_>, item: &Bound<'_, PyAny>, space: Option<&str>) -> PyResult<NewMemory> {
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(NewMemory {
            content: s.to_cow()?.into_owned(),
            space_id: space.map(str::to_owned),
            ..Default::default()
        });
    }
    let d = item.cast::<PyDict>().map_err(|_| invalid(py, "items", "each item is a str or a dict with `content`"))?;
    let get = |k: &str| -> PyResult<Option<Bound<'_, PyAny>>> { Ok(d.get_item(k)?.filter(|v| !v.is_none())) };
    let s = |k: &str| -> PyResult<Option<String>> {
        get(k)?.map(|v| v.extract::<String>().map_err(|_| invalid(py, k, "expected a str"))).transpose()
    };
    let f = |k: &str| -> PyResult<Option<f64>> {
        get(k)?.map(|v| v.extract::<f64>().map_err(|_| invalid(py, k, "expected a number"))).transpose()
    };
    const KNOWN: &[&str] = &[
        "content",
        "id",
        "title",
        "importance",
        "confidence",
        "source",
        "labels",
        "unit_type",
        "event_start",
        "event_end",
        "temporal_context",
        "metadata",
        "space",
        "space_id",
        "embedding",
        "source_thread_id",
        "source_message_id",
        "expires_at",
    ];
    for k in d.keys() {
        let k: String = k.extract().map_err(|_| invalid(py, "items", "dict keys must be strings"))?;
        if !KNOWN.contains(&k.as_str()) {
            return Err(invalid(py, &k, format!("unknown field; expected one of {}", KNOWN.join(", "))));
        }
    }
    let content = s("content")?.ok_or_else(|| invalid(py, "content", "missing"))?;
    Ok(NewMemory {
        id: s("id")?,
        content,
        title: s("title")?,
        importance: f("importance")?,
        confidence: f("confidence")?,
        source: s("source")?,
        labels: get("labels")?
            .map(|v| v.extract::<Vec<String>>().map_err(|_| invalid(py, "labels", "expected a list of str")))
            .transpose()?,
        unit_type: parse_unit(py, s("unit_type")?.as_deref(), "unit_type")?,
        event_start: s("event_start")?,
        event_end: s("event_end")?,
        temporal_context: parse_temporal(py, s("temporal_context")?.as_deref())?,
        source_thread_id: s("source_thread_id")?,
        source_message_id: s("source_message_id")?,
        metadata: metadata_arg(py, get("metadata")?.as_ref(), "metadata")?,
        space_id: s("space_id")?.or(s("space")?).or_else(|| space.map(str::to_owned)),
        embedding: get("embedding")?.map(|v| vector_arg(py, &v, "embedding")).transpose()?,
        expires_at: expiry_arg(py, get("expires_at")?.as_ref(), "expires_at")?,
        ..Default::default()
    })
}

/// Search and listing filters from a dict: `labels` (list, all required), `unit_type`, `states` (list),
/// `importance_min`, `recorded_from`/`recorded_to`, `event_from`/`event_to` (`YYYY`, `YYYY-MM`, `YYYY-MM-DD` or
/// RFC 3339), `include_history`, `include_expired`, `is_crystal`, `thread_id`, `source_id`.
pub(crate) fn filter_arg(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<MemoryFilter> {
    let mut f = MemoryFilter::default();
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(f) };
    let d = obj.cast::<PyDict>().map_err(|_| invalid(py, "filters", "expected a dict"))?;
    for (k, v) in d.iter() {
        let key: String = k.extract().map_err(|_| invalid(py, "filters", "keys must be strings"))?;
        let field = format!("filters.{key}");
        let text = || v.extract::<String>().map_err(|_| invalid(py, &field, "expected a str"));
        let date = |end: bool| -> PyResult<Option<engram::Timestamp>> {
            if v.is_none() {
                return Ok(None);
            }
            let s = text()?;
            let t = engram::index::catalog::parse_loose_date(&s)
                .ok_or_else(|| invalid(py, &field, "expected YYYY, YYYY-MM, YYYY-MM-DD or an RFC 3339 date-time"))?;
            Ok(Some(if end { engram::Timestamp(engram::index::catalog::end_of_period(&s, t.0)) } else { t }))
        };
        match key.as_str() {
            "labels" => {
                let names: Vec<String> = v.extract().map_err(|_| invalid(py, &field, "expected a list of str"))?;
                f.label_ids = names.iter().map(|n| Label::id_for(n.trim())).collect();
            }
            "unit_type" => f.unit_type = parse_unit(py, Some(&text()?), &field)?,
            "states" => {
                let names: Vec<String> = v.extract().map_err(|_| invalid(py, &field, "expected a list of str"))?;
                f.states = names
                    .iter()
                    .map(|s| MemoryState::parse(s).ok_or_else(|| invalid(py, &field, format!("unknown state '{s}'"))))
                    .collect::<PyResult<_>>()?;
            }
            "importance_min" => {
                f.importance_min = Some(v.extract().map_err(|_| invalid(py, &field, "expected a number"))?)
            }
            "include_history" => f.include_history = v.extract().map_err(|_| invalid(py, &field, "expected a bool"))?,
            "include_expired" => f.include_expired = v.extract().map_err(|_| invalid(py, &field, "expected a bool"))?,
            "is_crystal" => {
                f.is_crystal = if v.is_none() {
                    None
                } else {
                    Some(v.extract().map_err(|_| invalid(py, &field, "expected a bool or None"))?)
                }
            }
            "recorded_from" => f.recorded_from = date(false)?,
            "recorded_to" => f.recorded_to = date(true)?,
            "event_from" => f.event_from = date(false)?,
            "event_to" => f.event_to = date(true)?,
            "thread_id" => f.group = Some(format!("thread:{}", text()?)),
            "source_id" => f.group = Some(format!("source:{}", text()?)),
            _ => {
                return Err(invalid(
                    py,
                    &field,
                    "unknown filter; expected labels, unit_type, states, importance_min, include_history, include_expired, is_crystal, recorded_from, recorded_to, event_from, event_to, thread_id or source_id",
                ));
            }
        }
    }
    Ok(f)
}
