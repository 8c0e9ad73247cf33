//! The index snapshot of a store: `<data_dir>/indexes.snapshot`, the catalog, BM25 lexicon and
//! context-expanded postings of every space as they stood when the store last closed, so that an open reads
//! them in one pass instead of rebuilding them from every memory record and posting (at 1M memories: catalog
//! 2.3 s and postings 4.9 s of a 9.7 s load on this 2-core machine, `benches/synthetic.rs --store`).
//!
//! * **Written** when the store closes, if anything was committed since the snapshot it holds: streamed to a
//!   temporary file (no copy of it in memory), flushed and renamed over the old one. Then a durable commit sets `META.index_snapshot` to the file's
//!   random token.
//! * **Invalidated** by every later commit: [`super::write::Writes`] unsets `META.index_snapshot` in each write
//!   transaction. A snapshot is used only when the file's token equals the one in META, so it reflects exactly
//!   the committed state (a crash after a write, a store file restored from a backup, or a copy of the file
//!   without its snapshot all fall back to the full load).
//! * **Validated** completely before use: CRC-32 of the whole file, magic, snapshot version, store format
//!   version ([`crate::store::core::upgrade::FORMAT_VERSION`]) and the crate version that wrote it (the catalog's
//!   encoding is Rust's own), sorted posting lists. A file that fails any check is deleted; it never stops an
//!   open. The own texts of the context-expanded postings are the exception: they stay in their encoding
//!   until a background thread started by the open, or a write before it, decodes them
//!   ([`ExpandedIndex::read_from`]), and are checked then. Own texts that
//!   fail (which the CRC-32 leaves to a bug of the writer) mark the space's expanded postings damaged: the
//!   write's end rebuilds them, and the next close writes the snapshot again.
//! * **On PostgreSQL** (several daemons write; their indexes follow the change feed) each daemon keeps its own,
//!   `<data_dir>/indexes-<store id>.snapshot` ([`shared_path`]; the random store id is in META, so a data
//!   directory pointed at another database never uses it), with its feed position as the token. It is written
//!   at close when the position moved ([`save_shared`]) and used at open when the feed still holds every entry
//!   after it ([`load_shared`]); the daemon then catches up from that position.
//!
//! Layout (little-endian): `b"EGRMSNAP"`, u32 snapshot version, u32 store format version, u32 length and the
//! crate version, u64 token, u32 space count; per space a u32 length and its UTF-8 name, a u64 document count
//! and per document a u32 length and the postcard encoding of its `(docno, DocMeta)`, and its lexicon
//! ([`crate::index::lexicon::Lexicon::write_to`]), then a byte 1 and its context-expanded postings
//! ([`crate::index::context::ExpandedIndex::write_to`]) when the space has sequences, else a byte 0; then the
//! CRC-32 (IEEE) of everything before it. About 16 bytes per posting, 40 to 80 bytes per memory, and about 5
//! bytes per expanded posting (at 1,000,000 memories in threads: 33M expanded postings, their build at open
//! 4.1-4.9 s without them).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::indexes::IndexState;
use crate::index::bytes::Reader;
use crate::index::catalog::{DocMeta, SpaceCatalog};
use crate::index::context::ExpandedIndex;
use crate::index::lexicon::Lexicon;
use crate::storage::Db;
use crate::storage::crypt::SideFiles;
use crate::store::records::meta;

const MAGIC: &[u8; 8] = b"EGRMSNAP";
/// 2: the context-expanded postings of spaces with sequences follow each lexicon. 3: catalog entries carry
/// `DocMeta::question`. 4: expanded postings without the document's own tf and length.
const VERSION: u32 = 4;
/// The META key holding the token of the snapshot that matches the committed state.
use meta::INDEX_SNAPSHOT as TOKEN_KEY;

/// The snapshot file of the store in `data_dir`.
pub(crate) fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("indexes.snapshot")
}

/// The catalog and lexicon of one space.
pub(crate) struct SpaceSnapshot {
    pub name: String,
    pub catalog: SpaceCatalog,
    pub lexicon: Lexicon,
    /// The context-expanded postings, when the space had them (it has sequences).
    pub expanded: Option<ExpandedIndex>,
}

/// The snapshot file of a daemon on the shared (PostgreSQL) store whose id is `store_id`, in its data
/// directory `data_dir`: the id in the name keeps a data directory moved to another database from using it.
pub(crate) fn shared_path(data_dir: &Path, store_id: u64) -> PathBuf {
    data_dir.join(format!("indexes-{store_id:016x}.snapshot"))
}

/// The token in the header of the file at `path` (the header only; the rest is checked by [`load`]): on a
/// shared store, the feed position it was written at.
pub(crate) fn position_of(path: &Path, side: &SideFiles) -> Option<u64> {
    use std::io::Read;
    let mut f = side.reader(path).ok()?;
    let mut head = [0u8; 20];
    if f.read_exact(&mut head).is_err() || &head[..8] != MAGIC {
        return None;
    }
    let mut r = Reader::new(&head[16..]);
    let n = r.u32().ok().filter(|n| *n <= 256)?;
    let mut rest = vec![0u8; n as usize + 8];
    f.read_exact(&mut rest).ok()?;
    let mut r = Reader::new(&rest[n as usize..]);
    r.u64().ok()
}

/// Whether the file at `path` holds the snapshot of token `token` (its header only) and `state` has no damaged
/// expanded postings: a damaged list came from the file held, which is then written again without it.
fn current(path: &Path, state: &IndexState, token: u64, side: &SideFiles) -> bool {
    let damaged = state.spaces.values().any(|si| si.expanded.as_ref().is_some_and(ExpandedIndex::is_damaged));
    !damaged && position_of(path, side) == Some(token)
}

/// The snapshot of a daemon on a shared store, at `file`, when the change feed still holds every entry after the
/// position it was written at: `(spaces, position)`. The caller sets its feed position there and catches up.
/// A file whose position the feed no longer covers (pruned, or past the feed's head: another database, or one
/// restored from an older backup) is deleted, as is one that fails validation.
pub(crate) fn load_shared(file: &Path, pruned: u64, head: u64) -> Option<(Vec<SpaceSnapshot>, u64)> {
    // A shared (PostgreSQL) store is never encrypted at rest by Engram: its snapshot is plain.
    let position = position_of(file, &SideFiles::default())?;
    if position < pruned || position > head {
        tracing::info!(position, pruned, head, "index snapshot not used: the change feed no longer covers it");
        let _ = std::fs::remove_file(file);
        return None;
    }
    load(file, Some(position), &SideFiles::default()).map(|s| (s, position))
}

/// Writes the snapshot of a daemon on a shared store (its indexes at change-feed `position`) to `file`, unless
/// the file already holds that position. Returns whether a file was written. Call only when the indexes
/// cannot change (the feed worker is stopped and the store is closing).
///
/// # Errors
/// I/O errors writing the file.
pub(crate) fn save_shared(file: &Path, state: &IndexState, position: u64) -> crate::Result<bool> {
    let plain = SideFiles::default();
    if current(file, state, position, &plain) {
        return Ok(false);
    }
    let bytes = write_file(file, state, position, &plain)?;
    tracing::info!(bytes, position, "index snapshot saved");
    Ok(true)
}

/// Writes the snapshot of `state` when the committed state has none. Returns the token of the file written,
/// which the caller records (`META.index_snapshot`) in a durable commit: until then the file matches nothing.
/// Call only when no other write can run (the store is closing).
///
/// # Errors
/// Storage errors reading the token; I/O errors writing the file (the store is unaffected: the next open loads
/// from the tables).
pub(crate) fn save(db: &Db, file: &Path, state: &IndexState, side: &SideFiles) -> crate::Result<Option<u64>> {
    if db.shared() {
        return Ok(None);
    }
    let current = meta::meta(&db.read()?)?.u64(TOKEN_KEY)?;
    if current.is_some_and(|t| self::current(file, state, t, side)) {
        return Ok(None);
    }
    let token = uuid::Uuid::new_v4().as_u64_pair().0;
    let bytes = write_file(file, state, token, side)?;
    tracing::info!(bytes, "index snapshot written");
    Ok(Some(token))
}

/// Streams the snapshot of `state` with `token` to a temporary file beside `file` (sealed to the store's key when
/// it is encrypted), flushes it and renames it over `file`. Returns its size in bytes before sealing.
fn write_file(file: &Path, state: &IndexState, token: u64, side: &SideFiles) -> crate::Result<u64> {
    let tmp = file.with_extension("snapshot.tmp");
    let bytes = {
        let mut w = Summed { inner: side.create(&tmp)?, crc: crc32fast::Hasher::new(), bytes: 0 };
        encode(state, token, &mut w)?;
        let (sum, bytes) = (w.crc.clone().finalize(), w.bytes + 4);
        let mut inner = w.inner;
        inner.write_all(&sum.to_le_bytes())?;
        inner.finish()?.sync_all()?;
        bytes
    };
    std::fs::rename(&tmp, file)?;
    if let Some(d) = file.parent().and_then(|d| std::fs::File::open(d).ok()) {
        let _ = d.sync_all();
    }
    Ok(bytes)
}

/// A writer that keeps the CRC-32 and the count of the bytes written through it.
struct Summed<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
    bytes: u64,
}

impl<W: Write> Write for Summed<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(b)?;
        self.crc.update(&b[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the snapshot of `state` (all but the trailing CRC) to `out`, streaming: no copy of the whole file in
/// memory.
fn encode(state: &IndexState, token: u64, out: &mut impl Write) -> crate::Result<()> {
    out.write_all(MAGIC)?;
    out.write_all(&VERSION.to_le_bytes())?;
    out.write_all(&crate::store::core::upgrade::FORMAT_VERSION.to_le_bytes())?;
    let build = env!("CARGO_PKG_VERSION");
    out.write_all(&(build.len() as u32).to_le_bytes())?;
    out.write_all(build.as_bytes())?;
    out.write_all(&token.to_le_bytes())?;
    let mut names: Vec<&String> = state.spaces.keys().collect();
    names.sort();
    out.write_all(&(names.len() as u32).to_le_bytes())?;
    for name in names {
        let si = &state.spaces[name];
        out.write_all(&(name.len() as u32).to_le_bytes())?;
        out.write_all(name.as_bytes())?;
        out.write_all(&(si.catalog.len() as u64).to_le_bytes())?;
        for doc in si.catalog.iter() {
            let item = crate::storage::codec::snapshot_section(&doc)?;
            out.write_all(&(item.len() as u32).to_le_bytes())?;
            out.write_all(&item)?;
        }
        si.lexicon.write_to(out)?;
        match si.expanded.as_ref().filter(|x| !x.is_damaged()) {
            Some(x) => {
                out.write_all(&[1])?;
                x.write_to(out)?;
            }
            None => out.write_all(&[0])?,
        }
    }
    Ok(())
}

/// The snapshot at `file` when it matches `token` (the committed state's, from META); None otherwise, after
/// deleting a file that does not match or fails validation (the caller loads from the tables).
pub(crate) fn load(file: &Path, token: Option<u64>, side: &SideFiles) -> Option<Vec<SpaceSnapshot>> {
    let started = std::time::Instant::now();
    if !file.exists() {
        return None;
    }
    let bytes = match side.read(file) {
        Ok(b) => b,
        Err(e) => {
            tracing::info!(error = %e, "index snapshot not readable; loading the indexes from the store");
            let _ = std::fs::remove_file(file);
            return None;
        }
    };
    tracing::debug!(bytes = bytes.len(), ms = started.elapsed().as_secs_f64() * 1000.0, "index snapshot read");
    let result = match token {
        None => Err("the store changed after it was written".to_string()),
        Some(t) => decode(&bytes, t),
    };
    match result {
        Ok(spaces) => Some(spaces),
        Err(why) => {
            tracing::info!(%why, "index snapshot not used; loading the indexes from the store");
            let _ = std::fs::remove_file(file);
            None
        }
    }
}

fn decode(bytes: &[u8], token: u64) -> Result<Vec<SpaceSnapshot>, String> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(4).ok_or("truncated file")?).ok_or("truncated")?;
    let started = std::time::Instant::now();
    let lap =
        |phase: &str| tracing::debug!(phase, ms = started.elapsed().as_secs_f64() * 1000.0, "index snapshot decode");
    if crc32fast::hash(body).to_le_bytes() != sum {
        return Err("checksum mismatch".into());
    }
    lap("checksum");
    let mut r = Reader::new(body);
    if r.take(8)? != MAGIC {
        return Err("not an Engram index snapshot".into());
    }
    let (version, format) = (r.u32()?, r.u32()?);
    if version != VERSION || format != crate::store::core::upgrade::FORMAT_VERSION {
        return Err(format!("snapshot version {version}, store format {format}"));
    }
    let n = r.u32()? as usize;
    let build = r.take(n)?;
    if build != env!("CARGO_PKG_VERSION").as_bytes() {
        return Err(format!("written by Engram {}", String::from_utf8_lossy(build)));
    }
    if r.u64()? != token {
        return Err("the store changed after it was written".into());
    }
    let spaces = r.u32()? as usize;
    let mut out = Vec::with_capacity(spaces.min(1024));
    for _ in 0..spaces {
        let n = r.u32()? as usize;
        let name = std::str::from_utf8(r.take(n)?).map_err(|_| "space name not UTF-8")?.to_string();
        let docs = r.u64()?;
        // Each entry takes at least 5 bytes: a larger count is damage, not a reason to allocate.
        let mut items = Vec::with_capacity(usize::try_from(docs).unwrap_or(usize::MAX).min(r.left() / 5));
        for _ in 0..docs {
            let n = r.u32()? as usize;
            items.push(r.take(n)?);
        }
        lap("catalog entries split");
        let entries = {
            use rayon::prelude::*;
            items
                .into_par_iter()
                .map(crate::storage::codec::from_snapshot_section::<(u64, DocMeta)>)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("catalog: {e}"))?
        };
        lap("catalog entries decoded");
        let catalog = SpaceCatalog::from_entries(entries).map_err(|e| format!("catalog: {e}"))?;
        lap("catalog");
        let lexicon = Lexicon::read_from(&mut r)?;
        lap("lexicon");
        let expanded = match r.take(1)? {
            [0] => None,
            [1] => Some(ExpandedIndex::read_from(&mut r).map_err(|e| format!("expanded postings: {e}"))?),
            _ => return Err("bad expanded-postings flag".into()),
        };
        lap("expanded postings");
        out.push(SpaceSnapshot { name, catalog, lexicon, expanded });
    }
    if !r.done() {
        return Err("trailing bytes".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::context::put_doc;
    use crate::index::lexicon::analyse;
    use crate::model::{Memory, Metadata, Timestamp};
    use crate::store::core::indexes::SpaceIndex;

    /// A space of two threads and a plain memory, its expanded postings built.
    fn state() -> IndexState {
        let mut si = SpaceIndex::empty(8, Default::default(), 1);
        for (i, text) in
            ["red apples", "green apples and pears", "ripe red pears", "apples", "a plain note"].iter().enumerate()
        {
            let docno = i as u64 + 1;
            let mut m = Memory::with_defaults(format!("m{docno}"), "s".into(), (*text).into(), Timestamp(0));
            if i < 4 {
                m.source_thread_id = Some(format!("t{}", i / 2));
                m.metadata = Metadata(
                    serde_json::json!({"source_message_indices": [i % 2]}).as_object().cloned().unwrap_or_default(),
                );
            }
            let (tf, len) = analyse(text);
            si.refresh_expanded();
            put_doc(
                &mut si.catalog,
                &mut si.lexicon,
                si.expanded.as_mut(),
                docno,
                DocMeta::of(&m, Default::default()),
                Some((&tf, len)),
            );
        }
        si.refresh_expanded();
        IndexState { spaces: [("s".to_string(), si)].into() }
    }

    #[test]
    fn the_expanded_postings_come_back_from_the_snapshot() {
        let state = state();
        let x = state.spaces["s"].expanded.as_ref().expect("built: the space has threads");
        let mut bytes = Vec::new();
        encode(&state, 7, &mut bytes).unwrap();
        bytes.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
        let spaces = decode(&bytes, 7).unwrap();
        let back = spaces[0].expanded.as_ref().expect("the expanded postings are in the snapshot");
        assert_eq!((back.postings(), back.window(), back.total_len), (x.postings(), 1, x.total_len));
        assert!(x.postings() > 10);
        assert_eq!(spaces[0].lexicon.docs, 5);
        assert_eq!(decode(&bytes, 8).err().as_deref(), Some("the store changed after it was written"));
        let last = bytes.len() - 6;
        bytes[last] ^= 1;
        assert_eq!(decode(&bytes, 7).err().as_deref(), Some("checksum mismatch"));
    }

    #[test]
    fn a_damaged_expanded_index_is_left_out_of_the_snapshot_and_rebuilt_at_the_next_write() {
        let mut state = state();
        let si = state.spaces.get_mut("s").unwrap();
        let good = si.expanded.as_ref().unwrap().postings();
        si.expanded.as_mut().unwrap().damage();
        let mut bytes = Vec::new();
        encode(&state, 7, &mut bytes).unwrap();
        bytes.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
        let spaces = decode(&bytes, 7).unwrap();
        assert!(spaces[0].expanded.is_none(), "built again at open");
        let si = state.spaces.get_mut("s").unwrap();
        si.refresh_expanded();
        let x = si.expanded.as_ref().unwrap();
        assert!(!x.is_damaged());
        assert_eq!(x.postings(), good);
    }
}
