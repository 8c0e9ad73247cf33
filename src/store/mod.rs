//! [`KnowledgeStore`]: the handle of one store. It opens the runtime core (`core/`: database, write path,
//! derived indexes, change feed, workers) and lends one service per kind of knowledge, each a handle borrowed
//! from it in a folder of its own: [`Memories`], [`Threads`], [`Sources`], [`Labels`], [`Spaces`], [`Graph`],
//! [`Search`], [`Reviews`], [`Working`], [`Transfer`], [`Admin`] and [`SyncService`]. Services reach records only through the
//! record modules (`records/`) and the storage port ([`crate::storage`]).
//!
//! Every public mutating call is one write transaction. The in-memory indexes (catalog and vectors) are
//! updated after the commit succeeds, under the index write lock, so a failed commit leaves them untouched
//! and a search never sees a document that is not committed.

mod admin;
mod core;
mod graph;
mod labels;
mod memories;
mod records;
mod reviews;
mod search;
mod sources;
mod spaces;
mod sync;
mod threads;
mod transfer;
mod types;
mod working;

pub use self::core::backup::{
    BackupCheck, BackupReport, RestoreReport, backup_closed, restore as restore_backup, scheduled_backups,
    scheduled_name, verify as verify_backup,
};
pub use self::core::publish::PublishedIndexes;
pub use self::core::reembed::ReembedStatus;
pub use self::core::{DEFAULT_SPACE, encryption, upgrade};
pub use admin::types::{
    CheckpointReport, IndexMemory, LexicalIndexStats, StorageStats, StoreHealth, TableSize, VectorIndexStats,
};
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
pub use memories::{ExpiryStatus, Memories, MemoryPatch, NewMemory};
pub use memories::{StateChange, Transition};
pub(crate) use records::StoredMemory;
pub use reviews::{ACTIONS as REVIEW_ACTIONS, Resolution, ReviewEvent, Reviews};
pub use search::Search;
pub use search::types::{
    ContextItem, MAX_CONTEXT_WINDOW, SearchHit, SearchMode, SearchOptions, SearchQuery, SearchResults,
};
pub use sources::{
    ChunkHit, IngestReport, MAX_SOURCE_BYTES, NewSource, SourceAnalysis, SourceChunks, SourceContent, SourceHit,
    SourceQuery, Sources,
};
pub use spaces::{MAX_BULK_MOVE, Spaces, space_slug};
pub use sync::{ApplyReport, COMPACT_AFTER, FolderReport, Peer, RemoveReport, SyncProgress, SyncService, SyncStatus};
pub use threads::{
    AppendMessages, AppendReport, CreatedThread, Extraction, NewMessage, NewThread, PER_MESSAGE, ThreadDeleteReport,
    ThreadMatch, Threads, thread_memory_prefix,
};
pub use transfer::{
    EXPORT_FORMAT, EXPORT_VERSION, ExportOptions, ExportReport, ImportJob, ImportMode, ImportProgress, ImportReport,
    Include, KindCounts, Manifest, ManifestEntry, Transfer,
};
pub use types::{
    CreatedMemory, DeleteReport, LabelOrder, ListOrder, ListQuery, MemoryView, MoveFailure, MoveReport, MoveSelection,
    NewSpace, Page, SpacePatch, WriteAction,
};
pub use working::{MAX_WORKING_MEMORY_BYTES, Working, WorkingMemory, today as working_today};

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
    /// Opens (or creates) the store in `config.data_dir`, checks the format version, builds the in-memory
    /// indexes from the file, and starts re-embedding in the background when memories lack a vector from
    /// the configured embedder: after a change of embedder or dimension (the old vectors are dropped and
    /// every memory is marked `reindex_needed`), or after a run cut short by a crash. Progress shows in
    /// [`Admin::health`](crate::store::Admin::health) (and as a progress bar when stderr is a terminal, logged otherwise);
    /// searches of a space answer from BM25 until its vectors are complete.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::Locked`]: another process has the store open.
    /// * [`crate::ErrorKind::Corrupt`]: the file is from a newer format or damaged.
    /// * [`crate::ErrorKind::Io`]: the directory or file cannot be created or read.
    /// * [`crate::ErrorKind::Unreachable`]: the PostgreSQL database of [`StoreConfig::database_url`] cannot be
    ///   reached or refuses the login (the message names what failed).
    /// * [`crate::ErrorKind::InvalidInput`]: the database URL does not parse.
    /// * [`crate::ErrorKind::Unavailable`]: a database URL in a build without the `postgres` feature.
    pub fn open(config: StoreConfig) -> crate::error::Result<Self> {
        let core = Core::open(config)?;
        let graph_worker = graph::start_worker(graph::Ctx::of(&core));
        let store = KnowledgeStore {
            core,
            label_vector_cache: Mutex::default(),
            jobs: transfer::Jobs::default(),
            expired_forgotten: Default::default(),
            access_queue: Default::default(),
        };
        store.core.set_graph_worker(graph_worker);
        if let Err(e) = store.memories().forget_expired() {
            tracing::warn!(error = %e, "the expiry sweep at open failed; it runs again at the next open or sweep");
        }
        Ok(store)
    }

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

    /// The label service: labels, their HAS_LABEL edges, merges and hygiene ([`Labels`]).
    pub fn labels(&self) -> Labels<'_> {
        Labels { store: self }
    }

    /// The space service: create, list, read, resolve, update, delete, and moves between spaces ([`Spaces`]).
    pub fn spaces(&self) -> Spaces<'_> {
        Spaces { store: self }
    }

    /// The knowledge-graph service: entities, typed relations, communities, PageRank, crystals and the wiki's
    /// reads ([`Graph`]).
    pub fn graph(&self) -> Graph<'_> {
        Graph { store: self }
    }

    /// The search service: hybrid, lexical and vector search over a space's memories ([`Search`]).
    pub fn search(&self) -> Search<'_> {
        Search { store: self }
    }

    /// The timeline-review service: review events raised by writes that look like updates or contradictions
    /// ([`Reviews`]).
    pub fn reviews(&self) -> Reviews<'_> {
        Reviews { store: self }
    }

    /// The working-memory service: one markdown document per space and day ([`Working`]).
    pub fn working(&self) -> Working<'_> {
        Working { store: self }
    }

    /// The transfer service: export to and import from a versioned, checksummed archive ([`Transfer`]).
    pub fn transfer(&self) -> Transfer<'_> {
        Transfer { store: self }
    }

    /// The administration service: health, statistics, index state, checkpoints, bulk loads ([`Admin`]).
    pub fn admin(&self) -> Admin<'_> {
        Admin { store: self }
    }

    /// The sync service: membership of a sync group, the change log, the merge of other devices' changes
    /// ([`SyncService`], docs/sync.md).
    pub fn sync(&self) -> SyncService<'_> {
        SyncService { store: self }
    }
}

impl Drop for KnowledgeStore {
    fn drop(&mut self) {
        self.core.stop_feed();
        // Reads still queued are counted before the store closes.
        if let Err(e) = self.memories().flush_access() {
            tracing::warn!(error = %e, "counting the last reads failed");
        }
        self.core.close();
    }
}
