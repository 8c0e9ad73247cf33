//! The storage port's coarse primitives against the store above them, on the conformance backend: BM25
//! candidates given term lists score exactly as the store's lexical search, vector candidates given a query
//! vector score as its vector search, and the edge stream holds the entity co-mention graph the store reports.
//! A second backend must pass the same bodies (issue 19).

mod backend;

use engram::index::bm25::Bm25Params;
use engram::{MemoryFilter, NewMemory, SearchMode, SearchOptions, SearchQuery};

const TOPICS: [&str; 6] = ["harbour", "lighthouse", "orchard", "violin", "glacier", "bakery"];
const PEOPLE: [&str; 4] = ["Alice Johnson", "Bob Smith", "Carol Davis", "Dave Brown"];

fn corpus() -> Vec<String> {
    (0..60)
        .map(|i| {
            let a = TOPICS[i % 6];
            let b = TOPICS[(i * 7 + 3) % 6];
            let p = PEOPLE[i % 4];
            let q = PEOPLE[(i / 4) % 4];
            let extra = if i % 5 == 0 { format!(" The {a} {a} again, and the {a}.") } else { String::new() };
            format!("{p} talked with {q} about the {a} near the {b} on day {i}.{extra}")
        })
        .collect()
}

fn sorted_desc(mut v: Vec<f32>) -> Vec<f32> {
    v.sort_by(|a, b| b.total_cmp(a));
    v
}

#[test]
fn candidates_and_edges_agree_with_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    for (i, text) in corpus().into_iter().enumerate() {
        store
            .memories()
            .create(NewMemory { id: Some(format!("m{i:02}")), content: text, ..Default::default() })
            .unwrap();
    }
    // An update replaces the memory's postings: the old text must not stay a candidate.
    store
        .memories()
        .update(
            "m07",
            engram::MemoryPatch { content: Some("A violin lesson in the orchard.".into()), ..Default::default() },
            None,
        )
        .unwrap();
    let rtx = store.storage().read().unwrap();

    // Lexical: the same BM25 scores, for every matching memory.
    for query in ["harbour", "violin orchard", "glacier bakery lighthouse", "Alice harbour harbour", "nothing"] {
        let mut q = SearchQuery::new(query).limit(100).mode(SearchMode::Lexical);
        q.options = SearchOptions::OWN_TEXT;
        q.options.priors = Some(false);
        q.filter = MemoryFilter::default();
        let hits = store.search().run(&q).unwrap().hits;
        let want = sorted_desc(hits.iter().filter_map(|h| h.lexical_score).collect());
        let (terms, _) = engram::index::lexicon::analyse(query);
        let got = rtx.lexical_candidates("default", &terms, Bm25Params::default(), 100).unwrap();
        assert_eq!(got.len(), want.len(), "{query}: {got:?} vs {want:?}");
        for (g, w) in got.iter().zip(&want) {
            assert!((g.1 - w).abs() <= 1e-5 * w.abs().max(1.0), "{query}: {} vs {w}", g.1);
        }
        if query == "nothing" {
            assert!(got.is_empty());
        } else {
            assert!(!got.is_empty(), "{query}");
        }
        // Best first, then by docno.
        assert!(got.windows(2).all(|w| w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0)));
    }

    // Vector: exact cosine over the stored vectors equals the store's vector scores.
    let query = "a violin in the orchard";
    let qv = store.config().embedder.embed(&[query], engram::embed::InputType::Query).unwrap().remove(0);
    let got = rtx.vector_candidates("default", &qv, 5).unwrap();
    let mut q = SearchQuery::new(query).limit(5).mode(SearchMode::Vector);
    q.options = SearchOptions::OWN_TEXT;
    q.options.priors = Some(false);
    let want = sorted_desc(store.search().run(&q).unwrap().hits.iter().filter_map(|h| h.vector_score).collect());
    assert_eq!((got.len(), want.len()), (5, 5));
    for (g, w) in got.iter().zip(&want) {
        assert!((g.1 - w).abs() < 1e-4, "{} vs {w}", g.1);
    }
    assert!(got.windows(2).all(|w| w[0].1 >= w[1].1));
    assert!(rtx.vector_candidates("no-such-space", &qv, 5).unwrap().is_empty());

    // Edges: each co-mention pair once, with the store's weights.
    let mut edges = Vec::new();
    rtx.relates_edges(|e| edges.push(e)).unwrap();
    assert!(!edges.is_empty());
    assert!(edges.iter().all(|e| e.a < e.b && e.weight >= 1 && e.space == "default"));
    let alice = store.graph().resolve_entity("Alice Johnson").unwrap();
    let bob = store.graph().resolve_entity("Bob Smith").unwrap();
    let (a, b) = if alice.id < bob.id { (&alice.id, &bob.id) } else { (&bob.id, &alice.id) };
    let edge = edges.iter().find(|e| &e.a == a && &e.b == b).expect("Alice and Bob are mentioned together");
    let both = store.graph().entity_memory_ids("default", &alice.id).unwrap();
    let bobs = store.graph().entity_memory_ids("default", &bob.id).unwrap();
    let shared = both.iter().filter(|m| bobs.contains(m)).count() as u64;
    assert_eq!(edge.weight, shared, "weight = memories mentioning both");

    // Bytes per kind: every kind of the registry, the written ones non-empty.
    drop(rtx);
    let st = store.admin().storage_stats().unwrap();
    assert_eq!(st.tables.len(), engram::storage::tables::ALL.len());
    let bytes = |name: &str| st.tables.iter().find(|t| t.table == name).map(|t| t.stored_bytes);
    assert!(bytes("memories").unwrap() > 60 * 40, "{:?}", bytes("memories"));
    assert!(bytes("postings").unwrap() > 0);
    assert_eq!(bytes("source_files"), Some(0));
    assert!(st.file_bytes > 0);
}

/// The port's per-kind calls on the conformance backend, beyond what a store's workload reaches: scans longer
/// than a page (the PostgreSQL backend fetches 256 rows at a time) from the front, from the back and from both
/// ends at once; bounded ranges with inclusive and exclusive ends; `u64::MAX` as a bound; `insert` returning the
/// value it replaced; `remove`; `retain_in`; `len`, `first` and `last`. Rows go to a space of their own in the
/// reviews kind (keys `(space, id)`, values bytes), which nothing of the store reads here.
#[test]
fn per_kind_calls_keep_key_order_across_pages_and_both_ends() {
    use engram::storage::tables::{POSTINGS, REVIEWS};
    use engram::storage::{Durability, Got, Readable};
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let db = store.storage();
    let keys: Vec<String> = (0..600).map(|i| format!("k{i:04}")).collect();
    let w = db.write(Durability::Immediate).unwrap();
    {
        let mut t = w.table(REVIEWS).unwrap();
        for (i, k) in keys.iter().enumerate() {
            assert!(t.insert(("zz", k.as_str()), [i as u8, 7].as_slice()).unwrap().is_none());
        }
        // Neighbouring spaces bound the scans.
        t.insert(("zy", "k9999"), [1u8].as_slice()).unwrap();
        t.insert(("zzz", "k0000"), [2u8].as_slice()).unwrap();
        let old = t.insert(("zz", "k0005"), [5u8, 5].as_slice()).unwrap().map(|v| v.value().to_vec());
        assert_eq!(old, Some(vec![5, 7]), "insert returns the value it replaced");
        let mut p = w.table(POSTINGS).unwrap();
        for d in [0u64, 1, 2, 1 << 40, (1 << 62) + 3] {
            p.insert(("zz", "term", d), d).unwrap();
        }
    }
    w.commit().unwrap();

    let r = db.read().unwrap();
    let t = r.table(REVIEWS).unwrap();
    type Row<'a> = (Got<'a, (&'static str, &'static str)>, Got<'a, &'static [u8]>);
    fn scan<'a>(rows: impl Iterator<Item = engram::Result<Row<'a>>>) -> Vec<String> {
        rows.map(|row| {
            let (k, _) = row.unwrap();
            let (s, id) = k.value();
            format!("{s}/{id}")
        })
        .collect()
    }
    let want: Vec<String> = keys.iter().map(|k| format!("zz/{k}")).collect();
    assert_eq!(scan(t.range(("zz", "")..("zz", "\u{10FFFF}")).unwrap()), want);
    let mut rev = want.clone();
    rev.reverse();
    assert_eq!(scan(t.range(("zz", "")..("zz", "\u{10FFFF}")).unwrap().rev()), rev);
    // Both ends at once: every row exactly once, in order from each end.
    let mut rows = t.range(("zz", "")..("zz", "\u{10FFFF}")).unwrap();
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        let a = rows.next().map(|r| r.unwrap().0.value().1.to_string());
        let b = rows.next_back().map(|r| r.unwrap().0.value().1.to_string());
        if a.is_none() && b.is_none() {
            break;
        }
        front.extend(a);
        back.extend(b);
    }
    back.reverse();
    front.extend(back);
    assert_eq!(front, keys);
    // Inclusive and exclusive ends.
    let mid = scan(t.range(("zz", "k0100")..=("zz", "k0399")).unwrap());
    assert_eq!((mid.len(), mid[0].as_str(), mid[299].as_str()), (300, "zz/k0100", "zz/k0399"));
    assert_eq!(scan(t.range(("zz", "k0100")..("zz", "k0399")).unwrap()).len(), 299);
    assert_eq!(t.get(("zz", "k0005")).unwrap().map(|v| v.value().to_vec()), Some(vec![5, 5]));
    assert_eq!(t.len().unwrap(), 602);
    assert_eq!(t.first().unwrap().map(|(k, _)| k.value().0.to_string()), Some("zy".into()));
    assert_eq!(t.last().unwrap().map(|(k, _)| k.value().0.to_string()), Some("zzz".into()));
    // u64::MAX as an upper bound takes every docno; a lower bound above every stored one takes none.
    let p = r.table(POSTINGS).unwrap();
    let docnos: Vec<u64> =
        p.range(("zz", "term", 0u64)..=("zz", "term", u64::MAX)).unwrap().map(|row| row.unwrap().0.value().2).collect();
    assert_eq!(docnos, [0, 1, 2, 1 << 40, (1 << 62) + 3]);
    assert_eq!(p.range(("zz", "term", u64::MAX)..).unwrap().filter(|r| r.is_ok()).count(), 0);
    drop((t, p, r));

    let w = db.write(Durability::Immediate).unwrap();
    {
        let mut t = w.table(REVIEWS).unwrap();
        t.retain_in(("zz", "")..("zz", "\u{10FFFF}"), |k, _| !k.1.ends_with(['0', '2', '4', '6', '8'])).unwrap();
        assert_eq!(t.remove(("zz", "k0001")).unwrap().map(|v| v.value().to_vec()), Some(vec![1, 7]));
        assert!(t.remove(("zz", "k0001")).unwrap().is_none());
    }
    w.commit().unwrap();
    let r = db.read().unwrap();
    let t = r.table(REVIEWS).unwrap();
    let left = scan(t.range(("zz", "")..("zz", "\u{10FFFF}")).unwrap());
    assert_eq!(left.len(), 299);
    assert!(left.iter().all(|k| k.ends_with(['1', '3', '5', '7', '9'])));
    assert_eq!(t.len().unwrap(), 301, "the neighbouring spaces stay");
}

/// The batched reads (on PostgreSQL one statement each): `get_many` answers every key in the order asked,
/// `None` for a missing one and the same value twice for a repeated one, in a read transaction and in a write
/// transaction that sees its own held-back puts; `prefix_many` gives each key's prefix scan in key order,
/// stopping at the prefix's end (a neighbouring id that extends the prefix's text is not part of it), and an
/// empty list for a prefix with no record. Both equal the one-at-a-time calls.
#[test]
fn batched_reads_answer_each_key_in_order_as_single_reads_do() {
    use engram::storage::tables::{MEMORY_LABELS, POSTINGS, REVIEWS};
    use engram::storage::{Durability, Readable};
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let db = store.storage();
    let w = db.write(Durability::Immediate).unwrap();
    {
        let mut t = w.table(REVIEWS).unwrap();
        for i in 0..40u8 {
            t.put(("bq", format!("r{i:02}").as_str()), [i, 1].as_slice()).unwrap();
        }
        // Read back in the same transaction, before the held-back puts were sent.
        let got = t.get_many(&[("bq", "r03"), ("bq", "nope"), ("bq", "r39")]).unwrap();
        let got: Vec<Option<Vec<u8>>> = got.iter().map(|g| g.as_ref().map(|v| v.value().to_vec())).collect();
        assert_eq!(got, vec![Some(vec![3, 1]), None, Some(vec![39, 1])]);
        let mut l = w.table(MEMORY_LABELS).unwrap();
        for (m, labels) in [("m1", &["b", "a", "c"][..]), ("m10", &["z"][..]), ("m2", &["a"][..])] {
            for lab in labels {
                l.put(("bq", m, *lab), ()).unwrap();
            }
        }
        l.put(("bqz", "m1", "other-space"), ()).unwrap();
        let mut p = w.table(POSTINGS).unwrap();
        for d in [5u64, 9, 1 << 40] {
            p.put(("bq", "term", d), d * 2).unwrap();
        }
    }
    w.commit().unwrap();

    let r = db.read().unwrap();
    let t = r.table(REVIEWS).unwrap();
    let keys: Vec<String> = ["r07", "r00", "missing", "r07", "r2"].iter().map(|s| s.to_string()).collect();
    let asked: Vec<(&str, &str)> = keys.iter().map(|k| ("bq", k.as_str())).collect();
    let many: Vec<Option<Vec<u8>>> =
        t.get_many(&asked).unwrap().iter().map(|g| g.as_ref().map(|v| v.value().to_vec())).collect();
    let single: Vec<Option<Vec<u8>>> = asked.iter().map(|k| t.get(*k).unwrap().map(|v| v.value().to_vec())).collect();
    assert_eq!(many, single);
    assert_eq!(many, vec![Some(vec![7, 1]), Some(vec![0, 1]), None, Some(vec![7, 1]), None]);
    assert!(t.get_many(&[]).unwrap().is_empty());

    let l = r.table(MEMORY_LABELS).unwrap();
    let scans = l.prefix_many(&[("bq", "m1", ""), ("bq", "m3", ""), ("bq", "m2", ""), ("bq", "m10", "")], 2).unwrap();
    let labels: Vec<Vec<String>> =
        scans.iter().map(|rows| rows.iter().map(|(k, _)| k.value().2.to_string()).collect()).collect();
    assert_eq!(labels, vec![vec!["a", "b", "c"], vec![], vec!["a"], vec!["z"]]);
    let p = r.table(POSTINGS).unwrap();
    let docs = p.prefix_many(&[("bq", "term", 0u64), ("bq", "none", 0u64)], 2).unwrap();
    let docs: Vec<Vec<(u64, u64)>> =
        docs.iter().map(|rows| rows.iter().map(|(k, v)| (k.value().2, v.value())).collect()).collect();
    assert_eq!(docs, vec![vec![(5, 10), (9, 18), (1 << 40, 1 << 41)], vec![]]);
    let whole = p.prefix_many(&[("bq", "term", 9u64)], 3).unwrap();
    assert_eq!(whole[0].iter().map(|(k, _)| k.value().2).collect::<Vec<_>>(), [9]);
}

/// `Table::put` (on PostgreSQL held back and sent in one statement per run of puts): the transaction reads its
/// own puts at once, from the same kind and after writes of another; a later put of a key wins; a run longer
/// than one statement's worth is whole; a dropped transaction stores none of them; a put PostgreSQL cannot store
/// fails inside the transaction and leaves nothing.
#[test]
fn puts_are_read_back_in_their_transaction_and_stored_whole_or_not_at_all() {
    use engram::storage::tables::{POSTINGS, REVIEWS};
    use engram::storage::{Durability, Readable};
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let db = store.storage();
    let w = db.write(Durability::Immediate).unwrap();
    {
        let mut t = w.table(REVIEWS).unwrap();
        for i in 0..2500u32 {
            t.put(("pp", format!("k{i:05}").as_str()), i.to_le_bytes().as_slice()).unwrap();
        }
        t.put(("pp", "k00007"), [9u8].as_slice()).unwrap();
        assert_eq!(t.get(("pp", "k00007")).unwrap().unwrap().value(), [9u8].as_slice(), "the later put wins");
        let mut p = w.table(POSTINGS).unwrap();
        p.put(("pp", "term", 5u64), 77u64).unwrap();
        t.put(("pp", "k99999"), [1u8].as_slice()).unwrap();
        assert_eq!(p.get(("pp", "term", 5u64)).unwrap().unwrap().value(), 77);
        assert_eq!(t.get(("pp", "k99999")).unwrap().unwrap().value(), [1u8].as_slice());
        assert_eq!(t.range(("pp", "")..("pp", "\u{10FFFF}")).unwrap().count(), 2501);
    }
    w.commit().unwrap();
    let r = db.read().unwrap();
    let t = r.table(REVIEWS).unwrap();
    assert_eq!(t.range(("pp", "")..("pp", "\u{10FFFF}")).unwrap().count(), 2501);
    assert_eq!(t.get(("pp", "k02499")).unwrap().unwrap().value(), 2499u32.to_le_bytes().as_slice());
    drop((t, r));

    // `clear` empties the kind and nothing else.
    let w = db.write(Durability::Immediate).unwrap();
    w.table(REVIEWS).unwrap().clear().unwrap();
    assert_eq!(w.table(REVIEWS).unwrap().len().unwrap(), 0);
    assert_eq!(w.table(POSTINGS).unwrap().get(("pp", "term", 5u64)).unwrap().unwrap().value(), 77);
    w.commit().unwrap();
    assert_eq!(db.read().unwrap().table(REVIEWS).unwrap().len().unwrap(), 0);

    // Dropped without a commit: nothing.
    let w = db.write(Durability::Immediate).unwrap();
    w.table(REVIEWS).unwrap().put(("dropped", "a"), [1u8].as_slice()).unwrap();
    drop(w);
    assert!(db.read().unwrap().table(REVIEWS).unwrap().get(("dropped", "a")).unwrap().is_none());

    // A key PostgreSQL cannot hold (U+0000) fails at the latest at commit; redb stores it.
    let w = db.write(Durability::Immediate).unwrap();
    let put = w.table(REVIEWS).unwrap().put(("nul", "a\u{0}b"), [1u8].as_slice());
    let outcome = put.and_then(|()| w.commit());
    // (A key with U+0000 cannot even be looked up on PostgreSQL: count the space's rows.)
    let stored =
        db.read().unwrap().table(REVIEWS).unwrap().range(("nul", "")..("nul", "\u{10FFFF}")).unwrap().count() == 1;
    if db.backend() == "postgres" {
        assert_eq!(outcome.unwrap_err().kind(), engram::ErrorKind::InvalidInput);
        assert!(!stored);
    } else {
        assert!(outcome.is_ok() && stored);
    }
}

/// A write transaction's point reads (on PostgreSQL answered from what the transaction wrote or read before,
/// with no statement) agree with the stored state at every step: a put, an `insert` returning the value it
/// replaced, a `remove`, a `retain_in` that deletes by a scan, keys never written; a scan sees the held-back
/// puts. On PostgreSQL the puts of three kinds and the reads of their keys send nothing until the commit, which
/// sends them in one statement before `COMMIT`.
#[test]
fn a_write_transaction_reads_its_own_writes_and_sends_them_together_at_commit() {
    use engram::storage::tables::{MEMORY_LABELS, POSTINGS, REVIEWS};
    use engram::storage::{Durability, Readable};
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let db = store.storage();
    let w = db.write(Durability::Immediate).unwrap();
    w.table(REVIEWS).unwrap().put(("kc", "stored"), [5u8].as_slice()).unwrap();
    w.table(REVIEWS).unwrap().put(("kc", "gone"), [6u8].as_slice()).unwrap();
    w.commit().unwrap();

    let w = db.write(Durability::Immediate).unwrap();
    let mut t = w.table(REVIEWS).unwrap();
    let mut p = w.table(POSTINGS).unwrap();
    let mut l = w.table(MEMORY_LABELS).unwrap();
    fn value(g: Option<engram::storage::Got<'_, &'static [u8]>>) -> Option<Vec<u8>> {
        g.map(|v| v.value().to_vec())
    }
    assert_eq!(value(t.get(("kc", "stored")).unwrap()), Some(vec![5]), "read from the store");
    #[cfg(feature = "postgres")]
    let before = engram::storage::postgres::statements_sent();
    t.put(("kc", "new"), [1u8].as_slice()).unwrap();
    p.put(("kc", "term", 3u64), 30u64).unwrap();
    l.put(("kc", "m", "a"), ()).unwrap();
    assert_eq!(value(t.get(("kc", "new")).unwrap()), Some(vec![1]));
    assert_eq!(value(t.get(("kc", "stored")).unwrap()), Some(vec![5]), "read again");
    assert_eq!(p.get(("kc", "term", 3u64)).unwrap().unwrap().value(), 30);
    assert!(l.get(("kc", "m", "a")).unwrap().is_some());
    let many: Vec<Option<Vec<u8>>> =
        t.get_many(&[("kc", "new"), ("kc", "stored")]).unwrap().into_iter().map(value).collect();
    assert_eq!(many, vec![Some(vec![1]), Some(vec![5])]);
    #[cfg(feature = "postgres")]
    if db.backend() == "postgres" {
        assert_eq!(engram::storage::postgres::statements_sent() - before, 0, "nothing sent before the commit");
    }
    // `insert` gives the value it replaces, read or written before, or stored.
    assert_eq!(value(t.insert(("kc", "new"), [2u8].as_slice()).unwrap()), Some(vec![1]));
    assert_eq!(value(t.insert(("kc", "gone"), [7u8].as_slice()).unwrap()), Some(vec![6]));
    assert_eq!(value(t.insert(("kc", "fresh"), [8u8].as_slice()).unwrap()), None);
    assert_eq!(value(t.remove(("kc", "gone")).unwrap()), Some(vec![7]));
    assert_eq!(value(t.get(("kc", "gone")).unwrap()), None, "removed");
    assert_eq!(value(t.get(("kc", "never")).unwrap()), None);
    // A scan sees the held-back puts; deleting by a scan leaves no stale answer behind.
    assert_eq!(t.range(("kc", "")..("kc", "\u{10FFFF}")).unwrap().count(), 3);
    t.retain_in(("kc", "")..("kc", "\u{10FFFF}"), |k, _| k.1 != "stored").unwrap();
    assert_eq!(value(t.get(("kc", "stored")).unwrap()), None, "deleted by the scan");
    assert_eq!(value(t.get(("kc", "new")).unwrap()), Some(vec![2]));
    p.put(("kc", "term", 4u64), 40u64).unwrap();
    l.put(("kc", "m", "b"), ()).unwrap();
    drop((t, p, l));
    #[cfg(feature = "postgres")]
    let before = engram::storage::postgres::statements_sent();
    w.commit().unwrap();
    #[cfg(feature = "postgres")]
    if db.backend() == "postgres" {
        assert_eq!(engram::storage::postgres::statements_sent() - before, 2, "one statement of writes, then COMMIT");
    }

    let r = db.read().unwrap();
    let t = r.table(REVIEWS).unwrap();
    let stored: Vec<(String, Vec<u8>)> = t
        .range(("kc", "")..("kc", "\u{10FFFF}"))
        .unwrap()
        .map(|row| {
            let (k, v) = row.unwrap();
            (k.value().1.to_string(), v.value().to_vec())
        })
        .collect();
    assert_eq!(stored, vec![("fresh".to_string(), vec![8]), ("new".to_string(), vec![2])]);
    assert_eq!(r.table(POSTINGS).unwrap().get(("kc", "term", 3u64)).unwrap().unwrap().value(), 30);
    assert_eq!(r.table(POSTINGS).unwrap().get(("kc", "term", 4u64)).unwrap().unwrap().value(), 40);
    assert_eq!(r.table(MEMORY_LABELS).unwrap().range(("kc", "m", "")..("kc", "m", "\u{10FFFF}")).unwrap().count(), 2);
}

/// On PostgreSQL, the statements one call sends (counted on the calling thread by the driver side,
/// `engram::storage::postgres::statements_sent`; background work counts on its own threads): a 10-hit hybrid
/// search reads its space with the query's entity keys and entities (asked for ahead), its candidates' MENTIONS
/// edges, its hits and their labels, in one read transaction, whatever the number of hits and entities;
/// a write of a memory naming three entities with two labels reads one statement per kind and sends its writes
/// in one (issue 36). On redb the test has nothing to count.
#[cfg(feature = "postgres")]
#[test]
fn on_postgres_a_search_and_a_write_send_one_statement_per_record_kind() {
    use engram::storage::postgres::statements_sent;
    if backend::Backend::current() != backend::Backend::Postgres {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let write = |i: usize| {
        store
            .memories()
            .create(NewMemory {
                content: format!(
                    "{} met {} in Paris to talk about the {} project, number {i}",
                    PEOPLE[i % 4],
                    PEOPLE[(i + 1) % 4],
                    TOPICS[i % 6]
                ),
                labels: Some(vec!["work".into(), TOPICS[i % 6].into()]),
                ..Default::default()
            })
            .unwrap()
    };
    for i in 0..24 {
        write(i);
    }
    let before = statements_sent();
    let res = store
        .search()
        .run(&SearchQuery {
            query: "Alice Johnson and Bob Smith in Paris, the orchard project".into(),
            ..Default::default()
        })
        .unwrap();
    let search = statements_sent() - before;
    assert_eq!(res.hits.len(), 10);
    assert!(res.hits.iter().all(|h| h.view.label_ids.len() == 2), "every hit carries its two labels");
    // BEGIN; the space with the query's entity keys and entities (read ahead); the candidates' MENTIONS edges; the
    // hits' records; their labels; ROLLBACK. 8 with a statement per kind.
    assert_eq!(search, 6, "statements of one 10-hit search");

    let before = statements_sent();
    let created = write(24);
    let written = statements_sent() - before;
    eprintln!("statements: search {search}, write {written}");
    let names: Vec<&str> = created.entities.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["Alice Johnson", "Bob Smith", "Paris"]);
    // Its transaction: BEGIN, one statement of reads asked for ahead (the two counters, the space, its BM25
    // statistics, labels, entity keys, entities, RELATES_TO weights), one statement of writes, COMMIT. Then the
    // duplicate review: a read transaction with its candidates' records, MENTIONS edges and entities (5), and
    // its events' bookkeeping write (BEGIN, the write, COMMIT). 12 when measured (23 with a read statement per
    // kind and the review's search in its own transaction; 44 with a statement per kind of writes, 100 or more
    // with the reads one record at a time).
    assert!(written <= 12, "statements of one write: {written}");
}

/// `WriteTx::read_ahead` changes no answer, on either backend: keys of three kinds asked for ahead (stored,
/// missing, and one the transaction writes before the reads) read back exactly as without it. On PostgreSQL the
/// first point read sends every asked key with its own in one statement, and the asked keys' reads after it
/// send none.
#[test]
fn keys_read_ahead_answer_as_the_store_holds_them() {
    use engram::storage::tables::{ENTITY_KEYS, LEX_STATS, MEMORY_LABELS, META};
    use engram::storage::{Durability, Readable};
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let db = store.storage();
    let w = db.write(Durability::Immediate).unwrap();
    w.table(ENTITY_KEYS).unwrap().put(("ra", "person:alice"), "ent_alice").unwrap();
    w.table(LEX_STATS).unwrap().put("ra", (7u64, 91u64)).unwrap();
    w.table(MEMORY_LABELS).unwrap().put(("ra", "m1", "label_a"), ()).unwrap();
    w.table(META).unwrap().put("ra_counter", 5u64.to_le_bytes().as_slice()).unwrap();
    w.commit().unwrap();

    let w = db.write(Durability::Immediate).unwrap();
    w.read_ahead(ENTITY_KEYS, &[("ra", "person:alice"), ("ra", "person:bob"), ("ra", "person:carol")]);
    w.read_ahead(LEX_STATS, &["ra", "nowhere"]);
    w.read_ahead(MEMORY_LABELS, &[("ra", "m1", "label_a"), ("ra", "m1", "label_b")]);
    // Written after the ask and before any read: the read gives the write, not what the store held.
    let mut keys = w.table(ENTITY_KEYS).unwrap();
    keys.put(("ra", "person:carol"), "ent_carol").unwrap();
    let meta = w.table(META).unwrap();
    let lex = w.table(LEX_STATS).unwrap();
    let labels = w.table(MEMORY_LABELS).unwrap();
    #[cfg(feature = "postgres")]
    let before = engram::storage::postgres::statements_sent();
    // The first point read: the asked keys travel with it.
    let counter = meta.get("ra_counter").unwrap().map(|v| v.value().to_vec());
    #[cfg(feature = "postgres")]
    let first = engram::storage::postgres::statements_sent() - before;
    assert_eq!(counter, Some(5u64.to_le_bytes().to_vec()));
    let found: Vec<Option<String>> = keys
        .get_many(&[("ra", "person:alice"), ("ra", "person:bob"), ("ra", "person:carol")])
        .unwrap()
        .into_iter()
        .map(|v| v.map(|v| v.value().to_string()))
        .collect();
    assert_eq!(found, [Some("ent_alice".to_string()), None, Some("ent_carol".to_string())]);
    assert_eq!(lex.get("ra").unwrap().map(|v| v.value()), Some((7, 91)));
    assert!(lex.get("nowhere").unwrap().is_none());
    assert!(labels.get(("ra", "m1", "label_a")).unwrap().is_some());
    assert!(labels.get(("ra", "m1", "label_b")).unwrap().is_none());
    #[cfg(feature = "postgres")]
    if db.backend() == "postgres" {
        assert_eq!(first, 1, "the asked keys of three kinds travel with the first point read");
        let after = engram::storage::postgres::statements_sent() - before;
        assert_eq!(after, 1, "the asked keys' reads send nothing after it");
    }
    drop((keys, meta, lex, labels));
    w.commit().unwrap();
    let r = db.read().unwrap();
    assert_eq!(r.table(ENTITY_KEYS).unwrap().get(("ra", "person:carol")).unwrap().unwrap().value(), "ent_carol");
}

/// `ReadTx::read_ahead` changes no answer either, and answers as of the read transaction's snapshot: keys asked
/// for ahead (stored and missing) read back as the store held them when the snapshot was taken, though a write
/// changed them after that, before the asked keys were sent. On PostgreSQL the first point read carries the asked
/// keys of both kinds, the asked keys' reads after it send nothing, and a key not asked for is read by a statement
/// each time (a read transaction keeps only what it read ahead).
#[test]
fn a_read_transaction_reads_ahead_as_of_its_snapshot() {
    use engram::storage::tables::{ENTITY_KEYS, LEX_STATS};
    use engram::storage::{Durability, Readable};
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let db = store.storage();
    let w = db.write(Durability::Immediate).unwrap();
    w.table(ENTITY_KEYS).unwrap().put(("rr", "person:alice"), "ent_alice").unwrap();
    w.table(LEX_STATS).unwrap().put("rr", (7u64, 91u64)).unwrap();
    w.table(LEX_STATS).unwrap().put("other", (1u64, 2u64)).unwrap();
    w.commit().unwrap();

    let r = db.read().unwrap();
    r.read_ahead(ENTITY_KEYS, &[("rr", "person:alice"), ("rr", "person:bob")]);
    r.read_ahead(LEX_STATS, &["rr"]);
    // Pins the snapshot on both backends (PostgreSQL's is taken at the transaction's first statement) by a range
    // read, which does not carry the asked keys.
    assert_eq!(r.table(LEX_STATS).unwrap().range("other"..="other").unwrap().count(), 1);
    let w = db.write(Durability::Immediate).unwrap();
    w.table(ENTITY_KEYS).unwrap().put(("rr", "person:bob"), "ent_bob").unwrap();
    w.table(LEX_STATS).unwrap().put("rr", (8u64, 99u64)).unwrap();
    w.commit().unwrap();

    let (keys, lex) = (r.table(ENTITY_KEYS).unwrap(), r.table(LEX_STATS).unwrap());
    #[cfg(feature = "postgres")]
    let before = engram::storage::postgres::statements_sent();
    let found: Vec<Option<String>> = keys
        .get_many(&[("rr", "person:alice"), ("rr", "person:bob")])
        .unwrap()
        .into_iter()
        .map(|v| v.map(|v| v.value().to_string()))
        .collect();
    assert_eq!(found, [Some("ent_alice".to_string()), None], "as of the snapshot");
    assert_eq!(lex.get("rr").unwrap().map(|v| v.value()), Some((7, 91)));
    #[cfg(feature = "postgres")]
    if db.backend() == "postgres" {
        assert_eq!(engram::storage::postgres::statements_sent() - before, 1, "one statement for both kinds");
    }
    #[cfg(feature = "postgres")]
    let before = engram::storage::postgres::statements_sent();
    for _ in 0..2 {
        assert_eq!(lex.get("other").unwrap().map(|v| v.value()), Some((1, 2)));
    }
    #[cfg(feature = "postgres")]
    if db.backend() == "postgres" {
        assert_eq!(engram::storage::postgres::statements_sent() - before, 2, "keys not asked for are not kept");
    }
    drop((keys, lex, r));
    let r = db.read().unwrap();
    assert_eq!(r.table(LEX_STATS).unwrap().get("rr").unwrap().map(|v| v.value()), Some((8, 99)));
}

/// Records put as new ([`engram::storage::Table::put_new`]): on PostgreSQL 1,500 of one kind in one flush go in
/// by `COPY` and 10 in the flush's one statement. Each is stored exactly, a held-back one reads back in its
/// transaction, and a later put of its key replaces it. A key that is stored already, put as new, fails the
/// write on both backends, below and above the `COPY` threshold, and leaves the store as it was.
#[test]
fn records_put_as_new_are_stored_in_bulk_and_never_replace_a_stored_one() {
    use engram::storage::tables::POSTINGS;
    use engram::storage::{Durability, Readable};
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let db = store.storage();
    let w = db.write(Durability::Immediate).unwrap();
    let mut p = w.table(POSTINGS).unwrap();
    for d in 0..1500u64 {
        p.put_new(("pn", "alpha", d), d * 3 + 1).unwrap();
    }
    assert_eq!(p.get(("pn", "alpha", 7)).unwrap().map(|v| v.value()), Some(22));
    p.put(("pn", "alpha", 7), 99u64).unwrap();
    for d in 0..10u64 {
        p.put_new(("pn", "beta", d), 1000 + d).unwrap();
    }
    p.put(("pn", "gamma", 1), 5u64).unwrap();
    assert_eq!(p.get(("pn", "beta", 9)).unwrap().map(|v| v.value()), Some(1009));
    drop(p);
    w.commit().unwrap();

    let stored = |term: &str| -> Vec<(u64, u64)> {
        let r = db.read().unwrap();
        let t = r.table(POSTINGS).unwrap();
        t.range(("pn", term, 0u64)..=("pn", term, u64::MAX))
            .unwrap()
            .map(|row| {
                let (k, v) = row.unwrap();
                (k.value().2, v.value())
            })
            .collect()
    };
    let alpha: Vec<(u64, u64)> = (0..1500u64).map(|d| (d, if d == 7 { 99 } else { d * 3 + 1 })).collect();
    let beta: Vec<(u64, u64)> = (0..10u64).map(|d| (d, 1000 + d)).collect();
    assert_eq!(stored("alpha"), alpha);
    assert_eq!(stored("beta"), beta);
    assert_eq!(stored("gamma"), [(1, 5)]);

    // A stored key put as new, after 5 (one statement) or 1,200 (COPY) new ones: the write fails whole.
    for (n, term) in [(5u64, "beta"), (1200, "alpha")] {
        let w = db.write(Durability::Immediate).unwrap();
        let mut p = w.table(POSTINGS).unwrap();
        let mut failed = false;
        for d in 0..n {
            failed |= p.put_new(("pn", term, 10_000 + d), 1u64).is_err();
        }
        failed |= p.put_new(("pn", term, 3), 12_345u64).is_err();
        drop(p);
        if !failed {
            failed = w.commit().is_err();
        }
        assert!(failed, "a stored key put as new fails the write ({n} new records before it)");
    }
    assert_eq!(stored("alpha"), alpha);
    assert_eq!(stored("beta"), beta);
}
