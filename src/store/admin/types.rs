//! The reports of the administration service: health, index and storage figures, checkpoints.

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
    /// The store's format ([`crate::store::upgrade::FORMAT_VERSION`] once open).
    pub format_version: u32,
    /// The last format upgrade the store went through, if any (with its backup copy).
    pub last_upgrade: Option<crate::store::core::upgrade::UpgradeRecord>,
    /// Expired memories and the expiry sweep.
    pub expiry: crate::store::ExpiryStatus,
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

/// Estimated bytes the in-memory indexes hold, by structure, over all spaces
/// ([`Admin::index_memory`](crate::store::Admin::index_memory)). Each figure counts the structure's allocations
/// with glibc's malloc overhead and hash tables at their bucket count; what the allocator keeps free and the
/// store file's page cache (`--cache-size`) are not in them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IndexMemory {
    /// The vectors, at half precision (`2 x dim` bytes each), in the graph and pending.
    pub vectors: usize,
    /// The HNSW graphs' links, levels and document numbers, and the maps of pending and live vectors.
    pub graph: usize,
    /// The catalog: per memory its id, filter fields and labels, the lookups by document number and id, and
    /// the thread and source sequences.
    pub catalog: usize,
    /// The BM25 postings (16 bytes each), their terms and blocks, and the document lengths.
    pub postings: usize,
    /// The context-expanded postings and each memory's own terms, in spaces with threads or sources.
    pub context: usize,
    /// The memory PageRank table.
    pub ranks: usize,
}

impl IndexMemory {
    /// The sum of every structure.
    pub fn total(&self) -> usize {
        self.vectors + self.graph + self.catalog + self.postings + self.context + self.ranks
    }
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

/// What `store.admin().checkpoint_report()` flushed.
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
