//! Changing the embedder of a store: background re-embedding on a real redb file, lexical search meanwhile,
//! `reindex_needed` on memories not yet done, progress in `health()`, resumption after a restart, and no
//! vector of the old model left in the index.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use engram::embed::{Embedder, HashEmbedder, InputType};
use engram::{KnowledgeStore, MemoryFilter, NewMemory, SearchMode, SearchQuery, StoreConfig};

/// A user-supplied embedder of another name and dimension (the built-in one at 64 dimensions) whose batch
/// calls (more than one text: the re-embedding worker's) wait for permits, so that the test can look at the
/// store in the middle of a run. Single texts (queries, single writes) pass at once.
struct Gated {
    inner: HashEmbedder,
    permits: Arc<(Mutex<usize>, Condvar)>,
    batches: AtomicUsize,
}

impl Gated {
    fn new(permits: usize) -> Arc<Self> {
        Arc::new(Gated {
            inner: HashEmbedder::new(64),
            permits: Arc::new((Mutex::new(permits), Condvar::new())),
            batches: AtomicUsize::new(0),
        })
    }
    fn release(&self, n: usize) {
        let (m, cv) = &*self.permits;
        *m.lock().unwrap() += n;
        cv.notify_all();
    }
}

impl Embedder for Gated {
    fn name(&self) -> &str {
        "gated-test-embedder"
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str], t: InputType) -> engram::Result<Vec<Vec<f32>>> {
        if texts.len() > 1 {
            let (m, cv) = &*self.permits;
            let mut p = m.lock().unwrap();
            while *p == 0 {
                p = cv.wait(p).unwrap();
            }
            *p -= 1;
            self.batches.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.embed(texts, t)
    }
}

fn query(q: &str, mode: SearchMode) -> SearchQuery {
    SearchQuery {
        query: q.into(),
        space_id: "default".into(),
        limit: 5,
        filter: MemoryFilter::default(),
        mode,
        fusion: None,
        query_embedding: None,
        options: Default::default(),
    }
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("timed out waiting for {what}");
}

const N: usize = 200;

/// A store written with the hashing embedder (as every store was before the built-in static model).
fn seed(dir: &std::path::Path) {
    let store = KnowledgeStore::open(StoreConfig::new(dir).embedder(Arc::new(HashEmbedder::default()))).unwrap();
    let batch: Vec<NewMemory> = (0..N)
        .map(|i| NewMemory {
            id: Some(format!("m{i:03}")),
            content: format!("swimming lesson number {i} at the lake"),
            ..Default::default()
        })
        .collect();
    store.memories().create_many(batch).unwrap();
}

#[test]
fn a_new_embedder_re_embeds_in_the_background_and_search_is_lexical_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let gated = Gated::new(1);
    let store = KnowledgeStore::open(StoreConfig::new(dir.path()).embedder(gated.clone())).unwrap();

    // One batch (64 memories) went through; the worker now waits for the next permit.
    wait_until("the first batch", || store.admin().health().unwrap().reembed.done == 64);
    let h = store.admin().health().unwrap();
    assert_eq!((h.dim, h.memories, h.reindex_pending), (64, N, N - 64));
    assert!(h.reembed.running);
    assert_eq!(h.reembed.total, N as u64);
    assert_eq!(h.reembed.from.as_deref(), Some("engram-char3-hash-v1-256:256"));
    assert!(!store.memories().get("m000", None).unwrap().memory.reindex_needed);
    assert!(store.memories().get("m199", None).unwrap().memory.reindex_needed, "not yet re-embedded");
    assert!(store.memories().get("m000", None).unwrap().memory.last_reindexed_at.is_some());

    // Hybrid and vector searches answer from BM25 while vectors are incomplete, and say so.
    for mode in [SearchMode::Hybrid, SearchMode::Vector] {
        let r = store.search().run(&query("swimming lesson number 150", mode)).unwrap();
        assert_eq!(r.mode, SearchMode::Lexical);
        assert!(r.fallback.as_deref().unwrap_or("").contains("re-embedding"), "{:?}", r.fallback);
        assert_eq!(r.hits[0].view.memory.id, "m150");
        assert!(r.hits.iter().all(|h| h.vector_score.is_none()));
    }

    // A write meanwhile is embedded by the new model at once.
    let c = store
        .memories()
        .create(NewMemory { id: Some("fresh".into()), content: "kayak trip".into(), ..Default::default() })
        .unwrap();
    assert!(!c.view.memory.reindex_needed);

    gated.release(usize::MAX / 2);
    assert!(store.admin().wait_for_indexes(Duration::from_secs(60)));
    let h = store.admin().health().unwrap();
    assert_eq!((h.reindex_pending, h.reembed.running, h.reembed.done), (0, false, N as u64));
    assert!(h.reembed.error.is_none());
    assert!(!store.memories().get("m199", None).unwrap().memory.reindex_needed);

    // Every vector now comes from the new embedder: a memory's own text finds it first with cosine 1.
    let r = store.search().run(&query("swimming lesson number 150 at the lake", SearchMode::Vector)).unwrap();
    assert_eq!(r.mode, SearchMode::Vector);
    assert!(r.fallback.is_none());
    assert_eq!(r.hits[0].view.memory.id, "m150");
    assert!((r.hits[0].vector_score.unwrap() - 1.0).abs() < 1e-4);
    let own = gated.inner.embed(&["swimming lesson number 150 at the lake"], InputType::Document).unwrap();
    assert_eq!(own[0].len(), 64);
    assert_eq!(store.search().run(&query("kayak", SearchMode::Hybrid)).unwrap().hits[0].view.memory.id, "fresh");
}

#[test]
fn re_embedding_resumes_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    {
        let gated = Gated::new(1);
        let store = KnowledgeStore::open(StoreConfig::new(dir.path()).embedder(gated.clone())).unwrap();
        wait_until("the first batch", || store.admin().health().unwrap().reembed.done == 64);
        // Let the blocked batch finish so that the worker can see the stop flag; the store closes mid-run.
        gated.release(1);
        drop(store);
        assert!(gated.batches.load(Ordering::SeqCst) <= 2);
    }
    let gated = Gated::new(usize::MAX / 2);
    let store = KnowledgeStore::open(StoreConfig::new(dir.path()).embedder(gated.clone())).unwrap();
    let h = store.admin().health().unwrap();
    assert!(h.reembed.total > 0 && h.reembed.total <= (N - 64) as u64, "resumes with the rest: {:?}", h.reembed);
    assert_eq!(h.reembed.from, None, "the embedder was already recorded before the restart");
    assert!(store.admin().wait_for_indexes(Duration::from_secs(60)));
    let h = store.admin().health().unwrap();
    assert_eq!((h.reindex_pending, h.memories), (0, N));
    let still: Vec<String> = (0..N)
        .map(|i| format!("m{i:03}"))
        .filter(|id| store.memories().get(id, None).unwrap().memory.reindex_needed)
        .collect();
    assert!(still.is_empty(), "{still:?}");
}

#[test]
fn reopening_with_the_same_embedder_does_no_work() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let store = KnowledgeStore::open(StoreConfig::new(dir.path()).embedder(Arc::new(HashEmbedder::default()))).unwrap();
    let h = store.admin().health().unwrap();
    assert_eq!((h.reindex_pending, h.reembed.total, h.reembed.running), (0, 0, false));
}
