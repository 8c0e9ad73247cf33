//! Tests of `bm25` (beside it: `index/bm25.rs`).

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

/// Exhaustive scoring, sorted best first and cut at `k`: what [`top_k`] must equal.
fn exhaustive(
    lists: &[(u32, &[Posting])],
    n: u64,
    avg: f32,
    k: usize,
    accept: &dyn Fn(u64) -> bool,
) -> Vec<(u64, f32)> {
    let mut all = score(Bm25Params::default(), n, avg, lists, accept);
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

/// A [`SplitQuery`] at the docnos `at` run on one thread, its parts in order and in reverse order (so that
/// later parts prune by the earlier parts' thresholds either way); panics unless both give the same list,
/// which it returns.
pub(crate) fn split_in_both_orders(
    lists: &[ScoredList<'_>],
    combine: Combine,
    k: usize,
    accept: &dyn Fn(u64) -> bool,
    at: &[u64],
) -> Vec<(u64, f32)> {
    let params = Bm25Params::default();
    let forward = SplitQuery::new(at);
    let forward = SplitQuery::merge(forward.run(params, lists, combine, k, accept), Vec::new(), k);
    // In reverse: a scan per part holding only that part's range, sharing one threshold.
    let reverse = SplitQuery::new(at);
    let mut got = Vec::new();
    for range in (0..reverse.parts()).rev().filter_map(|i| reverse.range(i)) {
        let share = Share { kth: &reverse.kth };
        got.extend(top_k_part(params, lists, combine, k, accept, std::iter::once(range), Some(share)));
    }
    let reverse = SplitQuery::merge(got, Vec::new(), k);
    assert_eq!(forward, reverse, "split at {at:?}");
    forward
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    /// MaxScore gives exactly the exhaustive top k (documents, order and scores to the bit), with and
    /// without a filter, over random corpora with Zipf-like term frequencies and repeated query terms.
    #[test]
    fn maxscore_top_k_equals_exhaustive_scoring(
        docs in proptest::collection::vec(proptest::collection::vec((0u8..12, 1u32..4), 0..8), 1..160),
        query in proptest::collection::vec(0u8..14, 1..6),
        k in 1usize..30,
        modulus in 1u64..5,
        spread in proptest::prop_oneof![proptest::strategy::Just(3u64), proptest::strategy::Just(37u64)],
        blocked in proptest::bool::ANY,
        split in 0u64..6_000,
    ) {
        // Term t is kept in a document with probability falling with t, so low terms have long lists.
        let mut lists: Vec<Vec<Posting>> = vec![Vec::new(); 14];
        let mut total = 0u64;
        for (d, terms) in docs.iter().enumerate() {
            let len = terms.iter().map(|x| x.1).sum::<u32>().max(1);
            total += u64::from(len);
            let mut seen = std::collections::BTreeMap::new();
            for (t, tf) in terms {
                if (d as u64 * 7 + u64::from(*t)).is_multiple_of(u64::from(*t) / 3 + 1) {
                    *seen.entry(*t).or_insert(0) += tf;
                }
            }
            for (t, tf) in seen {
                lists[t as usize].push(Posting { docno: d as u64 * spread, tf, doc_len: len });
            }
        }
        let n = docs.len() as u64;
        let avg = total as f32 / n as f32;
        let mut qtf = std::collections::BTreeMap::new();
        for t in &query {
            *qtf.entry(*t).or_insert(0u32) += 1;
        }
        let q: Vec<(u32, &[Posting])> = qtf.iter().map(|(t, c)| (*c, lists[*t as usize].as_slice())).collect();
        let blocks: Vec<Vec<Block>> = lists.iter().map(|l| blocks_of(l)).collect();
        let scored: Vec<ScoredList<'_>> = qtf
            .iter()
            .zip(&q)
            .map(|((t, _), (c, l))| ScoredList {
                list: l,
                idf: idf(n as f32, l.len()),
                qtf: *c,
                avg,
                bounds: TfBounds::of(l),
                blocks: if blocked { &blocks[*t as usize] } else { &[] },
                part: Part::Own,
                paired: None,
            })
            .collect();
        let all = |_: u64| true;
        let some = |d: u64| (d / spread).is_multiple_of(modulus);
        for accept in [&all as &dyn Fn(u64) -> bool, &some] {
            let want = exhaustive(&q, n, avg, k, accept);
            let got = top_k(Bm25Params::default(), &scored, Combine::Own, k, accept);
            proptest::prop_assert_eq!(&got, &want);
            // Split by docno, at a window's start and anywhere: the parts' merge is the same list.
            let aligned = (split >> BLOCK_SHIFT) << BLOCK_SHIFT;
            for at in [&[aligned][..], &[split], &[split / 3, split, aligned + 1]] {
                proptest::prop_assert_eq!(&split_in_both_orders(&scored, Combine::Own, k, accept, at), &want);
            }
            for (d, s) in &want {
                proptest::prop_assert_eq!(score_doc(Bm25Params::default(), &scored, Combine::Own, *d), *s);
            }
        }
    }
}

/// Lists long enough for [`Impacts`] (tf and lengths inside and outside their tables) give exactly the
/// exhaustive top k, and every table entry is the computed score to the bit, on the own side of a paired
/// list too.
#[test]
fn long_lists_read_from_impact_tables_score_as_computed() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |m: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % m
    };
    let n = 60_000u64;
    let lens: Vec<u32> = (0..n).map(|_| 1 + next(700) as u32).collect();
    let avg = lens.iter().map(|l| f64::from(*l)).sum::<f64>() as f32 / n as f32;
    let lists: Vec<Vec<Posting>> = [2u64, 3, 40]
        .iter()
        .map(|every| {
            let mut list = Vec::new();
            for d in 0..n {
                if d % every == 0 || next(5) == 0 {
                    list.push(Posting { docno: d, tf: 1 + next(6) as u32, doc_len: lens[d as usize] });
                }
            }
            list
        })
        .collect();
    assert!(lists[0].len() >= TABLE_FROM && lists[1].len() >= TABLE_FROM && lists[2].len() < TABLE_FROM);
    let blocks: Vec<Vec<Block>> = lists.iter().map(|l| blocks_of(l)).collect();
    let q: Vec<(u32, &[Posting])> = lists.iter().enumerate().map(|(i, l)| (1 + i as u32 % 2, l.as_slice())).collect();
    let scored: Vec<ScoredList<'_>> = q
        .iter()
        .zip(&blocks)
        .map(|((c, l), b)| ScoredList {
            list: l,
            idf: idf(n as f32, l.len()),
            qtf: *c,
            avg,
            bounds: TfBounds::of(l),
            blocks: b,
            part: Part::Own,
            paired: None,
        })
        .collect();
    for k in [1, 10, 200] {
        let (all, odd) = (|_: u64| true, |d: u64| d % 2 == 1);
        for accept in [&all as &(dyn Fn(u64) -> bool + Sync), &odd] {
            let want = exhaustive(&q, n, avg, k, accept);
            assert_eq!(top_k(Bm25Params::default(), &scored, Combine::Own, k, accept), want);
            // The lists twice over are long enough to split; the split falls on a window's start inside them.
            let twice: Vec<ScoredList<'_>> = scored.iter().chain(&scored).copied().collect();
            let at = split_docnos(&twice, SPLIT_PARTS).expect("over SPLIT_MIN_POSTINGS");
            assert_eq!(at.len(), SPLIT_PARTS - 1, "split at {at:?}");
            assert!(
                at.windows(2).all(|w| w[0] < w[1])
                    && at.iter().all(|d| *d > 0 && *d < n && d.is_multiple_of(1 << BLOCK_SHIFT)),
                "split at {at:?}"
            );
            assert_eq!(split_docnos(&scored[2..], SPLIT_PARTS), None, "a short list is not split");
            assert_eq!(split_in_both_orders(&scored, Combine::Own, k, accept, &at), want);
            // At once on two threads, as a search runs it: each part runs once, on either thread.
            let q = SplitQuery::new(&at);
            let run = || q.run(Bm25Params::default(), &scored, Combine::Own, k, accept);
            let (mine, theirs) = std::thread::scope(|s| {
                let theirs = s.spawn(run);
                (run(), theirs.join().expect("second thread"))
            });
            assert_eq!(q.next.load(std::sync::atomic::Ordering::Relaxed), q.parts() + 2, "each thread asks once more");
            assert_eq!(SplitQuery::merge(mine, theirs, k), want);
        }
    }
    let params = Bm25Params::default();
    // The own postings: some of the expanded list's documents, with other tf and length.
    let own: Vec<Posting> = lists[0]
        .iter()
        .filter(|p| p.tf % 3 > 0)
        .map(|p| Posting { docno: p.docno, tf: p.tf % 3, doc_len: p.doc_len / 2 })
        .collect();
    assert!(!own.is_empty() && own.len() < lists[0].len());
    let mut paired = scored[0];
    paired.part = Part::Expanded;
    paired.paired = Some(Paired { own: &own, idf: 1.7, avg: avg / 2.0, bounds: TfBounds::default(), blocks: &[] });
    let impacts = Impacts::of(params, Combine::Blend(0.5), &paired);
    assert_eq!((impacts.main.len(), impacts.own.len()), (2048, 2048));
    let mut own_at = 0;
    let mut owned = 0;
    for i in 0..paired.list.len() {
        let (want, got) = (
            paired.shares(params, Combine::Blend(0.5), i),
            paired.shares_with(params, Combine::Blend(0.5), &impacts, i, &mut own_at),
        );
        assert_eq!((want.0.to_bits(), want.1.to_bits()), (got.0.to_bits(), got.1.to_bits()), "posting {i}");
        let p = paired.list[i];
        let own_side = own.iter().find(|q| q.docno == p.docno);
        assert_eq!(want.0 > 0.0, own_side.is_some(), "posting {i}: an own share exactly where an own posting is");
        owned += usize::from(own_side.is_some());
    }
    assert_eq!(owned, own.len());
    for tf in 0..10 {
        for len in [0, 1, 511, 512, 10_000] {
            let want = term_score(params, paired.idf, paired.qtf, tf, len, avg);
            let got = table_score(&impacts.main, params, paired.idf, paired.qtf, tf, len, avg);
            assert_eq!(got.to_bits(), want.to_bits(), "tf {tf}, length {len}");
        }
    }
}

#[test]
fn gallop_finds_the_first_posting_at_or_after_a_docno() {
    let list: Vec<Posting> = (0..100u64).map(|d| Posting { docno: d * 2, tf: 1, doc_len: 1 }).collect();
    for from in [0usize, 1, 5, 50, 99, 100] {
        for d in 0..210u64 {
            let want = from + list[from..].partition_point(|p| p.docno < d);
            assert_eq!(gallop(&list, from, d), want, "from {from} docno {d}");
        }
    }
}
