//! Reads of the per-memory indexes in the database index mode ([`IndexReads::Database`], PostgreSQL), and the
//! readers that serve both modes (`with_catalog`, `with_space_ranks`, ...). A search reads, in its own read
//! transaction, the part of its space's indexes it needs, builds a [`SpaceIndex`] of just that part, and
//! ranks with the same code as a search over the in-memory indexes (`search.rs`), so the two rank alike.
//!
//! What one search reads (`docs/deploy.md`, "Index modes"):
//!
//! * the catalog's counts and the length the sequence neighbours add to the context-expanded collection
//!   ([`ReadTx::catalog_stats`]);
//! * the postings of the query terms with the space's BM25 statistics ([`ReadTx::term_postings`]), except in the
//!   last case below;
//! * in a space of at most [`crate::index::vector::VectorParams::hnsw_min_points`] memories (where the in-memory
//!   index scans its vectors exactly too): the whole catalog and every vector of the space;
//! * in a larger space: pgvector's nearest candidates ([`ReadTx::vector_candidates`]; approximate, as the
//!   in-memory HNSW graph is, so the two may differ in their vector candidates) and their vectors, then the
//!   catalog entries of every document with a posting or a vector candidate and of three rings of sequence
//!   neighbours around them ([`ReadTx::sequence_neighbours`]). With those, the neighbours, expanded text and
//!   expanded length of every document a ranking stage reads are exactly the whole space's;
//! * in a larger space searched without context-expanded BM25 (no sequences, or the stage off): the BM25
//!   candidates ranked in the database ([`ReadTx::lexical_candidates`], double precision) instead of every
//!   posting, the BM25 scores of the vector candidates ([`ReadTx::bm25_scores`]), and the catalog entries of
//!   the candidates and their neighbour rings;
//! * the PageRank of the loaded memories.

use std::collections::BTreeSet;

use super::Core;
use super::indexes::SpaceIndex;
use super::modes::IndexReads;
use super::ranks::SpaceRanks;
use crate::error::{Error, ErrorKind, Result};
use crate::index::catalog::SpaceCatalog;
use crate::index::context::ExpandedIndex;
use crate::index::vector::SpaceVectors;
use crate::storage::{CatalogEntry, ReadTx};
use crate::store::records::{graph, memory, space};

/// Rings of sequence neighbours a partial read takes around the documents with a posting or a vector: the
/// neighbours of the documents whose expanded text holds a query term (themselves and their neighbours) must
/// all be read, and the neighbour expansion and the question penalty look one ring further each.
const RINGS: usize = 3;

/// What a search needs of its space.
pub(crate) struct QueryNeeds<'a> {
    /// The query's distinct terms with their counts (none for a vector search).
    pub terms: &'a [(&'a str, u32)],
    /// The query vector, when the vector ranking runs.
    pub qv: Option<&'a [f32]>,
    /// The context-expanded BM25 window, 0 when the stage is off for this search.
    pub context_window: usize,
    /// The widest neighbourhood a later stage reads (neighbour expansion, the question penalty).
    pub neighbour_window: usize,
    /// Candidates each ranking keeps.
    pub depth: usize,
    /// BM25 parameters of the search.
    pub bm25: crate::index::bm25::Bm25Params,
    /// The search's filter.
    pub filter: &'a crate::index::catalog::MemoryFilter,
}

/// BM25 candidates ranked in the database, best first, and the BM25 scores of every candidate, by docno.
pub(crate) type GivenLexical = (Vec<(u64, f32)>, Vec<(u64, f32)>);

/// The part of one space's indexes a search read from the database.
pub(crate) struct QueryIndex {
    /// Catalog, lexicon (the query terms), expanded postings (the query terms) and vectors, of the loaded part.
    pub si: SpaceIndex,
    /// The PageRank of the loaded memories; None when none has one.
    pub ranks: Option<SpaceRanks>,
    /// Memories in the space (catalog entries, any state).
    pub entries: usize,
    /// The whole space was loaded (a space of at most `hnsw_min_points` memories).
    pub whole: bool,
    /// In a larger space searched without context-expanded BM25: the BM25 candidates ranked in the database
    /// (best first, accepted by the filter, at most `depth`) and the BM25 score of every candidate of either
    /// ranking (by docno), in place of the lists a search ranks itself.
    pub lexical: Option<GivenLexical>,
}

impl Core {
    /// In the database index mode, reads what a search of `space` needs (module docs) in `rtx` and builds its
    /// index; None when the in-memory indexes serve searches ([`IndexReads::Memory`]).
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`] when catalog entries contradict each other (one memory id under
    /// two docnos).
    pub(crate) fn query_index(&self, rtx: &ReadTx, space: &str, n: &QueryNeeds<'_>) -> Result<Option<QueryIndex>> {
        match self.reads {
            IndexReads::Memory => Ok(None),
            IndexReads::Database => self.read_query_index(rtx, space, n).map(Some),
        }
    }

    /// [`Core::query_index`] in the database index mode.
    fn read_query_index(&self, rtx: &ReadTx, space: &str, n: &QueryNeeds<'_>) -> Result<QueryIndex> {
        let stats = rtx.catalog_stats(space, n.context_window.max(1))?;
        let mut si = self.new_space_index();
        si.context_window = n.context_window;
        si.sequences = Some(stats.sequenced > 0);
        let terms: Vec<(String, u32)> = n.terms.iter().map(|(t, q)| (t.to_string(), *q)).collect();
        let whole = stats.entries <= self.config.vector.hnsw_min_points as u64;
        let expanded = n.context_window > 0 && stats.sequenced > 0;
        if !whole && !expanded {
            return self.query_index_sql(rtx, space, n, &terms, stats, si);
        }
        let tp = rtx.term_postings(space, &terms)?;
        let entries: Vec<CatalogEntry> = if whole {
            if n.qv.is_some() {
                si.vectors.insert_batch(&memory::vectors_in(rtx, space)?);
            }
            rtx.catalog_space(space)?
        } else {
            let mut first: BTreeSet<u64> = tp.lists.iter().flat_map(|(_, l)| l.iter().map(|p| p.docno)).collect();
            if let Some(qv) = n.qv {
                let found = rtx.vector_candidates(space, qv, (n.depth * 2).max(100))?;
                let docnos: Vec<u64> = found.iter().map(|f| f.0).collect();
                si.vectors.insert_batch(&vectors_of(rtx, space, &docnos)?);
                first.extend(docnos);
            }
            // Rings of sequence neighbours: the documents with an expanded posting are the first two rings, the
            // expansion stage adds the third, the question penalty reads the next one of each.
            let w = n.context_window.max(n.neighbour_window).max(1);
            let all = self.with_rings(rtx, space, first, w, true)?;
            rtx.catalog_entries(space, &all)?.into_iter().flatten().collect()
        };
        let ranks = ranks_of(rtx, space, &entries)?;
        for ((term, _), (_, list)) in terms.iter().zip(&tp.lists) {
            for p in list {
                si.lexicon.load(term, *p);
            }
        }
        si.lexicon.finish_load();
        (si.lexicon.docs, si.lexicon.total_len) = (tp.n_docs, tp.total_len);
        let lens: Vec<(u64, u32)> =
            entries.iter().map(|e| (e.docno, u32::try_from(e.len).unwrap_or(u32::MAX))).collect();
        for (d, len) in &lens {
            si.lexicon.note_len(*d, *len);
        }
        si.catalog = catalog_of(space, entries)?;
        if expanded {
            let total = tp.total_len + stats.neighbour_len;
            si.expanded = Some(ExpandedIndex::build_for_terms(&si.catalog, &si.lexicon, n.context_window, lens, total));
        }
        Ok(QueryIndex {
            si,
            ranks,
            entries: usize::try_from(stats.entries).unwrap_or(usize::MAX),
            whole,
            lexical: None,
        })
    }

    /// [`Core::read_query_index`] for a space larger than `hnsw_min_points` searched without
    /// context-expanded BM25: the BM25 candidates are ranked in the database ([`ReadTx::lexical_candidates`],
    /// asked for more while the filter rejects too many), the vector candidates are pgvector's, and the
    /// catalog, vectors, PageRank and the query terms' postings are read for those candidates only (with three
    /// rings of sequence neighbours for the neighbour expansion and the question penalty).
    fn query_index_sql(
        &self,
        rtx: &ReadTx,
        space: &str,
        n: &QueryNeeds<'_>,
        terms: &[(String, u32)],
        stats: crate::storage::CatalogStats,
        mut si: SpaceIndex,
    ) -> Result<QueryIndex> {
        let entries_of = |docnos: &[u64]| -> Result<Vec<CatalogEntry>> {
            Ok(rtx.catalog_entries(space, docnos)?.into_iter().flatten().collect())
        };
        // BM25 candidates, best first, until `depth` of them pass the filter or the lists run out.
        let mut top: Vec<(u64, f32)> = Vec::new();
        let mut scores: std::collections::BTreeMap<u64, f32> = std::collections::BTreeMap::new();
        if !terms.is_empty() {
            let mut k = (n.depth * 2).max(100);
            loop {
                let found = rtx.lexical_candidates(space, terms, n.bm25, k)?;
                let docnos: Vec<u64> = found.iter().map(|f| f.0).collect();
                let accepted: BTreeSet<u64> =
                    entries_of(&docnos)?.into_iter().filter(|e| n.filter.accepts(&e.meta)).map(|e| e.docno).collect();
                top = found.iter().copied().filter(|f| accepted.contains(&f.0)).take(n.depth).collect();
                scores.extend(found.iter().copied());
                if top.len() >= n.depth || found.len() < k || k >= MAX_SQL_CANDIDATES {
                    break;
                }
                k = (k * 4).min(MAX_SQL_CANDIDATES);
            }
        }
        let mut first: BTreeSet<u64> = top.iter().map(|f| f.0).collect();
        if let Some(qv) = n.qv {
            let found = rtx.vector_candidates(space, qv, (n.depth * 2).max(100))?;
            let docnos: Vec<u64> = found.iter().map(|f| f.0).collect();
            si.vectors.insert_batch(&vectors_of(rtx, space, &docnos)?);
            first.extend(docnos);
        }
        // The BM25 scores of the vector candidates that the BM25 ranking did not return.
        let missing: Vec<u64> = first.iter().copied().filter(|d| !scores.contains_key(d)).collect();
        for (d, v) in missing.iter().zip(rtx.bm25_scores(space, terms, n.bm25, &missing)?) {
            scores.insert(*d, v);
        }
        let all = self.with_rings(rtx, space, first.clone(), n.neighbour_window.max(1), stats.sequenced > 0)?;
        let entries = entries_of(&all)?;
        let ranks = ranks_of(rtx, space, &entries)?;
        // The query terms' postings of the candidates: which terms each hit matched.
        let wanted: Vec<u64> = first.iter().copied().collect();
        let keys: Vec<(&str, &str, u64)> =
            terms.iter().flat_map(|(t, _)| wanted.iter().map(move |d| (space, t.as_str(), *d))).collect();
        for (key, v) in keys.iter().zip(memory::postings_of(rtx, &keys)?) {
            if let Some(packed) = v {
                si.lexicon.load(key.1, crate::index::bm25::Posting::unpack(key.2, packed));
            }
        }
        si.lexicon.finish_load();
        si.catalog = catalog_of(space, entries)?;
        let all_scores: Vec<(u64, f32)> = scores.into_iter().collect();
        Ok(QueryIndex {
            si,
            ranks,
            entries: usize::try_from(stats.entries).unwrap_or(usize::MAX),
            whole: false,
            lexical: Some((top, all_scores)),
        })
    }

    /// `first` and `RINGS` rings of sequence neighbours around it (`window` on each side), when the space has
    /// sequences; `first` alone otherwise.
    fn with_rings(
        &self,
        rtx: &ReadTx,
        space: &str,
        first: BTreeSet<u64>,
        window: usize,
        sequences: bool,
    ) -> Result<Vec<u64>> {
        let mut all = first.clone();
        if sequences {
            let mut ring: Vec<u64> = first.into_iter().collect();
            for _ in 0..RINGS {
                let next: BTreeSet<u64> = rtx
                    .sequence_neighbours(space, &ring, window)?
                    .into_iter()
                    .flatten()
                    .map(|x| x.0)
                    .filter(|d| !all.contains(d))
                    .collect();
                all.extend(&next);
                ring = next.into_iter().collect();
                if ring.is_empty() {
                    break;
                }
            }
        }
        Ok(all.into_iter().collect())
    }

    /// The vectors of `docnos` in `space`, as a search's vector index (for the fusion of a larger space's union of
    /// candidates, whose lexical ones were not among the vector candidates read).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn union_vectors(&self, rtx: &ReadTx, space: &str, docnos: &[u64]) -> Result<SpaceVectors> {
        let mut v = SpaceVectors::new(self.config.embedder.dim(), self.config.vector);
        v.insert_batch(&vectors_of(rtx, space, docnos)?);
        Ok(v)
    }

    /// The catalog of `hits` and their neighbours within `window`, for the context of a search's hits.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`] as [`Core::query_index`].
    pub(crate) fn context_catalog(
        &self,
        rtx: &ReadTx,
        space: &str,
        hits: &[u64],
        window: usize,
    ) -> Result<SpaceCatalog> {
        let mut all: BTreeSet<u64> = hits.iter().copied().collect();
        all.extend(rtx.sequence_neighbours(space, hits, window)?.into_iter().flatten().map(|x| x.0));
        let all: Vec<u64> = all.into_iter().collect();
        catalog_of(space, rtx.catalog_entries(space, &all)?.into_iter().flatten())
    }
}

/// The catalog of `entries` of `space`.
///
/// # Errors
/// [`ErrorKind::Corrupt`] when two entries hold one memory id (or one docno).
fn catalog_of(space: &str, entries: impl IntoIterator<Item = CatalogEntry>) -> Result<SpaceCatalog> {
    SpaceCatalog::from_entries(entries.into_iter().map(|e| (e.docno, e.meta)).collect())
        .map_err(|e| Error::new(ErrorKind::Corrupt, format!("the search catalog of space '{space}': {e}")))
}

/// Most BM25 candidates a search asks the database for while its filter rejects them.
const MAX_SQL_CANDIDATES: usize = 100_000;

/// The PageRank of the memories of `entries`; None when none has one.
fn ranks_of(rtx: &ReadTx, space: &str, entries: &[CatalogEntry]) -> Result<Option<SpaceRanks>> {
    let keys: Vec<(&str, &str)> = entries.iter().map(|e| (space, e.meta.id.as_str())).collect();
    let mut ranks = SpaceRanks::default();
    let mut any = false;
    for (e, r) in entries.iter().zip(graph::ranks_of(rtx, &keys)?) {
        if let Some(r) = r {
            ranks.insert(&e.meta.id, r as f32);
            any = true;
        }
    }
    Ok(any.then_some(ranks))
}

/// The stored vectors of `docnos` (those that have one), one statement on PostgreSQL.
fn vectors_of(rtx: &ReadTx, space: &str, docnos: &[u64]) -> Result<Vec<(u64, Vec<f32>)>> {
    let keys: Vec<(&str, u64)> = docnos.iter().map(|d| (space, *d)).collect();
    Ok(docnos.iter().zip(memory::vectors(rtx)?.get_many(&keys)?).filter_map(|(d, v)| Some((*d, v?.0))).collect())
}

impl Core {
    /// The memories (catalog entries, any state), the spaces with memories, and the memories without a vector
    /// of the configured embedder (0 in the database index mode: re-embedding is the in-memory daemons' work),
    /// for `/health`.
    ///
    /// # Errors
    /// Storage errors in the database index mode.
    pub(crate) fn index_counts(&self, rtx: &ReadTx) -> Result<(usize, usize, usize)> {
        if self.reads == IndexReads::Database {
            let ids = self.catalog_spaces()?;
            let mut memories = 0usize;
            for s in &ids {
                memories += usize::try_from(rtx.catalog_stats(s, 1)?.entries).unwrap_or(usize::MAX);
            }
            return Ok((memories, ids.len(), 0));
        }
        let state = self.index.read();
        let memories = state.spaces.values().map(|s| s.catalog.len()).sum();
        let reindex_pending = if self.config.embedder.external() {
            0
        } else {
            state.spaces.values().map(|s| s.catalog.len().saturating_sub(s.vectors.len())).sum()
        };
        Ok((memories, state.spaces.len(), reindex_pending))
    }

    /// The memories of `space` that are not forgotten.
    ///
    /// # Errors
    /// Storage errors in the database index mode.
    pub(crate) fn live_memories(&self, rtx: &ReadTx, space: &str) -> Result<u64> {
        if self.reads == IndexReads::Database {
            return Ok(rtx.catalog_stats(space, 1)?.live);
        }
        Ok(self.index.read().spaces.get(space).map_or(0, |si| {
            si.catalog.iter().filter(|(_, m)| m.state != crate::model::MemoryState::Forgotten).count() as u64
        }))
    }

    /// The sum of `count` over the catalog of every space: the in-memory ones, or in the database index mode the
    /// entries with an expiry time ([`Core::with_expiring`]; a space that fails to read counts 0).
    pub(crate) fn sum_over_expiring(&self, count: impl Fn(&SpaceCatalog) -> u64) -> u64 {
        if self.reads == IndexReads::Memory {
            return self.index.read().spaces.values().map(|si| count(&si.catalog)).sum();
        }
        let spaces = self.catalog_spaces().unwrap_or_default();
        spaces.iter().map(|s| self.with_expiring(s, |c| c.map_or(0, &count)).unwrap_or(0)).sum()
    }

    /// PageRank of a memory scaled so the top memory of the graph is 1 (0 until the graph was computed or when it mentions no entity).
    pub(crate) fn memory_pagerank(&self, space: &str, id: &str) -> f64 {
        if self.reads == IndexReads::Memory {
            return self.graph.read().memory_rank.get(space).and_then(|m| m.get(id)).map_or(0.0, f64::from);
        }
        // 0 when the stored row cannot be read, as for a memory without one.
        let read = self.db.read().and_then(|rtx| self.memory_pageranks(&rtx, space, &[id]));
        read.ok().and_then(|r| r.first().copied()).unwrap_or(0.0)
    }

    /// [`Self::memory_pagerank`] of each of `ids`, in their order. In the `database` index mode (no table in
    /// memory) the stored rows, read in `rtx` at once (one statement on PostgreSQL), else the in-memory table
    /// under one lock. Both at the in-memory table's precision (f32), so that both modes show the same figure.
    ///
    /// # Errors
    /// Storage errors (the `database` index mode only).
    pub(crate) fn memory_pageranks(&self, rtx: &crate::storage::ReadTx, space: &str, ids: &[&str]) -> Result<Vec<f64>> {
        if self.reads == IndexReads::Database {
            let keys: Vec<(&str, &str)> = ids.iter().map(|id| (space, *id)).collect();
            let rows = graph::ranks_of(rtx, &keys)?.into_iter();
            return Ok(rows.map(|v| v.map_or(0.0, |v| f64::from(v as f32))).collect());
        }
        let graph = self.graph.read();
        let ranks = graph.memory_rank.get(space);
        Ok(ids.iter().map(|id| ranks.and_then(|m| m.get(id)).map_or(0.0, f64::from)).collect())
    }

    /// Runs `f` over the catalog of `space`: the in-memory one, or in the database index mode the one read from the
    /// database (every entry of the space, O(memories of the space)). None when the store knows no memory of it.
    ///
    /// # Errors
    /// Storage errors in the database index mode; [`ErrorKind::Corrupt`] as [`Core::query_index`].
    pub(crate) fn with_catalog<T>(&self, space: &str, f: impl FnOnce(Option<&SpaceCatalog>) -> T) -> Result<T> {
        if self.reads == IndexReads::Memory {
            let state = self.index.read();
            return Ok(f(state.spaces.get(space).map(|si| &si.catalog)));
        }
        let entries = self.db.read()?.catalog_space(space)?;
        if entries.is_empty() {
            return Ok(f(None));
        }
        Ok(f(Some(&catalog_of(space, entries)?)))
    }

    /// Runs `f` over the catalog of `space`'s memories that have an expiry time (the ones expiry reads): the
    /// in-memory catalog, or in the database index mode those entries read from the database.
    ///
    /// # Errors
    /// As [`Core::with_catalog`].
    pub(crate) fn with_expiring<T>(&self, space: &str, f: impl FnOnce(Option<&SpaceCatalog>) -> T) -> Result<T> {
        if self.reads == IndexReads::Memory {
            return self.with_catalog(space, f);
        }
        Ok(f(Some(&catalog_of(space, self.db.read()?.catalog_expiring(space)?)?)))
    }

    /// The ids of the spaces whose catalog [`Core::with_catalog`] reads: those with in-memory indexes,
    /// or in the database index mode every stored space.
    ///
    /// # Errors
    /// Storage errors in the database index mode.
    pub(crate) fn catalog_spaces(&self) -> Result<Vec<String>> {
        if self.reads == IndexReads::Memory {
            return Ok(self.index.read().spaces.keys().cloned().collect());
        }
        space::ids(&self.db.read()?)
    }

    /// The PageRank table of `space`: the in-memory one, or in the database index mode the stored rows.
    ///
    /// # Errors
    /// Storage errors in the database index mode.
    pub(crate) fn with_space_ranks<T>(&self, space: &str, f: impl FnOnce(Option<&SpaceRanks>) -> T) -> Result<T> {
        if self.reads == IndexReads::Memory {
            let graph = self.graph.read();
            return Ok(f(graph.memory_rank.get(space)));
        }
        let rtx = self.db.read()?;
        let mut ranks = SpaceRanks::default();
        let mut any = false;
        graph::each_rank_in(&rtx, space, |id, rank| {
            ranks.insert(id, rank as f32);
            any = true;
        })?;
        Ok(f(any.then_some(&ranks)))
    }
}
