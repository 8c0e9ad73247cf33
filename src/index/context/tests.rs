//! Tests of `context` (beside it: `index/context.rs`).

use super::*;
use crate::index::catalog::DocMeta;
use crate::index::lexicon::analyse;
use crate::model::{Memory, Metadata, Timestamp};

fn turn(catalog: &mut SpaceCatalog, lex: &mut Lexicon, docno: u64, thread: Option<&str>, i: u64, text: &str) {
    let mut m = Memory::with_defaults(format!("m{docno}"), "s".into(), text.into(), Timestamp(0));
    if let Some(t) = thread {
        m.source_thread_id = Some(t.into());
        m.metadata =
            Metadata(serde_json::json!({"source_message_indices": [i]}).as_object().cloned().unwrap_or_default());
    }
    catalog.insert(docno, DocMeta::of(&m, Default::default()));
    let (tf, len) = analyse(text);
    lex.add(docno, &tf, len);
}

#[test]
fn context_cosines_blend_each_memory_with_its_neighbourhood() {
    use crate::index::vector::{SpaceVectors, VectorParams};
    let (mut catalog, mut lex) = (SpaceCatalog::default(), Lexicon::default());
    // A thread of four turns (docnos 1-4; turn 3 has no vector) and a memory without a position (5).
    for (d, i) in [(1, 0), (2, 1), (3, 2), (4, 3)] {
        turn(&mut catalog, &mut lex, d, Some("t"), i, "words");
    }
    turn(&mut catalog, &mut lex, 5, None, 0, "words");
    let mut vectors = SpaceVectors::new(2, VectorParams::default());
    let s = std::f32::consts::FRAC_1_SQRT_2;
    vectors.insert_batch(&[(1, vec![1.0, 0.0]), (2, vec![0.0, 1.0]), (4, vec![s, s]), (5, vec![1.0, 0.0])]);
    let q = [1.0, 0.0];
    let docs = [1, 2, 3, 4, 5];
    let got = context_cosines(&vectors, &catalog, &q, &docs, 0.5);
    // The index holds vectors at half precision, as the store keeps them.
    let (c1, c2, c4) = (1.0f32, 0.0f32, half::f16::from_f32(s).to_f32());
    let want = [
        0.5 * c1 + 0.5 * (c1 + c2) / 2.0, // first of the thread: itself and the next
        0.5 * c2 + 0.5 * (c2 + c1) / 2.0, // turn 3 has no vector: left out of the mean
        0.0,                              // no vector: 0, as the vector ranking gives it
        0.5 * c4 + 0.5 * c4,              // its only neighbour (3) has no vector
        1.0,                              // no position: its own cosine
    ];
    for ((d, g), w) in docs.iter().zip(&got).zip(want) {
        assert!((g - w).abs() < 1e-6, "docno {d}: {g} against {w}");
    }
    // γ 0, below 0 or NaN: the plain cosines; above 1 is clamped to 1 (the mean alone).
    let plain = vectors.similarities(&q, &docs);
    for g in [0.0, -1.0, f32::NAN] {
        assert_eq!(context_cosines(&vectors, &catalog, &q, &docs, g), plain, "{g}");
    }
    let all = context_cosines(&vectors, &catalog, &q, &docs, 7.0);
    assert!((all[1] - (c2 + c1) / 2.0).abs() < 1e-6, "{all:?}");
}

#[test]
fn positions_come_from_threads_and_sources() {
    let mut m = Memory::with_defaults("a".into(), "s".into(), "x".into(), Timestamp(0));
    assert_eq!(position_of(&m), None);
    m.source_thread_id = Some("t1".into());
    m.source_range.insert("start_index".into(), 4.0);
    assert_eq!(position_of(&m).map(|p| (p.group.to_string(), p.ordinal)), Some(("thread:t1".into(), 4)));
    m.source_range.clear();
    assert_eq!(position_of(&m), None, "a thread without an index gives no position");
    m.source_thread_id = None;
    m.metadata.0.insert("source_id".into(), "src".into());
    m.metadata.0.insert("chunk_index".into(), 7.into());
    assert_eq!(position_of(&m).map(|p| (p.group.to_string(), p.ordinal)), Some(("source:src".into(), 7)));
    m.metadata.0.insert("chunk_index".into(), (-1).into());
    assert_eq!(position_of(&m), None);
}

#[test]
fn expanded_scores_see_the_neighbours_text_and_plain_spaces_are_unchanged() {
    let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
    turn(&mut c, &mut l, 1, Some("t"), 0, "Where did you go on holiday?");
    turn(&mut c, &mut l, 2, Some("t"), 1, "We went to Lisbon in May.");
    turn(&mut c, &mut l, 3, Some("t"), 2, "The food was great.");
    turn(&mut c, &mut l, 4, None, 0, "holiday plans for next year");
    let mut nb = Vec::new();
    c.neighbours(2, 1, &mut nb);
    assert_eq!(nb, vec![(1, 1), (3, 1)]);
    c.neighbours(4, 1, &mut nb);
    assert!(nb.is_empty());
    let total = expanded_total_len(&c, &l, 1);
    let q = analyse("holiday").0;
    let lists: Vec<(u32, &[Posting])> = q.iter().map(|(t, n)| (*n, l.postings(t))).collect();
    let s = score_context(Bm25Params::default(), total as f32 / l.docs as f32, &lists, &c, &l, 1, &|_| true);
    // Turn 2 does not say "holiday" but its previous turn does.
    assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 4]);
    // Without sequences the expanded score is the plain BM25.
    let (mut c2, mut l2) = (SpaceCatalog::default(), Lexicon::default());
    turn(&mut c2, &mut l2, 1, None, 0, "holiday in Lisbon");
    turn(&mut c2, &mut l2, 2, None, 0, "a long holiday holiday trip to the sea");
    let lists: Vec<(u32, &[Posting])> = q.iter().map(|(t, n)| (*n, l2.postings(t))).collect();
    let plain = super::super::bm25::score(Bm25Params::default(), l2.docs, l2.avg_len(), &lists, &|_| true);
    let total = expanded_total_len(&c2, &l2, 1);
    let ctx = score_context(Bm25Params::default(), total as f32 / l2.docs as f32, &lists, &c2, &l2, 1, &|_| true);
    assert_eq!(plain, ctx);
}

#[test]
fn window_one_links_agree_with_the_ordered_sets_through_inserts_moves_and_removes() {
    let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for step in 0..2000u64 {
        let docno = rnd(60);
        match rnd(4) {
            0 => c.remove(docno),
            1 => turn(&mut c, &mut l, docno, None, 0, "plain"),
            _ => {
                let thread = format!("t{}", rnd(3));
                turn(&mut c, &mut l, docno, Some(&thread), rnd(25), "turn");
            }
        }
        for d in 0..60 {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            c.neighbours(d, 1, &mut fast);
            // Window 2 walks the ordered set; its distance-1 entries are the window-1 neighbourhood.
            c.neighbours(d, 2, &mut slow);
            slow.retain(|(_, dist)| *dist == 1);
            assert_eq!(fast, slow, "docno {d} after step {step}");
        }
    }
}

#[test]
fn expansion_shares_scores_with_neighbours_decayed_by_distance() {
    let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
    for i in 0..5 {
        turn(&mut c, &mut l, 10 + i, Some("t"), i, "turn");
    }
    turn(&mut c, &mut l, 99, None, 0, "plain");
    let mut fused = vec![
        Fused { docno: 12, score: 1.0, lexical: Some(3.0), vector: None, expansion: None },
        Fused { docno: 99, score: 0.9, lexical: Some(2.0), vector: None, expansion: None },
    ];
    let p = Expansion { weight: 0.5, window: 2, sum: false };
    let added = expand(&mut fused, &c, p, 10, &|d| d != 14);
    assert_eq!(added, 3, "11, 13 and 10 enter; 14 is filtered out");
    let score = |d: u64| fused.iter().find(|f| f.docno == d).map(|f| f.score);
    assert_eq!(score(12), Some(1.0));
    assert_eq!(score(99), Some(0.9), "a memory without neighbours keeps its score");
    assert_eq!(score(11), Some(0.5));
    assert_eq!(score(13), Some(0.5));
    assert_eq!(score(10), Some(0.25));
    assert_eq!(score(14), None);
    assert_eq!(fused.iter().map(|f| f.docno).collect::<Vec<_>>(), vec![12, 99, 11, 13, 10]);
}

/// Non-empty expanded lists by term, and the expanded total length.
fn snapshot(x: &ExpandedIndex) -> (std::collections::BTreeMap<String, Vec<Posting>>, u64) {
    let lists = x
        .ids
        .iter()
        .map(|(t, id)| {
            let l = &x.lists[*id as usize];
            (t.clone(), l.postings.clone())
        })
        .filter(|(_, l)| !l.is_empty())
        .collect();
    (lists, x.total_len)
}

/// A thread of four turns, its expanded postings and their snapshot encoding.
fn four_turns() -> (SpaceCatalog, Lexicon, ExpandedIndex, Vec<u8>) {
    let mut c = SpaceCatalog::default();
    let mut l = Lexicon::default();
    for (i, text) in ["red apples", "green apples and pears", "ripe red pears", "apples"].iter().enumerate() {
        turn(&mut c, &mut l, i as u64 + 1, Some("t"), i as u64, text);
    }
    let x = ExpandedIndex::build(&c, &l, 1);
    let mut bytes = Vec::new();
    x.write_to(&mut bytes).unwrap();
    (c, l, x, bytes)
}

#[test]
fn a_damaged_snapshot_of_the_expanded_postings_is_an_error_not_a_panic() {
    let (c, _, x, bytes) = four_turns();
    let back = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
    assert_eq!(snapshot(&back), snapshot(&x));
    assert!(back.postings() > 10 && back.postings() == x.postings());
    for cut in 0..bytes.len() {
        let mut r = crate::index::bytes::Reader::new(&bytes[..cut]);
        assert!(ExpandedIndex::read_from(&mut r).is_err(), "cut at {cut}");
    }
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[at] ^= flip;
            // The own texts are decoded at the first change: neither that nor the change panics.
            if let Ok(mut x) = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&b)) {
                let mut pending = Pending::default();
                x.note(&c, 2, c.get(2), &mut pending);
                x.finish(&c, pending);
            }
        }
    }
}

#[test]
fn own_texts_stay_encoded_until_a_change_and_damaged_ones_mark_the_index() {
    let (_, _, x, bytes) = four_turns();
    let mut back = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
    assert!(back.own.is_empty() && back.own_encoded.is_some());
    // Written back as read, without decoding.
    let mut again = Vec::new();
    back.write_to(&mut again).unwrap();
    assert_eq!(again, bytes);
    back.own_texts();
    assert_eq!((&back.own, back.own_encoded.is_none(), back.is_damaged()), (&x.own, true, false));
    // Decoded off the index: installed while still encoded, not after a change decoded them.
    let mut back = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
    let (job, late) = (back.encoded_own().unwrap().decode(), back.encoded_own().unwrap().decode());
    back.take_own(job);
    assert_eq!((&back.own, back.own_encoded.is_none(), back.is_damaged()), (&x.own, true, false));
    assert!(back.encoded_own().is_none());
    back.set_own(1, None);
    back.take_own(late);
    assert!(!back.own.contains_key(&1) && back.own.len() == x.own.len() - 1);

    let mut damaged = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
    let (docs, b) = damaged.own_encoded.clone().unwrap();
    assert_eq!(docs, 4);
    let mut b = b.to_vec();
    // Document 1, "red apples": gap, length, term count and two (id gap, tf): the next docno gap is byte 7;
    // 0 puts the documents out of order.
    b[7] = 0;
    damaged.own_encoded = Some((docs, b.into()));
    assert!(!damaged.is_damaged());
    let apples = analyse("apples").0;
    damaged.set_own(5, Some((&apples, 1)));
    assert!(damaged.is_damaged());
}

fn doc(docno: u64, thread: Option<u8>, ordinal: u64, latest: bool) -> DocMeta {
    let mut m = Memory::with_defaults(format!("m{docno}"), "s".into(), "x".into(), Timestamp(0));
    if let Some(t) = thread {
        m.source_thread_id = Some(format!("t{t}"));
        m.metadata =
            Metadata(serde_json::json!({"source_message_indices": [ordinal]}).as_object().cloned().unwrap_or_default());
    }
    m.is_latest = latest;
    DocMeta::of(&m, Default::default())
}

/// [`put_doc`] when `batch` is 1, else [`put_doc_batched`] into `p`.
#[allow(clippy::too_many_arguments)]
fn put_in(
    batch: usize,
    c: &mut SpaceCatalog,
    l: &mut Lexicon,
    x: Option<&mut ExpandedIndex>,
    p: &mut Pending,
    d: u64,
    m: DocMeta,
    t: Option<(&[(String, u32)], u32)>,
) {
    if batch == 1 { put_doc(c, l, x, d, m, t) } else { put_doc_batched(c, l, x, p, d, m, t) }
}

/// [`remove_doc`] when `batch` is 1, else [`remove_doc_batched`] into `p`.
fn remove_in(
    batch: usize,
    c: &mut SpaceCatalog,
    l: &mut Lexicon,
    x: Option<&mut ExpandedIndex>,
    p: &mut Pending,
    d: u64,
    t: Option<(&[String], u32)>,
) {
    if batch == 1 { remove_doc(c, l, x, d, t) } else { remove_doc_batched(c, l, x, p, d, t) }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
    /// The materialised expanded postings, kept up to date through inserts, text changes, moves, documents
    /// leaving their sequence and removals, equal a rebuild from scratch; and the pruned blended search over
    /// them equals the exhaustive context-expanded scoring (documents, order, scores to the bit), with the
    /// documents in one of a scan's windows of docnos or spread over several.
    #[test]
    fn expanded_postings_follow_changes_and_pruned_search_equals_exhaustive(
        ops in proptest::collection::vec(
            (0u64..30, 0u8..6, 0u8..3, 0u64..10, proptest::collection::vec(0u8..8, 0..5)), 1..90),
        query in proptest::collection::vec(0u8..9, 1..4),
        k in 1usize..12,
        window in 1usize..3,
        beta in proptest::prop_oneof![proptest::strategy::Just(1.0f32), proptest::strategy::Just(0.9f32), proptest::strategy::Just(0.5f32)],
        batch in 1usize..9,
        spread in proptest::prop_oneof![proptest::strategy::Just(1u64), proptest::strategy::Just(97u64)],
    ) {
        let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
        let mut x = ExpandedIndex::build(&c, &l, window);
        let mut texts: std::collections::HashMap<u64, (Vec<(String, u32)>, u32)> = Default::default();
        // Batches of `batch` changes, each finished once (1: every change on its own, through put_doc and
        // remove_doc).
        let mut pending = Pending::default();
        for (i, (docno, kind, thread, ordinal, words)) in ops.into_iter().enumerate() {
            // Spread over several of a scan's windows of docnos, or all in one.
            let docno = docno * spread;
            if i % batch == 0 {
                x.finish(&c, std::mem::take(&mut pending));
            }
            let text = analyse(&words.iter().map(|w| format!("w{w}")).collect::<Vec<_>>().join(" "));
            let old = texts.get(&docno).map(|(t, len)| (t.iter().map(|x| x.0.clone()).collect::<Vec<_>>(), *len));
            match kind {
                0 => {
                    remove_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, old.as_ref().map(|(t, len)| (t.as_slice(), *len)));
                    texts.remove(&docno);
                }
                1 | 2 => {
                    if let Some((t, len)) = &old {
                        remove_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, Some((t.as_slice(), *len)));
                    }
                    let meta = doc(docno, (kind == 2).then_some(thread), ordinal, true);
                    put_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, meta, Some((&text.0, text.1)));
                    texts.insert(docno, text);
                }
                // A move, or leaving the sequence (superseded), without a change of text.
                3 | 4 if old.is_some() => {
                    put_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, doc(docno, Some(thread), ordinal, kind == 3), None);
                }
                _ => {
                    // An entry of the catalog alone (a memory whose text is not indexed yet).
                    if old.is_none() {
                        put_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, doc(docno, Some(thread), ordinal, true), None);
                    }
                }
            }
        }
        x.finish(&c, pending);
        proptest::prop_assert_eq!(snapshot(&x), snapshot(&ExpandedIndex::build(&c, &l, window)));
        proptest::prop_assert_eq!(x.total_len, expanded_total_len(&c, &l, window));
        // The snapshot encoding gives back the same index.
        let mut bytes = Vec::new();
        x.write_to(&mut bytes).unwrap();
        let mut r = crate::index::bytes::Reader::new(&bytes);
        let mut back = ExpandedIndex::read_from(&mut r).unwrap();
        proptest::prop_assert!(r.done());
        back.own_texts();
        proptest::prop_assert!(!back.is_damaged());
        proptest::prop_assert_eq!(snapshot(&back), snapshot(&x));
        proptest::prop_assert_eq!(
            (&back.ids, &back.own, back.window, back.lists.len()),
            (&x.ids, &x.own, x.window, x.lists.len())
        );
        for list in &x.lists {
            for p in &list.postings {
                let mut one = super::super::bm25::TfBounds::default();
                one.add(p.tf, p.doc_len);
                let params = Bm25Params::default();
                proptest::prop_assert!(
                    one.max_score(params, 1.0, 1, 10.0) <= list.bounds.max_score(params, 1.0, 1, 10.0)
                );
            }
        }

        let mut qtf = std::collections::BTreeMap::new();
        for w in &query {
            *qtf.entry(format!("w{w}")).or_insert(0u32) += 1;
        }
        let params = Bm25Params::default();
        let lists: Vec<(u32, &[Posting])> = qtf.iter().map(|(t, n)| (*n, l.postings(t))).collect();
        let avg = if l.docs == 0 { 1.0 } else { x.total_len as f32 / l.docs as f32 };
        let accept = |d: u64| d % 4 != 1;
        let expanded = score_context(params, avg, &lists, &c, &l, window, &accept);
        let own = super::super::bm25::score(params, l.docs, l.avg_len(), &lists, &accept);
        let mut want: Vec<(u64, f32)> = expanded
            .iter()
            .map(|(d, e)| {
                if beta >= 1.0 {
                    (*d, *e)
                } else {
                    let o = own.iter().find(|x| x.0 == *d).map_or(0.0, |x| x.1);
                    (*d, (1.0 - beta) * o + beta * e)
                }
            })
            .collect();
        want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        want.truncate(k);
        use super::super::bm25::{Combine, score_doc, top_k};
        let combine = if beta >= 1.0 { Combine::Expanded } else { Combine::Blend(beta) };
        let terms: Vec<(&str, u32)> = qtf.iter().map(|(t, n)| (t.as_str(), *n)).collect();
        let scored = x.scored(&l, &terms, beta < 1.0);
        let got = top_k(params, &scored, combine, k, &accept);
        proptest::prop_assert_eq!(&got, &want);
        // Split by docno (at a window's start, and at a docno that is not): the parts' merge is the same.
        let window = 1u64 << super::super::bm25::BLOCK_SHIFT;
        for at in [&[window][..], &[5], &[17], &[5, 17, window]] {
            let got = super::super::bm25::tests::split_in_both_orders(&scored, combine, k, &accept, at);
            proptest::prop_assert_eq!(&got, &want);
        }
        for (d, s) in &want {
            proptest::prop_assert_eq!(score_doc(params, &scored, combine, *d), *s);
        }
        // Many at once (fusion's union): the same bits, every document of the space and one past them.
        let mut docnos: Vec<u64> = c.iter().map(|(d, _)| d).chain([0, u64::MAX - 1]).collect();
        docnos.sort_unstable();
        docnos.dedup();
        let many = super::super::bm25::score_docs(params, &scored, combine, &docnos);
        for (d, s) in docnos.iter().zip(&many) {
            proptest::prop_assert_eq!(score_doc(params, &scored, combine, *d).to_bits(), s.to_bits(), "docno {}", d);
        }
    }
}
