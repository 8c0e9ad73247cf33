//! The paraphrase retrieval set (`tests/fixtures/paraphrases.jsonl`): 64 memory/query pairs over everyday
//! topics where the query shares no content word with its memory ("coffee habits" against "She drinks a double
//! espresso every morning"). Every memory goes in one space and every query runs in vector mode.

use engram::{KnowledgeStore, MemoryFilter, NewMemory, SearchMode, SearchQuery};

/// The pairs, as (memory, query).
pub fn pairs() -> Vec<(String, String)> {
    include_str!("../fixtures/paraphrases.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            (v["memory"].as_str().expect("memory").to_string(), v["query"].as_str().expect("query").to_string())
        })
        .collect()
}

/// Stores every memory of the set in `store`'s default space and returns (recall@1, recall@5) of the queries
/// in vector mode: the share of queries whose own memory is the first hit, or among the first five.
pub fn recall(store: &KnowledgeStore) -> (f64, f64) {
    let pairs = pairs();
    let memories = pairs
        .iter()
        .enumerate()
        .map(|(i, (m, _))| NewMemory { id: Some(format!("p{i}")), content: m.clone(), ..Default::default() })
        .collect();
    store.memories().create_many(memories).expect("store the memories");
    let (mut at1, mut at5) = (0, 0);
    for (i, (_, q)) in pairs.iter().enumerate() {
        let r = store
            .search()
            .run(&SearchQuery {
                query: q.clone(),
                space_id: "default".into(),
                limit: 5,
                filter: MemoryFilter::default(),
                mode: SearchMode::Vector,
                fusion: None,
                query_embedding: None,
                options: Default::default(),
            })
            .expect("search");
        let want = format!("p{i}");
        let ids: Vec<&str> = r.hits.iter().map(|h| h.view.memory.id.as_str()).collect();
        at1 += usize::from(ids.first() == Some(&want.as_str()));
        at5 += usize::from(ids.contains(&want.as_str()));
    }
    (at1 as f64 / pairs.len() as f64, at5 as f64 / pairs.len() as f64)
}
