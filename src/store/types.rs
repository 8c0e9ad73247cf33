//! Inputs and outputs of the [`crate::KnowledgeStore`] methods.

use std::collections::BTreeMap;

use crate::index::catalog::MemoryFilter;
use crate::model::{Memory, Metadata, TemporalContext, Timestamp, UnitType};

/// A memory to create, or to upsert when `id` names an existing one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewMemory {
    /// Caller-chosen id (1..=200 characters, no `/` or control characters); a UUIDv7 when None.
    /// An existing id makes the call an upsert: given fields replace stored ones, others are kept.
    pub id: Option<String>,
    /// Body text, 1..=32,768 bytes after trimming.
    pub content: String,
    /// Title, at most 500 characters.
    pub title: Option<String>,
    /// 0..=1, default 0.5.
    pub importance: Option<f64>,
    /// 0..=1, default 1.
    pub confidence: Option<f64>,
    /// Origin, at most 200 characters (e.g. `cli`).
    pub source: Option<String>,
    /// Label names (1..=100 characters each, at most 64); on an upsert, Some replaces the set.
    pub labels: Option<Vec<String>>,
    /// Default `fact`.
    pub unit_type: Option<UnitType>,
    /// `YYYY`, `YYYY-MM`, `YYYY-MM-DD` or RFC 3339.
    pub event_start: Option<String>,
    /// Same forms as `event_start`.
    pub event_end: Option<String>,
    /// Default `timeless`.
    pub temporal_context: Option<TemporalContext>,
    /// Provenance: thread id supplied by the caller.
    pub source_thread_id: Option<String>,
    /// Provenance: message id supplied by the caller.
    pub source_message_id: Option<String>,
    /// Free-form object, at most 64 KiB as JSON.
    pub metadata: Option<Metadata>,
    /// Space, default `default`; must exist.
    pub space_id: Option<String>,
    /// Range of the source, e.g. `start_index`/`end_index`.
    pub source_range: Option<BTreeMap<String, f64>>,
    /// How the memory was made (default `manual`).
    pub extraction_method: Option<String>,
    /// Caller-supplied vector ([`crate::embed::ExternalEmbedder`] stores only): [`crate::embed::Embedder::dim`]
    /// finite floats, not all zero; stored L2-normalised. None in such a store: the memory has no vector and is
    /// found lexically.
    pub embedding: Option<Vec<f32>>,
    /// When the memory expires ([`Memory::expires_at`]); None: never. A time already past is accepted (the
    /// memory is stored expired).
    pub expires_at: Option<Timestamp>,
}

/// What an upsert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteAction {
    /// A new memory.
    Created,
    /// An existing memory changed.
    Updated,
    /// The memory already held exactly these values; nothing was written.
    Unchanged,
}

/// A memory with its labels, as every read returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryView {
    /// The record.
    pub memory: Memory,
    /// Label ids (`label_<name>`), sorted.
    pub label_ids: Vec<String>,
}

impl MemoryView {
    /// Label names, in the order of `label_ids`.
    pub fn label_names(&self) -> Vec<String> {
        self.label_ids.iter().map(|id| id.strip_prefix("label_").unwrap_or(id).to_string()).collect()
    }
}

/// Result of [`Memories::create`](crate::store::Memories::create).
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedMemory {
    /// The stored memory.
    pub view: MemoryView,
    /// Created, updated or unchanged.
    pub action: WriteAction,
    /// Label names attached by this call.
    pub assigned_labels: Vec<String>,
    /// Non-fatal notes (e.g. labels that were trimmed or deduplicated).
    pub warnings: Vec<String>,
    /// Entities the memory mentions ([`crate::extract::entities`]).
    pub entities: Vec<crate::model::Entity>,
    /// MENTIONS and RELATES_TO edges this write created.
    pub created_relationships: u64,
}

/// A partial update: every Some field replaces the stored one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryPatch {
    /// New title.
    pub title: Option<String>,
    /// New content (1..=32,768 bytes).
    pub content: Option<String>,
    /// New importance 0..=1.
    pub importance: Option<f64>,
    /// New confidence 0..=1.
    pub confidence: Option<f64>,
    /// New unit type.
    pub unit_type: Option<UnitType>,
    /// Moves the memory to this space (must exist); labels follow by name.
    pub space_id: Option<String>,
    /// Replaces the label set.
    pub labels: Option<Vec<String>>,
    /// New source.
    pub source: Option<String>,
    /// New event start.
    pub event_start: Option<String>,
    /// New event end.
    pub event_end: Option<String>,
    /// New temporal context.
    pub temporal_context: Option<TemporalContext>,
    /// Replaces metadata.
    pub metadata: Option<Metadata>,
    /// A new caller-supplied vector (external-embedder stores only; rules of [`NewMemory::embedding`]). In such a
    /// store a content change without one keeps the old vector: it cannot be recomputed.
    pub embedding: Option<Vec<f32>>,
    /// Sets (`Some(Some(t))`) or clears (`Some(None)`) the expiry time; None leaves it.
    pub expires_at: Option<Option<Timestamp>>,
}

/// Listing query (`GET /memories`).
#[derive(Debug, Clone, PartialEq)]
pub struct ListQuery {
    /// Space to list.
    pub space_id: String,
    /// Filters.
    pub filter: MemoryFilter,
    /// Page size, 1..=100.
    pub limit: usize,
    /// Items to skip.
    pub offset: usize,
}

/// The order of a memory listing ([`Memories::list_ordered`](crate::store::Memories::list_ordered)); ties by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListOrder {
    /// Newest first (creation time).
    #[default]
    Recent,
    /// Highest importance first (0..=1), then newest.
    Importance,
    /// Highest PageRank in the memory graph first, then newest.
    PageRank,
}

/// One page of results.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The items.
    pub items: Vec<T>,
    /// Matching items in all pages.
    pub total: usize,
    /// Page size asked.
    pub limit: usize,
    /// Items skipped.
    pub offset: usize,
}

impl<T> Page<T> {
    /// True when items exist after this page.
    pub fn has_more(&self) -> bool {
        self.offset + self.items.len() < self.total
    }
}

/// Which rankings a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// BM25 and vectors, fused.
    #[default]
    Hybrid,
    /// BM25 only.
    Lexical,
    /// Vectors only.
    Vector,
}

impl SearchMode {
    /// The name reported in `search_metadata.search_mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Hybrid => "hybrid",
            SearchMode::Lexical => "lexical",
            SearchMode::Vector => "vector",
        }
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// Query text, 1..=4,096 bytes.
    pub query: String,
    /// Space to search.
    pub space_id: String,
    /// Hits wanted, 1..=100.
    pub limit: usize,
    /// Filters; a filtered search still returns `limit` hits when that many match.
    pub filter: MemoryFilter,
    /// Rankings used.
    pub mode: SearchMode,
    /// Fusion for this query (None: the store's configured one).
    pub fusion: Option<crate::index::fusion::Fusion>,
    /// The query's vector, for stores with an external embedder (rules of [`NewMemory::embedding`]). Without
    /// it such a store searches lexically and says so in [`SearchResults::fallback`].
    pub query_embedding: Option<Vec<f32>>,
    /// Per-query switches of ranking stages, and the context returned with each hit.
    pub options: SearchOptions,
}

impl Default for SearchQuery {
    /// An empty hybrid query of the default space for 10 hits.
    fn default() -> Self {
        SearchQuery {
            query: String::new(),
            space_id: super::DEFAULT_SPACE.to_string(),
            limit: 10,
            filter: MemoryFilter::default(),
            mode: SearchMode::Hybrid,
            fusion: None,
            query_embedding: None,
            options: SearchOptions::default(),
        }
    }
}

impl SearchQuery {
    /// A hybrid search for `query` in the default space, 10 hits; change the rest with the setters or
    /// struct update syntax (`SearchQuery { limit: 5, ..SearchQuery::new("q") }`).
    pub fn new(query: impl Into<String>) -> Self {
        SearchQuery { query: query.into(), ..SearchQuery::default() }
    }

    /// Searches `space_id`.
    pub fn in_space(mut self, space_id: impl Into<String>) -> Self {
        self.space_id = space_id.into();
        self
    }

    /// Wants `limit` hits (1..=100).
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Uses `mode`.
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = mode;
        self
    }

    /// Filters the hits.
    pub fn filter(mut self, filter: MemoryFilter) -> Self {
        self.filter = filter;
        self
    }
}

/// Most neighbours on each side [`SearchOptions::include_context`] returns.
pub const MAX_CONTEXT_WINDOW: usize = 10;

/// Per-query switches of the ranking stages (None: the store's configuration) and of the context returned.
/// The stages are described in `docs/retrieval.md`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SearchOptions {
    /// Context-expanded BM25 ([`crate::index::context::score_context`]); `Some(false)` scores memories by their
    /// own text only.
    pub context_bm25: Option<bool>,
    /// Neighbour expansion after fusion ([`crate::index::context::expand`]); `Some(false)` switches it off.
    pub expand_neighbours: Option<bool>,
    /// Entity, PageRank and decay adjustments of hybrid scores; `Some(false)` switches them off.
    pub priors: Option<bool>,
    /// Return, with each hit that has a position, its neighbouring messages (thread memories) or chunks
    /// (source memories), this many on each side (1..=10). None or 0: no context.
    pub include_context: Option<usize>,
    /// Context-expanded BM25 settings for this query (None: the store's [`crate::StoreConfig::context`]).
    pub context_params: Option<crate::index::context::ContextParams>,
    /// Neighbour expansion settings for this query (None: the store's [`crate::StoreConfig::expansion`]).
    pub expansion_params: Option<crate::index::context::Expansion>,
    /// BM25 `k1` and `b` for this query (None: the store's [`crate::StoreConfig::bm25`]).
    pub bm25: Option<crate::index::bm25::Bm25Params>,
    /// Temporal boost for this query (None: the store's [`crate::StoreConfig::temporal_boost`]; 0 off).
    pub temporal_boost: Option<f32>,
    /// Question penalty for this query (None: the store's [`crate::StoreConfig::question_penalty`]; 0 off).
    pub question_penalty: Option<f32>,
    /// Context-blended cosine weight `γ` for this query, 0..=1 (None: the store's
    /// [`crate::StoreConfig::effective_vector_context`]; 0 off).
    pub vector_context: Option<f32>,
}

impl SearchOptions {
    /// Memories scored by their own text alone: no context-expanded BM25 or context-blended cosine, no neighbour
    /// expansion (duplicate and review detection compare one memory with another, not conversations).
    pub const OWN_TEXT: SearchOptions = SearchOptions {
        context_bm25: Some(false),
        expand_neighbours: Some(false),
        priors: None,
        include_context: None,
        context_params: None,
        expansion_params: None,
        bm25: None,
        temporal_boost: None,
        question_penalty: Some(0.0),
        vector_context: Some(0.0),
    };
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The memory.
    pub view: MemoryView,
    /// Fused score (0..=1 with the default convex fusion).
    pub score: f32,
    /// BM25 score when the lexical ranking found it.
    pub lexical_score: Option<f32>,
    /// Cosine similarity (-1..=1) when the vector ranking found it: the context-blended cosine when that stage
    /// is on ([`crate::StoreConfig::effective_vector_context`]) and the memory has a position.
    pub vector_score: Option<f32>,
    /// Query terms (stemmed) found in the memory.
    pub matched_terms: Vec<String>,
    /// Score received from neighbouring hits by neighbour expansion.
    pub expansion_score: Option<f32>,
    /// Neighbouring messages or chunks, in order, with the hit's own ([`SearchOptions::include_context`]).
    pub context: Vec<ContextItem>,
}

/// One message or chunk of a hit's context.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct ContextItem {
    /// `message` (of the memory's thread), `chunk` (of its source) or `memory` (a neighbouring memory, when
    /// the thread or source is not stored).
    pub kind: String,
    /// Message index, chunk index or ordinal in the sequence.
    pub index: u64,
    /// Message role (`user`, `assistant`, ...) for messages; empty otherwise.
    pub role: String,
    /// The text.
    pub content: String,
    /// True for the message(s) or chunk the hit itself came from.
    pub is_hit: bool,
    /// The memory id, for `memory` items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<String>,
}

impl SearchHit {
    /// A one-line explanation of why the memory matched.
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        if !self.matched_terms.is_empty() {
            parts.push(format!("keyword match: {}", self.matched_terms.join(", ")));
        }
        if let Some(v) = self.vector_score {
            parts.push(format!("semantic similarity {v:.2}"));
        }
        if self.expansion_score.is_some() {
            parts.push("next to a match in its thread or source".into());
        }
        if parts.is_empty() { "ranked by fusion".into() } else { parts.join("; ") }
    }
}

/// Search output.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Mode used.
    pub mode: SearchMode,
    /// Memories of the space that passed the filters (every live memory of the space when no filter is set).
    pub candidates: usize,
    /// Time spent, in milliseconds.
    pub elapsed_ms: f64,
    /// Why the search ran below the mode asked for (None: it did not). While a space's memories are being
    /// re-embedded, vector and hybrid searches answer from BM25 alone and say so here.
    pub fallback: Option<String>,
}

/// A new space.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewSpace {
    /// Display name, 1..=100 characters; the id is its slug (lowercase, `-` between words).
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Icon.
    pub icon: Option<String>,
    /// Instructions for agents.
    pub instructions: Option<String>,
    /// Aliases.
    pub aliases: Vec<String>,
    /// Caller-chosen id (default: the slug of the name); same rules as a slug: lowercase letters, digits, `-`.
    pub id: Option<String>,
    /// Spaces whose memories this space's searches also see.
    pub shared_space_ids: Vec<String>,
    /// Retrieval mode (default `strict`).
    pub default_retrieval_mode: Option<String>,
}

/// Changes to a space; None keeps a field. The id never changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpacePatch {
    /// Display name.
    pub name: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// Icon.
    pub icon: Option<String>,
    /// Instructions.
    pub instructions: Option<String>,
    /// Replaces the aliases.
    pub aliases: Option<Vec<String>>,
    /// Replaces the shared spaces.
    pub shared_space_ids: Option<Vec<String>>,
    /// Retrieval mode.
    pub default_retrieval_mode: Option<String>,
}

/// Which memories a bulk move takes.
#[derive(Debug, Clone, PartialEq)]
pub enum MoveSelection {
    /// These ids (optionally only where they are in `source_space_id`).
    Ids {
        /// Memory ids.
        memory_ids: Vec<String>,
        /// Guard: only memories of this space.
        source_space_id: Option<String>,
    },
    /// Every memory of a space (any state but forgotten), minus exclusions.
    Space {
        /// The space emptied.
        source_space_id: String,
        /// Ids left where they are.
        exclude_memory_ids: Vec<String>,
    },
}

/// Outcome of a bulk move (or its preview).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct MoveReport {
    /// Memories selected (preview) or moved.
    pub count: u64,
    /// Moved (0 in a preview).
    pub moved_count: u64,
    /// Selected ids that could not be moved (missing, forgotten, or outside the source guard).
    pub failed_count: u64,
    /// Failed ids with reasons (at most 100).
    pub failures: Vec<MoveFailure>,
    /// True when the selection is over [`crate::store::MAX_BULK_MOVE`]; nothing is moved then.
    pub limit_exceeded: bool,
    /// Source space (when the selection names one).
    pub source_space_id: Option<String>,
    /// Target space.
    pub target_space_id: String,
    /// Summary.
    pub message: String,
}

/// One memory a bulk move skipped.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct MoveFailure {
    /// Memory id.
    pub memory_id: String,
    /// Why.
    pub error: String,
}

/// What a delete removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeleteReport {
    /// HAS_LABEL and MENTIONS edges removed.
    pub deleted_relationships: u64,
}

/// Ordering of label listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LabelOrder {
    /// By name (default).
    #[default]
    Name,
    /// By usage count.
    UsageCount,
    /// By creation time.
    CreatedAt,
    /// By last change.
    UpdatedAt,
}

/// Store health.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreHealth {
    /// Embedder name.
    pub embedder: String,
    /// Vector dimension.
    pub dim: usize,
    /// Write generation (transactions committed since creation).
    pub generation: u64,
    /// Live memories in all spaces.
    pub memories: usize,
    /// Spaces.
    pub spaces: usize,
    /// Memories waiting for a vector from the active embedder.
    pub reindex_pending: usize,
    /// Labels in all spaces.
    pub labels: usize,
    /// Background re-embedding.
    pub reembed: super::ReembedStatus,
    /// The store's format ([`crate::storage::codec::FORMAT_VERSION`] once open).
    pub format_version: u32,
    /// The last format upgrade the store went through, if any (with its backup copy).
    pub last_upgrade: Option<super::core::upgrade::UpgradeRecord>,
    /// Expired memories and the expiry sweep.
    pub expiry: super::ExpiryStatus,
    /// Whether the store file is encrypted at rest, with which cipher and key source (never key material).
    pub encryption: crate::storage::crypt::EncryptionStatus,
}

/// Size of the lexical index over all spaces ([`Admin::lexical_index_stats`](crate::store::Admin::lexical_index_stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LexicalIndexStats {
    /// Documents indexed.
    pub documents: u64,
    /// Distinct terms (summed over spaces).
    pub terms: u64,
    /// Postings (document, term) stored, in redb and mirrored in memory.
    pub postings: u64,
    /// Memories with a thread or source position (the context-expanded stages use them; nothing is stored for
    /// them beyond their postings).
    pub positioned: u64,
}

/// The vector index of one space ([`Admin::vector_index_stats`](crate::store::Admin::vector_index_stats)).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct VectorIndexStats {
    /// Space name.
    pub space: String,
    /// Live vectors.
    pub vectors: usize,
    /// Points in the HNSW graph, live and tombstones (0 without a graph: searches scan exactly).
    pub graph_points: usize,
    /// Graph points whose memory was edited or deleted (skipped by searches; the graph is rebuilt past a
    /// quarter of its points).
    pub tombstones: usize,
    /// Live vectors not yet in the graph (scanned exactly by every search until the builder inserts them).
    pub pending: usize,
    /// Bytes held in memory by vectors, links and maps (an estimate).
    pub heap_bytes: usize,
}

/// Disk use of the store file ([`Admin::storage_stats`](crate::store::Admin::storage_stats)).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StorageStats {
    /// Size of `engram.redb` in bytes (includes free pages redb keeps for reuse); on PostgreSQL the bytes of
    /// the store's tables and indexes.
    pub file_bytes: u64,
    /// Per table, largest first.
    pub tables: Vec<TableSize>,
}

/// Disk use of one table, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableSize {
    /// Table name.
    pub table: String,
    /// Keys and values.
    pub stored_bytes: u64,
    /// B-tree branch pages and other metadata.
    pub metadata_bytes: u64,
    /// Unused space inside the table's pages.
    pub fragmented_bytes: u64,
}

/// What [`Admin::checkpoint_report`](crate::store::Admin::checkpoint_report) flushed.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct CheckpointReport {
    /// Write generation now durable.
    pub generation: u64,
    /// Write transactions committed without fsync since the last checkpoint (`Durability::Eventual`).
    pub flushed_write_transactions: u64,
    /// Access-count updates (reads by id) committed without fsync since the last checkpoint.
    pub flushed_access_updates: u64,
    /// Milliseconds the durable commit took.
    pub elapsed_ms: f64,
    /// Size of the store file in bytes (on PostgreSQL: of the store's tables and indexes).
    pub file_bytes: u64,
}
