//! Memories (`memories`, `memory_space`) and their index records (`vectors`, `postings`, `lex_stats`): the
//! record types with their versions, and the only place these kinds are opened.

use serde::{Deserialize, Serialize};

use super::{Bytes, K1, K2, KN, Opened, Records, Tx};
use crate::error::Result;
use crate::model::{Memory, MemoryState, Metadata, TemporalContext, Timestamp, UnitType};
use crate::storage::codec::{Versioned, postcard_body, vector_decode_into_half, vector_from_bytes, vector_to_bytes};
use crate::storage::tables::{LEX_STATS, MEMORIES, MEMORY_SPACE, POSTINGS, VECTORS};
use crate::storage::{Readable, Table, WriteTx};

/// A stored memory (`memories` table, version 2): its document number (the id of its current text in the
/// indexes) and the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredMemory {
    pub docno: u64,
    pub memory: Memory,
}

impl Versioned for StoredMemory {
    const VERSION: u8 = 2;

    fn upgrade(version: u8, body: &[u8]) -> Result<Self> {
        match version {
            1 => Ok(postcard_body::<StoredMemoryV1>(body)?.into()),
            v => Err(crate::error::Error::new(
                crate::error::ErrorKind::Corrupt,
                format!("unknown memory record version {v}"),
            )),
        }
    }
}

/// Version 1 of [`StoredMemory`] (format 1), frozen: the layout stores written before format 2 hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredMemoryV1 {
    pub docno: u64,
    pub memory: MemoryV1,
}

/// [`Memory`] as format 1 stored it: every field but `expires_at`, in the same order. Never changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub(crate) struct MemoryV1 {
    pub id: String,
    pub node_type: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub metadata: Metadata,
    pub content: String,
    pub title: String,
    pub importance: f64,
    pub confidence: f64,
    pub pagerank_score: f64,
    pub source_range: std::collections::BTreeMap<String, f64>,
    pub source: String,
    pub space_id: String,
    pub semantic_field: String,
    pub reindex_needed: bool,
    pub last_reindexed_at: Option<Timestamp>,
    pub last_accessed_at: Option<Timestamp>,
    pub last_clicked_at: Option<Timestamp>,
    pub last_evaluated_at: Option<Timestamp>,
    pub access_count: i64,
    pub appearances: i64,
    pub clicks: i64,
    pub total_dwell_time_ms: i64,
    pub decay_score_cached: f64,
    pub temporal_context: TemporalContext,
    pub temporal_type: Option<String>,
    pub event_start: Option<String>,
    pub event_end: Option<String>,
    pub temporal_precision: Option<String>,
    pub temporal_confidence: Option<f64>,
    pub unit_type: UnitType,
    pub is_latest: bool,
    pub version: i64,
    pub is_crystal: bool,
    pub crystal_title: Option<String>,
    pub source_unit_count: Option<i64>,
    pub extraction_method: String,
    pub review_status: String,
    pub state: MemoryState,
    pub is_favorite: bool,
    pub source_thread_id: Option<String>,
    pub source_message_id: Option<String>,
}

impl StoredMemoryV1 {
    /// The version-1 bytes (version byte and postcard) of `sm` as format 1 would have stored it, without
    /// `expires_at`. Built through JSON, field by field by name, so it shares nothing with the upgrade's
    /// mapping below: for tests and `upgrade::downgrade_to_format_1` only.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Internal`] when the record does not convert (it always does).
    pub(crate) fn bytes_of(sm: &StoredMemory) -> Result<Vec<u8>> {
        let internal =
            |e: &dyn std::fmt::Display| crate::error::Error::new(crate::error::ErrorKind::Internal, e.to_string());
        let mut json = serde_json::to_value(&sm.memory).map_err(|e| internal(&e))?;
        if let Some(o) = json.as_object_mut() {
            o.remove("expires_at");
        }
        let memory: MemoryV1 = serde_json::from_value(json).map_err(|e| internal(&e))?;
        let mut out = vec![1u8];
        out.extend(postcard::to_allocvec(&StoredMemoryV1 { docno: sm.docno, memory }).map_err(|e| internal(&e))?);
        Ok(out)
    }
}

impl From<StoredMemoryV1> for StoredMemory {
    /// Every field kept; `expires_at` none (format 1 had no expiry).
    fn from(old: StoredMemoryV1) -> Self {
        let m = old.memory;
        StoredMemory {
            docno: old.docno,
            memory: Memory {
                id: m.id,
                node_type: m.node_type,
                created_at: m.created_at,
                updated_at: m.updated_at,
                metadata: m.metadata,
                content: m.content,
                title: m.title,
                importance: m.importance,
                confidence: m.confidence,
                pagerank_score: m.pagerank_score,
                source_range: m.source_range,
                source: m.source,
                space_id: m.space_id,
                semantic_field: m.semantic_field,
                reindex_needed: m.reindex_needed,
                last_reindexed_at: m.last_reindexed_at,
                last_accessed_at: m.last_accessed_at,
                last_clicked_at: m.last_clicked_at,
                last_evaluated_at: m.last_evaluated_at,
                access_count: m.access_count,
                appearances: m.appearances,
                clicks: m.clicks,
                total_dwell_time_ms: m.total_dwell_time_ms,
                decay_score_cached: m.decay_score_cached,
                temporal_context: m.temporal_context,
                temporal_type: m.temporal_type,
                event_start: m.event_start,
                event_end: m.event_end,
                temporal_precision: m.temporal_precision,
                temporal_confidence: m.temporal_confidence,
                unit_type: m.unit_type,
                is_latest: m.is_latest,
                version: m.version,
                is_crystal: m.is_crystal,
                crystal_title: m.crystal_title,
                source_unit_count: m.source_unit_count,
                extraction_method: m.extraction_method,
                review_status: m.review_status,
                state: m.state,
                is_favorite: m.is_favorite,
                source_thread_id: m.source_thread_id,
                source_message_id: m.source_message_id,
                expires_at: None,
            },
        }
    }
}

/// An embedding as stored in `vectors`: `f32`s in memory; half precision on disk
/// ([`crate::storage::codec::vector_to_bytes`], `1 + 2 x dim` bytes; format-1 stores hold untagged `f32`s).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Vector(pub Vec<f32>);

impl super::Codec for Vector {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(vector_to_bytes(&self.0))
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Ok(Vector(vector_from_bytes(bytes)))
    }
}

impl Vector {
    /// The vector as it reads back after storing: each component rounded to half precision.
    pub(crate) fn as_stored(v: &[f32]) -> Vec<f32> {
        vector_from_bytes(&vector_to_bytes(v))
    }
}

/// The memory records of a transaction, whatever its table type (`Records` over `T`).
pub(crate) type MemoryRecords<T> = Records<T, K2, StoredMemory>;

/// `(space id, memory id)` -> [`StoredMemory`].
///
/// # Errors
/// Storage errors.
pub(crate) fn memories<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, StoredMemory>> {
    super::records(tx, MEMORIES)
}

/// memory id -> space id (ids are unique across spaces; a read by id needs no space).
///
/// # Errors
/// Storage errors.
pub(crate) fn memory_space<X: Tx>(tx: &X) -> Result<X::Table<'_, K1, &'static str>> {
    tx.open(MEMORY_SPACE)
}

/// The space of memory `id`, if it exists.
///
/// # Errors
/// Storage errors.
pub(crate) fn space_of<X: Tx>(tx: &X, id: &str) -> Result<Option<String>> {
    super::value_at(&memory_space(tx)?, id, str::to_string)
}

/// `(space id, docno)` -> the memory's embedding.
///
/// # Errors
/// Storage errors.
pub(crate) fn vectors<X: Tx>(tx: &X) -> Result<Opened<'_, X, KN, Vector>> {
    super::records(tx, VECTORS)
}

/// A stored embedding not yet decoded: read straight into its destination (the open reads 1,000,000 of them
/// into a staged HNSW graph with no allocation per vector).
pub(crate) struct StoredVector<'a>(&'a [u8]);

impl StoredVector<'_> {
    /// Decodes into `out` at half precision, as stored; false (nothing written) when the vector has other than
    /// `out.len()` components.
    pub(crate) fn decode_into(&self, out: &mut [half::f16]) -> bool {
        vector_decode_into_half(self.0, out)
    }
}

/// Calls `f(space, docno, vector)` for every stored embedding, in key order (space, then docno), in one read of
/// the kind, without decoding the vectors ([`StoredVector::decode_into`]).
///
/// # Errors
/// Storage errors.
pub(crate) fn each_vector<X: Tx>(tx: &X, mut f: impl FnMut(&str, u64, StoredVector<'_>)) -> Result<()> {
    let table = tx.open(VECTORS)?;
    for row in table.iter()? {
        let (k, v) = row?;
        let (space, docno) = k.value();
        f(space, docno, StoredVector(v.value()));
    }
    Ok(())
}

/// Where a scan of the vector records stands, shared with [`read_vectors_ahead`] on another core: rows passed,
/// the key of every 256th row, and whether the scan ended.
#[derive(Default)]
pub(crate) struct VectorScan {
    rows: std::sync::atomic::AtomicU64,
    /// (rows passed, space, docno) at the last multiple of 256 rows.
    at: parking_lot::Mutex<Option<(u64, String, u64)>>,
    done: std::sync::atomic::AtomicBool,
    /// The row the read-ahead reached (at its last check).
    ahead: std::sync::atomic::AtomicU64,
}

impl VectorScan {
    /// The scan passed the row `(space, docno)`.
    pub(crate) fn passed(&self, space: &str, docno: u64) {
        let n = self.rows.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if n.is_multiple_of(256) {
            *self.at.lock() = Some((n, space.to_string(), docno));
        }
    }

    /// The scan ended (or failed): the read-ahead stops.
    pub(crate) fn finish(&self) {
        self.done.store(true, std::sync::atomic::Ordering::Release);
    }

    fn rows(&self) -> u64 {
        self.rows.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn ended(&self) -> bool {
        self.done.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The row the read-ahead reached.
    #[cfg(test)]
    pub(crate) fn ahead(&self) -> u64 {
        self.ahead.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Reads the vector records ahead of `scan` (at most `window` rows ahead) until it ends, so that the pages it
/// is about to read are already in the page cache. On an encrypted store that moves the decryption of those
/// pages (2.9 µs a 4 KiB page, docs/security.md) off the scan, onto a core that is otherwise idle; it reads
/// nothing the scan does not read next. Starts where the scan stands and starts again there whenever the scan
/// overtakes it. A storage error ends it quietly: the scan reads the same rows and reports it. Returns the
/// farthest it ran ahead, in rows (at most `window` plus 64: the lead is checked every 64 rows).
pub(crate) fn read_vectors_ahead<X: Tx>(tx: &X, scan: &VectorScan, window: u64) -> u64 {
    let mut farthest = 0;
    let Ok(table) = tx.open(VECTORS) else { return farthest };
    while !scan.ended() {
        let at = scan.at.lock().clone();
        let (base, rows) = match &at {
            Some((n, space, docno)) => (*n, table.range((space.as_str(), *docno)..)),
            None => (0, table.iter()),
        };
        let Ok(rows) = rows else { return farthest };
        let mut ahead = base;
        let mut overtaken = false;
        for row in rows {
            if row.is_err() {
                return farthest;
            }
            ahead += 1;
            if !ahead.is_multiple_of(64) {
                continue;
            }
            scan.ahead.store(ahead, std::sync::atomic::Ordering::Relaxed);
            // Wait while far enough ahead; start again from the scan when it passed this point.
            loop {
                if scan.ended() {
                    return farthest;
                }
                let done = scan.rows();
                if done >= ahead {
                    overtaken = true;
                    break;
                }
                farthest = farthest.max(ahead - done);
                if ahead - done <= window {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            if overtaken {
                break;
            }
        }
        if !overtaken {
            return farthest;
        }
    }
    farthest
}

/// `(space id, term, docno)` -> posting (term frequency << 32 | document length in terms).
///
/// # Errors
/// Storage errors.
pub(crate) fn postings<X: Tx>(tx: &X) -> Result<X::Table<'_, (&'static str, &'static str, u64), u64>> {
    tx.open(POSTINGS)
}

/// space id -> (documents, total document length in terms), for BM25's N and avgdl.
///
/// # Errors
/// Storage errors.
pub(crate) fn lex_stats<X: Tx>(tx: &X) -> Result<X::Table<'_, K1, (u64, u64)>> {
    tx.open(LEX_STATS)
}

/// The memory kinds of one write transaction (`memories`, `memory_space`, `vectors`, `postings`,
/// `lex_stats`), each opened once, with the storage operations the memory write path needs.
pub(crate) struct Writer<'t> {
    records: Opened<'t, WriteTx, K2, StoredMemory>,
    by_id: Table<'t, K1, &'static str>,
    vectors: Opened<'t, WriteTx, KN, Vector>,
    postings: Table<'t, (&'static str, &'static str, u64), u64>,
    lex_stats: Table<'t, K1, (u64, u64)>,
}

impl<'t> Writer<'t> {
    /// Opens the memory kinds in `txn`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn open(txn: &'t WriteTx) -> Result<Self> {
        Ok(Writer {
            records: memories(txn)?,
            by_id: memory_space(txn)?,
            vectors: vectors(txn)?,
            postings: postings(txn)?,
            lex_stats: lex_stats(txn)?,
        })
    }

    /// The memory `id` of `space`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when the record does not decode.
    pub(crate) fn get(&self, space: &str, id: &str) -> Result<Option<StoredMemory>> {
        self.records.get((space, id))
    }

    /// The space memory `id` lives in (ids are unique across spaces).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn space_of(&self, id: &str) -> Result<Option<String>> {
        Ok(self.by_id.get(id)?.map(|v| v.value().to_string()))
    }

    /// The spaces memories `ids` live in, in their order, in one batch (one statement on PostgreSQL, whose write
    /// transaction then answers [`Writer::space_of`] for them without another).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn spaces_of(&self, ids: &[&str]) -> Result<Vec<Option<String>>> {
        Ok(self.by_id.get_many(ids)?.into_iter().map(|v| v.map(|v| v.value().to_string())).collect())
    }

    /// The memories of `space` whose ids start with `prefix`, in id order.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn with_prefix(&self, space: &str, prefix: &str) -> Result<Vec<StoredMemory>> {
        let mut out = Vec::new();
        for row in self.records.range((space, prefix)..)? {
            let (k, sm) = row?;
            let (s, id) = k.value();
            if s != space || !id.starts_with(prefix) {
                break;
            }
            out.push(sm);
        }
        Ok(out)
    }

    /// Stores the record of a memory that stays in `space` (its by-id entry is already there).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] when the record does not encode.
    pub(crate) fn put(&mut self, space: &str, sm: &StoredMemory) -> Result<()> {
        self.records.put((space, sm.memory.id.as_str()), sm)
    }

    /// Stores the record of a memory new to `space` (created, imported or moved) and points its id there.
    ///
    /// # Errors
    /// As [`Writer::put`].
    pub(crate) fn place(&mut self, space: &str, sm: &StoredMemory) -> Result<()> {
        self.put(space, sm)?;
        self.by_id.put(sm.memory.id.as_str(), space)
    }

    /// Deletes the record of memory `id` from `space`, keeping its by-id entry (the memory moves on).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove_record(&mut self, space: &str, id: &str) -> Result<()> {
        self.records.remove((space, id)).map(|_| ())
    }

    /// Deletes memory `id` of `space`: its record and its by-id entry.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove(&mut self, space: &str, id: &str) -> Result<()> {
        self.remove_record(space, id)?;
        self.by_id.remove(id).map(|_| ())
    }

    /// The stored vector of document `docno` of `space` (`f32`s as read back from half precision).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn vector(&self, space: &str, docno: u64) -> Result<Option<Vec<f32>>> {
        Ok(self.vectors.get((space, docno))?.map(|v| v.0))
    }

    /// Stores the vector of document `docno` of `space`; returns it as it reads back (half precision), which
    /// is what the in-memory index must hold so that a reopen changes no score.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn put_vector(&mut self, space: &str, docno: u64, v: Vec<f32>) -> Result<Vec<f32>> {
        let stored = Vector::as_stored(&v);
        self.vectors.put((space, docno), &Vector(v))?;
        Ok(stored)
    }

    /// [`Writer::put_vector`] under a document number this transaction allocated, so that no vector is stored
    /// under it yet: the vector goes in as a new record (by binary `COPY` in a PostgreSQL bulk write).
    ///
    /// # Errors
    /// Storage errors; a vector stored under `docno` after all fails the transaction (`Table::put_new`).
    pub(crate) fn put_new_vector(&mut self, space: &str, docno: u64, v: Vec<f32>) -> Result<Vec<f32>> {
        let stored = Vector::as_stored(&v);
        self.vectors.put_new((space, docno), &Vector(v))?;
        Ok(stored)
    }

    /// Deletes the vector of document `docno` of `space`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove_vector(&mut self, space: &str, docno: u64) -> Result<()> {
        self.vectors.remove((space, docno)).map(|_| ())
    }

    /// Adds the postings of document `docno` of `space`: `terms` with their frequencies, `len` the document's
    /// length in terms (as `index::lexicon::analyse` gives them); counts the document in BM25's N and avgdl.
    /// `docno` is one this transaction allocated, so no posting of it is stored yet: the postings go in as new
    /// records ([`crate::storage::Table::put_new`], by `COPY` in bulk on PostgreSQL).
    ///
    /// # Errors
    /// Storage errors; on PostgreSQL, a posting of `docno` already stored (a docno not fresh) fails the write.
    pub(crate) fn index_terms(&mut self, space: &str, docno: u64, terms: &[(String, u32)], len: u32) -> Result<()> {
        for (term, n) in terms {
            self.postings.put_new((space, term.as_str(), docno), crate::index::bm25::Posting::pack(*n, len))?;
        }
        let (docs, total) = self.lex_stats.get(space)?.map(|v| v.value()).unwrap_or((0, 0));
        self.lex_stats.put(space, (docs + 1, total + u64::from(len)))
    }

    /// Removes the postings [`Writer::index_terms`] added for the same `terms` and `len`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn unindex_terms(&mut self, space: &str, docno: u64, terms: &[(String, u32)], len: u32) -> Result<()> {
        for (term, _) in terms {
            self.postings.remove((space, term.as_str(), docno))?;
        }
        let (docs, total) = self.lex_stats.get(space)?.map(|v| v.value()).unwrap_or((0, 0));
        self.lex_stats.put(space, (docs.saturating_sub(1), total.saturating_sub(u64::from(len))))
    }
}

/// The stored vectors of `space`, with their docnos, in docno order.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`] when a vector does not decode.
pub(crate) fn vectors_in<X: Tx>(tx: &X, space: &str) -> Result<Vec<(u64, Vec<f32>)>> {
    let mut out = Vec::new();
    for row in vectors(tx)?.range((space, 0u64)..=(space, u64::MAX))? {
        let (k, v) = row?;
        out.push((k.value().1, v.0));
    }
    Ok(out)
}

/// Rewrites every memory record of the store with `update` applied, `chunk` records at a time (so that a large
/// store is not held in memory at once), in write transaction `txn`. Returns how many were rewritten.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`] when a record does not decode.
pub(crate) fn update_all(txn: &WriteTx, chunk: usize, mut update: impl FnMut(&mut StoredMemory)) -> Result<u64> {
    let mut mems = memories(txn)?;
    let mut done = 0u64;
    let mut after: Option<(String, String)> = None;
    loop {
        let mut batch: Vec<((String, String), StoredMemory)> = Vec::with_capacity(chunk);
        {
            let from = after.as_ref().map_or(("", ""), |(s, i)| (s.as_str(), i.as_str()));
            for row in mems.range(from..)? {
                let (k, v) = row?;
                let (space, id) = k.value();
                if after.as_ref().is_some_and(|(s, i)| s == space && i == id) {
                    continue;
                }
                let mut sm: StoredMemory = v;
                update(&mut sm);
                batch.push(((space.to_string(), id.to_string()), sm));
                if batch.len() == chunk {
                    break;
                }
            }
        }
        let Some(last) = batch.last().map(|c| c.0.clone()) else { break };
        for ((space, id), sm) in &batch {
            mems.put((space.as_str(), id.as_str()), sm)?;
        }
        done += batch.len() as u64;
        after = Some(last);
    }
    Ok(done)
}

/// Calls `f(space, term, docno, packed posting)` for every posting, in key order.
///
/// # Errors
/// Storage errors.
pub(crate) fn each_posting<X: Tx>(tx: &X, mut f: impl FnMut(&str, &str, u64, u64)) -> Result<()> {
    for row in postings(tx)?.iter()? {
        let (k, v) = row?;
        let (space, term, docno) = k.value();
        f(space, term, docno, v.value());
    }
    Ok(())
}

/// Calls `f(space, (documents, total length in terms))` for every space's BM25 statistics.
///
/// # Errors
/// Storage errors.
pub(crate) fn each_lex_stats<X: Tx>(tx: &X, mut f: impl FnMut(&str, (u64, u64))) -> Result<()> {
    for row in lex_stats(tx)?.iter()? {
        let (k, v) = row?;
        f(k.value(), v.value());
    }
    Ok(())
}

/// The packed posting under each of `keys` (`(space, term, docno)`), in the order of `keys` (`None` where the
/// document has not the term): one statement on PostgreSQL.
///
/// # Errors
/// Storage errors.
pub(crate) fn postings_of<X: Tx>(tx: &X, keys: &[(&str, &str, u64)]) -> Result<Vec<Option<u64>>> {
    Ok(postings(tx)?.get_many(keys)?.into_iter().map(|v| v.map(|v| v.value())).collect())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::storage::codec::{decode, encode, older_version};

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Random version-1 memory records upgrade without loss: every old field equal, `expires_at` none,
        /// and the upgraded record writes at version 2 and reads back equal.
        #[test]
        fn version_1_memories_upgrade_without_loss(
            m in crate::storage::codec::tests::memory(),
            docno in any::<u64>(),
        ) {
            let m = Memory { expires_at: None, ..m };
            let old = StoredMemoryV1::bytes_of(&StoredMemory { docno, memory: m.clone() })
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(older_version::<StoredMemory>(&old), Some(1));
            let up: StoredMemory = decode(&old).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&up, &StoredMemory { docno, memory: m });
            let new = encode(&up).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(new[0], StoredMemory::VERSION);
            prop_assert_eq!(older_version::<StoredMemory>(&new), None);
            prop_assert_eq!(decode::<StoredMemory>(&new).map_err(|e| TestCaseError::fail(e.to_string()))?, up);
        }
    }

    #[test]
    fn newer_records_are_refused_with_both_versions() {
        let (current, newer) = (StoredMemory::VERSION, StoredMemory::VERSION + 1);
        let e = decode::<StoredMemory>(&[newer, 0]).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Corrupt);
        let (a, b) = (format!("version {newer}"), format!("({current})"));
        assert!(e.to_string().contains(&a) && e.to_string().contains(&b), "{e}");
    }
}
