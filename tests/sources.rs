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
    let mut v: Vec<String> = store.sources().list(q).unwrap().items.into_iter().map(|s| s.original_name).collect();
    v.sort();
    v
}

#[test]
fn ingest_parse_search_read_delete() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    let r =
        store.sources().ingest(doc("notes/guide.md", GUIDE, &["coffee"], serde_json::json!({"team": "ops"}))).unwrap();
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
    let mems = store.memories().list(&q).unwrap().items;
    assert_eq!(mems.len(), 3);
    for m in &mems {
        assert_eq!(m.label_ids, ["label_coffee"]);
        assert_eq!(m.memory.metadata.0["source_id"], serde_json::json!(s.id));
    }
    assert!(mems.iter().any(|m| m.memory.title == "Brewing" && m.memory.content.contains("18 grams")));

    // Same bytes again: the same source, nothing new.
    let again = store.sources().ingest(doc("copy.md", GUIDE, &[], serde_json::json!({}))).unwrap();
    assert!(again.deduplicated);
    assert_eq!(again.source.id, s.id);
    assert_eq!(store.memories().list(&q).unwrap().total, 3);

    // Search finds the chunk; the content route reads windows by bytes.
    let hits = store.sources().search("default", "descale detergent", 5).unwrap();
    assert_eq!(hits[0].source.id, s.id);
    assert_eq!(hits[0].chunks[0].section, "Coffee guide > Cleaning");
    let w = store.sources().content(&s.id, None, 0, 16).unwrap();
    assert_eq!(w.content, "# Coffee guide\n\n");
    assert_eq!((w.returned_length, w.total_length, w.next_offset), (16, GUIDE.len() as u64, Some(16)));
    let rest = store.sources().content(&s.id, None, 16, 1 << 20).unwrap();
    assert_eq!(format!("{}{}", w.content, rest.content), GUIDE);
    assert!(!rest.has_more);

    // Delete takes the extracted memories with it, and the bytes can come back as a new source.
    let (gone, n) = store.sources().delete(&s.id, None).unwrap();
    assert_eq!((gone.id.as_str(), n), (s.id.as_str(), 3));
    assert_eq!(store.sources().get(&s.id, None).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(store.memories().list(&q).unwrap().total, 0);
    assert!(store.sources().search("default", "descale", 5).unwrap().is_empty());
    let back = store.sources().ingest(doc("guide.md", GUIDE, &[], serde_json::json!({}))).unwrap();
    assert!(!back.deduplicated);
    assert_ne!(back.source.id, s.id);
}

#[test]
fn filters_formats_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    let put = |name: &str, body: &str, labels: &[&str], meta: serde_json::Value| {
        store.sources().ingest(doc(name, body, labels, meta)).unwrap().source
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
    assert!(store.sources().content(&html.id, None, 0, 1000).unwrap().content.contains("mountains"));

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
    assert_eq!(store.sources().list(&q).unwrap_err().kind(), ErrorKind::InvalidInput);
    let mut q = query();
    q.limit = 2;
    q.offset = 2;
    let page = store.sources().list(&q).unwrap();
    assert_eq!((page.total, page.items.len()), (3, 1));
    assert_eq!(page.items[0].original_name, "a.md", "newest first");

    // An image, and a PDF that is only a header: refused, nothing stored.
    let e = store
        .sources()
        .ingest(NewSource { bytes: b"\x89PNG".to_vec(), original_name: "x.png".into(), ..Default::default() })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert_eq!(e.fields()[0].kind, "unsupported_format");
    let e = store
        .sources()
        .ingest(NewSource { bytes: b"%PDF-1.7".to_vec(), original_name: "x.pdf".into(), ..Default::default() })
        .unwrap_err();
    assert_eq!((e.kind(), e.fields()[0].kind.as_str()), (ErrorKind::InvalidInput, "unparsable_document"));
    assert_eq!(store.sources().list(&query()).unwrap().total, 3);

    // Ingestion by path: inside the data directory yes, outside (or escaping with ..) no.
    std::fs::write(dir.path().join("inside.md"), "# In\n\nA file inside the data directory about apples and pears.")
        .unwrap();
    let s = store.sources().ingest_path(&dir.path().join("inside.md"), NewSource::default()).unwrap().source;
    assert_eq!(s.original_name, "inside.md");
    assert!(s.file_path.ends_with("inside.md"));
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.md"), "secret").unwrap();
    let e = store.sources().ingest_path(&outside.path().join("secret.md"), NewSource::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Forbidden);
    let sneaky = dir.path().join("..").join(outside.path().file_name().unwrap()).join("secret.md");
    assert_eq!(store.sources().ingest_path(&sneaky, NewSource::default()).unwrap_err().kind(), ErrorKind::Forbidden);
    assert_eq!(store.sources().list(&query()).unwrap().total, 4);
    drop(store);
    // An allowed directory opens up.
    let store = KnowledgeStore::open(StoreConfig::new(dir.path()).allow_path(outside.path())).unwrap();
    assert_eq!(
        store.sources().ingest_path(&outside.path().join("secret.md"), NewSource::default()).unwrap().source.size_bytes,
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
    let bad = call(&srv, "POST", "/sources/ingest/file", Some(r#"{"file_name":"x.png","content":"PNG"}"#));
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["detail"][0]["loc"], serde_json::json!(["body", "file"]));
    // A JSON upload may name its file `filename` (what several clients send); one with no name at all is a 422
    // at `file_name`, and nothing is stored.
    let aliased = call(
        &srv,
        "POST",
        "/sources/ingest/file",
        Some(r##"{"filename":"notes.md","content":"# Notes\n\nTea at four."}"##),
    );
    assert_eq!(aliased.status, 200, "{}", aliased.body);
    assert_eq!(aliased.json()["original_name"], "notes.md");
    let before = call(&srv, "GET", "/sources", None).json()["total"].clone();
    for body in [r##"{"content":"# Notes"}"##, r##"{"file_name":"  ","content":"# Notes"}"##] {
        let unnamed = call(&srv, "POST", "/sources/ingest/file", Some(body));
        assert_eq!(unnamed.status, 422, "{}", unnamed.body);
        let detail = &unnamed.json()["detail"][0];
        assert_eq!(detail["loc"], serde_json::json!(["body", "file_name"]));
        assert_eq!(detail["type"], "missing");
    }
    assert_eq!(call(&srv, "GET", "/sources", None).json()["total"], before);
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

/// A generated CSV of `n` orders: order id, customer, amount (float), quantity (integer), date, paid (boolean),
/// a note with commas and quotes, and nulls in amount every 10th row.
#[cfg(feature = "server")]
fn orders_csv(n: usize) -> String {
    let customers = ["Acme Corp", "Globex", "Initech", "Umbrella"];
    let mut s = String::from("order_id,customer,amount,quantity,ordered_on,paid,note\n");
    for i in 0..n {
        let amount = if i % 10 == 9 { String::new() } else { format!("{}.{:02}", 10 + i % 90, i % 100) };
        let note = if i % 7 == 0 { format!("\"rush, \"\"fragile\"\" {i}\"") } else { "standard".into() };
        s.push_str(&format!(
            "ORD-{i:05},{},{amount},{},2024-{:02}-{:02},{},{note}\n",
            customers[i % 4],
            1 + i % 5,
            1 + i % 12,
            1 + i % 28,
            if i % 3 == 0 { "yes" } else { "no" }
        ));
    }
    s
}

/// CSV and TSV sources round trip: ingested as data tables (one memory describing the table, rows rendered
/// as `column: value` lines and chunked by whole rows), a value found by search, the column statistics
/// computed against the generator's own figures (HTTP and the MCP tool), refusals as 422.
#[cfg(feature = "server")]
#[test]
fn csv_and_tsv_sources_are_analysed_by_column_and_searchable_by_value() {
    use common::{call, server};
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 8 << 20);
    let csv = orders_csv(500);
    let body = serde_json::json!({"file_name": "orders.csv", "content": csv}).to_string();
    let r = call(&srv, "POST", "/sources/ingest/file", Some(&body));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!((v["mime_type"].as_str(), v["memory_count"].as_u64()), (Some("text/csv"), Some(1)));
    assert!(v["chunk_count"].as_u64().unwrap() > 10, "{v}");
    assert!(v["summary"].as_str().unwrap().starts_with("Data table orders.csv: 500 rows, 7 columns"), "{v}");
    // A row's value is found, in its chunk.
    let s = call(&srv, "GET", "/sources/search?q=ORD-00321&limit=3", None).json();
    assert_eq!(s["results"][0]["source_id"], id.as_str(), "{s}");
    let content = call(&srv, "GET", &format!("/sources/{id}/content?limit=1000000"), None).json();
    assert!(content["content"].as_str().unwrap().contains(
        "row 322: order_id: ORD-00321 | customer: Globex | amount: 61.21 | quantity: 2 | ordered_on: 2024-10-14 | paid: yes | note: standard\n"
    ));
    // Statistics, against the generator's figures.
    let a = call(&srv, "GET", &format!("/sources/{id}/analysis"), None);
    assert_eq!(a.status, 200, "{}", a.body);
    let a = a.json();
    assert_eq!((a["status"].as_str(), a["source_name"].as_str()), (Some("success"), Some("orders.csv")));
    let sheet = &a["sheets"][0];
    assert_eq!((sheet["row_count"].as_u64(), sheet["column_count"].as_u64()), (Some(500), Some(7)));
    let col = |name: &str| sheet["columns"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
    let amounts: Vec<f64> =
        (0..500).filter(|i| i % 10 != 9).map(|i| format!("{}.{:02}", 10 + i % 90, i % 100).parse().unwrap()).collect();
    let amount = col("amount");
    assert_eq!(amount["dtype"], "float");
    assert_eq!((amount["non_null_count"].as_u64(), amount["null_count"].as_u64()), (Some(450), Some(50)));
    let mean = amounts.iter().sum::<f64>() / amounts.len() as f64;
    assert!((amount["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    assert_eq!(amount["min"].as_f64().unwrap(), amounts.iter().copied().fold(f64::INFINITY, f64::min));
    assert_eq!(amount["max"].as_f64().unwrap(), amounts.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let qty = col("quantity");
    assert_eq!((qty["dtype"].as_str(), qty["min"].as_i64(), qty["max"].as_i64()), (Some("integer"), Some(1), Some(5)));
    assert_eq!(qty["mean"].as_f64(), Some(3.0));
    assert_eq!(col("ordered_on")["dtype"], "date");
    assert_eq!(
        (col("ordered_on")["min"].as_str(), col("ordered_on")["max"].as_str()),
        (Some("2024-01-01"), Some("2024-12-28"))
    );
    assert_eq!(col("paid")["dtype"], "boolean");
    assert_eq!(col("paid")["top"][0], serde_json::json!({"value": "no", "count": 333}));
    let customer = col("customer");
    assert_eq!((customer["dtype"].as_str(), customer["unique_count"].as_u64()), (Some("string"), Some(4)));
    assert_eq!(customer["top"][0], serde_json::json!({"value": "Acme Corp", "count": 125}));
    assert!(col("note")["top"].as_array().unwrap().iter().any(|t| t["value"] == "rush, \"fragile\" 0"));
    assert_eq!(col("order_id")["unique_count"], 500);
    // Only some columns (repeated or comma-separated), in file order.
    let some = call(&srv, "GET", &format!("/sources/{id}/analysis?columns=paid,amount&columns=customer"), None).json();
    let names: Vec<&str> =
        some["sheets"][0]["columns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["customer", "amount", "paid"]);
    let unknown = call(&srv, "GET", &format!("/sources/{id}/analysis?columns=amount,amout"), None);
    assert_eq!(unknown.status, 422);
    assert_eq!(unknown.json()["detail"][0]["loc"], serde_json::json!(["query", "columns"]));
    assert!(unknown.json()["detail"][0]["msg"].as_str().unwrap().contains("amout"));
    // The MCP tool (through the REST twin of tools/call).
    let call_body =
        serde_json::json!({"name": "analyze_source_data", "arguments": {"source_id": id, "columns": ["quantity"]}});
    let t = call(&srv, "POST", "/agent/tools/call", Some(&call_body.to_string())).json();
    assert_eq!((t["status"].as_str(), t["source_name"].as_str()), (Some("success"), Some("orders.csv")), "{t}");
    assert_eq!(t["sheets"][0]["columns"][0]["mean"].as_f64(), Some(3.0), "{t}");
    // A TSV file, by its MIME type.
    let tsv = "city\tpopulation\nOslo\t709000\nBergen\t291000\n";
    let body = serde_json::json!({"file_name": "cities", "content": tsv, "mime_type": "text/tab-separated-values"});
    let r = call(&srv, "POST", "/sources/ingest/file", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let tid = r.json()["id"].as_str().unwrap().to_string();
    let pop = call(&srv, "GET", &format!("/sources/{tid}/analysis?columns=population"), None).json();
    assert_eq!(pop["sheets"][0]["columns"][0]["mean"].as_f64(), Some(500000.0), "{pop}");
    // Not a table: 422 naming why; a missing source: 404.
    let md =
        serde_json::json!({"file_name": "n.md", "content": "# Notes\n\nSome words about the harbour and the boats."});
    let mid =
        call(&srv, "POST", "/sources/ingest/file", Some(&md.to_string())).json()["id"].as_str().unwrap().to_string();
    let e = call(&srv, "GET", &format!("/sources/{mid}/analysis"), None);
    assert_eq!(e.status, 422);
    assert_eq!(e.json()["detail"][0]["type"], "not_tabular");
    // The library names the field; the HTTP layer puts the path parameter and the query parameter first.
    assert_eq!(e.json()["detail"][0]["loc"], serde_json::json!(["path", "source_id"]));
    let unknown = call(&srv, "GET", &format!("/sources/{tid}/analysis?columns=altitude"), None);
    assert_eq!(unknown.status, 422, "{}", unknown.body);
    assert_eq!(unknown.json()["detail"][0]["loc"], serde_json::json!(["query", "columns"]));
    assert_eq!(call(&srv, "GET", "/sources/src_nope/analysis", None).status, 404);
    // Deleting the table deletes its memory.
    assert_eq!(call(&srv, "DELETE", &format!("/sources/{id}"), None).json()["memories_deleted"], 1);
}

/// DOCX round trip: a generated Word document's headings become the section tree (Title and Heading1..6),
/// its paragraphs the chunks and memories, a phrase is found by search; over HTTP as base64 JSON; a broken or
/// encrypted file is 422 `unparsable_document` with the reason and stores nothing.
/// Uploads `bytes` as `name` (JSON, base64) and expects 422 `unparsable_document` at `["body","file"]` whose
/// message contains `why`.
#[cfg(feature = "server")]
fn assert_unparsable(srv: &engram::server::RunningServer, name: &str, bytes: &[u8], why: &str) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let body = serde_json::json!({"file_name": name, "content_base64": b64});
    let r = common::call(srv, "POST", "/sources/ingest/file", Some(&body.to_string()));
    assert_eq!(r.status, 422, "{name}: {}", r.body);
    let d = &r.json()["detail"][0];
    assert_eq!(
        (d["type"].as_str(), d["loc"].clone()),
        (Some("unparsable_document"), serde_json::json!(["body", "file"]))
    );
    assert!(d["msg"].as_str().unwrap().contains(why), "{name}: {d}");
}

#[cfg(feature = "server")]
#[test]
fn docx_sources_keep_headings_and_paragraphs_and_broken_ones_are_refused() {
    use base64::Engine;
    use common::{call, server};
    let docx = engram::extract::docx::build(&[
        ("Title", "Harbour renovation"),
        ("Heading1", "Decisions"),
        ("", "We decided to replace the wooden pier with concrete before the autumn storms arrive."),
        ("Heading2", "Budget & timing"),
        ("", "The council approved forty thousand euros for the work, to be spent by the end of October."),
        ("Heading1", "Risks"),
        ("", "Storm surges in November could delay pouring the concrete foundations by several weeks."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 8 << 20);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&docx);
    let body = serde_json::json!({"file_name": "plan.docx", "content_base64": b64});
    let r = call(&srv, "POST", "/sources/ingest/file", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(v["mime_type"], engram::extract::document::DOCX_MIME);
    assert_eq!((v["lifecycle_state"].as_str(), v["memory_count"].as_u64()), (Some("indexed"), Some(3)), "{v}");
    let tree: serde_json::Value = serde_json::from_str(v["section_tree"].as_str().unwrap()).unwrap();
    let titles: Vec<&str> = tree.as_array().unwrap().iter().map(|n| n["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Harbour renovation", "Decisions", "Risks"], "{tree}");
    assert_eq!(tree[1]["children"][0]["title"], "Budget & timing");
    let text = call(&srv, "GET", &format!("/sources/{id}/content?limit=100000"), None).json();
    assert!(text["content"].as_str().unwrap().contains("## Budget & timing\n\nThe council approved"), "{text}");
    let s = call(&srv, "GET", "/sources/search?q=storm%20surges%20November", None).json();
    assert_eq!(s["results"][0]["source_id"], id.as_str(), "{s}");
    assert_eq!(s["results"][0]["matches"][0]["section"], "Risks", "{s}");
    // Broken: a truncated archive; encrypted: an OLE container. 422 with the reason, nothing stored.
    for (name, bytes, why) in [
        ("cut.docx", docx[..docx.len() / 2].to_vec(), "not a readable DOCX"),
        (
            "locked.docx",
            [&[0xD0u8, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1][..], &[0u8; 1024][..]].concat(),
            "encrypted",
        ),
    ] {
        assert_unparsable(&srv, name, &bytes, why);
    }
    assert_eq!(call(&srv, "GET", "/sources", None).json()["total"], 1);
}

#[cfg(feature = "server")]
#[test]
fn pdf_sources_keep_their_pages_and_unreadable_ones_are_refused() {
    use base64::Engine;
    use common::{call, server};
    let pdf = engram::extract::pdf::build(
        &[
            Some("Harbour renovation plan\nWe decided to replace the wooden pier with concrete before autumn."),
            Some("Budget\nThe council approved forty thousand euros for the work, to be spent by October."),
            None,
            Some("Risks\nStorm surges in November could delay pouring the concrete foundations by weeks."),
        ],
        None,
        None,
    );
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 8 << 20);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&pdf);
    let body = serde_json::json!({"file_name": "plan.pdf", "content_base64": b64, "labels": ["harbour"]});
    let r = call(&srv, "POST", "/sources/ingest/file", Some(&body.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(v["mime_type"], "application/pdf");
    // No title in the file: its first line.
    assert_eq!(v["metadata"]["title"], "Harbour renovation plan", "{v}");
    assert_eq!((v["lifecycle_state"].as_str(), v["memory_count"].as_u64()), (Some("indexed"), Some(3)), "{v}");
    let tree: serde_json::Value = serde_json::from_str(v["section_tree"].as_str().unwrap()).unwrap();
    let titles: Vec<&str> = tree.as_array().unwrap().iter().map(|n| n["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Page 1", "Page 2", "Page 3", "Page 4"], "{tree}");
    // Search lands on the page, and the memory made from it cites the page.
    let s = call(&srv, "GET", "/sources/search?q=storm%20surges%20November", None).json();
    assert_eq!(s["results"][0]["source_id"], id.as_str(), "{s}");
    assert_eq!(s["results"][0]["matches"][0]["section"], "Page 4", "{s}");
    let m = call(&srv, "GET", "/memories/search?q=council%20approved%20forty%20thousand%20euros", None).json();
    let hit = &m["memories"][0];
    assert_eq!(hit["metadata"]["source_id"], id.as_str(), "{m}");
    assert_eq!(hit["metadata"]["page"], 2, "{hit}");
    // Broken, encrypted with a password, image-only: 422 with the reason, nothing stored.
    for (name, bytes, why) in [
        ("cut.pdf", pdf[..pdf.len() / 3].to_vec(), "cannot be read"),
        ("locked.pdf", engram::extract::pdf::build(&[Some("Secret plans")], None, Some("hunter2")), "encrypted"),
        ("scan.pdf", engram::extract::pdf::build(&[None, None], None, None), "no text layer"),
        ("fake.pdf", b"just some words, no PDF here".to_vec(), "not a PDF"),
    ] {
        assert_unparsable(&srv, name, &bytes, why);
    }
    assert_eq!(call(&srv, "GET", "/sources", None).json()["total"], 1);
}
