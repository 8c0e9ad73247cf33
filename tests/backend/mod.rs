//! The storage backend the conformance tests run on: the store-level behaviour tests (the proptest model in
//! `store_model.rs`, round trips in `store_memories.rs`, lifecycle, labels, threads, spaces isolation, working
//! memory, reviews, search filters, and the storage port's primitives in `storage_port.rs`) open every store
//! through [`open`] or [`config`], so that one suite runs against each backend, as basic-memory's `conftest.py`
//! does with its database switch.
//!
//! `ENGRAM_TEST_BACKEND` picks the backend: `redb` (the default: a real redb file in the test's temp dir) or
//! `postgres` (feature `postgres`): the server of `ENGRAM_TEST_PG` (a connection string, as `.ci/run` and
//! `tools/postgres/cluster.sh` give it), one schema per test directory, so tests run in parallel on one
//! database and a reopened directory finds its store again.
//! Run the suite on one backend with
//! `ENGRAM_TEST_BACKEND=redb cargo test --test store_model --test store_memories --test lifecycle --test labels
//! --test threads --test spaces --test working_memory --test reviews --test storage_port --test expiry`.
#![allow(dead_code)]

use std::path::Path;

use engram::{KnowledgeStore, StoreConfig};

/// A storage backend of the conformance suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One redb file in the data directory.
    Redb,
    /// A PostgreSQL schema of its own on the `ENGRAM_TEST_PG` server.
    #[cfg(feature = "postgres")]
    Postgres,
}

impl Backend {
    /// The backend `ENGRAM_TEST_BACKEND` names (default `redb`). An unknown name fails the test: a suite that
    /// was asked for a backend must not quietly run on another.
    pub fn current() -> Backend {
        match std::env::var("ENGRAM_TEST_BACKEND").as_deref() {
            Err(_) | Ok("") | Ok("redb") => Backend::Redb,
            #[cfg(feature = "postgres")]
            Ok("postgres") => Backend::Postgres,
            Ok(other) => panic!("ENGRAM_TEST_BACKEND={other}: this build has no such backend (feature `postgres`?)"),
        }
    }

    /// A store configuration on this backend with its data (and, for redb, its file) in `dir`; the built-in
    /// embedder.
    pub fn config(self, dir: &Path) -> StoreConfig {
        match self {
            Backend::Redb => StoreConfig::new(dir),
            #[cfg(feature = "postgres")]
            Backend::Postgres => StoreConfig::new(dir).database(pg_url_for(dir)),
        }
    }
}

/// The `ENGRAM_TEST_PG` server, or `None` (and a note) when none is named: a test on PostgreSQL then passes
/// without running, except under `CI`, where it fails: CI must not skip the backend.
#[cfg(feature = "postgres")]
pub fn pg_server() -> Option<String> {
    match std::env::var("ENGRAM_TEST_PG") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI: ENGRAM_TEST_PG must name a PostgreSQL server (tools/postgres/cluster.sh start DIR)")
        }
        _ => {
            eprintln!("skipped: set ENGRAM_TEST_PG to a PostgreSQL connection string to run the backend tests");
            None
        }
    }
}

/// The connection string of `dir`'s own schema on the `ENGRAM_TEST_PG` server, created if missing.
#[cfg(feature = "postgres")]
pub fn pg_url_for(dir: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let base = std::env::var("ENGRAM_TEST_PG").expect("ENGRAM_TEST_BACKEND=postgres needs ENGRAM_TEST_PG");
    let mut h = std::collections::hash_map::DefaultHasher::new();
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()).hash(&mut h);
    let schema = format!("t_{:016x}", h.finish());
    let mut client = engram::storage::postgres::connect(&base).expect("connect to ENGRAM_TEST_PG");
    client.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}")).expect("create the test schema");
    in_schema(&base, &schema)
}

/// The connection string `base` (URL or key=value form) with `schema` as the search path.
#[cfg(feature = "postgres")]
pub fn in_schema(base: &str, schema: &str) -> String {
    if base.contains("://") {
        let sep = if base.contains('?') { '&' } else { '?' };
        format!("{base}{sep}options=-csearch_path%3D{schema}")
    } else {
        format!("{base} options='-csearch_path={schema}'")
    }
}

/// [`Backend::config`] of the current backend.
pub fn config(dir: &Path) -> StoreConfig {
    Backend::current().config(dir)
}

/// Opens (or reopens) the store of `dir` on the current backend.
pub fn open(dir: &Path) -> KnowledgeStore {
    KnowledgeStore::open(config(dir)).unwrap_or_else(|e| panic!("open a store on {:?}: {e}", Backend::current()))
}

/// A transcript stored turn by turn (`analysis: per-message`): thread `id` of `space` holding `lines`, user and
/// assistant in turn, dated a day apart from 1 May 2024, one memory per message. Returns the memories' ids.
pub fn per_message_thread(store: &KnowledgeStore, space: &str, id: &str, lines: &[&str]) -> Vec<String> {
    let mut md = serde_json::Map::new();
    md.insert("analysis".into(), engram::store::PER_MESSAGE.into());
    let messages = lines
        .iter()
        .enumerate()
        .map(|(i, text)| engram::NewMessage {
            role: if i % 2 == 0 { "user".into() } else { "assistant".into() },
            content: (*text).into(),
            timestamp: Some(format!("2024-05-{:02}T12:00:00Z", 1 + i % 28)),
            metadata: None,
        })
        .collect();
    let created = store
        .threads()
        .create(engram::NewThread {
            thread_id: Some(id.into()),
            messages,
            space_id: Some(space.into()),
            metadata: Some(engram::Metadata(md)),
            ..Default::default()
        })
        .expect("thread");
    created.extraction.memories.iter().map(|m| m.view.memory.id.clone()).collect()
}
