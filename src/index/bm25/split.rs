//! Intra-query parallelism of [`top_k`](super::top_k): a long query split by docno into parts that several threads
//! take in turn ([`SplitQuery`]), sharing their k-th best score.

use super::*;

/// Lists of a [`top_k`] query adding up to at least this many postings are worth splitting over threads
/// ([`split_docnos`]): below it the query takes well under a millisecond.
pub const SPLIT_MIN_POSTINGS: usize = 131_072;

/// How many parts [`split_docnos`] cuts a long query into: more parts than threads, so that the threads take them
/// in turn and finish together even when the parts' work differs (pruning makes later parts cheaper) or a thread
/// joins late (a sleeping thread can take longer to wake than a part takes, and a hybrid search's pool thread joins
/// once its vector ranking is done).
pub const SPLIT_PARTS: usize = 8;

/// Where to split a long [`top_k`] query into `parts` parts of about the same number of postings (a [`SplitQuery`]
/// over the returned docnos, each a part's first): the docnos of its longest list's postings at `i/parts` of its
/// length, each rounded down to a window's start (`2^BLOCK_SHIFT`) so that no window straddles two parts,
/// ascending, distinct and above 0. `None` when the lists add up to fewer than [`SPLIT_MIN_POSTINGS`] postings, or
/// when the rounding leaves a single part.
pub fn split_docnos(lists: &[ScoredList<'_>], parts: usize) -> Option<Vec<u64>> {
    if lists.iter().map(|l| l.list.len()).sum::<usize>() < SPLIT_MIN_POSTINGS {
        return None;
    }
    let longest = lists.iter().max_by_key(|l| l.list.len())?;
    let mut at: Vec<u64> = (1..parts)
        .filter_map(|i| longest.list.get(longest.list.len() * i / parts))
        .map(|p| (p.docno >> BLOCK_SHIFT) << BLOCK_SHIFT)
        .filter(|d| *d > 0)
        .collect();
    at.dedup();
    (!at.is_empty()).then_some(at)
}

/// One [`top_k`] query split by docno into parts, for several threads (intra-query parallelism by document range,
/// as Lucene's slices split a query over segments):
/// 1. each thread calling [`SplitQuery::run`] takes the next part not yet taken, until none is left, and runs the
///    MaxScore scan of [`top_k`] over those parts' ranges only, one scan for all the parts it takes;
/// 2. each scan publishes its k-th best score as it rises to the query's shared best, and prunes by that as well
///    as by its own, so that no scan starts its threshold from nothing (without this, two parts together scored
///    more postings than the whole query);
/// 3. [`SplitQuery::merge`] keeps the `k` best of the threads' candidates.
///
/// The result equals [`top_k`]'s to the bit, whatever the parts' order and interleaving: a document pruned by the
/// shared threshold has at least `k` documents ranked above it in the scan that set it. Ties follow [`top_k`]'s
/// order (a smaller docno first), and the shared threshold is taken a little below the published score (by
/// `4 · BOUND_SLACK` of it), so that a tie, or a bound's slack, never prunes a document that belongs in the top
/// `k`.
#[derive(Debug)]
pub struct SplitQuery {
    /// Each part's first docno, ascending; the first is 0, and the last part runs to the end.
    starts: Vec<u64>,
    /// The next part to take.
    pub(super) next: std::sync::atomic::AtomicUsize,
    /// The best k-th score any scan has found, as `f32` bits; minus infinity until one has `k`.
    pub(super) kth: std::sync::atomic::AtomicU32,
}

impl SplitQuery {
    /// A query split at the docnos `at` (from [`split_docnos`]; any docnos give the same merged result): one part
    /// before the first, one from each to the next, and one from the last on.
    pub fn new(at: &[u64]) -> Self {
        let mut starts = vec![0];
        starts.extend(at.iter().copied().filter(|d| *d > 0));
        starts.sort_unstable();
        starts.dedup();
        SplitQuery {
            starts,
            next: std::sync::atomic::AtomicUsize::new(0),
            kth: std::sync::atomic::AtomicU32::new(f32::NEG_INFINITY.to_bits()),
        }
    }

    /// How many parts the query has.
    pub fn parts(&self) -> usize {
        self.starts.len()
    }

    /// The docnos of part `i`: from its first to the next part's first, or to the end for the last; `None` past
    /// the last part.
    pub(super) fn range(&self, i: usize) -> Option<std::ops::Range<u64>> {
        Some(*self.starts.get(i)?..self.starts.get(i + 1).copied().unwrap_or(u64::MAX))
    }

    /// Runs the parts not yet taken, one at a time, until none is left, and returns their candidates, for
    /// [`SplitQuery::merge`]; arguments as [`top_k`]. Several threads may run it at once; each part is run once.
    pub fn run(
        &self,
        params: Bm25Params,
        lists: &[ScoredList<'_>],
        combine: Combine,
        k: usize,
        accept: &dyn Fn(u64) -> bool,
    ) -> Vec<(u64, f32)> {
        // One scan over every part this thread takes: each part starts from the threshold of the ones before.
        let taken = std::iter::from_fn(|| self.range(self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        top_k_part(params, lists, combine, k, accept, taken, Some(Share { kth: &self.kth }))
    }

    /// The `k` best of two threads' candidates, in [`top_k`]'s order (score descending, then docno ascending).
    pub fn merge(mut mine: Vec<(u64, f32)>, theirs: Vec<(u64, f32)>, k: usize) -> Vec<(u64, f32)> {
        mine.extend(theirs);
        mine.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        mine.truncate(k);
        mine
    }
}

/// A [`SplitQuery`] scan's link to the others: the best k-th score any scan has found, which it raises and prunes
/// by.
#[derive(Debug, Clone, Copy)]
pub(super) struct Share<'s> {
    pub(super) kth: &'s std::sync::atomic::AtomicU32,
}

impl Share<'_> {
    /// The threshold the shared k-th best score `t` sets for a scan's documents, a little below `t` (by
    /// `4 · BOUND_SLACK · |t|`): a document of another part at score `t` may still rank above the one that set it
    /// (a smaller docno wins a tie), and a bound with its slack must pass the threshold for every score from `t`
    /// up, negative ones included.
    pub(super) fn floor(&self) -> f32 {
        let t = f32::from_bits(self.kth.load(std::sync::atomic::Ordering::Relaxed));
        t - t.abs() * (4.0 * BOUND_SLACK)
    }

    /// Raises the shared k-th best score to `w`, if `w` is higher.
    pub(super) fn publish(&self, w: f32) {
        use std::sync::atomic::Ordering::Relaxed;
        let _ = self.kth.fetch_update(Relaxed, Relaxed, |t| (w > f32::from_bits(t)).then_some(w.to_bits()));
    }
}
