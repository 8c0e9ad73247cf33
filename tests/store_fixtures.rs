//! Stores written by earlier releases open in this one with the same API view.
//!
//! `tests/fixtures/stores/<format>/` holds a store written by the release that introduced that format, with
//! every record kind (memories with metadata, labels, a label merge, spaces, relations, every lifecycle state, a
//! version chain, favourites, threads with extracted memories, a per-message thread, sources with chunks, working
//! memory, communities and crystals, review events), and `api-view.json`: what the API showed for it (the
//! answers of [`VIEW`] and of the per-record routes). The test opens a copy with this release and compares the
//! answers field by field: a field may be added (a new field with its default), none may change or go.
//!
//! The PostgreSQL backend has its own fixture beside it: `postgres.sql` (a `pg_dump --inserts` of the store's
//! schema, the schema's name replaced by `__SCHEMA__`), `postgres-data/` (the data directory's local files) and
//! `api-view-postgres.json`. With `ENGRAM_TEST_PG` set (feature `postgres`), the test restores the dump into a
//! schema of its own and compares the same way; under `CI` the server is required.
//!
//! Every release that changes the format adds its fixture: run `tools/postgres/write-store-fixture.sh v<N>`
//! with that release (it starts a throwaway PostgreSQL cluster, runs the ignored test `write_fixture` for both
//! backends and dumps the schema), and commit the new directory.

use std::path::{Path, PathBuf};

mod backend;

#[cfg(feature = "postgres")]
use backend::in_schema;
use engram::api::{Api, ApiRequest, ServiceInfo};
use engram::{KnowledgeStore, StoreConfig};
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores")
}

fn api(dir: &Path) -> Api {
    api_with(StoreConfig::new(dir))
}

/// Fixtures are written and read with the hashing embedder, the one they were written with before the built-in
/// static model: opened with another embedder a store re-embeds, which rewrites `last_reindexed_at` (that path
/// is checked in `tests/upgrade.rs`).
fn api_with(config: StoreConfig) -> Api {
    let config = config.embedder(std::sync::Arc::new(engram::embed::HashEmbedder::default()));
    let store = KnowledgeStore::open(config).expect("open the store");
    Api::new(std::sync::Arc::new(store), ServiceInfo::default())
}

fn call(api: &Api, method: &str, target: &str, body: Value) -> Value {
    let bytes = if body.is_null() { Vec::new() } else { serde_json::to_vec(&body).expect("json") };
    let r = api.handle(ApiRequest::from_target(method, target, &bytes));
    let text = String::from_utf8_lossy(&r.body).into_owned();
    assert!((200..300).contains(&r.status), "{method} {target}: {} {text}", r.status);
    if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON answer") }
}

/// Writes every record kind of the format through the API (the same requests a client would send).
fn populate(api: &Api) {
    let post = |target: &str, body: Value| call(api, "POST", target, body);
    post("/spaces", json!({"name": "Work", "description": "job things"}));
    post("/labels?name=preferences&color=%23aa3300&description=likes%20and%20dislikes", Value::Null);
    post(
        "/memories",
        json!({"id": "m-coffee", "content": "Prefers dark roast coffee, no sugar", "title": "Coffee",
               "labels": ["preferences", "food"], "importance": 0.8, "confidence": 0.9, "unit_type": "preference",
               "metadata": {"origin": "chat", "n": [1, 2.5, null, true], "nested": {"k": "v"}},
               "event_start": "2025-05", "source": "fixture"}),
    );
    post(
        "/memories/batch",
        json!({"memories": [
            {"id": "m-lisbon", "content": "Alice plans to visit Lisbon with Bob in May 2025", "labels": ["travel"],
             "unit_type": "plan", "event_start": "2025-05-10", "event_end": "2025-05-20", "temporal_context": "future"},
            {"id": "m-berlin", "content": "Jon moved to Berlin in 2021 for work at Siemens", "labels": ["people"]},
            {"id": "m-team", "content": "Our team has 12 engineers in the Berlin office"},
            {"id": "m-archive", "content": "The old wifi password was written on the fridge"},
            {"id": "m-deprecated", "content": "The build uses Python 3.8"},
            {"id": "m-fav", "content": "Mom's birthday is on 14 March", "labels": ["family"]},
            {"id": "m-forget", "content": "A note that is forgotten later"},
            {"id": "m-old-release", "content": "The release is planned for March"}
        ]}),
    );
    // A version chain: a content change (version 2), then a newer memory superseding an older one.
    call(api, "PATCH", "/memories/m-coffee", json!({"content": "Prefers dark roast coffee with oat milk"}));
    post("/memories", json!({"id": "m-new-release", "content": "The release is planned for April"}));
    post("/memories/m-old-release/supersede", json!({"newer_memory_id": "m-new-release", "reason": "moved"}));
    // A review event: a newer memory that updates an older one.
    post("/memories", json!({"id": "m-team-2", "content": "Our team has 15 engineers in the Berlin office"}));
    post("/memories/m-archive/archive", json!({"reason": "stale"}));
    post("/memories/m-deprecated/deprecate", json!({"reason": "upgraded", "replacement_memory_id": "m-coffee"}));
    post("/memories/m-forget/forget", json!({"reason": "asked to"}));
    post("/memories/m-fav/favorite?is_favorite=true", Value::Null);
    post(
        "/memories/m-lisbon/relations",
        json!({"target_memory_id": "m-berlin", "relation_type": "related", "reason": "same people",
               "strength": 0.7, "confidence": 0.8, "bidirectional": true}),
    );
    post(
        "/memories",
        json!({"id": "m-work", "content": "The quarterly report is due Friday", "space_id": "work",
                             "labels": ["deadlines"]}),
    );
    // A label merge (recorded, reversible): food into a new label.
    post("/labels?name=food-and-drink", Value::Null);
    post("/labels/merge?source_id=label_food&target_id=label_food-and-drink", Value::Null);
    // Threads: one with extracted memories, one whose every message is a memory.
    post(
        "/threads",
        json!({"thread_id": "t-dog", "title": "the dog", "source": "fixture", "participants": ["user", "assistant"],
               "messages": [
                   {"role": "user", "content": "We adopted a border collie named Pixel last week"},
                   {"role": "assistant", "content": "Congratulations! How is Pixel settling in?"},
                   {"role": "user", "content": "My sister Carol lives in Lyon and wants to meet Pixel"}]}),
    );
    post("/threads/t-dog/favorite?is_favorite=true", Value::Null);
    post(
        "/threads",
        json!({"thread_id": "t-log", "title": "a log", "metadata": {"analysis": "per-message"},
               "messages": [
                   {"role": "user", "content": "Deployed version 4.2 to production on Monday"},
                   {"role": "user", "content": "Rolled back version 4.2 on Tuesday after errors"}]}),
    );
    post(
        "/threads/t-dog/append",
        json!({"messages": [{"role": "user", "content": "Pixel loves the beach at Nazaré"}]}),
    );
    // Sources with chunks (and memories extracted from one).
    post(
        "/sources/ingest/file?extract_memories=true",
        json!({"file_name": "lighthouses.md", "labels": ["reading"],
               "content": "# Lighthouses\n\nThe harbour lighthouse in Porto was built in 1890.\n\n## Visits\n\nTours run on Sundays from April to October."}),
    );
    post(
        "/sources/ingest/file",
        json!({"file_name": "cities.csv", "content": "city,country\nLisbon,Portugal\nLyon,France\n"}),
    );
    call(api, "PUT", "/agent/working-memory", json!({"content": "Focus: ship the store fixtures"}));
    // Communities and crystals.
    api.store().graph().recompute().expect("graph recompute");
}

/// Routes whose answers make the view (besides one `GET` per memory, thread and source, and their relations).
const VIEW: &[&str] = &[
    "/spaces",
    "/memories?limit=100",
    "/memories?limit=100&state=archived",
    "/memories?limit=100&state=deprecated",
    "/memories?limit=100&state=superseded",
    "/memories?limit=100&space_id=work",
    "/labels?limit=100",
    "/labels?limit=100&space_id=work",
    "/labels/merges",
    "/threads?limit=100",
    "/favorites/threads",
    "/sources?limit=100",
    "/agent/working-memory",
    "/communities",
    "/agent/feed/events?limit=100",
];

/// The API's view of a store: route -> answer.
fn view(api: &Api) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    let get = |t: &str| call(api, "GET", t, Value::Null);
    for t in VIEW {
        out.insert((*t).to_string(), get(t));
    }
    let mut ids: Vec<String> = Vec::new();
    for t in VIEW.iter().filter(|t| t.starts_with("/memories?")) {
        for m in out[*t]["memories"].as_array().into_iter().flatten() {
            ids.extend(m["id"].as_str().map(str::to_string));
        }
    }
    ids.sort();
    ids.dedup();
    for id in &ids {
        out.insert(format!("/memories/{id}/relations"), get(&format!("/memories/{id}/relations")));
    }
    for t in out["/threads?limit=100"]["threads"].as_array().cloned().unwrap_or_default() {
        let id = t["thread_id"].as_str().unwrap_or_default().to_string();
        out.insert(format!("/threads/{id}"), get(&format!("/threads/{id}")));
    }
    for s in out["/sources?limit=100"]["sources"].as_array().cloned().unwrap_or_default() {
        let id = s["id"].as_str().unwrap_or_default().to_string();
        out.insert(format!("/sources/{id}"), get(&format!("/sources/{id}")));
        out.insert(format!("/sources/{id}/content"), get(&format!("/sources/{id}/content")));
    }
    // Reads by id last: they count accesses, which the listings above show. Each read stamps
    // `last_accessed_at` with its own time, so that one field of these answers is left out of the view.
    for id in &ids {
        let mut m = get(&format!("/memories/{id}"));
        if let Some(o) = m.as_object_mut() {
            o.remove("last_accessed_at");
        }
        out.insert(format!("/memories/{id}"), m);
    }
    out
}

/// The working memory's path names `today.md` on the day it was written and its date on later days: both forms
/// become the dated one, so that a fixture's view does not depend on the day the test runs.
fn dated_working_memory_path(view: &mut Value) {
    let Some(wm) = view.get_mut("/agent/working-memory").and_then(Value::as_object_mut) else { return };
    let Some(date) = wm.get("date").and_then(Value::as_str).map(str::to_string) else { return };
    for key in ["path", "file_path"] {
        if wm.get(key).and_then(Value::as_str) == Some("/working-memory/today.md") {
            wm.insert(key.to_string(), Value::from(format!("/working-memory/{date}.md")));
        }
    }
}

/// `new` shows everything `old` showed: every field of every object equal (new fields allowed), every list the
/// same length. Differences are collected with their paths.
fn compare(old: &Value, new: &Value, path: &str, diffs: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, v) in o {
                match n.get(k) {
                    Some(w) => compare(v, w, &format!("{path}.{k}"), diffs),
                    None => diffs.push(format!("{path}.{k}: gone (was {v})")),
                }
            }
        }
        (Value::Array(o), Value::Array(n)) if o.len() == n.len() => {
            for (i, (v, w)) in o.iter().zip(n).enumerate() {
                compare(v, w, &format!("{path}[{i}]"), diffs);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        _ if old == new => {}
        _ => diffs.push(format!("{path}: {old} -> {new}")),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read fixture dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// The view of a copy of the fixture `data` (the fixture itself is never opened: opening may migrate it), on
/// redb, or on PostgreSQL with the records of `database` (a connection string whose schema holds the restored
/// dump).
fn view_of_copy(data: &Path, database: Option<&str>) -> serde_json::Map<String, Value> {
    view_of_copy_with(data, database, false)
}

/// [`view_of_copy`], with the copy encrypted first by `engram encrypt`'s conversion when `encrypt`.
fn view_of_copy_with(data: &Path, database: Option<&str>, encrypt: bool) -> serde_json::Map<String, Value> {
    let tmp = tempfile::tempdir().expect("tempdir");
    if data.exists() {
        copy_dir(data, tmp.path()); // a PostgreSQL store's data directory may hold nothing (git keeps no empty dir)
    }
    let mut config = StoreConfig::new(tmp.path());
    config.database_url = database.map(str::to_string);
    if encrypt {
        let key = tmp.path().join("store.key");
        engram::storage::crypt::write_key_file(&key).expect("key file");
        let enc = engram::storage::crypt::Encryption::key_file(&key);
        let report = engram::store::encryption::encrypt_store(tmp.path(), &enc, &|_, _| {}).expect("encrypt");
        assert!(report.status.encrypted && report.bytes > 0, "{report:?}");
        config.encryption = Some(enc);
    }
    let api = api_with(config);
    api.store().admin().wait_for_indexes(std::time::Duration::from_secs(60));
    // Opened at this release's format; a fixture of an older one went through the migration.
    let h = api.store().admin().health().expect("health");
    assert_eq!(h.format_version, engram::store::upgrade::FORMAT_VERSION);
    let written_at: u32 = data
        .ancestors()
        .find_map(|d| d.file_name()?.to_str()?.strip_prefix('v')?.parse().ok())
        .expect("the fixture directory is named v<format>");
    if written_at < engram::store::upgrade::FORMAT_VERSION {
        let up = h.last_upgrade.expect("the older fixture was migrated at open");
        assert_eq!((up.from, up.to), (written_at, engram::store::upgrade::FORMAT_VERSION));
        assert!(up.records > 0);
        assert_eq!(up.backup.is_some(), database.is_none(), "a backup copy on redb only");
    }
    view(&api)
}

fn expect_same_view(fixture: &Path, expected: &Path, now: serde_json::Map<String, Value>) {
    let mut expected: Value = serde_json::from_slice(&std::fs::read(expected).expect("the fixture's API view"))
        .expect("the fixture's API view parses");
    let mut now = Value::Object(now);
    dated_working_memory_path(&mut expected);
    dated_working_memory_path(&mut now);
    let mut diffs = Vec::new();
    compare(&expected, &now, "", &mut diffs);
    assert!(diffs.is_empty(), "{}: the API view changed:\n{}", fixture.display(), diffs.join("\n"));
    // The fixture really holds every kind it promises.
    let v = now.as_object().expect("object");
    for (route, what) in [
        ("/memories?limit=100&state=archived", "memories"),
        ("/memories?limit=100&state=deprecated", "memories"),
        ("/memories?limit=100&state=superseded", "memories"),
        ("/labels/merges", "merges"),
        ("/communities", "communities"),
        ("/agent/feed/events?limit=100", "events"),
        ("/sources?limit=100", "sources"),
        ("/favorites/threads", ""),
    ] {
        let n = if what.is_empty() { v[route].as_array() } else { v[route][what].as_array() }.map_or(0, Vec::len);
        assert!(n > 0, "{}: {route} shows no {what}", fixture.display());
    }
}

fn fixture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(fixtures()).expect("tests/fixtures/stores").flatten().map(|d| d.path()).collect();
    dirs.sort();
    dirs
}

#[test]
fn every_fixture_opens_with_the_api_view_it_was_written_with() {
    let mut found = 0;
    for d in fixture_dirs() {
        let data = d.join("redb");
        if data.join("engram.redb").exists() {
            found += 1;
            expect_same_view(&d, &d.join("api-view.json"), view_of_copy(&data, None));
        }
    }
    assert!(found > 0, "no store fixture under {}", fixtures().display());
}

/// `engram encrypt` of a fixture keeps its API view: the store opens with its key file (and migrates, as the
/// plaintext one does) and answers every route as the fixture was written.
#[test]
fn every_fixture_encrypted_keeps_the_api_view_it_was_written_with() {
    for d in fixture_dirs() {
        let data = d.join("redb");
        if data.join("engram.redb").exists() {
            expect_same_view(&d, &d.join("api-view.json"), view_of_copy_with(&data, None, true));
        }
    }
}

/// Restores a fixture's dump into a schema of its own on `base`, opens it with the local files of `data`, and
/// returns its view; the schema is dropped after.
#[cfg(feature = "postgres")]
fn view_of_restored_dump(base: &str, sql: &str, data: &Path, tag: &str) -> serde_json::Map<String, Value> {
    let schema = format!("fx_{tag}_{}", std::process::id());
    let mut client = engram::storage::postgres::connect(base).expect("connect");
    // The dump names pgvector's type in `public`, where the backend installs the extension.
    client
        .batch_execute(&format!("CREATE EXTENSION IF NOT EXISTS vector; DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .expect("drop");
    client.batch_execute(&sql.replace("__SCHEMA__", &schema)).expect("restore the dump");
    let view = view_of_copy(data, Some(&in_schema(base, &schema)));
    client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).expect("drop");
    view
}

/// The PostgreSQL fixtures: each dump restored into a schema of its own, opened, and its view compared.
#[cfg(feature = "postgres")]
#[test]
fn every_postgres_fixture_opens_with_the_api_view_it_was_written_with() {
    let base = match std::env::var("ENGRAM_TEST_PG") {
        Ok(url) if !url.is_empty() => url,
        _ if std::env::var_os("CI").is_some() => panic!("CI: ENGRAM_TEST_PG must name a PostgreSQL server"),
        _ => return eprintln!("skipped: set ENGRAM_TEST_PG to open the PostgreSQL fixtures"),
    };
    let mut found = 0;
    for d in fixture_dirs() {
        let Ok(sql) = std::fs::read_to_string(d.join("postgres.sql")) else { continue };
        found += 1;
        let tag = d.file_name().and_then(|n| n.to_str()).unwrap_or("x").to_string();
        let now = view_of_restored_dump(&base, &sql, &d.join("postgres-data"), &tag);
        expect_same_view(&d, &d.join("api-view-postgres.json"), now);
    }
    assert!(found > 0, "no PostgreSQL store fixture under {}", fixtures().display());
}

/// Writes the fixture of this release's format (see the module documentation). Not run by default. With
/// `ENGRAM_WRITE_FIXTURE_PG` (a server's connection string; feature `postgres`) it writes the PostgreSQL fixture
/// instead: the store in a schema of its own, dumped with `pg_dump --inserts` (`PG_BIN`, default
/// `/usr/lib/postgresql/15/bin`) before anything reads it, and the view of that dump restored elsewhere.
#[test]
#[ignore]
fn write_fixture() {
    let Ok(name) = std::env::var("ENGRAM_WRITE_FIXTURE") else {
        eprintln!("set ENGRAM_WRITE_FIXTURE=v<format> to write tests/fixtures/stores/v<format>");
        return;
    };
    let out = fixtures().join(&name);
    let tmp = tempfile::tempdir().expect("tempdir");
    #[cfg(feature = "postgres")]
    if let Ok(base) = std::env::var("ENGRAM_WRITE_FIXTURE_PG") {
        assert!(!out.join("postgres.sql").exists(), "{name}: fixtures are never rewritten");
        let schema = format!("fixture_{name}");
        let mut client = engram::storage::postgres::connect(&base).expect("connect");
        client
            .batch_execute(&format!("CREATE EXTENSION IF NOT EXISTS vector; CREATE SCHEMA {schema}"))
            .expect("schema");
        {
            let mut config = StoreConfig::new(tmp.path());
            config.database_url = Some(in_schema(&base, &schema));
            let api = api_with(config);
            populate(&api);
            api.store().admin().wait_for_indexes(std::time::Duration::from_secs(60));
        }
        let bin = std::env::var("PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into());
        let dump = std::process::Command::new(format!("{bin}/pg_dump"))
            .arg(format!("--dbname={base}"))
            .args([&format!("--schema={schema}"), "--inserts", "--no-owner", "--no-privileges"])
            .output()
            .expect("run pg_dump");
        assert!(dump.status.success(), "pg_dump: {}", String::from_utf8_lossy(&dump.stderr));
        // psql's `\restrict` guard lines are not SQL; the schema's name becomes a placeholder.
        let sql: String = String::from_utf8(dump.stdout)
            .expect("UTF-8 dump")
            .lines()
            .filter(|l| !l.starts_with("\\restrict ") && !l.starts_with("\\unrestrict "))
            .map(|l| l.replace(&schema, "__SCHEMA__") + "\n")
            .collect();
        std::fs::create_dir_all(&out).expect("mkdir");
        std::fs::write(out.join("postgres.sql"), &sql).expect("write postgres.sql");
        let data = out.join("postgres-data");
        copy_dir(tmp.path(), &data);
        let _ = std::fs::remove_file(data.join("api-key"));
        let v = view_of_restored_dump(&base, &sql, &data, "write");
        let text = serde_json::to_string_pretty(&Value::Object(v)).expect("json");
        std::fs::write(out.join("api-view-postgres.json"), text).expect("write");
        client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).expect("drop");
        return;
    }
    assert!(!out.join("api-view.json").exists(), "{name}: fixtures are never rewritten");
    {
        let api = api(tmp.path());
        populate(&api);
        api.store().admin().wait_for_indexes(std::time::Duration::from_secs(60));
    }
    let data = out.join("redb");
    copy_dir(tmp.path(), &data);
    let _ = std::fs::remove_file(data.join("api-key"));
    let v = view_of_copy(&data, None);
    std::fs::write(out.join("api-view.json"), serde_json::to_string_pretty(&Value::Object(v)).expect("json"))
        .expect("write");
}
