//! Inputs and outputs shared by the store's services: memories, pages, spaces and moves. The search's types
//! are in `search/types.rs`, the administration's reports in `admin/types.rs`.

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
