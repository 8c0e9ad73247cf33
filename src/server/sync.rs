//! The daemon's sync worker (`engram serve --sync`; docs/sync.md): one pass of
//! [`SyncService::sync_folder`](crate::store::SyncService::sync_folder) whenever the shared folder changes
//! (watched with the `notify` crate: inotify, FSEvents, ReadDirectoryChangesW) or this device has changes not
//! yet written, and at least every [`POLL_EVERY`] (for folders a watcher cannot see into, such as some network
//! shares). Between passes it sleeps on its channel: no busy polling. Ends with the runtime.
//!
//! The direct transport (docs/sync.md, "Directly between daemons"): `/sync/peer/segments` serves the segment
//! files of this daemon's folder to the devices of its group, authorised by the group's pull token
//! ([`TOKEN_HEADER`]) and never by the API key; with `--sync-peer URL` the worker also pulls the segments of
//! that daemon's folder into its own, where the folder pass applies them. A pull is a long poll: the serving
//! daemon holds a list request that has seen its folder as it is for up to [`LONG_POLL`], and answers as soon
//! as its folder changes, so two idle daemons exchange one request per peer every 20 s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::Watcher;

use crate::error::{Error, ErrorKind, Result};
use crate::store::KnowledgeStore;

/// How often the worker looks for this device's own new changes (an in-memory counter; no transaction).
pub const CHECK_EVERY: Duration = Duration::from_millis(250);
/// The longest the worker goes without reading the folder, events or not.
pub const POLL_EVERY: Duration = Duration::from_secs(15);

/// How long the worker waits before pulling again from a daemon named with `--sync-peer` that failed to answer.
pub const PULL_EVERY: Duration = Duration::from_secs(1);

/// The longest a serving daemon holds a pull's list request while its folder does not change.
pub const LONG_POLL: Duration = Duration::from_secs(20);

/// The generation of this process's sync folder: bumped by the worker's watcher at every change of the folder,
/// so a pull that saw one generation can wait for the next ([`LONG_POLL`]). Its text form starts with a number
/// of this process's start, so a generation of an earlier run never matches.
pub(crate) struct FolderGeneration {
    boot: u64,
    n: std::sync::atomic::AtomicU64,
    changed: tokio::sync::Notify,
}

pub(crate) static FOLDER: std::sync::LazyLock<FolderGeneration> = std::sync::LazyLock::new(|| FolderGeneration {
    boot: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()),
    n: std::sync::atomic::AtomicU64::new(0),
    changed: tokio::sync::Notify::new(),
});

impl FolderGeneration {
    /// The generation now.
    pub(crate) fn current(&self) -> String {
        format!("{:x}-{}", self.boot, self.n.load(std::sync::atomic::Ordering::Acquire))
    }

    /// The folder changed: a new generation, and every waiting pull wakes.
    fn bump(&self) {
        self.n.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.changed.notify_waiters();
    }

    /// Waits until the generation is no longer `seen`, at most `wait`.
    pub(crate) async fn wait_past(&self, seen: &str, wait: Duration) {
        let notified = self.changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.current() == seen {
            let _ = tokio::time::timeout(wait, notified).await;
        }
    }
}

/// The long poll a list request asks for: the generation it saw (`since`) and how long it may wait (`wait`,
/// seconds, at most [`LONG_POLL`]).
pub(crate) fn long_poll(path: &str, query: &str) -> Option<(String, Duration)> {
    if path != PEER_PREFIX {
        return None;
    }
    let get = |key: &str| query.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == key).map(|(_, v)| v);
    let since = get("since")?.to_string();
    let wait = get("wait").and_then(|w| w.parse::<u64>().ok()).unwrap_or(0);
    (wait > 0).then(|| (since, Duration::from_secs(wait).min(LONG_POLL)))
}

/// The request header that carries the group's pull token ([`crate::store::SyncService::pull_token`]).
pub const TOKEN_HEADER: &str = "x-engram-sync-token";

/// The path prefix of the direct transport's segment routes.
const PEER_PREFIX: &str = "/sync/peer/segments";
/// The path prefix of the direct transport's other files (heads, key rotations, snapshot parts).
const FILES_PREFIX: &str = "/sync/peer/files";

/// Whether `path` is a route of the direct transport (answered by [`peer_call`], not by the API).
pub(crate) fn is_peer_path(path: &str) -> bool {
    path == PEER_PREFIX || path.starts_with("/sync/peer/")
}

/// What a direct-transport request gets.
pub(crate) enum PeerOut {
    /// `GET /sync/peer/segments?after=<device>:<n>,...`: `{"segments": {device: [n, ...]}}`.
    List(serde_json::Value),
    /// `GET /sync/peer/segments/<device>/<n>` or `GET /sync/peer/files/<device>/<name>`: the file.
    File(Vec<u8>),
}

/// Answers a direct-transport request: GET only, with the group's pull token in [`TOKEN_HEADER`] (compared in
/// constant time).
///
/// # Errors
/// [`ErrorKind::Unauthorized`] without the right token (or when this store is in no group with a folder: it
/// has no token); [`ErrorKind::MethodNotAllowed`] for another method; [`ErrorKind::NotFound`] for another path
/// or a file the folder does not hold; [`ErrorKind::InvalidInput`] for a malformed `after`.
pub(crate) fn peer_call(
    store: &KnowledgeStore,
    method: &str,
    path: &str,
    query: &str,
    token: Option<&[u8]>,
) -> Result<PeerOut> {
    use subtle::ConstantTimeEq;
    let sync = store.sync();
    let expected = sync.pull_tokens().unwrap_or_default();
    let authorised = match token {
        Some(t) => expected.iter().fold(false, |ok, e| ok | bool::from(t.ct_eq(e.as_bytes()))),
        None => false,
    };
    if !authorised {
        return Err(Error::new(ErrorKind::Unauthorized, "missing or wrong sync pull token"));
    }
    if method != "GET" {
        return Err(Error::new(ErrorKind::MethodNotAllowed, "the sync peer routes are GET only"));
    }
    if path == PEER_PREFIX {
        let mut after = std::collections::BTreeMap::new();
        for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
            if k != "after" {
                continue;
            }
            let v = v.replace("%3A", ":").replace("%3a", ":").replace("%2C", ",").replace("%2c", ",");
            for pair in v.split(',').filter(|p| !p.is_empty()) {
                let (d, n) =
                    pair.split_once(':').and_then(|(d, n)| Some((d, n.parse::<u64>().ok()?))).ok_or_else(|| {
                        Error::invalid_value(&["after"], "value_error", "after is <device>:<segment>,...", pair.into())
                    })?;
                after.insert(d.to_string(), n);
            }
        }
        return Ok(PeerOut::List(
            serde_json::json!({"segments": sync.folder_segments(&after)?, "files": sync.folder_files()?}),
        ));
    }
    if path == FILES_PREFIX {
        return Ok(PeerOut::List(serde_json::json!({"files": sync.folder_files()?})));
    }
    if let Some((device, name)) = path.strip_prefix(FILES_PREFIX).and_then(|r| r.strip_prefix('/')?.split_once('/')) {
        return Ok(PeerOut::File(sync.folder_file(device, name)?));
    }
    let rest = path.strip_prefix(PEER_PREFIX).and_then(|r| r.strip_prefix('/'));
    match rest.and_then(|r| r.split_once('/')).and_then(|(d, n)| Some((d, n.parse::<u64>().ok()?))) {
        Some((device, n)) => Ok(PeerOut::File(sync.folder_segment(device, n)?)),
        None => Err(Error::new(ErrorKind::NotFound, format!("no such sync peer route: {path}"))),
    }
}

/// Pulls from the daemon at `base` (`http://host:port`) every segment its folder holds that this device's folder
/// does not, at most 64 per device and call ([`crate::store::SyncService::folder_segments`]); returns how many
/// files it stored.
///
/// # Errors
/// [`ErrorKind::Io`] when the peer cannot be reached or answers with an error; as
/// [`crate::store::SyncService::receive_segment`].
pub fn pull(store: &KnowledgeStore, base: &str) -> Result<usize> {
    pull_since(store, base, None).map(|(n, _)| n)
}

/// [`pull`] as a long poll: with the generation `since` of the other daemon's folder that the last pull saw, the
/// other daemon answers once its folder has changed (or after [`LONG_POLL`]). Returns the files stored and the
/// generation this pull saw.
///
/// # Errors
/// As [`pull`].
pub fn pull_since(store: &KnowledgeStore, base: &str, since: Option<&str>) -> Result<(usize, Option<String>)> {
    let sync = store.sync();
    let token = sync.pull_token()?;
    let heads = sync.folder_heads()?;
    let after: Vec<String> = heads.iter().map(|(d, n)| format!("{d}:{n}")).collect();
    let agent = ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .timeout_global(Some(LONG_POLL + Duration::from_secs(30)))
            .http_status_as_error(false)
            .build(),
    );
    let base = base.trim_end_matches('/');
    let fail = |what: &str, e: String| Error::new(ErrorKind::Io, format!("sync peer {base}: {what}: {e}"));
    let get = |url: String| -> Result<Vec<u8>> {
        let mut resp =
            agent.get(&url).header(TOKEN_HEADER, &token).call().map_err(|e| fail("request", e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(crate::sync::segment::MAX_BODY + crate::sync::segment::HEADER_LEN as u64 + 64)
            .read_to_vec()
            .map_err(|e| fail("reading the answer", e.to_string()))?;
        if status != 200 {
            return Err(fail(&format!("HTTP {status}"), String::from_utf8_lossy(&body).chars().take(200).collect()));
        }
        Ok(body)
    };
    let wait = since.map(|g| format!("&since={g}&wait={}", LONG_POLL.as_secs())).unwrap_or_default();
    let list: serde_json::Value =
        serde_json::from_slice(&get(format!("{base}{PEER_PREFIX}?after={}{wait}", after.join(",")))?)
            .map_err(|e| fail("the list", e.to_string()))?;
    let mut stored = 0;
    let me = store.admin().device_id()?.to_hex();
    // Heads, key rotations and snapshot parts first: a segment under a new key follows its rotation.
    let held = sync.folder_files()?;
    if let Some(devices) = list["files"].as_object() {
        for (device, names) in devices.iter().filter(|(d, _)| **d != me) {
            for (name, digest) in names.as_object().into_iter().flatten() {
                let mine = held.get(device).and_then(|h| h.get(name));
                if mine.is_some_and(|m| Some(m.as_str()) == digest.as_str()) {
                    continue;
                }
                let bytes = get(format!("{base}{FILES_PREFIX}/{device}/{name}"))?;
                if sync.receive_file(device, name, &bytes)? {
                    stored += 1;
                }
            }
        }
    }
    if let Some(devices) = list["segments"].as_object() {
        for (device, ns) in devices.iter().filter(|(d, _)| **d != me) {
            for n in ns.as_array().into_iter().flatten().filter_map(serde_json::Value::as_u64) {
                let bytes = get(format!("{base}{PEER_PREFIX}/{device}/{n}"))?;
                if sync.receive_segment(device, n, &bytes)? {
                    stored += 1;
                }
            }
        }
    }
    Ok((stored, list["generation"].as_str().map(str::to_string)))
}

/// Starts the worker on `store`, whose sync group must have a folder, pulling from the daemons at `peers`
/// (`http://host:port`, the direct transport) too.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when the store is in no sync group with a folder (`engram sync init` or `join`
/// first) or on PostgreSQL; [`ErrorKind::Io`] when the folder cannot be watched.
pub fn start(store: Arc<KnowledgeStore>, peers: Vec<String>) -> Result<()> {
    let status = store.sync().status()?;
    let folder = match (status.enabled, store.sync().folder()?) {
        (true, Some(f)) => f,
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "--sync needs a store in a sync group with a folder: run `engram sync init --folder DIR` (or `engram \
                 sync join`) first; sync is for the embedded redb store",
            ));
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if e.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
            let _ = tx.send(());
            FOLDER.bump(); // the pulls waiting on this daemon's folder look again
        }
    })
    .map_err(|e| Error::new(ErrorKind::Io, format!("watching {}: {e}", folder.display())))?;
    watcher
        .watch(&folder, notify::RecursiveMode::Recursive)
        .map_err(|e| Error::new(ErrorKind::Io, format!("watching {}: {e}", folder.display())))?;
    tracing::info!(folder = %folder.display(), peers = peers.len(), "sync worker started");
    // One task per peer: each pull waits on its own peer's folder.
    for base in peers {
        let s = store.clone();
        tokio::spawn(async move {
            let mut since: Option<String> = None;
            loop {
                let (s2, base2, seen) = (s.clone(), base.clone(), since.clone());
                // A file stored in the folder wakes the folder pass through the watcher.
                match tokio::task::spawn_blocking(move || pull_since(&s2, &base2, seen.as_deref())).await {
                    Ok(Ok((n, generation))) => {
                        if n > 0 {
                            tracing::debug!(files = n, peer = %base, "sync pull");
                        }
                        since = generation;
                        continue;
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e.chain(), "sync pull failed; retrying"),
                    Err(e) => tracing::warn!(error = %e, "sync pull stopped"),
                }
                since = None;
                tokio::time::sleep(PULL_EVERY).await;
            }
        });
    }
    tokio::spawn(async move {
        let _watcher = watcher; // watching while the worker runs
        let mut last_pass = Instant::now() - POLL_EVERY;
        let mut seen = u64::MAX; // the first round passes
        loop {
            let event = tokio::time::timeout(CHECK_EVERY, rx.recv()).await;
            if matches!(event, Ok(None)) {
                return; // the watcher is gone
            }
            // A burst of events (a folder tool writing a file in pieces) is one pass.
            while rx.try_recv().is_ok() {}
            let logged = store.sync().logged_changes();
            if event.is_err() && logged == seen && last_pass.elapsed() < POLL_EVERY {
                continue;
            }
            seen = logged;
            last_pass = Instant::now();
            let s = store.clone();
            match tokio::task::spawn_blocking(move || s.sync().sync_folder()).await {
                Ok(Ok(r)) if r.written_segments + r.applied_segments > 0 => tracing::info!(
                    written = r.written_changes,
                    applied = r.applied.applied,
                    conflicts = r.applied.conflicts,
                    "sync pass"
                ),
                Ok(Ok(r)) => {
                    for p in r.peers.iter().filter(|p| p.error.is_some()) {
                        tracing::warn!(device = %p.device_id, error = p.error.as_deref().unwrap_or(""), "sync refused a segment");
                    }
                }
                Ok(Err(e)) => tracing::warn!(error = %e.chain(), "sync pass failed; retrying"),
                Err(e) => tracing::warn!(error = %e, "sync pass stopped"),
            }
        }
    });
    Ok(())
}
