//! The store: open, the hot calls (`add`, `get`, `update`, `delete`, `search`, `memories`, `count`,
//! `embedding`, `export`, `import_archive`) straight to the engine, the rest through `request`.

use std::path::PathBuf;
use std::sync::Arc;

use engram::api::{Api, ApiRequest, ServiceInfo};
use engram::embed::EmbedderChoice;
use engram::{
    DEFAULT_SPACE, ExportOptions, ImportMode, ImportProgress, KnowledgeStore, MemoryPatch, NewMemory, StoreConfig,
};
use numpy::PyArray1;
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::convert::*;
use crate::errors::*;
use crate::memory::*;

/// An open store (one redb file in a data directory). Use as a context manager, or call `close()`.
/// `engram.Store` subclasses it with the thread, label, space and source calls.
#[pyclass(module = "engram._engram", frozen, subclass)]
pub(crate) struct Store {
    api: crate::slot::ApiSlot,
    path: PathBuf,
    dim: usize,
    embedder: String,
}

impl Store {
    fn api(&self, py: Python<'_>) -> PyResult<Arc<Api>> {
        crate::slot::open_api(&self.api, py)
    }
}

#[pymethods]
impl Store {
    /// Opens (or creates) the store in directory `path`. `embedder`: `"builtin"` (the default: the static
    /// model compiled into Engram, 256 dimensions, no model files), `"hashing"` (character trigrams, no semantic
    /// similarity), a directory holding a sentence-embedding ONNX model (needs `ORT_DYLIB_PATH`), or
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
        } else if embedder == "hashing" {
            EmbedderChoice::Hashing
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
        Ok(Store { api: Arc::new(RwLock::new(Some(Arc::new(api)))), path, dim, embedder: name })
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
        let created = py.detach(move || api.store().memories().create(new)).map_err(to_py)?;
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
        let created = py.detach(move || api.store().memories().create_many(batch)).map_err(to_py)?;
        created.into_iter().map(|c| view(py, c.view)).collect()
    }

    /// The memory with this id. `space`, when given, must be its space. Raises `NotFound`.
    #[pyo3(signature = (id, *, space=None))]
    fn get(&self, py: Python<'_>, id: &str, space: Option<&str>) -> PyResult<Py<Memory>> {
        let api = self.api(py)?;
        let v = py.detach(|| api.store().memories().get(id, space)).map_err(to_py)?;
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
        let v = py.detach(|| api.store().memories().embedding(id, space)).map_err(to_py)?;
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
        let v = py.detach(|| api.store().memories().update(id, patch, space)).map_err(to_py)?;
        view(py, v)
    }

    /// Deletes a memory (and its edges). Raises `NotFound`.
    #[pyo3(signature = (id, *, space=None))]
    fn delete(&self, py: Python<'_>, id: &str, space: Option<&str>) -> PyResult<()> {
        let api = self.api(py)?;
        py.detach(|| api.store().memories().delete(id, space)).map_err(to_py)?;
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
        let found = py.detach(|| api.store().search().run(&q)).map_err(to_py)?;
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
        let found = py.detach(|| api.store().search().run(&q)).map_err(to_py)?;
        Ok(SearchResults {
            hits: found.hits.into_iter().map(|h| Py::new(py, Hit::new(py, h)?)).collect::<PyResult<_>>()?,
            mode: found.mode.as_str().to_owned(),
            candidates: found.candidates,
            elapsed_ms: found.elapsed_ms,
            fallback: found.fallback,
        })
    }

    /// Every memory of `space` that passes `filters` (the dict `search` takes, plus `is_crystal` and
    /// `include_expired`: as `GET /memories`), in `order`: `recent` (newest first, the default), `importance`
    /// or `pagerank`; ties newest first, then by id. Returns an iterator that reads `page_size` memories
    /// (1..=1000) at a time, as the iteration reaches them; each page costs one pass over the space's catalog.
    /// `list(store.memories())` reads them all.
    ///
    /// Raises `InvalidInput` (a bad filter, order or page size), `NotFound` (unknown space; when the first page
    /// is read).
    #[pyo3(signature = (*, filters=None, order="recent", page_size=100, space=DEFAULT_SPACE))]
    fn memories(
        &self,
        py: Python<'_>,
        filters: Option<&Bound<'_, PyAny>>,
        order: &str,
        page_size: usize,
        space: &str,
    ) -> PyResult<crate::listing::MemoryIterator> {
        if !(1..=crate::listing::MAX_PAGE).contains(&page_size) {
            return Err(invalid(py, "page_size", format!("expected 1..={}", crate::listing::MAX_PAGE)));
        }
        let order = crate::listing::parse_order(py, order)?;
        let query = engram::ListQuery {
            space_id: space.to_owned(),
            filter: filter_arg(py, filters)?,
            limit: page_size,
            offset: 0,
        };
        self.api(py)?;
        Ok(crate::listing::MemoryIterator::new(self.api.clone(), query, order))
    }

    /// How many memories of `space` pass `filters` (as `memories` takes them). O(n) in the space's memories,
    /// read from the in-memory catalog.
    ///
    /// Raises `InvalidInput` (a bad filter), `NotFound` (unknown space).
    #[pyo3(signature = (*, filters=None, space=DEFAULT_SPACE))]
    fn count(&self, py: Python<'_>, filters: Option<&Bound<'_, PyAny>>, space: &str) -> PyResult<usize> {
        let query =
            engram::ListQuery { space_id: space.to_owned(), filter: filter_arg(py, filters)?, limit: 0, offset: 0 };
        let api = self.api(py)?;
        let page = py.detach(|| api.store().memories().list(&query)).map_err(to_py)?;
        Ok(page.total)
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
            api.store().admin().wait_for_indexes(left()) && api.store().graph().wait(left())
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
        let r = py.detach(|| api.store().transfer().export(&opts)).map_err(to_py)?;
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
                store.transfer().import(&path, mode, &ImportProgress::default())
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

    /// One sync pass through a shared folder (docs/sync.md): writes this store's new changes as sealed segments
    /// and applies the other devices' new ones. A store in no sync group joins the group of `code` through
    /// `folder`, or without a code starts one there (the result's `pairing_code` is what the other devices join
    /// with; keep it secret). Returns the pass's report: `written_segments`, `written_changes`,
    /// `applied_segments`, `applied` (`applied`, `stale`, `conflicts`, `refused`) and `peers`. Raises
    /// `InvalidInput` for a bad code, or without `folder` outside a group; `Conflict` for another group's code.
    #[pyo3(signature = (folder=None, *, code=None))]
    fn sync<'py>(&self, py: Python<'py>, folder: Option<PathBuf>, code: Option<String>) -> PyResult<Bound<'py, PyAny>> {
        let api = self.api(py)?;
        let out = py.detach(|| -> engram::Result<serde_json::Value> {
            let sync = api.store().sync();
            let mut pairing = None;
            if let Some(folder) = &folder {
                match (&code, sync.folder()?) {
                    (Some(code), _) => sync.join_folder(folder, code)?,
                    (None, None) => pairing = Some(sync.init_folder(folder)?),
                    (None, Some(_)) => {}
                }
            }
            let report = sync.sync_folder()?;
            let mut v = serde_json::to_value(report)
                .map_err(|e| engram::Error::new(engram::ErrorKind::Internal, e.to_string()))?;
            if let Some(p) = pairing {
                v["pairing_code"] = p.into();
            }
            Ok(v)
        });
        json_to_py(py, &out.map_err(to_py)?)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!("Store({:?}, embedder={:?}, {state})", self.path.display().to_string(), self.embedder)
    }
}
