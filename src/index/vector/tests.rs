//! Tests of `vector` (beside it: `index/vector.rs`).

use super::*;

use crate::index::hnsw::tests::unit;

use half::vec::HalfFloatVecExt;

fn halves(v: &[f32]) -> Vec<f16> {
    Vec::from_f32_slice(v)
}

proptest::proptest! {
    /// The dispatched kernel (AVX2 and FMA where the CPU has them) and the portable loop agree to float
    /// rounding on every length, tails of 1..=31 floats included, and clamp to -1..=1.
    #[test]
    fn dot_kernels_agree(v in proptest::collection::vec((-1.0f32..1.0, -1.0f32..1.0), 0..400)) {
        let (a, b): (Vec<f32>, Vec<f32>) = v.into_iter().unzip();
        let exact: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
        let want = exact.clamp(-1.0, 1.0);
        proptest::prop_assert!((f64::from(cosine(&a, &b)) - want).abs() < 1e-4);
        proptest::prop_assert!((f64::from(dot_portable(&a, &b).clamp(-1.0, 1.0)) - want).abs() < 1e-4);
    }

    /// The half-precision kernels give, bit for bit, the `f32` kernel's cosine of the widened vectors, on the
    /// dispatched path and on the portable one, on every length (tails past the 64-component chunks included).
    #[test]
    fn half_kernels_equal_the_widened_f32_kernel(v in proptest::collection::vec((-1.0f32..1.0, -1.0f32..1.0), 0..400)) {
        let (a, b): (Vec<f32>, Vec<f32>) = v.into_iter().unzip();
        let (ha, hb) = (halves(&a), halves(&b));
        let (wa, wb) = (ha.to_f32_vec(), hb.to_f32_vec());
        proptest::prop_assert_eq!(cosine_half(&a, &hb).to_bits(), cosine(&a, &wb).to_bits());
        proptest::prop_assert_eq!(cosine_halves(&ha, &hb).to_bits(), cosine(&wa, &wb).to_bits());
        let portable = dot_portable(&a, &wb).to_bits();
        proptest::prop_assert_eq!(dot::dot_half_portable(&a, &hb, |x, out| out.copy_from_slice(x)).to_bits(), portable);
        let portable = dot_portable(&wa, &wb).to_bits();
        proptest::prop_assert_eq!(dot::dot_half_portable(&ha, &hb, |x, out| x.convert_to_f32_slice(out)).to_bits(), portable);
    }
}

#[test]
fn pending_slots_give_their_room_back_once_emptied() {
    let mut v = SpaceVectors::new(4, VectorParams::default());
    let items: Vec<(u64, Vec<f32>)> = (0..3 * INSERT_CHUNK as u64).map(|d| (d, vec![d as f32; 4])).collect();
    v.insert_batch(&items);
    let full = v.heap_bytes();
    for d in 10..3 * INSERT_CHUNK as u64 {
        v.remove(d);
    }
    v.shrink();
    assert_eq!(v.len(), 10);
    assert!(v.slot_docno.capacity() < 2 * INSERT_CHUNK, "capacity {}", v.slot_docno.capacity());
    assert_eq!(v.arena.blocks(), 1);
    assert!(v.heap_bytes() < full / 4, "{} of {full} bytes kept", v.heap_bytes());
    assert_eq!(v.get(7), Some(vec![7.0; 4]));
}

#[test]
fn cosine_of_unit_vectors_and_different_lengths() {
    let v = unit(7, 384);
    assert!((cosine(&v, &v) - 1.0).abs() < 1e-6);
    let w: Vec<f32> = v.iter().map(|x| -x).collect();
    assert!((cosine(&v, &w) + 1.0).abs() < 1e-6);
    // Compared over the shorter length: the first 8 floats of v against themselves.
    assert!((cosine(&v[..8], &v) - v[..8].iter().map(|x| x * x).sum::<f32>()).abs() < 1e-6);
    assert_eq!(cosine(&[], &v), 0.0);
}

#[test]
fn live_point_bits_follow_the_map() {
    let mut live = LivePoints::default();
    live.insert(7, 3);
    live.insert(8, 200);
    assert!(live.is_live(3) && live.is_live(200) && !live.is_live(4) && !live.is_live(100_000));
    live.insert(7, 5); // the document moved to another point: the old one is a tombstone
    assert!(!live.is_live(3) && live.is_live(5));
    assert_eq!(live.remove(&8), Some(200));
    assert!(!live.is_live(200));
    assert_eq!(live.remove(&8), None);
    assert_eq!((live.len(), live.get(&7)), (1, Some(&5)));
}

#[test]
fn a_staged_graph_takes_its_vectors_in_any_order_and_pends_the_rest() {
    // Points out of docno order (inserted shuffled), vectors then given in docno order, some out of order,
    // one missing (deleted after the save) and some new (written after the save).
    let params = VectorParams { hnsw_min_points: 100, ..VectorParams::default() };
    let mut saved = SpaceVectors::new(16, params);
    let mut docnos: Vec<u64> = (0..300).map(|i| i * 3).collect();
    docnos.sort_by_key(|d| (d * 7919) % 301);
    saved.insert_batch(&docnos.iter().map(|d| (*d, unit(*d, 16))).collect::<Vec<_>>());
    saved.build_now();
    let (bytes, _) = saved.graph_bytes(1, "e").expect("a changed graph has bytes");
    let mut idx = SpaceVectors::new(16, params);
    idx.stage_attach(&bytes, "e", 1).expect("stages");
    let mut given: Vec<u64> = (0..300).map(|i| i * 3).filter(|d| *d != 30).chain([1000, 1001]).collect();
    given.swap(10, 200);
    for d in &given {
        idx.insert_loaded(*d, |slot| {
            slot.convert_from_f32_slice(&unit(*d, 16));
            true
        });
    }
    // A stored vector of another length is skipped (the slot refuses it).
    idx.insert_loaded(2000, |slot| slot.len() == 3);
    let stats = idx.finish_attach().expect("attaches");
    assert_eq!((stats.points, stats.live, stats.pending), (300, 299, 2));
    let all = |_: u64| true;
    for d in [0, 3, 597, 1000, 1001, given[10], given[200]] {
        assert_eq!(idx.search(&unit(d, 16), 1, &all, None)[0].docno, d, "docno {d}");
    }
    assert!(idx.search(&unit(30, 16), 5, &all, None).iter().all(|h| h.docno != 30), "the deleted one");
}

#[test]
fn graph_pending_and_exact_agree_and_removed_points_never_return() {
    let params = VectorParams { hnsw_min_points: 200, ..VectorParams::default() };
    let mut idx = SpaceVectors::new(32, params);
    let items: Vec<(u64, Vec<f32>)> = (0..600).map(|i| (i, unit(i, 32))).collect();
    idx.insert_batch(&items);
    assert!(!idx.has_graph(), "graphs are built by the builder, not on the write path");
    idx.build_now();
    assert!(idx.has_graph());
    // New vectors are pending, and found before the builder inserts them.
    let late: Vec<(u64, Vec<f32>)> = (600..650).map(|i| (i, unit(i, 32))).collect();
    idx.insert_batch(&late);
    assert_eq!(idx.pending(), 50);
    let all = |_: u64| true;
    assert_eq!(idx.search(&unit(625, 32), 1, &all, None)[0].docno, 625);
    for d in 0..100 {
        idx.remove(d);
    }
    let mut agree = 0;
    for q in 0..20u64 {
        let query = unit(1000 + q, 32);
        let approx = idx.search(&query, 10, &all, None);
        let exact = idx.exact(&query, 10, &all);
        assert_eq!(approx.len(), 10);
        assert!(approx.iter().all(|h| h.docno >= 100));
        agree += approx.iter().filter(|h| exact.iter().any(|e| e.docno == h.docno)).count();
    }
    assert!(agree >= 180, "recall too low: {agree}/200");
    idx.build_now();
    assert_eq!(idx.pending(), 0);
    let only_even = |d: u64| d.is_multiple_of(2);
    let hits = idx.search(&unit(7, 32), 10, &only_even, Some(275));
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|h| h.docno % 2 == 0));
    let one = |d: u64| d == 333;
    assert_eq!(idx.search(&unit(9, 32), 10, &one, None).len(), 1);
    // A document given a new vector: its old point is a tombstone, before and after the next build.
    idx.remove(150);
    idx.insert_batch(&[(150, unit(5000, 32))]);
    for round in 0..2 {
        let hits = idx.search(&unit(150, 32), 10, &all, None);
        assert!(hits.iter().all(|h| h.docno != 150 || h.score < 0.99), "round {round}: the old vector of 150");
        let hits = idx.search(&unit(5000, 32), 10, &all, None);
        assert_eq!((hits[0].docno, hits.iter().filter(|h| h.docno == 150).count()), (150, 1), "round {round}");
        idx.build_now();
    }
}

/// A backlog larger than the graph is inserted into it in chunks, not rebuilt (a rebuild copied every vector once
/// more while the old graph and the backlog were still held), and a space's first graph takes at most
/// FIRST_BUILD vectors, the lowest document numbers.
#[test]
fn backlogs_are_inserted_and_the_first_build_is_bounded() {
    let mut big = SpaceVectors::new(2, VectorParams { hnsw_min_points: 16, ..VectorParams::default() });
    let items: Vec<(u64, Vec<f32>)> = (0..(FIRST_BUILD + 100) as u64).rev().map(|d| (d, unit(d, 2))).collect();
    big.insert_batch(&items);
    match big.plan() {
        Some(GraphWork::Build(s)) => {
            assert_eq!(s.docnos, (0..FIRST_BUILD as u64).collect::<Vec<_>>());
            assert_eq!((s.vectors.len(), s.vectors.get(7)), (FIRST_BUILD, Some(halves(&unit(7, 2)).as_slice())));
        }
        _ => panic!("a first build"),
    }
    big.abandon();

    let mut idx = SpaceVectors::new(16, VectorParams { hnsw_min_points: 64, ..VectorParams::default() });
    idx.insert_batch(&(0..100).map(|i| (i, unit(i, 16))).collect::<Vec<_>>());
    idx.build_now();
    idx.insert_batch(&(100..1100).map(|i| (i, unit(i, 16))).collect::<Vec<_>>());
    match idx.plan() {
        Some(GraphWork::Insert(_, items)) => assert_eq!(items.docnos.len(), 1000),
        _ => panic!("an insert of the backlog"),
    }
    idx.abandon();
    idx.build_now();
    assert_eq!((idx.pending(), idx.len()), (0, 1100));
    let all = |_: u64| true;
    for d in [0, 99, 100, 640, 1099] {
        assert_eq!(idx.search(&unit(d, 16), 1, &all, None)[0].docno, d);
    }
}

/// Searches run while a graph links an insert (only the allocation of its points holds them off), see every
/// point whole, and find the inserted points once it returns.
#[test]
fn searches_run_beside_an_insert() {
    let params = VectorParams::default();
    let snapshot = Snapshot {
        dim: 16,
        docnos: (0..600).collect(),
        vectors: VectorBlocks::from_flat(16, &(0..600).flat_map(|i| unit(i, 16)).collect::<Vec<f32>>()),
    };
    let graph = Arc::new(Graph::build(params, snapshot, &|| false).expect("built"));
    let done = Arc::new(AtomicBool::new(false));
    let searcher = {
        let (graph, done) = (graph.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !done.load(Ordering::Acquire) || rounds == 0 {
                let q = unit(rounds % 600, 16);
                let hits = graph.inner.read().search(&q, 5, 64, None);
                assert!(hits.len() == 5 && hits.iter().all(|h| h.1.is_finite()), "round {rounds}: {hits:?}");
                rounds += 1;
            }
            rounds
        })
    };
    let late: Vec<(u64, Vec<f32>)> = (600..1600).map(|i| (i, unit(i, 16))).collect();
    let points = graph.insert(&Snapshot::of(16, &late), &|| std::thread::yield_now());
    done.store(true, Ordering::Release);
    assert!(searcher.join().expect("no panic while linking") > 0);
    assert_eq!(points, (600..1600).collect::<Vec<u32>>());
    let g = graph.inner.read();
    let found = (600..1600u64).filter(|&d| g.search(&unit(d, 16), 1, 64, None)[0].0 == d as u32).count();
    assert!(found >= 980, "{found} of 1000 inserted points are their own nearest");
}
