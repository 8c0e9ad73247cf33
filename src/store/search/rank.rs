//! The rankings of one search: BM25 candidates and scores, vector cosines, neighbour expansion, top-k and
//! fusion of the two lists.

use super::*;

/// Documents with a score, as `(docno, score)`.
pub(super) type Scored = Vec<(u64, f32)>;

/// BM25 settings of one search.
pub(super) struct Lexical {
    pub(super) bm25: bm25::Bm25Params,
    pub(super) cx: context::ContextParams,
    /// Documents in the space, and their average length in terms.
    pub(super) docs: u64,
    pub(super) avg: f32,
}

/// How a document's lexical score is found after the candidates were chosen (for the union that hybrid fusion
/// scores): from the query's lists (pruned search), or from every matching document's score (the exhaustive
/// expanded scoring of a window with no materialised postings), sorted by docno.
pub(super) enum LexScorer<'a> {
    Lists(Vec<bm25::ScoredList<'a>>, bm25::Combine),
    All(Scored),
}

impl LexScorer<'_> {
    pub(super) fn score(&self, params: bm25::Bm25Params, docno: u64) -> f32 {
        match self {
            LexScorer::Lists(lists, combine) => bm25::score_doc(params, lists, *combine, docno),
            LexScorer::All(all) => all.binary_search_by_key(&docno, |x| x.0).map_or(0.0, |i| all[i].1),
        }
    }

    /// [`LexScorer::score`] of each of `docnos`, in their order ([`bm25::score_docs`]: list by list).
    pub(super) fn score_many(&self, params: bm25::Bm25Params, docnos: &[u64]) -> Vec<f32> {
        match self {
            LexScorer::Lists(lists, combine) => bm25::score_docs(params, lists, *combine, docnos),
            LexScorer::All(_) => docnos.iter().map(|d| self.score(params, *d)).collect(),
        }
    }
}

/// Best score first, ties to the smaller docno: the order of every ranked list.
pub(super) fn best_first(a: &(u64, f32), b: &(u64, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The previous and next memory of each of `docs` in its thread or source, without repeats (none in a space
/// without sequences).
pub(super) fn neighbours_of(catalog: &SpaceCatalog, docs: &[u64]) -> Vec<u64> {
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
pub(super) fn vectors_wanted(
    catalog: &SpaceCatalog,
    lexical: &[(u64, f32)],
    vector: &[(u64, f32)],
    blend: bool,
) -> Vec<u64> {
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
pub(super) struct VectorSide<'a> {
    pub(super) vectors: &'a crate::index::vector::SpaceVectors,
    pub(super) catalog: &'a SpaceCatalog,
    pub(super) qv: Option<&'a [f32]>,
    pub(super) blend: f32,
    /// Blended cosines computed so far. Ranking the vector list and fusion both ask for the vector candidates'
    /// (and a blended cosine reads its neighbours' too): each document's is computed once.
    pub(super) memo: std::cell::RefCell<rustc_hash::FxHashMap<u64, f32>>,
}

impl VectorSide<'_> {
    /// The scores of `docs`, in their order.
    pub(super) fn cosines(&self, docs: &[u64]) -> Vec<f32> {
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
pub(super) fn rank_blended(
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
pub(super) fn rankings<'a>(
    si: &'a crate::store::SpaceIndex,
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
pub(super) fn lexical_candidates<'a>(
    si: &'a crate::store::SpaceIndex,
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
pub(super) fn top_k(
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
pub(super) fn fuse_union(
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
    let lex_full = lexical_scores(lexical, &union, scorer, bm25p);
    let vec_full: Vec<(u64, f32)> = union.iter().copied().zip(cosines(&union)).collect();
    let by_score = |mut l: Vec<(u64, f32)>| {
        l.sort_by(best_first);
        l
    };
    fuse(&by_score(lex_full), &by_score(vec_full), fusion)
}

/// The lexical score of each of `union` (sorted by docno), as `(docno, score)` in that order: a document of the
/// `lexical` candidates keeps the score its ranking gave it (the scorer's, to the bit: [`bm25::top_k`] scores
/// as [`bm25::score_doc`] does), and only the others are scored ([`LexScorer::score_many`]). At depth 50 that
/// halves fusion's look-ups in the query's posting lists.
fn lexical_scores(lexical: &[(u64, f32)], union: &[u64], scorer: &LexScorer<'_>, bm25p: bm25::Bm25Params) -> Scored {
    let mut known: Scored = lexical.to_vec();
    known.sort_unstable_by_key(|x| x.0);
    // Each document's known score, looked up once.
    let found: Vec<Option<f32>> =
        union.iter().map(|d| known.binary_search_by_key(d, |x| x.0).ok().map(|i| known[i].1)).collect();
    let rest: Vec<u64> = union.iter().zip(&found).filter(|(_, s)| s.is_none()).map(|(d, _)| *d).collect();
    let mut scored = scorer.score_many(bm25p, &rest).into_iter();
    union.iter().zip(found).map(|(&d, s)| (d, s.or_else(|| scored.next()).unwrap_or(0.0))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_reuses_the_lexical_candidates_scores_and_scores_the_rest() {
        // Every matching document's score, by docno; 9 matches nothing.
        let all: Scored = vec![(1, 0.5), (3, 2.0), (4, 1.25), (7, 0.75)];
        let scorer = LexScorer::All(all.clone());
        let params = bm25::Bm25Params::default();
        // The lexical candidates, best first; the union adds vector candidates 1, 4 and 9.
        let lexical: Scored = vec![(3, 2.0), (7, 0.75)];
        let union = [1, 3, 4, 7, 9];
        let got = lexical_scores(&lexical, &union, &scorer, params);
        let want: Scored = union.iter().map(|d| (*d, scorer.score(params, *d))).collect();
        assert_eq!(got, want);
        assert_eq!(got, vec![(1, 0.5), (3, 2.0), (4, 1.25), (7, 0.75), (9, 0.0)]);
        // No lexical candidates: all are scored.
        assert_eq!(lexical_scores(&[], &union, &scorer, params), want);
    }
}
