//! Sources (the library): ingestion of documents with SHA-256 deduplication, parsing into text, a section tree
//! and chunks ([`crate::extract::document`]), memory extraction (one memory per substantive chunk), listing
//! with label and metadata filters, BM25 search over chunks, paged content reads and deletion.

use crate::storage::Readable;
use sha2::Digest;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::core::chunks::ChunkIndex;
use super::memories::{MemoryWrite, check_label_name};
use super::{IndexOp, KnowledgeStore, Page};
use crate::error::ErrorCode;
use crate::error::{Error, FieldError, Result};
use crate::extract::document::{self, Chunk, Format};
use crate::extract::pdf;
use crate::index::bm25;
use crate::index::lexicon::{self, Lexicon};
use crate::model::{Label, Metadata, SOURCE_STATES, Source, Timestamp};
use crate::store::source;

pub use crate::model::MAX_SOURCE_BYTES;
/// Longest file name, in characters.
const MAX_NAME_CHARS: usize = 255;
/// Chunks with fewer words give no memory.
const MIN_MEMORY_WORDS: usize = 8;

mod extract;
use extract::{has_title, memories_of};

/// A document to ingest.
#[derive(Debug, Clone, Default)]
pub struct NewSource {
    /// The original bytes, at most [`MAX_SOURCE_BYTES`].
    pub bytes: Vec<u8>,
    /// File name; directories are stripped. 1..=255 characters.
    pub original_name: String,
    /// Declared MIME type (may be empty); the extension decides first.
    pub mime_type: String,
    /// `file` (default) or `url`.
    pub source_type: String,
    /// The server path it was read from, when ingested by path.
    pub file_path: String,
    /// Where it came from.
    pub source_url: String,
    /// Target space (default `default`).
    pub space_id: Option<String>,
    /// Label names for the source and the memories extracted from it.
    pub labels: Vec<String>,
    /// Caller data.
    pub metadata: Metadata,
    /// Extract memories (default true in the HTTP API); false stops at `chunked`.
    pub extract_memories: bool,
}

/// What an ingestion did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IngestReport {
    /// The source (the existing one when `deduplicated`).
    pub source: Source,
    /// True when the same bytes were already a source of the space: nothing was written.
    pub deduplicated: bool,
    /// Ids of the memories extracted.
    pub memory_ids: Vec<String>,
}

/// Filters of [`KnowledgeStore::list_sources`].
#[derive(Debug, Clone)]
pub struct SourceQuery {
    /// Space (default `default`).
    pub space_id: String,
    /// `file` or `url`.
    pub source_type: Option<String>,
    /// One of [`SOURCE_STATES`].
    pub lifecycle_state: Option<String>,
    /// Label names or ids; every one must be on the source (AND).
    pub labels: Vec<String>,
    /// `key=value` pairs: different keys AND, values of one key OR; equality on the metadata value (strings
    /// compared as they are, other JSON values by their JSON text).
    pub metadata: Vec<(String, String)>,
    /// 1..=200.
    pub limit: usize,
    /// Items to skip.
    pub offset: usize,
}

/// Column statistics of a data-table source (`GET /sources/{id}/analysis`, MCP `analyze_source_data`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SourceAnalysis {
    /// The source id.
    pub source_id: String,
    /// Its file name.
    pub source_name: String,
    /// One sheet per table: a CSV or TSV file has one.
    pub sheets: Vec<crate::extract::table::SheetAnalysis>,
}

/// A window of a source's parsed text (`GET /sources/{id}/content`). Offsets and lengths are in bytes of the
/// UTF-8 text; a window never splits a character.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SourceContent {
    /// The source id.
    pub source_id: String,
    /// Its file name.
    pub original_name: String,
    /// Start of the window (moved back to a character boundary).
    pub offset: u64,
    /// Bytes returned.
    pub returned_length: u64,
    /// Bytes of the whole text.
    pub total_length: u64,
    /// True when text follows the window.
    pub has_more: bool,
    /// Offset of the next window, when `has_more`.
    pub next_offset: Option<u64>,
    /// The text of the window.
    pub content: String,
}

/// A chunk matching a search.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ChunkHit {
    /// Index of the chunk in its source.
    pub chunk_index: u64,
    /// Heading path.
    pub section: String,
    /// Byte offset in the parsed text (usable as `offset` of the content route).
    pub offset: u64,
    /// BM25 score.
    pub score: f32,
    /// The chunk's text, at most 300 characters.
    pub snippet: String,
}

/// The chunks of one source that match a query ([`KnowledgeStore::search_source_chunks`]).
#[derive(Debug, Clone)]
pub struct SourceChunks {
    /// The source.
    pub source: Source,
    /// The best chunks, best first, each with its full text.
    pub chunks: Vec<(ChunkHit, String)>,
    /// How many chunks the source has.
    pub total_chunks: usize,
}

/// A source matching a search: its best chunks.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SourceHit {
    /// The source.
    pub source: Source,
    /// Best chunk score (BM25; a match in the file name adds the name's own score).
    pub score: f32,
    /// Matching chunks, best first (at most 3).
    pub chunks: Vec<ChunkHit>,
}

/// A scored chunk: (chunk index, BM25 score, snippet).
type Scored<'a> = (u64, f32, &'a str);

fn sha256_hex(bytes: &[u8]) -> String {
    let d = sha2::Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// `name` without directories (either separator).
/// Checks a new source before anything is read or stored: its name, size, format and label names. Returns the
/// base name, the format and the canonical label names.
///
/// # Errors
/// [`crate::ErrorKind::InvalidInput`] with every problem found (`loc ["file"]` or `["labels", i]`).
fn check_new_source(new: &NewSource) -> Result<(String, Format, BTreeSet<String>)> {
    let name = base_name(&new.original_name).to_string();
    let mut errs = Vec::new();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        errs.push(FieldError::field(
            &["file"],
            "value_error",
            "the file name must have 1 to 255 characters and no control characters",
            serde_json::Value::String(new.original_name.clone()),
        ));
    }
    if new.bytes.len() > MAX_SOURCE_BYTES {
        errs.push(FieldError::field(
            &["file"],
            "value_error",
            format!("the document has {} bytes; at most {MAX_SOURCE_BYTES} are accepted", new.bytes.len()),
            serde_json::Value::Null,
        ));
    }
    let format = Format::detect(&name, &new.mime_type);
    if format.is_none() {
        errs.push(FieldError::field(
            &["file"],
            "unsupported_format",
            "only markdown, plain text, HTML, CSV, TSV, DOCX and PDF documents can be parsed in this release",
            serde_json::json!({"file_name": name, "mime_type": new.mime_type}),
        ));
    }
    let mut labels = BTreeSet::new();
    for (i, l) in new.labels.iter().enumerate() {
        let idx = i.to_string();
        if let Some(n) = check_label_name(l, &["labels", &idx], &mut errs) {
            labels.insert(n);
        }
    }
    match format {
        Some(format) if errs.is_empty() => Ok((name, format, labels)),
        _ => Err(Error::invalid(errs)),
    }
}

/// The record of a new source, `ingested`, before its document is parsed.
fn source_record(
    new: &NewSource,
    space: &str,
    name: &str,
    format: Format,
    sha: &str,
    labels: &BTreeSet<String>,
    now: Timestamp,
) -> Source {
    Source {
        id: format!("src_{}", uuid::Uuid::now_v7().simple()),
        source_type: if new.source_type.is_empty() { "file".into() } else { new.source_type.clone() },
        original_name: name.to_string(),
        mime_type: format.mime().into(),
        file_path: new.file_path.clone(),
        parsed_path: format!("/sources/{}", crate::text::encode_segment(name)),
        source_url: new.source_url.clone(),
        sha256: sha.to_string(),
        size_bytes: new.bytes.len() as u64,
        version: 1,
        space_id: space.to_string(),
        lifecycle_state: "ingested".into(),
        chunk_count: 0,
        memory_count: 0,
        section_tree: "[]".into(),
        summary: String::new(),
        error_message: String::new(),
        created_at: now,
        updated_at: now,
        metadata: new.metadata.clone(),
        label_ids: labels.iter().map(|n| Label::id_for(n)).collect(),
    }
}

/// Records a parse's outcome on the source: `chunked` with its sections, summary and chunk count (and a PDF's
/// title when none was given), or `error` with the reason. Returns the parsed document, if any.
fn apply_parse(
    source: &mut Source,
    format: Format,
    parsed: std::result::Result<document::Parsed, String>,
) -> Option<document::Parsed> {
    match parsed {
        Ok(p) => {
            if let (Format::Pdf, false, Some(t)) = (format, has_title(&source.metadata), &p.title) {
                source.metadata.0.insert("title".into(), t.clone().into());
            }
            source.lifecycle_state = "chunked".into();
            source.section_tree = serde_json::to_string(&p.sections).unwrap_or_else(|_| "[]".into());
            source.summary = document::summary(&p.text, 300);
            source.chunk_count = p.chunks.len() as u64;
            Some(p)
        }
        Err(msg) => {
            source.lifecycle_state = "error".into();
            source.error_message = msg;
            None
        }
    }
}

fn base_name(name: &str) -> &str {
    name.rsplit(['/', '\\']).next().unwrap_or(name).trim()
}

fn memory_id(source_id: &str, chunk: usize) -> String {
    format!("{source_id}#c{chunk}")
}

impl KnowledgeStore {
    /// Ingests a document: stores its bytes, parses it, indexes its chunks and (unless turned off) extracts one
    /// memory per chunk of at least 8 words that is not chatter, with the source's labels and
    /// `metadata.source_id`. The same bytes in the same space return the existing source (`deduplicated`).
    ///
    /// A PDF's pages become sections `Page N`; its memories carry `page` in `source_range` and metadata, and
    /// its information dictionary's title (else its first line) becomes `metadata.title` unless one is given.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::InvalidInput`]: empty or too long a name, more than 64 MiB, an unsupported format
    ///   (images, office files other than DOCX: `loc ["file"]`, type `unsupported_format`), a DOCX or PDF that
    ///   cannot be read (encrypted, broken, a ZIP or stream bomb, a PDF without a text layer, over the PDF
    ///   bounds of [`crate::extract::pdf::PdfLimits`]: type `unparsable_document`, with the reason; nothing
    ///   stored), a bad label name.
    /// * [`crate::ErrorKind::NotFound`] (`space_not_found`).
    pub fn ingest_source(&self, new: NewSource) -> Result<IngestReport> {
        let space = new.space_id.clone().unwrap_or_else(|| super::DEFAULT_SPACE.to_string());
        let (name, format, labels) = check_new_source(&new)?;
        self.spaces().require(&space)?;
        let sha = sha256_hex(&new.bytes);
        if let Some(existing) = self.source_by_sha(&space, &sha)? {
            return Ok(IngestReport { source: existing, deduplicated: true, memory_ids: vec![] });
        }
        let now = Timestamp::now();
        let mut source = source_record(&new, &space, &name, format, &sha, &labels, now);
        let parsed = document::parse(format, &new.bytes, &name);
        if let (Err(why), true) = (&parsed, format.refuses_unparsable()) {
            return Err(Error::invalid(vec![FieldError::field(
                &["file"],
                "unparsable_document",
                format!("{name} cannot be read: {why}"),
                serde_json::json!({"file_name": name, "mime_type": format.mime()}),
            )]));
        }
        let parsed = apply_parse(&mut source, format, parsed);
        if let Some(existing) = self.put_source(&source, &new.bytes, parsed.as_ref(), &labels, now)? {
            let source = self.get_source(&existing, Some(&space))?;
            return Ok(IngestReport { source, deduplicated: true, memory_ids: vec![] });
        }
        self.core.chunk_index.write().remove(&space);
        let memory_ids = match (&parsed, new.extract_memories) {
            (Some(p), true) => self.extract_source_memories(&mut source, p, &labels)?,
            _ => Vec::new(),
        };
        Ok(IngestReport { source, deduplicated: false, memory_ids })
    }

    /// Writes a new source, its bytes, text and chunks, and the labels it names, in one write transaction.
    /// Returns the id of the source that won instead when a concurrent ingestion stored the same bytes first
    /// (checked again under the writer lock).
    fn put_source(
        &self,
        source: &Source,
        bytes: &[u8],
        parsed: Option<&document::Parsed>,
        labels: &BTreeSet<String>,
        now: Timestamp,
    ) -> Result<Option<String>> {
        let (space, id) = (source.space_id.as_str(), source.id.as_str());
        self.core.write(|txn, _| {
            if let Some(id) = source::source_sha(txn)?.get((space, source.sha256.as_str()))? {
                return Ok(Some(id.value().to_string()));
            }
            let mut t = MemoryWrite::open(txn)?;
            for n in labels {
                let lid = Label::id_for(n);
                if t.labels.get(space, lid.as_str())?.is_none() {
                    let l = super::memories::new_label(space, n, None, None, now);
                    t.labels.put(space, lid.as_str(), &l)?;
                }
            }
            drop(t);
            source::sources(txn)?.put((space, id), source)?;
            source::source_space(txn)?.put(id, space)?;
            source::source_sha(txn)?.put((space, source.sha256.as_str()), id)?;
            source::source_files(txn)?.put(id, bytes)?;
            if let Some(p) = parsed {
                source::source_text(txn)?.put(id, p.text.as_bytes())?;
                let mut chunks = source::source_chunks(txn)?;
                for (i, c) in p.chunks.iter().enumerate() {
                    chunks.put((id, i as u64), c)?;
                }
            }
            self.core.feed.publish(txn, super::core::feed::ChangeOut::Sources(space))?;
            Ok(None)
        })
    }

    /// Extracts memories from a parsed source, and records the outcome on the source (`indexed` with its
    /// memory count, or `error` with the reason). Returns the memories' ids (none when extraction failed).
    fn extract_source_memories(
        &self,
        source: &mut Source,
        parsed: &document::Parsed,
        labels: &BTreeSet<String>,
    ) -> Result<Vec<String>> {
        let batch = memories_of(source, parsed, labels);
        let mut memory_ids: Vec<String> = batch.iter().filter_map(|m| m.id.clone()).collect();
        let outcome = if batch.is_empty() { Ok(()) } else { self.create_memories(batch).map(|_| ()) };
        match outcome {
            Ok(()) => {
                source.lifecycle_state = "indexed".into();
                source.memory_count = memory_ids.len() as u64;
            }
            Err(e) => {
                memory_ids.clear();
                source.lifecycle_state = "error".into();
                source.error_message = format!("memory extraction failed: {}", e.message());
            }
        }
        source.updated_at = Timestamp::now();
        self.core.write(|txn, _| {
            source::sources(txn)?.put((source.space_id.as_str(), source.id.as_str()), &*source)?;
            Ok(())
        })?;
        Ok(memory_ids)
    }

    /// Fetches `url` (`fetch::fetch` under the store's [`crate::net::UrlPolicy`]) and ingests the
    /// document like an upload ([`KnowledgeStore::ingest_source`]), with `source_type: "url"`, `source_url` the
    /// URL asked for, and `metadata.title` (an HTML page's `<title>`, else the first heading, else the URL),
    /// `metadata.fetched_at` (RFC 3339), `metadata.final_url` (after redirects) and `metadata.content_type`
    /// added to `template`'s metadata. The `Content-Type` header decides the parser (HTML, markdown, text,
    /// CSV, TSV, DOCX, PDF), then the URL's extension. Nothing is stored on any error.
    ///
    /// # Errors
    /// Those of `fetch::fetch`; [`crate::ErrorKind::InvalidInput`] at `["url"]` (`unsupported_format`) for a
    /// content type Engram cannot parse (images, other office files); those of
    /// [`KnowledgeStore::ingest_source`].
    #[cfg(feature = "url")]
    pub fn ingest_url(&self, url: &str, mut template: NewSource) -> Result<IngestReport> {
        if let Some(space) = &template.space_id {
            self.spaces().require(space)?;
        }
        let got = crate::fetch::fetch(url, &self.core.config.url_policy)?;
        tracing::info!(
            url = %got.final_url,
            bytes = got.bytes.len(),
            ms = got.elapsed.as_millis() as u64,
            "fetched a URL for ingestion"
        );
        let path_name = got
            .final_url
            .split(['?', '#'])
            .next()
            .and_then(|u| u.split_once("://").map(|(_, rest)| rest))
            .map(|rest| {
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                let last = path.rsplit('/').find(|s| !s.is_empty()).unwrap_or("");
                if last.is_empty() { host.to_string() } else { last.to_string() }
            })
            .unwrap_or_else(|| "page".into());
        let by_type = Format::detect("", &got.content_type).filter(|_| !got.content_type.is_empty());
        let by_name = Format::detect(&path_name, "").filter(|_| path_name.contains('.'));
        let Some(format) = by_type.or(by_name) else {
            return Err(Error::invalid(vec![FieldError::field(
                &["url"],
                "unsupported_format",
                format!(
                    "the URL serves '{}', which Engram cannot parse in this release (markdown, text, HTML, CSV, TSV, DOCX, PDF)",
                    got.content_type
                ),
                serde_json::json!({"url": url, "content_type": got.content_type}),
            )]));
        };
        let mut name: String = path_name.chars().filter(|c| !c.is_control() && *c != '\\').take(200).collect();
        if by_name != Some(format) {
            let ext = match format {
                Format::Markdown => "md",
                Format::Text => "txt",
                Format::Html => "html",
                Format::Csv => "csv",
                Format::Tsv => "tsv",
                Format::Docx => "docx",
                Format::Pdf => "pdf",
            };
            name = format!("{name}.{ext}");
        }
        let title = if format == Format::Html { html_title(&got.bytes) } else { None }.unwrap_or_default();
        let mut md = template.metadata.0.clone();
        md.entry("title".to_string()).or_insert_with(|| title.clone().into());
        md.insert("fetched_at".into(), Timestamp::now().to_rfc3339().into());
        md.insert("final_url".into(), got.final_url.clone().into());
        md.insert("content_type".into(), got.content_type.clone().into());
        template.metadata = Metadata(md);
        template.bytes = got.bytes;
        template.original_name = name;
        template.mime_type = format.mime().into();
        template.source_type = "url".into();
        template.source_url = got.url.clone();
        let mut report = self.ingest_source(template)?;
        // A page without a <title> (and a document without a title of its own): the first heading, else the URL.
        if title.is_empty() && !has_title(&report.source.metadata) && !report.deduplicated {
            let tree: serde_json::Value = serde_json::from_str(&report.source.section_tree).unwrap_or_default();
            let fallback = tree[0]["title"].as_str().map(str::to_string).unwrap_or_else(|| got.url.clone());
            report.source.metadata.0.insert("title".into(), fallback.into());
            let s = report.source.clone();
            self.core.write(|txn, _| {
                source::sources(txn)?.put((s.space_id.as_str(), s.id.as_str()), &s)?;
                Ok(())
            })?;
        }
        Ok(report)
    }

    /// Reads the file at `path` (confined to the data directory and the allowed directories, see
    /// [`crate::config::StoreConfig::confine`]) and ingests it with `file_path` set.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Forbidden`] (`path_not_allowed`) outside the allowed directories; [`crate::ErrorKind::NotFound`]
    /// (`file_not_found`) when there is no regular file there; those of [`KnowledgeStore::ingest_source`].
    pub fn ingest_path(&self, path: &std::path::Path, mut new: NewSource) -> Result<IngestReport> {
        let real = self.core.config.confine(path)?;
        let meta = std::fs::metadata(&real)
            .ok()
            .filter(|m| m.is_file())
            .ok_or_else(|| Error::not_found(ErrorCode::FileNotFound, format!("no file at '{}'", path.display())))?;
        if meta.len() > MAX_SOURCE_BYTES as u64 {
            return Err(Error::invalid_value(
                &["path"],
                "value_error",
                format!("the file has {} bytes; at most {MAX_SOURCE_BYTES} are accepted", meta.len()),
                serde_json::Value::Null,
            ));
        }
        new.bytes = std::fs::read(&real)?;
        if new.original_name.is_empty() {
            new.original_name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        }
        new.file_path = real.to_string_lossy().into_owned();
        self.ingest_source(new)
    }

    fn source_by_sha(&self, space: &str, sha: &str) -> Result<Option<Source>> {
        let rtx = self.core.db.read()?;
        let Some(id) = source::source_sha(&rtx)?.get((space, sha))?.map(|v| v.value().to_string()) else {
            return Ok(None);
        };
        source::sources(&rtx)?.get((space, id.as_str()))
    }

    /// Source `id`; with `space_guard`, only when it lives there.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`source_not_found`).
    pub fn get_source(&self, id: &str, space_guard: Option<&str>) -> Result<Source> {
        let not_found = || Error::not_found(ErrorCode::SourceNotFound, format!("source '{id}' not found"));
        let rtx = self.core.db.read()?;
        let space = source::source_space(&rtx)?.get(id)?.map(|v| v.value().to_string()).ok_or_else(not_found)?;
        if space_guard.is_some_and(|g| g != space) {
            return Err(not_found());
        }
        source::sources(&rtx)?.get((space.as_str(), id))?.ok_or_else(not_found)
    }

    /// Every source of `space`, oldest first.
    ///
    /// # Errors
    /// Storage errors.
    pub fn all_sources(&self, space: &str) -> Result<Vec<Source>> {
        let rtx = self.core.db.read()?;
        let mut out: Vec<Source> = source::sources(&rtx)?.in_space(space)?.into_iter().map(|(_, s)| s).collect();
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Sources of a space passing the filters, newest first, one page.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for an unknown `lifecycle_state`; [`crate::ErrorKind::NotFound`] (`space_not_found`).
    pub fn list_sources(&self, q: &SourceQuery) -> Result<Page<Source>> {
        if let Some(s) = &q.lifecycle_state
            && !SOURCE_STATES.contains(&s.as_str())
        {
            return Err(Error::invalid_value(
                &["lifecycle_state"],
                "enum",
                format!("Input should be one of {}", SOURCE_STATES.join(", ")),
                serde_json::Value::String(s.clone()),
            ));
        }
        self.spaces().require(&q.space_id)?;
        let wanted: Vec<Vec<String>> = q
            .labels
            .iter()
            .map(|l| {
                let l = l.trim();
                let mut ids = vec![l.to_string(), Label::id_for(l)];
                ids.push(Label::id_for(&super::canonical_label(l)));
                ids
            })
            .collect();
        let mut by_key: HashMap<&str, Vec<&str>> = HashMap::new();
        for (k, v) in &q.metadata {
            by_key.entry(k.as_str()).or_default().push(v.as_str());
        }
        let mut all: Vec<Source> = self
            .all_sources(&q.space_id)?
            .into_iter()
            .filter(|s| q.source_type.as_ref().is_none_or(|t| &s.source_type == t))
            .filter(|s| q.lifecycle_state.as_ref().is_none_or(|t| &s.lifecycle_state == t))
            .filter(|s| wanted.iter().all(|ids| ids.iter().any(|id| s.label_ids.contains(id))))
            .filter(|s| {
                by_key.iter().all(|(k, vals)| {
                    s.metadata.0.get(*k).is_some_and(|have| {
                        let text = match have {
                            serde_json::Value::String(x) => x.clone(),
                            other => other.to_string(),
                        };
                        vals.iter().any(|v| *v == text)
                    })
                })
            })
            .collect();
        all.reverse();
        let total = all.len();
        let items = all.into_iter().skip(q.offset).take(q.limit).collect();
        Ok(Page { items, total, limit: q.limit, offset: q.offset })
    }

    /// A window of source `id`'s parsed text: `limit` bytes from `offset` (both moved to character
    /// boundaries).
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`source_not_found`).
    pub fn source_content(
        &self,
        id: &str,
        space_guard: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Result<SourceContent> {
        let s = self.get_source(id, space_guard)?;
        let text = self.source_text(id)?;
        let start = document::floor_boundary(&text, offset);
        let end = document::floor_boundary(&text, start.saturating_add(limit));
        Ok(SourceContent {
            source_id: s.id,
            original_name: s.original_name,
            offset: start as u64,
            returned_length: (end - start) as u64,
            total_length: text.len() as u64,
            has_more: end < text.len(),
            next_offset: (end < text.len()).then_some(end as u64),
            content: text[start..end].to_string(),
        })
    }

    /// Column statistics of data-table source `id` (CSV, TSV), computed from its stored bytes: per column the
    /// inferred type, counts, min, max, mean and top values ([`crate::extract::table`]); only the `columns`
    /// named (all when empty). Parsed again on each call: 8 to 35 MiB/s measured on real CSVs (docs/api.md).
    ///
    /// # Errors
    /// * [`crate::ErrorKind::NotFound`] (`source_not_found`).
    /// * [`crate::ErrorKind::InvalidInput`]: `loc ["source_id"]` type `not_tabular` when the source is not a CSV or TSV
    ///   file (or its table could not be read); `loc ["columns"]` naming the unknown columns and listing the
    ///   table's. (Over HTTP: `["path", "source_id"]` and `["query", "columns"]`.)
    pub fn analyze_source(&self, id: &str, space_guard: Option<&str>, columns: &[String]) -> Result<SourceAnalysis> {
        let s = self.get_source(id, space_guard)?;
        let not_tabular = |why: String| {
            Error::invalid(vec![FieldError::field(
                &["source_id"],
                "not_tabular",
                why,
                serde_json::json!({"source_id": s.id, "mime_type": s.mime_type}),
            )])
        };
        let format = Format::detect(&s.original_name, &s.mime_type).filter(|f| f.is_table());
        let Some(format) = format else {
            return Err(not_tabular(format!(
                "source '{}' ({}) is not a data table: only CSV and TSV files are analysed",
                s.original_name, s.mime_type
            )));
        };
        let bytes = {
            let rtx = self.core.db.read()?;
            let t = source::source_files(&rtx)?;
            t.get(s.id.as_str())?.map(|v| v.value().to_vec()).unwrap_or_default()
        };
        let table = crate::extract::table::parse(&bytes, format == Format::Tsv)
            .map_err(|e| not_tabular(format!("source '{}' could not be read as a table: {e}", s.original_name)))?;
        let sheet = crate::extract::table::analyze(&table, &s.original_name, columns).map_err(|unknown| {
            Error::invalid(vec![FieldError::field(
                &["columns"],
                "value_error",
                format!("unknown column(s) {}; the table has: {}", unknown.join(", "), table.headers.join(", ")),
                serde_json::json!(unknown),
            )])
        })?;
        Ok(SourceAnalysis { source_id: s.id, source_name: s.original_name, sheets: vec![sheet] })
    }

    /// The parsed text of source `id` (empty when parsing failed or there is no such source).
    ///
    /// # Errors
    /// Storage errors.
    pub fn source_text(&self, id: &str) -> Result<String> {
        let rtx = self.core.db.read()?;
        let t = source::source_text(&rtx)?;
        Ok(t.get(id)?.map(|v| String::from_utf8_lossy(v.value()).into_owned()).unwrap_or_default())
    }

    /// The chunks of source `id`, in order.
    pub(crate) fn source_chunks(&self, id: &str) -> Result<Vec<Chunk>> {
        source::chunks_of(&self.core.db.read()?, id)
    }

    fn chunk_index_of(&self, space: &str) -> Result<Arc<ChunkIndex>> {
        if let Some(ix) = self.core.chunk_index.read().get(space) {
            return Ok(ix.clone());
        }
        let mut lex = Lexicon::default();
        let mut docs = Vec::new();
        for s in self.all_sources(space)? {
            let text = self.source_text(&s.id)?;
            let mut add = |docs: &mut Vec<(String, u64, String)>, chunk: u64, body: &str| {
                let (tf, len) = lexicon::analyse(body);
                lex.add(docs.len() as u64, &tf, len);
                docs.push((s.id.clone(), chunk, body.chars().take(300).collect()));
            };
            add(&mut docs, u64::MAX, &s.original_name.replace(['.', '_', '-'], " "));
            for (i, c) in self.source_chunks(&s.id)?.iter().enumerate() {
                let a = document::floor_boundary(&text, c.offset as usize);
                let b = document::floor_boundary(&text, (c.offset + c.length) as usize);
                add(&mut docs, i as u64, &text[a..b]);
            }
        }
        let ix = Arc::new(ChunkIndex { lex, docs });
        self.core.chunk_index.write().insert(space.to_string(), ix.clone());
        Ok(ix)
    }

    /// BM25 search over the chunks and file names of a space's sources, grouped by source (best chunk first).
    /// The chunk index of a space is built on its first search and rebuilt after its sources change.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a blank query; [`crate::ErrorKind::NotFound`] (`space_not_found`). A query of
    /// stop words and punctuation only finds nothing.
    pub fn search_sources(&self, space: &str, query: &str, limit: usize) -> Result<Vec<SourceHit>> {
        self.rank_sources(space, query, limit, 3, None)
    }

    /// BM25 search within one source's chunks (`search_source_chunks`): the source, its best `limit` chunks
    /// with their full text (UTF-8, cut at character boundaries), and its number of chunks.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`source_not_found`): no such source, or not in `space_guard`; as
    /// [`KnowledgeStore::search_sources`] for the query.
    pub fn search_source_chunks(
        &self,
        id: &str,
        space_guard: Option<&str>,
        query: &str,
        limit: usize,
    ) -> Result<SourceChunks> {
        let source = self.get_source(id, space_guard)?;
        let all = self.source_chunks(&source.id)?;
        let hits = self.rank_sources(&source.space_id, query, 1, limit, Some(&source.id))?;
        let text = if hits.is_empty() { String::new() } else { self.source_text(&source.id)? };
        let out = hits
            .into_iter()
            .flat_map(|h| h.chunks)
            .map(|c| {
                let body = all
                    .get(c.chunk_index as usize)
                    .and_then(|k| {
                        let (from, to) = (k.offset as usize, (k.offset + k.length) as usize);
                        let from = (0..=from.min(text.len())).rev().find(|i| text.is_char_boundary(*i))?;
                        let to = (to.min(text.len())..=text.len()).find(|i| text.is_char_boundary(*i))?;
                        text.get(from..to).map(str::to_string)
                    })
                    .unwrap_or_else(|| c.snippet.clone());
                (c, body)
            })
            .collect();
        Ok(SourceChunks { source, chunks: out, total_chunks: all.len() })
    }

    /// Sources of `space` ranked by BM25 over chunks and names, `per_source` best chunks each; `only` keeps
    /// one source.
    fn rank_sources(
        &self,
        space: &str,
        query: &str,
        limit: usize,
        per_source: usize,
        only: Option<&str>,
    ) -> Result<Vec<SourceHit>> {
        if query.trim().is_empty() {
            return Err(Error::invalid_value(
                &["q"],
                "string_too_short",
                "query must not be empty",
                serde_json::Value::String(query.to_string()),
            ));
        }
        self.spaces().require(space)?;
        let (qtf, _) = lexicon::analyse(query);
        if qtf.is_empty() {
            return Ok(Vec::new());
        }
        let ix = self.chunk_index_of(space)?;
        let lists: Vec<(u32, &[bm25::Posting])> = qtf.iter().map(|(t, n)| (*n, ix.lex.postings(t))).collect();
        let mut scored = bm25::score(self.core.config.bm25, ix.lex.docs, ix.lex.avg_len(), &lists, &|_| true);
        // Neighbour expansion along each source's chunks (the store's [`crate::StoreConfig::expansion`]): a
        // chunk next to a matching one gains `a · score / distance` (the largest share), so the passage around
        // a match ranks with it. Chunks are numbered in order within a source, the file name (chunk
        // `u64::MAX`) takes no part.
        let exp = self.core.config.expansion;
        if exp.is_on() {
            // Chunks of one source are consecutive documents of the chunk index.
            let neighbours = |docno: u64, nb: &mut Vec<(u64, u32)>| {
                let Some((sid, chunk, _)) = ix.docs.get(docno as usize) else { return };
                if *chunk == u64::MAX {
                    return;
                }
                for dist in 1..=exp.window as u64 {
                    for (n, nd) in [
                        (chunk.checked_sub(dist), docno.checked_sub(dist)),
                        (chunk.checked_add(dist), docno.checked_add(dist)),
                    ] {
                        let (Some(n), Some(nd)) = (n, nd) else { continue };
                        if ix.docs.get(nd as usize).is_some_and(|x| x.1 == n && x.0 == *sid) {
                            nb.push((nd, dist as u32));
                        }
                    }
                }
            };
            let mut bonus = crate::index::context::shares(scored.iter().copied(), exp, neighbours);
            for (docno, score) in scored.iter_mut() {
                if let Some(b) = bonus.remove(docno) {
                    *score += b;
                }
            }
            scored.extend(bonus);
        }
        let mut by_source: HashMap<&str, (f32, Vec<Scored<'_>>)> = HashMap::new();
        for (docno, score) in scored {
            let Some((sid, chunk, snippet)) = ix.docs.get(docno as usize) else { continue };
            if only.is_some_and(|o| o != sid) {
                continue;
            }
            let e = by_source.entry(sid.as_str()).or_insert((0.0, Vec::new()));
            if *chunk == u64::MAX {
                e.0 += score;
            } else {
                e.1.push((*chunk, score, snippet.as_str()));
            }
        }
        let mut ranked: Vec<(&str, f32, Vec<Scored<'_>>)> = by_source
            .into_iter()
            .map(|(sid, (name_score, mut chunks))| {
                chunks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let best = chunks.first().map_or(0.0, |c| c.1);
                (sid, best + name_score, chunks)
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let mut out = Vec::new();
        for (sid, score, chunks) in ranked.into_iter().take(limit) {
            let Ok(source) = self.get_source(sid, Some(space)) else { continue };
            let all = self.source_chunks(sid)?;
            let hits = chunks
                .into_iter()
                .take(per_source)
                .map(|(i, s, snip)| {
                    let c = all.get(i as usize);
                    ChunkHit {
                        chunk_index: i,
                        section: c.map(|c| c.section.clone()).unwrap_or_default(),
                        offset: c.map_or(0, |c| c.offset),
                        score: s,
                        snippet: snip.to_string(),
                    }
                })
                .collect();
            out.push(SourceHit { source, score, chunks: hits });
        }
        Ok(out)
    }

    /// Deletes source `id` with its text, file, chunks and the memories extracted from it. Returns the source
    /// and the number of memories deleted.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`source_not_found`).
    pub fn delete_source(&self, id: &str, space_guard: Option<&str>) -> Result<(Source, u64)> {
        let source = self.get_source(id, space_guard)?;
        let space = source.space_id.clone();
        let now = Timestamp::now();
        let removed = self.core.write(|txn, ops| {
            let mut t = MemoryWrite::open(txn)?;
            let prefix = format!("{id}#c");
            let chunk_memories = t.memories.with_prefix(&space, &prefix)?;
            for sm in &chunk_memories {
                let (_, lex) = t.remove_memory(&space, sm, now)?;
                ops.push(IndexOp::Remove { space: space.clone(), docno: sm.docno, lex: Some(lex) });
            }
            drop(t);
            source::sources(txn)?.remove((space.as_str(), id))?;
            source::source_space(txn)?.remove(id)?;
            source::source_sha(txn)?.remove((space.as_str(), source.sha256.as_str()))?;
            source::source_text(txn)?.remove(id)?;
            source::source_files(txn)?.remove(id)?;
            let mut chunks = source::source_chunks(txn)?;
            chunks.remove_range((id, 0u64)..=(id, u64::MAX))?;
            self.core.feed.publish(txn, super::core::feed::ChangeOut::Sources(&space))?;
            Ok(chunk_memories.len() as u64)
        })?;
        self.core.chunk_index.write().remove(&space);
        Ok((source, removed))
    }
}

/// An HTML page's `<title>`, entities decoded and whitespace collapsed; None when absent or empty.
#[cfg(feature = "url")]
fn html_title(bytes: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 20)]);
    let re = regex::Regex::new(r"(?is)<title[^>]*>(.*?)</title>").ok()?;
    let raw = re.captures(&head)?.get(1)?.as_str();
    // Every HTML5 named and numeric character reference, each decoded once (`&amp;lt;` stays `&lt;`).
    let decoded = html_escape::decode_html_entities(raw);
    let t = decoded.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then(|| t.chars().take(300).collect())
}

#[cfg(all(test, feature = "url"))]
mod tests {
    use super::html_title;

    #[test]
    fn a_page_title_has_its_character_references_decoded_once() {
        let page = b"<html><head><title>\n  Tom &amp; Jerry&nbsp;&ndash; &#8220;Pilot&#x201D; &amp;lt;1940&gt;\n</title></head></html>";
        assert_eq!(html_title(page).as_deref(), Some("Tom & Jerry \u{2013} \u{201C}Pilot\u{201D} &lt;1940>"));
        assert_eq!(html_title(b"<title> \t </title>"), None);
        assert_eq!(html_title(b"<p>no title</p>"), None);
    }
}
