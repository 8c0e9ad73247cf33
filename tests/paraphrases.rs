//! Paraphrase retrieval with the built-in static model against the hashing embedder, on a real redb store
//! (`tests/common/paraphrases.rs`; MiniLM's figures on the same set are in `tests/model_embeddings.rs`).
//! Measured figures are in `docs/retrieval.md`; the floors here sit a little under them.

#[path = "common/paraphrases.rs"]
mod paraphrases;

use std::sync::Arc;

use engram::embed::{Embedder, HashEmbedder};
use engram::{KnowledgeStore, StoreConfig};

fn recall_with(embedder: Arc<dyn Embedder>) -> (f64, f64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KnowledgeStore::open(StoreConfig::new(dir.path()).embedder(embedder)).expect("open");
    paraphrases::recall(&store)
}

#[test]
fn the_static_model_finds_paraphrases_the_hashing_embedder_misses() {
    assert!(paraphrases::pairs().len() >= 60);
    let (s1, s5) = recall_with(engram::embed::builtin());
    let (h1, h5) = recall_with(Arc::new(HashEmbedder::default()));
    eprintln!("paraphrases, vector mode: static recall@1 {s1:.3} @5 {s5:.3}; hashing recall@1 {h1:.3} @5 {h5:.3}");
    assert!(s1 >= 0.70 && s5 >= 0.95, "static recall@1 {s1}, @5 {s5}");
    assert!(h1 <= 0.30, "the set shares no content word: hashing should find few ({h1})");
}
