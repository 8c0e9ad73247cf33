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
        store.create_memory(NewMemory { id: Some(format!("m{i:02}")), content: text, ..Default::default() }).unwrap();
    }
    // An update replaces the memory's postings: the old text must not stay a candidate.
    store
        .update_memory(
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
        let hits = store.search(&q).unwrap().hits;
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
    let want = sorted_desc(store.search(&q).unwrap().hits.iter().filter_map(|h| h.vector_score).collect());
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
    let alice = store.resolve_entity("Alice Johnson").unwrap();
    let bob = store.resolve_entity("Bob Smith").unwrap();
    let (a, b) = if alice.id < bob.id { (&alice.id, &bob.id) } else { (&bob.id, &alice.id) };
    let edge = edges.iter().find(|e| &e.a == a && &e.b == b).expect("Alice and Bob are mentioned together");
    let both = store.entity_memory_ids("default", &alice.id).unwrap();
    let bobs = store.entity_memory_ids("default", &bob.id).unwrap();
    let shared = both.iter().filter(|m| bobs.contains(m)).count() as u64;
    assert_eq!(edge.weight, shared, "weight = memories mentioning both");

    // Bytes per kind: every kind of the registry, the written ones non-empty.
    drop(rtx);
    let st = store.storage_stats().unwrap();
    assert_eq!(st.tables.len(), engram::storage::tables::ALL.len());
    let bytes = |name: &str| st.tables.iter().find(|t| t.table == name).map(|t| t.stored_bytes);
    assert!(bytes("memories").unwrap() > 60 * 40, "{:?}", bytes("memories"));
    assert!(bytes("postings").unwrap() > 0);
    assert_eq!(bytes("source_files"), Some(0));
    assert!(st.file_bytes > 0);
}
