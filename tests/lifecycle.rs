//! Lifecycle moves on a real redb file: what recall, by-id reads and listings show after archive, deprecate,
//! supersede and forget; refused moves change nothing; favourites; all of it after a reopen.

use engram::{
    ErrorKind, KnowledgeStore, ListQuery, MemoryFilter, MemoryState, NewMemory, SearchMode, SearchQuery, StoreConfig,
    Transition,
};

fn ids(store: &KnowledgeStore, q: &str, include_history: bool) -> Vec<String> {
    let mut v: Vec<String> = store
        .search(&SearchQuery {
            query: q.into(),
            space_id: "default".into(),
            limit: 10,
            filter: MemoryFilter { include_history, ..Default::default() },
            mode: SearchMode::Hybrid,
            fusion: None,
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
        .list_memories(&ListQuery {
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
        let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
        for id in ["a", "b", "c", "d", "e"] {
            store
                .create_memory(NewMemory {
                    id: Some(id.into()),
                    content: format!("budget note {id} for the lisbon trip"),
                    ..Default::default()
                })
                .unwrap();
        }
        assert_eq!(ids(&store, "lisbon budget", false), vec!["a", "b", "c", "d", "e"]);
        let t = |id: &str, tr: Transition| store.change_state(id, None, tr, Some("test".into()));
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
        assert_eq!(store.get_memory("a", None).unwrap().memory.state, MemoryState::Archived);
        store.set_memory_favorite("d", None, true).unwrap();
    }
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    // Everyday recall shows only the active memory; history brings the superseded version back.
    assert_eq!(ids(&store, "lisbon budget", false), vec!["d"]);
    assert!(ids(&store, "lisbon budget", true).contains(&"c".to_string()));
    assert_eq!(listed(&store, MemoryState::Archived), vec!["a"]);
    assert_eq!(listed(&store, MemoryState::Deprecated), vec!["b"]);
    assert_eq!(listed(&store, MemoryState::Superseded), vec!["c"]);
    assert_eq!(store.get_memory("a", None).unwrap().memory.state, MemoryState::Archived, "archived stays readable");
    assert_eq!(store.get_memory("e", None).unwrap_err().kind(), ErrorKind::NotFound, "forgotten is not");
    let d = store.get_memory("d", None).unwrap().memory;
    assert_eq!(d.metadata.0["supersedes"], serde_json::json!(["c"]));
    let b = store.get_memory("b", None).unwrap().memory;
    assert_eq!(b.metadata.0["lifecycle"][0]["to"], "deprecated");
    assert_eq!(b.metadata.0["lifecycle"][0]["reason"], "test");
    let favs: Vec<String> = store.favorite_memories(10).unwrap().into_iter().map(|v| v.memory.id).collect();
    assert_eq!(favs, vec!["d"]);
}
