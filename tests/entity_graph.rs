//! Entities kept in step with memory writes on a real redb file: MENTIONS on create, replacement on a text
//! change, RELATES_TO co-occurrence weights, removal on delete, canonical names across spellings, and the
//! HTTP fields (`extracted_entities`, `created_relationships`, `include_entities`).
#![cfg(feature = "server")]

mod common;

use common::{call, server};
use engram::{KnowledgeStore, MemoryPatch, NewMemory, StoreConfig};
use serde_json::json;

fn mem(id: &str, content: &str) -> NewMemory {
    NewMemory { id: Some(id.into()), content: content.into(), ..Default::default() }
}

fn names(es: &[engram::Entity]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = es.iter().map(|e| (e.name.clone(), e.entity_type.clone())).collect();
    v.sort();
    v
}

#[test]
fn mentions_follow_memory_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    let c = store
        .memories()
        .create(mem("a", "Caroline moved the billing database from postgres to Redis in Lisbon."))
        .unwrap();
    assert_eq!(
        names(&c.entities),
        vec![
            ("Caroline".into(), "person".into()),
            ("Lisbon".into(), "location".into()),
            ("PostgreSQL".into(), "product".into()),
            ("Redis".into(), "product".into())
        ]
    );
    // 4 MENTIONS + 6 RELATES_TO pairs.
    assert_eq!(c.created_relationships, 10);
    let c2 = store.memories().create(mem("b", "Postgres needs 4 GB of shared buffers, Caroline said.")).unwrap();
    let pg = c2.entities.iter().find(|e| e.entity_type == "product").unwrap();
    assert_eq!((pg.name.as_str(), pg.mention_count), ("PostgreSQL", 2), "postgres and Postgres are one entity");
    assert!(pg.aliases.iter().any(|a| a == "postgres"), "{:?}", pg.aliases);
    let caroline = c.entities.iter().find(|e| e.name == "Caroline").unwrap().id.clone();
    let related = store.graph().related_entities("default", &caroline, 10).unwrap();
    assert_eq!(related[0].0.name, "PostgreSQL");
    assert_eq!(related[0].1, 2, "Caroline and PostgreSQL co-occur in two memories");

    // A text change replaces the mentions; an entity nobody mentions any more is gone.
    store
        .memories()
        .update("a", MemoryPatch { content: Some("Caroline visited Porto.".into()), ..Default::default() }, None)
        .unwrap();
    assert_eq!(
        names(&store.graph().entities_of("default", "a").unwrap()),
        vec![("Caroline".into(), "person".into()), ("Porto".into(), "location".into())]
    );
    let redis = engram::store::entity_id(engram::extract::entities::EntityType::Product, "Redis");
    assert!(store.graph().entity("default", &redis).is_err(), "Redis is no longer mentioned");
    let weights: Vec<(String, u64)> = store
        .graph()
        .related_entities("default", &caroline, 10)
        .unwrap()
        .into_iter()
        .map(|(e, w)| (e.name, w))
        .collect();
    assert!(weights.contains(&("PostgreSQL".into(), 1)) && weights.contains(&("Porto".into(), 1)), "{weights:?}");

    // Written together as "X (Y)", two names become one entity; Y alone then resolves to it.
    let c3 = store.memories().create(mem("c", "We run Engram (Mnemo) on every laptop.")).unwrap();
    let engram_entity = c3.entities.iter().find(|e| e.name == "Engram").unwrap().clone();
    assert!(engram_entity.aliases.contains(&"Mnemo".to_string()), "{:?}", c3.entities);
    let c4 = store.memories().create(mem("d", "Our team uses Mnemo daily.")).unwrap();
    assert!(c4.entities.iter().any(|e| e.id == engram_entity.id && e.mention_count == 2), "{:?}", c4.entities);

    store.memories().delete("b", None).unwrap();
    assert_eq!(store.graph().entity("default", &caroline).unwrap().mention_count, 1);
    drop(store);
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    assert_eq!(names(&store.graph().entities_of("default", "a").unwrap()).len(), 2, "edges are in the file");
}

#[test]
fn http_create_and_search_report_entities() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let r = call(
        &srv,
        "POST",
        "/memories",
        Some(&json!({"id": "m", "content": "Jon opened a dance studio in Barcelona on 3 March 2023."}).to_string()),
    );
    let v = r.json();
    let got: Vec<(&str, &str)> = v["extracted_entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["entity_type"].as_str().unwrap()))
        .collect();
    assert_eq!(got, vec![("Jon", "person"), ("Barcelona", "location"), ("3 March 2023", "date")], "{v}");
    assert_eq!(v["created_relationships"], 6);
    assert_eq!(v["extracted_entities"][0]["node_type"], "entity");
    let v = call(&srv, "GET", "/memories/search?q=dance%20studio&include_entities=true", None).json();
    assert_eq!(v["memories"][0]["related_entities"].as_array().map(Vec::len), Some(3), "{v}");
    let v =
        call(&srv, "POST", "/memories/search", Some(&json!({"query": "dance", "include_entities": true}).to_string()))
            .json();
    assert_eq!(v[0]["related_entities"][1]["name"], "Barcelona", "{v}");
    let v = call(&srv, "GET", "/memories/search?q=dance", None).json();
    assert!(v["memories"][0].get("related_entities").is_none());
}
