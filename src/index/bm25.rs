//! Okapi BM25 scoring (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
//! Foundations and Trends in IR 3(4), 2009) over posting lists read from the store.
//!
//! `idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`, `score(d) = Σ idf(t) · tf·(k1+1) / (tf + k1·(1 - b + b·|d|/avgdl))`.

/// BM25 parameters. Defaults: `k1` 1.2, `b` 0.75.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation.
    pub k1: f32,
    /// Length normalisation, 0..=1.
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// One posting: document number, term frequency in it, and the document's length in terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Posting {
    /// Document number.
    pub docno: u64,
    /// Occurrences of the term in the document.
    pub tf: u32,
    /// Terms in the document.
    pub doc_len: u32,
}

impl Posting {
    /// Packs `tf` and `doc_len` into the stored `u64` value (tf in the high half).
    pub fn pack(tf: u32, doc_len: u32) -> u64 {
        (u64::from(tf) << 32) | u64::from(doc_len)
    }

    /// The posting of `docno` with a packed value.
    pub fn unpack(docno: u64, packed: u64) -> Self {
        Posting { docno, tf: (packed >> 32) as u32, doc_len: packed as u32 }
    }
}

/// BM25 of one document given the query's posting lists (each sorted by docno), for documents found by another
/// ranking. Same formula and collection statistics as [`score`].
pub fn score_one(params: Bm25Params, n_docs: u64, avg_len: f32, postings: &[(u32, &[Posting])], docno: u64) -> f32 {
    let n = n_docs.max(1) as f32;
    let avg = if avg_len > 0.0 { avg_len } else { 1.0 };
    let mut s = 0.0;
    for (qtf, list) in postings {
        if let Ok(i) = list.binary_search_by_key(&docno, |p| p.docno) {
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            let p = list[i];
            let tf = p.tf as f32;
            let norm = params.k1 * (1.0 - params.b + params.b * p.doc_len as f32 / avg);
            s += idf * tf * (params.k1 + 1.0) / (tf + norm) * (*qtf as f32);
        }
    }
    s
}

/// Scores every document of `postings` (one list per distinct query term, sorted by docno, with the term's count
/// in the query) that `accept` passes. `n_docs` and `avg_len` describe the whole collection of the space, so
/// filters do not distort idf. Returns `(docno, score)` sorted by docno.
///
/// Document-at-a-time: the lists are merged in docno order with one cursor each, so scoring reads memory
/// sequentially and needs no hash map (a hash map of 50,000 scores made this memory-bound).
pub fn score(
    params: Bm25Params,
    n_docs: u64,
    avg_len: f32,
    postings: &[(u32, &[Posting])],
    accept: &dyn Fn(u64) -> bool,
) -> Vec<(u64, f32)> {
    let n = n_docs.max(1) as f32;
    let avg = if avg_len > 0.0 { avg_len } else { 1.0 };
    let idf: Vec<f32> = postings
        .iter()
        .map(|(_, list)| {
            let df = list.len() as f32;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let mut cursor = vec![0usize; postings.len()];
    let mut out = Vec::new();
    loop {
        let mut next = u64::MAX;
        for (i, (_, list)) in postings.iter().enumerate() {
            if let Some(p) = list.get(cursor[i]) {
                next = next.min(p.docno);
            }
        }
        if next == u64::MAX {
            break;
        }
        let mut s = 0.0;
        for (i, (qtf, list)) in postings.iter().enumerate() {
            if let Some(p) = list.get(cursor[i]).filter(|p| p.docno == next) {
                let tf = p.tf as f32;
                let norm = params.k1 * (1.0 - params.b + params.b * p.doc_len as f32 / avg);
                s += idf[i] * tf * (params.k1 + 1.0) / (tf + norm) * (*qtf as f32);
                cursor[i] += 1;
            }
        }
        if accept(next) {
            out.push((next, s));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_terms_and_shorter_documents_score_higher() {
        let p = |docno, tf, doc_len| Posting { docno, tf, doc_len };
        let get = |v: &[(u64, f32)], d: u64| v.iter().find(|x| x.0 == d).map_or(0.0, |x| x.1);
        let common_list = [p(1, 1, 10), p(2, 1, 10), p(3, 1, 10)];
        let rare_list = [p(2, 1, 10)];
        let lists: [(u32, &[Posting]); 2] = [(1, &common_list), (1, &rare_list)];
        let s = score(Bm25Params::default(), 10, 10.0, &lists, &|_| true);
        assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert!(get(&s, 2) > get(&s, 1));
        let short = score(Bm25Params::default(), 10, 10.0, &[(1, &[p(1, 1, 5), p(2, 1, 20)][..])], &|_| true);
        assert!(get(&short, 1) > get(&short, 2));
        let filtered = score(Bm25Params::default(), 10, 10.0, &[(1, &[p(1, 1, 5), p(2, 1, 20)][..])], &|d| d == 2);
        assert_eq!(filtered.len(), 1);
        assert_eq!(Posting::unpack(7, Posting::pack(3, 99)), p(7, 3, 99));
        assert!((score_one(Bm25Params::default(), 10, 10.0, &lists, 2) - get(&s, 2)).abs() < 1e-6);
        assert_eq!(score_one(Bm25Params::default(), 10, 10.0, &lists, 9), 0.0);
    }
}
