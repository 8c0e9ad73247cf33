//! Sources on a real redb file and a real daemon: ingestion (markdown, text, HTML) with SHA-256 deduplication,
//! section tree, chunks, extracted memories, list filters (labels AND, metadata keys AND / values OR), search,
//! content windows, path confinement, unsupported formats, deletion with its memories.

#[cfg(feature = "server")]
mod common;

use engram::{ErrorKind, KnowledgeStore, ListQuery, MemoryFilter, Metadata, NewSource, SourceQuery, StoreConfig};

const GUIDE: &str = "# Coffee guide\n\nWe decided to buy a new espresso machine for the office in March.\n\n\
## Brewing\n\nUse 18 grams of coffee for a double shot and brew for about 28 seconds at 93 degrees.\n\n\
## Cleaning\n\nBackflush the machine every Friday with detergent and descale it every two months.\n";

fn doc(name: &str, body: &str, labels: &[&str], meta: serde_json::Value) -> NewSource {
    NewSource {
        bytes: body.as_bytes().to_vec(),
        original_name: name.into(),
        labels: labels.iter().map(|s| s.to_string()).collect(),
        metadata: serde_json::from_value::<Metadata>(meta).unwrap(),
        extract_memories: true,
        ..Default::default()
    }
}

fn query() -> SourceQuery {
    SourceQuery {
        space_id: "default".into(),
        source_type: None,
        lifecycle_state: None,
        labels: vec![],
        metadata: vec![],
        limit: 50,
        offset: 0,
    }
}

fn names(store: &KnowledgeStore, q: &SourceQuery) -> Vec<String> {
    let mut v: Vec<String> = store.list_sources(q).unwrap().items.into_iter().map(|s| s.original_name).collect();
    v.sort();
    v
}

#[test]
fn ingest_parse_search_read_delete() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    let r = store.ingest_source(doc("notes/guide.md", GUIDE, &["coffee"], serde_json::json!({"team": "ops"}))).unwrap();
    let s = &r.source;
    assert!(!r.deduplicated);
    assert_eq!(s.original_name, "guide.md");
    assert_eq!(s.mime_type, "text/markdown");
    assert_eq!(s.lifecycle_state, "indexed");
    assert_eq!(s.size_bytes, GUIDE.len() as u64);
    assert_eq!(s.sha256.len(), 64);
    assert_eq!((s.chunk_count, s.memory_count), (3, 3));
    assert_eq!(s.label_ids, ["label_coffee"]);
    let tree: serde_json::Value = serde_json::from_str(&s.section_tree).unwrap();
    assert_eq!(tree[0]["title"], "Coffee guide");
    assert_eq!(tree[0]["children"][1]["title"], "Cleaning");
    // Extracted memories carry the labels and point back at the source.
    let q = ListQuery { space_id: "default".into(), filter: MemoryFilter::default(), limit: 50, offset: 0 };
    let mems = store.list_memories(&q).unwrap().items;
    assert_eq!(mems.len(), 3);
    for m in &mems {
        assert_eq!(m.label_ids, ["label_coffee"]);
        assert_eq!(m.memory.metadata.0["source_id"], serde_json::json!(s.id));
    }
    assert!(mems.iter().any(|m| m.memory.title == "Brewing" && m.memory.content.contains("18 grams")));

    // Same bytes again: the same source, nothing new.
    let again = store.ingest_source(doc("copy.md", GUIDE, &[], serde_json::json!({}))).unwrap();
    assert!(again.deduplicated);
    assert_eq!(again.source.id, s.id);
    assert_eq!(store.list_memories(&q).unwrap().total, 3);

    // Search finds the chunk; the content route reads windows by bytes.
    let hits = store.search_sources("default", "descale detergent", 5).unwrap();
    assert_eq!(hits[0].source.id, s.id);
    assert_eq!(hits[0].chunks[0].section, "Coffee guide > Cleaning");
    let w = store.source_content(&s.id, None, 0, 16).unwrap();
    assert_eq!(w.content, "# Coffee guide\n\n");
    assert_eq!((w.returned_length, w.total_length, w.next_offset), (16, GUIDE.len() as u64, Some(16)));
    let rest = store.source_content(&s.id, None, 16, 1 << 20).unwrap();
    assert_eq!(format!("{}{}", w.content, rest.content), GUIDE);
    assert!(!rest.has_more);

    // Delete takes the extracted memories with it, and the bytes can come back as a new source.
    let (gone, n) = store.delete_source(&s.id, None).unwrap();
    assert_eq!((gone.id.as_str(), n), (s.id.as_str(), 3));
    assert_eq!(store.get_source(&s.id, None).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.list_memories(&q).unwrap().total, 0);
    assert!(store.search_sources("default", "descale", 5).unwrap().is_empty());
    let back = store.ingest_source(doc("guide.md", GUIDE, &[], serde_json::json!({}))).unwrap();
    assert!(!back.deduplicated);
    assert_ne!(back.source.id, s.id);
}

#[test]
fn filters_formats_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    let put = |name: &str, body: &str, labels: &[&str], meta: serde_json::Value| {
        store.ingest_source(doc(name, body, labels, meta)).unwrap().source
    };
    put(
        "a.md",
        "# A\n\nAlpha document about gardens and tomatoes in summer.",
        &["x", "y"],
        serde_json::json!({"team": "ops", "year": 2024}),
    );
    put(
        "b.txt",
        "Beta document about boats and sailing on the lake in June.",
        &["x"],
        serde_json::json!({"team": "dev", "year": 2025}),
    );
    let html = put(
        "c.html",
        "<html><body><h1>Gamma</h1><p>Gamma page about <b>mountains</b> and hiking trails near the valley.</p></body></html>",
        &["y"],
        serde_json::json!({"team": "ops"}),
    );
    assert_eq!(html.mime_type, "text/html");
    let tree: serde_json::Value = serde_json::from_str(&html.section_tree).unwrap();
    assert_eq!(tree[0]["title"], "Gamma");
    assert!(store.source_content(&html.id, None, 0, 1000).unwrap().content.contains("mountains"));

    let mut q = query();
    q.labels = vec!["x".into(), "label_y".into()];
    assert_eq!(names(&store, &q), ["a.md"], "labels AND, by name or id");
    let mut q = query();
    q.metadata = vec![("team".into(), "ops".into()), ("team".into(), "dev".into())];
    assert_eq!(names(&store, &q), ["a.md", "b.txt", "c.html"], "same key: OR");
    q.metadata.push(("year".into(), "2025".into()));
    assert_eq!(names(&store, &q), ["b.txt"], "different keys: AND (numbers by their JSON text)");
    let mut q = query();
    q.lifecycle_state = Some("error".into());
    assert!(names(&store, &q).is_empty());
    q.lifecycle_state = Some("bogus".into());
    assert_eq!(store.list_sources(&q).unwrap_err().kind(), ErrorKind::InvalidInput);
    let mut q = query();
    q.limit = 2;
    q.offset = 2;
    let page = store.list_sources(&q).unwrap();
    assert_eq!((page.total, page.items.len()), (3, 1));
    assert_eq!(page.items[0].original_name, "a.md", "newest first");

    // PDF is not parsed in this release: refused, nothing stored.
    let e = store
        .ingest_source(NewSource { bytes: b"%PDF-1.7".to_vec(), original_name: "x.pdf".into(), ..Default::default() })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert_eq!(e.fields()[0].kind, "unsupported_format");
    assert_eq!(store.list_sources(&query()).unwrap().total, 3);

    // Ingestion by path: inside the data directory yes, outside (or escaping with ..) no.
    std::fs::write(dir.path().join("inside.md"), "# In\n\nA file inside the data directory about apples and pears.")
        .unwrap();
    let s = store.ingest_path(&dir.path().join("inside.md"), NewSource::default()).unwrap().source;
    assert_eq!(s.original_name, "inside.md");
    assert!(s.file_path.ends_with("inside.md"));
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
    let e = store.ingest_path(&outside.path().join("secret.md"), NewSource::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden);
    let sneaky = dir.path().join("..").join(outside.path().file_name().unwrap()).join("secret.md");
    assert_eq!(store.ingest_path(&sneaky, NewSource::default()).unwrap_err().kind(), ErrorKind::Forbidden);
    assert_eq!(store.list_sources(&query()).unwrap().total, 4);
    drop(store);
    // An allowed directory opens up.
    let store = KnowledgeStore::open(StoreConfig::new(dir.path()).allow_path(outside.path())).unwrap();
    assert_eq!(
        store.ingest_path(&outside.path().join("secret.md"), NewSource::default()).unwrap().source.size_bytes,
        6
    );
}

#[cfg(feature = "server")]
#[test]
fn http_multipart_upload_and_routes() {
    use common::{KEY, call, raw, server};
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let boundary = "XyZ123boundary";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"guide.md\"\r\nContent-Type: text/markdown\r\n\r\n{GUIDE}\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"labels\"\r\n\r\ncoffee\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{{\"team\":\"ops\"}}\r\n--{boundary}--\r\n"
    );
    let head = format!(
        "POST /sources/ingest/file HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {KEY}\nContent-Type: multipart/form-data; boundary={boundary}\nContent-Length: {}\n",
        body.len()
    );
    let r = raw(srv.addr, &head, body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(v["source_id"], v["id"]);
    assert_eq!(v["memory_count"], 3);
    assert_eq!(v["label_ids"], serde_json::json!(["label_coffee"]));
    assert_eq!(v["metadata"]["team"], "ops");

    let l = call(&srv, "GET", "/sources?label=coffee&metadata=team=ops&lifecycle_state=indexed", None).json();
    assert_eq!(l["total"], 1);
    assert_eq!(l["sources"][0]["id"], id.as_str());
    assert_eq!(call(&srv, "GET", "/sources?metadata=team=dev", None).json()["total"], 0);
    assert_eq!(call(&srv, "GET", "/sources?limit=201", None).status, 422);
    let s = call(&srv, "GET", "/sources/search?q=espresso&limit=5", None).json();
    assert_eq!(s["results"][0]["source_id"], id.as_str());
    let c = call(&srv, "GET", &format!("/sources/{id}/content?offset=2&limit=12"), None).json();
    assert_eq!((c["content"].as_str(), c["returned_length"].as_u64()), (Some("Coffee guide"), Some(12)));
    assert_eq!(c["total_length"], GUIDE.len());
    // JSON upload (the C API's way) of an unsupported type: 422 with the spec's detail shape.
    let bad = call(&srv, "POST", "/sources/ingest/file", Some(r#"{"file_name":"x.pdf","content":"%PDF"}"#));
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["detail"][0]["loc"], serde_json::json!(["body", "file"]));
    // A multipart body without a file part.
    let nofile =
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"labels\"\r\n\r\nx\r\n--{boundary}--\r\n");
    let head = format!(
        "POST /sources/ingest/file HTTP/1.1\nHost: 127.0.0.1\nAuthorization: Bearer {KEY}\nContent-Type: multipart/form-data; boundary={boundary}\nContent-Length: {}\n",
        nofile.len()
    );
    assert_eq!(raw(srv.addr, &head, nofile.as_bytes()).status, 422);
    // Path ingestion outside the allowed directories: 403.
    let p = call(&srv, "POST", "/sources/ingest/path", Some(r#"{"path":"/etc/hostname"}"#));
    assert_eq!(p.status, 403, "{}", p.body);
    let d = call(&srv, "DELETE", &format!("/sources/{id}"), None).json();
    assert_eq!(d["memories_deleted"], 3);
    assert_eq!(call(&srv, "GET", &format!("/sources/{id}"), None).status, 404);
}
