//! Indexes derived from the store: the in-memory catalog used by filters, BM25 scoring over the lexical
//! postings kept in redb, the per-space vector index (exact scan or HNSW), and rank fusion.
//! redb stays the source of truth: every structure here is rebuilt from it on open, or read from a saved copy
//! that is validated against it (HNSW graphs, the index snapshot of `docs/design.md`).

pub mod bm25;
pub(crate) mod bytes;
pub mod catalog;
pub mod context;
pub mod decay;

pub mod fusion;
pub mod hnsw;
pub mod lexicon;
pub(crate) mod ops;
pub mod vector;

/// The first `keep` of `items` in the order `cmp` gives, sorted: a selection (`select_nth_unstable_by`, O(n))
/// then a sort of the `keep` selected (O(keep log keep)), instead of a sort of them all.
/// Serves listings, the vector and BM25 candidate lists and the context-blended cosine's ranking. `cmp` must be a total
/// order (ties broken, as by id) for the result to be the first `keep` of a full sort.
pub(crate) fn first_in_order<T>(mut items: Vec<T>, keep: usize, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) -> Vec<T> {
    if keep == 0 {
        return Vec::new();
    }
    if keep < items.len() {
        items.select_nth_unstable_by(keep - 1, &cmp);
        items.truncate(keep);
    }
    items.sort_by(&cmp);
    items
}

/// Estimated bytes of a hash table's bucket array (hashbrown, as behind `HashMap`): `capacity` as the table
/// reports it (7/8 of its buckets), `entry` bytes and a control byte per bucket. Not what the entries point to.
pub(crate) fn table_bytes(capacity: usize, entry: usize) -> usize {
    if capacity == 0 { 0 } else { (capacity * 8 / 7 + 1).next_power_of_two() * (entry + 1) }
}

/// Estimated bytes of a heap allocation of `n` bytes with glibc's malloc: its 8-byte header, rounded up to 16,
/// 32 at least; 0 for none.
pub(crate) fn alloc_bytes(n: usize) -> usize {
    if n == 0 { 0 } else { (n + 8).div_ceil(16).max(2) * 16 }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The selection gives the first `keep` of a full sort, ties broken by the second field.
        #[test]
        fn first_in_order_is_a_full_sorts_prefix(keys in proptest::collection::vec(0u8..8, 0..200),
                                                 keep in 0usize..250) {
            // Few distinct keys, so most of the order is decided by the unique second field (the id).
            // 919 is prime to 1,000: the ids of 200 items are distinct.
            let items: Vec<(u8, u32)> = keys.iter().zip(0u32..).map(|(k, i)| (*k, i * 919 % 1000)).collect();
            let cmp = |a: &(u8, u32), b: &(u8, u32)| b.0.cmp(&a.0).then(a.1.cmp(&b.1));
            let mut all = items.clone();
            all.sort_by(cmp);
            all.truncate(keep);
            prop_assert_eq!(super::first_in_order(items, keep, cmp), all);
        }
    }
}
