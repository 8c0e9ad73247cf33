//! Encryption at rest (docs/security.md), end to end: no plaintext in any file of an encrypted store's data
//! directory or in its archives after writes of every kind, reopens, an upgrade and exports; one flipped byte
//! anywhere is reported as corruption or changes nothing; a wrong key is `wrong_key` and leaves the file byte
//! for byte; `engram encrypt`, `decrypt` and `rekey` keep the store's answers.
#![cfg(feature = "server")]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::call;
use engram::storage::crypt::{Encryption, KeySource};
use engram::{ErrorKind, KnowledgeStore, StoreConfig};
use serde_json::json;

/// Words that appear only in what the test writes: none may be found in any file.
const MARKERS: [&str; 6] = ["qorvexite", "zindermoss", "plumbrattle", "glimmerfrost", "zephyrquant", "wobblemarsh"];
const LABEL: &str = "vortequil-label";

fn key_file(dir: &Path) -> PathBuf {
    let p = dir.join("store.key");
    if !p.exists() {
        engram::storage::crypt::write_key_file(&p).expect("key file");
    }
    p
}

fn config(data: &Path, key: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(data).encrypted(Encryption::key_file(key));
    // A graph for 64 memories, so that a saved HNSW graph (with the vectors of its tombstones) is on disk too.
    c.vector.hnsw_min_points = 32;
    c
}

/// Every file under `dir` (recursively) and what each needle matched: none may.
fn leaks(dir: &Path, needles: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).expect("read file");
            for n in needles {
                if bytes.windows(n.len()).any(|w| w == n.as_bytes()) {
                    out.push(format!("{} holds {n:?}", p.display()));
                }
            }
        }
    }
    out
}

/// The needles: each marker as written, lowercased and capitalised, its first 7 letters (a stem), the label.
fn needles() -> Vec<String> {
    let mut v = Vec::new();
    for m in MARKERS {
        v.push(m.to_string());
        v.push(m[..7].to_string());
        let mut cap = m.to_string();
        cap[..1].make_ascii_uppercase();
        v.push(cap);
    }
    v.push(LABEL.to_string());
    v
}

fn files_of(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Writes memories, labels, a thread, a source and working memory holding the markers through the REST API,
/// edits and deletes some (tombstones in the graph), and writes two encrypted exports.
fn write_everything(store: Arc<KnowledgeStore>, data: &Path) {
    let srv = common::server_on(data, store.clone(), 8 << 20);
    let ok = |r: common::Reply| {
        assert!((200..300).contains(&r.status), "{} {}", r.status, r.body);
        r
    };
    for i in 0..64 {
        let m = MARKERS[i % MARKERS.len()];
        let body = json!({"id": format!("m{i}"), "content": format!("Note {i}: the {m} sits by the harbour"),
                          "labels": [LABEL]});
        ok(call(&srv, "POST", "/memories", Some(&body.to_string())));
    }
    ok(call(&srv, "PATCH", "/memories/m1", Some(&json!({"content": "Edited: zindermoss and qorvexite"}).to_string())));
    ok(call(&srv, "DELETE", "/memories/m2", None));
    let thread = json!({"thread_id": "t1", "title": "glimmerfrost chat", "messages": [
        {"role": "user", "content": "Tell me about glimmerfrost and plumbrattle"},
        {"role": "assistant", "content": "glimmerfrost grows near plumbrattle fields"}]});
    ok(call(&srv, "POST", "/threads", Some(&thread.to_string())));
    let source = json!({"file_name": "notes.md", "content": "# Recipe\n\nThe zephyrquant recipe needs wobblemarsh."});
    ok(call(&srv, "POST", "/sources/ingest/file", Some(&source.to_string())));
    ok(call(&srv, "PUT", "/agent/working-memory", Some(&json!({"content": "Focus: wobblemarsh"}).to_string())));
    let r = ok(call(&srv, "GET", "/memories/search?q=zindermoss", None));
    assert!(r.body.contains("zindermoss"), "{}", r.body);
    let h = ok(call(&srv, "GET", "/health", None)).json();
    assert_eq!(h["encryption"]["encrypted"], true, "{h}");
    assert_eq!(h["encryption"]["cipher"], engram::storage::crypt::Cipher::fastest_here().name());
    assert_eq!(h["encryption"]["key_source"], "key_file");
    let exp = ok(call(&srv, "POST", "/data/export", Some(r#"{"encrypt": true}"#))).json();
    assert_eq!(exp["encrypted"], true, "{exp}");
    let exp = ok(call(&srv, "POST", "/data/export", Some(r#"{"encrypt_passphrase": "archive pass"}"#))).json();
    assert!(exp["export_path"].as_str().unwrap().ends_with(".zip.age"), "{exp}");
    // A directory export cannot be sealed; a wrong archive passphrase is 403 wrong_key before any job.
    let bad = call(&srv, "POST", "/data/export", Some(r#"{"encrypt": true, "compress": false}"#));
    assert_eq!(bad.status, 422, "{}", bad.body);
    let path = exp["export_path"].as_str().unwrap().to_string();
    let body = json!({"import_path": path, "mode": "skip", "passphrase": "not it"});
    let r = call(&srv, "POST", "/data/import", Some(&body.to_string()));
    assert_eq!((r.status, r.json()["error_code"].clone()), (403, json!("wrong_key")), "{}", r.body);
    srv.stop();
    assert!(store.admin().wait_for_indexes(std::time::Duration::from_secs(60)));
}

#[test]
fn no_plaintext_on_disk_after_writes_reopens_an_upgrade_and_exports() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, key) = (tmp.path().join("data"), key_file(tmp.path()));
    write_everything(Arc::new(KnowledgeStore::open(config(&data, &key)).unwrap()), &data);
    // Closed (snapshot and graphs saved), reopened, closed again; then an older format, which the next open
    // migrates after a backup copy.
    drop(KnowledgeStore::open(config(&data, &key)).unwrap());
    engram::store::upgrade::downgrade_to_format_1(&config(&data, &key)).unwrap();
    let store = KnowledgeStore::open(config(&data, &key)).unwrap();
    let up = store.admin().health().unwrap().last_upgrade.expect("migrated at open");
    let backup = PathBuf::from(up.backup.expect("a backup copy"));
    let hit = store.search().run(&engram::SearchQuery::new("glimmerfrost").limit(3)).unwrap();
    assert!(!hit.hits.is_empty(), "search after the upgrade");
    drop(store);
    let files = files_of(&data);
    for want in ["engram.redb", "indexes.snapshot"] {
        assert!(files.contains(&want.to_string()), "{want} missing: {files:?}");
    }
    assert!(files.iter().any(|f| f.starts_with("hnsw/") && f.ends_with(".graph")), "no saved graph: {files:?}");
    assert!(files.iter().filter(|f| f.ends_with(".zip.age")).count() == 2, "{files:?}");
    assert!(backup.exists() && files.iter().any(|f| f.ends_with(".bak")), "{files:?}");
    assert!(
        engram::storage::crypt::is_sealed_side_file(&data.join("indexes.snapshot")),
        "indexes.snapshot is not sealed"
    );
    let leaked = leaks(&data, &needles());
    assert!(leaked.is_empty(), "plaintext on disk:\n{}", leaked.join("\n"));

    // The archives open: the store-key one into the same store, the passphrase one into another.
    let exports: Vec<PathBuf> = std::fs::read_dir(data.join("exports")).unwrap().flatten().map(|e| e.path()).collect();
    let store = KnowledgeStore::open(config(&data, &key)).unwrap();
    let progress = engram::ImportProgress::default();
    let mut opened = 0;
    for e in &exports {
        let r = store.transfer().import(e, engram::ImportMode::Skip, &progress);
        if let Ok(rep) = r {
            assert!(rep.records > 60, "{rep:?}");
            opened += 1;
        } else {
            let e = r.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WrongKey, "{e:?}");
        }
    }
    assert_eq!(opened, 1, "the store's own key opens its archive, not the passphrase one");
    drop(store);
    let other_dir = tmp.path().join("other");
    let other = KnowledgeStore::open(StoreConfig::new(&other_dir).allow_path(data.join("exports"))).unwrap();
    let pass = secrecy::SecretString::from("archive pass".to_string());
    let mut imported = 0;
    for e in &exports {
        if let Ok(rep) = other.transfer().import_with(e, engram::ImportMode::Merge, &progress, Some(&pass)) {
            assert!(rep.records > 60);
            imported += 1;
        }
    }
    assert_eq!(imported, 1, "the passphrase opens its archive in another store");
    assert!(other.memories().get("m5", None).unwrap().memory.content.contains("the"));
}

/// One byte flipped at 1,000 random positions of an encrypted store (one position per copy, side files
/// removed so that the open reads the tables): every open and full read either fails as corruption, or gives
/// exactly the answers of the intact store. A wrong key is `wrong_key`, and the file is unchanged.
#[test]
fn a_flipped_byte_is_corruption_or_nothing_and_a_wrong_key_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, key) = (tmp.path().join("data"), key_file(tmp.path()));
    {
        let store = KnowledgeStore::open(StoreConfig::new(&data).encrypted(Encryption::key_file(&key))).unwrap();
        for i in 0..40 {
            let m = MARKERS[i % MARKERS.len()];
            store
                .memories()
                .create(engram::NewMemory {
                    id: Some(format!("m{i}")),
                    content: format!("Memory {i} about the {m}"),
                    labels: Some(vec!["flip".into()]),
                    ..Default::default()
                })
                .unwrap();
        }
    }
    let clean = std::fs::read(data.join("engram.redb")).unwrap();
    // Wrong keys: the distinct error, and not one byte changed.
    let sha = |p: &Path| {
        use sha2::Digest;
        sha2::Sha256::digest(std::fs::read(p).unwrap()).to_vec()
    };
    let before = sha(&data.join("engram.redb"));
    let other = tmp.path().join("other.key");
    engram::storage::crypt::write_key_file(&other).unwrap();
    for wrong in [
        Encryption::key_file(&other),
        Encryption::passphrase("not the key"),
        Encryption::new(KeySource::KeyFile(tmp.path().join("missing.key"))),
    ] {
        let e = KnowledgeStore::open(StoreConfig::new(&data).encrypted(wrong)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongKey, "{e:?}");
    }
    let e = KnowledgeStore::open(StoreConfig::new(&data)).unwrap_err();
    assert_eq!((e.kind(), e.code()), (ErrorKind::WrongKey, "key_required"), "{e:?}");
    assert_eq!(sha(&data.join("engram.redb")), before, "a wrong key changed the file");

    let answers = |dir: &Path| -> engram::Result<String> {
        let store = KnowledgeStore::open(StoreConfig::new(dir).encrypted(Encryption::key_file(&key)))?;
        let mut out = String::new();
        for i in 0..40 {
            out.push_str(&store.memories().get(&format!("m{i}"), None)?.memory.content);
        }
        // Ranks move with the clock (recency decay): the set of hits is what must not change.
        let hits = store.search().run(&engram::SearchQuery::new("qorvexite zindermoss").limit(50))?;
        let mut ids: Vec<&String> = hits.hits.iter().map(|h| &h.view.memory.id).collect();
        ids.sort();
        out.push_str(&format!("{ids:?}"));
        out.push_str(&format!(
            "{:?}",
            store
                .labels()
                .list("default", engram::LabelOrder::Name, false, 100, 0)?
                .iter()
                .map(|l| &l.name)
                .collect::<Vec<_>>()
        ));
        Ok(out)
    };
    let want = answers(&data).unwrap();
    let flips: usize = std::env::var("ENGRAM_FLIPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let positions: Vec<(usize, u8)> = (0..flips)
        .map(|n| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            ((rng % clean.len() as u64) as usize, 1u8 << (n % 8))
        })
        .collect();
    // Two workers, each on copies of its own.
    let outcomes: Vec<bool> = std::thread::scope(|s| {
        let workers: Vec<_> = positions
            .chunks(flips.div_ceil(2).max(1))
            .enumerate()
            .map(|(w, part)| {
                let (clean, want, answers, tmp) = (&clean, &want, &answers, tmp.path());
                s.spawn(move || {
                    let dir = tmp.join(format!("flip-{w}"));
                    part.iter()
                        .map(|&(at, bit)| {
                            let mut bytes = clean.clone();
                            bytes[at] ^= bit;
                            let _ = std::fs::remove_dir_all(&dir);
                            std::fs::create_dir_all(&dir).unwrap();
                            std::fs::write(dir.join("engram.redb"), &bytes).unwrap();
                            match answers(&dir) {
                                Ok(got) => {
                                    assert_eq!(&got, want, "flip at byte {at}: wrong data returned");
                                    false
                                }
                                Err(e) => {
                                    assert_eq!(e.kind(), ErrorKind::Corrupt, "flip at byte {at}: {e:?}");
                                    true
                                }
                            }
                        })
                        .collect::<Vec<bool>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a flip worker panicked")).collect()
    });
    let corrupt = outcomes.iter().filter(|c| **c).count();
    eprintln!("{flips} flips: {corrupt} reported as corruption, {} read back unchanged", flips - corrupt);
    assert_eq!(outcomes.len(), flips);
    // The file holds free pages redb keeps for reuse (flips there change nothing); the rest must be caught.
    assert!(corrupt >= flips / 5, "too few flips detected: {corrupt} of {flips}");
}

/// `engram encrypt`, `rekey` (rewrap, add a slot, rotate the data key) and `decrypt` of a store with side files:
/// every step answers the same, the old key stops working after a rekey, and a store held by another process
/// is refused.
#[test]
fn encrypt_rekey_rotate_and_decrypt_keep_the_answers() {
    use engram::store::encryption::{decrypt_store, encrypt_store, rekey_store};
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let plain = {
        let mut c = StoreConfig::new(&data);
        c.vector.hnsw_min_points = 32;
        c
    };
    let answers = |c: StoreConfig| -> String {
        let store = KnowledgeStore::open(c).unwrap();
        let hits = store.search().run(&engram::SearchQuery::new("wobblemarsh").limit(100)).unwrap();
        let mut ids: Vec<&String> = hits.hits.iter().map(|h| &h.view.memory.id).collect();
        ids.sort();
        format!("{ids:?} {}", store.admin().health().unwrap().memories)
    };
    {
        let store = KnowledgeStore::open(plain.clone()).unwrap();
        for i in 0..64 {
            let m = MARKERS[i % MARKERS.len()];
            let new = engram::NewMemory { content: format!("Item {i}: {m} near the harbour"), ..Default::default() };
            store.memories().create(new).unwrap();
        }
        store.admin().wait_for_indexes(std::time::Duration::from_secs(60));
    }
    let want = answers(plain.clone());
    // Refused while the store is open.
    let held = KnowledgeStore::open(plain.clone()).unwrap();
    let key = key_file(tmp.path());
    let e = encrypt_store(&data, &Encryption::key_file(&key), &|_, _| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Locked, "{e:?}");
    drop(held);
    let r = encrypt_store(&data, &Encryption::key_file(&key), &|_, _| {}).unwrap();
    assert!(r.side_files >= 2, "{r:?}");
    assert!(leaks(&data, &needles()).is_empty(), "{:?}", leaks(&data, &needles()));
    let with = |e: Encryption| {
        let mut c = plain.clone();
        c.encryption = Some(e);
        c
    };
    assert_eq!(answers(with(Encryption::key_file(&key))), want);
    // Rewrap to a passphrase (instant), then add a key file beside it.
    let pass = || Encryption::passphrase("open sesame, please");
    rekey_store(&data, &KeySource::KeyFile(key.clone()), &pass(), false, false, &|_, _| {}).unwrap();
    let e = KnowledgeStore::open(with(Encryption::key_file(&key))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WrongKey, "the old key stops working: {e:?}");
    let second = tmp.path().join("second.key");
    engram::storage::crypt::write_key_file(&second).unwrap();
    let r = rekey_store(&data, &pass().source, &Encryption::key_file(&second), true, false, &|_, _| {}).unwrap();
    assert_eq!(r.status.key_slots, ["passphrase", "key_file"]);
    assert_eq!(answers(with(pass())), want);
    assert_eq!(answers(with(Encryption::key_file(&second))), want);
    // Rotate the data key: every block rewritten, one slot left.
    let before = std::fs::read(data.join("engram.redb")).unwrap();
    let r = rekey_store(&data, &pass().source, &Encryption::key_file(&key), false, true, &|_, _| {}).unwrap();
    assert_eq!(r.status.key_slots, ["key_file"]);
    let after = std::fs::read(data.join("engram.redb")).unwrap();
    let same_frames = before.chunks(4136).zip(after.chunks(4136)).filter(|(a, b)| a == b).count();
    assert!(same_frames < 3, "{same_frames} frames unchanged by a rotation");
    assert_eq!(answers(with(Encryption::key_file(&key))), want);
    assert_eq!(KnowledgeStore::open(with(pass())).unwrap_err().kind(), ErrorKind::WrongKey);
    // Back to plaintext.
    decrypt_store(&data, &KeySource::KeyFile(key.clone()), &|_, _| {}).unwrap();
    assert_eq!(answers(plain.clone()), want);
    let e = KnowledgeStore::open(with(Encryption::key_file(&key))).unwrap_err();
    assert_eq!(e.code(), "store_not_encrypted", "{e:?}");
}

/// Encryption at rest is the redb file's: asked of a PostgreSQL store, it is a clear error before any connection.
#[test]
fn encryption_with_a_database_url_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let c = StoreConfig::new(tmp.path()).database("host=/nonexistent dbname=x").encrypted(Encryption::passphrase("p"));
    let e = KnowledgeStore::open(c).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e:?}");
    assert!(e.message().contains("PostgreSQL") && e.message().contains("deploy.md"), "{}", e.message());
}

/// Damage found while the daemon serves (blocks changed on disk under it) is a 500 `store_corrupt` naming no
/// internals, and no wrong data.
#[test]
fn damage_under_a_running_daemon_is_store_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, key) = (tmp.path().join("data"), key_file(tmp.path()));
    let mut c = StoreConfig::new(&data).encrypted(Encryption::key_file(&key));
    c.cache_size_bytes = 0; // every read of a record goes to the file
    let store = Arc::new(KnowledgeStore::open(c).unwrap());
    for i in 0..20 {
        let new = engram::NewMemory { id: Some(format!("m{i}")), content: format!("Entry {i}"), ..Default::default() };
        store.memories().create(new).unwrap();
    }
    let srv = common::server_on(&data, store.clone(), 1 << 20);
    assert_eq!(call(&srv, "GET", "/memories/m3", None).status, 200);
    // Every sealed block after the headers is overwritten on disk.
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(data.join("engram.redb")).unwrap();
        let len = f.metadata().unwrap().len();
        f.seek(std::io::SeekFrom::Start(24576)).unwrap();
        f.write_all(&vec![0x5a; (len - 24576) as usize]).unwrap();
        f.sync_all().unwrap();
    }
    let r = call(&srv, "GET", "/memories/m7", None);
    assert_eq!(r.status, 500, "{}", r.body);
    assert_eq!(r.json()["error_code"], "store_corrupt", "{}", r.body);
    assert!(!r.body.contains("Entry"), "{}", r.body);
    srv.stop();
    drop(store);
}

#[cfg(unix)]
mod daemon {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};

    const API_KEY: &str = "encryption-test-api-key";
    const PASSPHRASE: &str = "kumquat-velvet-passphrase";

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(14_601)
    }

    fn serve(data: &Path, port: u16, log: &Path, extra: &[&str], env: &[(&str, &Path)]) -> std::process::Child {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_engram"));
        cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}"), "--api-key", API_KEY])
            .args(["--embedding-model", "builtin", "--data-dir"])
            .arg(data)
            .args(extra)
            // rmcp asked for at trace too: it stays capped (it would log memory text).
            .env("ENGRAM_LOG", "debug,rmcp=trace")
            .env_remove("ENGRAM_PASSPHRASE_FILE")
            .env_remove("ENGRAM_KEY_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(log.with_extension("out")).unwrap()))
            .stderr(Stdio::from(std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap()));
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("start the daemon")
    }

    fn request(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {API_KEY}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut s, &mut out).unwrap();
        let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    }

    fn wait_up(port: u16, child: &mut std::process::Child, log: &Path) {
        for _ in 0..600 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && request(port, "GET", "/livez", "").0 == 200
            {
                return;
            }
            if let Ok(Some(st)) = child.try_wait() {
                panic!("the daemon exited ({st}):\n{}", std::fs::read_to_string(log).unwrap_or_default());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the daemon did not come up");
    }

    fn stop(mut child: std::process::Child) {
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let st = child.wait().expect("wait");
        assert!(st.success(), "the daemon did not stop cleanly: {st}");
    }

    /// A daemon on a passphrase-encrypted store at ENGRAM_LOG=debug: REST and MCP write and search; its log holds
    /// no memory text, no passphrase and no key; restarted without a key or with a wrong one it stops and says
    /// how to give one; `engram mcp` over stdio opens the store with the passphrase file.
    #[test]
    fn an_encrypted_daemon_serves_rest_and_mcp_and_logs_no_memory_text() {
        let tmp = tempfile::tempdir().unwrap();
        let (data, log) = (tmp.path().join("data"), tmp.path().join("daemon.log"));
        let pass = tmp.path().join("passphrase");
        std::fs::write(&pass, format!("{PASSPHRASE}\n")).unwrap();
        let port = free_port();
        let mut child = serve(&data, port, &log, &["--encrypted"], &[("ENGRAM_PASSPHRASE_FILE", pass.as_path())]);
        wait_up(port, &mut child, &log);
        let (s, b) = request(
            port,
            "POST",
            "/memories",
            &json!({"content": "The qorvexite lives in the attic",
            "labels": [LABEL]})
            .to_string(),
        );
        assert_eq!(s, 200, "{b}");
        let (s, b) = request(port, "GET", "/memories/search?q=qorvexite", "");
        assert!(s == 200 && b.contains("attic"), "{s} {b}");
        let thread = json!({"thread_id": "t-enc", "messages": [{"role": "user", "content": "zindermoss talk"}]});
        assert_eq!(request(port, "POST", "/threads", &thread.to_string()).0, 200);
        let call = |id: u32, name: &str, args: serde_json::Value| {
            let rpc = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": name, "arguments": args}});
            let (s, b) = request(port, "POST", "/mcp", &rpc.to_string());
            assert_eq!(s, 200, "{b}");
            b
        };
        assert!(call(1, "memory_add", json!({"content": "plumbrattle in the garden shed"})).contains("success"));
        assert!(call(2, "memory_search", json!({"query": "plumbrattle"})).contains("garden shed"));
        let (_, h) = request(port, "GET", "/health", "");
        assert!(h.contains(r#""encrypted":true"#) && h.contains(r#""key_source":"passphrase""#), "{h}");
        assert!(h.contains(r#""kdf":"m=65536,t=3,p=4""#), "{h}");
        stop(child);
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("DEBUG"), "the log is at debug level");
        for secret in ["qorvexite", "zindermoss", "plumbrattle", "attic", "garden shed", PASSPHRASE, LABEL] {
            assert!(!text.contains(secret), "the log holds {secret:?}:\n{text}");
        }
        assert!(super::leaks(&data, &super::needles()).is_empty());

        // No key: the daemon stops and says how to give one. A wrong passphrase: `wrong passphrase`.
        let out = Command::new(env!("CARGO_BIN_EXE_engram"))
            .args(["serve", "--addr", "127.0.0.1:0", "--embedding-model", "builtin", "--data-dir"])
            .arg(&data)
            .env_remove("ENGRAM_PASSPHRASE_FILE")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("is encrypted") && err.contains("--key-file"), "{err}");
        let wrong = tmp.path().join("wrong");
        std::fs::write(&wrong, "not-the-passphrase\n").unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_engram"))
            .args(["serve", "--addr", "127.0.0.1:0", "--embedding-model", "builtin", "--data-dir"])
            .arg(&data)
            .env("ENGRAM_PASSPHRASE_FILE", &wrong)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("wrong passphrase"), "{err}");

        // MCP over stdio opens the encrypted store itself.
        let mut child = Command::new(env!("CARGO_BIN_EXE_engram"))
            .args(["mcp", "--embedding-model", "builtin", "--data-dir"])
            .arg(&data)
            .env("ENGRAM_PASSPHRASE_FILE", &pass)
            .env("ENGRAM_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut ask = |msg: serde_json::Value| {
            writeln!(stdin, "{msg}").unwrap();
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line
        };
        ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
        let found = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": "qorvexite"}}}));
        assert!(found.contains("attic"), "{found}");
        drop(stdin);
        assert!(child.wait().unwrap().success());
    }

    /// The OS keychain as a key source (Linux keyutils, in a session keyring of its own: `keyctl session`):
    /// `engram encrypt --new-keychain`, an open through the keychain, a key file added beside it; outside the
    /// session the keychain holds no key (`key_required`) and the key file still opens the store.
    #[test]
    fn the_keychain_opens_a_store_and_a_key_file_added_beside_it_outlives_it() {
        if Command::new("keyctl").arg("--version").output().is_err() {
            assert!(std::env::var_os("CI").is_none(), "keyctl (Debian's keyutils) is required under CI");
            eprintln!("keyctl not installed: skipped");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let (data, key) = (tmp.path().join("data"), tmp.path().join("added.key"));
        {
            let store = KnowledgeStore::open(StoreConfig::new(&data)).unwrap();
            let new = engram::NewMemory {
                id: Some("kc".into()),
                content: "kept under the keychain".into(),
                ..Default::default()
            };
            store.memories().create(new).unwrap();
        }
        let script = r#"set -e
"$ENGRAM_BIN" encrypt --data-dir "$DATA" --new-keychain
"$ENGRAM_BIN" upgrade --check --data-dir "$DATA" --keychain
"$ENGRAM_BIN" rekey --data-dir "$DATA" --keychain --add --new-key-file "$KEY""#;
        std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
        let out = Command::new("keyctl")
            .args(["session", "-", "sh", "-c", script])
            .env("ENGRAM_BIN", env!("CARGO_BIN_EXE_engram"))
            .env("DATA", &data)
            .env("KEY", &key)
            .env("ENGRAM_LOG", "warn")
            .output()
            .unwrap();
        let (so, se) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{so}\n{se}");
        assert!(so.contains("encrypted:") && so.contains("nothing to do") && so.contains("keychain, key file"), "{so}");
        let store = KnowledgeStore::open(StoreConfig::new(&data).encrypted(Encryption::key_file(&key))).unwrap();
        assert_eq!(store.memories().get("kc", None).unwrap().memory.content, "kept under the keychain");
        assert_eq!(store.admin().encryption().key_slots, ["keychain", "key_file"]);
        drop(store);
        let e = KnowledgeStore::open(StoreConfig::new(&data).encrypted(Encryption::keychain())).unwrap_err();
        assert!(e.kind() == ErrorKind::WrongKey || e.kind() == ErrorKind::Unavailable, "{e:?}");
    }
}
