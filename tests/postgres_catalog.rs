//! The search catalog a PostgreSQL store keeps in its database (`catalog`, PostgreSQL schema 2): after every kind
//! of write it equals the catalog an in-memory daemon derives from the memory records (`DocMeta::of` with the
//! memory's labels, the length of its postings), its sequence neighbours equal the in-memory rule's, a second
//! daemon's writes keep it too, and a database written before the kind existed gets it filled at open.
//! Needs `ENGRAM_TEST_PG` (see `tests/backend/mod.rs`); passes without running when none is named, outside CI.
#![cfg(feature = "postgres")]

mod backend;

use std::collections::{BTreeMap, BTreeSet};

use engram::index::catalog::DocMeta;
use engram::model::MemoryState;
use engram::storage::CatalogEntry;
use engram::store::{ListQuery, MemoryPatch, NewSpace, Transition};
use engram::{KnowledgeStore, MemoryFilter, NewMemory, StoreConfig};

fn open(dir: &std::path::Path) -> KnowledgeStore {
    KnowledgeStore::open(StoreConfig::new(dir).database(backend::pg_url_for(dir))).expect("open on PostgreSQL")
}

/// Every memory record of `space` (any state, superseded versions, expired ones) with its label ids.
fn records(store: &KnowledgeStore, space: &str) -> BTreeMap<String, DocMeta> {
    let filter = MemoryFilter {
        states: vec![
            MemoryState::Active,
            MemoryState::Archived,
            MemoryState::Deprecated,
            MemoryState::Superseded,
            MemoryState::Forgotten,
        ],
        include_history: true,
        include_expired: true,
        ..Default::default()
    };
    let page = store
        .memories()
        .list(&ListQuery { space_id: space.into(), filter, limit: 1000, offset: 0 })
        .expect("list every memory");
    page.items
        .into_iter()
        .map(|v| (v.memory.id.clone(), DocMeta::of(&v.memory, v.label_ids.into_iter().collect())))
        .collect()
}

fn catalog(store: &KnowledgeStore, space: &str) -> Vec<CatalogEntry> {
    store.storage().read().expect("read").catalog_space(space).expect("the catalog")
}

/// The catalog of `space` holds exactly its memories, each entry as the in-memory catalog derives it, with the
/// length of its postings; its sequence neighbours (windows 1 and 2) are the in-memory rule's.
fn check(store: &KnowledgeStore, space: &str) {
    let want = records(store, space);
    let got = catalog(store, space);
    let by_id: BTreeMap<String, &CatalogEntry> = got.iter().map(|e| (e.meta.id.clone(), e)).collect();
    assert_eq!(by_id.len(), got.len(), "one entry per memory id");
    assert_eq!(by_id.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "the catalog's memories");
    let rtx = store.storage().read().expect("read");
    for (id, meta) in &want {
        let e = by_id[id];
        assert_eq!(&e.meta, meta, "the catalog entry of {id}");
        let m = store.memories().list(&ListQuery {
            space_id: space.into(),
            filter: MemoryFilter {
                memory_ids: Some([id.clone()].into()),
                include_history: true,
                states: vec![meta.state],
                include_expired: true,
                ..Default::default()
            },
            limit: 1,
            offset: 0,
        });
        let text = m.expect("the memory").items[0].memory.index_text();
        assert_eq!(e.len, u64::from(engram::index::lexicon::analyse(&text).1), "the length of {id}");
    }
    // Neighbours: the members of each sequence in (ordinal, docno) order, as the in-memory catalog keeps them.
    let mut groups: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for e in &got {
        let m = &e.meta;
        if let Some(p) = m.position.as_ref().filter(|_| m.is_latest && m.state != MemoryState::Forgotten) {
            groups.entry(p.group.to_string()).or_default().push((p.ordinal, e.docno));
        }
    }
    for seq in groups.values_mut() {
        seq.sort_unstable();
    }
    let docnos: Vec<u64> = got.iter().map(|e| e.docno).collect();
    let len_of: BTreeMap<u64, u64> = got.iter().map(|e| (e.docno, e.len)).collect();
    for window in [1usize, 2] {
        // The counts, and what the neighbours add to the expanded collection: each member's length once per
        // neighbour within the window.
        let stats = rtx.catalog_stats(space, window).expect("catalog stats");
        assert_eq!(stats.entries as usize, want.len());
        assert_eq!(stats.live as usize, want.values().filter(|m| m.state != MemoryState::Forgotten).count());
        assert_eq!(stats.sequenced as usize, groups.values().map(Vec::len).sum::<usize>());
        let mut added = 0;
        for seq in groups.values() {
            for i in 0..seq.len() {
                added += len_of[&seq[i].1] * (i.min(window) + (seq.len() - 1 - i).min(window)) as u64;
            }
        }
        assert_eq!(stats.neighbour_len, added, "the neighbours' length at window {window}");
        let nb = rtx.sequence_neighbours(space, &docnos, window).expect("neighbours");
        for (d, found) in docnos.iter().zip(&nb) {
            let mut want = Vec::new();
            for seq in groups.values() {
                if let Some(i) = seq.iter().position(|x| x.1 == *d) {
                    want.extend((1..=window).filter_map(|k| i.checked_sub(k).map(|j| (seq[j].1, k as u32))));
                    want.extend((1..=window).filter_map(|k| seq.get(i + k).map(|x| (x.1, k as u32))));
                }
            }
            assert_eq!(found, &want, "neighbours of docno {d} at window {window}");
        }
    }
}

fn memory(store: &KnowledgeStore, space: &str, content: &str, labels: &[&str]) -> String {
    store
        .memories()
        .create(NewMemory {
            content: content.into(),
            space_id: Some(space.into()),
            labels: Some(labels.iter().map(|l| l.to_string()).collect()),
            importance: Some(0.7),
            ..Default::default()
        })
        .expect("memory")
        .view
        .memory
        .id
}

#[test]
fn every_write_keeps_the_database_catalog_equal_to_the_in_memory_one() {
    if backend::pg_server().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.spaces().create(NewSpace { name: "Other".into(), ..Default::default() }).unwrap();
    check(&store, "default");

    let turns = backend::per_message_thread(
        &store,
        "default",
        "t1",
        &[
            "Ann adopted a grey cat called Miso last spring.",
            "Does Miso like the garden?",
            "She sleeps in the sun by the greenhouse every afternoon.",
            "Ann is planting tomatoes and basil this year.",
            "The basil came from her neighbour Rosa.",
        ],
    );
    assert!(turns.len() >= 4, "per-message memories: {turns:?}");
    let plain = memory(&store, "default", "The quarterly report is due on Friday.", &["work"]);
    let labelled = memory(&store, "default", "Rosa teaches Italian on Tuesdays.", &["people", "lessons"]);
    check(&store, "default");

    // Catalog fields only (no text): a label attached and detached, a state change, a favourite.
    store.labels().create("default", "garden", None, None).unwrap();
    assert!(store.labels().set_on_memory(&turns[2], "label_garden", true, None).unwrap());
    assert!(store.labels().set_on_memory(&labelled, "label_lessons", false, None).unwrap());
    store.memories().change_state(&plain, None, Transition::Archive, None).unwrap();
    // A turn forgotten leaves its sequence: its neighbours close up.
    store.memories().change_state(&turns[1], None, Transition::Forget, None).unwrap();
    check(&store, "default");

    // Text changes: an edit (new length and postings), a supersession, a delete, a move to another space.
    store
        .memories()
        .update(
            &labelled,
            MemoryPatch { content: Some("Rosa teaches Italian and Spanish.".into()), ..Default::default() },
            None,
        )
        .unwrap();
    let newer = memory(&store, "default", "Ann adopted a second cat, Tofu.", &[]);
    store.memories().change_state(&turns[0], None, Transition::Supersede { newer: newer.clone() }, None).unwrap();
    store.memories().delete(&turns[3], None).unwrap();
    let moved = memory(&store, "default", "Moving day is in June.", &["work"]);
    store
        .memories()
        .update(&moved, MemoryPatch { space_id: Some("other".into()), ..Default::default() }, None)
        .unwrap();
    check(&store, "default");
    check(&store, "other");
    assert_eq!(catalog(&store, "other").len(), 1);

    // A second daemon on the same database: its writes keep the catalog, and the first one's catalog agrees.
    let second =
        KnowledgeStore::open(StoreConfig::new(dir.path().join("second")).database(backend::pg_url_for(dir.path())))
            .expect("a second daemon");
    backend::per_message_thread(
        &second,
        "other",
        "t2",
        &["Second daemon turn one.", "Second daemon turn two.", "And three."],
    );
    check(&second, "other");
    drop(second);
    // The first daemon learns of them from the change feed (polled): then its listing agrees with the catalog.
    let waited = std::time::Instant::now();
    while records(&store, "other").len() < catalog(&store, "other").len() && waited.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    check(&store, "other");

    // A database of schema 1 had no catalog: emptied and unmarked here, it is filled again at the next open.
    drop(store);
    let mut client = engram::storage::postgres::connect(&backend::pg_url_for(dir.path())).unwrap();
    client.batch_execute("DELETE FROM catalog; DELETE FROM meta WHERE k0 = 'catalog_filled'").unwrap();
    let store = open(dir.path());
    for space in ["default", "other"] {
        check(&store, space);
        assert!(!catalog(&store, space).is_empty());
    }
    let seq: BTreeSet<u64> =
        catalog(&store, "default").iter().filter(|e| !e.sequence().0.is_empty()).map(|e| e.docno).collect();
    assert_eq!(seq.len(), turns.len() - 3, "the turns left in the thread: one forgotten, one superseded, one deleted");
}
