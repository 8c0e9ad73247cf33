//! Health and statistics: checkpoints, index sizes, per-table storage, and the `/health` report.

use std::time::Instant;

use super::Admin;
use crate::config::Durability;
use crate::error::Result;
use crate::store::*;
use crate::store::{label, meta};

impl<'s> Admin<'s> {
    /// Forces a durable commit of everything written so far (useful after [`Durability::Eventual`] writes).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Io`] when the commit fails.
    pub fn checkpoint(&self) -> Result<u64> {
        Ok(self.checkpoint_report()?.generation)
    }

    /// [`Admin::checkpoint`](crate::store::Admin::checkpoint) with what it flushed: write transactions committed without fsync since
    /// the last durable commit ([`Durability::Eventual`] only; 0 with the default durability) and access-count
    /// updates (reads by id are always committed without fsync).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Io`] when the commit fails; nothing is lost then, the next checkpoint retries.
    pub fn checkpoint_report(&self) -> Result<CheckpointReport> {
        let started = Instant::now();
        self.store.memories().flush_access()?;
        // An empty immediate commit: it makes every earlier commit without fsync durable.
        let commit =
            crate::store::core::write::Commit { durability: Some(Durability::Immediate), bump: false, capture: false };
        let g = self
            .store
            .core
            .writes
            .write(commit, |txn, _| meta::meta(txn)?.u64("generation").map(|g| g.unwrap_or(0)))?;
        let before = self.store.core.durable_generation.swap(g, std::sync::atomic::Ordering::AcqRel);
        let writes =
            if self.store.core.config.durability == Durability::Eventual { g.saturating_sub(before) } else { 0 };
        let reads = self.store.core.pending_access.swap(0, std::sync::atomic::Ordering::AcqRel);
        Ok(CheckpointReport {
            generation: g,
            flushed_write_transactions: writes,
            flushed_access_updates: reads,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            file_bytes: self.stored_bytes()?,
        })
    }

    /// Size of the lexical index: documents, distinct terms and postings over all spaces, and how many memories
    /// have a position in a thread or source.
    pub fn lexical_index_stats(&self) -> LexicalIndexStats {
        let state = self.store.core.index.read();
        let mut out = LexicalIndexStats::default();
        for si in state.spaces.values() {
            let (terms, postings) = si.lexicon.size();
            out.documents += si.lexicon.docs;
            out.terms += terms;
            out.postings += postings;
            out.positioned += si.catalog.positioned() as u64;
        }
        out
    }

    /// The vector index of every space, sorted by space name: vectors, graph points, tombstones, pending
    /// vectors and memory held.
    pub fn vector_index_stats(&self) -> Vec<VectorIndexStats> {
        let state = self.store.core.index.read();
        let mut out: Vec<VectorIndexStats> = state
            .spaces
            .iter()
            .map(|(name, si)| VectorIndexStats {
                space: name.clone(),
                vectors: si.vectors.len(),
                graph_points: si.vectors.graph_points(),
                tombstones: si.vectors.tombstones(),
                pending: si.vectors.pending(),
                heap_bytes: si.vectors.heap_bytes(),
            })
            .collect();
        out.sort_by(|a, b| a.space.cmp(&b.space));
        out
    }

    /// Estimated bytes held by each in-memory index, over all spaces ([`IndexMemory`]).
    pub fn index_memory(&self) -> IndexMemory {
        let mut out = IndexMemory::default();
        {
            let state = self.store.core.index.read();
            for si in state.spaces.values() {
                let vectors = si.vectors.vector_bytes();
                out.vectors += vectors;
                out.graph += si.vectors.heap_bytes().saturating_sub(vectors);
                out.catalog += si.catalog.heap_bytes();
                out.postings += si.lexicon.heap_bytes();
                out.context += si.expanded.as_ref().map_or(0, |e| e.heap_bytes());
            }
        }
        out.ranks = self.store.core.graph.read().memory_rank.values().map(|r| r.heap_bytes()).sum();
        out
    }

    /// Bytes on disk by table: what keys and values hold, B-tree metadata and fragmentation (redb's table
    /// statistics; PostgreSQL's relation sizes), sorted by stored bytes, largest first, plus the file size (on
    /// PostgreSQL: the bytes of the store's tables and indexes).
    ///
    /// # Errors
    /// Storage errors.
    pub fn storage_stats(&self) -> Result<StorageStats> {
        let rtx = self.store.core.db.read()?;
        let mut tables = Vec::new();
        for name in crate::store::records::kind_names() {
            let st = rtx.kind_stats(name)?;
            tables.push(TableSize {
                table: name.to_string(),
                stored_bytes: st.stored_bytes,
                metadata_bytes: st.metadata_bytes,
                fragmented_bytes: st.fragmented_bytes,
            });
        }
        tables.sort_by_key(|t| std::cmp::Reverse(t.stored_bytes));
        let file_bytes = self.stored_bytes()?;
        Ok(StorageStats { file_bytes, tables })
    }

    /// Bytes of the store on disk: the redb file as the file system sees it (free pages included), or the
    /// store's tables and indexes in its PostgreSQL database.
    fn stored_bytes(&self) -> Result<u64> {
        match self.store.core.db.size_bytes()? {
            Some(n) => Ok(n),
            None => Ok(std::fs::metadata(self.store.core.config.db_path()).map_or(0, |m| m.len())),
        }
    }

    /// Whether the store file is encrypted at rest, with which cipher, key source and key slots (never key
    /// material).
    pub fn encryption(&self) -> &'s crate::storage::crypt::EncryptionStatus {
        &self.store.core.encryption
    }

    /// The store's sync device id (`docs/sync.md`), made when the store was created or first opened by a release
    /// with sync. A copy of the store file carries the same id: sync refuses a second device with it.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when the stored id is not 32 hex digits.
    pub fn device_id(&self) -> Result<crate::sync::DeviceId> {
        let rtx = self.store.core.db.read()?;
        let text = meta::meta(&rtx)?.text(crate::store::core::DEVICE_ID_KEY)?;
        text.as_deref().and_then(crate::sync::DeviceId::parse).ok_or_else(|| {
            crate::error::Error::new(crate::error::ErrorKind::Corrupt, format!("META.device_id is {text:?}"))
        })
    }

    /// The store's gauges for `GET /metrics` ([`crate::metrics::Gauges`]): counts, index backlogs, the memory
    /// graph's lag, the file size, the change feed's lag (PostgreSQL) and sync's pending changes. A value that
    /// cannot be read now (a storage error) is left out rather than failing the scrape.
    pub fn gauges(&self) -> crate::metrics::Gauges {
        let core = &self.store.core;
        let mut g = crate::metrics::Gauges { uptime_seconds: Some(self.uptime_s()), ..Default::default() };
        if let Ok(h) = self.health() {
            g.memories = Some(h.memories as u64);
            g.spaces = Some(h.spaces as u64);
            g.generation = Some(h.generation);
            g.reembed_backlog = Some(h.reindex_pending as u64);
            g.expired_pending = Some(h.expiry.expired);
        }
        let v = self.vector_index_stats();
        g.vectors = Some(v.iter().map(|s| s.vectors as u64).sum());
        g.hnsw_pending = Some(v.iter().map(|s| s.pending as u64).sum());
        g.hnsw_tombstones = Some(v.iter().map(|s| s.tombstones as u64).sum());
        if let Ok(rtx) = core.db.read()
            && let Ok(m) = meta::meta(&rtx)
            && let Ok(both) = m.u64_many(&["generation", "graph_generation"])
        {
            let (now, graph) = (both[0].unwrap_or(0), both[1].unwrap_or(0));
            g.graph_lag_generations = Some(now.saturating_sub(graph));
        }
        g.feed_lag_entries = core.feed.lag();
        g.store_file_bytes = self.stored_bytes().ok();
        if let Ok(s) = self.store.sync().status()
            && s.enabled
        {
            g.sync_pending_changes = Some(s.pending_changes);
        }
        g
    }

    /// Counters for `/health`.
    pub fn health(&self) -> Result<StoreHealth> {
        let rtx = self.store.core.db.read()?;
        let meta = meta::meta(&rtx)?;
        let generation = meta.u64("generation")?.unwrap_or(0);
        let format_version =
            crate::store::core::upgrade::stored_format(&meta)?.unwrap_or(crate::store::upgrade::FORMAT_VERSION);
        let last_upgrade = crate::store::core::upgrade::last_upgrade(&meta)?;
        let labels = label::labels(&rtx)?.len()? as usize;
        // The index lock is released before `expiry_status` takes it again: a second read behind a waiting
        // writer (the own-text decode, an index update) would wait for that writer, which waits for this read.
        let (memories, spaces, reindex_pending) = self.store.core.index_counts(&rtx)?;
        Ok(StoreHealth {
            embedder: self.store.core.config.embedder.name().to_string(),
            dim: self.store.core.config.embedder.dim(),
            generation,
            memories,
            spaces,
            reindex_pending,
            labels,
            reembed: self.store.core.reembed_progress.status(),
            format_version,
            last_upgrade,
            expiry: self.store.memories().expiry_status(),
            encryption: self.store.core.encryption.clone(),
        })
    }
}
