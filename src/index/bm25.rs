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

/// Inverse document frequency `ln(1 + (N - df + 0.5) / (df + 0.5))` of a term in `df` of `n` documents.
#[inline]
pub fn idf(n: f32, df: usize) -> f32 {
    let df = df as f32;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// One term's share of a document's BM25: `idf · tf·(k1+1) / (tf + k1·(1 - b + b·len/avg)) · qtf`. Every
/// scorer of this module computes it with this one expression, so that pruned and exhaustive scores are equal
/// to the bit.
#[inline]
pub fn term_score(params: Bm25Params, idf: f32, qtf: u32, tf: u32, doc_len: u32, avg: f32) -> f32 {
    let tf = tf as f32;
    let norm = params.k1 * (1.0 - params.b + params.b * doc_len as f32 / avg);
    idf * tf * (params.k1 + 1.0) / (tf + norm) * (qtf as f32)
}

/// BM25 of one document given the query's posting lists (each sorted by docno), for documents found by another
/// ranking. Same formula and collection statistics as [`score`].
pub fn score_one(params: Bm25Params, n_docs: u64, avg_len: f32, postings: &[(u32, &[Posting])], docno: u64) -> f32 {
    let n = n_docs.max(1) as f32;
    let avg = if avg_len > 0.0 { avg_len } else { 1.0 };
    let mut s = 0.0;
    for (qtf, list) in postings {
        if let Ok(i) = list.binary_search_by_key(&docno, |p| p.docno) {
            let p = list[i];
            s += term_score(params, idf(n, list.len()), *qtf, p.tf, p.doc_len, avg);
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
    let idfs: Vec<f32> = postings.iter().map(|(_, list)| idf(n, list.len())).collect();
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
                s += term_score(params, idfs[i], *qtf, p.tf, p.doc_len, avg);
                cursor[i] += 1;
            }
        }
        if accept(next) {
            out.push((next, s));
        }
    }
    out
}

/// What a posting list's best share of a score can be: for each tf from 1 to 7 the smallest document length
/// among its postings with that tf, and the smallest among those with a tf of 8 or more with the largest tf.
/// BM25 rises with tf and falls with length, so the best share is at one of these eight points; a bound kept
/// this way is far tighter than (largest tf, smallest length) taken apart. Insertions keep it exact; a removal
/// leaves it as it was, still a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TfBounds {
    /// `min_len[i]`: smallest length with tf `i + 1` (`i` < 7) or tf 8 and more (`i` = 7); `u32::MAX`: none.
    min_len: [u32; 8],
    /// Largest tf.
    max_tf: u32,
}

impl Default for TfBounds {
    fn default() -> Self {
        TfBounds { min_len: [u32::MAX; 8], max_tf: 0 }
    }
}

impl TfBounds {
    /// Takes a posting with `tf` in a document of `len` terms into account.
    pub fn add(&mut self, tf: u32, len: u32) {
        let i = (tf.max(1) as usize - 1).min(7);
        self.min_len[i] = self.min_len[i].min(len);
        self.max_tf = self.max_tf.max(tf);
    }

    /// The bounds of `postings`, exact.
    pub fn of(postings: &[Posting]) -> Self {
        let mut b = TfBounds::default();
        for p in postings {
            b.add(p.tf, p.doc_len);
        }
        b
    }

    /// The largest [`term_score`] any posting covered can have: 0 for no posting.
    pub fn max_score(&self, params: Bm25Params, idf: f32, qtf: u32, avg: f32) -> f32 {
        let mut best = 0.0f32;
        for (i, len) in self.min_len.iter().enumerate() {
            if *len != u32::MAX {
                let tf = if i < 7 { i as u32 + 1 } else { self.max_tf };
                best = best.max(term_score(params, idf, qtf, tf, *len, avg));
            }
        }
        best
    }
}

/// One posting list of a pruned top-k query ([`top_k`]).
#[derive(Debug, Clone, Copy)]
pub struct ScoredList<'a> {
    /// Postings sorted by docno.
    pub list: &'a [Posting],
    /// The term's idf in this collection.
    pub idf: f32,
    /// The term's count in the query.
    pub qtf: u32,
    /// Average document length of this collection, in terms.
    pub avg: f32,
    /// Bounds of the list's postings.
    pub bounds: TfBounds,
    /// Bounds per docno block ([`blocks_of`]; at least as large as the block's postings need), or empty: the
    /// whole list's bounds serve in every block.
    pub blocks: &'a [Block],
    /// The sum it adds to: [`Part::Own`] or [`Part::Expanded`].
    pub part: Part,
    /// For a list of expanded postings, the term's own postings ([`Paired`]): a blended score reads a
    /// document's own share there, walked in step with this list.
    pub paired: Option<Paired<'a>>,
}

/// The own side of a list of expanded postings: the term's own postings (a subset of the expanded list's
/// documents: a document's own terms are in its expanded text), and the own collection's statistics and bounds
/// for the term. A document the own list does not hold has an own share of 0.
#[derive(Debug, Clone, Copy)]
pub struct Paired<'a> {
    /// The term's own postings (tf and length in the document's own text), sorted by docno.
    pub own: &'a [Posting],
    /// The term's idf in the own collection.
    pub idf: f32,
    /// Average own document length.
    pub avg: f32,
    /// Bounds of the term's own postings.
    pub bounds: TfBounds,
    /// The same per docno block, or empty.
    pub blocks: &'a [Block],
}

impl ScoredList<'_> {
    /// The list's weighted shares of the posting at `i`: `(own, expanded)` sums' parts, and the weighted total.
    /// The own side is found by binary search (one document's score, [`score_doc`]).
    #[inline]
    fn shares(&self, params: Bm25Params, combine: Combine, i: usize) -> (f32, f32) {
        let mut own_at = self.paired.as_ref().map_or(0, |o| {
            let d = self.list.get(i).map_or(u64::MAX, |p| p.docno);
            o.own.partition_point(|q| q.docno < d)
        });
        self.shares_with(params, combine, &Impacts::NONE, i, &mut own_at)
    }

    /// [`ScoredList::shares`], each [`term_score`] read from `impacts` where its table holds the posting's
    /// (tf, length): the same bits. `own_at` is the cursor into the own postings ([`Paired::own`]): walked
    /// forward to the posting's docno and past it, so calls in docno order walk the own list once (calls must
    /// come in increasing docno order for one cursor; a caller that skips far moves the cursor itself, as a
    /// scan's window skips do).
    ///
    /// Always inlined: the own cursor's walk made it too large for the compiler's `#[inline]` heuristics, and a
    /// call per candidate posting made plain lexical search at 1M about 9 % slower (six alternating pairs; a plain
    /// list returns before the walk).
    #[inline(always)]
    fn shares_with(
        &self,
        params: Bm25Params,
        combine: Combine,
        impacts: &Impacts,
        i: usize,
        own_at: &mut usize,
    ) -> (f32, f32) {
        let p = self.list[i];
        let s = table_score(&impacts.main, params, self.idf, self.qtf, p.tf, p.doc_len, self.avg);
        match (self.part, &self.paired) {
            (Part::Own, _) => (s, 0.0),
            (Part::Expanded, None) => (0.0, s),
            (Part::Expanded, Some(o)) => {
                if combine.weight(Part::Own) <= 0.0 {
                    return (0.0, s);
                }
                // Walked in step, the own cursor is at the first own posting from this docno on, and moves past a
                // match: one compare a posting. It is behind only after documents a look-up passed over (a scan
                // moves it past skipped windows with the expanded cursor): it then walks forward, as the expanded
                // cursor does. The own postings it passes are a subset of the expanded ones the look-up passed, in
                // one window, so the walk reads sequential memory; a search (`gallop`) stalled on each probe, and
                // was most of this function's time in threads of 20 at 1M.
                while o.own.get(*own_at).is_some_and(|q| q.docno < p.docno) {
                    *own_at += 1;
                }
                let own = match o.own.get(*own_at) {
                    Some(q) if q.docno == p.docno => {
                        *own_at += 1;
                        if q.tf > 0 {
                            table_score(&impacts.own, params, o.idf, self.qtf, q.tf, q.doc_len, o.avg)
                        } else {
                            0.0
                        }
                    }
                    _ => 0.0,
                };
                (own, s)
            }
        }
    }
}

/// Which of the two sums of a blended score a list adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The document's own text.
    Own,
    /// The context-expanded text (`crate::index::context`).
    Expanded,
}

/// How the two sums make a document's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Combine {
    /// The own sum (plain BM25).
    Own,
    /// The expanded sum.
    Expanded,
    /// `(1 - β) · own + β · expanded`, β in (0, 1).
    Blend(f32),
}

impl Combine {
    fn weight(self, part: Part) -> f32 {
        match (self, part) {
            (Combine::Own, Part::Own) | (Combine::Expanded, Part::Expanded) => 1.0,
            (Combine::Blend(b), Part::Own) => 1.0 - b,
            (Combine::Blend(b), Part::Expanded) => b,
            _ => 0.0,
        }
    }

    /// The score of a document from its two sums.
    #[inline]
    pub fn score(self, own: f32, expanded: f32) -> f32 {
        match self {
            Combine::Own => own,
            Combine::Expanded => expanded,
            Combine::Blend(b) => (1.0 - b) * own + b * expanded,
        }
    }
}

/// Relative slack added to every upper bound, so that float rounding (sums in another order, the bound's
/// own arithmetic) never lets a bound fall below a score it should cover.
const BOUND_SLACK: f32 = 1e-4;

/// Documents of a block, as a power of two: block `b` holds docnos `b << BLOCK_SHIFT ..= ((b + 1) << BLOCK_SHIFT) - 1`.
pub const BLOCK_SHIFT: u32 = 10;

/// Term frequencies (1 to `TABLE_TF`) and document lengths (0 to `TABLE_LEN - 1`) whose [`term_score`] a long
/// list's [`Impacts`] hold.
const TABLE_TF: u32 = 4;
const TABLE_LEN: u32 = 512;
/// Lists at least this long get [`Impacts`] in [`top_k`]: a table costs about as much as scoring 2,000 postings.
const TABLE_FROM: usize = 16_384;

/// The [`term_score`] tables of one long list of a [`top_k`] query: for every tf in `1..=TABLE_TF` and length in
/// `0..TABLE_LEN`, at `(tf - 1) * TABLE_LEN + length` (8 KiB each). `main` is the list's own score, `own` the
/// own side of a [`Paired`] list; empty: none. Each entry is computed by the one expression, so a score read
/// from a table equals the computed one to the bit (Lucene caches BM25's length normalisation per norm byte
/// the same way): a posting costs a load instead of two divisions.
#[derive(Debug, Default)]
struct Impacts {
    main: Vec<f32>,
    own: Vec<f32>,
}

impl Impacts {
    const NONE: Impacts = Impacts { main: Vec::new(), own: Vec::new() };

    /// The tables of `l` when it is at least [`TABLE_FROM`] long, else none.
    fn of(params: Bm25Params, combine: Combine, l: &ScoredList<'_>) -> Self {
        if l.list.len() < TABLE_FROM {
            return Impacts::NONE;
        }
        let table = |idf: f32, avg: f32| -> Vec<f32> {
            let mut out = Vec::with_capacity((TABLE_TF * TABLE_LEN) as usize);
            for tf in 1..=TABLE_TF {
                out.extend((0..TABLE_LEN).map(|len| term_score(params, idf, l.qtf, tf, len, avg)));
            }
            out
        };
        let own = match &l.paired {
            Some(o) if combine.weight(Part::Own) > 0.0 => table(o.idf, o.avg),
            _ => Vec::new(),
        };
        Impacts { main: table(l.idf, l.avg), own }
    }
}

/// [`term_score`] of `(tf, len)`, read from `table` ([`Impacts`]) when it holds them.
#[inline]
fn table_score(table: &[f32], params: Bm25Params, idf: f32, qtf: u32, tf: u32, len: u32, avg: f32) -> f32 {
    let t = tf.wrapping_sub(1);
    let at = (t < TABLE_TF && len < TABLE_LEN).then(|| (t * TABLE_LEN + len) as usize);
    match at.and_then(|at| table.get(at)) {
        Some(s) => *s,
        _ => term_score(params, idf, qtf, tf, len, avg),
    }
}

/// Docnos in one window of [`top_k`] (a block), so at most this many candidates.
const WINDOW: usize = 1 << BLOCK_SHIFT;

/// Lists shorter than this keep no block bounds: walking them costs less than skipping.
pub const BLOCKED_FROM: usize = 512;

/// One docno block of a posting list (a skip entry, as in Lucene's block-max skip data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Block number: docnos `id << BLOCK_SHIFT ..= ((id + 1) << BLOCK_SHIFT) - 1`.
    pub id: u64,
    /// Bounds of the block's postings (at least as large as they need: a removal leaves them).
    pub bounds: TfBounds,
    /// Index in the list of the first posting whose docno is at least the block's first docno, so that a cursor
    /// jumps over whole blocks without a search.
    pub first: u32,
}

/// The blocks of `postings` (sorted by docno): one for every block that holds a posting, in block order.
pub fn blocks_of(postings: &[Posting]) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    for (i, p) in postings.iter().enumerate() {
        let b = p.docno >> BLOCK_SHIFT;
        match out.last_mut() {
            Some(last) if last.id == b => last.bounds.add(p.tf, p.doc_len),
            _ => {
                let mut bounds = TfBounds::default();
                bounds.add(p.tf, p.doc_len);
                out.push(Block { id: b, bounds, first: i as u32 });
            }
        }
    }
    out
}

/// The `k` best documents that `accept` passes, best first (score descending, then docno ascending), each with
/// its score: exactly what exhaustive scoring followed by a sort and a cut at `k` gives, scores equal to the bit,
/// without scoring every posting.
///
/// Dynamic pruning by MaxScore (Turtle and Flood, "Query evaluation: strategies and optimizations", Information
/// Processing & Management 31(6), 1995), a window at a time over docno windows with block-max bounds, as
/// Lucene's `MaxScoreBulkScorer` does (block-max indexes: Ding and Suel, SIGIR 2011). The docnos are cut in
/// windows of `2^BLOCK_SHIFT`; in each window every list has an upper bound of its share of a score (the term's
/// BM25 at the best (tf, length) points of its postings in that window, [`TfBounds`], times its blend weight; 0
/// when it has none there). Lists are ordered by bound; while the `k`-th best score θ is at least the sum of
/// the smallest bounds, those lists are *non-essential*: a document found only in them cannot enter the top `k`.
/// Only the essential lists are walked; a candidate's non-essential lists are looked up (a list at a time,
/// merged over the candidates) only while its partial score plus their bounds can still pass θ, and a window
/// whose bounds add up to at most θ is skipped whole. When the bounds of all lists but one add up to at most θ,
/// that list is *required* (every document that can still enter holds it, as in Lucene's required clauses): the
/// shortest required list then gives the window's candidates and every other list is looked up.
/// Memory: two `f32` per list for each of the window's up to `2^BLOCK_SHIFT` candidates (8 KiB per query term).
///
/// A document's score is `combine` of its own and expanded sums, each summed in list order. `accept` is asked
/// only of documents that would enter the top `k`. Cost: at worst (θ never passes a bound) every posting.
pub fn top_k(
    params: Bm25Params,
    lists: &[ScoredList<'_>],
    combine: Combine,
    k: usize,
    accept: &dyn Fn(u64) -> bool,
) -> Vec<(u64, f32)> {
    top_k_part(params, lists, combine, k, accept, std::iter::once(0..u64::MAX), None)
}

/// [`top_k`] over the documents whose docno is in one of `ranges` only (the others are never read), the ranges
/// scanned in turn by one scan, so that each starts from the threshold the ones before it reached. With `share`,
/// the scan also prunes by the best k-th score the scans of a [`SplitQuery`] have found so far, and publishes its
/// own: it then keeps every document of its ranges that can be in the whole query's top `k`, but not necessarily
/// its ranges' own top `k`.
fn top_k_part(
    params: Bm25Params,
    lists: &[ScoredList<'_>],
    combine: Combine,
    k: usize,
    accept: &dyn Fn(u64) -> bool,
    ranges: impl IntoIterator<Item = std::ops::Range<u64>>,
    share: Option<Share<'_>>,
) -> Vec<(u64, f32)> {
    let m = lists.len();
    if k == 0 || m == 0 {
        return Vec::new();
    }
    let w_own = combine.weight(Part::Own);
    let contributes = |l: &ScoredList<'_>| combine.weight(l.part) > 0.0 || (l.paired.is_some() && w_own > 0.0);
    let active: Vec<usize> = (0..m).filter(|&j| contributes(&lists[j]) && !lists[j].list.is_empty()).collect();
    // A list's bound, weighted, with slack: in a block when its block bounds are given, else over the list.
    let whole: Vec<f32> = lists.iter().map(|l| list_bound(params, combine, l, None, None)).collect();
    let mut scan = Scan::new(params, combine, lists, k, accept);
    scan.share = share;
    let (mut own_block, mut block) = (vec![0usize; m], vec![0usize; m]);
    for docnos in ranges.into_iter().filter(|r| !r.is_empty()) {
        let (first, stop) = (docnos.start, docnos.end);
        scan.range = docnos;
        // Every cursor starts at the range's first docno: its list's first posting there, its first block there.
        let first_block = first >> BLOCK_SHIFT;
        for (j, l) in lists.iter().enumerate() {
            own_block[j] = l.paired.as_ref().map_or(0, |o| o.blocks.partition_point(|b| b.id < first_block));
            block[j] = l.blocks.partition_point(|b| b.id < first_block);
            scan.cur[j] = l.list.partition_point(|p| p.docno < first);
            scan.own_cur[j] = l.paired.as_ref().map_or(0, |o| o.own.partition_point(|p| p.docno < first));
        }
        loop {
            let next = active.iter().filter_map(|&j| lists[j].list.get(scan.cur[j]).map(|p| p.docno)).min();
            let Some(next) = next.filter(|d| *d < stop) else { break };
            let window = next >> BLOCK_SHIFT;
            let end = (window + 1).checked_shl(BLOCK_SHIFT).unwrap_or(u64::MAX);
            // Bounds in this window.
            scan.order.clear();
            for &j in &active {
                let l = &lists[j];
                if l.list.get(scan.cur[j]).is_none_or(|p| p.docno >= end) {
                    continue; // no posting in the window
                }
                let main = block_in_window(l.blocks, &mut block[j], window);
                let own = l.paired.as_ref().and_then(|o| block_in_window(o.blocks, &mut own_block[j], window));
                // A block missing where a posting is cannot happen (every put raises its block); the whole list's
                // bounds serve then all the same, as they do for lists without blocks.
                let main_ok = main.is_some() || l.blocks.is_empty();
                let own_ok = own.is_some() || l.paired.as_ref().is_none_or(|o| o.blocks.is_empty());
                scan.bound[j] = if main_ok && own_ok && (main.is_some() || own.is_some()) {
                    list_bound(params, combine, l, own.as_ref(), main.as_ref())
                } else {
                    whole[j]
                };
                scan.order.push(j);
            }
            scan.window(end);
            // The rest of the window cannot enter: every cursor moves past it.
            if end == u64::MAX {
                break;
            }
            for &j in &active {
                let l = &lists[j];
                scan.cur[j] = past_window(l.list, l.blocks, &mut block[j], window, scan.cur[j], end);
                if let Some(o) = &l.paired {
                    scan.own_cur[j] = past_window(o.own, o.blocks, &mut own_block[j], window, scan.own_cur[j], end);
                }
            }
        }
    }
    let mut out: Vec<(u64, f32)> = scan.heap.into_iter().map(|std::cmp::Reverse(Entry(s, d))| (d, s)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// The state of one [`top_k`] scan: a cursor per list, the lists of the current window in bound order with their
/// bounds, the `k` best documents so far, and the current window's candidates.
struct Scan<'s, 'a> {
    params: Bm25Params,
    combine: Combine,
    lists: &'s [ScoredList<'a>],
    k: usize,
    accept: &'s dyn Fn(u64) -> bool,
    /// Per list: the next posting to read.
    cur: Vec<usize>,
    /// Per list with an own side ([`Paired`]): the cursor into its own postings ([`ScoredList::shares_with`]).
    own_cur: Vec<usize>,
    /// Per list: its [`Impacts`] (none for a short list).
    tables: Vec<Impacts>,
    /// Per list: its bound in the window, weighted, with slack.
    bound: Vec<f32>,
    /// The lists with postings in the window, by bound ascending.
    order: Vec<usize>,
    /// `prefix[i]`: the bounds of `order[..=i]` added up, with slack.
    prefix: Vec<f32>,
    /// Min-heap on (score, Reverse(docno)): the top is the worst of the best k.
    heap: std::collections::BinaryHeap<std::cmp::Reverse<Entry>>,
    /// The threshold a document must pass: the k-th best score (minus infinity until k documents are kept), or
    /// the shared one's floor, when a [`Share`] gives a higher one.
    theta: f32,
    /// The link to the other parts of a [`SplitQuery`], if any.
    share: Option<Share<'s>>,
    /// The docnos being scanned: a document outside is never kept.
    range: std::ops::Range<u64>,
    /// The window's lists that give candidates (walked whole), and the lists a candidate is looked up in, largest
    /// bound first, with `rest[i]`: the bounds of `look[i..]` added up. Kept across windows (no allocation per
    /// window).
    sources: Vec<usize>,
    look: Vec<usize>,
    rest: Vec<f32>,
    /// The window's candidates in docno order, with their weighted partial scores.
    cand: Vec<u64>,
    partial: Vec<f32>,
    /// Per candidate `c` and list `j`: the own and expanded shares at `c * lists.len() + j` (+0.0 where the list
    /// does not hold the document or was not looked up: adding +0.0 leaves a sum as it is, to the bit).
    own: Vec<f32>,
    expanded: Vec<f32>,
    /// The candidates still able to enter the top k, as indices into `cand`, in docno order.
    alive: Vec<u32>,
    /// Candidates in the window: `cand[..n]`. At most [`WINDOW`], as the window's docnos are distinct and every
    /// cursor starts the window at or after its first docno (windows follow the smallest cursor).
    n: usize,
}

impl<'s, 'a> Scan<'s, 'a> {
    fn new(
        params: Bm25Params,
        combine: Combine,
        lists: &'s [ScoredList<'a>],
        k: usize,
        accept: &'s dyn Fn(u64) -> bool,
    ) -> Self {
        let m = lists.len();
        Scan {
            params,
            combine,
            lists,
            k,
            accept,
            cur: vec![0; m],
            own_cur: vec![0; m],
            tables: lists.iter().map(|l| Impacts::of(params, combine, l)).collect(),
            bound: vec![0.0; m],
            order: Vec::with_capacity(m),
            prefix: Vec::with_capacity(m),
            heap: std::collections::BinaryHeap::new(),
            theta: f32::NEG_INFINITY,
            share: None,
            range: 0..u64::MAX,
            sources: Vec::with_capacity(m),
            look: Vec::with_capacity(m),
            rest: Vec::with_capacity(m + 1),
            cand: vec![0; WINDOW],
            partial: vec![0.0; WINDOW],
            own: vec![0.0; WINDOW * m],
            expanded: vec![0.0; WINDOW * m],
            n: 0,
            alive: Vec::new(),
        }
    }

    /// Scores the window of docnos before `end` whose lists and bounds are in `order` and `bound`, a list at a
    /// time over the window's candidates (as Lucene's `MaxScoreBulkScorer` scores a window):
    /// 1. the candidates come from the essential lists (merged in docno order), or from the required list alone
    ///    when there is one; a candidate whose share plus every other list's bound cannot pass θ is dropped;
    /// 2. each other list, largest bound first, is walked forward over the surviving candidates (a linear merge),
    ///    after the candidates that cannot pass θ even with its bound and the smaller ones are dropped;
    /// 3. the survivors are offered in docno order.
    ///
    /// θ stays as it was at the window's start until step 3, which only prunes less, never wrongly.
    fn window(&mut self, end: u64) {
        if let Some(share) = &self.share {
            self.theta = self.theta.max(share.floor());
        }
        let bound = &self.bound;
        self.order.sort_by(|a, b| bound[*a].total_cmp(&bound[*b]).then(a.cmp(b)));
        self.prefix.clear();
        let mut acc = 0.0f32;
        for &j in &self.order {
            acc += self.bound[j];
            self.prefix.push(acc * (1.0 + BOUND_SLACK));
        }
        let essential = self.prefix.iter().take_while(|p| **p <= self.theta).count();
        if essential >= self.order.len() {
            return; // the window's bounds add up to at most θ
        }
        let (mut sources, mut look) = (std::mem::take(&mut self.sources), std::mem::take(&mut self.look));
        sources.clear();
        look.clear();
        match self.required() {
            Some(lead) => {
                sources.push(lead);
                look.extend(self.order.iter().rev().copied().filter(|&j| j != lead));
            }
            None => {
                sources.extend_from_slice(&self.order[essential..]);
                look.extend(self.order[..essential].iter().rev().copied());
            }
        }
        self.rest.clear();
        self.rest.resize(look.len() + 1, 0.0);
        for i in (0..look.len()).rev() {
            self.rest[i] = self.rest[i + 1] + self.bound[look[i]];
        }
        self.candidates(&sources, end);
        self.alive.clear();
        self.alive.extend(0..self.n as u32);
        for (i, &j) in look.iter().enumerate() {
            let rest = self.rest[i];
            let (partial, theta) = (&self.partial, self.theta);
            self.alive.retain(|&c| can_pass(partial[c as usize], rest, theta));
            if self.alive.is_empty() {
                break;
            }
            self.look_up(j);
        }
        let m = self.lists.len();
        for x in 0..self.alive.len() {
            let c = self.alive[x] as usize;
            let (mut own, mut expanded) = (0.0f32, 0.0f32);
            for j in 0..m {
                own += self.own[c * m + j];
                expanded += self.expanded[c * m + j];
            }
            self.offer(self.cand[c], self.combine.score(own, expanded));
        }
        let used = ((self.n + 1).min(WINDOW)) * m;
        self.own[..used].fill(0.0);
        self.expanded[..used].fill(0.0);
        (self.sources, self.look) = (sources, look);
    }

    /// Step 1 of [`Scan::window`]: the documents before `end` of the lists `sources` (each walked to `end`) that can
    /// pass θ with the bounds of every other list (`rest[0]`), into `cand`, `partial` and the share rows.
    fn candidates(&mut self, sources: &[usize], end: u64) {
        let (m, lists, params, combine) = (self.lists.len(), self.lists, self.params, self.combine);
        let (w_own, w_exp) = (combine.weight(Part::Own), combine.weight(Part::Expanded));
        let (rest, theta) = (self.rest[0], self.theta);
        let mut n = 0usize;
        debug_assert!(
            sources.iter().all(|&j| self.lists[j].list.get(self.cur[j]).is_none_or(|p| p.docno + WINDOW as u64 >= end))
        );
        if let [j] = *sources {
            let (l, table) = (&lists[j], &self.tables[j]);
            let (mut c, mut oc) = (self.cur[j], self.own_cur[j]);
            while let Some(p) = l.list.get(c).filter(|p| p.docno < end) {
                let (o, e) = l.shares_with(params, combine, table, c, &mut oc);
                let w = w_own * o + w_exp * e;
                // Written at n whether it passes or not; n moves on only when it does (no branch to mispredict).
                if let (Some(d), Some(x), Some(own), Some(exp)) = (
                    self.cand.get_mut(n),
                    self.partial.get_mut(n),
                    self.own.get_mut(n * m + j),
                    self.expanded.get_mut(n * m + j),
                ) {
                    (*d, *x, *own, *exp) = (p.docno, w, o, e);
                }
                n += usize::from(can_pass(w, rest, theta));
                c += 1;
            }
            (self.cur[j], self.own_cur[j]) = (c, oc);
            self.n = n;
            return;
        }
        loop {
            let mut d = u64::MAX;
            for &j in sources {
                if let Some(p) = lists[j].list.get(self.cur[j]) {
                    d = d.min(p.docno);
                }
            }
            if d >= end {
                break;
            }
            let mut w = 0.0f32;
            for &j in sources {
                let c = self.cur[j];
                if lists[j].list.get(c).is_some_and(|p| p.docno == d) {
                    let (o, e) = lists[j].shares_with(params, combine, &self.tables[j], c, &mut self.own_cur[j]);
                    if let (Some(own), Some(exp)) = (self.own.get_mut(n * m + j), self.expanded.get_mut(n * m + j)) {
                        (*own, *exp) = (o, e);
                    }
                    w += w_own * o + w_exp * e;
                    self.cur[j] = c + 1;
                }
            }
            if can_pass(w, rest, theta) {
                if let (Some(c), Some(x)) = (self.cand.get_mut(n), self.partial.get_mut(n)) {
                    (*c, *x) = (d, w);
                }
                n += 1;
            } else {
                for &j in sources {
                    if let (Some(own), Some(exp)) = (self.own.get_mut(n * m + j), self.expanded.get_mut(n * m + j)) {
                        (*own, *exp) = (0.0, 0.0);
                    }
                }
            }
        }
        self.n = n;
    }

    /// Step 2 of [`Scan::window`] for list `j`: its cursor walks forward over the alive candidates (which are in
    /// docno order), recording the shares of those it holds. The walk is a linear merge, not a search per
    /// candidate: the window's postings of a long list lie in a few kilobytes that a sequential read streams,
    /// where each probe of a binary or galloping search waits on memory (measured: a galloping search made
    /// the look-ups the largest part of a 1M-memory query).
    fn look_up(&mut self, j: usize) {
        let (m, l) = (self.lists.len(), &self.lists[j]);
        let (w_own, w_exp) = (self.combine.weight(Part::Own), self.combine.weight(Part::Expanded));
        let list = l.list;
        let (mut at, mut own_at) = (self.cur[j], self.own_cur[j]);
        for &c in &self.alive {
            let c = c as usize;
            let d = self.cand[c];
            while list.get(at).is_some_and(|p| p.docno < d) {
                at += 1;
            }
            let Some(p) = list.get(at) else { break };
            if p.docno == d {
                let (o, e) = l.shares_with(self.params, self.combine, &self.tables[j], at, &mut own_at);
                (self.own[c * m + j], self.expanded[c * m + j]) = (o, e);
                self.partial[c] += w_own * o + w_exp * e;
                at += 1;
            }
        }
        (self.cur[j], self.own_cur[j]) = (at, own_at);
    }

    /// The shortest list of the window that every document able to enter holds: the other lists' bounds add up
    /// to at most θ. None before k documents are kept.
    fn required(&self) -> Option<usize> {
        if self.theta == f32::NEG_INFINITY {
            return None;
        }
        let mut best: Option<usize> = None;
        for &j in &self.order {
            let others: f32 = self.order.iter().filter(|&&o| o != j).map(|&o| self.bound[o]).sum();
            if others * (1.0 + BOUND_SLACK) <= self.theta
                && best.is_none_or(|b| self.lists[j].list.len() < self.lists[b].list.len())
            {
                best = Some(j);
            }
        }
        best
    }

    /// Offers document `d` with score `s` to the heap; raises θ when the heap is full.
    fn offer(&mut self, d: u64, s: f32) {
        // Documents come in docno order, so a tie with the worst kept document loses.
        if (self.heap.len() < self.k || s > self.theta) && self.range.contains(&d) && (self.accept)(d) {
            self.heap.push(std::cmp::Reverse(Entry(s, d)));
            if self.heap.len() > self.k {
                self.heap.pop();
            }
            if self.heap.len() == self.k
                && let Some(std::cmp::Reverse(Entry(w, _))) = self.heap.peek()
            {
                self.theta = *w;
                if let Some(share) = &self.share {
                    share.publish(*w);
                    self.theta = self.theta.max(share.floor());
                }
            }
        }
    }
}

/// Whether a document with weighted partial score `partial` and `rest` still to come (bounds, with slack) can
/// pass the k-th best score `theta`.
#[inline]
fn can_pass(partial: f32, rest: f32, theta: f32) -> bool {
    (partial + rest) * (1.0 + BOUND_SLACK) > theta
}

/// The score [`top_k`] gives document `docno` (0 when no list holds it), equal to the bit: each list is
/// searched (binary search) in list order.
pub fn score_doc(params: Bm25Params, lists: &[ScoredList<'_>], combine: Combine, docno: u64) -> f32 {
    let (mut own, mut expanded) = (0.0f32, 0.0f32);
    for l in lists {
        if combine.weight(l.part) <= 0.0 && l.paired.is_none() {
            continue;
        }
        if let Ok(i) = l.list.binary_search_by_key(&docno, |p| p.docno) {
            let (o, e) = l.shares(params, combine, i);
            own += o;
            expanded += e;
        }
    }
    combine.score(own, expanded)
}

/// [`score_doc`] of each of `docnos` (any order), the same bits, for many documents at once: list by list, each
/// document found by a binary search of the whole list (and of its own side), as [`score_doc`] finds it.
///
/// The whole list, not the rest after the previous document: a binary search of one slice probes the same
/// midpoints every time, so its upper levels stay in the CPU cache across documents and queries, and only the
/// last few probes miss. Fusion asks for a few dozen documents spread over a space of up to millions; searching
/// from the previous place moved the midpoints on each search, and every probe missed (`perf`, threads of 20 at
/// 1M: 1.7 times the samples of the whole-list search for half the documents).
pub fn score_docs(params: Bm25Params, lists: &[ScoredList<'_>], combine: Combine, docnos: &[u64]) -> Vec<f32> {
    let (mut own, mut expanded) = (vec![0.0f32; docnos.len()], vec![0.0f32; docnos.len()]);
    for l in lists {
        if combine.weight(l.part) <= 0.0 && l.paired.is_none() {
            continue;
        }
        for (k, d) in docnos.iter().enumerate() {
            if let Ok(i) = l.list.binary_search_by_key(d, |p| p.docno) {
                // Summed per document in list order, as `score_doc` sums.
                let (o, e) = l.shares(params, combine, i);
                own[k] += o;
                expanded[k] += e;
            }
        }
    }
    own.into_iter().zip(expanded).map(|(o, e)| combine.score(o, e)).collect()
}

/// The bound of list `l`'s share of a score, weighted by `combine`, with slack: in one block when its block
/// bounds (`block`, and `own_block` for the own side of a paired list) are given, else over the whole list.
fn list_bound(
    params: Bm25Params,
    combine: Combine,
    l: &ScoredList<'_>,
    own_block: Option<&TfBounds>,
    block: Option<&TfBounds>,
) -> f32 {
    let main = block.unwrap_or(&l.bounds).max_score(params, l.idf, l.qtf, l.avg) * combine.weight(l.part);
    let w_own = combine.weight(Part::Own);
    let own = match &l.paired {
        Some(o) if w_own > 0.0 => w_own * own_block.unwrap_or(&o.bounds).max_score(params, o.idf, l.qtf, o.avg),
        _ => 0.0,
    };
    (main + own).max(0.0) * (1.0 + BOUND_SLACK)
}

/// The bounds of block `window` in `blocks` (sorted by block), moving the cursor `at` forward; None when the list
/// keeps no blocks or has none there.
fn block_in_window(blocks: &[Block], at: &mut usize, window: u64) -> Option<TfBounds> {
    while *at < blocks.len() && blocks[*at].id < window {
        *at += 1;
    }
    blocks.get(*at).filter(|b| b.id == window).map(|b| b.bounds)
}

/// The first posting of `list` at or after docno `end` (the first docno after block `window`), from the cursor
/// `from`: read from the skip entries `blocks` (cursor `at`, moved forward) when they agree with the list, else
/// searched ([`gallop`]). Jumping over a block costs no search and touches no posting of it.
fn past_window(list: &[Posting], blocks: &[Block], at: &mut usize, window: u64, from: usize, end: u64) -> usize {
    if !blocks.is_empty() {
        while *at < blocks.len() && blocks[*at].id <= window {
            *at += 1;
        }
        let to = blocks.get(*at).map_or(list.len(), |b| b.first as usize).min(list.len());
        // Checked, so that a wrong skip entry costs a search, never a posting.
        let after = list.get(to).is_none_or(|p| p.docno >= end);
        let before = to == 0 || list.get(to - 1).is_some_and(|p| p.docno < end);
        if to >= from && after && before {
            return to;
        }
    }
    gallop(list, from, end)
}

/// A kept document: ordered by score, then by docno descending (a larger docno is worse at equal score).
#[derive(Debug, Clone, Copy)]
struct Entry(f32, u64);

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

/// Postings [`gallop`] scans one by one before it searches.
const LINEAR_PROBES: usize = 16;

/// The first index at or after `from` whose docno is at least `d` (exponential then binary search).
fn gallop(list: &[Posting], from: usize, d: u64) -> usize {
    // Most targets are a few postings ahead (candidates come in docno order): a short linear scan reads
    // sequential memory and predicts well, where a binary search stalls on every probe.
    let near = from.saturating_add(LINEAR_PROBES).min(list.len());
    if let Some(i) = list.get(from..near).and_then(|s| s.iter().position(|p| p.docno >= d)) {
        return from + i;
    }
    let from = near;
    let mut step = 1;
    let mut hi = from;
    while hi < list.len() && list[hi].docno < d {
        hi = from + step;
        step *= 2;
    }
    let lo = from + step / 4;
    let hi = hi.min(list.len());
    let lo = lo.min(hi);
    lo + list[lo..hi].partition_point(|p| p.docno < d)
}

mod split;
use split::Share;
pub use split::{SPLIT_MIN_POSTINGS, SPLIT_PARTS, SplitQuery, split_docnos};

#[cfg(test)]
pub(crate) mod tests;
