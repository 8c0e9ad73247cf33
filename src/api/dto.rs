//! Request and response bodies of the HTTP/C surface, with their OpenAPI schemas. Field names follow
//! `interface.md` and `client-contract.md`; unknown request fields are ignored (clients send extras).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::FieldError;
use crate::model::{Label, Memory, Space};
use crate::store::MemoryView;

/// Provenance thread of a memory.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SourceThread {
    /// Thread id.
    pub id: String,
    /// Thread title (empty until threads are stored).
    pub title: String,
    /// Space of the thread.
    pub space_id: String,
}

/// A memory as every endpoint returns it: the full record plus the listing-form fields.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MemoryOut {
    /// The full record.
    #[serde(flatten)]
    pub memory: Memory,
    /// Label names.
    pub labels: Vec<String>,
    /// Label ids (`label_<name>`).
    pub label_ids: Vec<String>,
    /// Creation time (listing form's `time`).
    pub time: String,
    /// Rating (importance on the listing form's scale, 0..=1).
    pub rating: f64,
    /// Provenance thread, when known.
    pub source_thread: Option<SourceThread>,
    /// Not echoed: vectors stay in the store. Always null.
    #[schema(value_type = Option<Vec<f64>>)]
    pub embedding: Option<Vec<f32>>,
    /// Engram extension: `expires_at` has passed (the memory is out of search and listings, readable by id).
    pub expired: bool,
}

impl From<MemoryView> for MemoryOut {
    fn from(v: MemoryView) -> Self {
        let labels = v.label_names();
        let m = v.memory;
        MemoryOut {
            expired: m.expired_at(crate::model::Timestamp::now()),
            time: m.created_at.to_rfc3339(),
            rating: m.importance,
            source_thread: m.source_thread_id.clone().map(|id| SourceThread {
                id,
                title: String::new(),
                space_id: m.space_id.clone(),
            }),
            labels,
            label_ids: v.label_ids,
            memory: m,
            embedding: None,
        }
    }
}

/// Response of `POST /memories`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreateMemoryResponse {
    /// The stored memory.
    pub memory: MemoryOut,
    /// Entities found in it (full Entity records).
    pub extracted_entities: Vec<crate::model::Entity>,
    /// Label names attached.
    pub assigned_labels: Vec<String>,
    /// Graph relationships created.
    pub created_relationships: u64,
    /// `created`, `updated` or `unchanged`.
    pub action: String,
    /// Non-fatal notes.
    pub warnings: Vec<String>,
}

/// Response of `POST /memories/batch`: one `POST /memories` response per item, in order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchCreateResponse {
    /// Results in request order.
    pub memories: Vec<CreateMemoryResponse>,
}

/// Paging information.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Pagination {
    /// Page size asked.
    pub limit: usize,
    /// Items skipped.
    pub offset: usize,
    /// Matching items.
    pub total: usize,
    /// More items after this page.
    pub has_more: bool,
}

/// Response of `GET /memories`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ListMemoriesResponse {
    /// One page, newest first.
    pub memories: Vec<MemoryOut>,
    /// Paging.
    pub pagination: Pagination,
}

/// Response of `DELETE /memories/{memory_id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeleteMemoryResponse {
    /// What happened.
    pub message: String,
    /// Edges removed with the memory.
    pub deleted_relationships: u64,
    /// Entities removed (entities are kept; always 0).
    pub deleted_entities: u64,
}

/// Body of `POST /memories/search`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct SearchRequest {
    /// Query text, 1..=4,096 bytes.
    pub query: String,
    /// Hits, 1..=100 (default 10).
    pub limit: Option<i64>,
    /// Fill `related_entities` (default true).
    pub include_entities: Option<bool>,
    /// Label names every hit must carry.
    pub filter_labels: Option<Vec<String>>,
    /// `deep` or `fast`; both run the same hybrid search here.
    pub mode: Option<String>,
    /// Engram extension: `hybrid` (default), `lexical` or `vector`.
    pub retrieval: Option<String>,
    /// Event date lower bound.
    pub event_date_from: Option<String>,
    /// Event date upper bound.
    pub event_date_to: Option<String>,
    /// Recorded (created) date lower bound.
    pub recorded_date_from: Option<String>,
    /// Recorded date upper bound.
    pub recorded_date_to: Option<String>,
    /// Only this temporal context.
    pub temporal_context: Option<String>,
    /// Only this unit type.
    pub unit_type: Option<String>,
    /// Minimum importance 0..=1.
    pub importance_min: Option<f64>,
    /// Include superseded versions.
    pub include_history: Option<bool>,
    /// Space (default `default`).
    pub space_id: Option<String>,
    /// Engram extension: return each hit's neighbouring messages or chunks in `context` (default false).
    pub include_context: Option<bool>,
    /// Engram extension: neighbours on each side for `include_context`, 1..=10 (default 1).
    pub context_window: Option<i64>,
    /// Engram extension: neighbour expansion in ranking (default true; `docs/retrieval.md`).
    pub expand_neighbours: Option<bool>,
    /// Engram extension: the query's vector, for a store opened with `--embedding-model external:DIM` (DIM
    /// finite numbers). Without it such a store ranks by BM25 alone and says so in `search_metadata`. With it,
    /// `query` may be empty.
    pub query_embedding: Option<Vec<f32>>,
    /// Engram extension: the same vector as base64 of its little-endian IEEE 754 float32 values (4 x DIM
    /// bytes; `numpy.float32` array `.tobytes()`), the form of OpenAI's `encoding_format: "base64"`: no float
    /// printing or parsing on either side. At most one of `query_embedding` and `query_embedding_base64`.
    pub query_embedding_base64: Option<String>,
    /// Engram extension: `full` (default, the seed's `MemorySearchResult` items) or `compact` (items of
    /// `CompactSearchHit`: the memory id and its score, for callers that fetch records themselves).
    pub result_format: Option<String>,
}

/// One item of the `POST /memories/search` array with `result_format: "compact"`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CompactSearchHit {
    /// Memory id.
    pub id: String,
    /// Fused score 0..=1, as `similarity_score` of the full form.
    pub similarity_score: f64,
}

/// One item of the `POST /memories/search` array.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MemorySearchResult {
    /// The memory.
    pub memory: MemoryOut,
    /// Fused score 0..=1.
    pub similarity_score: f64,
    /// Why it matched, in words (for people; programs read `matched_terms` and the score).
    pub relevance_reason: String,
    /// Engram extension: the query's terms (after stemming, as BM25 indexes them) that the memory contains;
    /// empty for a semantic-only hit.
    pub matched_terms: Vec<String>,
    /// Entities the memory mentions (filled when `include_entities` is true).
    pub related_entities: Vec<crate::model::Entity>,
    /// Reserved (empty object).
    #[schema(value_type = Object)]
    pub evolves_context: serde_json::Value,
    /// With `include_context`: the neighbouring messages or chunks of the hit, in order, its own marked
    /// `is_hit` (empty for a memory without a thread or source position).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<Vec<crate::store::ContextItem>>,
}

/// Degradation notice of a search.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FallbackStatus {
    /// True when part of the search could not run.
    pub degraded: bool,
    /// Explanation.
    pub message: String,
}

/// `search_metadata` of `GET /memories/search`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchMetadata {
    /// Hits returned.
    pub total_found: usize,
    /// `hybrid`, `lexical` or `vector`.
    pub search_mode: String,
    /// Memories that passed the filters.
    pub candidates: usize,
    /// Time spent, in milliseconds.
    pub elapsed_ms: f64,
    /// Degradation notice.
    pub fallback_status: FallbackStatus,
}

/// Response of `GET /memories/search`: memories carry `metadata.similarity_score` and
/// `metadata.relevance_reason`, and the same at top level.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchGetResponse {
    /// Hits, best first.
    #[schema(value_type = Vec<MemoryOut>)]
    pub memories: Vec<serde_json::Value>,
    /// About the search.
    pub search_metadata: SearchMetadata,
}

/// `{labels: [...]}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LabelsResponse {
    /// Labels.
    pub labels: Vec<Label>,
}

/// `{message}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MessageResponse {
    /// What happened.
    pub message: String,
}

/// Body of `POST /spaces`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct CreateSpaceRequest {
    /// Display name; the id is its slug.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Icon.
    pub icon: Option<String>,
    /// Instructions for agents.
    pub instructions: Option<String>,
    /// Aliases.
    pub aliases: Option<Vec<String>>,
    /// Caller-chosen id (default: the slug of the name).
    #[serde(default)]
    pub id: Option<String>,
    /// Spaces whose memories this space's searches also see.
    #[serde(default, rename = "sharedSpaceIds", alias = "shared_space_ids")]
    pub shared_space_ids: Option<Vec<String>>,
    /// Retrieval mode (default `strict`).
    #[serde(default, rename = "defaultRetrievalMode", alias = "default_retrieval_mode")]
    pub default_retrieval_mode: Option<String>,
}

/// `{enabled, spaces}` (and the created `space` on `POST /spaces`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SpacesResponse {
    /// Spaces are always enabled.
    pub enabled: bool,
    /// Every space.
    pub spaces: Vec<Space>,
    /// The space just created (`POST` only).
    pub space: Option<Space>,
}

/// Embedding status in `/health`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EmbeddingStatus {
    /// `local-static` for the built-in static model, `local-hash-fallback` for the hashing embedder,
    /// `local-onnx` for an ONNX model.
    pub mode: String,
    /// Embedder name as recorded in the store (changing it re-embeds).
    pub model: String,
    /// The model id `/v1/embeddings` answers to.
    pub model_id: String,
    /// Vector dimension.
    pub dimension: usize,
    /// Longest input in model tokens (null: no limit).
    pub max_input_tokens: Option<usize>,
    /// True when search runs below its configured quality: memories are being re-embedded (searches are
    /// lexical meanwhile; `message` gives the progress).
    pub degraded: bool,
    /// Why it is degraded (empty when it is not).
    pub message: String,
}

/// Background re-embedding, in `GET /health`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReindexStatus {
    /// Memories without a vector from the active embedder.
    pub pending: usize,
    /// A re-embedding run is in progress.
    pub running: bool,
    /// Memories handled by the current (or last) run.
    pub done: u64,
    /// Memories the run started with.
    pub total: u64,
    /// `name:dim` of the embedder whose vectors were replaced.
    pub from_model: Option<String>,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
}

/// Response of `GET /health`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HealthResponse {
    /// `ok`.
    pub status: String,
    /// Server version.
    pub version: String,
    /// The store answered.
    pub database_connected: bool,
    /// Embedding status.
    pub embedding: EmbeddingStatus,
    /// Memories waiting for vectors.
    pub reindex_needed: bool,
    /// Background re-embedding progress.
    pub reindex: ReindexStatus,
    /// Live memories, all spaces.
    pub memory_count: usize,
    /// Write transactions since creation.
    pub generation: u64,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Engram extension: the vector indexes, summed over spaces.
    pub vector_index: VectorIndexHealth,
    /// Engram extension: the store's format and its last upgrade.
    pub store_format: StoreFormatHealth,
    /// Engram extension: expired memories and the expiry sweep.
    pub expiry: crate::store::ExpiryStatus,
    /// Engram extension: whether the store is encrypted at rest, with which cipher and key source (never key
    /// material; docs/security.md).
    pub encryption: crate::storage::crypt::EncryptionStatus,
    /// Engram extension: the store's sync group (docs/sync.md): whether it is in one, changes not yet written,
    /// and each other device's last segment, last seen time, changes, conflicts and last error. Public, so it
    /// names no device id or folder (`engram sync status` does).
    pub sync: SyncHealth,
}

/// The sync group in `GET /health` (Engram extension; docs/sync.md).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SyncHealth {
    /// Whether the store belongs to a sync group.
    pub enabled: bool,
    /// This device's changes not yet written to the folder.
    pub pending_changes: u64,
    /// The other devices seen in the folder, in device id order.
    pub peers: Vec<PeerHealth>,
    /// The folder pass's progress through their segments (a first sync applies many).
    pub progress: crate::store::SyncProgress,
    /// The epoch of the group key (0 until a device is removed; each removal rotates the key).
    pub key_epoch: u32,
    /// Why this device cannot sync in its group any more (it was removed from it), if so.
    pub error: Option<String>,
}

/// Another device of the sync group in `GET /health`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PeerHealth {
    /// The last of its segments applied here (0: none).
    pub cursor: u64,
    /// When one of its segments was last applied here (RFC 3339), if ever.
    pub last_seen: Option<String>,
    /// Its changes applied here, in all.
    pub applied: u64,
    /// Its concurrent edits resolved here, in all.
    pub conflicts: u64,
    /// Its next segment is still being copied into the folder.
    pub pending: bool,
    /// Why its next segment was refused, if it was (the store is unchanged by it; retried at the next pass).
    pub error: Option<String>,
}

impl SyncHealth {
    /// The public part of `s`.
    pub fn of(s: crate::store::SyncStatus) -> Self {
        SyncHealth {
            enabled: s.enabled,
            pending_changes: s.pending_changes,
            progress: s.progress,
            key_epoch: s.key_epoch,
            error: s.error,
            peers: s
                .peers
                .into_iter()
                .map(|p| PeerHealth {
                    cursor: p.cursor,
                    last_seen: p.last_seen,
                    applied: p.applied,
                    conflicts: p.conflicts,
                    pending: p.pending,
                    error: p.error,
                })
                .collect(),
        }
    }
}

/// The store's format in `GET /health` (Engram extension).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StoreFormatHealth {
    /// Format version of the store (this release's once it is open).
    pub version: u32,
    /// The last upgrade: from and to which format, when, records rewritten, and the backup copy written first
    /// (redb; kept until you remove it).
    pub last_upgrade: Option<crate::store::upgrade::UpgradeRecord>,
}

/// The vector indexes in `GET /health` (Engram extension), summed over spaces.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct VectorIndexHealth {
    /// Live vectors.
    pub vectors: usize,
    /// Points in HNSW graphs (live and tombstones; spaces under 4,096 vectors have no graph and scan exactly).
    pub graph_points: usize,
    /// Graph points of edited or deleted memories.
    pub tombstones: usize,
    /// Vectors not yet in their space's graph (searched exactly until the background builder inserts them).
    pub pending: usize,
}

/// Response of `GET /capabilities`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CapabilitiesResponse {
    /// Server version.
    pub version: String,
    /// `engram`.
    pub server: String,
    /// Version of the interface description this server follows.
    pub api_version: String,
    /// Feature flags; false means the client should hide the feature.
    #[schema(value_type = Object)]
    pub features: serde_json::Map<String, serde_json::Value>,
    /// The active embedder (as in `/health`).
    pub embedding: EmbeddingStatus,
}

/// Error body for everything but validation errors.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Message.
    pub detail: String,
    /// Machine-readable code, e.g. `memory_not_found`.
    pub error_code: String,
    /// Whether retrying may succeed.
    pub retryable: bool,
}

/// 422 body.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ValidationErrorBody {
    /// One entry per bad field.
    pub detail: Vec<FieldError>,
}
