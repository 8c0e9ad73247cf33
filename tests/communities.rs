//! Communities and PageRank on a real redb file: two groups of people who talk about different things form
//! two communities with stable ids, memories get a PageRank, the background worker catches up after writes,
//! results survive a reopen, and the HTTP routes enforce the spec's bounds.

#[cfg(feature = "server")]
mod common;

use std::time::Duration;

use engram::{KnowledgeStore, NewMemory, StoreConfig};

const GROUP_A: [&str; 4] = [
    "Alice Martin and Bob Stone flew to Paris for the conference.",
    "Bob Stone told Alice Martin that Paris was rainy.",
    "Alice Martin booked a hotel in Paris near Bob Stone's office.",
    "Alice Martin and Bob Stone visited the Louvre in Paris.",
];
const GROUP_B: [&str; 4] = [
    "Carol Nguyen and Dave Okafor moved to Tokyo in spring.",
    "Dave Okafor showed Carol Nguyen the best ramen in Tokyo.",
    "Carol Nguyen practised Japanese with Dave Okafor in Tokyo.",
    "Dave Okafor and Carol Nguyen hiked near Tokyo.",
];

fn seed(store: &KnowledgeStore) {
    for (i, t) in GROUP_A.iter().chain(&GROUP_B).enumerate() {
        store
            .memories()
            .create(NewMemory { id: Some(format!("m{i}")), content: (*t).into(), ..Default::default() })
            .unwrap();
    }
}

fn names(store: &KnowledgeStore, id: u64) -> Vec<String> {
    let (c, _) = store.graph().community(id, 50).unwrap();
    let mut v: Vec<String> = c.top_entities.into_iter().map(|e| e.name).collect();
    v.sort();
    v
}

#[test]
fn two_groups_make_two_stable_communities_with_pagerank() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    seed(&store);
    let r = store.graph().recompute().unwrap();
    assert!(r.entities >= 6 && r.edges >= 6, "{r:?}");
    let (list, total) = store.graph().communities(20).unwrap();
    assert_eq!(total, 2, "{list:#?}");
    let groups: Vec<Vec<String>> = list.iter().map(|c| names(&store, c.id)).collect();
    // Each group's people and city share a community, and nothing of the other group is in it.
    let has = |g: &Vec<String>, n: &str| g.iter().any(|x| x == n);
    let a = groups.iter().find(|g| has(g, "Alice Martin")).expect("group A");
    let b = groups.iter().find(|g| has(g, "Carol Nguyen")).expect("group B");
    assert!(has(a, "Bob Stone") && has(a, "Paris") && !has(a, "Tokyo") && !has(a, "Dave Okafor"), "{groups:?}");
    assert!(has(b, "Dave Okafor") && has(b, "Tokyo") && !has(b, "Paris") && !has(b, "Bob Stone"), "{groups:?}");
    for c in &list {
        assert!(!c.title.is_empty() && c.summary.contains("entities"), "{c:?}");
        assert_eq!(c.memory_count, 4);
        assert!(c.top_memories.len() >= 3 && c.top_memories[0].entities_mentioned >= 3, "{c:?}");
    }
    let ids: Vec<u64> = list.iter().map(|c| c.id).collect();
    assert_eq!(store.admin().stats(None).unwrap().community_count, 2);
    assert!(store.memories().get("m0", None).unwrap().memory.pagerank_score > 0.0);

    // Another memory in group A: both communities keep their ids.
    store
        .memories()
        .create(NewMemory {
            id: Some("m9".into()),
            content: "Alice Martin and Bob Stone left Paris.".into(),
            ..Default::default()
        })
        .unwrap();
    store.graph().recompute().unwrap();
    let (again, _) = store.graph().communities(20).unwrap();
    let mut before = ids.clone();
    before.sort();
    let mut after: Vec<u64> = again.iter().map(|c| c.id).collect();
    after.sort();
    assert_eq!(before, after, "persisting communities keep their ids");
    let a_id = store.graph().entity_community("default", &list_entity(&store, "Alice Martin")).unwrap();
    assert!(a_id.is_some());

    // Results survive a reopen.
    drop(store);
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    assert_eq!(store.graph().communities(20).unwrap().1, 2);
    assert!(store.memories().get("m0", None).unwrap().memory.pagerank_score > 0.0);
}

fn list_entity(store: &KnowledgeStore, name: &str) -> String {
    store.graph().entities("default", 100).unwrap().into_iter().find(|e| e.name == name).map(|e| e.id).unwrap()
}

#[test]
fn the_background_worker_catches_up_after_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    seed(&store);
    assert!(store.graph().wait(Duration::from_secs(30)), "the worker should recompute once writes pause");
    assert_eq!(store.graph().communities(20).unwrap().1, 2);
    // A read by id is not a write: it does not make the graph stale.
    store.memories().read("m0", None).unwrap();
    assert!(store.graph().wait(Duration::from_millis(10)));
}

#[cfg(feature = "server")]
#[test]
fn http_routes_enforce_bounds() {
    use common::{call, server_on};
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap());
    seed(&store);
    store.graph().recompute().unwrap();
    let srv = server_on(dir.path(), store.clone(), 1 << 20);
    let r = call(&srv, "GET", "/communities", None);
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j["total"], 2);
    let id = j["communities"][0]["id"].as_u64().unwrap();
    let one = call(&srv, "GET", &format!("/communities/{id}?entity_limit=2"), None).json();
    assert_eq!(one["entities"].as_array().unwrap().len(), 2);
    assert_eq!(one["community"]["id"], id);
    for bad in ["/communities?limit=0", "/communities?limit=51", "/communities/abc", "/communities/1?entity_limit=51"] {
        assert_eq!(call(&srv, "GET", bad, None).status, 422, "{bad}");
    }
    assert_eq!(call(&srv, "GET", "/communities/999999", None).status, 404);
    assert_eq!(call(&srv, "GET", "/stats", None).json()["community_count"], 2);
    // The agent tools page communities by space in the store.
    let (page, total) = store.graph().communities_of_space("default", 1).unwrap();
    assert_eq!((page.len(), total), (1, 2));
    assert_eq!(store.graph().communities_of_space("elsewhere", 5).unwrap(), (vec![], 0));
    let tool = |name: &str, args: serde_json::Value| {
        let body = serde_json::json!({"name": name, "arguments": args}).to_string();
        let r = call(&srv, "POST", "/agent/tools/call", Some(&body));
        assert_eq!(r.status, 200, "{name}: {}", r.body);
        r.json()
    };
    let l = tool("list_communities", serde_json::json!({"limit": 1}));
    assert_eq!(l["communities"].as_array().unwrap().len(), 1, "{l}");
    assert_eq!(tool("graph_stats", serde_json::json!({}))["community_count"], 2);
    assert_eq!(call(&srv, "GET", "/capabilities", None).json()["features"]["communities"], true);
}

#[test]
fn crystals_cite_at_least_three_sources_by_weight_and_follow_forgetting() {
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    seed(&store);
    let r = store.graph().recompute().unwrap();
    assert!(r.crystals >= 2, "{r:?}");
    let crystals = store
        .memories()
        .list(&engram::ListQuery {
            space_id: "default".into(),
            filter: engram::MemoryFilter { is_crystal: Some(true), ..Default::default() },
            limit: 100,
            offset: 0,
        })
        .unwrap();
    assert_eq!(crystals.total as u64, r.crystals);
    for c in &crystals.items {
        let m = &c.memory;
        assert!(m.is_crystal && m.crystal_title.is_some() && m.source_unit_count.unwrap_or(0) >= 3, "{m:?}");
        let sources = store.graph().crystal_sources(&m.id, 100).unwrap();
        assert!(sources.len() >= 3, "{}", m.id);
        assert!(sources.windows(2).all(|w| w[0].1 >= w[1].1), "sorted by contribution weight");
        assert!((sources.iter().map(|s| s.1).sum::<f64>() - 1.0).abs() < 1e-9);
        for (v, _) in &sources {
            assert!(!v.memory.is_crystal);
            assert!(m.content.contains(&format!("memory `{}`", v.memory.id)), "the crystal cites its sources");
        }
    }
    // The crystals are not sources of the graph: recomputing changes nothing.
    assert_eq!(store.graph().recompute().unwrap().crystals_changed, 0);
    // Forgetting sources refreshes the crystal: a crystal keeps no forgotten source and none with fewer than 3.
    let paris = crystals.items.iter().find(|c| c.memory.title == "Paris").expect("a Paris crystal").memory.id.clone();
    for id in ["m0", "m1"] {
        store.memories().change_state(id, None, engram::Transition::Forget, None).unwrap();
    }
    let r = store.graph().recompute().unwrap();
    assert!(r.crystals_changed > 0);
    match store.graph().crystal_sources(&paris, 100) {
        Ok(s) => assert!(s.len() >= 3 && s.iter().all(|(v, _)| v.memory.id != "m0" && v.memory.id != "m1")),
        Err(e) => assert_eq!(e.kind(), engram::ErrorKind::NotFound),
    }
    assert_eq!(store.graph().crystal_sources("m2", 10).unwrap_err().kind(), engram::ErrorKind::NotFound);
}

#[cfg(feature = "server")]
#[test]
fn http_crystal_source_memories() {
    use common::{call, server_on};
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap());
    seed(&store);
    store.graph().recompute().unwrap();
    let srv = server_on(dir.path(), store.clone(), 1 << 20);
    let list = call(&srv, "GET", "/memories?is_crystal=true", None).json();
    let id = list["memories"][0]["id"].as_str().expect("a crystal").to_string();
    let r = call(&srv, "GET", &format!("/library/crystal/{id}/source-memories?limit=2"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    let rows = j["source_memories"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows[0]["contribution_weight"].as_f64().unwrap() >= rows[1]["contribution_weight"].as_f64().unwrap());
    assert_eq!(call(&srv, "GET", &format!("/library/crystal/{id}/source-memories?limit=101"), None).status, 422);
    assert_eq!(call(&srv, "GET", "/library/crystal/m0/source-memories", None).status, 404);
}

/// The markdown link targets of a page.
#[cfg(feature = "server")]
fn links(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = md;
    while let Some(i) = rest.find("](") {
        let tail = &rest[i + 2..];
        let Some(j) = tail.find(')') else { break };
        out.push(tail[..j].to_string());
        rest = &tail[j..];
    }
    out
}

#[cfg(feature = "server")]
#[test]
fn wiki_pages_and_library_routes() {
    use common::{call, server_on};
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap());
    seed(&store);
    store.graph().recompute().unwrap();
    let srv = server_on(dir.path(), store.clone(), 1 << 20);
    let cid = call(&srv, "GET", "/communities", None).json()["communities"][0]["id"].as_u64().unwrap();
    let crystal =
        call(&srv, "GET", "/memories?is_crystal=true", None).json()["memories"][0]["id"].as_str().unwrap().to_string();
    let pages = [
        "/library/wiki-page/entity/alice%20martin".to_string(),
        format!("/library/wiki-page/topic/{cid}"),
        format!("/library/wiki-page/crystal/{crystal}"),
    ];
    for p in &pages {
        let r = call(&srv, "GET", p, None);
        assert_eq!(r.status, 200, "{p}: {}", r.body);
        assert!(r.body.starts_with("---\ntype: "), "{p}: frontmatter first");
        let (front, body) = r.body[4..].split_once("\n---\n").expect("closed frontmatter");
        assert!(front.lines().any(|l| l.starts_with("title: ")), "{p}");
        assert!(body.trim_start().starts_with("# "), "{p}: a title heading");
        let targets = links(body);
        assert!(!targets.is_empty(), "{p} links somewhere");
        for t in targets {
            assert_eq!(call(&srv, "GET", &t.replace(' ', "%20"), None).status, 200, "{p} links to {t}");
        }
    }
    let entity = call(&srv, "GET", "/library/wiki-page/entity/Alice%20Martin", None).body;
    assert!(entity.contains("## Mentions") && entity.contains("## Related entities"), "{entity}");
    assert_eq!(call(&srv, "GET", "/library/wiki-page/entity/nobody", None).status, 404);
    assert_eq!(call(&srv, "GET", "/library/wiki-page/entity/x?mention_limit=201", None).status, 422);

    let g = call(&srv, "GET", &format!("/library/community/{cid}/subgraph?include_top_memories=2"), None).json();
    let nodes = g["nodes"].as_array().unwrap();
    assert!(nodes.iter().any(|n| n["node_type"] == "entity") && nodes.iter().any(|n| n["node_type"] == "memory"));
    assert!(
        g["edges"].as_array().unwrap().iter().all(|e| e["edge_type"] == "RELATES_TO" || e["edge_type"] == "MENTIONS")
    );
    let ids: Vec<&str> = nodes.iter().filter_map(|n| n["id"].as_str()).collect();
    for e in g["edges"].as_array().unwrap() {
        assert!(ids.contains(&e["source"].as_str().unwrap()) && ids.contains(&e["target"].as_str().unwrap()));
    }
    assert_eq!(call(&srv, "GET", &format!("/library/community/{cid}/subgraph?max_entities=9"), None).status, 422);
    let recent = call(&srv, "GET", &format!("/library/community/{cid}/recent-memories?limit=2"), None).json();
    assert_eq!(recent["memories"].as_array().unwrap().len(), 2);
    let related = call(&srv, "GET", &format!("/library/community/{cid}/related"), None);
    assert_eq!(related.status, 200);
    let index = call(&srv, "GET", "/library/wiki-index?top_per_community=2&include_top_memories=1", None).json();
    assert_eq!(index["rows"].as_array().unwrap().len(), 2);
    assert_eq!(index["rows"][0]["entities"].as_array().unwrap().len(), 2);
    assert_eq!(index["rows"][0]["top_memories"].as_array().unwrap().len(), 1);
    assert_eq!(call(&srv, "GET", "/library/wiki-index?include_top_memories=9", None).status, 422);
    let summary = call(&srv, "GET", "/library/wiki-export-summary", None).json();
    assert_eq!(summary["topics"], 2);
}

/// Opens a ZIP body and checks the bundle rules: every directory has `index.md`, every concept page has
/// frontmatter with a `type`, every relative link resolves to a file in the bundle. Returns the file names.
#[cfg(feature = "server")]
fn check_bundle(bytes: &[u8], okf: bool) -> Vec<String> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a ZIP");
    let mut files: std::collections::BTreeMap<String, String> = Default::default();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let name = f.enclosed_name().expect("no path escapes the bundle").to_string_lossy().into_owned();
        let mut text = String::new();
        f.read_to_string(&mut text).expect("UTF-8 markdown");
        files.insert(name, text);
    }
    let dirs: std::collections::BTreeSet<String> =
        files.keys().map(|f| f.rsplit_once('/').map_or(String::new(), |(d, _)| d.to_string())).collect();
    for d in &dirs {
        let idx = if d.is_empty() { "index.md".to_string() } else { format!("{d}/index.md") };
        assert!(files.contains_key(&idx), "{d} has no index.md");
    }
    for (name, text) in &files {
        let base = name.rsplit('/').next().unwrap();
        let reserved = base == "index.md" || base == "log.md";
        if reserved {
            if name == "index.md" && okf {
                assert!(text.starts_with("---\nokf_version: \"0.2\"\n---\n"), "root index frontmatter");
            } else {
                assert!(!text.starts_with("---"), "{name}: reserved files carry no frontmatter");
            }
            if base == "log.md" {
                assert!(text.starts_with("# ") && text.contains("\n## "), "log.md has a title and date headings");
            }
        } else {
            assert!(text.starts_with("---\n"), "{name}: frontmatter first");
            let (front, body) = text[4..].split_once("\n---\n").unwrap_or_else(|| panic!("{name}: closed frontmatter"));
            for line in front.lines() {
                assert!(
                    line.starts_with("  ") || line.starts_with("- ") || line.contains(": ") || line.ends_with(':'),
                    "{name}: `{line}` is not YAML"
                );
            }
            let ty = front.lines().find_map(|l| l.strip_prefix("type: ")).unwrap_or("");
            assert!(!ty.trim().is_empty(), "{name}: a type");
            assert!(body.contains("\n# ") || body.starts_with("\n# ") || body.starts_with("# "), "{name}: a title");
        }
        let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
        for target in links(text) {
            assert!(!target.starts_with('/') && !target.contains("://"), "{name}: {target} is relative");
            let mut parts: Vec<&str> = if dir.is_empty() { vec![] } else { dir.split('/').collect() };
            for seg in target.split('/') {
                match seg {
                    ".." => {
                        assert!(parts.pop().is_some(), "{name}: {target} leaves the bundle");
                    }
                    "." | "" => {}
                    s => parts.push(s),
                }
            }
            let resolved = parts.join("/");
            assert!(files.contains_key(&resolved), "{name}: {target} -> {resolved} is not in the bundle");
        }
    }
    files.into_keys().collect()
}

#[cfg(feature = "server")]
fn get_bytes(srv: &engram::server::RunningServer, path: &str) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        srv.addr.port(),
        common::KEY
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&buf[..split]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = buf[split + 4..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let n = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap().trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[nl + 2..nl + 2 + n]);
            rest = &rest[nl + 2 + n + 2..];
        }
        body = out;
    }
    (status, body)
}

#[cfg(feature = "server")]
#[test]
fn wiki_and_okf_zips_are_self_contained_and_match_the_summary() {
    use common::{call, server_on};
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap());
    seed(&store);
    store
        .memories()
        .create(NewMemory {
            id: Some("tagged".into()),
            content: "Bob Stone prefers window seats.".into(),
            labels: Some(vec!["travel".into()]),
            unit_type: Some(engram::UnitType::Preference),
            ..Default::default()
        })
        .unwrap();
    store.graph().recompute().unwrap();
    let srv = server_on(dir.path(), store.clone(), 1 << 20);
    let summary = call(&srv, "GET", "/library/wiki-export-summary", None).json();

    let (status, wiki) = get_bytes(&srv, "/library/wiki-export");
    assert_eq!(status, 200);
    let files = check_bundle(&wiki, false);
    let count =
        |prefix: &str| files.iter().filter(|f| f.starts_with(prefix) && !f.ends_with("index.md")).count() as u64;
    assert_eq!(count("topics/"), summary["wiki"]["topics"].as_u64().unwrap());
    assert_eq!(count("entities/"), summary["wiki"]["entities"].as_u64().unwrap());
    assert_eq!(count("crystals/"), summary["wiki"]["crystals"].as_u64().unwrap());
    assert!(summary["wiki"]["crystals"].as_u64().unwrap() >= 2);

    let (status, okf) = get_bytes(&srv, "/library/okf-export?entity_limit=3");
    assert_eq!(status, 200);
    let files = check_bundle(&okf, true);
    assert!(files.contains(&"log.md".to_string()));
    assert!(files.iter().any(|f| f.starts_with("memories/preference/")), "memories by unit type");
    assert!(files.iter().any(|f| f.starts_with("labels/") && f != "labels/index.md"));
    assert_eq!(files.iter().filter(|f| f.starts_with("entities/") && !f.ends_with("index.md")).count(), 3);
    let count =
        |prefix: &str| files.iter().filter(|f| f.starts_with(prefix) && !f.ends_with("index.md")).count() as u64;
    assert_eq!(count("memories/"), summary["okf"]["memories"].as_u64().unwrap());
    assert_eq!(count("labels/"), summary["okf"]["labels"].as_u64().unwrap());
    assert_eq!(count("topics/"), summary["okf"]["topics"].as_u64().unwrap());

    for bad in [
        "/library/wiki-export?entity_limit=0",
        "/library/okf-export?entity_limit=2001",
        "/library/wiki-export?top_per_community=31",
        "/library/okf-export?max_mentions_per_entity=101",
    ] {
        assert_eq!(call(&srv, "GET", bad, None).status, 422, "{bad}");
    }
    // The temporary files are gone once streamed.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let left = std::fs::read_dir(dir.path().join("tmp")).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "export files are deleted after streaming");
}
