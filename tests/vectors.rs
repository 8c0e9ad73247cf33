//! The vector path: caller-supplied vectors in a store with an external embedder (Rust and HTTP), and the saved
//! HNSW graph (attached at reopen with identical results, and never trusted when damaged).

#[cfg(feature = "server")]
mod common;
#[path = "common/splitmix.rs"]
mod splitmix;

use std::sync::Arc;
use std::time::Duration;

use engram::embed::ExternalEmbedder;
use engram::index::vector::VectorParams;
use engram::{
    ErrorKind, KnowledgeStore, MemoryFilter, MemoryPatch, NewMemory, SearchMode, SearchQuery, SearchResults,
    StoreConfig,
};

fn external(dir: &std::path::Path, dim: usize) -> KnowledgeStore {
    let emb = Arc::new(ExternalEmbedder::new(dim).unwrap());
    KnowledgeStore::open(StoreConfig::new(dir).embedder(emb)).unwrap()
}

fn query(text: &str, vector: Option<Vec<f32>>, mode: SearchMode) -> SearchQuery {
    SearchQuery {
        query: text.into(),
        space_id: "default".into(),
        limit: 10,
        filter: MemoryFilter::default(),
        mode,
        fusion: None,
        query_embedding: vector,
        options: Default::default(),
    }
}

fn ids(r: &SearchResults) -> Vec<String> {
    r.hits.iter().map(|h| h.view.memory.id.clone()).collect()
}

fn mem(id: &str, content: &str, v: Option<Vec<f32>>) -> NewMemory {
    NewMemory { id: Some(id.into()), content: content.into(), embedding: v, ..Default::default() }
}

#[test]
fn caller_supplied_vectors_are_stored_searched_validated_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = external(dir.path(), 3);
    store.memories().create(mem("a", "alpha notes about rivers", Some(vec![1.0, 0.0, 0.0]))).unwrap();
    store.memories().create(mem("b", "beta notes about mountains", Some(vec![0.0, 2.0, 0.0]))).unwrap();
    store.memories().create(mem("c", "gamma notes without a vector", None)).unwrap();

    // By vector: the nearest first, whatever the words say.
    let r = store.search().run(&query("rivers", Some(vec![0.1, 0.9, 0.0]), SearchMode::Vector)).unwrap();
    assert_eq!(ids(&r), ["b", "a"], "only memories with a vector are in the vector ranking");
    assert!((r.hits[0].vector_score.unwrap() - 0.9939).abs() < 1e-3, "{:?}", r.hits[0].vector_score);
    assert!(r.fallback.is_none());
    // Without a query vector: lexical, and said so.
    let r = store.search().run(&query("gamma", None, SearchMode::Hybrid)).unwrap();
    assert_eq!(ids(&r), ["c"]);
    assert!(r.fallback.as_deref().unwrap_or_default().contains("no query_embedding"), "{:?}", r.fallback);
    // Vector-only query: empty text is fine when a vector is given.
    let r = store.search().run(&query("", Some(vec![1.0, 0.0, 0.0]), SearchMode::Hybrid)).unwrap();
    assert_eq!(ids(&r)[0], "a");

    // Bad vectors: each a validation error naming the field, and nothing stored.
    let bad: [(Vec<f32>, &str); 4] = [
        (vec![1.0, 0.0], "embedding_dimension"),
        (vec![1.0, f32::NAN, 0.0], "embedding_not_finite"),
        (vec![f32::INFINITY, 0.0, 0.0], "embedding_not_finite"),
        (vec![0.0, 0.0, 0.0], "embedding_zero"),
    ];
    for (v, kind) in bad {
        let e = store.memories().create(mem("bad", "never stored", Some(v.clone()))).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let f = &e.fields()[0];
        assert_eq!((f.loc[0].as_str(), f.kind.as_str()), (Some("embedding"), kind), "{e}");
        assert_eq!(store.memories().read("bad", None).unwrap_err().kind(), ErrorKind::NotFound);
        let e = store.search().run(&query("x", Some(v), SearchMode::Hybrid)).unwrap_err();
        assert_eq!(e.fields()[0].loc[0].as_str(), Some("query_embedding"));
    }
    // In a batch the error names the item; none of the batch is stored.
    let e = store
        .memories()
        .create_many(vec![mem("ok1", "fine", Some(vec![0.0, 0.0, 1.0])), mem("bad2", "bad", Some(vec![1.0]))])
        .unwrap_err();
    assert_eq!(e.fields()[0].loc, vec![serde_json::json!(1), "embedding".into()]);
    assert_eq!(store.memories().read("ok1", None).unwrap_err().kind(), ErrorKind::NotFound);

    // Update: a new vector re-ranks; a content change without one keeps the old vector.
    store
        .memories()
        .update("a", MemoryPatch { embedding: Some(vec![0.0, 0.0, 1.0]), ..Default::default() }, None)
        .unwrap();
    let r = store.search().run(&query("", Some(vec![0.0, 0.0, 1.0]), SearchMode::Vector)).unwrap();
    assert_eq!(ids(&r)[0], "a");
    store
        .memories()
        .update("a", MemoryPatch { content: Some("alpha edited".into()), ..Default::default() }, None)
        .unwrap();
    let r = store.search().run(&query("", Some(vec![0.0, 0.0, 1.0]), SearchMode::Vector)).unwrap();
    assert_eq!(ids(&r)[0], "a", "the caller's vector survives a text edit");
    assert_eq!(store.admin().health().unwrap().reindex_pending, 0, "nothing to re-embed in an external store");
    drop(store);

    // Reopened: the vectors are still there.
    let store = external(dir.path(), 3);
    let r = store.search().run(&query("", Some(vec![0.0, 1.0, 0.0]), SearchMode::Vector)).unwrap();
    assert_eq!(ids(&r), ["b", "a"]);
    drop(store);

    // A store whose model embeds by itself refuses given vectors.
    let own = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(own.path())).unwrap();
    let e = store.memories().create(mem("x", "text", Some(vec![1.0; 256]))).unwrap_err();
    assert_eq!(e.fields()[0].kind, "embedding_not_accepted");
    assert_eq!(store.memories().read("x", None).unwrap_err().kind(), ErrorKind::NotFound);
    let e = store.search().run(&query("text", Some(vec![1.0; 256]), SearchMode::Hybrid)).unwrap_err();
    assert_eq!(e.fields()[0].kind, "embedding_not_accepted");
}

#[test]
fn export_and_import_keep_caller_supplied_vectors() {
    let a_dir = tempfile::tempdir().unwrap();
    let a = external(a_dir.path(), 3);
    a.memories().create(mem("x", "first", Some(vec![1.0, 0.0, 0.0]))).unwrap();
    a.memories().create(mem("y", "second", Some(vec![0.0, 1.0, 0.0]))).unwrap();
    a.memories().create(mem("z", "third, no vector", None)).unwrap();
    let archive = a_dir.path().join("out.zip");
    let opts = engram::ExportOptions {
        path: Some(archive.clone()),
        compress: true,
        overwrite: true,
        include: engram::Include::default(),
        encrypt: None,
    };
    a.transfer().export(&opts).unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let b = external(b_dir.path(), 3);
    let in_b = b_dir.path().join("in.zip");
    std::fs::copy(&archive, &in_b).unwrap();
    b.transfer().import(&in_b, engram::ImportMode::Merge, &engram::ImportProgress::default()).unwrap();
    for (q, want) in [(vec![0.1, 0.9, 0.0], ["y", "x"]), (vec![0.9, 0.1, 0.0], ["x", "y"])] {
        let r = b.search().run(&query("", Some(q), SearchMode::Vector)).unwrap();
        assert_eq!(ids(&r), want, "the imported store ranks by the exported vectors");
    }
    let stats = &b.admin().vector_index_stats()[0];
    assert_eq!(stats.vectors, 2, "the memory without a vector stays without one");
    // A store of another dimension imports the memories and leaves the vectors out.
    let c_dir = tempfile::tempdir().unwrap();
    let c = external(c_dir.path(), 4);
    let in_c = c_dir.path().join("in.zip");
    std::fs::copy(&archive, &in_c).unwrap();
    c.transfer().import(&in_c, engram::ImportMode::Merge, &engram::ImportProgress::default()).unwrap();
    assert_eq!(c.admin().vector_index_stats()[0].vectors, 0);
    assert_eq!(c.memories().read("y", None).unwrap().memory.content, "second");
}

#[cfg(feature = "server")]
#[test]
fn http_takes_vectors_and_answers_422_for_bad_ones_without_storing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(external(dir.path(), 4));
    let srv = common::server_on(dir.path(), store, 1 << 20);
    let ok = common::call(&srv, "POST", "/memories", Some(r#"{"id":"n","content":"north","embedding":[1,0,0,0]}"#));
    assert_eq!(ok.status, 200, "{}", ok.body);
    let ok = common::call(&srv, "POST", "/memories", Some(r#"{"id":"s","content":"south","embedding":[0,1,0,0]}"#));
    assert_eq!(ok.status, 200, "{}", ok.body);
    let r = common::call(
        &srv,
        "POST",
        "/memories/search",
        Some(r#"{"query":"","query_embedding":[0,1,0.2,0],"retrieval":"vector"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j[0]["memory"]["id"], "s", "{j}");
    assert!((j[0]["similarity_score"].as_f64().unwrap() - 0.98058).abs() < 1e-4, "{j}");
    let r = common::call(&srv, "GET", "/memories/search?q=north", None).json();
    assert_eq!(r["memories"][0]["id"], "n", "{r}");
    assert_eq!(r["search_metadata"]["fallback_status"]["degraded"], true, "{r}");
    for body in [
        r#"{"id":"bad","content":"x","embedding":[1,0]}"#,
        r#"{"id":"bad","content":"x","embedding":[0,0,0,0]}"#,
        r#"{"id":"bad","content":"x","embedding":[1e39,0,0,0]}"#,
        r#"{"id":"bad","content":"x","embedding":"not a list"}"#,
    ] {
        let r = common::call(&srv, "POST", "/memories", Some(body));
        assert_eq!(r.status, 422, "{body}: {}", r.body);
        assert!(r.json()["detail"][0]["loc"].to_string().contains("embedding"), "{body}: {}", r.body);
    }
    assert_eq!(common::call(&srv, "GET", "/memories/bad", None).status, 404);
    let r = common::call(&srv, "PATCH", "/memories/n", Some(r#"{"embedding":[1,2,3]}"#));
    assert_eq!(r.status, 422, "{}", r.body);
    let r = common::call(&srv, "POST", "/memories/search", Some(r#"{"query":"x","query_embedding":[1]}"#));
    assert_eq!(r.status, 422);
    assert!(r.body.contains("query_embedding"), "{}", r.body);
    // Batches: all or none, errors name the item.
    let bad = r#"{"memories":[{"id":"b1","content":"one","embedding":[1,0,0,0]},{"id":"b2","content":"two","embedding":[1,0]}]}"#;
    let r = common::call(&srv, "POST", "/memories/batch", Some(bad));
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(r.json()["detail"][0]["loc"], serde_json::json!(["body", "memories", 1, "embedding"]), "{}", r.body);
    assert_eq!(common::call(&srv, "GET", "/memories/b1", None).status, 404, "nothing of a bad batch is stored");
    let good = r#"{"memories":[{"id":"b1","content":"one","embedding":[0,0,1,0]},{"id":"b2","content":"two","embedding":[0,0,0,1]}]}"#;
    let r = common::call(&srv, "POST", "/memories/batch", Some(good));
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(
        (j["memories"][0]["memory"]["id"].as_str(), j["memories"][1]["action"].as_str()),
        (Some("b1"), Some("created"))
    );
    let r = common::call(
        &srv,
        "POST",
        "/memories/search",
        Some(r#"{"query":"","query_embedding":[0,0,0,1],"retrieval":"vector"}"#),
    );
    assert_eq!(r.json()[0]["memory"]["id"], "b2");
    assert_eq!(common::call(&srv, "POST", "/memories/batch", Some(r#"{"memories":[]}"#)).status, 422);
    // No model to embed with.
    let r = common::call(&srv, "POST", "/v1/embeddings", Some(r#"{"input":"hello","model":"x"}"#));
    assert_eq!(r.status, 503, "{}", r.body);
}

/// A store whose spaces get a graph at 300 vectors, searched with `ef_search` 1,000: above the point count, the
/// walk never fills its candidate list and visits the whole graph, so graph searches are exact and two graphs
/// (the saved one and a rebuilt one) rank alike.
fn graph_config(dir: &std::path::Path) -> StoreConfig {
    StoreConfig {
        vector: VectorParams { hnsw_min_points: 300, ef_search: 1000, ..VectorParams::default() },
        ..StoreConfig::new(dir)
    }
}

fn fill(store: &KnowledgeStore, n: usize) {
    let words = ["river", "mountain", "garden", "piano", "harbour", "lantern", "orchard", "violin", "glacier"];
    let batch: Vec<NewMemory> = (0..n)
        .map(|i| NewMemory {
            id: Some(format!("m{i}")),
            content: format!(
                "{} {} {} note {i}",
                words[i % words.len()],
                words[(i / 3) % words.len()],
                words[(i / 7) % words.len()]
            ),
            ..Default::default()
        })
        .collect();
    store.memories().create_many(batch).unwrap();
}

fn probe(store: &KnowledgeStore) -> Vec<Vec<(String, u32)>> {
    ["river piano", "glacier orchard note 17", "lantern", "violin harbour 200", "garden mountain"]
        .iter()
        .flat_map(|q| [SearchMode::Vector, SearchMode::Hybrid].map(|m| (q, m)))
        .map(|(q, m)| {
            let r = store.search().run(&query(q, None, m)).unwrap();
            r.hits.iter().map(|h| (h.view.memory.id.clone(), (h.score * 1e4).round() as u32)).collect()
        })
        .collect()
}

/// Equal rankings up to ties: the same scores in order, and the same ids above the last (tied) score.
fn assert_same_up_to_ties(a: &[Vec<(String, u32)>], b: &[Vec<(String, u32)>], what: &str) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        let scores = |l: &[(String, u32)]| l.iter().map(|h| h.1).collect::<Vec<_>>();
        assert_eq!(scores(x), scores(y), "{what}");
        let last = x.last().map_or(0, |h| h.1);
        let above = |l: &[(String, u32)]| {
            let mut v: Vec<String> = l.iter().filter(|h| h.1 > last).map(|h| h.0.clone()).collect();
            v.sort();
            v
        };
        assert_eq!(above(x), above(y), "{what}");
    }
}

fn graph_file(dir: &std::path::Path) -> std::path::PathBuf {
    let files: Vec<_> = std::fs::read_dir(dir.join("hnsw")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

#[test]
fn the_saved_graph_is_attached_at_reopen_with_identical_results_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(graph_config(dir.path())).unwrap();
    fill(&store, 1200);
    assert!(store.admin().wait_for_indexes(Duration::from_secs(120)));
    let stats = &store.admin().vector_index_stats()[0];
    assert_eq!((stats.graph_points, stats.pending), (1200, 0), "{stats:?}");
    let before = probe(&store);
    drop(store);
    assert!(graph_file(dir.path()).exists());

    let store = KnowledgeStore::open(graph_config(dir.path())).unwrap();
    let stats = &store.admin().vector_index_stats()[0];
    assert_eq!((stats.graph_points, stats.pending, stats.vectors), (1200, 0, 1200), "attached at open: {stats:?}");
    assert_eq!(probe(&store), before, "identical results after a reopen with the saved graph");
    // Writes after the save: deleted memories become tombstones, new ones are caught up.
    for i in 0..10 {
        store.memories().delete(&format!("m{i}"), None).unwrap();
    }
    store
        .memories()
        .create(NewMemory { id: Some("late".into()), content: "river piano late".into(), ..Default::default() })
        .unwrap();
    assert!(store.admin().wait_for_indexes(Duration::from_secs(60)));
    let r = store.search().run(&query("river piano late", None, SearchMode::Vector)).unwrap();
    assert_eq!(ids(&r)[0], "late");
    assert!(!ids(&r).iter().any(|id| ["m0", "m1", "m2"].contains(&id.as_str())));
    let after_writes = probe(&store);
    drop(store);

    // Reopen after those writes: the graph saved at close has the tombstones and the late memory.
    let store = KnowledgeStore::open(graph_config(dir.path())).unwrap();
    let stats = &store.admin().vector_index_stats()[0];
    assert_eq!((stats.graph_points, stats.tombstones, stats.pending), (1201, 10, 0), "{stats:?}");
    assert_eq!(probe(&store), after_writes);
}

#[test]
fn a_damaged_graph_file_is_never_trusted_and_searches_stay_correct() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(graph_config(dir.path())).unwrap();
    fill(&store, 800);
    assert!(store.admin().wait_for_indexes(Duration::from_secs(120)));
    let reference = probe(&store);
    drop(store);
    let path = graph_file(dir.path());
    let good = std::fs::read(&path).unwrap();
    let mut rng = splitmix::SplitMix(0x5EED_0017);
    for trial in 0..12 {
        let mut bytes = good.clone();
        match trial % 3 {
            // Flip bytes at random offsets.
            0 => {
                for _ in 0..1 + rng.below(4) {
                    let at = rng.below(bytes.len());
                    bytes[at] ^= 1 + rng.below(255) as u8;
                }
            }
            // Truncate at a random offset.
            1 => bytes.truncate(rng.below(bytes.len())),
            // Overwrite a random range with garbage.
            _ => {
                let at = rng.below(bytes.len());
                for b in bytes.iter_mut().skip(at).take(64) {
                    *b = rng.below(256) as u8;
                }
            }
        }
        if bytes == good {
            continue;
        }
        std::fs::write(&path, &bytes).unwrap();
        let store = KnowledgeStore::open(graph_config(dir.path())).unwrap();
        let stats = &store.admin().vector_index_stats()[0];
        assert!(stats.graph_points == 0 || stats.graph_points == 800, "trial {trial}: {stats:?}");
        assert_same_up_to_ties(&probe(&store), &reference, &format!("trial {trial}: with a damaged file"));
        assert!(store.admin().wait_for_indexes(Duration::from_secs(120)));
        assert_same_up_to_ties(&probe(&store), &reference, &format!("trial {trial}: after the rebuild"));
        drop(store);
        // The rebuilt graph was saved over the damaged one and is attached at the next open.
        assert_ne!(std::fs::read(&path).unwrap(), bytes, "trial {trial}");
        let store = KnowledgeStore::open(graph_config(dir.path())).unwrap();
        assert_eq!(store.admin().vector_index_stats()[0].graph_points, 800, "trial {trial}");
        drop(store);
    }
}
