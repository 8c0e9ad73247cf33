//! # Engram
//!
//! A local-first knowledge-memory engine: memories, labels and spaces in one redb file, hybrid search
//! (BM25 + vectors from a local embedder, HNSW above a size threshold), a transport-neutral API that an HTTP
//! daemon (feature `server`) and a C ABI (feature `ffi`) both serve.
//!
//! ```
//! use engram::{KnowledgeStore, StoreConfig, NewMemory, SearchQuery, SearchMode};
//! let dir = tempfile::tempdir()?;
//! let store = KnowledgeStore::open(StoreConfig::new(dir.path()))?;
//! store.memories().create(NewMemory { content: "Caroline went to the LGBTQ support group".into(), ..Default::default() })?;
//! let found = store.search().run(&SearchQuery::new("support group").limit(5).mode(SearchMode::Hybrid))?;
//! assert_eq!(found.hits.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | feature | what it adds |
//! |---|---|
//! | `server` | `engram serve`: the HTTP daemon (axum on hyper, tokio) |
//! | `ffi` | the C API of `include/engram.h` (cdylib and staticlib) |

pub mod api;
pub mod config;
pub mod embed;
pub mod error;
/// Internal: the LoCoMo and LongMemEval evaluations behind `engram eval`; not part of the stable library API.
#[doc(hidden)]
pub mod eval;
pub mod extract;
#[cfg(feature = "url")]
pub(crate) mod fetch;
pub(crate) mod fs;
pub mod graph;
pub mod index;
pub(crate) mod library;
pub mod metrics;
pub mod model;
pub mod net;
pub mod storage;
pub mod store;
pub mod sync;
pub(crate) mod text;

#[cfg(feature = "ffi")]
pub mod ffi;
#[cfg(feature = "server")]
pub mod server;

pub use config::{Durability, IndexMode, StorageFactory, StoreConfig};
pub use error::{Error, ErrorCode, ErrorKind, FieldError, Result};
pub use index::catalog::MemoryFilter;
pub use library::{ExportCounts, ExportKind, ExportParams};
pub use model::{
    Entity, Label, Memory, MemoryState, Message, Metadata, Source, Space, SpaceUsage, TemporalContext, Thread,
    Timestamp, UnitType,
};
pub use store::{
    AffectedCounts, AppendMessages, AppendReport, ApplyReport, COMPACT_AFTER, CheckpointReport, ChunkHit, Community,
    CommunityEntity, CommunityMemory, ConsolidationGroup, ConsolidationPreview, ConsolidationReport, ContextItem,
    CreatedMemory, CreatedThread, DEFAULT_SPACE, DeleteReport, ExportOptions, ExportReport, Extraction, FolderReport,
    GraphReport, ImportJob, ImportMode, ImportProgress, ImportReport, Include, IngestReport, JudgedPair,
    KnowledgeStore, LabelDeleteReport, LabelHealth, LabelMerge, LabelOrder, LabelPatch, LabelPlan, Labels,
    LexicalIndexStats, ListOrder, ListQuery, MAX_BULK_MOVE, MAX_CONTEXT_WINDOW, MAX_SOURCE_BYTES, MemoryPatch,
    MemoryRelation, MemoryView, MentionReport, MergeCandidate, MoveFailure, MoveReport, MoveSelection, NewMemory,
    NewMessage, NewSource, NewSpace, NewThread, Page, Peer, RELATION_STATUSES, REVIEW_ACTIONS, ReembedStatus,
    RelationInput, RelationQuery, RelationView, RemoveReport, Resolution, ReviewEvent, SearchHit, SearchMode,
    SearchOptions, SearchQuery, SearchResults, SourceChunks, SourceContent, SourceHit, SourceQuery, SpacePatch,
    StateChange, StorageStats, StoreHealth, StoreStats, SyncProgress, SyncService, SyncStatus, TableSize,
    ThreadDeleteReport, ThreadMatch, Transition, VectorIndexStats, Working, WorkingMemory, WriteAction,
    canonical_label,
};
