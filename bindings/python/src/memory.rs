//! The result types: a stored memory, search hits and results, responses of `request`, export and import
//! reports.

use std::collections::BTreeMap;

use engram::{ErrorKind, MemoryView, SearchHit};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::*;
use crate::errors::*;

/// A stored memory (read-only; `Store.update` changes it). Times are aware `datetime`s in UTC.
#[pyclass(module = "engram._engram", frozen)]
pub(crate) struct Memory {
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
pub(crate) struct ContextItem {
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
pub(crate) struct Hit {
    hit: SearchHit,
    memory: Py<Memory>,
}

impl Hit {
    /// A hit whose memory moves into its Python object (no copy); the hit keeps an empty record beside the
    /// scores, terms and context it reads.
    pub(crate) fn new(py: Python<'_>, mut h: SearchHit) -> PyResult<Hit> {
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
pub(crate) struct Response {
    /// HTTP status (200, 404, 422, ...).
    #[pyo3(get)]
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
    /// `application/json`, or `application/zip` for archive downloads.
    #[pyo3(get)]
    pub(crate) content_type: &'static str,
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
pub(crate) struct SearchResults {
    /// The hits, best first.
    pub(crate) hits: Vec<Py<Hit>>,
    /// The mode that ran (`hybrid`, `lexical` or `vector`); a vector or hybrid search falls back to `lexical`
    /// when the space has no vectors for the query.
    pub(crate) mode: String,
    /// Candidates ranked before the cut to `limit`.
    pub(crate) candidates: usize,
    /// Milliseconds the engine spent, measured inside it (validation to the last hit; not the binding's
    /// conversions).
    pub(crate) elapsed_ms: f64,
    /// Why the requested mode could not run, when it fell back.
    pub(crate) fallback: Option<String>,
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
pub(crate) struct ExportReport {
    /// The archive's path.
    pub(crate) path: String,
    /// Records per kind (`memories`, `threads`, ...).
    pub(crate) counts: BTreeMap<String, u64>,
    /// Archive size in bytes.
    pub(crate) bytes: u64,
    /// SHA-256 of the archive, hex.
    pub(crate) sha256: String,
    /// Milliseconds taken.
    pub(crate) elapsed_ms: f64,
}

#[pymethods]
impl ExportReport {
    fn __repr__(&self) -> String {
        format!("ExportReport(path={:?}, bytes={}, sha256={:?})", self.path, self.bytes, self.sha256)
    }
}

/// What `Store.import_archive` read and wrote.
#[pyclass(module = "engram._engram", frozen, get_all)]
pub(crate) struct ImportReport {
    /// Records read from the archive.
    pub(crate) records: u64,
    /// Per kind: `{"created": n, "updated": n, "skipped": n, ...}`.
    pub(crate) counts: BTreeMap<String, BTreeMap<String, u64>>,
    /// Milliseconds taken.
    pub(crate) elapsed_ms: f64,
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

pub(crate) fn view(py: Python<'_>, v: MemoryView) -> PyResult<Py<Memory>> {
    Py::new(py, Memory { view: v })
}
