//! Conversation structure in retrieval, on a real redb file (and a real daemon for the HTTP surface):
//! per-message extraction, context-expanded BM25 kept right through edits and deletes of a neighbour, neighbour
//! expansion, `include_context` for thread and source memories within one space, and plain memories unchanged.

#[cfg(feature = "server")]
mod common;

use engram::{
    KnowledgeStore, Metadata, NewMemory, NewMessage, NewSource, NewSpace, NewThread, SearchHit, SearchMode,
    SearchOptions, SearchQuery, StoreConfig,
};

fn open(dir: &std::path::Path) -> KnowledgeStore {
    KnowledgeStore::open(StoreConfig::new(dir)).expect("open")
}

fn per_message_thread(store: &KnowledgeStore, space: &str, id: &str, lines: &[(&str, &str)]) -> Vec<String> {
    let mut md = serde_json::Map::new();
    md.insert("analysis".into(), engram::store::PER_MESSAGE.into());
    let messages = lines
        .iter()
        .map(|(who, text)| {
            let mut m = serde_json::Map::new();
            m.insert("speaker".into(), (*who).into());
            NewMessage {
                role: if *who == "Ann" { "user".into() } else { "assistant".into() },
                content: (*text).into(),
                timestamp: Some("2024-05-08T12:00:00Z".into()),
                metadata: Some(Metadata(m)),
            }
        })
        .collect();
    let created = store
        .threads()
        .create(NewThread {
            thread_id: Some(id.into()),
            messages,
            space_id: Some(space.into()),
            metadata: Some(Metadata(md)),
            ..Default::default()
        })
        .expect("thread");
    created.extraction.memories.iter().map(|m| m.view.memory.id.clone()).collect()
}

fn search(
    store: &KnowledgeStore,
    space: &str,
    q: &str,
    mode: SearchMode,
    options: SearchOptions,
) -> Vec<(String, f32)> {
    store
        .search()
        .run(&SearchQuery {
            query: q.into(),
            space_id: space.into(),
            limit: 10,
            filter: Default::default(),
            mode,
            fusion: None,
            query_embedding: None,
            options,
        })
        .expect("search")
        .hits
        .into_iter()
        .map(|h| (h.view.memory.id, h.score))
        .collect()
}

/// Thread `t1` of the default space stored turn by turn (`t1#m0`, ...) and a memory `plain` without a position.
fn thread_and_plain_memory(store: &KnowledgeStore, turns: &[(&str, &str)], plain: &str) {
    per_message_thread(store, "default", "t1", turns);
    store
        .memories()
        .create(NewMemory { id: Some("plain".into()), content: plain.into(), ..Default::default() })
        .unwrap();
}

/// The best hit of `q` in `space` with its context, `window` neighbours on each side.
fn best_with_context(store: &KnowledgeStore, space: &str, q: &str, mode: SearchMode, window: usize) -> SearchHit {
    let options = SearchOptions { include_context: Some(window), ..Default::default() };
    let query = SearchQuery {
        query: q.into(),
        space_id: space.into(),
        limit: 1,
        filter: Default::default(),
        mode,
        fusion: None,
        query_embedding: None,
        options,
    };
    store.search().run(&query).expect("search").hits.into_iter().next().expect("a hit")
}

/// A document of four sections, one chunk each.
const GUIDE: &str = "# Guide\n\n## Buying\n\nWe decided to buy a new espresso machine for the office in March this year.\n\n\
## Brewing\n\nUse eighteen grams of coffee for a double shot and brew for about twenty eight seconds.\n\n\
## Cleaning\n\nBackflush the machine every Friday with detergent and descale it every two months.\n\n\
## Storage\n\nKeep the beans in an airtight tin away from sunlight and heat in the cupboard.\n";

const TALK: &[(&str, &str)] = &[
    ("Ann", "Hi Bob, how was your week?"),
    ("Bob", "Busy. Where did you go on holiday?"),
    ("Ann", "We went to Lisbon and ate pastries every morning."),
    ("Bob", "That sounds lovely, I have never been."),
    ("Ann", "You should go in spring when it is warm."),
];

/// Context-expanded BM25 on, neighbour expansion off.
const LEXICAL_ONLY_CONTEXT: SearchOptions = SearchOptions { context_bm25: Some(true), ..SearchOptions::OWN_TEXT };

#[test]
fn every_message_becomes_a_memory_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let ids = per_message_thread(&store, "default", "t1", TALK);
    assert_eq!(ids, (0..5).map(|i| format!("t1#m{i}")).collect::<Vec<_>>(), "chatter is kept, nothing is paired");
    let m = store.memories().get("t1#m2", None).unwrap().memory;
    assert_eq!(m.content, "Ann: We went to Lisbon and ate pastries every morning.");
    assert_eq!(m.source_thread_id.as_deref(), Some("t1"));
    assert_eq!(m.metadata.0["source_message_indices"], serde_json::json!([2]));
    assert_eq!(m.title, "", "a message is its own unit, without a title");
}

#[test]
fn expanded_postings_follow_edits_and_deletes_of_a_neighbour() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    per_message_thread(&store, "default", "t1", TALK);
    // "Lisbon" is said in message 2 only; its neighbours 1 and 3 hold it in their expanded text.
    let ids = |v: Vec<(String, f32)>| {
        let mut v: Vec<String> = v.into_iter().map(|x| x.0).collect();
        v.sort();
        v
    };
    let found = ids(search(&store, "default", "Lisbon", SearchMode::Lexical, LEXICAL_ONLY_CONTEXT));
    assert_eq!(found, vec!["t1#m1", "t1#m2", "t1#m3"]);
    let own = ids(search(&store, "default", "Lisbon", SearchMode::Lexical, SearchOptions::OWN_TEXT));
    assert_eq!(own, vec!["t1#m2"]);

    // Edit the middle message: both neighbours lose "Lisbon" and gain "Porto".
    store
        .memories()
        .update(
            "t1#m2",
            engram::MemoryPatch { content: Some("Ann: We went to Porto instead.".into()), ..Default::default() },
            None,
        )
        .unwrap();
    assert!(search(&store, "default", "Lisbon", SearchMode::Lexical, LEXICAL_ONLY_CONTEXT).is_empty());
    let porto = ids(search(&store, "default", "Porto", SearchMode::Lexical, LEXICAL_ONLY_CONTEXT));
    assert_eq!(porto, vec!["t1#m1", "t1#m2", "t1#m3"]);

    // Delete it: 1 and 3 become neighbours, and "Porto" is gone from both.
    store.memories().delete("t1#m2", None).unwrap();
    assert!(search(&store, "default", "Porto", SearchMode::Lexical, LEXICAL_ONLY_CONTEXT).is_empty());
    let never = ids(search(&store, "default", "never been", SearchMode::Lexical, LEXICAL_ONLY_CONTEXT));
    assert_eq!(never, vec!["t1#m1", "t1#m3", "t1#m4"], "message 1 now sees message 3");

    // The same holds after reopening: the sequences are rebuilt from the records.
    drop(store);
    let store = open(dir.path());
    let never = ids(search(&store, "default", "never been", SearchMode::Lexical, LEXICAL_ONLY_CONTEXT));
    assert_eq!(never, vec!["t1#m1", "t1#m3", "t1#m4"]);
}

#[test]
fn expansion_brings_the_neighbours_of_a_hit_and_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    per_message_thread(&store, "default", "t1", TALK);
    let own_only = SearchOptions { expand_neighbours: Some(true), ..SearchOptions::OWN_TEXT };
    let hits = search(&store, "default", "pastries", SearchMode::Lexical, own_only);
    assert_eq!(hits[0].0, "t1#m2");
    let names: Vec<&str> = hits.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&"t1#m1") && names.contains(&"t1#m3"));
    assert!((hits[1].1 - hits[0].1 * 0.5).abs() < 1e-5, "a neighbour gets a = 0.5 of the hit's score: {hits:?}");
    assert_eq!(search(&store, "default", "pastries", SearchMode::Lexical, SearchOptions::OWN_TEXT).len(), 1);
}

#[test]
fn a_question_answered_by_the_next_memory_ranks_lower() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    thread_and_plain_memory(
        &store,
        &[
            ("Ann", "Did you enjoy your trip to Lisbon?"),
            ("Bob", "Yes, we ate pastries every morning."),
            ("Ann", "Would you go back to Lisbon?"),
        ],
        "Is Lisbon sunny in May?",
    );
    let off = search(&store, "default", "Lisbon", SearchMode::Lexical, SearchOptions::OWN_TEXT);
    let with = |p: f32| {
        let on = SearchOptions { question_penalty: Some(p), ..SearchOptions::OWN_TEXT };
        search(&store, "default", "Lisbon", SearchMode::Lexical, on)
            .into_iter()
            .collect::<std::collections::HashMap<_, _>>()
    };
    let on = with(0.2);
    assert_eq!(off.len(), 3, "{off:?}");
    for (id, score) in &off {
        let expected = if id == "t1#m0" { score * 0.8 } else { *score };
        assert!((on[id] - expected).abs() < 1e-6, "{id}: {} against {expected}", on[id]);
    }
    // The last question has no reply after it and the plain memory no thread: only the first is penalised.
    assert!(on["t1#m0"] < off.iter().find(|h| h.0 == "t1#m0").unwrap().1);
    // Out-of-range penalties are clamped: below 0 (and NaN) change nothing.
    for p in [-1.0, f32::NAN] {
        let unchanged = with(p);
        for (id, score) in &off {
            assert!((unchanged[id] - score).abs() < 1e-6, "{p} {id}");
        }
    }
    // The store's default (0.15) applies when the search names none.
    let default = search(
        &store,
        "default",
        "Lisbon",
        SearchMode::Lexical,
        SearchOptions { question_penalty: None, ..SearchOptions::OWN_TEXT },
    );
    let d: std::collections::HashMap<_, _> = default.into_iter().collect();
    let m0 = off.iter().find(|h| h.0 == "t1#m0").unwrap().1;
    assert!((d["t1#m0"] - m0 * 0.85).abs() < 1e-6, "{} against {}", d["t1#m0"], m0 * 0.85);
}

#[test]
fn the_context_blended_cosine_finds_a_turn_through_its_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    // The hashing embedder: every memory stays a vector candidate at γ 0 (no similarity floor), so the plain
    // cosines read back from the search are all there to check the blend's arithmetic against.
    let hashing = std::sync::Arc::new(engram::embed::HashEmbedder::default());
    let store = KnowledgeStore::open(StoreConfig::new(dir.path()).embedder(hashing)).expect("open");
    thread_and_plain_memory(
        &store,
        &[
            ("Ann", "We hiked up the mountain trail on Sunday"),
            ("Bob", "Every weekend, rain or shine!"),
            ("Ann", "The mountain trail was steep and rocky"),
        ],
        "A mountain of paperwork waits at the office",
    );
    let cosines = |gamma: f32| -> std::collections::HashMap<String, f32> {
        let options = SearchOptions { vector_context: Some(gamma), ..SearchOptions::OWN_TEXT };
        let q = SearchQuery { mode: SearchMode::Vector, options, ..SearchQuery::new("mountain trail hike") };
        let hits = store.search().run(&q).expect("search").hits;
        hits.into_iter().map(|h| (h.view.memory.id, h.vector_score.expect("a vector score"))).collect()
    };
    let (plain, blended) = (cosines(0.0), cosines(0.5));
    let c = |id: &str| plain.get(id).copied().unwrap_or(0.0);
    let (m0, m1, m2) = (c("t1#m0"), c("t1#m1"), c("t1#m2"));
    let want = [
        ("t1#m0", 0.5 * m0 + 0.5 * (m0 + m1) / 2.0),
        ("t1#m1", 0.5 * m1 + 0.5 * (m0 + m1 + m2) / 3.0),
        ("t1#m2", 0.5 * m2 + 0.5 * (m1 + m2) / 2.0),
        ("plain", c("plain")),
    ];
    for (id, w) in want {
        let got = blended.get(id).copied().unwrap_or(f32::NAN);
        assert!((got - w).abs() < 1e-5, "{id}: {got} against {w} (plain cosines {plain:?})");
    }
    // The reply shares no word with the query; its neighbours lift it above its own cosine.
    assert!(m0 > 0.0 && m2 > 0.0 && blended["t1#m1"] > m1 + 0.1, "{plain:?} {blended:?}");
}

#[test]
fn plain_memories_rank_the_same_with_and_without_the_stages() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for (i, text) in [
        "Caroline went to the LGBTQ support group on Tuesday",
        "Melanie painted a sunrise over the lake",
        "The support group meets every week in the library",
        "Jon opened a dance studio downtown",
        "Gina lost her job at the store and started a clothing line",
    ]
    .iter()
    .enumerate()
    {
        store
            .memories()
            .create(NewMemory { id: Some(format!("p{i}")), content: (*text).into(), ..Default::default() })
            .unwrap();
    }
    for mode in [SearchMode::Hybrid, SearchMode::Lexical, SearchMode::Vector] {
        for q in ["support group", "who paints?", "dance studio job"] {
            let on = search(&store, "default", q, mode, SearchOptions::default());
            let off = search(&store, "default", q, mode, SearchOptions::OWN_TEXT);
            assert!(!on.is_empty());
            assert_eq!(on, off, "{mode:?} {q}");
        }
    }
}

#[test]
fn include_context_returns_the_neighbours_in_order_within_the_space() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.spaces().create(NewSpace { name: "other".into(), ..Default::default() }).unwrap();
    per_message_thread(&store, "default", "t1", TALK);
    // The same thread id in another space, with other words.
    per_message_thread(&store, "other", "t1", &[("Ann", "Completely different"), ("Bob", "pastries in Lisbon too")]);
    let hit = best_with_context(&store, "default", "pastries", SearchMode::Hybrid, 1);
    assert_eq!(hit.view.memory.id, "t1#m2");
    let got: Vec<(u64, &str, bool)> = hit.context.iter().map(|c| (c.index, c.content.as_str(), c.is_hit)).collect();
    assert_eq!(
        got,
        vec![(1, TALK[1].1, false), (2, TALK[2].1, true), (3, TALK[3].1, false)],
        "messages 1..=3 of this space's thread, in order"
    );
    assert!(hit.context.iter().all(|c| c.kind == "message"));
    assert_eq!(hit.context[0].role, "assistant");
    // Window 2 at the end of the thread stops at its last message.
    let hit = best_with_context(&store, "default", "spring warm", SearchMode::Lexical, 2);
    assert_eq!(hit.context.iter().map(|c| c.index).collect::<Vec<_>>(), vec![2, 3, 4]);
    // The other space's thread answers with its own messages.
    let hit = best_with_context(&store, "other", "pastries", SearchMode::Hybrid, 3);
    let ctx: Vec<&str> = hit.context.iter().map(|c| c.content.as_str()).collect();
    assert_eq!(ctx, vec!["Completely different", "pastries in Lisbon too"]);
}

#[test]
fn include_context_returns_source_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let body = GUIDE;
    let r = store
        .sources()
        .ingest(NewSource {
            bytes: body.as_bytes().to_vec(),
            original_name: "guide.md".into(),
            extract_memories: true,
            ..Default::default()
        })
        .unwrap();
    assert!(r.memory_ids.len() >= 3, "{:?}", r.memory_ids);
    let hit = best_with_context(&store, "default", "double shot grams", SearchMode::Hybrid, 1);
    assert!(hit.view.memory.content.contains("double shot"));
    let kinds: Vec<&str> = hit.context.iter().map(|c| c.kind.as_str()).collect();
    assert!(kinds.iter().all(|k| *k == "chunk"), "{kinds:?}");
    let own = hit.context.iter().find(|c| c.is_hit).expect("the hit's chunk");
    assert!(own.content.contains("double shot"));
    let idx: Vec<u64> = hit.context.iter().map(|c| c.index).collect();
    assert_eq!(idx, (own.index.saturating_sub(1)..=own.index + 1).collect::<Vec<_>>());
    assert!(hit.context.iter().any(|c| c.content.contains("espresso machine")));
    assert!(hit.context.iter().any(|c| c.content.contains("Backflush")));
}

#[cfg(feature = "server")]
#[test]
fn http_search_returns_context_and_validates_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let srv = common::server(dir.path(), 1 << 20);
    let body = serde_json::json!({
        "title": "holiday",
        "metadata": {"analysis": "per-message"},
        "messages": TALK.iter().map(|(who, text)| serde_json::json!({
            "role": if *who == "Ann" { "user" } else { "assistant" },
            "content": text,
            "metadata": {"speaker": who},
        })).collect::<Vec<_>>(),
    });
    let r = common::call(&srv, "POST", "/threads", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["extracted_memories"].as_array().map(Vec::len), Some(5));
    let r = common::call(
        &srv,
        "POST",
        "/memories/search",
        Some(r#"{"query": "pastries", "limit": 1, "include_context": true, "context_window": 1}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let ctx = v[0]["context"].as_array().expect("context");
    let got: Vec<(u64, bool)> =
        ctx.iter().map(|c| (c["index"].as_u64().unwrap(), c["is_hit"].as_bool().unwrap())).collect();
    assert_eq!(got, vec![(1, false), (2, true), (3, false)]);
    assert_eq!(ctx[2]["content"], TALK[3].1);
    // Without the switch there is no context key (the spec's shape).
    let r = common::call(&srv, "POST", "/memories/search", Some(r#"{"query": "pastries", "limit": 1}"#));
    assert!(r.json()[0].get("context").is_none());
    let r =
        common::call(&srv, "GET", "/memories/search?q=pastries&limit=1&include_context=true&context_window=2", None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["memories"][0]["context"].as_array().map(Vec::len), Some(5), "messages 0..=4");
    // The agent tool memory_search passes the context on.
    let r = common::call(
        &srv,
        "POST",
        "/agent/tools/call",
        Some(r#"{"name": "memory_search", "arguments": {"query": "pastries", "limit": 1, "include_context": true}}"#),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let ctx = v["results"][0]["context"].as_array().expect("tool context");
    assert_eq!(ctx.iter().map(|c| c["index"].as_u64().unwrap()).collect::<Vec<_>>(), vec![1, 2, 3]);
    let r = common::call(
        &srv,
        "POST",
        "/memories/search",
        Some(r#"{"query": "pastries", "include_context": true, "context_window": 11}"#),
    );
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["detail"][0]["loc"], serde_json::json!(["body", "context_window"]));
}

#[test]
fn thread_search_matches_terms_spread_over_neighbouring_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let thread = |id: &str, lines: &[&str]| {
        store
            .threads()
            .create(NewThread {
                thread_id: Some(id.into()),
                messages: lines
                    .iter()
                    .enumerate()
                    .map(|(i, t)| NewMessage {
                        role: if i % 2 == 0 { "user".into() } else { "assistant".into() },
                        content: (*t).into(),
                        timestamp: None,
                        metadata: None,
                    })
                    .collect(),
                ..Default::default()
            })
            .unwrap();
    };
    thread("qa", &["Where is the espresso machine?", "In the kitchen, next to the fridge.", "Thanks!"]);
    thread("both", &["The espresso machine is in the kitchen.", "Good to know."]);
    thread("apart", &["The espresso machine broke.", "Anyway.", "Right.", "Lunch is in the kitchen."]);
    let hits = store.threads().search("espresso kitchen", "default", None, 10).unwrap();
    let got: Vec<(&str, u64, u64)> =
        hits.iter().map(|h| (h.thread.thread_id.as_str(), h.matched_messages, h.context_matches)).collect();
    assert_eq!(got[0], ("both", 1, 1), "a direct match ranks first (its neighbour matches through it)");
    assert_eq!(got[1].0, "qa");
    assert_eq!((got[1].1, got[1].2), (0, 2), "the question and its answer hold the terms together");
    assert!(got.iter().all(|g| g.0 != "apart"), "terms three messages apart are not a match: {got:?}");
}

#[test]
fn source_search_passes_scores_to_neighbouring_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let body = GUIDE;
    store
        .sources()
        .ingest(NewSource { bytes: body.as_bytes().to_vec(), original_name: "guide.md".into(), ..Default::default() })
        .unwrap();
    let hits = store.sources().search("default", "grams double shot", 5).unwrap();
    let chunks = &hits[0].chunks;
    let best = &chunks[0];
    assert!(best.snippet.contains("double shot"), "{chunks:?}");
    // Its neighbours follow with half its score; chunks further away get nothing (window 1).
    let nb: Vec<&engram::ChunkHit> = chunks[1..].iter().collect();
    assert_eq!(nb.len(), 2, "{chunks:?}");
    for c in nb {
        assert_eq!(c.chunk_index.abs_diff(best.chunk_index), 1);
        assert!((c.score - best.score * 0.5).abs() < 1e-4, "{} vs {}", c.score, best.score);
    }
}
