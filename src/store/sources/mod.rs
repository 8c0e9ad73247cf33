//! Sources (the library): ingestion of documents with SHA-256 deduplication, parsing into text, a section tree
//! and chunks ([`crate::extract::document`]), memory extraction (one memory per substantive chunk), listing
//! with label and metadata filters, BM25 search over chunks, paged content reads and deletion. The service is
//! [`Sources`] (`store.sources()`): ingestion in `ingest.rs`, search in `search.rs`, types in `types.rs`.

use sha2::Digest;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::error::ErrorCode;
use crate::error::{Error, FieldError, Result};
use crate::extract::document::{self, Chunk, Format};
use crate::extract::pdf;
use crate::index::bm25;
use crate::index::lexicon::{self, Lexicon};
use crate::model::{Label, Metadata, SOURCE_STATES, Source, Timestamp};
use crate::store::core::chunks::ChunkIndex;
use crate::store::memories::{MemoryWrite, check_label_name};
use crate::store::source;
use crate::store::{IndexOp, KnowledgeStore, Page};

pub use crate::model::MAX_SOURCE_BYTES;
/// Longest file name, in characters.
const MAX_NAME_CHARS: usize = 255;
/// Chunks with fewer words give no memory.
const MIN_MEMORY_WORDS: usize = 8;

mod extract;
mod ingest;
mod search;
mod types;

use extract::{has_title, memories_of};
pub use types::{
    ChunkHit, IngestReport, NewSource, SourceAnalysis, SourceChunks, SourceContent, SourceHit, SourceQuery,
};

/// The sources (the library) of a store's spaces, borrowed from the store (`store.sources()`).
///
/// Owns: the `source` records (the document bytes, parsed text, section tree and chunks, keyed by space and
/// id, with a SHA-256 index for deduplication), the memories extracted from them, and the per-space BM25
/// indexes over chunks.
#[derive(Clone, Copy)]
pub struct Sources<'s> {
    pub(crate) store: &'s KnowledgeStore,
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

impl Sources<'_> {
    /// Source `id`; with `space_guard`, only when it lives there.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`source_not_found`).
    pub fn get(&self, id: &str, space_guard: Option<&str>) -> Result<Source> {
        let not_found = || Error::not_found(ErrorCode::SourceNotFound, format!("source '{id}' not found"));
        let rtx = self.store.core.db.read()?;
        let space = source::space_of(&rtx, id)?.ok_or_else(not_found)?;
        if space_guard.is_some_and(|g| g != space) {
            return Err(not_found());
        }
        source::sources(&rtx)?.get((space.as_str(), id))?.ok_or_else(not_found)
    }

    /// Every source of `space`, oldest first.
    ///
    /// # Errors
    /// Storage errors.
    pub fn all(&self, space: &str) -> Result<Vec<Source>> {
        let rtx = self.store.core.db.read()?;
        let mut out: Vec<Source> = source::sources(&rtx)?.in_space(space)?.into_iter().map(|(_, s)| s).collect();
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Sources of a space passing the filters, newest first, one page.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for an unknown `lifecycle_state`; [`crate::ErrorKind::NotFound`] (`space_not_found`).
    pub fn list(&self, q: &SourceQuery) -> Result<Page<Source>> {
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
        self.store.spaces().require(&q.space_id)?;
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
            .all(&q.space_id)?
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
    pub fn content(&self, id: &str, space_guard: Option<&str>, offset: usize, limit: usize) -> Result<SourceContent> {
        let s = self.get(id, space_guard)?;
        let text = self.text(id)?;
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
    pub fn analyze(&self, id: &str, space_guard: Option<&str>, columns: &[String]) -> Result<SourceAnalysis> {
        let s = self.get(id, space_guard)?;
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
            let rtx = self.store.core.db.read()?;
            source::file_of(&rtx, &s.id)?
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
    pub fn text(&self, id: &str) -> Result<String> {
        let rtx = self.store.core.db.read()?;
        source::text_of(&rtx, id)
    }

    /// The chunks of source `id`, in order.
    pub(crate) fn chunks(&self, id: &str) -> Result<Vec<Chunk>> {
        source::chunks_of(&self.store.core.db.read()?, id)
    }

    /// Deletes source `id` with its text, file, chunks and the memories extracted from it. Returns the source
    /// and the number of memories deleted.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`source_not_found`).
    pub fn delete(&self, id: &str, space_guard: Option<&str>) -> Result<(Source, u64)> {
        let source = self.get(id, space_guard)?;
        let space = source.space_id.clone();
        let now = Timestamp::now();
        let removed = self.store.core.write(|txn, ops| {
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
            self.store.core.feed.publish(txn, crate::store::core::feed::ChangeOut::Sources(&space))?;
            Ok(chunk_memories.len() as u64)
        })?;
        self.store.core.chunk_index.write().remove(&space);
        Ok((source, removed))
    }
}
