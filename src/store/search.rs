//! Hybrid search: BM25 over the postings in redb, vector search over the space's index, fused.

use std::collections::BTreeMap;
use std::time::Instant;

use super::KnowledgeStore;
use super::types::{ContextItem, SearchHit, SearchMode, SearchQuery, SearchResults};
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
use crate::store::types::MemoryView;
use crate::store::{entity, label, memory, source, space, thread};
use crate::text;

/// Spaces of at least this many memories run a hybrid search's two rankings (BM25 and vector) at once, on two
/// threads; smaller ones run them one after the other, since each then takes well under a millisecond and the
/// hand-over between threads (tens of microseconds) would cost more than it saves.
pub const PARALLEL_MIN_DOCS: usize = 200_000;

/// The threads that run part of a large search beside the calling thread: the vector ranking of a hybrid search
/// over a space of [`PARALLEL_MIN_DOCS`] memories or more, and their share of the parts of a BM25 query over long
/// posting lists ([`bm25::SplitQuery`]). One thread fewer than rayon's default (`RAYON_NUM_THREADS`, else
/// the machine's cores), since the calling thread does the other half; named `engram-search-N` and started on
/// first use. `None` on one core, or when the threads could not be started: searches then run on the calling
/// thread alone. It is not rayon's global pool, so that a search never waits behind the parallel work of an
/// ingest batch or an HNSW build.
struct SearchPool {
    pool: rayon::ThreadPool,
    /// Jobs handed to the pool by [`fork`] and not yet finished.
    busy: std::sync::atomic::AtomicUsize,
}

fn search_pool() -> Option<&'static SearchPool> {
    static POOL: std::sync::OnceLock<Option<SearchPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let threads = rayon::current_num_threads().saturating_sub(1);
        if threads == 0 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("engram-search-{i}"))
            .build()
            .map_err(|e| tracing::warn!("search threads not started, searches run on one thread: {e}"))
            .ok()
            .map(|pool| SearchPool { pool, busy: std::sync::atomic::AtomicUsize::new(0) })
    })
    .as_ref()
}

thread_local! {
    /// Whether this thread is running the `here` half of a [`fork`] whose other half holds a pool thread.
    static FORKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `here` on this thread and `there` beside it on the search pool, and returns both results; `None`, having
/// run neither, when the pool is missing or each of its threads already has a half to run (a daemon under load:
/// another thread would only take turns with a busy one), and the caller then runs its work on this thread alone.
/// A fork inside `here` of another fork is never refused: its `there` waits for the pool thread the outer fork
/// holds (a hybrid search's BM25 parts, taken up by the pool's thread once the vector ranking is done), which this
/// thread waits for anyway. `there` runs here too when no pool thread has taken it up by the time `here` is done
/// (a sleeping thread can take longer to wake than the work takes).
fn fork<A, B: Send + Default>(here: impl FnOnce() -> A, there: impl FnOnce() -> B + Send) -> Option<(A, B)> {
    use std::sync::atomic::Ordering;
    let sp = search_pool()?;
    let nested = FORKING.get();
    if sp.busy.fetch_add(1, Ordering::AcqRel) >= sp.pool.current_num_threads() && !nested {
        sp.busy.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    let job = parking_lot::Mutex::new(Some(there));
    let mut theirs = None;
    let (mine, here_too) = sp.pool.in_place_scope(|s| {
        s.spawn(|_| {
            if let Some(f) = job.lock().take() {
                theirs = Some(f());
            }
        });
        FORKING.set(true);
        let mine = here();
        FORKING.set(nested);
        let claimed = job.lock().take();
        (mine, claimed.map(|f| f()))
    });
    sp.busy.fetch_sub(1, Ordering::AcqRel);
    // The job is taken exactly once, here or by the pool, and the scope waited for the pool: one is set.
    Some((mine, here_too.or(theirs).unwrap_or_default()))
}

/// Longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;
/// Most hits a search returns.
pub const MAX_LIMIT: usize = 100;

impl KnowledgeStore {
    /// Searches one space, and the spaces it shares in (`sharedSpaceIds`, one level). Lexical: BM25 over stemmed terms. Vector: cosine over the active embedder's
    /// vectors (exact below the HNSW threshold or for small filtered sets, HNSW otherwise). Hybrid fuses the
    /// two top lists (each `max(4·limit, 50)` long) with the configured [`crate::index::fusion::Fusion`].
    /// Filters apply inside both rankings, so a filtered search returns `limit` hits whenever that many
    /// memories match.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::InvalidInput`]: empty query, query over 4,096 bytes, limit outside 1..=100.
    /// * [`crate::ErrorKind::NotFound`] (`space_not_found`): unknown space.
    pub fn search(&self, q: &SearchQuery) -> Result<SearchResults> {
        let started = Instant::now();
        let mut errs = Vec::new();
        let given = q
            .query_embedding
            .as_ref()
            .and_then(|v| crate::embed::check_vector(v, &*self.core.config.embedder, &["query_embedding"], &mut errs));
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
        let rtx = self.core.db.read()?;
        // On PostgreSQL the space and the query's entities are read in one statement.
        let entities =
            q.mode == SearchMode::Hybrid && self.core.config.entity_boost > 0.0 && q.options.priors != Some(false);
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
                None => self.core.config.embedder.embed(&[q.query.as_str()], InputType::Query)?.pop(),
            },
        };
        let qterms = text::terms(&q.query);
        let mut qtf: BTreeMap<String, u32> = BTreeMap::new();
        for t in &qterms {
            *qtf.entry(t.clone()).or_default() += 1;
        }

        let cx = q.options.context_params.unwrap_or(self.core.config.context);
        let exp = q.options.expansion_params.unwrap_or(self.core.config.expansion);
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
            bm25: q.options.bm25.unwrap_or(self.core.config.bm25),
            filter: &q.filter,
        };
        let queried = self.core.query_index(rtx, &q.space_id, &needs)?;

        // Entities named in the query, with IDF weights, for the hybrid ranking signal.
        let query_entities: Vec<(String, f32)> =
            if mode == SearchMode::Hybrid && self.core.config.entity_boost > 0.0 && q.options.priors != Some(false) {
                let docs = match &queried {
                    Some(qi) => qi.entries.max(1),
                    None => self.core.index.read().spaces.get(&q.space_id).map_or(1, |si| si.catalog.len().max(1)),
                } as f32;
                self.graph()
                    .entities_in_tx(rtx, &q.space_id, &q.query)?
                    .into_iter()
                    .map(|(id, mentions)| (id, (1.0 + docs / mentions.max(1) as f32).ln()))
                    .collect()
            } else {
                Vec::new()
            };
        let state = self.core.index.read();
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
            bm25: q.options.bm25.unwrap_or(self.core.config.bm25),
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
        let gamma = q.options.vector_context.unwrap_or_else(|| self.core.config.effective_vector_context());
        let blend = if gamma > 0.0 && si.has_sequences() { gamma } else { 0.0 };
        // A larger space in the database index mode read the vectors of its vector candidates only: fusion needs
        // those of the lexical ones too, and the blend those of two rings of neighbours.
        let read_vectors = match (&queried, qv) {
            (Some(qi), Some(_)) if !qi.whole && (mode == SearchMode::Hybrid || blend > 0.0) => {
                let wanted = vectors_wanted(&si.catalog, &lexical, &vector, blend > 0.0);
                Some(self.core.union_vectors(rtx, &q.space_id, &wanted)?)
            }
            _ => None,
        };
        let vectors = read_vectors.as_ref().unwrap_or(&si.vectors);
        let vector_side = VectorSide { vectors, catalog: &si.catalog, qv, blend, memo: Default::default() };
        let cosines = |docs: &[u64]| vector_side.cosines(docs);
        if blend > 0.0 && !vector.is_empty() {
            vector = rank_blended(&si.catalog, &vector, depth, &accept, &cosines);
        }

        let mut fused: Vec<Fused> = match mode {
            SearchMode::Hybrid => {
                let fusion = q.fusion.unwrap_or_else(|| self.core.config.effective_fusion());
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

        let graph = self.core.graph.read();
        let ranks = match &queried {
            Some(qi) => qi.ranks.as_ref(),
            None => graph.memory_rank.get(&q.space_id),
        };
        self.apply_priors(q, si, rtx, &mut fused, depth, &query_entities, ranks, mode)?;
        if q.options.expand_neighbours.unwrap_or(true) {
            context::expand(&mut fused, &si.catalog, exp, depth, &accept);
        }
        // After expansion: a question first passes its score on to its reply, then ranks below it.
        let qp = q.options.question_penalty.unwrap_or(self.core.config.question_penalty);
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
            let w = w.min(super::types::MAX_CONTEXT_WINDOW);
            let mut nb = Vec::new();
            // The database index mode reads the hits' neighbours for it.
            let read = match db_mode {
                true => {
                    let docnos: Vec<u64> = hits.iter().filter_map(|h| si.catalog.docno_of(&h.view.memory.id)).collect();
                    Some(self.core.context_catalog(rtx, &q.space_id, &docnos, w)?)
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
        let external = self.core.config.embedder.external();
        let awaiting = if external {
            0
        } else {
            self.core
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
                self.core.config.embedder.name()
            );
            (SearchMode::Lexical, Some(why))
        } else if q.mode != SearchMode::Lexical && awaiting > 0 {
            let why = format!(
                "re-embedding in progress: {awaiting} memories of this space await vectors from {}; \
                 results are ranked by BM25 alone until it finishes",
                self.core.config.embedder.name()
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
        let decay_w = self.core.config.decay_weight.clamp(0.0, 1.0);
        let pr_w = self.core.config.pagerank_weight.clamp(0.0, 1.0);
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
                    f.score += self.core.config.entity_boost * matched_w / total.max(f32::EPSILON);
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
        let tb = q.options.temporal_boost.unwrap_or(self.core.config.temporal_boost);
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
            let text = source::source_text(&rtx)?.get(sid)?.map(|v| v.value().to_vec()).unwrap_or_default();
            let text = String::from_utf8_lossy(&text);
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

/// Documents with a score, as `(docno, score)`.
type Scored = Vec<(u64, f32)>;

/// BM25 settings of one search.
struct Lexical {
    bm25: bm25::Bm25Params,
    cx: context::ContextParams,
    /// Documents in the space, and their average length in terms.
    docs: u64,
    avg: f32,
}

/// How a document's lexical score is found after the candidates were chosen (for the union that hybrid fusion
/// scores): from the query's lists (pruned search), or from every matching document's score (the exhaustive
/// expanded scoring of a window with no materialised postings), sorted by docno.
enum LexScorer<'a> {
    Lists(Vec<bm25::ScoredList<'a>>, bm25::Combine),
    All(Scored),
}

impl LexScorer<'_> {
    fn score(&self, params: bm25::Bm25Params, docno: u64) -> f32 {
        match self {
            LexScorer::Lists(lists, combine) => bm25::score_doc(params, lists, *combine, docno),
            LexScorer::All(all) => all.binary_search_by_key(&docno, |x| x.0).map_or(0.0, |i| all[i].1),
        }
    }
}

/// Best score first, ties to the smaller docno: the order of every ranked list.
fn best_first(a: &(u64, f32), b: &(u64, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The previous and next memory of each of `docs` in its thread or source, without repeats (none in a space
/// without sequences).
fn neighbours_of(catalog: &SpaceCatalog, docs: &[u64]) -> Vec<u64> {
    let mut nb = Vec::new();
    let mut out = Vec::new();
    for d in docs {
        catalog.neighbours(*d, 1, &mut nb);
        out.extend(nb.iter().map(|x| x.0));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The documents whose vectors a partial read (database index mode) must hold for fusion and, when `blend`, the
/// context-blended cosine: the candidates of both lists and two rings of their neighbours (a candidate's
/// neighbour may enter the vector list, and its own blend reads its neighbours).
fn vectors_wanted(catalog: &SpaceCatalog, lexical: &[(u64, f32)], vector: &[(u64, f32)], blend: bool) -> Vec<u64> {
    let mut wanted: Vec<u64> = lexical.iter().chain(vector).map(|(d, _)| *d).collect();
    if blend {
        let ring = neighbours_of(catalog, &wanted);
        let second = neighbours_of(catalog, &ring);
        wanted.extend(ring.into_iter().chain(second));
    }
    wanted
}

/// The vector side's score of documents: the context-blended cosine at `blend` ([`context::context_cosines`]),
/// or 0.0 for all without a query vector.
struct VectorSide<'a> {
    vectors: &'a crate::index::vector::SpaceVectors,
    catalog: &'a SpaceCatalog,
    qv: Option<&'a [f32]>,
    blend: f32,
    /// Blended cosines computed so far. Ranking the vector list and fusion both ask for the vector candidates'
    /// (and a blended cosine reads its neighbours' too): each document's is computed once.
    memo: std::cell::RefCell<rustc_hash::FxHashMap<u64, f32>>,
}

impl VectorSide<'_> {
    /// The scores of `docs`, in their order.
    fn cosines(&self, docs: &[u64]) -> Vec<f32> {
        let Some(qv) = self.qv else { return vec![0.0; docs.len()] };
        if self.blend <= 0.0 {
            return context::context_cosines(self.vectors, self.catalog, qv, docs, 0.0);
        }
        let mut memo = self.memo.borrow_mut();
        let missing: Vec<u64> = docs.iter().copied().filter(|d| !memo.contains_key(d)).collect();
        let got = context::context_cosines(self.vectors, self.catalog, qv, &missing, self.blend);
        memo.extend(missing.into_iter().zip(got));
        docs.iter().map(|d| memo.get(d).copied().unwrap_or(0.0)).collect()
    }
}

/// The vector list ranked again by the context-blended cosine (`cosines`): its candidates and their neighbours
/// that pass `accept`, the best `depth` of them, best first.
fn rank_blended(
    catalog: &SpaceCatalog,
    vector: &[(u64, f32)],
    depth: usize,
    accept: &dyn Fn(u64) -> bool,
    cosines: &dyn Fn(&[u64]) -> Vec<f32>,
) -> Scored {
    let mut docs: Vec<u64> = vector.iter().map(|(d, _)| *d).collect();
    docs.extend(neighbours_of(catalog, &docs).into_iter().filter(|d| accept(*d)));
    docs.sort_unstable();
    docs.dedup();
    let scored: Scored = docs.iter().copied().zip(cosines(&docs)).collect();
    first_in_order(scored, depth, best_first)
}

/// The BM25 candidates with their scorer ([`lexical_candidates`]; none without `terms`) and the vector
/// candidates (none without a non-zero `qv`), each best first and at most `depth` long. Both at once in a space of
/// [`PARALLEL_MIN_DOCS`] memories or more: the vector side on the search pool, BM25 on this thread. `hint`: the
/// number of documents the filter accepts, when it is not the default one.
#[allow(clippy::too_many_arguments)]
fn rankings<'a>(
    si: &'a super::SpaceIndex,
    q: &SearchQuery,
    mode: SearchMode,
    terms: &[(&str, u32)],
    lex: &Lexical,
    qv: Option<&[f32]>,
    depth: usize,
    accept: &(dyn Fn(u64) -> bool + Sync),
    hint: Option<usize>,
) -> ((Scored, LexScorer<'a>), Scored) {
    let lexical_side = || {
        if terms.is_empty() {
            (Vec::new(), LexScorer::All(Vec::new()))
        } else {
            lexical_candidates(si, q, mode, terms, lex, depth, accept)
        }
    };
    let vector_side = || -> Scored {
        let Some(qv) = qv else { return Vec::new() };
        si.vectors.search(qv, depth, accept, hint).into_iter().map(|h| (h.docno, h.score)).collect()
    };
    let both = (!terms.is_empty() && qv.is_some() && si.catalog.len() >= PARALLEL_MIN_DOCS)
        .then(|| fork(lexical_side, vector_side))
        .flatten();
    both.unwrap_or_else(|| (lexical_side(), vector_side()))
}

/// BM25 candidates (best first, at most `depth`, all passing `accept`), context-expanded when the space holds
/// sequences and the query does not turn it off (`docs/retrieval.md`), and the scorer of any other document.
/// With the store's window the expanded postings are materialised and both forms are pruned
/// ([`bm25::top_k`], MaxScore); another window scores every posting and its neighbours
/// ([`context::score_context`]).
fn lexical_candidates<'a>(
    si: &'a super::SpaceIndex,
    q: &SearchQuery,
    mode: SearchMode,
    terms: &[(&str, u32)],
    lex: &Lexical,
    depth: usize,
    accept: &(dyn Fn(u64) -> bool + Sync),
) -> (Scored, LexScorer<'a>) {
    let (bm25p, cx) = (lex.bm25, lex.cx);
    let expanded_on =
        q.options.context_bm25.unwrap_or(true) && cx.is_on() && si.has_sequences() && mode != SearchMode::Vector;
    let beta = cx.blend.clamp(0.0, 1.0);
    if !expanded_on {
        let lists = si.lexicon.scored(terms);
        let top = top_k(bm25p, &lists, bm25::Combine::Own, depth, accept);
        return (top, LexScorer::Lists(lists, bm25::Combine::Own));
    }
    if let Some(x) = si.expanded_for(cx.window) {
        let combine = if beta >= 1.0 { bm25::Combine::Expanded } else { bm25::Combine::Blend(beta) };
        let lists = x.scored(&si.lexicon, terms, beta < 1.0);
        let top = top_k(bm25p, &lists, combine, depth, accept);
        return (top, LexScorer::Lists(lists, combine));
    }
    // Another window than the materialised one (an ablation): every posting and its neighbours.
    let postings: Vec<(u32, &[Posting])> = terms.iter().map(|(t, n)| (*n, si.lexicon.postings(t))).collect();
    let avg = si.expanded_avg_len(cx.window);
    let expanded = context::score_context(bm25p, avg, &postings, &si.catalog, &si.lexicon, cx.window, accept);
    let all: Scored = if beta >= 1.0 {
        expanded
    } else {
        let own = bm25::score(bm25p, lex.docs, lex.avg, &postings, accept);
        // Both lists are sorted by docno, and every document with an own match also has an expanded one (its
        // own terms are in it): one merge.
        let mut own = own.into_iter().peekable();
        expanded
            .into_iter()
            .map(|(d, e)| {
                let o = match own.peek() {
                    Some((od, os)) if *od == d => {
                        let v = *os;
                        own.next();
                        v
                    }
                    _ => 0.0,
                };
                (d, (1.0 - beta) * o + beta * e)
            })
            .collect()
    };
    (first_in_order(all.clone(), depth, best_first), LexScorer::All(all))
}

/// [`bm25::top_k`], split by docno into parts when its lists are long ([`bm25::split_docnos`]) and a pool thread
/// is free or held by this search ([`fork`]): this thread and the pool's take the parts in turn, each pruning by
/// the best k-th score any part has found ([`bm25::SplitQuery`]). The result is the same.
fn top_k(
    params: bm25::Bm25Params,
    lists: &[bm25::ScoredList<'_>],
    combine: bm25::Combine,
    k: usize,
    accept: &(dyn Fn(u64) -> bool + Sync),
) -> Scored {
    let split = bm25::split_docnos(lists, bm25::SPLIT_PARTS).map(|at| bm25::SplitQuery::new(&at));
    let run = |q: &bm25::SplitQuery| q.run(params, lists, combine, k, accept);
    match split.as_ref().and_then(|q| fork(|| run(q), || run(q))) {
        Some((mine, theirs)) => bm25::SplitQuery::merge(mine, theirs, k),
        None => bm25::top_k(params, lists, combine, k, accept),
    }
}

/// Hybrid fusion: the union of both candidate lists is scored on both sides, so that a document is not
/// penalised for falling just outside one list's depth, then fused (`crate::index::fusion`).
/// `cosines` gives the vector side's score of each document of a list (the context-blended cosine, or 0.0 for
/// all without a query vector).
fn fuse_union(
    lexical: &[(u64, f32)],
    vector: &[(u64, f32)],
    scorer: &LexScorer<'_>,
    bm25p: bm25::Bm25Params,
    cosines: &dyn Fn(&[u64]) -> Vec<f32>,
    fusion: crate::index::fusion::Fusion,
) -> Vec<Fused> {
    // Score the union of both candidate lists on both sides, so that a document is not penalised
    // for falling just outside one list's depth.
    let mut union: Vec<u64> = lexical.iter().chain(vector).map(|(d, _)| *d).collect();
    union.sort_unstable();
    union.dedup();
    let lex_full: Vec<(u64, f32)> = union.iter().map(|d| (*d, scorer.score(bm25p, *d))).collect();
    let vec_full: Vec<(u64, f32)> = union.iter().copied().zip(cosines(&union)).collect();
    let by_score = |mut l: Vec<(u64, f32)>| {
        l.sort_by(best_first);
        l
    };
    fuse(&by_score(lex_full), &by_score(vec_full), fusion)
}

#[cfg(test)]
mod tests {
    use super::{fork, search_pool};
    use std::sync::atomic::Ordering;

    /// Both halves' results come back in place, whether the pool or this thread ran the second half: nested
    /// (a hybrid search's BM25 split inside its rankings' fork) and from many threads at once (a daemon under
    /// load, where most forks find the pool busy and are refused), and the pool's busy count returns to zero.
    #[test]
    fn fork_returns_both_halves_nested_and_under_load() {
        let work = |seed: u64| (0..20_000u64).fold(seed, |a, x| a.wrapping_mul(31).wrapping_add(x));
        let Some(sp) = search_pool() else { return }; // one core: nothing to fork to
        assert_eq!(fork(|| work(1), || work(2)), Some((work(1), work(2))));
        // Nested: the inner fork is not refused, though the outer one holds the pool's only thread on two cores.
        let (outer, inner) = fork(|| fork(|| work(3), || vec![work(4)]), || vec![work(5)]).expect("a free thread");
        assert_eq!(outer, Some((work(3), vec![work(4)])));
        assert_eq!(inner, vec![work(5)]);
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..8u64)
                .map(|t| {
                    s.spawn(move || {
                        let alone = |i: u64| (work(t * 100 + i), work(i));
                        (0..50u64)
                            .map(|i| fork(|| work(t * 100 + i), || work(i)).unwrap_or_else(|| alone(i)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for (t, run) in runs.into_iter().enumerate() {
                let got = run.join().expect("a forking thread");
                let want: Vec<_> = (0..50u64).map(|i| (work(t as u64 * 100 + i), work(i))).collect();
                assert_eq!(got, want);
            }
        });
        assert_eq!(sp.busy.load(Ordering::Acquire), 0);
        assert_eq!(sp.pool.current_num_threads(), rayon::current_num_threads() - 1);
    }
}
