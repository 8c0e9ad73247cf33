//! The port's coarse read primitives beyond one record kind: a candidate list (BM25 candidates given term lists,
//! vector candidates given a query vector) and an edge stream. Each is one storage question with one answer;
//! whatever decides (fusion, filters, thresholds, graph algorithms) stays above the port
//! (the scale-out design, §5.1, rule 1; docs/storage.md).
//!
//! The redb backend answers them by scanning its kinds. The embedded store serves searches from in-memory
//! mirrors of the same kinds (`index::lexicon`, the HNSW graph), which these primitives must agree with
//! (`tests/storage_port.rs`); the PostgreSQL backend answers them in SQL: BM25 over its postings table, vector
//! candidates from pgvector's HNSW index.

use super::codec::vector_from_bytes;
use super::tables::{CATALOG, LEX_STATS, POSTINGS, RELATES_TO, VECTORS};
use super::{ReadTx, Readable};
use crate::error::Result;
use crate::index::bm25::{self, Bm25Params, Posting};
use crate::index::catalog::DocMeta;
use crate::index::vector::cosine;

/// One RELATES_TO edge of the entity graph: entities `a < b` of `space` and the number of memories mentioning
/// both (at least 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The space both entities belong to.
    pub space: String,
    /// The smaller entity id.
    pub a: String,
    /// The larger entity id.
    pub b: String,
    /// Memories mentioning both.
    pub weight: u64,
}

/// The collection statistics and posting lists a BM25 query needs, read in one transaction.
#[derive(Debug, Clone, Default)]
pub struct TermPostings {
    /// Documents in the space (BM25's N).
    pub n_docs: u64,
    /// Average document length in terms (1 for an empty space).
    pub avg_len: f32,
    /// Sum of the document lengths in terms.
    pub total_len: u64,
    /// Per query term, in the order given: its count in the query and its postings sorted by docno.
    pub lists: Vec<(u32, Vec<Posting>)>,
}

impl TermPostings {
    /// The lists as [`bm25::score`] takes them.
    pub fn borrowed(&self) -> Vec<(u32, &[Posting])> {
        self.lists.iter().map(|(q, l)| (*q, l.as_slice())).collect()
    }
}

/// One memory's entry in a database store's search catalog ([`super::tables::CATALOG`]): what a search needs of
/// it besides its postings and vector.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    /// The memory's document number in its space.
    pub docno: u64,
    /// Its catalog fields: id, state, labels, the ranking priors' inputs, its position.
    pub meta: DocMeta,
    /// Its length in terms (BM25's document length, as in its postings).
    pub len: u64,
}

impl CatalogEntry {
    /// The row's flags: [`super::tables::CATALOG_FORGOTTEN`], [`super::tables::CATALOG_PLAIN`],
    /// [`super::tables::CATALOG_EXPIRING`].
    pub fn flags(&self) -> u64 {
        let m = &self.meta;
        let mut flags = 0;
        if m.state == crate::model::MemoryState::Forgotten {
            flags |= super::tables::CATALOG_FORGOTTEN;
        }
        if crate::index::catalog::is_plain(m) {
            flags |= super::tables::CATALOG_PLAIN;
        }
        if m.expires_at.is_some() {
            flags |= super::tables::CATALOG_EXPIRING;
        }
        flags
    }

    /// The sequence group and ordinal the row stores: the memory's position while it takes part in its sequence
    /// (it has one, is the latest version and is not forgotten, as [`crate::index::catalog::SpaceCatalog`]
    /// counts neighbours), else `("", 0)`.
    pub fn sequence(&self) -> (&str, u64) {
        match &self.meta.position {
            Some(p) if crate::index::catalog::in_sequence(&self.meta) => (&p.group, p.ordinal),
            _ => ("", 0),
        }
    }

    fn from_row(docno: u64, len: u64, record: &[u8]) -> Result<Self> {
        Ok(CatalogEntry { docno, meta: super::codec::decode(record)?, len })
    }
}

/// What a search reads of a whole space's search catalog ([`ReadTx::catalog_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatalogStats {
    /// Catalog entries: the memories of the space, in any state.
    pub entries: u64,
    /// Of them, the memories not forgotten.
    pub live: u64,
    /// Of them, the memories taking part in a sequence.
    pub sequenced: u64,
    /// The sum over those of `len × neighbours` for the window asked: what a context-expanded collection adds
    /// to the space's total length (each memory's text counts once more in each neighbour's expanded text).
    pub neighbour_len: u64,
}

impl ReadTx {
    /// The counts of `space`'s search catalog, and the length its neighbours add to the context-expanded
    /// collection of `window` neighbours on each side ([`crate::index::context`]; the expanded collection's
    /// total length is the space's total length plus this). One statement on PostgreSQL, reading every entry
    /// of the space (O(entries)); all zero on a redb store, which keeps no catalog.
    ///
    /// # Errors
    /// Storage errors.
    pub fn catalog_stats(&self, space: &str, window: usize) -> Result<CatalogStats> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.pg() {
            return pg.catalog_stats(space, window);
        }
        let _ = (space, window);
        Ok(CatalogStats::default())
    }

    /// The search catalog entries of `docnos` in `space`, in their order (`None` for a docno without one). One
    /// statement on PostgreSQL. A redb store keeps no catalog (its catalog is in memory): every entry is `None`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when a stored entry does not decode.
    pub fn catalog_entries(&self, space: &str, docnos: &[u64]) -> Result<Vec<Option<CatalogEntry>>> {
        let keys: Vec<(&str, u64)> = docnos.iter().map(|d| (space, *d)).collect();
        let table = self.table(CATALOG)?;
        let got = table.get_many(&keys)?;
        docnos
            .iter()
            .zip(got)
            .map(|(d, row)| {
                row.map(|v| {
                    let (_, _, _, len, record) = v.value();
                    CatalogEntry::from_row(*d, len, record)
                })
                .transpose()
            })
            .collect()
    }

    /// The search catalog entries of `space` with an expiry time, by docno (empty on a redb store). On
    /// PostgreSQL one statement over the partial index `catalog_expiring`: it reads only those rows.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when a stored entry does not decode.
    pub fn catalog_expiring(&self, space: &str) -> Result<Vec<CatalogEntry>> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.pg() {
            return pg
                .catalog_expiring(space)?
                .into_iter()
                .map(|(docno, len, record)| CatalogEntry::from_row(docno, len, &record))
                .collect();
        }
        let _ = space;
        Ok(Vec::new())
    }

    /// Every search catalog entry of `space`, by docno (empty on a redb store).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when a stored entry does not decode.
    pub fn catalog_space(&self, space: &str) -> Result<Vec<CatalogEntry>> {
        let mut out = Vec::new();
        for row in self.table(CATALOG)?.range((space, 0u64)..=(space, u64::MAX))? {
            let (k, v) = row?;
            let (_, _, _, len, record) = v.value();
            out.push(CatalogEntry::from_row(k.value().1, len, record)?);
        }
        Ok(out)
    }

    /// The neighbours of each of `docnos` in its sequence, from the search catalog: at most `window` on each
    /// side among the memories taking part in the sequence, as `(docno, distance)` with distance 1 for the
    /// nearest, the ones before first (nearest first), then the ones after; empty for a docno outside every
    /// sequence. The same lists as [`crate::index::catalog::SpaceCatalog::neighbours`] gives an in-memory
    /// daemon. On PostgreSQL one statement over the catalog's sequence index (`catalog_sequence`: `(space, group,
    /// ordinal, docno)`), 2 x `window` index entries read per docno. A redb store keeps no catalog: every list
    /// is empty there.
    ///
    /// # Errors
    /// Storage errors.
    pub fn sequence_neighbours(&self, space: &str, docnos: &[u64], window: usize) -> Result<Vec<Vec<(u64, u32)>>> {
        if window == 0 || docnos.is_empty() {
            return Ok(vec![Vec::new(); docnos.len()]);
        }
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.pg() {
            return pg.sequence_neighbours(space, docnos, window);
        }
        // A redb store keeps no catalog: its searches read the neighbours from the in-memory one.
        let _ = space;
        Ok(vec![Vec::new(); docnos.len()])
    }

    /// The postings of `terms` (terms as `text::terms` makes them, each with its count in the query)
    /// in `space`, with the space's N and average document length. Reads one key range per term.
    ///
    /// # Errors
    /// Storage errors.
    pub fn term_postings(&self, space: &str, terms: &[(String, u32)]) -> Result<TermPostings> {
        let (n_docs, total) = self.table(LEX_STATS)?.get(space)?.map_or((0, 0), |v| v.value());
        let avg_len = if n_docs == 0 { 1.0 } else { total as f32 / n_docs as f32 };
        let postings = self.table(POSTINGS)?;
        let mut lists = Vec::with_capacity(terms.len());
        for (term, qtf) in terms {
            let mut list = Vec::new();
            for row in postings.range((space, term.as_str(), 0u64)..=(space, term.as_str(), u64::MAX))? {
                let (k, v) = row?;
                list.push(Posting::unpack(k.value().2, v.value()));
            }
            lists.push((*qtf, list));
        }
        Ok(TermPostings { n_docs, avg_len, total_len: total, lists })
    }

    /// BM25 candidates: the `k` best `(docno, score)` of `space` for the query `terms`, best first (ties by
    /// docno). Every document with a posting is a candidate, whatever its state: filters apply above the port.
    /// Robertson and Zaragoza (2009), with [`bm25::score`]'s formula and `params`. On PostgreSQL one SQL
    /// statement over the postings table answers it (double precision: scores agree to about 1e-6 relative).
    ///
    /// # Errors
    /// Storage errors.
    pub fn lexical_candidates(
        &self,
        space: &str,
        terms: &[(String, u32)],
        params: Bm25Params,
        k: usize,
    ) -> Result<Vec<(u64, f32)>> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.pg() {
            return pg.lexical_candidates(space, terms, params, k);
        }
        let tp = self.term_postings(space, terms)?;
        let mut scored = bm25::score(params, tp.n_docs, tp.avg_len, &tp.borrowed(), &|_| true);
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    /// BM25 scores of `docnos` in `space` for the query `terms` (0 for a document without any of them), in
    /// their order: the scores [`ReadTx::lexical_candidates`] gives, for chosen documents (the vector candidates
    /// a hybrid search fuses with the BM25 ones). On PostgreSQL one statement; elsewhere the terms' postings.
    ///
    /// # Errors
    /// Storage errors.
    pub fn bm25_scores(
        &self,
        space: &str,
        terms: &[(String, u32)],
        params: Bm25Params,
        docnos: &[u64],
    ) -> Result<Vec<f32>> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.pg() {
            return pg.bm25_scores(space, terms, params, docnos);
        }
        let tp = self.term_postings(space, terms)?;
        let wanted: std::collections::HashSet<u64> = docnos.iter().copied().collect();
        let scored = bm25::score(params, tp.n_docs, tp.avg_len, &tp.borrowed(), &|d| wanted.contains(&d));
        let by: std::collections::HashMap<u64, f32> = scored.into_iter().collect();
        Ok(docnos.iter().map(|d| by.get(d).copied().unwrap_or(0.0)).collect())
    }

    /// Vector candidates: the `k` stored vectors of `space` nearest to `query` by cosine similarity (-1..=1),
    /// best first (ties by docno). On redb an exact scan, O(vectors × dimension) (the embedded store answers the
    /// same question from its HNSW graph); on PostgreSQL with pgvector 0.8.0+ its HNSW index with an iterative
    /// scan (approximate; `hnsw.ef_search` 96), without it the same exact scan.
    ///
    /// # Errors
    /// Storage errors.
    pub fn vector_candidates(&self, space: &str, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.pg()
            && let Some(found) = pg.vector_candidates(space, query, k)?
        {
            return Ok(found);
        }
        let mut scored = Vec::new();
        for row in self.table(VECTORS)?.range((space, 0u64)..=(space, u64::MAX))? {
            let (key, v) = row?;
            scored.push((key.value().1, cosine(query, &vector_from_bytes(v.value()))));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    /// Streams the RELATES_TO edges of every space, each undirected pair once, to `f` (by space, then `a`, then
    /// `b`). Graph algorithms (PageRank, Louvain) read the graph through this.
    ///
    /// # Errors
    /// Storage errors.
    pub fn relates_edges(&self, mut f: impl FnMut(Edge)) -> Result<()> {
        for row in self.table(RELATES_TO)?.iter()? {
            let (k, v) = row?;
            let (s, a, b) = k.value();
            if a >= b {
                continue; // stored both ways
            }
            f(Edge { space: s.to_string(), a: a.to_string(), b: b.to_string(), weight: v.value().max(1) });
        }
        Ok(())
    }
}
