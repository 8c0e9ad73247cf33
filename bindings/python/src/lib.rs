//! `engram._engram`: the native half of the `engram` Python package (pyo3, abi3 for CPython 3.9 and later).
//!
//! The hot calls (`add`, `add_many`, `get`, `update`, `delete`, `search`, `embedding`, `export`,
//! `import_archive`) go straight to [`engram::KnowledgeStore`]; everything else reaches the same routes as the
//! HTTP daemon through `request`, which runs [`engram::api::Api`] in-process like the C API's `engram_request`.
//! Every call that touches storage, embedding or search releases the GIL (`Python::detach`), so several Python
//! threads can use one store; the store itself is `Send + Sync`.
//!
//! Errors become the exception classes of `engram.errors` (one per [`engram::ErrorKind`] group, see
//! `docs/bindings.md`); vectors come in as numpy `float32` arrays (1-D per item, 2-D for batches) or lists.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use engram::api::{Api, ApiRequest, ServiceInfo};
use engram::embed::EmbedderChoice;
use engram::{
    DEFAULT_SPACE, ErrorKind, ExportOptions, ImportMode, ImportProgress, KnowledgeStore, Label, MemoryFilter,
    MemoryPatch, MemoryState, MemoryView, NewMemory, SearchHit, SearchMode, SearchOptions, SearchQuery, StoreConfig,
    TemporalContext, UnitType,
};
use numpy::{PyArray1, PyArrayMethods, PyUntypedArrayMethods};
use parking_lot::RwLock;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

// ---------------------------------------------------------------------------------------------------------
// Errors

/// The Python class of each error kind (classes defined in `engram/errors.py`).
fn class_name(kind: ErrorKind) -> &'static str {
    use ErrorKind::*;
    match kind {
        InvalidInput | BadRequest | PayloadTooLarge | MethodNotAllowed => "InvalidInput",
        NotFound | RouteNotFound => "NotFound",
        Conflict => "Conflict",
        Unauthorized | Forbidden => "Forbidden",
        Locked => "Locked",
        Io => "StorageError",
        StorageFull => "StorageFull",
        Corrupt => "Corrupt",
        WrongKey => "WrongKey",
        Unavailable => "Unavailable",
        NotImplemented => "Unsupported",
        Timeout | UpstreamTimeout => "Timeout",
        Unreachable | UpstreamUnreachable => "Unreachable",
        TooManyRequests | Internal => "InternalError",
        _ => "Error",
    }
}

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The typed exception for an error of `kind` with `code` (the `error_code` string), `message` and the
/// validation errors `fields` (each `{"loc", "msg", "type", "input", "ctx"}`).
fn typed_error(py: Python<'_>, kind: ErrorKind, code: &str, message: &str, fields: &[serde_json::Value]) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS.get_or_try_init(py, || py.import("engram.errors").map(Bound::unbind))?.bind(py);
        let class = module.getattr(class_name(kind))?;
        let errors = PyList::empty(py);
        for f in fields {
            errors.append(json_to_py(py, f)?)?;
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item("code", code)?;
        kwargs.set_item("status", kind.row().http_status)?;
        kwargs.set_item("retryable", kind.row().retryable)?;
        kwargs.set_item("errors", errors)?;
        let exc = class.call((message,), Some(&kwargs))?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// An [`engram::Error`] as its typed exception.
fn to_py(e: engram::Error) -> PyErr {
    Python::attach(|py| {
        let fields: Vec<serde_json::Value> =
            e.fields().iter().map(|f| serde_json::to_value(f).unwrap_or(serde_json::Value::Null)).collect();
        typed_error(py, e.kind(), e.code(), &e.chain(), &fields)
    })
}

/// `ValueError` for a bad argument the binding checks itself (shape, type), as an `InvalidInput` naming it.
fn invalid(py: Python<'_>, field: &str, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    let detail = serde_json::json!({"loc": [field], "msg": msg, "type": "value_error", "input": null, "ctx": null});
    typed_error(py, ErrorKind::InvalidInput, "validation_error", &format!("{field}: {msg}"), &[detail])
}

// ---------------------------------------------------------------------------------------------------------
// JSON <-> Python

fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
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
fn py_to_json(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &str) -> PyResult<serde_json::Value> {
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
fn numpy_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    Ok(NUMPY.get_or_try_init(py, || py.import("numpy").map(Bound::unbind))?.bind(py))
}

/// One vector from a 1-D numpy array (any float dtype, cast to `float32`) or a sequence of numbers. Checks
/// the shape and that every component is finite; the dimension is checked by the store.
fn vector_arg(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Vec<f32>> {
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
fn finite(py: Python<'_>, v: Vec<f32>, field: &str) -> PyResult<Vec<f32>> {
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(invalid(py, field, format!("component {i} is not a finite number"))),
        None => Ok(v),
    }
}

/// `n` vectors from a 2-D numpy array (`n x dim`) or a sequence of 1-D vectors.
fn vectors_arg(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &str, n: usize) -> PyResult<Vec<Vec<f32>>> {
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
// Result types

/// Seconds since the Unix epoch (UTC) of a millisecond timestamp, as an aware `datetime.datetime`.
fn datetime<'py>(py: Python<'py>, ms: i64) -> PyResult<Bound<'py, PyAny>> {
    static UTC: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static DT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let dt = DT.get_or_try_init(py, || py.import("datetime")?.getattr("datetime").map(Bound::unbind))?.bind(py);
    let utc = UTC
        .get_or_try_init(py, || py.import("datetime")?.getattr("timezone")?.getattr("utc").map(Bound::unbind))?
        .bind(py);
    dt.call_method1("fromtimestamp", (ms as f64 / 1000.0, utc))
}

/// A stored memory (read-only; `Store.update` changes it). Times are aware `datetime`s in UTC.
#[pyclass(module = "engram._engram", frozen)]
struct Memory {
    view: MemoryView,
}

impl Memory {
    /// An empty record (two short strings), to leave in a hit whose memory moved out.
    fn placeholder() -> MemoryView {
        let memory = engram::Memory::with_defaults(String::new(), String::new(), String::new(), engram::Timestamp(0));
        MemoryView { memory, label_ids: Vec::new() }
    }
}

#[pymethods]
impl Memory {
    /// Identifier, unique across spaces.
    #[getter]
    fn id(&self) -> &str {
        &self.view.memory.id
    }
    /// Body text (1..=32,768 bytes).
    #[getter]
    fn content(&self) -> &str {
        &self.view.memory.content
    }
    /// Title ("" when none).
    #[getter]
    fn title(&self) -> &str {
        &self.view.memory.title
    }
    /// Label names, sorted.
    #[getter]
    fn labels(&self) -> Vec<String> {
        self.view.label_names()
    }
    /// 0..=1.
    #[getter]
    fn importance(&self) -> f64 {
        self.view.memory.importance
    }
    /// 0..=1.
    #[getter]
    fn confidence(&self) -> f64 {
        self.view.memory.confidence
    }
    /// `fact`, `event`, `preference`, ... (see `docs/api.md`).
    #[getter]
    fn unit_type(&self) -> &'static str {
        self.view.memory.unit_type.as_str()
    }
    /// `active`, `archived`, `deprecated`, `superseded`.
    #[getter]
    fn state(&self) -> &'static str {
        self.view.memory.state.as_str()
    }
    /// The space holding it.
    #[getter]
    fn space_id(&self) -> &str {
        &self.view.memory.space_id
    }
    /// Where it came from (free text, "" when not given).
    #[getter]
    fn source(&self) -> &str {
        &self.view.memory.source
    }
    /// Free-form caller data (a new dict on each access).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_to_py(py, &serde_json::Value::Object(self.view.memory.metadata.0.clone()))
    }
    /// Event start (`YYYY`, `YYYY-MM`, `YYYY-MM-DD` or RFC 3339) or None.
    #[getter]
    fn event_start(&self) -> Option<&str> {
        self.view.memory.event_start.as_deref()
    }
    /// Event end or None.
    #[getter]
    fn event_end(&self) -> Option<&str> {
        self.view.memory.event_end.as_deref()
    }
    /// `past`, `present`, `future` or `timeless`.
    #[getter]
    fn temporal_context(&self) -> &'static str {
        self.view.memory.temporal_context.as_str()
    }
    /// Creation time (UTC).
    #[getter]
    fn created_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.view.memory.created_at.0)
    }
    /// Last change (UTC).
    #[getter]
    fn updated_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        datetime(py, self.view.memory.updated_at.0)
    }
    /// When the memory expires (UTC), or None: never. An expired memory is out of search and listings and
    /// is forgotten after the store's grace period (30 days by default).
    #[getter]
    fn expires_at<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.view.memory.expires_at.map(|t| datetime(py, t.0)).transpose()
    }
    /// True when `expires_at` has passed.
    #[getter]
    fn expired(&self) -> bool {
        self.view.memory.expired_at(engram::Timestamp::now())
    }
    /// 1 for a new memory, +1 on each content change.
    #[getter]
    fn version(&self) -> i64 {
        self.view.memory.version
    }
    /// Marked as favourite.
    #[getter]
    fn is_favorite(&self) -> bool {
        self.view.memory.is_favorite
    }
    /// Provenance: the thread it came from, when known.
    #[getter]
    fn source_thread_id(&self) -> Option<&str> {
        self.view.memory.source_thread_id.as_deref()
    }
    /// Provenance: the message it came from, when known.
    #[getter]
    fn source_message_id(&self) -> Option<&str> {
        self.view.memory.source_message_id.as_deref()
    }
    /// PageRank over the entity graph (0 until computed).
    #[getter]
    fn pagerank(&self) -> f64 {
        self.view.memory.pagerank_score
    }
    /// The whole record as a dict (the JSON fields of `GET /memories/{id}`, plus `labels`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut v = serde_json::to_value(&self.view.memory)
            .map_err(|e| to_py(engram::Error::new(ErrorKind::Internal, e.to_string())))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("labels".into(), self.view.label_names().into());
        }
        json_to_py(py, &v)
    }
    fn __repr__(&self) -> String {
        let c = &self.view.memory.content;
        let cut: String = c.chars().take(60).collect();
        let more = if cut.len() < c.len() { "..." } else { "" };
        format!("Memory(id={:?}, content={:?}{more})", self.view.memory.id, cut)
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<Memory>().is_ok_and(|o| o.get().view == self.view)
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.view.memory.id.hash(&mut h);
        self.view.memory.updated_at.0.hash(&mut h);
        h.finish()
    }
}

/// A message or chunk around a hit (`include_context=True`).
#[pyclass(module = "engram._engram", frozen, get_all)]
struct ContextItem {
    /// `message`, `chunk` or `memory`.
    kind: String,
    /// Message index, chunk index or ordinal.
    index: u64,
    /// Message role (`user`, `assistant`, ...); "" otherwise.
    role: String,
    /// The text.
    content: String,
    /// True for the hit's own message or chunk.
    is_hit: bool,
    /// The memory id, for `memory` items.
    memory_id: Option<String>,
}

#[pymethods]
impl ContextItem {
    fn __repr__(&self) -> String {
        format!("ContextItem(kind={:?}, index={}, role={:?}, is_hit={})", self.kind, self.index, self.role, self.is_hit)
    }
}

/// One search hit: the memory, its fused score (0..=1 with the default fusion) and why it matched.
#[pyclass(module = "engram._engram", frozen)]
struct Hit {
    hit: SearchHit,
    memory: Py<Memory>,
}

impl Hit {
    /// A hit whose memory moves into its Python object (no copy); the hit keeps an empty record beside the
    /// scores, terms and context it reads.
    fn new(py: Python<'_>, mut h: SearchHit) -> PyResult<Hit> {
        let memory = Py::new(py, Memory { view: std::mem::replace(&mut h.view, Memory::placeholder()) })?;
        Ok(Hit { hit: h, memory })
    }
}

#[pymethods]
impl Hit {
    /// The memory.
    #[getter]
    fn memory(&self, py: Python<'_>) -> Py<Memory> {
        self.memory.clone_ref(py)
    }
    /// Fused score, 0..=1 with the default convex fusion; higher is better.
    #[getter]
    fn score(&self) -> f32 {
        self.hit.score
    }
    /// BM25 score when the lexical ranking found it.
    #[getter]
    fn lexical_score(&self) -> Option<f32> {
        self.hit.lexical_score
    }
    /// Cosine similarity (-1..=1) when the vector ranking found it.
    #[getter]
    fn vector_score(&self) -> Option<f32> {
        self.hit.vector_score
    }
    /// Query terms (stemmed) found in the memory.
    #[getter]
    fn matched_terms(&self) -> Vec<String> {
        self.hit.matched_terms.clone()
    }
    /// A one-line explanation (`relevance_reason` over HTTP).
    #[getter]
    fn reason(&self) -> String {
        self.hit.reason()
    }
    /// Neighbouring messages or chunks, in order (empty unless `include_context=True`).
    #[getter]
    fn context(&self) -> Vec<ContextItem> {
        self.hit
            .context
            .iter()
            .map(|c| ContextItem {
                kind: c.kind.clone(),
                index: c.index,
                role: c.role.clone(),
                content: c.content.clone(),
                is_hit: c.is_hit,
                memory_id: c.memory_id.clone(),
            })
            .collect()
    }
    fn __repr__(&self) -> String {
        format!("Hit(score={:.4}, id={:?})", self.hit.score, self.hit.view.memory.id)
    }
}

/// What `Store.request` answered: the HTTP-style status and the body.
#[pyclass(module = "engram._engram", frozen)]
struct Response {
    /// HTTP status (200, 404, 422, ...).
    #[pyo3(get)]
    status: u16,
    body: Vec<u8>,
    /// `application/json`, or `application/zip` for archive downloads.
    #[pyo3(get)]
    content_type: &'static str,
}

#[pymethods]
impl Response {
    /// The body as bytes.
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.body)
    }
    /// The body as text (UTF-8).
    #[getter]
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// True for a 2xx status.
    #[getter]
    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
    /// The JSON body as Python values (dict, list, ...); None for an empty body.
    fn json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.body.is_empty() {
            return Ok(py.None().into_bound(py));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&self.body).map_err(|e| PyValueError::new_err(format!("body is not JSON: {e}")))?;
        json_to_py(py, &v)
    }
    /// Raises the typed exception (`engram.NotFound`, `engram.InvalidInput`, ...) for a status that is not 2xx;
    /// returns the response otherwise.
    fn raise_for_status(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let me = slf.get();
        if me.ok() {
            return Ok(slf);
        }
        let py = slf.py();
        let body: serde_json::Value = serde_json::from_slice(&me.body).unwrap_or(serde_json::Value::Null);
        let code = body.get("error_code").and_then(|c| c.as_str()).unwrap_or("");
        let kind = engram::ErrorCode::ALL
            .iter()
            .find(|c| c.as_str() == code)
            .map(|c| c.kind())
            .or_else(|| ErrorKind::ALL.iter().copied().find(|k| k.row().code == code))
            .or_else(|| ErrorKind::ALL.iter().copied().find(|k| k.row().http_status == me.status))
            .unwrap_or(ErrorKind::Internal);
        let (message, fields) = match body.get("detail") {
            Some(serde_json::Value::String(s)) => (s.clone(), Vec::new()),
            Some(serde_json::Value::Array(a)) => {
                let msgs: Vec<String> = a
                    .iter()
                    .map(|f| {
                        let loc: Vec<String> = f
                            .get("loc")
                            .and_then(|l| l.as_array())
                            .map(|l| {
                                l.iter().map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned)).collect()
                            })
                            .unwrap_or_default();
                        format!("{}: {}", loc.join("."), f.get("msg").and_then(|m| m.as_str()).unwrap_or(""))
                    })
                    .collect();
                (msgs.join("; "), a.clone())
            }
            _ => (format!("HTTP {}", me.status), Vec::new()),
        };
        Err(typed_error(py, kind, if code.is_empty() { kind.row().code } else { code }, &message, &fields))
    }
    fn __repr__(&self) -> String {
        format!("Response(status={}, {} bytes)", self.status, self.body.len())
    }
}

/// A search's hits with how it ran (`Store.search_results`).
#[pyclass(module = "engram._engram", frozen, get_all)]
struct SearchResults {
    /// The hits, best first.
    hits: Vec<Py<Hit>>,
    /// The mode that ran (`hybrid`, `lexical` or `vector`); a vector or hybrid search falls back to `lexical`
    /// when the space has no vectors for the query.
    mode: String,
    /// Candidates ranked before the cut to `limit`.
    candidates: usize,
    /// Milliseconds the engine spent, measured inside it (validation to the last hit; not the binding's
    /// conversions).
    elapsed_ms: f64,
    /// Why the requested mode could not run, when it fell back.
    fallback: Option<String>,
}

#[pymethods]
impl SearchResults {
    fn __len__(&self) -> usize {
        self.hits.len()
    }
    fn __repr__(&self) -> String {
        format!("SearchResults({} hits, mode={:?}, elapsed_ms={:.3})", self.hits.len(), self.mode, self.elapsed_ms)
    }
}

/// What `Store.export` wrote.
#[pyclass(module = "engram._engram", frozen, get_all)]
struct ExportReport {
    /// The archive's path.
    path: String,
    /// Records per kind (`memories`, `threads`, ...).
    counts: BTreeMap<String, u64>,
    /// Archive size in bytes.
    bytes: u64,
    /// SHA-256 of the archive, hex.
    sha256: String,
    /// Milliseconds taken.
    elapsed_ms: f64,
}

#[pymethods]
impl ExportReport {
    fn __repr__(&self) -> String {
        format!("ExportReport(path={:?}, bytes={}, sha256={:?})", self.path, self.bytes, self.sha256)
    }
}

/// What `Store.import_archive` read and wrote.
#[pyclass(module = "engram._engram", frozen, get_all)]
struct ImportReport {
    /// Records read from the archive.
    records: u64,
    /// Per kind: `{"created": n, "updated": n, "skipped": n, ...}`.
    counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// Milliseconds taken.
    elapsed_ms: f64,
}

#[pymethods]
impl ImportReport {
    fn __repr__(&self) -> String {
        format!(
            "ImportReport(records={}, kinds={}, elapsed_ms={:.1})",
            self.records,
            self.counts.len(),
            self.elapsed_ms
        )
    }
}

/// The engine's query from `Store.search`'s arguments (see there); `InvalidInput` names the bad argument.
#[allow(clippy::too_many_arguments)]
fn search_query(
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

// ---------------------------------------------------------------------------------------------------------
// The store

/// An open store (one redb file in a data directory). Use as a context manager, or call `close()`.
/// `engram.Store` subclasses it with the thread, label, space and source calls.
#[pyclass(module = "engram._engram", frozen, subclass)]
struct Store {
    api: RwLock<Option<Arc<Api>>>,
    path: PathBuf,
    dim: usize,
    embedder: String,
}

impl Store {
    fn api(&self, py: Python<'_>) -> PyResult<Arc<Api>> {
        self.api
            .read()
            .clone()
            .ok_or_else(|| typed_error(py, ErrorKind::InvalidInput, "store_closed", "the store is closed", &[]))
    }
}

fn parse_unit(py: Python<'_>, s: Option<&str>, field: &str) -> PyResult<Option<UnitType>> {
    s.map(|s| UnitType::parse(s).ok_or_else(|| invalid(py, field, format!("unknown unit type '{s}'")))).transpose()
}

fn parse_temporal(py: Python<'_>, s: Option<&str>) -> PyResult<Option<TemporalContext>> {
    s.map(|s| {
        TemporalContext::parse(s).ok_or_else(|| {
            invalid(py, "temporal_context", format!("expected past, present, future or timeless, got '{s}'"))
        })
    })
    .transpose()
}

fn metadata_arg(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<engram::Metadata>> {
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
fn expiry_arg(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>, field: &str) -> PyResult<Option<engram::Timestamp>> {
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
fn new_memory(py: Python<'_>, item: &Bound<'_, PyAny>, space: Option<&str>) -> PyResult<NewMemory> {
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

/// Search filters from a dict: `labels` (list, all required), `unit_type`, `states` (list), `importance_min`,
/// `recorded_from`/`recorded_to`, `event_from`/`event_to` (`YYYY`, `YYYY-MM`, `YYYY-MM-DD` or RFC 3339),
/// `include_history`, `thread_id`, `source_id`.
fn filter_arg(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<MemoryFilter> {
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
                    "unknown filter; expected labels, unit_type, states, importance_min, include_history, recorded_from, recorded_to, event_from, event_to, thread_id or source_id",
                ));
            }
        }
    }
    Ok(f)
}

fn view(py: Python<'_>, v: MemoryView) -> PyResult<Py<Memory>> {
    Py::new(py, Memory { view: v })
}

#[pymethods]
impl Store {
    /// Opens (or creates) the store in directory `path`. `embedder`: `"builtin"` (the default, no model
    /// files), a directory holding a sentence-embedding ONNX model (needs `ORT_DYLIB_PATH`), or
    /// `"external:DIM"` for vectors the caller supplies (`DIM` floats each, 1..=4096). `allowed_paths`: extra
    /// directories `export`, `import_archive` and `ingest_path` may touch besides `path`.
    ///
    /// `passphrase`, `key_file` or `keychain=True`: the store is encrypted at rest (docs/security.md) and
    /// opens with that key (a new store is created encrypted with it); at most one of them.
    ///
    /// Raises `Locked` when another process (a daemon) has the store open, `Unavailable` when the model or
    /// ONNX Runtime cannot be loaded, `Corrupt` for a damaged file, `StorageError` for I/O failures,
    /// `WrongKey` when the key does not open the store or the store is encrypted and no key was given.
    #[new]
    #[pyo3(signature = (path, embedder = "builtin", *, allowed_paths = Vec::new(), passphrase = None, key_file = None, keychain = false))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        embedder: &str,
        allowed_paths: Vec<PathBuf>,
        passphrase: Option<String>,
        key_file: Option<PathBuf>,
        keychain: bool,
    ) -> PyResult<Store> {
        use engram::storage::crypt::{Encryption, KeySource};
        let encryption = match (passphrase, key_file, keychain) {
            (None, None, false) => None,
            (Some(p), None, false) => Some(Encryption::new(KeySource::Passphrase(p.into()))),
            (None, Some(f), false) => Some(Encryption::key_file(f)),
            (None, None, true) => Some(Encryption::keychain()),
            _ => return Err(invalid(py, "passphrase", "give one of passphrase, key_file and keychain")),
        };
        let choice = if embedder == "builtin" {
            EmbedderChoice::Builtin
        } else if let Some(dim) = embedder.strip_prefix("external:") {
            let dim: usize =
                dim.parse().map_err(|_| invalid(py, "embedder", "expected external:DIM with DIM 1..=4096"))?;
            EmbedderChoice::External(dim)
        } else {
            EmbedderChoice::ModelDir(PathBuf::from(embedder))
        };
        let p = path.clone();
        let (api, dim, name) = py
            .detach(move || -> engram::Result<_> {
                let selected = engram::embed::select(&choice)?;
                let mut config = StoreConfig::new(&p).embedder(selected.embedder);
                config.allowed_paths = allowed_paths;
                config.encryption = encryption;
                let store = KnowledgeStore::open(config)?;
                let dim = store.config().embedder.dim();
                let name = store.config().embedder.name().to_string();
                let info = ServiceInfo { embedding_fallback: selected.fallback, ..ServiceInfo::default() };
                Ok((Api::new(Arc::new(store), info), dim, name))
            })
            .map_err(to_py)?;
        Ok(Store { api: RwLock::new(Some(Arc::new(api))), path, dim, embedder: name })
    }

    /// Closes the store and releases its file (another process may open it after). Calls on a closed store
    /// raise `engram.Error`; closing twice is allowed. A call running in another thread finishes first.
    fn close(&self, py: Python<'_>) {
        let api = self.api.write().take();
        py.detach(move || drop(api));
    }

    /// True after `close()`.
    #[getter]
    fn closed(&self) -> bool {
        self.api.read().is_none()
    }

    /// The data directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Vector dimension of the active embedder.
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// The active embedder's name (`builtin-hash-384`, the model's name, or `external-DIM`).
    #[getter]
    fn embedder(&self) -> &str {
        &self.embedder
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// Stores one memory and returns it. `id` makes it an upsert. `embedding` (external-embedder stores): a
    /// 1-D `float32` array or list of `dim` finite floats. `space`: default `"default"` (must exist).
    /// `expires_at`: an aware `datetime` or RFC 3339 str; from then on the memory leaves search and listings.
    ///
    /// Raises `InvalidInput` (a `ValueError`; `.field` names the bad argument) and stores nothing.
    #[pyo3(signature = (content, *, id=None, title=None, labels=None, importance=None, confidence=None, unit_type=None, space=None, metadata=None, source=None, event_start=None, event_end=None, temporal_context=None, source_thread_id=None, source_message_id=None, embedding=None, expires_at=None))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        py: Python<'_>,
        content: String,
        id: Option<String>,
        title: Option<String>,
        labels: Option<Vec<String>>,
        importance: Option<f64>,
        confidence: Option<f64>,
        unit_type: Option<&str>,
        space: Option<String>,
        metadata: Option<&Bound<'_, PyAny>>,
        source: Option<String>,
        event_start: Option<String>,
        event_end: Option<String>,
        temporal_context: Option<&str>,
        source_thread_id: Option<String>,
        source_message_id: Option<String>,
        embedding: Option<&Bound<'_, PyAny>>,
        expires_at: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<Memory>> {
        let new = NewMemory {
            id,
            content,
            title,
            importance,
            confidence,
            source,
            labels,
            unit_type: parse_unit(py, unit_type, "unit_type")?,
            event_start,
            event_end,
            temporal_context: parse_temporal(py, temporal_context)?,
            source_thread_id,
            source_message_id,
            metadata: metadata_arg(py, metadata, "metadata")?,
            space_id: space,
            embedding: embedding.filter(|e| !e.is_none()).map(|e| vector_arg(py, e, "embedding")).transpose()?,
            expires_at: expiry_arg(py, expires_at, "expires_at")?,
            ..Default::default()
        };
        let api = self.api(py)?;
        let created = py.detach(move || api.store().create_memory(new)).map_err(to_py)?;
        view(py, created.view)
    }

    /// Stores many memories in one transaction (all or none) and returns them in order. `items`: strings, or
    /// dicts with the keyword fields of `add` (`content` required). `embeddings`: a 2-D `float32` array
    /// (`len(items) x dim`) or a list of vectors, for external-embedder stores.
    ///
    /// Raises `InvalidInput` naming the item (`memories.3.embedding`) and stores nothing.
    #[pyo3(signature = (items, *, embeddings=None, space=None))]
    fn add_many(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        embeddings: Option<&Bound<'_, PyAny>>,
        space: Option<&str>,
    ) -> PyResult<Vec<Py<Memory>>> {
        let mut batch = Vec::new();
        for item in items.try_iter().map_err(|_| invalid(py, "items", "expected a sequence"))? {
            batch.push(new_memory(py, &item?, space)?);
        }
        if let Some(e) = embeddings.filter(|e| !e.is_none()) {
            let vectors = vectors_arg(py, e, "embeddings", batch.len())?;
            for (m, v) in batch.iter_mut().zip(vectors) {
                m.embedding = Some(v);
            }
        }
        let api = self.api(py)?;
        let created = py.detach(move || api.store().create_memories(batch)).map_err(to_py)?;
        created.into_iter().map(|c| view(py, c.view)).collect()
    }

    /// The memory with this id. `space`, when given, must be its space. Raises `NotFound`.
    #[pyo3(signature = (id, *, space=None))]
    fn get(&self, py: Python<'_>, id: &str, space: Option<&str>) -> PyResult<Py<Memory>> {
        let api = self.api(py)?;
        let v = py.detach(|| api.store().get_memory(id, space)).map_err(to_py)?;
        view(py, v)
    }

    /// The stored vector of a memory as a 1-D `float32` numpy array (`dim` floats, L2-normalised, stored as
    /// float16: relative error at most 2^-11), or None when it has none. Raises `NotFound`.
    #[pyo3(signature = (id, *, space=None))]
    fn embedding<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        space: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyArray1<f32>>>> {
        let api = self.api(py)?;
        let v = py.detach(|| api.store().memory_embedding(id, space)).map_err(to_py)?;
        Ok(v.map(|v| PyArray1::from_vec(py, v)))
    }

    /// Changes the given fields and returns the memory. `labels` replaces the set; `move_to` moves it to
    /// another space; `embedding` replaces the vector (external-embedder stores); `expires_at` sets the expiry
    /// (an aware `datetime` or RFC 3339 str) and `clear_expiry=True` removes it. Raises `NotFound`,
    /// `InvalidInput`.
    #[pyo3(signature = (id, *, content=None, title=None, labels=None, importance=None, confidence=None, unit_type=None, metadata=None, source=None, event_start=None, event_end=None, temporal_context=None, move_to=None, embedding=None, space=None, expires_at=None, clear_expiry=false))]
    #[allow(clippy::too_many_arguments)]
    fn update(
        &self,
        py: Python<'_>,
        id: &str,
        content: Option<String>,
        title: Option<String>,
        labels: Option<Vec<String>>,
        importance: Option<f64>,
        confidence: Option<f64>,
        unit_type: Option<&str>,
        metadata: Option<&Bound<'_, PyAny>>,
        source: Option<String>,
        event_start: Option<String>,
        event_end: Option<String>,
        temporal_context: Option<&str>,
        move_to: Option<String>,
        embedding: Option<&Bound<'_, PyAny>>,
        space: Option<&str>,
        expires_at: Option<&Bound<'_, PyAny>>,
        clear_expiry: bool,
    ) -> PyResult<Py<Memory>> {
        let expires_at = match (expiry_arg(py, expires_at, "expires_at")?, clear_expiry) {
            (Some(_), true) => return Err(invalid(py, "clear_expiry", "give expires_at or clear_expiry, not both")),
            (Some(t), false) => Some(Some(t)),
            (None, true) => Some(None),
            (None, false) => None,
        };
        let patch = MemoryPatch {
            title,
            content,
            importance,
            confidence,
            unit_type: parse_unit(py, unit_type, "unit_type")?,
            space_id: move_to,
            labels,
            source,
            event_start,
            event_end,
            temporal_context: parse_temporal(py, temporal_context)?,
            metadata: metadata_arg(py, metadata, "metadata")?,
            embedding: embedding.filter(|e| !e.is_none()).map(|e| vector_arg(py, e, "embedding")).transpose()?,
            expires_at,
        };
        let api = self.api(py)?;
        let v = py.detach(|| api.store().update_memory(id, patch, space)).map_err(to_py)?;
        view(py, v)
    }

    /// Deletes a memory (and its edges). Raises `NotFound`.
    #[pyo3(signature = (id, *, space=None))]
    fn delete(&self, py: Python<'_>, id: &str, space: Option<&str>) -> PyResult<()> {
        let api = self.api(py)?;
        py.detach(|| api.store().delete_memory(id, space)).map_err(to_py)?;
        Ok(())
    }

    /// Hybrid search (BM25 and vectors fused), best first. `mode`: `hybrid`, `lexical` or `vector`. `limit`:
    /// 1..=100. `filters`: a dict (`labels`, `unit_type`, `states`, `importance_min`, `recorded_from`,
    /// `recorded_to`, `event_from`, `event_to`, `include_history`, `thread_id`, `source_id`).
    /// `query_embedding`: a 1-D `float32` vector (`dim` floats) used in place of embedding `query` (required in
    /// external-embedder stores for vector ranking; `query` may then be ""). `include_context`: also return the
    /// messages or chunks around each hit (`Hit.context`; an int asks for that many on each side, 1..=10).
    /// `priors`: the entity, PageRank, importance and decay adjustments of the ranking (`docs/retrieval.md`);
    /// False ranks by the retrieval scores alone (cosine similarity in `vector` mode), as a vector database does.
    ///
    /// Raises `InvalidInput` (empty query, limit out of range, bad vector), `NotFound` (unknown space).
    #[pyo3(signature = (query, *, limit=10, mode="hybrid", filters=None, query_embedding=None, include_context=None, space=DEFAULT_SPACE, priors=true))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        query: String,
        limit: usize,
        mode: &str,
        filters: Option<&Bound<'_, PyAny>>,
        query_embedding: Option<&Bound<'_, PyAny>>,
        include_context: Option<&Bound<'_, PyAny>>,
        space: &str,
        priors: bool,
    ) -> PyResult<Vec<Hit>> {
        let q = search_query(py, query, limit, mode, filters, query_embedding, include_context, space, priors)?;
        let api = self.api(py)?;
        let found = py.detach(|| api.store().search(&q)).map_err(to_py)?;
        found.hits.into_iter().map(|h| Hit::new(py, h)).collect()
    }

    /// `search`, with how it ran: the mode, the candidate count, the engine's own milliseconds and any
    /// fallback (`SearchResults`). Takes the same arguments and raises the same errors as `search`.
    #[pyo3(signature = (query, *, limit=10, mode="hybrid", filters=None, query_embedding=None, include_context=None, space=DEFAULT_SPACE, priors=true))]
    #[allow(clippy::too_many_arguments)]
    fn search_results(
        &self,
        py: Python<'_>,
        query: String,
        limit: usize,
        mode: &str,
        filters: Option<&Bound<'_, PyAny>>,
        query_embedding: Option<&Bound<'_, PyAny>>,
        include_context: Option<&Bound<'_, PyAny>>,
        space: &str,
        priors: bool,
    ) -> PyResult<SearchResults> {
        let q = search_query(py, query, limit, mode, filters, query_embedding, include_context, space, priors)?;
        let api = self.api(py)?;
        let found = py.detach(|| api.store().search(&q)).map_err(to_py)?;
        Ok(SearchResults {
            hits: found.hits.into_iter().map(|h| Py::new(py, Hit::new(py, h)?)).collect::<PyResult<_>>()?,
            mode: found.mode.as_str().to_owned(),
            candidates: found.candidates,
            elapsed_ms: found.elapsed_ms,
            fallback: found.fallback,
        })
    }

    /// Blocks until the background work of the writes so far is done, or `timeout` seconds pass: vector
    /// graphs complete (searches run at HNSW speed), re-embedding finished, community and PageRank results
    /// current. Returns True when idle. For benchmarks and tests; searches are correct meanwhile.
    #[pyo3(signature = (timeout=60.0))]
    fn wait_until_idle(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        if !timeout.is_finite() || timeout < 0.0 {
            return Err(invalid(py, "timeout", "expected a number of seconds, 0 or more"));
        }
        let api = self.api(py)?;
        Ok(py.detach(|| {
            let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout.min(1e9));
            let left = || until.saturating_duration_since(std::time::Instant::now());
            api.store().wait_for_indexes(left()) && api.store().wait_for_graph(left())
        }))
    }

    /// Runs any route of the API in-process, as the daemon would (without its key and host checks): `method`
    /// (`GET`, `POST`, `PATCH`, `PUT`, `DELETE`), `target` (path with an optional `?query`, percent-encoded),
    /// `body` (JSON bytes or str). API errors are responses with that status (see `Response.raise_for_status`).
    #[pyo3(signature = (method, target, body=None))]
    fn request(
        &self,
        py: Python<'_>,
        method: &str,
        target: &str,
        body: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Response> {
        let bytes: Vec<u8> = match body.filter(|b| !b.is_none()) {
            None => Vec::new(),
            Some(b) => {
                if let Ok(s) = b.cast::<PyString>() {
                    s.to_cow()?.as_bytes().to_vec()
                } else {
                    b.extract::<Vec<u8>>().map_err(|_| invalid(py, "body", "expected bytes or str (JSON)"))?
                }
            }
        };
        let api = self.api(py)?;
        let resp = py.detach(|| {
            let r = api.handle(ApiRequest::from_target(method, target, &bytes));
            let ct = r.content_type;
            let status = r.status;
            r.into_bytes().map(|b| (status, ct, b))
        });
        let (status, content_type, body) = resp.map_err(to_py)?;
        Ok(Response { status, body, content_type })
    }

    /// Writes a consistent snapshot of the store to a ZIP archive (`path`, inside the data directory or
    /// `allowed_paths`; default `<data dir>/exports/engram-export-<UTC time>.zip`). Raises `Conflict` when the
    /// file exists and `overwrite` is false, `Forbidden` for a path outside the allowed directories.
    #[pyo3(signature = (path=None, *, compress=true, overwrite=false))]
    fn export(&self, py: Python<'_>, path: Option<PathBuf>, compress: bool, overwrite: bool) -> PyResult<ExportReport> {
        let api = self.api(py)?;
        let opts = ExportOptions { path, compress, overwrite, ..Default::default() };
        let r = py.detach(|| api.store().export_data(&opts)).map_err(to_py)?;
        Ok(ExportReport {
            path: r.export_path,
            counts: r.counts,
            bytes: r.bytes,
            sha256: r.sha256,
            elapsed_ms: r.elapsed_ms,
        })
    }

    /// Imports an archive written by `export` (or the daemon's `/data/export`). `mode`: `merge` (keep stored
    /// records, fill their empty fields), `skip` or `overwrite`. Raises `NotFound` for a missing file,
    /// `InvalidInput` or `Corrupt` for a damaged archive (nothing is imported).
    #[pyo3(signature = (path, *, mode="merge"))]
    fn import_archive(&self, py: Python<'_>, path: PathBuf, mode: &str) -> PyResult<ImportReport> {
        let mode = ImportMode::parse(mode).ok_or_else(|| invalid(py, "mode", "expected merge, skip or overwrite"))?;
        let api = self.api(py)?;
        let r = py
            .detach(|| {
                let store = api.store();
                let path = store.config().confine_named(&path, "path")?;
                store.import_data(&path, mode, &ImportProgress::default())
            })
            .map_err(to_py)?;
        let counts = r
            .counts
            .into_iter()
            .map(|(k, c)| {
                let m = serde_json::to_value(c)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .map(|o| o.into_iter().filter_map(|(k, v)| v.as_u64().map(|n| (k, n))).collect())
                    .unwrap_or_default();
                (k, m)
            })
            .collect();
        Ok(ImportReport { records: r.records, counts, elapsed_ms: r.elapsed_ms })
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!("Store({:?}, embedder={:?}, {state})", self.path.display().to_string(), self.embedder)
    }
}

/// The library version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _engram(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Store>()?;
    m.add_class::<Memory>()?;
    m.add_class::<Hit>()?;
    m.add_class::<SearchResults>()?;
    m.add_class::<ContextItem>()?;
    m.add_class::<Response>()?;
    m.add_class::<ExportReport>()?;
    m.add_class::<ImportReport>()?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
