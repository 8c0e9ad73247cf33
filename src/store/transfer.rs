//! Data export and import: a versioned, checksummed ZIP archive of everything a store holds, and an atomic
//! import of such an archive with three conflict modes.
//!
//! # Archive format (`engram-export`, format version 1)
//! A ZIP file with `manifest.json` and one JSON Lines file per record kind (`spaces.jsonl`, `labels.jsonl`,
//! `label_merges.jsonl`, `memories.jsonl`, `entities.jsonl`, `entity_keys.jsonl`, `relations.jsonl`,
//! `crystal_sources.jsonl`, `threads.jsonl`, `messages.jsonl`, `message_keys.jsonl`, `working_memory.jsonl`,
//! `sources.jsonl`, `communities.jsonl`) plus `source_files/<source id>` with the original bytes of each
//! source. The manifest names the format and version, the Engram version and embedder, the switches used,
//! record counts, and the SHA-256, size and record count of every file; import verifies all of them before it
//! writes anything. Records are the JSON forms of the public record types. Vectors and the lexical postings are
//! derived: import rebuilds the postings and re-embeds in the background with the importing store's embedder.
//!
//! # Import
//! One write transaction: an archive that fails verification, a failed write or a killed process leaves the
//! store as it was. Conflicts (a record with the same key) follow the mode: `merge` keeps the stored record
//! and fills its empty fields (empty strings, arrays, objects, nulls; nested objects key by key) from the
//! archive, and unions label and mention edges; `skip` keeps the stored record; `overwrite` replaces it.
//! Label usage counts, entity mention counts and RELATES_TO weights of the spaces touched are recomputed from
//! the edges afterwards, so they stay consistent whatever the mode.
//!
//! # Safety
//! Paths are confined ([`crate::config::StoreConfig::confine`]); archives with entries that escape (`..`,
//! absolute paths) or symbolic links are refused; the entry count, the declared and the actual decompressed
//! sizes are capped while reading, so a ZIP bomb stops early.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::communities::Community;
use super::label_maint::LabelMerge;
use super::memories::WTables;
use super::relations::MemoryRelation;
use super::tables::*;
use super::working::WorkingMemory;
use super::{KnowledgeStore, StoredMemory, get_record, meta_u64, schema};
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};
use crate::extract::document::Chunk;
use crate::model::{Entity, Label, Memory, Message, Source, Space, Thread, Timestamp};

/// The archive's format name.
pub const EXPORT_FORMAT: &str = "engram-export";
/// The archive format version this release writes and the newest it reads.
pub const EXPORT_VERSION: u32 = 1;
/// Most entries an archive may hold.
pub const MAX_ARCHIVE_ENTRIES: usize = 200_000;
/// Most decompressed bytes an archive may hold (16 GiB).
pub const MAX_ARCHIVE_BYTES: u64 = 16 << 30;
/// Largest manifest (16 MiB).
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// What to export: the client contract's `include_*` switches (all default true). `include_skills`,
/// `include_feed_events` and `include_working_memory_archive` are accepted; Engram has nothing under them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Include {
    /// Memories (with their label and mention edges).
    pub memories: bool,
    /// Threads.
    pub threads: bool,
    /// Messages of the threads.
    pub messages: bool,
    /// Entities and their name keys.
    pub entities: bool,
    /// Labels and recorded label merges.
    pub labels: bool,
    /// Sources with their text and chunks.
    pub sources: bool,
    /// The original bytes of sources.
    pub source_files: bool,
    /// Communities (derived; recomputed by the importing store anyway).
    pub communities: bool,
    /// Relations between memories and crystal provenance.
    pub edges: bool,
    /// Working memory.
    pub working_memory: bool,
}

impl Default for Include {
    fn default() -> Self {
        Include {
            memories: true,
            threads: true,
            messages: true,
            entities: true,
            labels: true,
            sources: true,
            source_files: true,
            communities: true,
            edges: true,
            working_memory: true,
        }
    }
}

/// One file of the archive, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
    /// Size in bytes (decompressed).
    pub bytes: u64,
    /// JSON lines (0 for binary files).
    pub records: u64,
}

/// `manifest.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// [`EXPORT_FORMAT`].
    pub format: String,
    /// [`EXPORT_VERSION`].
    pub format_version: u32,
    /// Engram version that wrote it.
    pub engram_version: String,
    /// Store format version of the exporting store.
    pub store_format_version: u32,
    /// `name:dimension` of the exporting store's embedder.
    pub embedder: String,
    /// When it was written.
    pub created_at: Timestamp,
    /// Switches used.
    pub include: Include,
    /// Records per kind.
    pub counts: BTreeMap<String, u64>,
    /// Every file but the manifest.
    pub files: BTreeMap<String, ManifestEntry>,
}

/// Options of [`KnowledgeStore::export_data`].
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Target file (confined); default `<data_dir>/exports/engram-export-<UTC time>.zip`.
    pub path: Option<PathBuf>,
    /// Deflate the entries (default true in the HTTP API); false stores them.
    pub compress: bool,
    /// Replace an existing file.
    pub overwrite: bool,
    /// What to include.
    pub include: Include,
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    /// The archive's path.
    pub export_path: String,
    /// Records per kind.
    pub counts: BTreeMap<String, u64>,
    /// Archive size in bytes.
    pub bytes: u64,
    /// SHA-256 of the archive file.
    pub sha256: String,
    /// [`EXPORT_VERSION`].
    pub format_version: u32,
    /// Milliseconds taken.
    pub elapsed_ms: f64,
}

/// Conflict handling of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ImportMode {
    /// Keep stored records, fill their empty fields from the archive, union edges (default).
    #[default]
    Merge,
    /// Keep stored records as they are.
    Skip,
    /// Replace stored records with the archive's.
    Overwrite,
}

impl ImportMode {
    /// Parses `merge`, `skip` or `overwrite`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "merge" => Some(ImportMode::Merge),
            "skip" => Some(ImportMode::Skip),
            "overwrite" => Some(ImportMode::Overwrite),
            _ => None,
        }
    }
}

/// The outcome per record kind: records of the archive that were inserted, updated (merged or replaced) or
/// left as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCounts {
    /// New records.
    pub inserted: u64,
    /// Stored records changed (merge filled fields, overwrite replaced).
    pub updated: u64,
    /// Stored records kept as they were.
    pub skipped: u64,
}

/// What an import did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ImportReport {
    /// Per kind.
    pub counts: BTreeMap<String, KindCounts>,
    /// Records read from the archive.
    pub records: u64,
    /// Milliseconds taken.
    pub elapsed_ms: f64,
}

/// Progress of an import job, shared with its status route.
#[derive(Debug, Default)]
pub struct ImportProgress {
    /// Records written so far.
    pub processed: AtomicU64,
    /// Records in the archive.
    pub total: AtomicU64,
}

#[derive(Serialize, Deserialize)]
struct MemoryLine {
    memory: Memory,
    label_ids: Vec<String>,
    mentions: Vec<String>,
    /// The caller-supplied vector, exported by stores with an external embedder (it cannot be recomputed);
    /// absent otherwise (the importing store embeds the text itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    embedding: Option<Vec<f32>>,
}

#[derive(Serialize, Deserialize)]
struct MessageLine {
    space_id: String,
    thread_id: String,
    index: u64,
    message: Message,
}

#[derive(Serialize, Deserialize)]
struct KeyLine {
    space_id: String,
    key: String,
    value: String,
}

#[derive(Serialize, Deserialize)]
struct MessageKeyLine {
    space_id: String,
    thread_id: String,
    key: String,
    index: u64,
}

#[derive(Serialize, Deserialize)]
struct CrystalSourceLine {
    space_id: String,
    crystal_id: String,
    memory_id: String,
    weight: f64,
}

#[derive(Serialize, Deserialize)]
struct SourceLine {
    source: Source,
    text: String,
    chunks: Vec<Chunk>,
}

#[derive(Serialize, Deserialize)]
struct CommunityLine {
    community: Community,
    members: Vec<(String, String, f64)>,
}

#[derive(Serialize, Deserialize)]
struct PagerankLine {
    space_id: String,
    memory_id: String,
    score: f64,
}

/// Writes one archive file while hashing it.
struct Hashing<W: Write> {
    inner: W,
    sha: sha2::Sha256,
    bytes: u64,
    records: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn zip_error(e: zip::result::ZipError) -> Error {
    Error::invalid_value(
        &["import_path"],
        "archive_invalid",
        format!("not a readable ZIP archive: {e}"),
        serde_json::Value::Null,
    )
}

fn archive_invalid(msg: impl Into<String>) -> Error {
    Error::invalid_value(&["import_path"], "archive_invalid", msg, serde_json::Value::Null)
}

/// Where an export goes: a ZIP file or a directory (`compress: false`, `nmem export --no-zip`).
enum Sink {
    Zip(Box<zip::ZipWriter<std::io::BufWriter<std::fs::File>>>, zip::write::SimpleFileOptions),
    Dir(PathBuf),
}

impl Sink {
    fn start(&mut self, name: &str) -> Result<Box<dyn Write + '_>> {
        match self {
            Sink::Zip(z, o) => {
                z.start_file(name, *o).map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
                Ok(Box::new(z.as_mut()))
            }
            Sink::Dir(d) => {
                let p = d.join(name);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                Ok(Box::new(std::io::BufWriter::new(std::fs::File::create(p)?)))
            }
        }
    }
}

/// Archive writer: JSON lines per file, checksums into the manifest.
struct ArchiveWriter {
    sink: Sink,
    files: BTreeMap<String, ManifestEntry>,
}

impl ArchiveWriter {
    fn file<T: Serialize>(&mut self, name: &str, rows: impl Iterator<Item = Result<T>>) -> Result<u64> {
        let out = self.sink.start(name)?;
        let mut h = Hashing { inner: out, sha: sha2::Sha256::new(), bytes: 0, records: 0 };
        {
            let mut buf = std::io::BufWriter::with_capacity(1 << 16, &mut h);
            let mut n = 0u64;
            for row in rows {
                serde_json::to_writer(&mut buf, &row?).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
                buf.write_all(b"\n")?;
                n += 1;
            }
            buf.flush()?;
            drop(buf);
            h.records = n;
        }
        h.inner.flush()?;
        let entry = ManifestEntry { sha256: hex(&h.sha.finalize()), bytes: h.bytes, records: h.records };
        let n = entry.records;
        self.files.insert(name.to_string(), entry);
        Ok(n)
    }

    fn blob(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let mut out = self.sink.start(name)?;
        out.write_all(bytes)?;
        out.flush()?;
        drop(out);
        let entry = ManifestEntry { sha256: hex(&sha2::Sha256::digest(bytes)), bytes: bytes.len() as u64, records: 0 };
        self.files.insert(name.to_string(), entry);
        Ok(())
    }
}

/// Rows of a table with a (space, id) key and a record value.
fn records<T: DeserializeOwned>(t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for row in t.iter()? {
        out.push(schema::decode(row?.1.value())?);
    }
    Ok(out)
}

impl KnowledgeStore {
    /// Writes a consistent snapshot (one read transaction) of the store to a ZIP archive (see the module
    /// documentation for the format). Returns where, what and the archive's checksum.
    ///
    /// # Errors
    /// * [`ErrorKind::Forbidden`] (`path_not_allowed`): the path is outside the allowed directories.
    /// * [`ErrorKind::Conflict`] (`export_exists`): the file exists and `overwrite` is false.
    /// * [`ErrorKind::Io`], [`ErrorKind::StorageFull`]: writing failed (the partial file is removed).
    pub fn export_data(&self, opts: &ExportOptions) -> Result<ExportReport> {
        let started = std::time::Instant::now();
        let path = match &opts.path {
            Some(p) => self.config.confine_named(p, "export_path")?,
            None => {
                let stamp = time::OffsetDateTime::now_utc()
                    .format(time::macros::format_description!("[year][month][day]-[hour][minute][second]"))
                    .unwrap_or_default();
                let dir = self.config.data_dir.join("exports");
                std::fs::create_dir_all(&dir)?;
                dir.join(format!("engram-export-{stamp}-{}.zip", &uuid::Uuid::now_v7().simple().to_string()[24..]))
            }
        };
        // Never over the store itself: not the data directory, an ancestor of it, or anything holding the
        // store file.
        if let Ok(db) = self.config.db_path().canonicalize()
            && db.starts_with(&path)
        {
            return Err(Error::new(
                ErrorKind::Forbidden,
                format!("'{}' holds the store; choose another export path", path.display()),
            )
            .with_code(ErrorCode::PathNotAllowed));
        }
        if path.is_dir() && opts.overwrite && !path.join("manifest.json").is_file() {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("'{}' is a directory that is not an export; it is not replaced", path.display()),
            )
            .with_code(ErrorCode::ExportExists));
        }
        if path.exists() && !opts.overwrite {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("'{}' exists; pass overwrite: true to replace it", path.display()),
            )
            .with_code(ErrorCode::ExportExists));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.partial-{}", uuid::Uuid::now_v7().simple()));
        let remove = |p: &Path| {
            let _ = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
        };
        let result = self.write_archive(&tmp, opts);
        let counts = match result {
            Ok(c) => c,
            Err(e) => {
                remove(&tmp);
                return Err(e);
            }
        };
        if path.exists() {
            remove(&path);
        }
        std::fs::rename(&tmp, &path)?;
        // The checksum of a ZIP archive; of a directory export, the manifest's.
        let file = if path.is_dir() { path.join("manifest.json") } else { path.clone() };
        let mut f = std::fs::File::open(&file)?;
        let mut sha = sha2::Sha256::new();
        let mut bytes = std::io::copy(&mut f, &mut sha)?;
        if path.is_dir() {
            bytes = std::fs::read_dir(&path)?.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
        }
        Ok(ExportReport {
            export_path: path.display().to_string(),
            counts,
            bytes,
            sha256: hex(&sha.finalize()),
            format_version: EXPORT_VERSION,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    }

    fn write_archive(&self, tmp: &Path, opts: &ExportOptions) -> Result<BTreeMap<String, u64>> {
        let inc = opts.include;
        let sink = if opts.compress {
            let file = std::fs::File::create(tmp)?;
            let options = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .compression_level(Some(1))
                .large_file(true);
            Sink::Zip(Box::new(zip::ZipWriter::new(std::io::BufWriter::new(file))), options)
        } else {
            std::fs::create_dir_all(tmp)?;
            Sink::Dir(tmp.to_path_buf())
        };
        let mut w = ArchiveWriter { sink, files: BTreeMap::new() };
        let rtx = self.db.begin_read()?;
        let mut counts = BTreeMap::new();
        let spaces: Vec<Space> = {
            let t = rtx.open_table(SPACES)?;
            let mut v = Vec::new();
            for row in t.iter()? {
                v.push(schema::decode(row?.1.value())?);
            }
            v
        };
        counts.insert("spaces".into(), w.file("spaces.jsonl", spaces.into_iter().map(Ok))?);
        if inc.labels {
            let labels: Vec<Label> = records(&rtx.open_table(LABELS)?)?;
            counts.insert("labels".into(), w.file("labels.jsonl", labels.into_iter().map(Ok))?);
            let merges: Vec<LabelMerge> = records(&rtx.open_table(LABEL_MERGES)?)?;
            counts.insert("label_merges".into(), w.file("label_merges.jsonl", merges.into_iter().map(Ok))?);
        }
        if inc.memories {
            let mems = rtx.open_table(MEMORIES)?;
            let ml = rtx.open_table(MEMORY_LABELS)?;
            let mentions = rtx.open_table(MENTIONS)?;
            let vectors = rtx.open_table(VECTORS)?;
            let external = self.config.embedder.external();
            let rows = mems.iter()?.map(|row| -> Result<MemoryLine> {
                let (k, v) = row?;
                let (space, id) = k.value();
                let sm: StoredMemory = schema::decode(v.value())?;
                let label_ids = if inc.labels { super::range_prefix3(&ml, space, id)? } else { vec![] };
                let mentions = if inc.entities { super::range_prefix3(&mentions, space, id)? } else { vec![] };
                let embedding = if external {
                    vectors.get((space, sm.docno))?.map(|v| schema::vector_from_bytes(v.value()))
                } else {
                    None
                };
                Ok(MemoryLine { memory: sm.memory, label_ids, mentions, embedding })
            });
            counts.insert("memories".into(), w.file("memories.jsonl", rows)?);
        }
        if inc.entities {
            let ents: Vec<Entity> = records(&rtx.open_table(ENTITIES)?)?;
            counts.insert("entities".into(), w.file("entities.jsonl", ents.into_iter().map(Ok))?);
            let keys = rtx.open_table(ENTITY_KEYS)?;
            let rows = keys.iter()?.map(|row| -> Result<KeyLine> {
                let (k, v) = row?;
                let (s, key) = k.value();
                Ok(KeyLine { space_id: s.to_string(), key: key.to_string(), value: v.value().to_string() })
            });
            counts.insert("entity_keys".into(), w.file("entity_keys.jsonl", rows)?);
        }
        if inc.edges {
            let rels: Vec<MemoryRelation> = records(&rtx.open_table(RELATIONS)?)?;
            counts.insert("relations".into(), w.file("relations.jsonl", rels.into_iter().map(Ok))?);
            let cs = rtx.open_table(CRYSTAL_SOURCES)?;
            let rows = cs.iter()?.map(|row| -> Result<CrystalSourceLine> {
                let (k, v) = row?;
                let (s, c, m) = k.value();
                Ok(CrystalSourceLine {
                    space_id: s.into(),
                    crystal_id: c.into(),
                    memory_id: m.into(),
                    weight: v.value(),
                })
            });
            counts.insert("crystal_sources".into(), w.file("crystal_sources.jsonl", rows)?);
        }
        if inc.threads {
            let threads: Vec<Thread> = records(&rtx.open_table(THREADS)?)?;
            counts.insert("threads".into(), w.file("threads.jsonl", threads.into_iter().map(Ok))?);
            if inc.messages {
                let msgs = rtx.open_table(MESSAGES)?;
                let rows = msgs.iter()?.map(|row| -> Result<MessageLine> {
                    let (k, v) = row?;
                    let (s, t, i) = k.value();
                    Ok(MessageLine {
                        space_id: s.into(),
                        thread_id: t.into(),
                        index: i,
                        message: schema::decode(v.value())?,
                    })
                });
                counts.insert("messages".into(), w.file("messages.jsonl", rows)?);
                let keys = rtx.open_table(MESSAGE_KEYS)?;
                let rows = keys.iter()?.map(|row| -> Result<MessageKeyLine> {
                    let (k, v) = row?;
                    let (s, t, key) = k.value();
                    Ok(MessageKeyLine { space_id: s.into(), thread_id: t.into(), key: key.into(), index: v.value() })
                });
                counts.insert("message_keys".into(), w.file("message_keys.jsonl", rows)?);
            }
        }
        if inc.working_memory {
            let wm: Vec<WorkingMemory> = records(&rtx.open_table(WORKING_MEMORY)?)?;
            counts.insert("working_memory".into(), w.file("working_memory.jsonl", wm.into_iter().map(Ok))?);
        }
        if inc.sources {
            let sources: Vec<Source> = records(&rtx.open_table(SOURCES)?)?;
            let text_t = rtx.open_table(SOURCE_TEXT)?;
            let chunk_t = rtx.open_table(SOURCE_CHUNKS)?;
            let rows = sources.iter().map(|s| -> Result<SourceLine> {
                let text = text_t
                    .get(s.id.as_str())?
                    .map(|v| String::from_utf8_lossy(v.value()).into_owned())
                    .unwrap_or_default();
                let mut chunks = Vec::new();
                for row in chunk_t.range((s.id.as_str(), 0u64)..=(s.id.as_str(), u64::MAX))? {
                    chunks.push(schema::decode(row?.1.value())?);
                }
                Ok(SourceLine { source: s.clone(), text, chunks })
            });
            counts.insert("sources".into(), w.file("sources.jsonl", rows)?);
            if inc.source_files {
                let files = rtx.open_table(SOURCE_FILES)?;
                let mut n = 0;
                for s in &sources {
                    if let Some(b) = files.get(s.id.as_str())? {
                        w.blob(&format!("source_files/{}", s.id), b.value())?;
                        n += 1;
                    }
                }
                counts.insert("source_files".into(), n);
            }
        }
        if inc.communities {
            let ct = rtx.open_table(COMMUNITIES)?;
            let members = rtx.open_table(COMMUNITY_MEMBERS)?;
            let rows = ct.iter()?.map(|row| -> Result<CommunityLine> {
                let (k, v) = row?;
                let id = k.value();
                let mut m = Vec::new();
                for r in members.range((id, "", "")..(id + 1, "", ""))? {
                    let (mk, mv) = r?;
                    let (_, s, e) = mk.value();
                    m.push((s.to_string(), e.to_string(), mv.value()));
                }
                Ok(CommunityLine { community: schema::decode(v.value())?, members: m })
            });
            counts.insert("communities".into(), w.file("communities.jsonl", rows)?);
            let pr = rtx.open_table(MEMORY_PAGERANK)?;
            let rows = pr.iter()?.map(|row| -> Result<PagerankLine> {
                let (k, v) = row?;
                let (s, m) = k.value();
                Ok(PagerankLine { space_id: s.into(), memory_id: m.into(), score: v.value() })
            });
            counts.insert("memory_pagerank".into(), w.file("memory_pagerank.jsonl", rows)?);
        }
        let manifest = Manifest {
            format: EXPORT_FORMAT.into(),
            format_version: EXPORT_VERSION,
            engram_version: env!("CARGO_PKG_VERSION").into(),
            store_format_version: schema::FORMAT_VERSION,
            embedder: format!("{}:{}", self.config.embedder.name(), self.config.embedder.dim()),
            created_at: Timestamp::now(),
            include: inc,
            counts: counts.clone(),
            files: std::mem::take(&mut w.files),
        };
        {
            let mut out = w.sink.start("manifest.json")?;
            serde_json::to_writer_pretty(&mut out, &manifest)
                .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
            out.flush()?;
        }
        if let Sink::Zip(z, _) = w.sink {
            let mut inner = z.finish().map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
            inner.flush()?;
            inner.into_inner().map_err(|e| Error::from(e.into_error()))?.sync_all()?;
        }
        Ok(counts)
    }
}

/// Where an import reads from: a ZIP file or an export directory.
enum Src {
    Zip(zip::ZipArchive<std::io::BufReader<std::fs::File>>),
    Dir(PathBuf),
}

/// A verified archive: its manifest and a reader that only hands out listed files, within their sizes.
pub(crate) struct Archive {
    src: Src,
    pub manifest: Manifest,
}

/// True for a relative path of plain components (no `..`, no root, no backslash).
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('\\')
        && Path::new(name).components().all(|c| matches!(c, std::path::Component::Normal(_)))
}

impl Archive {
    /// Opens and verifies `path` (a ZIP file or an export directory): structure, entry names, no symbolic
    /// links, caps, manifest, and the checksum of every listed file.
    pub(crate) fn open(path: &Path) -> Result<Archive> {
        let meta = std::fs::symlink_metadata(path).map_err(|e| {
            Error::invalid_value(
                &["import_path"],
                "value_error",
                format!("cannot open '{}': {e}", path.display()),
                serde_json::Value::Null,
            )
        })?;
        let src = if meta.is_dir() {
            Src::Dir(path.to_path_buf())
        } else {
            let file = std::fs::File::open(path)?;
            let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(zip_error)?;
            if zip.len() > MAX_ARCHIVE_ENTRIES {
                return Err(archive_invalid(format!(
                    "the archive has {} entries; at most {MAX_ARCHIVE_ENTRIES} are accepted",
                    zip.len()
                )));
            }
            let mut declared = 0u64;
            for i in 0..zip.len() {
                let e = zip.by_index_raw(i).map_err(zip_error)?;
                let name = e.name().map_err(zip_error)?.to_string();
                let dir_entry = name.ends_with('/') && safe_name(name.trim_end_matches('/'));
                if e.enclosed_name().is_none() || !(dir_entry || safe_name(&name)) {
                    return Err(archive_invalid(format!("entry '{name}' escapes the archive; refused")));
                }
                if e.is_symlink() {
                    return Err(archive_invalid(format!("entry '{name}' is a symbolic link; refused")));
                }
                declared = declared.saturating_add(e.size());
            }
            if declared > MAX_ARCHIVE_BYTES {
                return Err(archive_invalid(format!(
                    "the archive expands to {declared} bytes; at most {MAX_ARCHIVE_BYTES} are accepted"
                )));
            }
            Src::Zip(zip)
        };
        let mut archive = Archive { src, manifest: placeholder_manifest() };
        let raw = archive
            .read_file("manifest.json", MAX_MANIFEST_BYTES)?
            .ok_or_else(|| archive_invalid("the archive has no manifest.json: not an Engram export"))?;
        let manifest: Manifest =
            serde_json::from_slice(&raw).map_err(|e| archive_invalid(format!("manifest.json is not valid: {e}")))?;
        if manifest.format != EXPORT_FORMAT {
            return Err(archive_invalid(format!("format '{}' is not '{EXPORT_FORMAT}'", manifest.format)));
        }
        if manifest.format_version > EXPORT_VERSION {
            return Err(archive_invalid(format!(
                "export format version {} is newer than this release reads ({EXPORT_VERSION})",
                manifest.format_version
            )));
        }
        if manifest.files.len() > MAX_ARCHIVE_ENTRIES {
            return Err(archive_invalid("the manifest lists more files than the entry cap"));
        }
        if let Some(bad) = manifest.files.keys().find(|n| !safe_name(n)) {
            return Err(archive_invalid(format!("the manifest names '{bad}', which escapes the archive; refused")));
        }
        let total: u64 = manifest.files.values().map(|f| f.bytes).fold(0u64, u64::saturating_add);
        if total > MAX_ARCHIVE_BYTES {
            return Err(archive_invalid("the manifest declares more than the archive size cap"));
        }
        archive.manifest = manifest;
        let names: Vec<(String, ManifestEntry)> =
            archive.manifest.files.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (name, entry) in names {
            let mut r = archive.reader(&name)?;
            let mut sha = sha2::Sha256::new();
            let n = std::io::copy(&mut r, &mut sha).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
            drop(r);
            if n != entry.bytes || hex(&sha.finalize()) != entry.sha256 {
                return Err(archive_invalid(format!("{name} does not match its checksum in the manifest")));
            }
        }
        Ok(archive)
    }

    /// An entry read up to `cap` bytes (None when absent).
    fn read_file(&mut self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        let Some(r) = self.open_entry(name, cap)? else { return Ok(None) };
        let mut out = Vec::new();
        let mut r = r;
        r.read_to_end(&mut out).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
        Ok(Some(out))
    }

    fn open_entry(&mut self, name: &str, cap: u64) -> Result<Option<Box<dyn Read + '_>>> {
        match &mut self.src {
            Src::Zip(zip) => match zip.by_name(name) {
                Ok(f) => Ok(Some(Box::new(Capped { inner: f, left: cap, name: name.to_string() }))),
                Err(zip::result::ZipError::FileNotFound) => Ok(None),
                Err(e) => Err(zip_error(e)),
            },
            Src::Dir(d) => {
                let p = d.join(name);
                match std::fs::symlink_metadata(&p) {
                    Err(_) => Ok(None),
                    Ok(m) if m.file_type().is_symlink() => {
                        Err(archive_invalid(format!("'{name}' is a symbolic link; refused")))
                    }
                    Ok(m) if !m.is_file() => Ok(None),
                    Ok(_) => {
                        let f = std::fs::File::open(&p)?;
                        Ok(Some(Box::new(Capped { inner: f, left: cap, name: name.to_string() })))
                    }
                }
            }
        }
    }

    /// A reader over listed file `name` that fails past the size the manifest gives.
    fn reader(&mut self, name: &str) -> Result<Box<dyn Read + '_>> {
        let Some(entry) = self.manifest.files.get(name).cloned() else {
            return Ok(Box::new(std::io::empty()));
        };
        self.open_entry(name, entry.bytes)?.ok_or_else(|| archive_invalid(format!("{name} is listed but missing")))
    }

    /// Calls `f` for every JSON line of `name` (nothing when the archive lacks it).
    fn lines<T: DeserializeOwned>(&mut self, name: &str, mut f: impl FnMut(T) -> Result<()>) -> Result<()> {
        let r = self.reader(name)?;
        let mut br = std::io::BufReader::with_capacity(1 << 16, r);
        let mut line = String::new();
        let mut n = 0u64;
        loop {
            line.clear();
            let got = br.read_line(&mut line).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
            if got == 0 {
                break;
            }
            n += 1;
            if line.trim().is_empty() {
                continue;
            }
            let v: T = serde_json::from_str(&line)
                .map_err(|e| archive_invalid(format!("{name} line {n} is not a valid record: {e}")))?;
            f(v)?;
        }
        Ok(())
    }

    fn blob(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        if !self.manifest.files.contains_key(name) {
            return Ok(None);
        }
        let mut out = Vec::new();
        self.reader(name)?.read_to_end(&mut out).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
        Ok(Some(out))
    }
}

/// Fails once more than `left` bytes come out: a lying header cannot expand past what the manifest declared.
struct Capped<R: Read> {
    inner: R,
    left: u64,
    name: String,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(self.left.saturating_add(1).min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n as u64 > self.left {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} expands past the size its manifest declares (a ZIP bomb?)", self.name),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// True when a (space, id) keyed table has a row of `space`.
fn any_in(t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>, space: &str) -> Result<bool> {
    match t.range((space, "")..)?.next() {
        Some(row) => Ok(row?.0.value().0 == space),
        None => Ok(false),
    }
}

fn placeholder_manifest() -> Manifest {
    Manifest {
        format: String::new(),
        format_version: 0,
        engram_version: String::new(),
        store_format_version: 0,
        embedder: String::new(),
        created_at: Timestamp(0),
        include: Include::default(),
        counts: BTreeMap::new(),
        files: BTreeMap::new(),
    }
}

fn is_empty(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::String(s) => s.is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn fill(into: &mut serde_json::Value, from: &serde_json::Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            match a.get_mut(k) {
                Some(cur) if cur.is_object() && v.is_object() => fill(cur, v),
                Some(cur) if !is_empty(cur) => {}
                _ => {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// `existing` with its empty fields filled from `incoming` (nested objects key by key).
pub(crate) fn fill_empty<T: Serialize + DeserializeOwned>(existing: &T, incoming: &T) -> Result<T> {
    let mut e = serde_json::to_value(existing).map_err(|x| Error::new(ErrorKind::Internal, x.to_string()))?;
    let i = serde_json::to_value(incoming).map_err(|x| Error::new(ErrorKind::Internal, x.to_string()))?;
    fill(&mut e, &i);
    serde_json::from_value(e).map_err(|x| Error::new(ErrorKind::Internal, x.to_string()))
}

/// What to do with one archive record.
enum Decision<T> {
    Insert(T),
    Replace(T),
    Keep,
}

fn decide<T: Serialize + DeserializeOwned + PartialEq>(
    mode: ImportMode,
    existing: Option<T>,
    incoming: T,
) -> Result<Decision<T>> {
    Ok(match (existing, mode) {
        (None, _) => Decision::Insert(incoming),
        (Some(_), ImportMode::Skip) => Decision::Keep,
        (Some(e), ImportMode::Overwrite) => {
            if e == incoming {
                Decision::Keep
            } else {
                Decision::Replace(incoming)
            }
        }
        (Some(e), ImportMode::Merge) => {
            let m = fill_empty(&e, &incoming)?;
            if m == e { Decision::Keep } else { Decision::Replace(m) }
        }
    })
}

impl KindCounts {
    fn note<T>(&mut self, d: &Decision<T>) {
        match d {
            Decision::Insert(_) => self.inserted += 1,
            Decision::Replace(_) => self.updated += 1,
            Decision::Keep => self.skipped += 1,
        }
    }
}

/// Writes a (space, id) keyed record per the decision; returns whether it wrote.
fn put_record<T: Serialize>(
    t: &mut redb::Table<'_, (&'static str, &'static str), &'static [u8]>,
    space: &str,
    id: &str,
    d: &Decision<T>,
) -> Result<bool> {
    match d {
        Decision::Insert(v) | Decision::Replace(v) => {
            t.insert((space, id), schema::encode(v)?.as_slice())?;
            Ok(true)
        }
        Decision::Keep => Ok(false),
    }
}

impl KnowledgeStore {
    /// Imports an archive written by [`KnowledgeStore::export_data`] in one write transaction (see the module
    /// documentation for modes and guarantees). `progress` counts records as they are written. After the commit
    /// the in-memory indexes are rebuilt, vectors are recomputed in the background (progress in
    /// [`KnowledgeStore::health`]) and communities are recomputed.
    ///
    /// # Errors
    /// * [`ErrorKind::Forbidden`] (`path_not_allowed`): the path is outside the allowed directories.
    /// * [`ErrorKind::InvalidInput`] (`archive_invalid`): not a readable archive, an entry escaping or a
    ///   symbolic link, over a cap, a checksum mismatch, a newer format, a malformed record. Nothing is written.
    /// * Storage errors; nothing is written.
    pub fn import_data(&self, path: &Path, mode: ImportMode, progress: &ImportProgress) -> Result<ImportReport> {
        let started = std::time::Instant::now();
        let real = self.config.confine_named(path, "import_path")?;
        let mut ar = Archive::open(&real)?;
        let total: u64 = ar.manifest.files.values().map(|f| f.records).sum();
        progress.total.store(total, Ordering::Release);
        progress.processed.store(0, Ordering::Release);
        let now = Timestamp::now();
        let mut report = ImportReport { records: total, ..Default::default() };
        let tick = || {
            progress.processed.fetch_add(1, Ordering::Relaxed);
        };
        let _w = self.writer.lock();
        let touched = self.write_txn(|txn| {
            let mut touched: BTreeSet<String> = BTreeSet::new();
            let c = &mut report.counts;
            // Spaces first: every other record needs its space.
            {
                let mut t = txn.open_table(SPACES)?;
                let k = c.entry("spaces".into()).or_default();
                let (mems, threads, sources) =
                    (txn.open_table(MEMORIES)?, txn.open_table(THREADS)?, txn.open_table(SOURCES)?);
                ar.lines("spaces.jsonl", |s: Space| {
                    // A stored space holding nothing yet (the default space of a new store) takes the
                    // archive's record as it is.
                    let id = s.id.as_str();
                    let holds = any_in(&mems, id)? || any_in(&threads, id)? || any_in(&sources, id)?;
                    let existing: Option<Space> = if holds { get_record(&t, id)? } else { None };
                    let d = decide(mode, existing, s.clone())?;
                    k.note(&d);
                    if let Decision::Insert(v) | Decision::Replace(v) = &d {
                        t.insert(s.id.as_str(), schema::encode(v)?.as_slice())?;
                    }
                    tick();
                    Ok(())
                })?;
            }
            let known_spaces: HashSet<String> = {
                let t = txn.open_table(SPACES)?;
                let mut v = HashSet::new();
                for row in t.iter()? {
                    v.insert(row?.0.value().to_string());
                }
                v
            };
            let need_space = |s: &str| -> Result<()> {
                if known_spaces.contains(s) {
                    Ok(())
                } else {
                    Err(archive_invalid(format!("a record names space '{s}', which the archive does not hold")))
                }
            };
            {
                let mut t = txn.open_table(LABELS)?;
                let k = c.entry("labels".into()).or_default();
                ar.lines("labels.jsonl", |l: Label| {
                    need_space(&l.space_id)?;
                    let existing: Option<Label> = get_record(&t, (l.space_id.as_str(), l.id.as_str()))?;
                    let d = decide(mode, existing, l.clone())?;
                    k.note(&d);
                    put_record(&mut t, &l.space_id, &l.id, &d)?;
                    touched.insert(l.space_id.clone());
                    tick();
                    Ok(())
                })?;
                let mut t = txn.open_table(LABEL_MERGES)?;
                let k = c.entry("label_merges".into()).or_default();
                ar.lines("label_merges.jsonl", |m: LabelMerge| {
                    need_space(&m.space_id)?;
                    let existing: Option<LabelMerge> = get_record(&t, (m.space_id.as_str(), m.merge_id.as_str()))?;
                    let d = decide(mode, existing, m.clone())?;
                    k.note(&d);
                    put_record(&mut t, &m.space_id, &m.merge_id, &d)?;
                    tick();
                    Ok(())
                })?;
            }
            // Entities before memories; mention edges come with the memories.
            {
                let mut t = txn.open_table(ENTITIES)?;
                let k = c.entry("entities".into()).or_default();
                ar.lines("entities.jsonl", |e: Entity| {
                    need_space(&e.space_id)?;
                    let existing: Option<Entity> = get_record(&t, (e.space_id.as_str(), e.id.as_str()))?;
                    let d = decide(mode, existing, e.clone())?;
                    k.note(&d);
                    put_record(&mut t, &e.space_id, &e.id, &d)?;
                    tick();
                    Ok(())
                })?;
                let mut keys = txn.open_table(ENTITY_KEYS)?;
                let k = c.entry("entity_keys".into()).or_default();
                ar.lines("entity_keys.jsonl", |r: KeyLine| {
                    need_space(&r.space_id)?;
                    let cur = keys.get((r.space_id.as_str(), r.key.as_str()))?.map(|v| v.value().to_string());
                    match (cur, mode) {
                        (None, _) => {
                            keys.insert((r.space_id.as_str(), r.key.as_str()), r.value.as_str())?;
                            k.inserted += 1;
                        }
                        (Some(v), ImportMode::Overwrite) if v != r.value => {
                            keys.insert((r.space_id.as_str(), r.key.as_str()), r.value.as_str())?;
                            k.updated += 1;
                        }
                        _ => k.skipped += 1,
                    }
                    tick();
                    Ok(())
                })?;
            }
            {
                let label_names: HashMap<(String, String), String> = {
                    let t = txn.open_table(LABELS)?;
                    let mut m = HashMap::new();
                    for row in t.iter()? {
                        let (k, v) = row?;
                        let (s, id) = k.value();
                        let l: Label = schema::decode(v.value())?;
                        m.insert((s.to_string(), id.to_string()), l.name);
                    }
                    m
                };
                let n_mem = ar.manifest.files.get("memories.jsonl").map_or(0, |f| f.records);
                let mut next_docno = KnowledgeStore::alloc_docnos(txn, n_mem)?;
                let mut t = WTables::open(txn)?;
                let k = c.entry("memories".into()).or_default();
                ar.lines("memories.jsonl", |line: MemoryLine| {
                    let space = line.memory.space_id.clone();
                    need_space(&space)?;
                    touched.insert(space.clone());
                    let id = line.memory.id.clone();
                    // Ids are unique across spaces: a memory of another space with this id is a conflict too.
                    let at = t.memory_space.get(id.as_str())?.map(|v| v.value().to_string());
                    let existing: Option<StoredMemory> = match &at {
                        Some(s) => get_record(&t.memories, (s.as_str(), id.as_str()))?,
                        None => None,
                    };
                    let names = |ids: &[String]| -> BTreeSet<String> {
                        ids.iter()
                            .map(|lid| {
                                label_names
                                    .get(&(space.clone(), lid.clone()))
                                    .cloned()
                                    .unwrap_or_else(|| lid.strip_prefix("label_").unwrap_or(lid).to_string())
                            })
                            .collect()
                    };
                    let d = decide(mode, existing.as_ref().map(|sm| sm.memory.clone()), line.memory.clone())?;
                    let labels_now = match &at {
                        Some(s) => t.label_ids(s, &id)?,
                        None => BTreeSet::new(),
                    };
                    let mentions_now: BTreeSet<String> = match &at {
                        Some(s) => super::range_prefix3(&t.mentions, s, &id)?.into_iter().collect(),
                        None => BTreeSet::new(),
                    };
                    let (labels, mentions): (BTreeSet<String>, BTreeSet<String>) = match (&d, mode) {
                        (Decision::Insert(_), _) | (_, ImportMode::Overwrite) => {
                            (line.label_ids.iter().cloned().collect(), line.mentions.iter().cloned().collect())
                        }
                        (_, ImportMode::Merge) => (
                            labels_now.iter().chain(&line.label_ids).cloned().collect(),
                            mentions_now.iter().chain(&line.mentions).cloned().collect(),
                        ),
                        (_, ImportMode::Skip) => (labels_now.clone(), mentions_now.clone()),
                    };
                    let edges_changed = labels != labels_now || mentions != mentions_now;
                    let record = match d {
                        Decision::Insert(m) | Decision::Replace(m) => Some(m),
                        Decision::Keep if edges_changed => existing.as_ref().map(|sm| sm.memory.clone()),
                        Decision::Keep => None,
                    };
                    match (&record, &existing) {
                        (None, _) => k.skipped += 1,
                        (Some(_), None) => k.inserted += 1,
                        (Some(_), Some(_)) => k.updated += 1,
                    }
                    if let Some(m) = record {
                        let docno = next_docno;
                        next_docno += 1;
                        let label_names: BTreeSet<String> = names(&labels.iter().cloned().collect::<Vec<_>>());
                        let space = m.space_id.clone();
                        let docno = t.import_memory(at.as_deref(), existing, m, &label_names, &mentions, docno, now)?;
                        // Caller-supplied vectors come back with their memory (an external store cannot
                        // recompute them); a vector of another dimension, or for a store that embeds by itself,
                        // is left out and the text is embedded as usual.
                        let embedder = &*self.config.embedder;
                        if let Some(v) =
                            line.embedding.as_ref().filter(|v| embedder.external() && v.len() == embedder.dim())
                            && v.iter().all(|x| x.is_finite())
                        {
                            t.vectors.insert((space.as_str(), docno), schema::vector_to_bytes(v).as_slice())?;
                        }
                    }
                    tick();
                    Ok(())
                })?;
            }
            {
                let mut t = WTables::open(txn)?;
                let k = c.entry("relations".into()).or_default();
                ar.lines("relations.jsonl", |r: MemoryRelation| {
                    need_space(&r.space_id)?;
                    let existing: Option<MemoryRelation> =
                        get_record(&t.relations, (r.space_id.as_str(), r.id.as_str()))?;
                    let d = decide(mode, existing, r.clone())?;
                    k.note(&d);
                    if let Decision::Insert(v) | Decision::Replace(v) = &d {
                        t.relations.insert((r.space_id.as_str(), r.id.as_str()), schema::encode(v)?.as_slice())?;
                        t.relation_space.insert(r.id.as_str(), r.space_id.as_str())?;
                        t.memory_relations
                            .insert((r.space_id.as_str(), v.source_memory_id.as_str(), r.id.as_str()), ())?;
                        t.memory_relations
                            .insert((r.space_id.as_str(), v.target_memory_id.as_str(), r.id.as_str()), ())?;
                    }
                    tick();
                    Ok(())
                })?;
                drop(t);
                let mut cs = txn.open_table(CRYSTAL_SOURCES)?;
                let k = c.entry("crystal_sources".into()).or_default();
                ar.lines("crystal_sources.jsonl", |r: CrystalSourceLine| {
                    need_space(&r.space_id)?;
                    let key = (r.space_id.as_str(), r.crystal_id.as_str(), r.memory_id.as_str());
                    let cur = cs.get(key)?.map(|v| v.value());
                    match (cur, mode) {
                        (None, _) => {
                            cs.insert(key, r.weight)?;
                            k.inserted += 1;
                        }
                        (Some(w), ImportMode::Overwrite) if w != r.weight => {
                            cs.insert(key, r.weight)?;
                            k.updated += 1;
                        }
                        _ => k.skipped += 1,
                    }
                    tick();
                    Ok(())
                })?;
            }
            {
                let mut t = txn.open_table(THREADS)?;
                let mut ts = txn.open_table(THREAD_SPACES)?;
                let k = c.entry("threads".into()).or_default();
                // Threads whose messages the archive decides (new or replaced threads, and merged ones).
                let mut take_messages: HashSet<(String, String)> = HashSet::new();
                let mut replaced: Vec<(String, String)> = Vec::new();
                ar.lines("threads.jsonl", |th: Thread| {
                    need_space(&th.space_id)?;
                    let existing: Option<Thread> = get_record(&t, (th.space_id.as_str(), th.thread_id.as_str()))?;
                    let had = existing.is_some();
                    let d = decide(mode, existing, th.clone())?;
                    k.note(&d);
                    put_record(&mut t, &th.space_id, &th.thread_id, &d)?;
                    ts.insert((th.thread_id.as_str(), th.space_id.as_str()), ())?;
                    let key = (th.space_id.clone(), th.thread_id.clone());
                    match mode {
                        ImportMode::Skip if had => {}
                        ImportMode::Overwrite if had => {
                            replaced.push(key.clone());
                            take_messages.insert(key);
                        }
                        _ => {
                            take_messages.insert(key);
                        }
                    }
                    tick();
                    Ok(())
                })?;
                drop(t);
                drop(ts);
                let mut msgs = txn.open_table(MESSAGES)?;
                let mut mkeys = txn.open_table(MESSAGE_KEYS)?;
                for (s, th) in &replaced {
                    msgs.retain_in((s.as_str(), th.as_str(), 0u64)..=(s.as_str(), th.as_str(), u64::MAX), |_, _| {
                        false
                    })?;
                    mkeys
                        .retain_in((s.as_str(), th.as_str(), "")..(s.as_str(), th.as_str(), "\u{10ffff}"), |_, _| {
                            false
                        })?;
                }
                let k = c.entry("messages".into()).or_default();
                ar.lines("messages.jsonl", |m: MessageLine| {
                    let key = (m.space_id.clone(), m.thread_id.clone());
                    if !take_messages.contains(&key) {
                        k.skipped += 1;
                    } else {
                        let at = (m.space_id.as_str(), m.thread_id.as_str(), m.index);
                        let existing: Option<Message> = get_record(&msgs, at)?;
                        let d = decide(mode, existing, m.message.clone())?;
                        k.note(&d);
                        if let Decision::Insert(v) | Decision::Replace(v) = &d {
                            msgs.insert(at, schema::encode(v)?.as_slice())?;
                        }
                    }
                    tick();
                    Ok(())
                })?;
                let k = c.entry("message_keys".into()).or_default();
                ar.lines("message_keys.jsonl", |m: MessageKeyLine| {
                    let key = (m.space_id.clone(), m.thread_id.clone());
                    let at = (m.space_id.as_str(), m.thread_id.as_str(), m.key.as_str());
                    if take_messages.contains(&key) && mkeys.get(at)?.is_none() {
                        mkeys.insert(at, m.index)?;
                        k.inserted += 1;
                    } else {
                        k.skipped += 1;
                    }
                    tick();
                    Ok(())
                })?;
                // A merged thread may have gained messages: its count follows its rows.
                drop(msgs);
                let msgs = txn.open_table(MESSAGES)?;
                let mut t = txn.open_table(THREADS)?;
                for (s, th) in &take_messages {
                    let n = msgs.range((s.as_str(), th.as_str(), 0u64)..=(s.as_str(), th.as_str(), u64::MAX))?.count()
                        as u64;
                    if let Some(mut rec) = get_record::<_, Thread>(&t, (s.as_str(), th.as_str()))?
                        && rec.message_count != n
                        && n > 0
                    {
                        rec.message_count = n;
                        t.insert((s.as_str(), th.as_str()), schema::encode(&rec)?.as_slice())?;
                    }
                }
            }
            {
                let mut t = txn.open_table(WORKING_MEMORY)?;
                let k = c.entry("working_memory".into()).or_default();
                ar.lines("working_memory.jsonl", |w: WorkingMemory| {
                    need_space(&w.space_id)?;
                    let existing: Option<WorkingMemory> = get_record(&t, (w.space_id.as_str(), w.date.as_str()))?;
                    let d = decide(mode, existing, w.clone())?;
                    k.note(&d);
                    put_record(&mut t, &w.space_id, &w.date, &d)?;
                    tick();
                    Ok(())
                })?;
            }
            {
                let mut lines: Vec<SourceLine> = Vec::new();
                ar.lines("sources.jsonl", |s: SourceLine| {
                    lines.push(s);
                    Ok(())
                })?;
                let mut st = txn.open_table(SOURCES)?;
                let mut ss = txn.open_table(SOURCE_SPACE)?;
                let mut sha = txn.open_table(SOURCE_SHA)?;
                let mut text = txn.open_table(SOURCE_TEXT)?;
                let mut files = txn.open_table(SOURCE_FILES)?;
                let mut chunks = txn.open_table(SOURCE_CHUNKS)?;
                let k = c.entry("sources".into()).or_default();
                for line in lines {
                    let s = &line.source;
                    need_space(&s.space_id)?;
                    touched.insert(s.space_id.clone());
                    let id = s.id.as_str();
                    let dup = sha.get((s.space_id.as_str(), s.sha256.as_str()))?.map(|v| v.value().to_string());
                    if dup.as_deref().is_some_and(|d| d != id) {
                        // The same bytes are already another source of the space.
                        k.skipped += 1;
                        tick();
                        continue;
                    }
                    let existing: Option<Source> = get_record(&st, (s.space_id.as_str(), id))?;
                    let had = existing.is_some();
                    let d = decide(mode, existing, s.clone())?;
                    k.note(&d);
                    put_record(&mut st, &s.space_id, id, &d)?;
                    let replace_body = !had || (mode == ImportMode::Overwrite && matches!(d, Decision::Replace(_)));
                    if replace_body || (mode == ImportMode::Merge && text.get(id)?.is_none()) {
                        ss.insert(id, s.space_id.as_str())?;
                        sha.insert((s.space_id.as_str(), s.sha256.as_str()), id)?;
                        text.insert(id, line.text.as_bytes())?;
                        chunks.retain_in((id, 0u64)..=(id, u64::MAX), |_, _| false)?;
                        for (i, ch) in line.chunks.iter().enumerate() {
                            chunks.insert((id, i as u64), schema::encode(ch)?.as_slice())?;
                        }
                        if let Some(bytes) = ar.blob(&format!("source_files/{id}"))? {
                            files.insert(id, bytes.as_slice())?;
                        }
                    }
                    tick();
                }
            }
            {
                // Communities are derived; they are taken only into a store that has none (the graph worker
                // recomputes them after the import either way).
                let mut ct = txn.open_table(COMMUNITIES)?;
                let k = c.entry("communities".into()).or_default();
                let empty = ct.is_empty()?;
                let mut members = txn.open_table(COMMUNITY_MEMBERS)?;
                let mut ec = txn.open_table(ENTITY_COMMUNITY)?;
                let mut max_id = 0u64;
                ar.lines("communities.jsonl", |l: CommunityLine| {
                    if empty {
                        ct.insert(l.community.id, schema::encode(&l.community)?.as_slice())?;
                        for (s, e, r) in &l.members {
                            members.insert((l.community.id, s.as_str(), e.as_str()), *r)?;
                            ec.insert((s.as_str(), e.as_str()), l.community.id)?;
                        }
                        max_id = max_id.max(l.community.id);
                        k.inserted += 1;
                    } else {
                        k.skipped += 1;
                    }
                    tick();
                    Ok(())
                })?;
                let mut pr = txn.open_table(MEMORY_PAGERANK)?;
                ar.lines("memory_pagerank.jsonl", |l: PagerankLine| {
                    if empty {
                        pr.insert((l.space_id.as_str(), l.memory_id.as_str()), l.score)?;
                    }
                    tick();
                    Ok(())
                })?;
                if empty && max_id > 0 {
                    let mut meta = txn.open_table(META)?;
                    let next = meta_u64(&meta, "next_community_id")?.unwrap_or(1).max(max_id + 1);
                    meta.insert("next_community_id", next.to_le_bytes().as_slice())?;
                }
            }
            for space in &touched {
                recount(txn, space)?;
            }
            Ok(touched)
        })?;
        drop(_w);
        self.after_bulk_change(&touched)?;
        report.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(report)
    }

    /// Rebuilds the in-memory state after a bulk change of the file (import): indexes, ranks, caches; starts
    /// re-embedding and wakes the graph workers.
    fn after_bulk_change(&self, touched: &BTreeSet<String>) -> Result<()> {
        self.load_indexes()?;
        self.graph.write().memory_rank = super::communities::load_ranks(&self.db)?;
        {
            let mut ci = self.chunk_index.write();
            for s in touched {
                ci.remove(s);
            }
        }
        self.label_vector_cache.lock().clear();
        self.builder.wake();
        self.graph_worker.wake();
        self.start_reembedding();
        Ok(())
    }
}

/// Recomputes what follows from the edges of `space`: label usage counts, entity mention counts and
/// RELATES_TO weights (memories mentioning both entities).
fn recount(txn: &redb::WriteTransaction, space: &str) -> Result<()> {
    let lm = txn.open_table(LABEL_MEMORIES)?;
    let mut labels = txn.open_table(LABELS)?;
    let mut fixes: Vec<(String, Label)> = Vec::new();
    for row in labels.range((space, "")..)? {
        let (k, v) = row?;
        let (s, id) = k.value();
        if s != space {
            break;
        }
        let mut l: Label = schema::decode(v.value())?;
        let n = super::range_prefix2_count(&lm, space, id)?;
        if l.usage_count != n {
            l.usage_count = n;
            fixes.push((id.to_string(), l));
        }
    }
    for (id, l) in fixes {
        labels.insert((space, id.as_str()), schema::encode(&l)?.as_slice())?;
    }
    let em = txn.open_table(ENTITY_MEMORIES)?;
    let mut ents = txn.open_table(ENTITIES)?;
    let mut fixes: Vec<(String, Entity)> = Vec::new();
    for row in ents.range((space, "")..)? {
        let (k, v) = row?;
        let (s, id) = k.value();
        if s != space {
            break;
        }
        let mut e: Entity = schema::decode(v.value())?;
        let n = super::range_prefix2_count(&em, space, id)?;
        if e.mention_count != n {
            e.mention_count = n;
            fixes.push((id.to_string(), e));
        }
    }
    for (id, e) in fixes {
        ents.insert((space, id.as_str()), schema::encode(&e)?.as_slice())?;
    }
    // RELATES_TO from MENTIONS: every pair of entities a memory mentions, both directions.
    let mentions = txn.open_table(MENTIONS)?;
    let mut weights: HashMap<(String, String), u64> = HashMap::new();
    let mut cur_mem: Option<String> = None;
    let mut group: Vec<String> = Vec::new();
    let flush = |group: &mut Vec<String>, weights: &mut HashMap<(String, String), u64>| {
        for a in group.iter() {
            for b in group.iter() {
                if a != b {
                    *weights.entry((a.clone(), b.clone())).or_default() += 1;
                }
            }
        }
        group.clear();
    };
    for row in mentions.range((space, "", "")..)? {
        let (k, _) = row?;
        let (s, m, e) = k.value();
        if s != space {
            break;
        }
        if cur_mem.as_deref() != Some(m) {
            flush(&mut group, &mut weights);
            cur_mem = Some(m.to_string());
        }
        group.push(e.to_string());
    }
    flush(&mut group, &mut weights);
    let mut rt = txn.open_table(RELATES_TO)?;
    rt.retain_in((space, "", "")..(space, "\u{10ffff}", ""), |_, _| false)?;
    for ((a, b), w) in weights {
        rt.insert((space, a.as_str(), b.as_str()), w)?;
    }
    Ok(())
}

/// Shared job state of the import route.
#[derive(Debug, Clone, Serialize)]
pub struct ImportJob {
    /// Job id.
    pub job_id: String,
    /// `processing`, `completed` or `error`.
    pub status: String,
    /// The archive.
    pub import_path: String,
    /// The mode.
    pub mode: ImportMode,
    /// Records written.
    pub processed: u64,
    /// Records in the archive.
    pub total: u64,
    /// Per kind, once completed.
    pub counts: Option<BTreeMap<String, KindCounts>>,
    /// Why it failed (status `error`).
    pub error: Option<String>,
    /// Start.
    pub started_at: Timestamp,
    /// End.
    pub finished_at: Option<Timestamp>,
    /// Milliseconds taken, once finished.
    pub elapsed_ms: Option<f64>,
}

/// Import jobs of a store: at most one runs at a time.
#[derive(Default)]
pub(crate) struct Jobs {
    jobs: parking_lot::Mutex<HashMap<String, (ImportJob, Arc<ImportProgress>)>>,
}

impl KnowledgeStore {
    /// Starts importing `path` on a background thread and returns the job (status `processing`). Poll it with
    /// [`KnowledgeStore::import_job`].
    ///
    /// # Errors
    /// [`ErrorKind::Conflict`] (`import_running`) while another import runs; [`ErrorKind::Forbidden`]
    /// (`path_not_allowed`); [`ErrorKind::NotFound`] (`file_not_found`) when there is no file there.
    pub fn start_import(self: &Arc<Self>, path: &Path, mode: ImportMode) -> Result<ImportJob> {
        let real = self.config.confine_named(path, "import_path")?;
        if !real.exists() {
            return Err(Error::not_found(ErrorCode::FileNotFound, format!("no archive at '{}'", path.display())));
        }
        let progress = Arc::new(ImportProgress::default());
        let job = ImportJob {
            job_id: format!("import_{}", uuid::Uuid::now_v7().simple()),
            status: "processing".into(),
            import_path: real.display().to_string(),
            mode,
            processed: 0,
            total: 0,
            counts: None,
            error: None,
            started_at: Timestamp::now(),
            finished_at: None,
            elapsed_ms: None,
        };
        {
            let mut jobs = self.jobs.jobs.lock();
            if jobs.values().any(|(j, _)| j.status == "processing") {
                return Err(Error::new(ErrorKind::Conflict, "an import is already running; wait for it to finish")
                    .with_code(ErrorCode::ImportRunning));
            }
            jobs.insert(job.job_id.clone(), (job.clone(), progress.clone()));
        }
        let store = self.clone();
        let id = job.job_id.clone();
        let spawned = std::thread::Builder::new().name("engram-import".into()).spawn(move || {
            let out = store.import_data(&real, mode, &progress);
            let mut jobs = store.jobs.jobs.lock();
            if let Some((j, _)) = jobs.get_mut(&id) {
                j.finished_at = Some(Timestamp::now());
                j.elapsed_ms = Some((Timestamp::now().0 - j.started_at.0) as f64);
                match out {
                    Ok(r) => {
                        j.status = "completed".into();
                        j.counts = Some(r.counts);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e.chain(), "import failed; the store is unchanged");
                        j.status = "error".into();
                        let detail =
                            e.fields().first().map(|f| f.msg.clone()).unwrap_or_else(|| e.message().to_string());
                        j.error = Some(detail);
                    }
                }
            }
        });
        if let Err(e) = spawned {
            self.jobs.jobs.lock().remove(&job.job_id);
            return Err(Error::new(ErrorKind::Internal, format!("could not start the import thread: {e}")));
        }
        Ok(job)
    }

    /// The state of import job `id`, with live progress while it runs.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`job_not_found`).
    pub fn import_job(&self, id: &str) -> Result<ImportJob> {
        let jobs = self.jobs.jobs.lock();
        let (j, p) =
            jobs.get(id).ok_or_else(|| Error::not_found(ErrorCode::JobNotFound, format!("no import job '{id}'")))?;
        let mut j = j.clone();
        j.processed = p.processed.load(Ordering::Relaxed);
        j.total = p.total.load(Ordering::Relaxed);
        Ok(j)
    }
}
