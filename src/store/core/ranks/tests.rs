//! Tests of `ranks` (beside it: `store/core/ranks.rs`).

use super::SpaceRanks;
use proptest::prelude::*;
use std::collections::HashMap;

#[test]
fn ranks_are_found_replaced_and_kept_through_a_shrink() {
    let mut r = SpaceRanks::with_capacity(1000, 36);
    r.insert("a", 0.5);
    r.insert("", 0.25);
    r.insert("ab", 1.0);
    r.insert("a", 0.75);
    assert_eq!(r.len(), 3);
    assert_eq!(r.get("a"), Some(0.75));
    assert_eq!(r.get(""), Some(0.25));
    assert_eq!(r.get("ab"), Some(1.0));
    assert_eq!(r.get("b"), None);
    r.shrink_to_fit();
    assert!(r.ranks.capacity() < 1000);
    assert_eq!((r.get("a"), r.get("ab"), r.get("abc")), (Some(0.75), Some(1.0), None));
}

proptest! {
    /// The map answers as a `HashMap<String, f32>` given the same inserts (repeated ids included), before
    /// and after growing from no capacity, and after a shrink.
    #[test]
    fn ranks_answer_as_a_hash_map(
        rows in proptest::collection::vec(("[a-d]{0,3}|é[0-9]{1,2}", 0.0f32..1.0), 0..200),
        probes in proptest::collection::vec("[a-e]{0,3}|é[0-9]{1,2}", 0..50),
    ) {
        let mut ours = SpaceRanks::default();
        let mut theirs = HashMap::new();
        for (id, rank) in &rows {
            ours.insert(id, *rank);
            theirs.insert(id.clone(), *rank);
        }
        prop_assert_eq!(ours.len(), theirs.len());
        for id in rows.iter().map(|(id, _)| id).chain(&probes) {
            prop_assert_eq!(ours.get(id), theirs.get(id).copied());
        }
        ours.shrink_to_fit();
        for id in rows.iter().map(|(id, _)| id).chain(&probes) {
            prop_assert_eq!(ours.get(id), theirs.get(id).copied());
        }
    }
}
