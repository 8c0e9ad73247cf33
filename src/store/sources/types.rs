//! The input, query and report types of the source service.

use super::*;

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

/// Filters of [`Sources::list`](crate::store::Sources::list).
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

/// The chunks of one source that match a query ([`Sources::search_chunks`](crate::store::Sources::search_chunks)).
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
