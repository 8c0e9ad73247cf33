//! KnowledgeStore on each storage backend (a real redb file; PostgreSQL with ENGRAM_TEST_BACKEND=postgres): round
//! trips, upserts, labels, reopen, filtered search.

mod backend;
use engram::{
    ErrorKind, KnowledgeStore, ListQuery, MemoryFilter, MemoryPatch, NewMemory, NewSpace, SearchMode, SearchQuery,
    UnitType, WriteAction,
};

fn open(dir: &std::path::Path) -> KnowledgeStore {
    backend::open(dir)
}

fn mem(id: &str, content: &str) -> NewMemory {
    NewMemory { id: Some(id.into()), content: content.into(), ..Default::default() }
}

fn search(store: &KnowledgeStore, q: &str, space: &str, limit: usize, filter: MemoryFilter) -> Vec<String> {
    store
        .search()
        .run(&SearchQuery {
            query: q.into(),
            space_id: space.into(),
            limit,
            filter,
            mode: SearchMode::Hybrid,
            fusion: None,
            query_embedding: None,
            options: Default::default(),
        })
        .expect("search")
        .hits
        .into_iter()
        .map(|h| h.view.memory.id)
        .collect()
}

#[test]
fn create_get_update_delete_round_trip_with_spec_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let c = store
        .memories()
        .create(NewMemory {
            labels: Some(vec!["Work".into(), " work ".into()]),
            ..mem("m1", "  Ship the parser on Friday  ")
        })
        .unwrap();
    assert_eq!(c.action, WriteAction::Created);
    let m = &c.view.memory;
    assert_eq!(m.content, "Ship the parser on Friday");
    assert_eq!((m.space_id.as_str(), m.unit_type, m.version, m.is_latest), ("default", UnitType::Fact, 1, true));
    assert_eq!((m.importance, m.decay_score_cached, m.extraction_method.as_str()), (0.5, 1.0, "manual"));
    assert_eq!(m.review_status, "");
    assert_eq!(c.view.label_ids, vec!["label_Work", "label_work"]);

    let mut got = store.memories().get("m1", None).unwrap();
    // PageRank is derived by the background graph worker whenever writes pause: not part of the record.
    got.memory.pagerank_score = c.view.memory.pagerank_score;
    assert_eq!(got.memory, c.view.memory);
    assert_eq!(store.memories().get("m1", Some("other")).unwrap_err().kind(), ErrorKind::NotFound);

    let upd = store
        .memories()
        .update(
            "m1",
            MemoryPatch {
                content: Some("Ship the lexer on Monday".into()),
                labels: Some(vec!["a".into()]),
                ..Default::default()
            },
            None,
        )
        .unwrap();
    assert_eq!(upd.memory.version, 2);
    assert_eq!(upd.label_ids, vec!["label_a"]);
    assert_eq!(search(&store, "lexer", "default", 5, MemoryFilter::default()), vec!["m1"]);
    let old = store
        .search()
        .run(&SearchQuery {
            query: "parser".into(),
            space_id: "default".into(),
            limit: 5,
            filter: MemoryFilter::default(),
            mode: SearchMode::Lexical,
            fusion: None,
            query_embedding: None,
            options: Default::default(),
        })
        .unwrap();
    assert!(old.hits.is_empty(), "old text must leave the lexical index");
    let labels = store.labels().list("default", Default::default(), false, 100, 0).unwrap();
    let usage: Vec<(String, u64)> = labels.iter().map(|l| (l.name.clone(), l.usage_count)).collect();
    assert_eq!(usage, vec![("Work".to_string(), 0), ("a".to_string(), 1), ("work".to_string(), 0)]);

    let report = store.memories().delete("m1", None).unwrap();
    // Its label and the MENTIONS edge of "Monday" (a date entity).
    assert_eq!(report.deleted_relationships, 2);
    assert_eq!(store.memories().get("m1", None).unwrap_err().kind(), ErrorKind::NotFound);
    assert!(search(&store, "lexer", "default", 5, MemoryFilter::default()).is_empty());
    assert_eq!(store.memories().delete("m1", None).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn upsert_by_id_reports_created_updated_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    assert_eq!(store.memories().create(mem("k", "first")).unwrap().action, WriteAction::Created);
    assert_eq!(store.memories().create(mem("k", "first")).unwrap().action, WriteAction::Unchanged);
    let u = store.memories().create(NewMemory { title: Some("T".into()), ..mem("k", "second") }).unwrap();
    assert_eq!(u.action, WriteAction::Updated);
    assert_eq!(
        (u.view.memory.content.as_str(), u.view.memory.title.as_str(), u.view.memory.version),
        ("second", "T", 2)
    );
    let page = store
        .memories()
        .list(&ListQuery { space_id: "default".into(), filter: MemoryFilter::default(), limit: 10, offset: 0 })
        .unwrap();
    assert_eq!(page.total, 1);
    store.spaces().create(NewSpace { name: "Other".into(), ..Default::default() }).unwrap();
    let err = store.memories().create(NewMemory { space_id: Some("other".into()), ..mem("k", "x") }).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
}

#[test]
fn bad_input_is_rejected_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.memories().create(mem("keep", "kept memory")).unwrap();
    let cases = [
        mem("a", "   "),
        mem("a", &"x".repeat(40_000)),
        NewMemory { importance: Some(1.5), ..mem("a", "ok") },
        NewMemory { confidence: Some(f64::NAN), ..mem("a", "ok") },
        NewMemory { event_start: Some("last tuesday".into()), ..mem("a", "ok") },
        NewMemory { labels: Some(vec!["".into()]), ..mem("a", "ok") },
        mem("a/b", "ok"),
    ];
    for c in cases {
        let e = store.memories().create(c).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(!e.fields().is_empty());
    }
    let e = store.memories().create(NewMemory { space_id: Some("nope".into()), ..mem("a", "ok") }).unwrap_err();
    assert_eq!((e.kind(), e.code()), (ErrorKind::NotFound, "space_not_found"));
    // A batch with one bad item stores none of them.
    let e = store.memories().create_many(vec![mem("b1", "good"), mem("b2", "")]).unwrap_err();
    assert_eq!(e.fields()[0].loc, vec![serde_json::json!(1), serde_json::json!("content")]);
    assert_eq!(store.memories().get("b1", None).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.admin().health().unwrap().memories, 1);
}

#[test]
fn reopen_keeps_every_memory_and_the_indexes_agree() {
    let dir = tempfile::tempdir().unwrap();
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
    {
        let store = open(dir.path());
        let batch: Vec<NewMemory> = (0..300)
            .map(|i| mem(&format!("m{i}"), &format!("note {i} about {} and {}", words[i % 8], words[(i / 8) % 8])))
            .collect();
        store.memories().create_many(batch).unwrap();
        store.memories().delete("m5", None).unwrap();
        store
            .memories()
            .update("m6", MemoryPatch { content: Some("zulu replaced text".into()), ..Default::default() }, None)
            .unwrap();
    }
    let store = open(dir.path());
    assert_eq!(store.admin().health().unwrap().memories, 299);
    assert_eq!(store.admin().health().unwrap().reindex_pending, 0);
    assert_eq!(store.memories().get("m7", None).unwrap().memory.content, "note 7 about hotel and alpha");
    assert_eq!(search(&store, "zulu", "default", 3, MemoryFilter::default())[0], "m6");
    // m5 (deleted) never comes back, from either ranking.
    for mode in [SearchMode::Lexical, SearchMode::Vector, SearchMode::Hybrid] {
        let hits = store
            .search()
            .run(&SearchQuery {
                query: "note 5 about foxtrot alpha".into(),
                space_id: "default".into(),
                limit: 100,
                filter: MemoryFilter::default(),
                mode,
                fusion: None,
                query_embedding: None,
                options: Default::default(),
            })
            .unwrap();
        assert!(hits.hits.iter().all(|h| h.view.memory.id != "m5"), "{mode:?}");
        assert!(!hits.hits.is_empty());
    }
}

#[test]
fn filtered_search_returns_k_hits_when_k_match() {
    let dir = tempfile::tempdir().unwrap();
    // A low HNSW threshold puts the graph path under test too.
    let params =
        engram::index::vector::VectorParams { hnsw_min_points: 200, exact_max_candidates: 10, ..Default::default() };
    let store = KnowledgeStore::open(backend::config(dir.path()).vector_params(params)).unwrap();
    let batch: Vec<NewMemory> = (0..1000)
        .map(|i| NewMemory {
            labels: if i % 50 == 0 { Some(vec!["rare".into()]) } else { None },
            importance: Some(if i % 100 == 0 { 0.9 } else { 0.3 }),
            unit_type: Some(if i % 2 == 0 { UnitType::Event } else { UnitType::Fact }),
            ..mem(&format!("m{i}"), &format!("meeting notes number {i} about the quarterly budget review"))
        })
        .collect();
    store.memories().create_many(batch).unwrap();
    assert!(store.admin().wait_for_indexes(std::time::Duration::from_secs(120)), "graph built in the background");
    let rare = MemoryFilter { label_ids: vec!["label_rare".into()], ..Default::default() };
    let hits = search(&store, "budget review meeting", "default", 20, rare);
    assert_eq!(hits.len(), 20, "all 20 rare memories match");
    let important = MemoryFilter { importance_min: Some(0.8), ..Default::default() };
    let hits = search(&store, "budget", "default", 10, important);
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|id| id.trim_start_matches('m').parse::<u32>().unwrap() % 100 == 0));
    let events = MemoryFilter { unit_type: Some(UnitType::Event), ..Default::default() };
    let hits = search(&store, "quarterly budget", "default", 50, events);
    assert_eq!(hits.len(), 50);
    assert!(hits.iter().all(|id| id.trim_start_matches('m').parse::<u32>().unwrap() % 2 == 0));
}

#[test]
fn spaces_isolate_records_in_storage() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let s = store.spaces().create(NewSpace { name: "Work Notes".into(), ..Default::default() }).unwrap();
    assert_eq!(s.id, "work-notes");
    store
        .memories()
        .create(NewMemory {
            space_id: Some("work-notes".into()),
            labels: Some(vec!["w".into()]),
            ..mem("w1", "secret roadmap")
        })
        .unwrap();
    store.memories().create(mem("d1", "public roadmap")).unwrap();
    assert_eq!(search(&store, "roadmap", "default", 10, MemoryFilter::default()), vec!["d1"]);
    assert_eq!(search(&store, "roadmap", "work-notes", 10, MemoryFilter::default()), vec!["w1"]);
    assert!(store.labels().list("default", Default::default(), false, 10, 0).unwrap().is_empty());
    assert_eq!(store.labels().list("work-notes", Default::default(), false, 10, 0).unwrap().len(), 1);
    let spaces = store.spaces().list().unwrap();
    assert_eq!(spaces[0].id, "default");
    assert_eq!(spaces.iter().map(|s| s.usage.memories).collect::<Vec<_>>(), vec![1, 1]);
    assert_eq!(
        store.spaces().create(NewSpace { name: "work notes".into(), ..Default::default() }).unwrap_err().kind(),
        ErrorKind::Conflict
    );
}

/// A redb file is one process's: a second open is locked. A PostgreSQL store is shared: a second open (another
/// daemon, here another store handle with its own data directory) succeeds, and each sees the other's writes in
/// its searches through the change feed, deletes included.
#[test]
fn a_second_open_is_locked_on_a_file_and_shares_the_store_on_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let first = open(dir.path());
    match backend::Backend::current() {
        backend::Backend::Redb => {
            let err = KnowledgeStore::open(backend::config(dir.path())).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Locked);
            // The refused open leaves the first handle working.
            first.memories().create(mem("a1", "Still writable")).unwrap();
        }
        #[cfg(feature = "postgres")]
        backend::Backend::Postgres => {
            let dir2 = tempfile::tempdir().unwrap();
            let second =
                KnowledgeStore::open(engram::StoreConfig::new(dir2.path()).database(backend::pg_url_for(dir.path())))
                    .expect("a second process opens the same database");
            first.memories().create(mem("a1", "The lighthouse keeper logs the tide at dawn")).unwrap();
            // Read by id at once: the database answers.
            assert_eq!(
                second.memories().get("a1", None).unwrap().memory.content,
                "The lighthouse keeper logs the tide at dawn"
            );
            // Searches until they return `want` (at most 5 s): what they return last.
            let settled = |store: &KnowledgeStore, q: &str, want: &[&str]| {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
                loop {
                    let hits = search(store, q, "default", 5, MemoryFilter::default());
                    if hits == want || std::time::Instant::now() > until {
                        break hits;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            };
            // Searched: the second handle's indexes catch up from the feed.
            assert_eq!(settled(&second, "lighthouse tide", &["a1"]), vec!["a1".to_string()]);
            // A write on the second is in the first's search right after the second's write returns and the
            // first catches up; a delete on the second leaves the first's search.
            second.memories().create(mem("b1", "Harbour lighthouse lamps are trimmed weekly")).unwrap();
            second.memories().delete("a1", None).unwrap();
            assert_eq!(settled(&first, "lighthouse", &["b1"]), vec!["b1".to_string()]);
            assert_eq!(search(&second, "lighthouse", "default", 5, MemoryFilter::default()), vec!["b1".to_string()]);
        }
    }
}

/// A sentence whose entity mentions overlap ("CPU 0" inside a longer match) once panicked the parenthetical
/// alias pass (a slice from the end of one mention to the start of the next). Found by the vector benchmark's
/// corpus of Python docstrings.
#[test]
fn overlapping_entity_mentions_are_stored_without_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let text = "As of Dec 2018 only CPU 0 appears to be supported by FreeBSD and all other cores match the frequency \
                of CPU 0.";
    let c = store.memories().create(NewMemory { content: text.into(), ..Default::default() }).unwrap();
    assert_eq!(c.view.memory.content, text);
    assert!(c.entities.iter().any(|e| e.name == "FreeBSD"), "{:?}", c.entities);
}

/// A bulk load on either backend: every memory is stored and found, the graph recompute waits for the load
/// and runs after it, and the vector index build is reported where the backend has one (pgvector), not on redb.
#[test]
fn a_bulk_load_stores_everything_and_recomputes_the_graph_after() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let ((), built) = store
        .admin()
        .bulk_load(|s| {
            for b in 0..4 {
                let batch = (0..50).map(|i| {
                    let k = b * 50 + i;
                    mem(&format!("bulk-{k}"), &format!("Alice met Bob in Paris about the harbour plan {k}"))
                });
                s.memories().create_many(batch.collect())?;
            }
            // Writes pause for longer than the recompute's quiet time (2 s): still no recompute.
            std::thread::sleep(std::time::Duration::from_millis(3500));
            assert!(s.graph().report().is_none(), "the graph waits for the bulk load");
            Ok(())
        })
        .unwrap();
    match backend::Backend::current() {
        backend::Backend::Redb => assert!(built.is_none()),
        #[cfg(feature = "postgres")]
        backend::Backend::Postgres => {
            if let Some(b) = built {
                assert_eq!((b.vectors, b.indexes), (200, 1));
            }
        }
    }
    let all = ListQuery { space_id: "default".into(), filter: MemoryFilter::default(), limit: 1, offset: 0 };
    assert_eq!(store.memories().list(&all).unwrap().total, 200);
    assert_eq!(search(&store, "harbour plan 137", "default", 1, MemoryFilter::default()), vec!["bulk-137"]);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store.graph().report().is_none() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let report = store.graph().report().expect("recomputed after the load");
    assert!(report.communities >= 1, "{report:?}");
}

/// The HNSW graph waits for a bulk load, as pgvector's index does, and is built after it: during the load no
/// vector is in a graph (searches scan them exactly and still find them), and after it every vector is.
#[test]
fn the_hnsw_graph_waits_for_a_bulk_load_and_is_built_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let params = engram::index::vector::VectorParams { hnsw_min_points: 100, ..Default::default() };
    let store = KnowledgeStore::open(backend::config(dir.path()).vector_params(params)).unwrap();
    let graph_points =
        |s: &KnowledgeStore| s.admin().vector_index_stats().iter().map(|v| v.graph_points).sum::<usize>();
    store
        .admin()
        .bulk_load(|s| {
            for b in 0..3 {
                let batch = (0..100).map(|i| {
                    let k = b * 100 + i;
                    mem(&format!("hb-{k}"), &format!("the lighthouse keeper logged storm number {k}"))
                });
                s.memories().create_many(batch.collect())?;
                // Room for the builder to run between batches, as it does outside a bulk load.
                std::thread::sleep(std::time::Duration::from_millis(700));
            }
            assert_eq!(graph_points(s), 0, "no graph is built during the load");
            assert_eq!(search(s, "lighthouse storm number 217", "default", 1, MemoryFilter::default()), ["hb-217"]);
            Ok(())
        })
        .unwrap();
    assert!(store.admin().wait_for_indexes(std::time::Duration::from_secs(120)), "the graph is built after the load");
    let stats = store.admin().vector_index_stats();
    let vectors: usize = stats.iter().map(|v| v.vectors).sum();
    assert_eq!(vectors, 300);
    assert_eq!(graph_points(&store), 300, "{stats:?}");
    assert_eq!(search(&store, "lighthouse storm number 42", "default", 1, MemoryFilter::default()), ["hb-42"]);
}

#[test]
fn listing_pages_follow_each_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    // Three batches a few milliseconds apart (creation times differ between them, tie within them), importance in
    // four steps: every order has ties that the id (then the creation time) must break.
    for b in 0..3 {
        let batch: Vec<NewMemory> = (0..30)
            .map(|i| NewMemory {
                importance: Some([0.2, 0.4, 0.6, 0.8][(i * 7 + b) % 4]),
                ..mem(&format!("m{:02}-{b}", (i * 13) % 30), &format!("note {i} of batch {b}"))
            })
            .collect();
        store.memories().create_many(batch).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let all: Vec<engram::Memory> = {
        let q = ListQuery { space_id: "default".into(), filter: MemoryFilter::default(), limit: 100, offset: 0 };
        store.memories().list(&q).unwrap().items.into_iter().map(|v| v.memory).collect()
    };
    assert_eq!(all.len(), 90);
    let newest = |a: &engram::Memory, b: &engram::Memory| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id));
    // (The PageRank order shares the selection; a background graph recompute could change its ranks mid-test.)
    for order in [engram::ListOrder::Recent, engram::ListOrder::Importance] {
        let mut expected = all.clone();
        match order {
            engram::ListOrder::Importance => {
                expected.sort_by(|a, b| b.importance.total_cmp(&a.importance).then_with(|| newest(a, b)))
            }
            _ => expected.sort_by(newest),
        }
        let expected: Vec<String> = expected.into_iter().map(|m| m.id).collect();
        // Pages of 7 at every offset, and one page past the end.
        let mut paged = Vec::new();
        for offset in (0..=91).step_by(7) {
            let q = ListQuery { space_id: "default".into(), filter: MemoryFilter::default(), limit: 7, offset };
            let page = store.memories().list_ordered(&q, order).unwrap();
            assert_eq!(page.total, 90);
            paged.extend(page.items.into_iter().map(|v| v.memory.id));
        }
        assert_eq!(paged, expected, "{order:?}");
    }
}

#[test]
fn every_store_has_its_own_device_id_and_keeps_it() {
    let (a, b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let first = open(a.path()).admin().device_id().expect("device id");
    let other = open(b.path()).admin().device_id().expect("device id");
    assert_ne!(first, other, "two stores, two devices");
    assert_eq!(open(a.path()).admin().device_id().expect("device id"), first, "a reopen keeps the id");
    assert_eq!(first.to_hex().len(), 32);
}

#[test]
fn sync_is_for_the_embedded_store_and_a_clear_error_on_a_shared_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    match backend::Backend::current() {
        backend::Backend::Redb => {
            assert!(store.sync().enable().expect("enable") >= 1, "the default space is logged");
            assert!(store.sync().status().expect("status").enabled);
        }
        #[cfg(feature = "postgres")]
        backend::Backend::Postgres => {
            let e = store.sync().enable().expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            assert!(e.to_string().contains("several daemons already share one database"), "{e}");
            assert!(!store.sync().status().expect("status").enabled);
        }
    }
}
