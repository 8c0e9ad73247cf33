//! The /fs tree API against a real daemon: capabilities, ls with cursor paging, cat with frontmatter and line
//! windows, stat, find, grep (literal, regex, case), recall, write and delete, and the error codes (ENOENT,
//! EROFS, EXDEV, EINVAL, ENOTSUP) with their HTTP statuses.
#![cfg(feature = "server")]

mod common;

use common::{call, server};

fn q(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[test]
fn tree_reads_writes_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 1 << 20);
    let post = |path: &str, body: serde_json::Value| call(&srv, "POST", path, Some(&body.to_string()));
    for i in 0..5 {
        let r = post(
            "/memories",
            serde_json::json!({"id": format!("m{i}"), "content": format!("Line one of memory {i}\nThe Harbour has {i} boats"), "labels": ["sea"], "title": format!("Memory {i}")}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = post(
        "/memories",
        serde_json::json!({"id": "50%off", "content": "An id with a percent sign and a slash-free path", "unit_type": "decision"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    post(
        "/threads",
        serde_json::json!({"thread_id": "chat1", "messages": [{"role": "user", "content": "Where do the boats dock?"}, {"role": "assistant", "content": "At the north harbour pier."}]}),
    );
    let up = post(
        "/sources/ingest/file",
        serde_json::json!({"file_name": "pier.md", "content": "# Pier\n\nThe north pier holds twelve boats in summer.\n"}),
    );
    assert_eq!(up.status, 200, "{}", up.body);

    let caps = call(&srv, "GET", "/fs/capabilities", None).json();
    assert!(caps["roots"].as_array().unwrap().iter().any(|r| r["path"] == "/memories"));
    assert_eq!(caps["limits"]["max_limit"], 1000);

    // ls: roots, then paging through /memories/by-id with the cursor.
    let root = call(&srv, "GET", "/fs/ls?path=/", None).json();
    let names: Vec<&str> = root["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["memories", "threads", "sources", "wiki", "working-memory"]);
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = call(&srv, "GET", &format!("/fs/ls?path=/memories/by-id&limit=2&cursor={cursor}"), None).json();
        for e in page["entries"].as_array().unwrap() {
            assert_eq!(e["kind"], "file");
            seen.push(e["path"].as_str().unwrap().to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_string(),
            None => break,
        }
    }
    assert_eq!(seen.len(), 8, "5 + the percent id + the thread's and the source's memories: {seen:?}");
    assert!(seen.contains(&"/memories/by-id/50%25off.memory.md".to_string()), "{seen:?}");
    let labels = call(&srv, "GET", "/fs/ls?path=/memories/by-label", None).json();
    assert_eq!(labels["entries"][0]["path"], "/memories/by-label/sea");
    assert_eq!(call(&srv, "GET", "/fs/ls?path=/memories/by-label/sea", None).json()["total"], 5);
    let t = call(&srv, "GET", "/fs/ls?path=/threads/chat1", None).json();
    assert_eq!(t["entries"][1]["path"], "/threads/chat1/messages.jsonl");

    // cat: frontmatter and body; a window of lines; the slash id round-trips.
    let c = call(&srv, "GET", &format!("/fs/cat?path={}", q("/memories/by-id/m3.memory.md")), None).json();
    assert_eq!(c["frontmatter"]["title"], "Memory 3");
    assert_eq!(c["frontmatter"]["labels"], serde_json::json!(["sea"]));
    assert_eq!(c["body"], "Line one of memory 3\nThe Harbour has 3 boats");
    assert!(c["content"].as_str().unwrap().starts_with("---\n"));
    let w =
        call(&srv, "GET", &format!("/fs/cat?path={}&line=2&lines=1", q("/memories/by-id/m3.memory.md")), None).json();
    assert_eq!(w["body"], "The Harbour has 3 boats\n");
    assert_eq!((w["line"].as_u64(), w["lines"].as_u64(), w["total_lines"].as_u64()), (Some(2), Some(1), Some(2)));
    let s = call(&srv, "GET", &format!("/fs/cat?path={}", q("/memories/by-id/50%25off.memory.md")), None).json();
    assert_eq!(s["frontmatter"]["id"], "50%off");
    let m = call(&srv, "GET", "/fs/cat?path=/threads/chat1/messages.jsonl", None).json();
    let lines: Vec<serde_json::Value> =
        m["body"].as_str().unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[1]["content"], "At the north harbour pier.");
    let src = call(&srv, "GET", "/fs/cat?path=/sources/pier.md", None).json();
    assert!(src["body"].as_str().unwrap().contains("twelve boats"));

    // stat
    let st = call(&srv, "GET", &format!("/fs/stat?path={}", q("/memories/by-label/sea/m1.memory.md")), None).json();
    assert_eq!((st["type"].as_str(), st["writable"].as_bool()), (Some("memory"), Some(false)));
    assert_eq!(st["alias_of"], "/memories/by-id/m1.memory.md");
    assert!(st["size_bytes"].as_u64().unwrap() > 40);

    // find
    let f = call(&srv, "GET", "/fs/find?path=/memories&unit_type=decision", None).json();
    assert_eq!(f["hits"].as_array().unwrap().len(), 1);
    assert_eq!(f["hits"][0]["path"], "/memories/by-id/50%25off.memory.md");
    let f = call(&srv, "GET", "/fs/find?path=/memories&label=sea&limit=2", None).json();
    assert_eq!((f["total"].as_u64(), f["hits"].as_array().unwrap().len()), (Some(5), 2));
    assert!(f["next_cursor"].is_string());
    assert_eq!(call(&srv, "GET", "/fs/find?path=/memories&since=not-a-date", None).status, 422);

    // grep: case-insensitive literal by default, regex on request, line numbers, scopes.
    let g = call(&srv, "GET", "/fs/grep?path=/memories&q=harbour", None).json();
    let hits = g["matches"].as_array().unwrap();
    assert_eq!(hits.len(), 6, "five memories and the thread's extracted memory");
    assert!(hits.iter().all(|h| h["line"] == 2));
    assert!(hits.iter().any(|h| h["match"] == "The Harbour has 0 boats"));
    let g = call(&srv, "GET", "/fs/grep?path=/memories&q=harbour&case_sensitive=true", None).json();
    assert_eq!(g["matches"].as_array().unwrap().len(), 1);
    assert_eq!(g["matches"][0]["path"], "/memories/by-id/chat1#m0.memory.md");
    let g = call(&srv, "GET", "/fs/grep?path=/memories/by-label/sea&q=harbour", None).json();
    assert_eq!(g["matches"].as_array().unwrap().len(), 5);
    let g = call(&srv, "GET", &format!("/fs/grep?path=/memories&regex=true&q={}", q("has [3-4] boats")), None).json();
    assert_eq!(g["matches"].as_array().unwrap().len(), 2);
    let g = call(&srv, "GET", "/fs/grep?path=/memories&q=has&limit=2", None).json();
    assert_eq!(g["matches"].as_array().unwrap().len(), 2);
    let next = g["next_cursor"].as_str().unwrap();
    let g2 = call(&srv, "GET", &format!("/fs/grep?path=/memories&q=has&limit=10&cursor={next}"), None).json();
    assert_eq!(g2["matches"].as_array().unwrap().len(), 3);
    let g = call(&srv, "GET", "/fs/grep?path=/&q=pier", None).json();
    let paths: Vec<&str> = g["matches"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
    assert!(paths.contains(&"/threads/chat1/messages.jsonl"), "{paths:?}");
    assert!(paths.contains(&"/sources/pier.md"), "{paths:?}");
    assert_eq!(call(&srv, "GET", &format!("/fs/grep?q={}&regex=true", q("(unclosed")), None).status, 422);

    // recall returns paths.
    let r = call(&srv, "GET", "/fs/recall?query=percent%20sign&k=3", None).json();
    assert_eq!(r["hits"][0]["path"], "/memories/by-id/50%25off.memory.md");

    // write: create, update with frontmatter, version guard; alias and derived paths refused.
    let w = post(
        "/fs/write",
        serde_json::json!({"path": "/memories/by-id/new.memory.md", "body": "Fresh note about kayaks", "frontmatter": {"title": "Kayak", "labels": ["sea", "sport"]}}),
    );
    assert_eq!(w.status, 200, "{}", w.body);
    assert_eq!(w.json()["created"], true);
    let got = call(&srv, "GET", "/memories/new", None).json();
    assert_eq!(got["content"], "Fresh note about kayaks");
    assert_eq!(got["title"], "Kayak");
    let w = post(
        "/fs/write",
        serde_json::json!({"path": "/memories/by-id/new.memory.md", "body": "Edited note", "record_version": 99}),
    );
    assert_eq!(w.status, 409);
    let w = post("/fs/write", serde_json::json!({"path": "/memories/by-id/new.memory.md", "body": "Edited note"}));
    assert_eq!(w.json()["created"], false);
    assert_eq!(call(&srv, "GET", "/memories/new", None).json()["content"], "Edited note");
    let today = post("/fs/write", serde_json::json!({"path": "/working-memory/today.md", "body": "## Today\n- kayak"}));
    assert_eq!(today.status, 200);
    assert_eq!(call(&srv, "GET", "/fs/cat?path=/working-memory/today.md", None).json()["body"], "## Today\n- kayak");

    let code = |r: common::Reply| (r.status, r.json()["error_code"].as_str().unwrap_or("").to_string());
    assert_eq!(
        code(post("/fs/write", serde_json::json!({"path": "/memories/by-label/sea/m1.memory.md", "body": "x"}))),
        (409, "EXDEV".into())
    );
    assert_eq!(
        code(post("/fs/write", serde_json::json!({"path": "/threads/chat1/thread.md", "body": "x"}))),
        (403, "EROFS".into())
    );
    assert_eq!(
        code(post("/fs/write", serde_json::json!({"path": "/sources/pier.md", "body": "x"}))),
        (403, "EROFS".into())
    );
    assert_eq!(
        code(post("/fs/delete", serde_json::json!({"path": "/working-memory/today.md"}))),
        (501, "ENOTSUP".into())
    );
    assert_eq!(code(call(&srv, "GET", "/fs/cat?path=/memories/by-id/nope.memory.md", None)), (404, "ENOENT".into()));
    assert_eq!(code(call(&srv, "GET", "/fs/ls?path=/nowhere", None)), (404, "ENOENT".into()));
    assert_eq!(code(call(&srv, "GET", "/fs/cat?path=/context/agent.md", None)), (501, "ENOTSUP".into()));
    assert_eq!(
        code(call(&srv, "GET", "/fs/cat?path=/memories/by-id/m1.memory.md&fragment=x", None)),
        (501, "ENOTSUP".into())
    );
    let bad = call(&srv, "GET", "/fs/ls?path=/memories/../etc", None);
    assert_eq!(bad.status, 422);
    assert_eq!(bad.json()["detail"][0]["type"], "EINVAL");
    assert_eq!(call(&srv, "GET", "/fs/ls?path=relative", None).status, 422);
    assert_eq!(call(&srv, "GET", "/fs/ls?path=/&cursor=garbage", None).status, 422);
    assert_eq!(call(&srv, "GET", "/fs/cat?path=/memories", None).status, 422);

    // delete
    let d = post("/fs/delete", serde_json::json!({"path": "/memories/by-id/new.memory.md"}));
    assert_eq!(d.status, 200);
    assert_eq!(call(&srv, "GET", "/memories/new", None).status, 404);
    assert_eq!(
        code(post("/fs/delete", serde_json::json!({"path": "/memories/by-id/new.memory.md"}))),
        (404, "ENOENT".into())
    );
}

/// The listings whose pages the store now cuts (labels, entities, sources, memories of an entity, a label's
/// memories in grep, a thread longer than one keyset page): totals, order and page contents.
#[test]
fn listings_are_cut_into_pages_by_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path(), 4 << 20);
    let post = |path: &str, body: serde_json::Value| call(&srv, "POST", path, Some(&body.to_string()));
    let texts = [
        ("a", "Alice Johnson met Bob Smith in Paris about the harbour.", vec!["alpha", "zeta"]),
        ("b", "Alice Johnson wrote to Carol Davis from Paris.", vec!["beta"]),
        ("c", "Alice Johnson and Bob Smith sailed from Lisbon.", vec!["gamma", "zeta"]),
        ("d", "Dave Brown stayed in Lisbon for the harbour festival.", vec!["delta"]),
    ];
    for (id, text, labels) in &texts {
        let r = post("/memories", serde_json::json!({"id": id, "content": text, "labels": labels}));
        assert_eq!(r.status, 200, "{}", r.body);
    }
    for name in ["one.md", "two.md", "three.md"] {
        let r = post(
            "/sources/ingest/file",
            serde_json::json!({"file_name": name, "content": format!("# {name}\n\nText of {name}.\n")}),
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // Labels: five, by name; the second page of two holds the third and fourth.
    let l = call(&srv, "GET", "/fs/ls?path=/memories/by-label&limit=2", None).json();
    assert_eq!(l["total"], 5);
    let c = l["next_cursor"].as_str().unwrap().to_string();
    let l2 = call(&srv, "GET", &format!("/fs/ls?path=/memories/by-label&limit=2&cursor={c}"), None).json();
    let names: Vec<&str> = l2["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["delta", "gamma"]);
    // Sources: newest first, paged.
    let s = call(&srv, "GET", "/fs/ls?path=/sources&limit=2", None).json();
    assert_eq!(s["total"], 3);
    let names: Vec<&str> = s["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["three.md", "two.md"]);
    let f = call(&srv, "GET", "/fs/find?path=/sources&type=source&limit=1", None).json();
    assert_eq!((f["total"].as_u64(), f["hits"][0]["path"].as_str()), (Some(3), Some("/sources/three.md")));
    // Entities: most mentioned first; a name filter narrows the total.
    let e = call(&srv, "GET", "/fs/ls?path=/wiki/entities&limit=1", None).json();
    assert!(e["total"].as_u64().unwrap() >= 4, "{e}");
    assert!(e["entries"][0]["name"].as_str().unwrap().starts_with("Alice Johnson--"), "{e}");
    let f = call(&srv, "GET", "/fs/find?path=/wiki&type=entity&mentions=smith", None).json();
    assert_eq!(f["total"], 1, "{f}");
    assert_eq!(f["hits"][0]["title"], "Bob Smith");
    // Memories mentioning an entity, filtered and paged by the store.
    let f = call(&srv, "GET", &format!("/fs/find?path=/memories&mentions={}&limit=1", q("Bob Smith")), None).json();
    assert_eq!(f["total"], 2, "{f}");
    assert_eq!(f["hits"].as_array().unwrap().len(), 1);
    let f =
        call(&srv, "GET", &format!("/fs/find?path=/memories&mentions={}&label=zeta", q("Alice Johnson")), None).json();
    let paths: Vec<&str> = f["hits"].as_array().unwrap().iter().map(|h| h["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/memories/by-id/c.memory.md", "/memories/by-id/a.memory.md"]);
    // grep under a label directory reads the label's edges, not every memory.
    let g = call(&srv, "GET", "/fs/grep?path=/memories/by-label/zeta&q=alice", None).json();
    let mut paths: Vec<&str> = g["matches"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
    paths.sort();
    assert_eq!(paths, ["/memories/by-id/a.memory.md", "/memories/by-id/c.memory.md"]);
    // A thread of 2,345 messages: the file holds every one, in order, across keyset pages of 1,000.
    let messages: Vec<serde_json::Value> =
        (0..2345).map(|i| serde_json::json!({"role": "user", "content": format!("message number {i}")})).collect();
    let r = post("/threads", serde_json::json!({"thread_id": "long", "messages": messages, "extract": false}));
    assert_eq!(r.status, 200, "{}", r.body);
    let c = call(&srv, "GET", "/fs/cat?path=/threads/long/messages.jsonl", None).json();
    let lines: Vec<&str> = c["body"].as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), 2345);
    assert!(lines[0].contains("message number 0\""), "{}", lines[0]);
    assert!(lines[2344].contains("message number 2344\""), "{}", lines[2344]);
}
