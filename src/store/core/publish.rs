//! The index snapshot published into a shared (PostgreSQL) database, so that a daemon that starts with an empty
//! data directory, or with a snapshot of its own that the change feed no longer covers, downloads the catalog,
//! BM25 lexicon, context-expanded postings and HNSW graphs instead of reading every table and building its
//! graphs (at 1M memories: 91.6 s and about 7 minutes, `docs/deploy.md`, "Restarting a daemon").
//!
//! * **What.** The daemon's own snapshot file ([`super::snapshot::save_shared`], at its feed position) and the
//!   saved graph of every space that has one ([`super::graph_files`]), under the names `indexes.snapshot` and
//!   `hnsw/<32 hex digits>.graph` (`storage/postgres/publish.rs` holds them in parts).
//! * **When.** The feed worker checks every minute ([`Feed::maybe_publish`]): a daemon whose graphs are complete
//!   publishes when no publication exists, or when the one there is older than [`REPUBLISH_SECS`] and behind the
//!   daemon's position. Claimed (`Db::claim("publish")`), so one daemon publishes at a time.
//!   [`Admin::publish_indexes`](crate::store::Admin::publish_indexes) publishes at once.
//! * **The feed.** Its entries after the publication's position are kept (up to a day) when older than the
//!   feed's ten minutes, so a publication stays usable until the next.
//! * **Taken** at open ([`take`]): downloaded into the data directory as if the daemon had written it, then
//!   validated and caught up exactly like its own (CRC-32, versions, feed coverage, graph checks).

use std::path::{Path, PathBuf};

use super::feed::Feed;
use super::graph_files::GraphFiles;
use crate::error::Result;
use crate::storage::Db;

/// The name of the snapshot file in a publication.
const SNAPSHOT_NAME: &str = "indexes.snapshot";

/// Seconds a publication stays current while the feed moves past it (the feed's retention, ten minutes): then a
/// daemon publishes again.
pub(crate) const REPUBLISH_SECS: f64 = 600.0;

/// What [`Admin::publish_indexes`](crate::store::Admin::publish_indexes) published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishedIndexes {
    /// The change-feed position the published indexes reflect.
    pub position: u64,
    /// Files published: the snapshot and one HNSW graph per space that has one.
    pub files: usize,
    /// Their total size, in bytes.
    pub bytes: u64,
}

impl super::Core {
    /// Publishes this daemon's indexes into its PostgreSQL database now, for daemons that start without a
    /// snapshot of their own (the feed worker also does it every ten minutes of writes, once the HNSW graphs are
    /// complete; see the module docs of `store/core/publish.rs` and `docs/deploy.md`). `Ok(None)` on a redb store and
    /// when another daemon is publishing at the moment.
    ///
    /// # Errors
    /// Storage errors and I/O errors writing the snapshot or graph files in the data directory; the publication
    /// before stays in the database.
    pub(crate) fn publish_indexes(&self) -> Result<Option<PublishedIndexes>> {
        match self.snapshot_file() {
            Some(file) if self.db.shared() => self.feed.publish_indexes(file),
            _ => Ok(None),
        }
    }
}

impl Feed {
    /// Publishes this daemon's indexes at its feed position: writes its snapshot file `file` and its changed
    /// graphs, then puts them into the database. `None` when another daemon is publishing.
    ///
    /// Holds the feed position (entries wait) and a read lock on the indexes while the snapshot is written
    /// (about 2 s at 1M memories), not while it is sent.
    ///
    /// # Errors
    /// Storage and I/O errors; the publication before stays.
    pub(crate) fn publish_indexes(&self, file: &Path) -> Result<Option<PublishedIndexes>> {
        let Some(_claim) = self.db.claim("publish")? else { return Ok(None) };
        let (position, mut files) = {
            let position = self.position.lock();
            let state = self.index.read();
            super::snapshot::save_shared(file, &state, *position)?;
            let mut graphs = Vec::new();
            for (space, si) in &state.spaces {
                if !si.vectors.has_graph() {
                    continue;
                }
                self.graph_files.save(&self.db, space, si);
                let path = self.graph_files.path(space);
                if let Some(name) = path.file_name().and_then(|n| n.to_str())
                    && path.exists()
                {
                    graphs.push((format!("hnsw/{name}"), path.clone()));
                }
            }
            (*position, graphs)
        };
        files.sort();
        files.insert(0, (SNAPSHOT_NAME.to_string(), file.to_path_buf()));
        let started = std::time::Instant::now();
        let bytes = self.db.publish(position, &files)?;
        tracing::info!(
            position,
            files = files.len(),
            bytes,
            secs = started.elapsed().as_secs_f64(),
            "index snapshot published"
        );
        Ok(Some(PublishedIndexes { position, files: files.len(), bytes }))
    }

    /// Publishes when this daemon's graphs are complete and the database holds no publication, or one older
    /// than [`REPUBLISH_SECS`] behind this daemon's position. Failures are logged: the next check tries again.
    pub(crate) fn maybe_publish(&self, file: &Path) {
        if self.index.read().spaces.values().any(|si| si.vectors.needs_work()) {
            return;
        }
        let position = *self.position.lock();
        if position == 0 {
            return;
        }
        match self.db.publication() {
            Ok(Some(p)) if p.position >= position || p.age_secs < REPUBLISH_SECS => return,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e.chain(), "reading the publication failed");
                return;
            }
        }
        if let Err(e) = self.publish_indexes(file) {
            tracing::warn!(error = %e.chain(), "publishing the index snapshot failed; retrying in a minute");
        }
    }
}

/// Takes the published snapshot into the data directory (the caller found this daemon's own snapshot `file`
/// missing, or not covered by the feed): the snapshot to `file`, the graphs to `graphs`' directory. Returns
/// whether a snapshot was taken; it is then validated and used as the daemon's own
/// ([`super::snapshot::load_shared`], [`GraphFiles::stage_all`]). Failures are logged and leave the tables to
/// be read.
pub(crate) fn take(db: &Db, file: &Path, graphs: &GraphFiles) -> bool {
    let started = std::time::Instant::now();
    let place = |name: &str| -> Option<PathBuf> {
        if name == SNAPSHOT_NAME {
            return Some(file.to_path_buf());
        }
        // `hnsw/` and 32 hex digits: nothing else is ever written, so no name reaches outside the directory.
        let hex = name.strip_prefix("hnsw/")?.strip_suffix(".graph")?;
        (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| graphs.dir.join(format!("{hex}.graph")))
    };
    match db.fetch_publication(&place) {
        Ok(Some((position, written))) => {
            let taken = written.iter().any(|p| p == file);
            tracing::info!(
                position,
                files = written.len(),
                secs = started.elapsed().as_secs_f64(),
                "published index snapshot downloaded"
            );
            taken
        }
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(error = %e.chain(), "downloading the published index snapshot failed; reading the tables");
            false
        }
    }
}
