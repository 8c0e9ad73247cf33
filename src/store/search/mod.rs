//! The search service ([`Search`], `store.search()`): hybrid search, BM25 over the postings, vector search over
//! the space's index, fused. `rank.rs` has the rankings and their fusion, `pool.rs` the search threads.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::embed::InputType;
use crate::error::ErrorCode;
use crate::error::{Error, FieldError, Result};
use crate::index::bm25::{self, Posting};
use crate::index::catalog::SpaceCatalog;
use crate::index::context;
use crate::index::decay;
use crate::index::first_in_order;
use crate::index::fusion::{Fused, fuse};
use crate::storage::Readable;
use crate::store::KnowledgeStore;
use crate::store::types::MemoryView;
use crate::store::{entity, label, memory, source, space, thread};
use crate::text;
use types::{ContextItem, SearchHit, SearchMode, SearchQuery, SearchResults};

mod pool;
mod rank;
pub(crate) mod types;

use pool::fork;
use rank::*;

/// The search of a store's memories, borrowed from the store (`store.search()`).
///
/// Owns: no records; it reads the memories' postings, catalog, vectors and ranks (BM25, HNSW, PageRank) and
/// the search threads (`pool.rs`).
#[derive(Clone, Copy)]
pub struct Search<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

/// Spaces of at least this many memories run a hybrid search's two rankings (BM25 and vector) at once, on two
/// threads; smaller ones run them one after the other, since each then takes well under a millisecond and the
/// hand-over between threads (tens of microseconds) would cost more than it saves.
pub const PARALLEL_MIN_DOCS: usize = 200_000;

/// Longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Most hits a search returns.
pub const MAX_LIMIT: usize = 100;

impl Search<'_> {
    /// Searches one space, and the spaces it shares in (`sharedSpaceIds`, one level). Lexical: BM25 over stemmed terms. Vector: cosine over the active embedder's
    /// vectors (exact below the HNSW threshold or for small filtered sets, HNSW otherwise). Hybrid fuses the
    /// two top lists (each `max(4·limit, 50)` long) with the configured [`crate::index::fusion::Fusion`].
    /// Filters apply inside both rankings, so a filtered search returns `limit` hits whenever that many
    /// memories match.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::InvalidInput`]: empty query, query over 4,096 bytes, limit outside 1..=100.
    /// * [`crate::ErrorKind::NotFound`] (`space_not_found`): unknown space.
    pub fn run(&self, q: &SearchQuery) -> Result<SearchResults> {
        let started = Instant::now();
        let out = self.run_from(q, started);
        if let Ok(r) = &out {
            let m = crate::metrics::global();
            let mode = crate::metrics::ModeLabels { mode: r.mode.as_str() };
            m.search_duration.get_or_create(&mode).observe(started.elapsed().as_secs_f64());
            m.search_candidates.get_or_create(&mode).observe(r.candidates as f64);
            if r.fallback.is_some() {
                m.search_fallbacks.get_or_create(&mode).inc();
            }
        }
        out
    }

    fn run_from(&self, q: &SearchQuery, started: Instant) -> Result<SearchResults> {
        let mut errs = Vec::new();
        let given = q.query_embedding.as_ref().and_then(|v| {
            crate::embed::check_vector(v, &*self.store.core.config.embedder, &["query_embedding"], &mut errs)
        });
        if q.query.trim().is_empty() && q.query_embedding.is_none() {
            errs.push(FieldError::field(
                &["query"],
                "string_too_short",
                "query must not be empty",
                q.query.clone().into(),
            ));
        } else if q.query.len() > MAX_QUERY_BYTES {
            errs.push(FieldError::field(
                &["query"],
                "string_too_long",
                "query is at most 4096 bytes",
                serde_json::Value::Null,
            ));
        }
        if q.limit == 0 || q.limit > MAX_LIMIT {
            errs.push(
                FieldError::field(&["limit"], "limit_invalid", "limit is 1..=100", q.limit.into())
                    .with_ctx(serde_json::json!({"ge": 1, "le": 100})),
            );
        }
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let normalised;
        let q = match given {
            Some(v) => {
                normalised = SearchQuery { query_embedding: Some(v), ..q.clone() };
                &normalised
            }
            None => q,
        };
        // One read transaction for the whole search (and its shared spaces): one snapshot, and on PostgreSQL
        // one BEGIN for every read.
        let rtx = self.store.core.db.read()?;
        // On PostgreSQL the space and the query's entities are read in one statement.
        let entities = q.mode == SearchMode::Hybrid
            && self.store.core.config.entity_boost > 0.0
            && q.options.priors != Some(false);
        super::graph::entities::ask_search(&rtx, &q.space_id, entities.then_some(q.query.as_str()));
        let space: crate::model::Space = space::spaces(&rtx)?.get(q.space_id.as_str())?.ok_or_else(|| {
            Error::not_found(ErrorCode::SpaceNotFound, format!("space '{}' does not exist", q.space_id))
        })?;
        if space.shared_space_ids.is_empty() {
            return self.search_space(&rtx, q, true, started);
        }
        // A space with shared spaces searches each of them too (one level, no chains) and keeps the best
        // `limit` hits by fused score; each hit names its own space.
        let mut all = self.search_space(&rtx, q, true, started)?;
        for shared in &space.shared_space_ids {
            let sub = SearchQuery { space_id: shared.clone(), ..q.clone() };
            let r = self.search_space(&rtx, &sub, true, started)?;
            all.hits.extend(r.hits);
            all.candidates += r.candidates;
            all.fallback = all.fallback.or(r.fallback);
        }
        all.hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.view.memory.id.cmp(&b.view.memory.id)));
        all.hits.truncate(q.limit);
        all.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(all)
    }

    /// Searches exactly one space, not the spaces it shares (validated query; a space without indexes, such as
    /// a shared space deleted meanwhile, gives no hits). The records of the hits are read in `rtx`, in one
    /// statement per record kind on PostgreSQL ([`crate::storage::Readable::get_many`]). `labels`: read the
    /// hits' label ids too (a caller that only compares the hits' records, as review detection, skips that
    /// statement; each hit's `label_ids` is empty then).
    pub(crate) fn search_space(
        &self,
        rtx: &crate::storage::ReadTx,
        q: &SearchQuery,
        labels: bool,
        started: Instant,
    ) -> Result<SearchResults> {
        let depth = (q.limit * 4).max(50);
        let (mode, fallback) = self.search_mode(q);
        let qvec = match mode {
            SearchMode::Lexical => None,
            _ => match &q.query_embedding {
                Some(v) => Some(v.clone()),
                None => self.store.core.config.embedder.embed(&[q.query.as_str()], InputType::Query)?.pop(),
            },
        };
        let qterms = text::terms(&q.query);
        let mut qtf: BTreeMap<String, u32> = BTreeMap::new();
        for t in &qterms {
            *qtf.entry(t.clone()).or_default() += 1;
        }

        let cx = q.options.context_params.unwrap_or(self.store.core.config.context);
        let exp = q.options.expansion_params.unwrap_or(self.store.core.config.expansion);
        let terms: Vec<(&str, u32)> =
            if mode == SearchMode::Vector { Vec::new() } else { qtf.iter().map(|(t, n)| (t.as_str(), *n)).collect() };
        let qv = qvec.as_deref().filter(|qv| qv.iter().any(|x| *x != 0.0));
        // The database index mode reads the part of the space's indexes this search needs (`core/search_db.rs`);
        // None: the in-memory indexes serve it.
        let context_on = q.options.context_bm25.unwrap_or(true) && cx.is_on() && mode != SearchMode::Vector;
        let needs = super::core::search_db::QueryNeeds {
            terms: &terms,
            qv,
            context_window: if context_on { cx.window } else { 0 },
            neighbour_window: exp.window.max(1),
            depth,
            bm25: q.options.bm25.unwrap_or(self.store.core.config.bm25),
            filter: &q.filter,
        };
        let queried = self.store.core.query_index(rtx, &q.space_id, &needs)?;

        // Entities named in the query, with IDF weights, for the hybrid ranking signal.
        let query_entities: Vec<(String, f32)> = if mode == SearchMode::Hybrid
            && self.store.core.config.entity_boost > 0.0
            && q.options.priors != Some(false)
        {
            let docs = match &queried {
                Some(qi) => qi.entries.max(1),
                None => self.store.core.index.read().spaces.get(&q.space_id).map_or(1, |si| si.catalog.len().max(1)),
            } as f32;
            self.store
                .graph()
                .entities_in_tx(rtx, &q.space_id, &q.query)?
                .into_iter()
                .map(|(id, mentions)| (id, (1.0 + docs / mentions.max(1) as f32).ln()))
                .collect()
        } else {
            Vec::new()
        };
        let state = self.store.core.index.read();
        let si = match &queried {
            Some(qi) => &qi.si,
            None => match state.spaces.get(&q.space_id) {
                Some(si) => si,
                None => return Ok(SearchResults { hits: vec![], mode, candidates: 0, elapsed_ms: 0.0, fallback }),
            },
        };
        let trivial = q.filter.is_trivial();
        // The live bits answer for nearly every document of a trivial filter without reading its entry.
        let accept = |d: u64| {
            (trivial && si.catalog.plainly_accepted(d)) || si.catalog.get(d).is_some_and(|m| q.filter.accepts(m))
        };
        // Counting matches walks the whole catalog: only a real filter needs it. (In the database index mode, a
        // space larger than `hnsw_min_points` counts the matches among the memories the search read.)
        let candidates = match (&queried, trivial) {
            (Some(qi), true) => qi.entries,
            (None, true) => si.catalog.len(),
            (_, false) => si.catalog.count(&q.filter),
        };
        let lex = Lexical {
            bm25: q.options.bm25.unwrap_or(self.store.core.config.bm25),
            cx,
            docs: si.lexicon.docs,
            avg: si.lexicon.avg_len(),
        };
        let hint = if q.filter.is_trivial() { None } else { Some(candidates) };
        // A larger space in the database index mode may have had its BM25 candidates ranked in the database.
        let given = queried.as_ref().and_then(|qi| qi.lexical.as_ref());
        let own_terms: &[(&str, u32)] = if given.is_some() { &[] } else { &terms };
        let ((mut lexical, mut scorer), mut vector) = rankings(si, q, mode, own_terms, &lex, qv, depth, &accept, hint);
        if let Some((top, all)) = given.filter(|_| mode != SearchMode::Vector) {
            (lexical, scorer) = (top.clone(), LexScorer::All(all.clone()));
        }

        // The context-blended cosine (`docs/retrieval.md`): vector candidates and their neighbours are ranked by it,
        // and fusion reads it.
        let gamma = q.options.vector_context.unwrap_or_else(|| self.store.core.config.effective_vector_context());
        let blend = if gamma > 0.0 && si.has_sequences() { gamma } else { 0.0 };
        // A larger space in the database index mode read the vectors of its vector candidates only: fusion needs
        // those of the lexical ones too, and the blend those of two rings of neighbours.
        let read_vectors = match (&queried, qv) {
            (Some(qi), Some(_)) if !qi.whole && (mode == SearchMode::Hybrid || blend > 0.0) => {
                let wanted = vectors_wanted(&si.catalog, &lexical, &vector, blend > 0.0);
                Some(self.store.core.union_vectors(rtx, &q.space_id, &wanted)?)
            }
            _ => None,
        };
        let vectors = read_vectors.as_ref().unwrap_or(&si.vectors);
        let vector_side = VectorSide { vectors, catalog: &si.catalog, qv, blend, memo: Default::default() };
        let cosines = |docs: &[u64]| vector_side.cosines(docs);
        if blend > 0.0 && !vector.is_empty() {
            vector = rank_blended(&si.catalog, &vector, depth, &accept, &cosines);
        }
        let floor = self.store.core.config.embedder.min_similarity();
        if floor > 0.0 {
            vector.retain(|(_, s)| *s >= floor);
        }

        let mut fused: Vec<Fused> = match mode {
            SearchMode::Hybrid => {
                let fusion = q.fusion.unwrap_or_else(|| self.store.core.config.effective_fusion());
                fuse_union(&lexical, &vector, &scorer, lex.bm25, &cosines, fusion)
            }
            SearchMode::Lexical => lexical
                .iter()
                .map(|(d, s)| Fused { docno: *d, score: *s, lexical: Some(*s), vector: None, expansion: None })
                .collect(),
            SearchMode::Vector => vector
                .iter()
                .map(|(d, s)| Fused { docno: *d, score: *s, lexical: None, vector: Some(*s), expansion: None })
                .collect(),
        };

        let graph = self.store.core.graph.read();
        let ranks = match &queried {
            Some(qi) => qi.ranks.as_ref(),
            None => graph.memory_rank.get(&q.space_id),
        };
        self.apply_priors(q, si, rtx, &mut fused, depth, &query_entities, ranks, mode)?;
        if q.options.expand_neighbours.unwrap_or(true) {
            context::expand(&mut fused, &si.catalog, exp, depth, &accept);
        }
        // After expansion: a question first passes its score on to its reply, then ranks below it.
        let qp = q.options.question_penalty.unwrap_or(self.store.core.config.question_penalty);
        context::penalise_questions(&mut fused, &si.catalog, qp, depth);
        let db_mode = queried.is_some();
        let hits = self.hits_of(rtx, q, si, &fused, &terms, ranks, labels, db_mode)?;
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(SearchResults { hits, mode, candidates, elapsed_ms, fallback })
    }

    /// The hits of a search: the records of the first `limit` of `fused` still stored (a batch of candidates at a
    /// time, one statement per record kind on PostgreSQL), their labels (when `labels`), PageRank, matched terms
    /// and, when the query asks for it, their context (in the database index mode its neighbours are read for it).
    #[allow(clippy::too_many_arguments)]
    fn hits_of(
        &self,
        rtx: &crate::storage::ReadTx,
        q: &SearchQuery,
        si: &super::SpaceIndex,
        fused: &[Fused],
        terms: &[(&str, u32)],
        ranks: Option<&super::core::ranks::SpaceRanks>,
        labels: bool,
        db_mode: bool,
    ) -> Result<Vec<SearchHit>> {
        let mems = memory::memories(rtx)?;
        // The hits' records, a batch of the candidates still needed at a time (one batch unless some candidate
        // was deleted since the index saw it), then their labels, all at once.
        let mut found: Vec<(Fused, crate::model::Memory)> = Vec::with_capacity(q.limit);
        let mut next = 0;
        while found.len() < q.limit && next < fused.len() {
            let end = (next + q.limit - found.len()).min(fused.len());
            let batch: Vec<(Fused, &str)> =
                fused[next..end].iter().filter_map(|f| si.catalog.get(f.docno).map(|m| (*f, m.id.as_str()))).collect();
            next = end;
            let keys: Vec<(&str, &str)> = batch.iter().map(|(_, id)| (q.space_id.as_str(), *id)).collect();
            for ((f, _), sm) in batch.into_iter().zip(mems.get_many(&keys)?) {
                if let Some(sm) = sm.filter(|sm| sm.docno == f.docno) {
                    found.push((f, sm.memory));
                }
            }
        }
        let ids: Vec<&str> = found.iter().map(|(_, m)| m.id.as_str()).collect();
        let labels = if labels {
            crate::storage::txn::range_prefix3_many(&label::memory_labels(rtx)?, &q.space_id, &ids)?
        } else {
            vec![Vec::new(); ids.len()]
        };
        let mut hits = Vec::with_capacity(found.len());
        for ((f, mut memory), label_ids) in found.into_iter().zip(labels) {
            memory.pagerank_score = ranks.and_then(|r| r.get(&memory.id)).map_or(0.0, f64::from);
            hits.push(SearchHit {
                view: MemoryView { memory, label_ids },
                score: f.score,
                lexical_score: f.lexical,
                vector_score: f.vector,
                matched_terms: terms
                    .iter()
                    .filter(|(t, _)| si.lexicon.postings(t).binary_search_by_key(&f.docno, |p| p.docno).is_ok())
                    .map(|(t, _)| t.to_string())
                    .collect(),
                expansion_score: f.expansion,
                context: Vec::new(),
            });
        }
        if let Some(w) = q.options.include_context.filter(|w| *w > 0) {
            let w = w.min(types::MAX_CONTEXT_WINDOW);
            let mut nb = Vec::new();
            // The database index mode reads the hits' neighbours for it.
            let read = match db_mode {
                true => {
                    let docnos: Vec<u64> = hits.iter().filter_map(|h| si.catalog.docno_of(&h.view.memory.id)).collect();
                    Some(self.store.core.context_catalog(rtx, &q.space_id, &docnos, w)?)
                }
                false => None,
            };
            let catalog = read.as_ref().unwrap_or(&si.catalog);
            for h in &mut hits {
                let Some(docno) = catalog.docno_of(&h.view.memory.id) else { continue };
                h.context = self.hit_context(rtx, &q.space_id, catalog, docno, &h.view.memory, w, &mut nb)?;
            }
        }
        Ok(hits)
    }

    /// The rankings a search uses, and why it fell back to BM25 alone when it did: an external-vector store
    /// given no `query_embedding`, or memories of the space still awaiting vectors from the embedder.
    fn search_mode(&self, q: &SearchQuery) -> (SearchMode, Option<String>) {
        let external = self.store.core.config.embedder.external();
        let awaiting = if external {
            0
        } else {
            self.store
                .core
                .index
                .read()
                .spaces
                .get(&q.space_id)
                .map_or(0, |si| si.catalog.len().saturating_sub(si.vectors.len()))
        };
        if external && q.mode != SearchMode::Lexical && q.query_embedding.is_none() {
            let why = format!(
                "no query_embedding: this store takes caller-supplied vectors ({}), so results are ranked by BM25 \
                 alone",
                self.store.core.config.embedder.name()
            );
            (SearchMode::Lexical, Some(why))
        } else if q.mode != SearchMode::Lexical && awaiting > 0 {
            let why = format!(
                "re-embedding in progress: {awaiting} memories of this space await vectors from {}; \
                 results are ranked by BM25 alone until it finishes",
                self.store.core.config.embedder.name()
            );
            (SearchMode::Lexical, Some(why))
        } else {
            (q.mode, None)
        }
    }

    /// The ranking priors after fusion, on the top `depth`: the entity bonus (query entities a memory mentions,
    /// IDF-weighted, up to `entity_boost`), the PageRank prior, the decay factor (`crate::index::decay`), then
    /// the temporal boost of dated memories for questions about time.
    #[allow(clippy::too_many_arguments)]
    fn apply_priors(
        &self,
        q: &SearchQuery,
        si: &super::SpaceIndex,
        rtx: &crate::storage::ReadTx,
        fused: &mut [Fused],
        depth: usize,
        query_entities: &[(String, f32)],
        ranks: Option<&super::core::ranks::SpaceRanks>,
        mode: SearchMode,
    ) -> Result<()> {
        let decay_w = self.store.core.config.decay_weight.clamp(0.0, 1.0);
        let pr_w = self.store.core.config.pagerank_weight.clamp(0.0, 1.0);
        let priors = q.options.priors.unwrap_or(true);
        if priors && (!query_entities.is_empty() || decay_w > 0.0 || (pr_w > 0.0 && ranks.is_some())) {
            // A memory mentioning the query's entities gains up to `entity_boost`, weighted by each entity's
            // IDF; then the decay factor `1 - w + w x decay` scales the score (see `crate::index::decay`).
            // Which of the top `depth` mention which query entity: one batched read of the mention edges.
            let n = fused.len().min(depth);
            let matched: Vec<bool> = if query_entities.is_empty() {
                Vec::new()
            } else {
                let keys: Vec<(&str, &str, &str)> = fused[..n]
                    .iter()
                    .flat_map(|f| {
                        let id = si.catalog.get(f.docno).map_or("", |m| m.id.as_str());
                        query_entities.iter().map(move |(e, _)| (q.space_id.as_str(), id, e.as_str()))
                    })
                    .collect();
                entity::mentions(rtx)?.get_many(&keys)?.iter().map(Option::is_some).collect()
            };
            let total: f32 = query_entities.iter().map(|(_, w)| w).sum();
            let now = crate::model::Timestamp::now();
            for (i, f) in fused.iter_mut().take(depth).enumerate() {
                let Some(meta) = si.catalog.get(f.docno) else { continue };
                if !query_entities.is_empty() {
                    let mut matched_w = 0.0;
                    for (j, (_, w)) in query_entities.iter().enumerate() {
                        if matched.get(i * query_entities.len() + j).copied().unwrap_or(false) {
                            matched_w += w;
                        }
                    }
                    f.score += self.store.core.config.entity_boost * matched_w / total.max(f32::EPSILON);
                }
                if let Some(r) = ranks.filter(|_| pr_w > 0.0).and_then(|r| r.get(&meta.id)) {
                    // PageRank (scaled so the graph's top node is 1) as a small additive prior.
                    f.score += pr_w * r;
                }
                if decay_w > 0.0 {
                    let d = decay::decay_score(meta.importance, meta.access_count, meta.last_used, now);
                    f.score *= decay::ranking_factor(decay_w, d);
                }
            }
            let n = fused.len().min(depth);
            fused[..n].sort_by(|a, b| b.score.total_cmp(&a.score).then(a.docno.cmp(&b.docno)));
        }
        let tb = q.options.temporal_boost.unwrap_or(self.store.core.config.temporal_boost);
        if mode == SearchMode::Hybrid && tb > 0.0 && text::asks_time(&q.query) {
            let n = fused.len().min(depth);
            for f in fused[..n].iter_mut() {
                if si.catalog.get(f.docno).is_some_and(|m| m.dated) {
                    f.score *= 1.0 + tb;
                }
            }
            fused[..n].sort_by(|a, b| b.score.total_cmp(&a.score).then(a.docno.cmp(&b.docno)));
        }
        Ok(())
    }

    /// The context of hit `m` (document `docno` of `space`), in order: the messages of its thread from `window`
    /// before its first message to `window` after its last, or the chunks of its source around its chunk; when
    /// the thread or source is not stored in the space, its neighbouring memories. Empty without a position.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn hit_context(
        &self,
        rtx: &crate::storage::ReadTx,
        space: &str,
        catalog: &crate::index::catalog::SpaceCatalog,
        docno: u64,
        m: &crate::model::Memory,
        window: usize,
        nb: &mut Vec<(u64, u32)>,
    ) -> Result<Vec<ContextItem>> {
        let Some(pos) = context::position_of(m) else { return Ok(Vec::new()) };
        let w = window as u64;
        let mut items = Vec::new();
        if let Some(tid) = pos.group.strip_prefix("thread:") {
            let mut own: Vec<u64> = m
                .metadata
                .0
                .get("source_message_indices")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default();
            if own.is_empty() {
                let end = m.source_range.get("end_index").map_or(pos.ordinal, |e| (*e as u64).max(pos.ordinal));
                own = (pos.ordinal..=end.min(pos.ordinal + 1000)).collect();
            }
            let lo = own.iter().min().copied().unwrap_or(pos.ordinal).saturating_sub(w);
            let hi = own.iter().max().copied().unwrap_or(pos.ordinal).saturating_add(w);
            for msg in thread::messages_between(&rtx, (space, tid), lo, hi, usize::MAX)? {
                items.push(ContextItem {
                    kind: "message".into(),
                    index: msg.order_index,
                    is_hit: own.contains(&msg.order_index),
                    role: msg.role,
                    content: msg.content,
                    memory_id: None,
                });
            }
        } else if let Some(sid) = pos.group.strip_prefix("source:")
            && source::sources(&rtx)?.get((space, sid))?.is_some()
        {
            let text = source::text_of(&rtx, sid)?;
            let (lo, hi) = (pos.ordinal.saturating_sub(w), pos.ordinal.saturating_add(w));
            for (index, c) in source::chunks_between(&rtx, sid, lo, hi)? {
                let a = crate::extract::document::floor_boundary(&text, c.offset as usize);
                let b = crate::extract::document::floor_boundary(&text, (c.offset + c.length) as usize);
                items.push(ContextItem {
                    kind: "chunk".into(),
                    index,
                    role: String::new(),
                    content: text.get(a..b).unwrap_or("").to_string(),
                    is_hit: index == pos.ordinal,
                    memory_id: None,
                });
            }
        }
        if !items.is_empty() {
            return Ok(items);
        }
        // Neither stored here: the neighbouring memories of the sequence.
        catalog.neighbours(docno, window, nb);
        let mut seq: Vec<(u64, u64)> = nb
            .iter()
            .filter_map(|(d, _)| catalog.get(*d).and_then(|x| x.position.as_ref()).map(|p| (p.ordinal, *d)))
            .collect();
        seq.push((pos.ordinal, docno));
        seq.sort_unstable();
        let mems = memory::memories(&rtx)?;
        for (ordinal, d) in seq {
            let Some(meta) = catalog.get(d) else { continue };
            let Some(sm) = mems.get((space, meta.id.as_str()))? else { continue };
            items.push(ContextItem {
                kind: "memory".into(),
                index: ordinal,
                role: String::new(),
                content: sm.memory.content,
                is_hit: d == docno,
                memory_id: Some(meta.id.clone()),
            });
        }
        Ok(items)
    }
}
