//! Spaces on a real redb file and a real daemon: isolation of identical content in two spaces across list,
//! get, search, labels and stats; profile update and resolution; refusing to delete a non-empty space;
//! cascade delete; bulk moves; shared-space search; relations and access counts.

mod backend;
#[cfg(feature = "server")]
mod common;

use std::sync::Arc;

#[cfg(feature = "server")]
use common::{call, server_on};

use engram::{
    ErrorKind, KnowledgeStore, ListQuery, MemoryFilter, MoveSelection, NewMemory, NewSpace, RelationInput,
    RelationQuery, SearchMode, SearchQuery, SpacePatch,
};

fn new_space(store: &KnowledgeStore, name: &str) -> String {
    store.spaces().create(NewSpace { name: name.into(), ..Default::default() }).unwrap().id
}

fn put(store: &KnowledgeStore, space: &str, id: &str, content: &str, labels: &[&str]) {
    store
        .memories()
        .create(NewMemory {
            id: Some(id.into()),
            space_id: Some(space.into()),
            content: content.into(),
            labels: Some(labels.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        })
        .unwrap();
}

fn search(store: &KnowledgeStore, space: &str, q: &str) -> Vec<(String, String)> {
    store
        .search()
        .run(&SearchQuery {
            query: q.into(),
            space_id: space.into(),
            limit: 20,
            filter: MemoryFilter::default(),
            mode: SearchMode::Hybrid,
            fusion: None,
            query_embedding: None,
            options: Default::default(),
        })
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.view.memory.space_id, h.view.memory.id))
        .collect()
}

fn list(store: &KnowledgeStore, space: &str) -> Vec<String> {
    let q = ListQuery { space_id: space.into(), filter: MemoryFilter::default(), limit: 100, offset: 0 };
    let mut v: Vec<String> = store.memories().list(&q).unwrap().items.into_iter().map(|m| m.memory.id).collect();
    v.sort();
    v
}

#[test]
fn two_spaces_with_identical_content_do_not_leak() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(backend::open(dir.path()));
    let a = new_space(&store, "Alpha");
    let b = new_space(&store, "Beta");
    for (space, prefix) in [(&a, "a"), (&b, "b")] {
        put(&store, space, &format!("{prefix}1"), "Alice moved to Lisbon in May", &["travel"]);
        put(&store, space, &format!("{prefix}2"), "The launch budget is 40k euros", &["work", "budget"]);
    }
    put(&store, &b, "b3", "Only beta knows the vault code", &["secret"]);

    assert_eq!(list(&store, &a), vec!["a1", "a2"]);
    assert_eq!(list(&store, &b), vec!["b1", "b2", "b3"]);
    for q in ["Lisbon", "budget euros", "vault code", "Alice"] {
        assert!(search(&store, &a, q).iter().all(|(s, id)| s == &a && id.starts_with('a')), "{q}");
        assert!(search(&store, &b, q).iter().all(|(s, id)| s == &b && id.starts_with('b')), "{q}");
    }
    // Vector ranking always finds neighbours; none of them may be beta's.
    assert!(!search(&store, &a, "vault code").iter().any(|(_, id)| id == "b3"));
    assert_eq!(store.memories().get("b3", Some(&a)).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.memories().get("b3", Some(&b)).unwrap().memory.content, "Only beta knows the vault code");
    let la = store.labels().list(&a, Default::default(), false, 100, 0).unwrap();
    assert_eq!(la.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), vec!["budget", "travel", "work"]);
    assert!(la.iter().all(|l| l.usage_count == 1 && l.space_id == a));
    assert_eq!(store.labels().get(&a, "label_secret").unwrap_err().kind(), ErrorKind::NotFound);
    let (sa, sb) = (store.admin().stats(Some(&a)).unwrap(), store.admin().stats(Some(&b)).unwrap());
    assert_eq!((sa.memory_count, sa.label_count), (2, 3));
    assert_eq!((sb.memory_count, sb.label_count), (3, 4));
    assert_eq!(store.labels().health(Some(&a)).unwrap().vocabulary_size, 3);

    // The same through HTTP.
    #[cfg(feature = "server")]
    http_sees_one_space(dir.path(), store, &a);
}

#[cfg(feature = "server")]
fn http_sees_one_space(dir: &std::path::Path, store: Arc<KnowledgeStore>, a: &str) {
    let srv = server_on(dir, store, 1 << 20);
    let r = call(&srv, "GET", &format!("/memories/search?q=vault%20code&space_id={a}"), None).json();
    assert!(r["memories"].as_array().unwrap().iter().all(|m| m["space_id"] == a && m["id"] != "b3"), "{r}");
    let r = call(&srv, "GET", &format!("/memories?space_id={a}"), None).json();
    assert_eq!(r["pagination"]["total"], 2);
    assert_eq!(call(&srv, "GET", &format!("/memories/b3?space_id={a}"), None).status, 404);
    let r = call(&srv, "GET", &format!("/labels?space_id={a}"), None).json();
    assert!(r.as_array().unwrap().iter().all(|l| l["name"] != "secret"));
    assert_eq!(call(&srv, "GET", &format!("/stats?space_id={a}"), None).json()["memory_count"], 2);
    assert_eq!(call(&srv, "GET", "/stats?space_id=nope", None).status, 404);
}

#[test]
fn profiles_resolution_deletion_and_bulk_moves() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    let work = store
        .spaces()
        .create(NewSpace {
            name: "Work Notes".into(),
            id: Some("work".into()),
            aliases: vec!["job".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(work.id, "work");
    let bad = store.spaces().create(NewSpace { name: "x".into(), id: Some("Not A Slug".into()), ..Default::default() });
    assert_eq!(bad.unwrap_err().kind(), ErrorKind::InvalidInput);
    let clash = store.spaces().create(NewSpace { name: "Job".into(), ..Default::default() });
    assert_eq!(clash.unwrap_err().code(), "space_name_taken");
    for r in ["work", "Work Notes", "work notes", "JOB"] {
        assert_eq!(store.spaces().resolve(r).unwrap().id, "work", "{r}");
    }
    assert_eq!(store.spaces().resolve("nowhere").unwrap_err().kind(), ErrorKind::NotFound);
    let s = store
        .spaces()
        .update(
            "work",
            SpacePatch {
                icon: Some("W".into()),
                aliases: Some(vec!["office".into()]),
                shared_space_ids: Some(vec!["default".into()]),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        (s.icon.as_str(), s.aliases.clone(), s.shared_space_ids.clone()),
        ("W", vec!["office".to_string()], vec!["default".to_string()])
    );
    let self_share =
        store.spaces().update("work", SpacePatch { shared_space_ids: Some(vec!["work".into()]), ..Default::default() });
    assert_eq!(self_share.unwrap_err().kind(), ErrorKind::InvalidInput);

    put(&store, "default", "d1", "The wifi password is hunter2", &["home"]);
    put(&store, "default", "d2", "Dentist appointment on Friday", &["home"]);
    put(&store, "work", "w1", "The wifi at the office is slow", &[]);
    // Work shares default: its search sees both; default's does not see work.
    let hits = search(&store, "work", "wifi");
    assert!(
        hits.contains(&("work".into(), "w1".into())) && hits.contains(&("default".into(), "d1".into())),
        "{hits:?}"
    );
    assert!(search(&store, "default", "wifi").iter().all(|(s, _)| s == "default"));

    // Bulk move keeps the vector and labels, and the memory leaves the source's indexes.
    let sel = MoveSelection::Ids { memory_ids: vec!["d1".into(), "missing".into()], source_space_id: None };
    let preview = store.spaces().move_memories(&sel, "work", true).unwrap();
    assert_eq!((preview.count, preview.moved_count), (2, 0));
    assert_eq!(list(&store, "default"), vec!["d1", "d2"], "a preview moves nothing");
    let moved = store.spaces().move_memories(&sel, "work", false).unwrap();
    assert_eq!((moved.moved_count, moved.failed_count), (1, 1));
    assert_eq!(list(&store, "default"), vec!["d2"]);
    assert_eq!(list(&store, "work"), vec!["d1", "w1"]);
    assert_eq!(store.memories().get("d1", None).unwrap().label_ids, vec!["label_home"]);
    assert_eq!(store.labels().get("default", "label_home").unwrap().usage_count, 1);
    assert!(!search(&store, "default", "hunter2").iter().any(|(_, id)| id == "d1"));
    assert_eq!(search(&store, "work", "hunter2")[0], ("work".to_string(), "d1".to_string()));

    // Deleting a non-empty space is refused and changes nothing; cascade removes everything of it.
    assert_eq!(store.spaces().delete("work", false).unwrap_err().code(), "space_not_empty");
    assert_eq!(list(&store, "work"), vec!["d1", "w1"]);
    assert_eq!(store.spaces().delete("default", true).unwrap_err().code(), "default_space");
    let all = MoveSelection::Space { source_space_id: "work".into(), exclude_memory_ids: vec!["w1".into()] };
    assert_eq!(store.spaces().move_memories(&all, "default", false).unwrap().moved_count, 1);
    store.spaces().delete("work", true).unwrap();
    assert_eq!(store.memories().get("w1", None).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.memories().get("d1", Some("default")).unwrap().memory.space_id, "default");
    assert_eq!(store.spaces().get("work").unwrap_err().kind(), ErrorKind::NotFound);
    drop(store);
    let store = backend::open(dir.path());
    assert_eq!(list(&store, "default"), vec!["d1", "d2"]);
    assert!(store.spaces().list().unwrap().iter().all(|s| s.id != "work"));
    // The id is free again and the new space starts empty.
    store.spaces().create(NewSpace { name: "Work".into(), ..Default::default() }).unwrap();
    assert!(list(&store, "work").is_empty());
    assert!(search(&store, "work", "wifi").is_empty());
}

#[test]
fn relations_and_access_counts() {
    let dir = tempfile::tempdir().unwrap();
    let store = backend::open(dir.path());
    put(&store, "default", "x", "Paris is the capital of France", &[]);
    put(&store, "default", "y", "France is in Europe", &[]);
    let other = new_space(&store, "Other");
    put(&store, &other, "z", "Elsewhere", &[]);
    let input = |t: &str, kind: &str| RelationInput {
        target_memory_id: t.into(),
        relation_type: Some(kind.into()),
        reason: Some("geography".into()),
        ..Default::default()
    };
    let r = store.graph().create_relation("x", input("y", "supports"), None).unwrap();
    assert_eq!((r.direction.as_str(), r.target_title.as_str()), ("out", "France is in Europe"));
    let again = store
        .graph()
        .create_relation("x", RelationInput { strength: Some(0.4), ..input("y", "supports") }, None)
        .unwrap();
    assert_eq!(again.relation.id, r.relation.id, "the same triple updates, not duplicates");
    assert_eq!(again.relation.strength, 0.4);
    assert_eq!(
        store.graph().create_relation("x", input("z", "supports"), None).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        store.graph().create_relation("x", input("x", "supports"), None).unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    let bad = RelationInput { strength: Some(2.0), ..input("y", "supports") };
    assert_eq!(store.graph().create_relation("x", bad, None).unwrap_err().kind(), ErrorKind::InvalidInput);
    let q = |dir: &str, status: &str| RelationQuery {
        direction: dir.into(),
        status: status.into(),
        limit: 50,
        types: vec![],
    };
    assert_eq!(store.graph().relations_of("y", &q("in", "active"), None).unwrap().len(), 1);
    assert_eq!(store.graph().relations_of("y", &q("out", "active"), None).unwrap().len(), 0);
    store.graph().delete_relation(&r.relation.id).unwrap();
    assert!(store.graph().relations_of("x", &q("both", "active"), None).unwrap().is_empty());
    assert_eq!(store.graph().relations_of("x", &q("both", "deleted"), None).unwrap().len(), 1);
    store
        .graph()
        .update_relation(&r.relation.id, RelationInput { status: Some("active".into()), ..Default::default() })
        .unwrap();
    // Deleting a memory removes its relations.
    store.memories().delete("y", None).unwrap();
    assert!(store.graph().relations_of("x", &q("both", "active"), None).unwrap().is_empty());
    assert_eq!(
        store.graph().update_relation(&r.relation.id, RelationInput::default()).unwrap_err().kind(),
        ErrorKind::NotFound
    );

    // Reads by id count; a plain get does not.
    assert_eq!(store.memories().read("x", None).unwrap().memory.access_count, 1);
    let m = store.memories().read("x", None).unwrap().memory;
    assert_eq!(m.access_count, 2);
    assert!(m.last_accessed_at.is_some());
    assert!((m.decay_score_cached - 1.0).abs() < 1e-9);
    assert_eq!(store.memories().get("x", None).unwrap().memory.access_count, 2);
    drop(store);
    let store = backend::open(dir.path());
    assert_eq!(store.memories().get("x", None).unwrap().memory.access_count, 2, "counts survive a reopen");
}
