//! The database index mode (`IndexMode::Database`): a daemon that reads each search's part of the indexes from
//! PostgreSQL ranks exactly as one searching its in-memory indexes, on one database, for every search mode and
//! the options that change the ranking stages, in a space small enough to read whole and, with a lowered
//! `hnsw_min_points`, in the partial reading of a larger space (postings, pgvector candidates, two rings of
//! sequence neighbours). Needs `ENGRAM_TEST_PG` (see `tests/backend/mod.rs`).
#![cfg(feature = "postgres")]

mod backend;

use engram::index::context::{ContextParams, Expansion};
use engram::store::{NewSpace, Transition};
use engram::{
    IndexMode, KnowledgeStore, ListOrder, ListQuery, MemoryFilter, NewMemory, SearchMode, SearchOptions, SearchQuery,
    StoreConfig,
};

/// A small corpus with what every stage reads: two transcripts stored turn by turn (positions, questions and
/// their replies, dates), plain memories with labels and importance, a forgotten turn and a superseded memory.
fn corpus(store: &KnowledgeStore, space: &str) {
    let a = backend::per_message_thread(
        store,
        space,
        &format!("{space}-garden"),
        &[
            "Ann adopted a grey cat called Miso last spring.",
            "Does Miso like the garden?",
            "She sleeps in the sun by the greenhouse every afternoon.",
            "When did you plant the tomatoes?",
            "I planted tomatoes and basil on 3 May, right after the frost.",
            "The basil came from my neighbour Rosa.",
            "Rosa also gave me seeds for courgettes.",
            "Is the greenhouse heated?",
            "No, but it keeps the frost off the seedlings.",
        ],
    );
    backend::per_message_thread(
        store,
        space,
        &format!("{space}-travel"),
        &[
            "We are flying to Lisbon in June for Rosa's wedding.",
            "Who is looking after Miso while you travel?",
            "My brother Tom will feed the cat and water the garden.",
            "What are you bringing to the wedding?",
            "A basket of tomatoes and a painting of the greenhouse.",
        ],
    );
    for (text, labels, importance) in [
        ("The quarterly report on garden centre sales is due on Friday.", vec!["work"], 0.9),
        ("Tom repairs bicycles in his workshop on weekends.", vec!["people"], 0.4),
        ("Rosa teaches Italian on Tuesdays at the library.", vec!["people", "lessons"], 0.6),
        ("Lisbon trams are the easiest way up to the castle.", vec!["travel"], 0.5),
    ] {
        store
            .memories()
            .create(NewMemory {
                content: text.into(),
                space_id: Some(space.into()),
                labels: Some(labels.into_iter().map(String::from).collect()),
                importance: Some(importance),
                ..Default::default()
            })
            .expect("memory");
    }
    // Expired an hour ago (within the grace period, so not forgotten yet), and one that expires next year.
    for (text, hours) in
        [("The parking permit for May has run out.", -1i64), ("The passport is valid until next year.", 9000)]
    {
        store
            .memories()
            .create(NewMemory {
                content: text.into(),
                space_id: Some(space.into()),
                expires_at: Some(engram::model::Timestamp(engram::model::Timestamp::now().0 + hours * 3_600_000)),
                ..Default::default()
            })
            .expect("memory with an expiry");
    }
    let old = store
        .memories()
        .create(NewMemory {
            content: "Ann's cat is called Mochi.".into(),
            space_id: Some(space.into()),
            ..Default::default()
        })
        .unwrap()
        .view
        .memory
        .id;
    store.memories().change_state(&old, None, Transition::Supersede { newer: a[0].clone() }, None).unwrap();
    store.memories().change_state(&a[5], None, Transition::Forget, None).unwrap();
}

fn queries(space: &str) -> Vec<SearchQuery> {
    let base = |query: &str, mode: SearchMode| SearchQuery {
        query: query.into(),
        space_id: space.into(),
        limit: 8,
        filter: MemoryFilter::default(),
        mode,
        fusion: None,
        query_embedding: None,
        options: SearchOptions::default(),
    };
    let mut out = Vec::new();
    for text in [
        "Who looks after the cat?",
        "When were the tomatoes planted?",
        "Rosa wedding Lisbon",
        "greenhouse frost seedlings",
        "What does Tom do on weekends?",
        "Miso",
    ] {
        for mode in [SearchMode::Hybrid, SearchMode::Lexical, SearchMode::Vector] {
            out.push(base(text, mode));
        }
        for mode in [SearchMode::Hybrid, SearchMode::Lexical] {
            // Without context-expanded BM25 a larger space has its BM25 candidates ranked in the database.
            let mut q = base(text, mode);
            q.options.context_bm25 = Some(false);
            out.push(q);
        }
        let mut q = base(text, SearchMode::Hybrid);
        q.options.expand_neighbours = Some(false);
        q.options.include_context = Some(1);
        out.push(q);
        let mut q = base(text, SearchMode::Lexical);
        q.options.context_params = Some(ContextParams { window: 2, blend: 0.5 });
        q.options.expansion_params = Some(Expansion { weight: 0.5, window: 2, sum: true });
        out.push(q);
        for mode in [SearchMode::Hybrid, SearchMode::Vector] {
            // The context-blended cosine (off by default with the built-in embedder): in a partial read, the
            // vectors of two rings of neighbours.
            let mut q = base(text, mode);
            q.options.vector_context = Some(0.5);
            out.push(q);
        }
        let mut q = base(text, SearchMode::Hybrid);
        q.filter.label_ids = vec!["label_people".into()];
        out.push(q);
        let mut q = base(text, SearchMode::Hybrid);
        q.filter.include_history = true;
        out.push(q);
    }
    out
}

/// Every query ranks the same memories in the same order with the same scores, and the hits carry the same
/// records, matched terms and context.
fn assert_same(memory: &KnowledgeStore, database: &KnowledgeStore, space: &str) {
    let mut hits = 0;
    for q in queries(space) {
        let a = memory.search().run(&q).expect("search the in-memory indexes");
        let b = database.search().run(&q).expect("search the database");
        let ids = |r: &engram::SearchResults| r.hits.iter().map(|h| h.view.memory.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&a), ids(&b), "{:?} ({:?}, {:?})", q.query, q.mode, q.options);
        for (x, y) in a.hits.iter().zip(&b.hits) {
            let close = |u: f32, v: f32| (u - v).abs() <= 1e-5 * u.abs().max(1.0);
            assert!(close(x.score, y.score), "{:?}: score {} against {}", q.query, x.score, y.score);
            assert_eq!(x.lexical_score.is_some(), y.lexical_score.is_some());
            assert_eq!(x.matched_terms, y.matched_terms);
            assert_eq!(x.view.label_ids, y.view.label_ids);
            assert_eq!(x.view.memory.content, y.view.memory.content);
            let ctx = |h: &engram::SearchHit| h.context.iter().map(|c| (c.index, c.is_hit)).collect::<Vec<_>>();
            assert_eq!(ctx(x), ctx(y), "{:?}: context", q.query);
        }
        assert_eq!(a.candidates, b.candidates, "{:?}: candidates", q.query);
        hits += a.hits.len();
    }
    assert!(hits > 100, "the queries find memories: {hits} hits");
}

/// Listings (every order, a filter, history), space usage, health counts and label health agree.
fn assert_same_listings(memory: &KnowledgeStore, database: &KnowledgeStore, space: &str) {
    for order in [ListOrder::Recent, ListOrder::Importance, ListOrder::PageRank] {
        for filter in [
            MemoryFilter::default(),
            MemoryFilter { include_history: true, ..Default::default() },
            MemoryFilter { label_ids: vec!["label_people".into()], ..Default::default() },
        ] {
            let q = ListQuery { space_id: space.into(), filter, limit: 7, offset: 2 };
            let ids = |s: &KnowledgeStore| {
                let page = s.memories().list_ordered(&q, order).expect("list");
                let items = page.items.into_iter().map(|v| (v.memory.id, v.memory.pagerank_score));
                (page.total, items.collect::<Vec<_>>())
            };
            assert_eq!(ids(memory), ids(database), "listing {order:?} {:?}", q.filter);
        }
    }
    // The listings above carry each memory's PageRank, read for the whole page at once.
    let q = ListQuery { space_id: space.into(), filter: MemoryFilter::default(), limit: 5, offset: 0 };
    let top = database.memories().list_ordered(&q, ListOrder::PageRank).expect("list by PageRank");
    assert!(top.items.first().is_some_and(|v| v.memory.pagerank_score > 0.0), "no PageRank in the listing");
    let usage = |s: &KnowledgeStore| {
        s.spaces().list().unwrap().into_iter().map(|x| (x.id, x.usage.memories)).collect::<Vec<_>>()
    };
    assert_eq!(usage(memory), usage(database));
    assert_eq!(memory.admin().health().unwrap().memories, database.admin().health().unwrap().memories);
    let expired = memory.memories().expiry_status().expired;
    assert!(expired >= 1, "the corpus holds an expired memory");
    assert_eq!(expired, database.memories().expiry_status().expired, "expired memories");
    let lh = |s: &KnowledgeStore| {
        let h = s.labels().health(Some(space)).unwrap();
        (h.vocabulary_size, h.unused_labels, h.singleton_labels)
    };
    assert_eq!(lh(memory), lh(database));
}

/// PageRank and communities computed now. The store's background worker may hold the recompute's claim (its
/// debounce can end while the test waits for the indexes): then wait for it, and compute once it is done.
fn recompute_graph(store: &KnowledgeStore) {
    let started = std::time::Instant::now();
    loop {
        match store.graph().recompute() {
            Ok(_) => return,
            Err(e) if e.kind() == engram::ErrorKind::Locked && started.elapsed().as_secs() < 60 => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => panic!("recompute the graph: {e}"),
        }
    }
}

#[test]
fn the_database_index_mode_ranks_as_the_in_memory_indexes() {
    if backend::pg_server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let url = backend::pg_url_for(dir.path());
    let memory = KnowledgeStore::open(StoreConfig::new(dir.path()).database(url.clone())).expect("open");
    memory.spaces().create(NewSpace { name: "Partial".into(), ..Default::default() }).unwrap();
    corpus(&memory, "default");
    corpus(&memory, "partial");
    memory.admin().wait_for_indexes(std::time::Duration::from_secs(30));
    recompute_graph(&memory);

    let database = KnowledgeStore::open(
        StoreConfig::new(dir.path().join("light")).database(url.clone()).index_mode(IndexMode::Database),
    )
    .expect("open in the database index mode");
    assert_same(&memory, &database, "default");
    assert_same_listings(&memory, &database, "default");

    // A write through the database-mode daemon: found by both, and it holds no per-memory index after it.
    database
        .memories()
        .create(NewMemory { content: "The greenhouse door sticks in wet weather.".into(), ..Default::default() })
        .expect("write through the database index mode");
    let waited = std::time::Instant::now();
    while memory.admin().health().unwrap().memories < database.admin().health().unwrap().memories
        && waited.elapsed().as_secs() < 10
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_same(&memory, &database, "default");
    assert_same_listings(&memory, &database, "default");
    let stats = database.admin().lexical_index_stats();
    assert_eq!((stats.documents, stats.postings), (0, 0), "no in-memory lexicon in the database index mode");
    assert!(database.admin().vector_index_stats().iter().all(|v| v.vectors == 0), "no in-memory vectors");
    drop(database);

    // A space "larger" than hnsw_min_points: read in part. In-memory, a space this small scans its vectors
    // exactly; pgvector's candidates (100 of about 20 vectors) are every vector, so the two still agree.
    let mut config = StoreConfig::new(dir.path().join("light2")).database(url).index_mode(IndexMode::Database);
    config.vector.hnsw_min_points = 4;
    let partial = KnowledgeStore::open(config).expect("open");
    assert_same(&memory, &partial, "partial");
}

/// The context-blended cosine of a partial read: a memory's blended cosine needs its neighbours' vectors, which
/// pgvector's candidates need not hold in a space of more than 100 memories. Whatever candidates the two indexes
/// find, a memory both return has the same blended cosine.
#[test]
fn a_partial_read_blends_each_cosine_with_its_neighbours_as_the_memory_mode_does() {
    let dir = tempfile::tempdir().unwrap();
    let url = backend::pg_url_for(dir.path());
    let with_blend = |c: StoreConfig| StoreConfig { vector_context: Some(0.5), ..c };
    let memory = KnowledgeStore::open(with_blend(StoreConfig::new(dir.path()).database(url.clone()))).expect("open");
    // 400 turns of pseudo-words: a turn's neighbours share few of its words, so the vector candidates of a query
    // seldom hold them.
    let lines: Vec<String> = (0..400u64)
        .map(|i| (0..6u64).map(|j| format!("w{}", (i * 7_919 + j * 104_729) % 997)).collect::<Vec<_>>().join(" "))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    backend::per_message_thread(&memory, "default", "long", &refs);
    memory.admin().wait_for_indexes(std::time::Duration::from_secs(30));
    let mut config =
        with_blend(StoreConfig::new(dir.path().join("light")).database(url).index_mode(IndexMode::Database));
    config.vector.hnsw_min_points = 4;
    let partial = KnowledgeStore::open(config).expect("open in the database index mode");
    let mut compared = 0;
    for i in [3u64, 50, 121, 200, 333] {
        let query = lines[i as usize].split(' ').take(3).collect::<Vec<_>>().join(" ");
        for mode in [SearchMode::Vector, SearchMode::Hybrid] {
            let q = SearchQuery { mode, ..SearchQuery::new(query.as_str()) };
            let by_id = |r: engram::SearchResults| -> std::collections::HashMap<String, f32> {
                r.hits.into_iter().filter_map(|h| Some((h.view.memory.id, h.vector_score?))).collect()
            };
            let a = by_id(memory.search().run(&q).expect("search the in-memory indexes"));
            let b = by_id(partial.search().run(&q).expect("search the database"));
            for (id, x) in &a {
                if let Some(y) = b.get(id) {
                    assert!((x - y).abs() <= 1e-5, "{query:?} ({mode:?}) {id}: blended cosine {x} against {y}");
                    compared += 1;
                }
            }
        }
    }
    assert!(compared >= 40, "the two modes return the same memories: {compared} compared");
}

#[test]
fn the_database_index_mode_without_a_database_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let err = KnowledgeStore::open(StoreConfig::new(dir.path()).index_mode(IndexMode::Database)).unwrap_err();
    assert_eq!(err.kind(), engram::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("needs a PostgreSQL database"), "{err}");
    assert!(!dir.path().join("engram.redb").exists(), "nothing created");
}
