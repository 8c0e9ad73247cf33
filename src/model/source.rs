//! Sources: documents a person brings (uploaded files, files on the server's machine), with their parsed text,
//! section tree and chunks. The spec's Source record.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Metadata, Timestamp};

/// Largest document accepted, in bytes (64 MiB): an upload, a file on the server's machine, or a fetched URL.
/// Defined with the record (a leaf module), so that the fetcher (`net`) and the store read the same bound without
/// depending on each other.
pub const MAX_SOURCE_BYTES: usize = 64 << 20;

/// Where a source is in its lifecycle (the values `nmem library list --state` offers).
///
/// `ingested` (bytes stored) -> `parsed` (text and section tree) -> `chunked` (chunks searchable) ->
/// `indexed` (memories extracted); any step can end in `error` (with `error_message`). Ingestion runs these
/// steps in one request, so a listed source is normally `indexed`, or `chunked` when extraction was turned off.
pub const SOURCE_STATES: &[&str] = &["ingested", "parsed", "chunked", "indexed", "error"];

/// A document and what was derived from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Source {
    /// `src_<32 hex digits>`.
    pub id: String,
    /// `file` (upload or server path) or `url`.
    pub source_type: String,
    /// File name as given (no directories).
    pub original_name: String,
    /// `text/markdown`, `text/plain` or `text/html`.
    pub mime_type: String,
    /// The server path it was read from (ingestion by path), else empty.
    pub file_path: String,
    /// Its path in the tree API (`/sources/<original_name>`).
    pub parsed_path: String,
    /// Where it came from, when given.
    pub source_url: String,
    /// SHA-256 of the original bytes, lowercase hex: the same bytes in the same space give the same source.
    pub sha256: String,
    /// Size of the original bytes.
    pub size_bytes: u64,
    /// 1.
    pub version: u64,
    /// Space holding it.
    pub space_id: String,
    /// One of [`SOURCE_STATES`].
    pub lifecycle_state: String,
    /// Chunks indexed for `GET /sources/search` and `/fs/grep`.
    pub chunk_count: u64,
    /// Memories extracted from it.
    pub memory_count: u64,
    /// JSON array of `{title, level, offset, length, children}` (offsets and lengths in bytes of the parsed
    /// text), one node per heading.
    pub section_tree: String,
    /// The document's first sentences (at most 300 characters).
    pub summary: String,
    /// Why the last step failed (state `error`), else empty.
    pub error_message: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// Caller data.
    pub metadata: Metadata,
    /// Labels (`label_<name>`).
    pub label_ids: Vec<String>,
}

/// A chunk of a source's parsed text, as [`crate::extract::document::parse`] cuts it and the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Byte offset in the parsed text.
    pub offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// Heading path, `A > B` (empty before the first heading).
    pub section: String,
}
