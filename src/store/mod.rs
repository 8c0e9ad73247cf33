//! [`KnowledgeStore`]: the facade over one store. It reaches records only through the storage port
//! ([`crate::storage`]).
//!
//! Every public mutating call is one write transaction. The in-memory indexes (catalog and vectors) are
//! updated after the commit succeeds, under the index write lock, so a failed commit leaves them untouched
//! and a search never sees a document that is not committed.

mod admin;
mod core;
mod graph;
mod labels;
mod memories;
mod open;
mod records;
mod reviews;
mod search;
mod sources;
mod spaces;
mod threads;
mod transfer;
mod types;
mod working;

pub use self::core::publish::PublishedIndexes;
pub use self::core::reembed::ReembedStatus;
pub use self::core::{DEFAULT_SPACE, encryption, upgrade};
pub use admin::{Admin, StoreStats};
pub(crate) use graph::date_of;
pub use graph::{
    Community, CommunityEntity, CommunityMemory, EntityGraph, Graph, GraphEdge, GraphNode, GraphReport,
    LibrarySelection, MentionReport, Subgraph, crystal_id, entity_id, memory_line,
};
pub use graph::{MAX_RELATIONS_LIMIT, MemoryRelation, RELATION_STATUSES, RelationInput, RelationQuery, RelationView};
pub use labels::{
    AffectedCounts, ConsolidationGroup, ConsolidationPreview, ConsolidationReport, JudgedPair, LabelDeleteReport,
    LabelHealth, LabelMerge, LabelPatch, LabelPlan, Labels, MergeCandidate, canonical_label,
};
pub use memories::{ExpiryStatus, Memories};
pub use memories::{StateChange, Transition};
pub(crate) use records::StoredMemory;
pub use reviews::{ACTIONS as REVIEW_ACTIONS, Resolution, ReviewEvent, Reviews};
pub use search::Search;
pub use sources::{
    ChunkHit, IngestReport, MAX_SOURCE_BYTES, NewSource, SourceAnalysis, SourceChunks, SourceContent, SourceHit,
    SourceQuery, Sources,
};
pub use spaces::{MAX_BULK_MOVE, Spaces, space_slug};
pub use threads::{
    AppendMessages, AppendReport, CreatedThread, Extraction, NewMessage, NewThread, PER_MESSAGE, ThreadDeleteReport,
    ThreadMatch, Threads, thread_memory_prefix,
};
pub use transfer::{
    EXPORT_FORMAT, EXPORT_VERSION, ExportOptions, ExportReport, ImportJob, ImportMode, ImportProgress, ImportReport,
    Include, KindCounts, Manifest, ManifestEntry, Transfer,
};
pub use types::{
    CheckpointReport, ContextItem, CreatedMemory, DeleteReport, LabelOrder, LexicalIndexStats, ListOrder, ListQuery,
    MAX_CONTEXT_WINDOW, MemoryPatch, MemoryView, MoveFailure, MoveReport, MoveSelection, NewMemory, NewSpace, Page,
    SearchHit, SearchMode, SearchOptions, SearchQuery, SearchResults, SpacePatch, StorageStats, StoreHealth, TableSize,
    VectorIndexStats, WriteAction,
};
pub use working::{Working, WorkingMemory, today as working_today};

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use self::core::Core;

use crate::config::StoreConfig;
use crate::model::Timestamp;
use crate::storage::Db;

pub(crate) use self::core::indexes::SpaceIndex;
pub(crate) use crate::index::ops::{IndexOp, LexEntry};
pub(crate) use crate::storage::txn::{range_prefix2_count, range_prefix3};
pub(crate) use records::{entity, label, memory, meta, relation, review, source, space, thread, working_memory};

/// A knowledge store over `<data_dir>/engram.redb`, or over a PostgreSQL database (`StoreConfig::database_url`,
/// feature `postgres`).
///
/// May be used from several threads at once (`Send + Sync`): reads run in parallel, writes are serialised.
/// redb locks the file for one process: a second open, by the daemon or another program, fails with
/// [`crate::ErrorKind::Locked`]. A PostgreSQL store may be open in any number of processes at once: writes take
/// turns across them, and each keeps its search indexes current from the database's change feed (docs/deploy.md,
/// "Several daemons on one database").
pub struct KnowledgeStore {
    /// The runtime: database, write path, derived indexes, change feed, side files, workers.
    pub(crate) core: Core,
    /// Reads by id not yet counted in the file: memory id -> (reads, latest read). Counted by the next read that
    /// finds the writer free, a checkpoint, or closing the store.
    pub(crate) access_queue: Mutex<HashMap<String, (i64, Timestamp)>>,
    /// Label name -> embedding, for merge candidates (cleared past 20,000 names).
    label_vector_cache: Mutex<HashMap<String, Vec<f32>>>,
    /// Data import jobs.
    pub(crate) jobs: transfer::Jobs,
    /// Memories the expiry sweep forgot since open.
    expired_forgotten: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for KnowledgeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeStore").field("config", &self.core.config).finish()
    }
}

#[allow(dead_code)]
const _ASSERT_SEND_SYNC: fn() = || {
    fn is<T: Send + Sync>() {}
    is::<KnowledgeStore>();
    is::<Arc<KnowledgeStore>>();
};

impl KnowledgeStore {
    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.core.config
    }

    /// The storage port under the store, for reading: conformance tests and tools ask it the port's own
    /// questions ([`crate::storage::ReadTx::lexical_candidates`], [`crate::storage::ReadTx::relates_edges`]).
    /// Writing through it would bypass the store's indexes and rules: use the store's methods.
    pub fn storage(&self) -> &Db {
        &self.core.db
    }

    /// The memory service: create, read, list, update, delete, lifecycle moves, favourites and expiry
    /// ([`Memories`]).
    pub fn memories(&self) -> Memories<'_> {
        Memories { store: self }
    }

    /// The search service: hybrid, lexical and vector search over a space's memories ([`Search`]).
    pub fn search(&self) -> Search<'_> {
        Search { store: self }
    }

    /// The administration service: health, statistics, index state, checkpoints, bulk loads ([`Admin`]).
    pub fn admin(&self) -> Admin<'_> {
        Admin { store: self }
    }

    /// The working-memory service: one markdown document per space and day ([`Working`]).
    pub fn working(&self) -> Working<'_> {
        Working { store: self }
    }

    /// The knowledge-graph service: entities, typed relations, communities, PageRank, crystals and the wiki's
    /// reads ([`Graph`]).
    pub fn graph(&self) -> Graph<'_> {
        Graph { store: self }
    }

    /// The label service: labels, their HAS_LABEL edges, merges and hygiene ([`Labels`]).
    pub fn labels(&self) -> Labels<'_> {
        Labels { store: self }
    }

    /// The space service: create, list, read, resolve, update, delete, and moves between spaces ([`Spaces`]).
    pub fn spaces(&self) -> Spaces<'_> {
        Spaces { store: self }
    }

    /// The thread service: conversations, their messages, search over them, and distilling memories from
    /// them ([`Threads`]).
    pub fn threads(&self) -> Threads<'_> {
        Threads { store: self }
    }

    /// The source service: documents in the library, their chunks, search over them, and the memories they
    /// give ([`Sources`]).
    pub fn sources(&self) -> Sources<'_> {
        Sources { store: self }
    }

    /// The transfer service: export to and import from a versioned, checksummed archive ([`Transfer`]).
    pub fn transfer(&self) -> Transfer<'_> {
        Transfer { store: self }
    }

    /// The timeline-review service: review events raised by writes that look like updates or contradictions
    /// ([`Reviews`]).
    pub fn reviews(&self) -> Reviews<'_> {
        Reviews { store: self }
    }
}
