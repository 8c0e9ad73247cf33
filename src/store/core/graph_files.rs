//! Saved HNSW graphs: `<data_dir>/hnsw/<first 32 hex digits of SHA-256(space name)>.graph`, one per space, in
//! the format of [`crate::index::hnsw::Hnsw::to_bytes`] (links, levels, document numbers and the vectors of
//! tombstones; live vectors stay in the store file only).
//!
//! * Saved by the graph builder after each full build and for every changed graph when the store closes,
//!   written to a temporary file, flushed and renamed over the old one (a crash leaves the old or the new file,
//!   never a mix).
//! * Each records the store generation it reflects (the next document number when it was saved) and the
//!   embedder name. At open, [`GraphFiles::stage_all`] validates a file completely (checksum, bounds, embedder, generation)
//!   before using it and catches up from that generation: vectors written later are pending and inserted by the
//!   builder. A missing, stale, truncated or damaged file is deleted and the builder rebuilds that graph; it is
//!   never trusted and never stops the open.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::storage::crypt::SideFiles;

use super::indexes::SpaceIndex;
use crate::store::records::meta;

/// Where the graphs of a store live, what they must match, and how they are sealed (an encrypted store's
/// graphs are age files to its key, [`SideFiles`]).
#[derive(Clone)]
pub(crate) struct GraphFiles {
    pub dir: PathBuf,
    pub embedder: String,
    pub side: SideFiles,
}

impl GraphFiles {
    pub fn new(data_dir: &Path, embedder: &str, side: SideFiles) -> Self {
        GraphFiles { dir: data_dir.join("hnsw"), embedder: embedder.to_string(), side }
    }

    /// The file of `space` (the name is hashed: no space name can reach outside the directory).
    pub fn path(&self, space: &str) -> PathBuf {
        let digest = Sha256::digest(space.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{hex}.graph"))
    }

    /// Saves the graph of `space` if it changed since its last save. Errors are logged: the graph is a cache.
    pub fn save(&self, db: &crate::storage::Db, space: &str, si: &SpaceIndex) {
        let generation = match generation(db) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(space, error = %e, "graph not saved: could not read the store generation");
                return;
            }
        };
        let Some((bytes, changes)) = si.vectors.graph_bytes(generation, &self.embedder) else { return };
        match self.write(space, &bytes) {
            Ok(()) => {
                si.vectors.mark_saved(changes);
                tracing::debug!(space, bytes = bytes.len(), generation, "HNSW graph saved");
            }
            Err(e) => tracing::warn!(space, error = %e, "HNSW graph not saved; it is rebuilt at the next open"),
        }
    }

    fn write(&self, space: &str, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path(space);
        // A name of its own: the builder and a publication may save one graph at the same time.
        let tmp = path.with_extension(format!("graph.{:016x}.tmp", uuid::Uuid::new_v4().as_u64_pair().0));
        {
            let mut f = self.side.create(&tmp)?;
            f.write_all(bytes)?;
            f.finish()?.sync_all()?;
        }
        std::fs::rename(&tmp, &path)?;
        if let Ok(d) = std::fs::File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Stages the saved graph of every space in `spaces` (before their vectors are loaded, so that the vectors
    /// go straight into the graphs); deletes files that fail validation and files of spaces that no longer exist.
    pub fn stage_all(&self, db: &crate::storage::Db, spaces: &mut HashMap<String, SpaceIndex>) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let generation = generation(db).unwrap_or(0);
        let by_path: HashMap<PathBuf, String> = spaces.keys().map(|n| (self.path(n), n.clone())).collect();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(space) = by_path.get(&path) else {
                if path.extension().is_some_and(|e| e == "graph" || e == "tmp") {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            };
            let Some(si) = spaces.get_mut(space) else { continue };
            let result = self
                .side
                .read(&path)
                .map_err(|e| e.to_string())
                .and_then(|b| si.vectors.stage_attach(&b, &self.embedder, generation));
            if let Err(why) = result {
                tracing::warn!(space, %why, "saved HNSW graph not used; it is rebuilt in the background");
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Installs the graphs staged by [`GraphFiles::stage_all`] once the vectors are loaded.
    pub fn finish_all(&self, spaces: &mut HashMap<String, SpaceIndex>) {
        for (space, si) in spaces.iter_mut() {
            match si.vectors.finish_attach() {
                Ok(stats) if stats.points > 0 => tracing::info!(
                    space,
                    points = stats.points,
                    live = stats.live,
                    catch_up = stats.pending,
                    "saved HNSW graph attached"
                ),
                Ok(_) => {}
                Err(why) => {
                    tracing::warn!(space, %why, "saved HNSW graph not used; it is rebuilt in the background");
                    let _ = std::fs::remove_file(self.path(space));
                }
            }
        }
    }
}

/// The store generation a graph reflects: the next document number to be allocated.
pub(crate) fn generation(db: &crate::storage::Db) -> crate::error::Result<u64> {
    let rtx = db.read()?;
    Ok(meta::meta(&rtx)?.u64("next_docno")?.unwrap_or(1))
}
