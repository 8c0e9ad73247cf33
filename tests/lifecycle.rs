//! Lifecycle moves on a real redb file: what recall, by-id reads and listings show after archive, deprecate,
//! supersede and forget; refused moves change nothing; favourites; all of it after a reopen.

mod backend;
use engram::{
    ErrorKind, KnowledgeStore, ListQuery, MemoryFilter, MemoryState, NewMemory, SearchMode, SearchQuery, Transition,
};

fn ids(store: &KnowledgeStore, q: &str, include_history: bool) -> Vec<String> {
    let mut v: Vec<String> = store
        .search()
        .run(&SearchQuery {
            query: q.into(),
            space_id: "default".into(),
            limit: 10,
            filter: MemoryFilter { include_history, ..Default::default() },
            mode: SearchMode::Hybrid,
            fusion: None,
            query_embedding: None,
            options: Default::default(),
        })
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.view.memory.id)
        .collect();
    v.sort();
    v
}

fn listed(store: &KnowledgeStore, state: MemoryState) -> Vec<String> {
    let page = store
        .memories()
        .list(&ListQuery {
            space_id: "default".into(),
            filter: MemoryFilter { states: vec![state], include_history: true, ..Default::default() },
            limit: 100,
            offset: 0,
        })
        .unwrap();
    let mut v: Vec<String> = page.items.into_iter().map(|m| m.memory.id).collect();
    v.sort();
    v
}

#[test]
fn moves_change_what_recall_reads_and_listings_show() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = backend::open(dir.path());
        for id in ["a", "b", "c", "d", "e"] {
            store
                .memories()
                .create(NewMemory {
                    id: Some(id.into()),
                    content: format!("budget note {id} for the lisbon trip"),
                    ..Default::default()
                })
                .unwrap();
        }
        assert_eq!(ids(&store, "lisbon budget", false), vec!["a", "b", "c", "d", "e"]);
        let t = |id: &str, tr: Transition| store.memories().change_state(id, None, tr, Some("test".into()));
        assert_eq!(t("a", Transition::Archive).unwrap().previous, MemoryState::Active);
        assert!(!t("a", Transition::Archive).unwrap().changed, "archiving twice is a no-op");
        t("b", Transition::Deprecate { replacement: Some("c".into()) }).unwrap();
        let s = t("c", Transition::Supersede { newer: "d".into() }).unwrap();
        assert!(!s.view.memory.is_latest);
        assert_eq!(s.view.memory.metadata.0["superseded_by"], "d");
        t("e", Transition::Forget).unwrap();

        // Refused moves: 409 and nothing changes.
        for (id, tr) in [
            ("c", Transition::Archive),
            ("c", Transition::Supersede { newer: "a".into() }),
            ("d", Transition::Supersede { newer: "d".into() }),
        ] {
            let e = t(id, tr).unwrap_err();
            assert_eq!((e.kind(), e.code()), (ErrorKind::Conflict, "invalid_state_transition"));
        }
        assert_eq!(t("e", Transition::Archive).unwrap_err().kind(), ErrorKind::NotFound, "forgotten is gone");
        assert_eq!(t("a", Transition::Supersede { newer: "zz".into() }).unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(store.memories().get("a", None).unwrap().memory.state, MemoryState::Archived);
        store.memories().set_favorite("d", None, true).unwrap();
    }
    let store = backend::open(dir.path());
    // Everyday recall shows only the active memory; history brings the superseded version back.
    assert_eq!(ids(&store, "lisbon budget", false), vec!["d"]);
    assert!(ids(&store, "lisbon budget", true).contains(&"c".to_string()));
    assert_eq!(listed(&store, MemoryState::Archived), vec!["a"]);
    assert_eq!(listed(&store, MemoryState::Deprecated), vec!["b"]);
    assert_eq!(listed(&store, MemoryState::Superseded), vec!["c"]);
    assert_eq!(store.memories().get("a", None).unwrap().memory.state, MemoryState::Archived, "archived stays readable");
    assert_eq!(store.memories().get("e", None).unwrap_err().kind(), ErrorKind::NotFound, "forgotten is not");
    let d = store.memories().get("d", None).unwrap().memory;
    assert_eq!(d.metadata.0["supersedes"], serde_json::json!(["c"]));
    let b = store.memories().get("b", None).unwrap().memory;
    assert_eq!(b.metadata.0["lifecycle"][0]["to"], "deprecated");
    assert_eq!(b.metadata.0["lifecycle"][0]["reason"], "test");
    let favs: Vec<String> = store.memories().favorites(10).unwrap().into_iter().map(|v| v.memory.id).collect();
    assert_eq!(favs, vec!["d"]);
}

/// Reads by id never wait for a writer: their counts are queued and committed when the writer is free. Under 4
/// reading threads and a writing one, every read is counted: none lost, none twice, also after closing and
/// reopening the store.
#[test]
fn concurrent_reads_are_each_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(backend::open(dir.path()));
    for id in ["r0", "r1"] {
        let new = NewMemory { id: Some(id.into()), content: format!("read target {id}"), ..Default::default() };
        store.memories().create(new).unwrap();
    }
    let mut handles = Vec::new();
    for t in 0..4 {
        let s = store.clone();
        handles.push(std::thread::spawn(move || {
            let mut seen = 0i64;
            for i in 0..150 {
                let v = s.memories().read(if (t + i) % 2 == 0 { "r0" } else { "r1" }, None).unwrap();
                seen = seen.max(v.memory.access_count);
            }
            seen
        }));
    }
    let writer = {
        let s = store.clone();
        std::thread::spawn(move || {
            for i in 0..60 {
                let new = NewMemory { content: format!("busy writer note {i}"), ..Default::default() };
                s.memories().create(new).unwrap();
            }
        })
    };
    let seen: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    writer.join().unwrap();
    assert!(seen.iter().all(|n| *n >= 1 && *n <= 600), "{seen:?}");
    // One more read finds the writer free and commits whatever is queued.
    store.memories().read("r0", None).unwrap();
    let total = |s: &KnowledgeStore| {
        ["r0", "r1"].iter().map(|id| s.memories().get(id, None).unwrap().memory.access_count).sum::<i64>()
    };
    assert_eq!(total(&store), 601);
    let report = store.admin().checkpoint_report().unwrap();
    assert!(report.flushed_access_updates > 0);
    drop(store);
    let store = backend::open(dir.path());
    assert_eq!(total(&store), 601);
    // Reads queued when the store closes are counted too.
    for _ in 0..3 {
        store.memories().read("r1", None).unwrap();
    }
    drop(store);
    let store = backend::open(dir.path());
    assert_eq!(total(&store), 604);
}
