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
//!
//! The service is [`Transfer`] (`store.transfer()`): `export.rs`, `import.rs`, background import jobs in
//! `jobs.rs`, the archive reader and writer in `archive.rs`, the conflict rules in `policy.rs`.

mod archive;
mod export;
mod import;
mod jobs;
mod policy;
mod recount;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use serde::{Deserialize, Serialize};

use crate::extract::document::Chunk;
use crate::model::Community;

/// Export and import of a whole store, borrowed from the store (`store.transfer()`).
///
/// Owns: the archive format, the import conflict policy, and the store's background import jobs.
#[derive(Clone, Copy)]
pub struct Transfer<'s> {
    pub(crate) store: &'s super::KnowledgeStore,
}
use crate::model::{Memory, Message, Source, Timestamp};

pub(crate) use archive::Archive;
use archive::*;
pub use jobs::ImportJob;
pub(crate) use jobs::Jobs;
use policy::*;

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

/// Options of [`Transfer::export`](crate::store::Transfer::export).
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
    /// Seal the archive in an age file for this key (docs/security.md): a ZIP file only (`compress`). None:
    /// a plain archive, as the official clients read it.
    pub encrypt: Option<crate::storage::crypt::ArchiveKey>,
}

/// What an export wrote.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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
    /// Whether the archive is sealed in an age file (`encrypt`).
    pub encrypted: bool,
}

/// Conflict handling of an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, utoipa::ToSchema)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
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

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}
