//! [`KnowledgeStore`]: the facade over one store. It reaches records only through the storage port
//! ([`crate::storage`]).
//!
//! Every public mutating call is one write transaction. The in-memory indexes (catalog and vectors) are
//! updated after the commit succeeds, under the index write lock, so a failed commit leaves them untouched
//! and a search never sees a document that is not committed.

mod communities;
pub mod encryption;
mod entities;
mod expiry;
mod feed;
mod graph_files;
mod health;
mod indexes;
mod label_maint;
mod labels;
mod lifecycle;
mod memories;
mod open;
mod publish;
mod records;
mod reembed;
mod relations;
mod reviews;
mod search;
mod search_db;
mod snapshot;
mod sources;
mod spaces;
mod threads;
mod transfer;
mod types;
pub mod upgrade;
mod wiki;
mod worker;
mod working;
mod write;

pub use communities::{Community, CommunityEntity, CommunityMemory, GraphReport, crystal_id};
pub use entities::{MentionReport, entity_id};
pub use expiry::ExpiryStatus;
pub use label_maint::{
    AffectedCounts, ConsolidationGroup, ConsolidationPreview, ConsolidationReport, JudgedPair, LabelDeleteReport,
    LabelHealth, LabelMerge, LabelPatch, LabelPlan, MergeCandidate, canonical_label,
};
pub use lifecycle::{StateChange, Transition};
pub use publish::PublishedIndexes;
pub(crate) use records::StoredMemory;
pub use reembed::ReembedStatus;
pub use relations::{
    MAX_RELATIONS_LIMIT, MemoryRelation, RELATION_STATUSES, RelationInput, RelationQuery, RelationView,
};
pub use reviews::{ACTIONS as REVIEW_ACTIONS, Resolution, ReviewEvent};
pub use sources::{
    ChunkHit, IngestReport, MAX_SOURCE_BYTES, NewSource, SourceAnalysis, SourceChunks, SourceContent, SourceHit,
    SourceQuery,
};
pub use spaces::{MAX_BULK_MOVE, space_slug};
pub use threads::{
    AppendMessages, AppendReport, CreatedThread, Extraction, NewMessage, NewThread, PER_MESSAGE, ThreadDeleteReport,
    ThreadMatch, thread_memory_prefix,
};
pub use transfer::{
    EXPORT_FORMAT, EXPORT_VERSION, ExportOptions, ExportReport, ImportJob, ImportMode, ImportProgress, ImportReport,
    Include, KindCounts, Manifest, ManifestEntry,
};
pub use types::{
    CheckpointReport, ContextItem, CreatedMemory, DeleteReport, LabelOrder, Labels, LexicalIndexStats, ListOrder,
    ListQuery, MAX_CONTEXT_WINDOW, MemoryPatch, MemoryView, MoveFailure, MoveReport, MoveSelection, NewMemory,
    NewSpace, Page, SearchHit, SearchMode, SearchOptions, SearchQuery, SearchResults, SpacePatch, StorageStats,
    StoreHealth, TableSize, VectorIndexStats, WriteAction,
};
pub(crate) use wiki::date_of;
pub use wiki::{EntityGraph, GraphEdge, GraphNode, LibrarySelection, Subgraph, memory_line};
pub use working::{StoreStats, WorkingMemory, today as working_today};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::config::StoreConfig;
use crate::model::Timestamp;
use crate::storage::Db;

pub(crate) use crate::index::ops::{IndexOp, LexEntry};
pub(crate) use crate::storage::txn::{range_prefix2_count, range_prefix3};
pub(crate) use indexes::{IndexState, SpaceIndex, apply_ops, start_graph_builder};
pub(crate) use records::{entity, graph, label, memory, meta, relation, review, source, space, thread, working_memory};

/// The id of the space that always exists.
pub const DEFAULT_SPACE: &str = "default";

/// A knowledge store over `<data_dir>/engram.redb`, or over a PostgreSQL database (`StoreConfig::database_url`,
/// feature `postgres`).
///
/// May be used from several threads at once (`Send + Sync`): reads run in parallel, writes are serialised.
/// redb locks the file for one process: a second open, by the daemon or another program, fails with
/// [`crate::ErrorKind::Locked`]. A PostgreSQL store may be open in any number of processes at once: writes take
/// turns across them, and each keeps its search indexes current from the database's change feed (docs/deploy.md,
/// "Several daemons on one database").
pub struct KnowledgeStore {
    pub(crate) db: Arc<Db>,
    pub(crate) config: StoreConfig,
    /// The one write path: the writer lock, the generation, the change feed, the commit.
    pub(crate) writes: Arc<write::Writes>,
    pub(crate) index: Arc<RwLock<IndexState>>,
    /// The index snapshot file a close writes ([`snapshot`]), set once the indexes were loaded: only then may a
    /// close write it (an open that failed earlier, such as a store from a newer release, holds empty indexes
    /// and must not save them).
    snapshot_file: std::sync::OnceLock<std::path::PathBuf>,
    pub(crate) started: Instant,
    reembed_progress: Arc<reembed::Progress>,
    /// The background thread an open started to decode the own texts of context-expanded postings, if any
    /// ([`KnowledgeStore::wait_for_indexes`] waits until it has finished, whether it ended or panicked).
    own_texts_decode: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Write generation at the last checkpoint.
    durable_generation: std::sync::atomic::AtomicU64,
    /// Memories the expiry sweep forgot since open.
    expired_forgotten: std::sync::atomic::AtomicU64,
    /// Access-count commits (without fsync) since the last checkpoint.
    pub(crate) pending_access: std::sync::atomic::AtomicU64,
    /// Reads by id not yet counted in the file: memory id -> (reads, latest read). Counted by the next read that
    /// finds the writer free, a checkpoint, or closing the store.
    pub(crate) access_queue: Mutex<HashMap<String, (i64, Timestamp)>>,
    /// Label name -> embedding, for merge candidates (cleared past 20,000 names).
    label_vector_cache: Mutex<HashMap<String, Vec<f32>>>,
    /// BM25 over source chunks, per space, built on the first search and dropped when the space's sources change.
    pub(crate) chunk_index: Arc<RwLock<HashMap<String, Arc<sources::ChunkIndex>>>>,
    /// Data import jobs.
    pub(crate) jobs: transfer::Jobs,
    /// Communities and PageRank results.
    pub(crate) graph: Arc<RwLock<communities::GraphState>>,
    /// Bulk loads running ([`KnowledgeStore::bulk_load`]); the graph worker waits for them to end.
    pub(crate) bulk_loads: Arc<std::sync::atomic::AtomicUsize>,
    /// Batches of memories being written; the HNSW builder waits for them between chunks.
    pub(crate) batch_writes: Arc<std::sync::atomic::AtomicUsize>,
    /// The change feed: keeps the in-memory state current when other processes write the database.
    pub(crate) feed: Arc<feed::Feed>,
    /// Reads the feed on a shared database. Declared first among the workers: dropped (stopped) first.
    feed_worker: Mutex<Option<worker::Worker>>,
    /// Recomputes them once writes pause.
    graph_worker: worker::Worker,
    // Declared before `builder`: dropped (stopped and joined) first, as it wakes the builder.
    reembed: Mutex<Option<worker::Worker>>,
    builder: worker::Worker,
    /// Saved HNSW graphs, and how the store's side files are sealed (`graph_files.side`).
    graph_files: graph_files::GraphFiles,
    /// Whether the store file is encrypted, with which cipher and key source (`/health`).
    encryption: crate::storage::crypt::EncryptionStatus,
}

impl std::fmt::Debug for KnowledgeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnowledgeStore").field("config", &self.config).finish()
    }
}

#[allow(dead_code)]
const _ASSERT_SEND_SYNC: fn() = || {
    fn is<T: Send + Sync>() {}
    is::<KnowledgeStore>();
    is::<Arc<KnowledgeStore>>();
};

impl KnowledgeStore {
    /// The state of background re-embedding.
    pub fn reembed_status(&self) -> ReembedStatus {
        self.reembed_progress.status()
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The storage port under the store, for reading: conformance tests and tools ask it the port's own
    /// questions ([`crate::storage::ReadTx::lexical_candidates`], [`crate::storage::ReadTx::relates_edges`]).
    /// Writing through it would bypass the store's indexes and rules: use the store's methods.
    pub fn storage(&self) -> &Db {
        &self.db
    }

    /// Seconds since the store was opened.
    pub fn uptime_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}
