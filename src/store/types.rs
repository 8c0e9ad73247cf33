//! Inputs and outputs shared by the store's services: memories, pages, spaces and moves. The search's types
//! are in `search/types.rs`, the administration's reports in `admin/types.rs`.

use crate::index::catalog::MemoryFilter;
use crate::model::Memory;

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
