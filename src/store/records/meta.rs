//! Store-wide settings and counters (`meta`): the only place the kind is opened. Each key has one type:
//!
//! | key | value |
//! |---|---|
//! | `format_version` | u32, little-endian (the layout; see [`crate::store::upgrade`]) |
//! | `generation`, `graph_generation`, `next_docno`, `next_community_id` | u64, little-endian |
//! | `index_snapshot` ([`INDEX_SNAPSHOT`]) | u64, little-endian: token of the index snapshot that matches the committed state (unset by every write; `store/core/snapshot.rs`) |
//! | `store_id` ([`STORE_ID`]) | u64, little-endian: the random id of a PostgreSQL store, which names its daemons' snapshot files |
//! | `embedder` | UTF-8 text (the embedder's identity) |
//! | `graph_report`, `last_upgrade` | JSON |

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Bytes, K1, Tx};
use crate::error::{Error, ErrorKind, Result};
use crate::storage::tables::META;
use crate::storage::{Readable, Table};

/// The key holding the token of the index snapshot that matches the committed state.
pub(crate) const INDEX_SNAPSHOT: &str = "index_snapshot";

/// The key holding the random id of a PostgreSQL store.
pub(crate) const STORE_ID: &str = "store_id";

/// The `meta` kind of one transaction, with a typed accessor per value type.
pub(crate) struct Meta<T>(T);

/// Asks write transaction `txn` for the settings `keys` ahead of their reads ([`super::ahead`]).
pub(crate) fn ask_ahead(txn: &crate::storage::WriteTx, keys: &[&str]) {
    txn.read_ahead(META, keys);
}

/// Opens `meta`.
///
/// # Errors
/// Storage errors (on redb a read transaction of a file no Engram has written yet: the kind does not exist).
pub(crate) fn meta<X: Tx>(tx: &X) -> Result<Meta<X::Table<'_, K1, Bytes>>> {
    Ok(Meta(tx.open(META)?))
}

/// Allocates `n` consecutive document numbers in write transaction `txn` (`META.next_docno`); returns the first.
///
/// # Errors
/// Storage errors.
pub(crate) fn alloc_docnos(txn: &crate::storage::WriteTx, n: u64) -> Result<u64> {
    let mut meta = meta(txn)?;
    let next = meta.u64("next_docno")?.unwrap_or(1);
    meta.put_u64("next_docno", next + n)?;
    Ok(next)
}

impl<T: Readable<K1, Bytes>> Meta<T> {
    /// A u64 counter (None when unset or not 8 bytes).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn u64(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.0.get(key)?.and_then(|v| v.value().try_into().ok().map(u64::from_le_bytes)))
    }

    /// The u64 values of `keys`, in their order (None where unset), read in one batch (one statement on
    /// PostgreSQL).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn u64_many(&self, keys: &[&str]) -> Result<Vec<Option<u64>>> {
        Ok(self
            .0
            .get_many(keys)?
            .into_iter()
            .map(|v| v.and_then(|v| v.value().try_into().ok().map(u64::from_le_bytes)))
            .collect())
    }

    /// A u32 value (the format version): None when unset.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`] when the value is not 4 bytes.
    pub(crate) fn u32(&self, key: &str) -> Result<Option<u32>> {
        match self.0.get(key)? {
            None => Ok(None),
            Some(v) => v
                .value()
                .try_into()
                .map(|b| Some(u32::from_le_bytes(b)))
                .map_err(|_| Error::new(ErrorKind::Corrupt, format!("the stored {key} is not 4 bytes"))),
        }
    }

    /// A text value (invalid UTF-8 replaced).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn text(&self, key: &str) -> Result<Option<String>> {
        Ok(self.0.get(key)?.map(|v| String::from_utf8_lossy(v.value()).into_owned()))
    }

    /// A JSON value; None when unset or when it does not parse as `J` (a report an older release wrote in
    /// another shape is recomputed, not an error).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn json<J: DeserializeOwned>(&self, key: &str) -> Result<Option<J>> {
        Ok(self.0.get(key)?.and_then(|v| serde_json::from_slice(v.value()).ok()))
    }

    /// Whether `key` is set.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn contains(&self, key: &str) -> Result<bool> {
        Ok(self.0.get(key)?.is_some())
    }
}

impl Meta<Table<'_, K1, Bytes>> {
    /// Sets a u64 counter.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn put_u64(&mut self, key: &str, value: u64) -> Result<()> {
        self.0.put(key, value.to_le_bytes().as_slice())
    }

    /// Sets a u32 value.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn put_u32(&mut self, key: &str, value: u32) -> Result<()> {
        self.0.put(key, value.to_le_bytes().as_slice())
    }

    /// Sets a text value.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn put_text(&mut self, key: &str, value: &str) -> Result<()> {
        self.0.put(key, value.as_bytes())
    }

    /// Sets a JSON value.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Internal`] when `value` does not serialize.
    pub(crate) fn put_json(&mut self, key: &str, value: &impl Serialize) -> Result<()> {
        let json = serde_json::to_vec(value).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
        self.0.put(key, json.as_slice())
    }

    /// Unsets `key`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove(&mut self, key: &str) -> Result<()> {
        self.0.remove(key).map(|_| ())
    }
}
