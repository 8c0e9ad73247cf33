//! The daemon's sync worker (`engram serve --sync`; docs/sync.md): one pass of
//! [`SyncService::sync_folder`](crate::store::SyncService::sync_folder) whenever the shared folder changes
//! (watched with the `notify` crate: inotify, FSEvents, ReadDirectoryChangesW) or this device has changes not
//! yet written, and at least every [`POLL_EVERY`] (for folders a watcher cannot see into, such as some network
//! shares). Between passes it sleeps on its channel: no busy polling. Ends with the runtime.

use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::Watcher;

use crate::error::{Error, ErrorKind, Result};
use crate::store::KnowledgeStore;

/// How often the worker looks for this device's own new changes (an in-memory counter; no transaction).
pub const CHECK_EVERY: Duration = Duration::from_millis(250);
/// The longest the worker goes without reading the folder, events or not.
pub const POLL_EVERY: Duration = Duration::from_secs(15);

/// Starts the worker on `store`, whose sync group must have a folder.
///
/// # Errors
/// [`ErrorKind::InvalidInput`] when the store is in no sync group with a folder (`engram sync init` or `join`
/// first) or on PostgreSQL; [`ErrorKind::Io`] when the folder cannot be watched.
pub fn start(store: Arc<KnowledgeStore>) -> Result<()> {
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
        }
    })
    .map_err(|e| Error::new(ErrorKind::Io, format!("watching {}: {e}", folder.display())))?;
    watcher
        .watch(&folder, notify::RecursiveMode::Recursive)
        .map_err(|e| Error::new(ErrorKind::Io, format!("watching {}: {e}", folder.display())))?;
    tracing::info!(folder = %folder.display(), "sync worker started");
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
