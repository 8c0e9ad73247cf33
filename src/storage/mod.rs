//! Storage: the port between Engram's domain (`src/store`, `src/fs`) and where its records live
//! (docs/storage.md).
//!
//! The port is typed and coarse: the domain opens one record kind at a time ([`Kind`], all listed in
//! [`tables`]) inside a read or write transaction ([`Db::read`], [`Db::write`]) and gets, puts, deletes and scans
//! its records in key order ([`Readable`], [`Table`]). Keys lead with the space id wherever a record belongs to
//! a space, so a space is one key range in every kind. Records are encoded by [`codec`], above the backend.
//! Ranking, lifecycle rules, label judgement, extraction and graph planning stay above the port.
//!
//! Backends: redb (`src/storage/redb/`, one file per store) and PostgreSQL (`src/storage/postgres/`, feature
//! `postgres`, the scale-out design); the port's types (`port.rs`) dispatch to either. Nothing outside
//! `src/storage/redb/` names the redb crate.

pub mod codec;
pub mod crypt;
mod port;
#[cfg(feature = "postgres")]
pub mod postgres;
mod primitives;
/// The column codec shared by the backends (keys and values as typed columns).
pub(crate) mod record;
mod redb;
pub mod tables;
pub(crate) mod txn;

use std::marker::PhantomData;

pub use primitives::{CatalogEntry, CatalogStats, Edge, TermPostings};

pub use self::redb::{Borrowed, FileDevice, KeyType, ValueType};
pub use port::{
    Changes, Claim, Db, Got, KindStats, Publication, ReadTable, ReadTx, Readable, Rows, Table, VectorIndexBuild,
    WriteTx, key_from_bytes,
};

/// When a write is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every write transaction is fsynced before the call returns (about 3 ms each on this class of machine).
    #[default]
    Immediate,
    /// Writes are persisted by the next immediate commit or a checkpoint; a crash may lose the latest ones.
    /// For bulk loads and benchmarks only.
    Eventual,
}

/// One record kind: a name and its key and value types. Keys are `&str`, `u64` or tuples of them, ordered part
/// by part; values are records (`&[u8]`, see [`codec`]) or small scalars. Every kind is declared in [`tables`].
pub struct Kind<K, V> {
    name: &'static str,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Kind<K, V> {
    /// A kind named `name` (unique within a store).
    pub const fn new(name: &'static str) -> Self {
        Kind { name, types: PhantomData }
    }

    /// The kind's name: the redb table name, the PostgreSQL table name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<K: Columns, V: Columns> Kind<K, V> {
    /// The kind's name and the SQL types of its key parts and value parts.
    pub const fn info(&self) -> KindInfo {
        KindInfo { name: self.name, key: K::SQL, value: V::SQL }
    }
}

/// A record kind as a table: its name, the SQL type of each key part (the primary key, in order) and of each
/// value part (none for an edge kind, whose key is the whole record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// The kind's name.
    pub name: &'static str,
    /// SQL types of the key parts, left to right.
    pub key: &'static [&'static str],
    /// SQL types of the value parts.
    pub value: &'static [&'static str],
}

/// The SQL columns a key or value type maps to: `&str` is `text`, `u64` is `bigint` (values above `i64::MAX`
/// do not occur: ids, counts, docnos), `f64` is `double precision`, `&[u8]` is `bytea`, `()` is no column, a
/// tuple is its parts' columns in order.
pub trait Columns {
    /// The SQL types, in order.
    const SQL: &'static [&'static str];
}

macro_rules! columns {
    ($($t:ty => [$($c:literal),*]),* $(,)?) => {$(
        impl Columns for $t {
            const SQL: &'static [&'static str] = &[$($c),*];
        }
    )*};
}

columns! {
    &'static str => ["text"],
    u64 => ["bigint"],
    f64 => ["double precision"],
    &'static [u8] => ["bytea"],
    () => [],
    (u64, u64) => ["bigint", "bigint"],
    (&'static str, &'static str) => ["text", "text"],
    (&'static str, u64) => ["text", "bigint"],
    (&'static str, &'static str, u64) => ["text", "text", "bigint"],
    (&'static str, &'static str, &'static str) => ["text", "text", "text"],
    (u64, &'static str, &'static str) => ["bigint", "text", "text"],
    (u64, &'static str, u64, u64, &'static [u8]) => ["bigint", "text", "bigint", "bigint", "bytea"],
}

impl<K, V> Clone for Kind<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for Kind<K, V> {}

impl<K, V> std::fmt::Display for Kind<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A byte-addressed device a file-backed store may live on in place of its file ([`crate::StorageFactory`]):
/// fault-injection tests wrap [`FileDevice`] to fail chosen operations. Offsets and lengths are bytes. The file's
/// byte-range locks are not taken through a device: a store on one must be opened by one process only.
pub trait Device: std::fmt::Debug + Send + Sync + 'static {
    /// The device's length in bytes.
    ///
    /// # Errors
    /// I/O errors.
    fn len(&self) -> std::io::Result<u64>;
    /// Whether the device holds no byte.
    ///
    /// # Errors
    /// I/O errors.
    fn is_empty(&self) -> std::io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Fills `out` from `offset`.
    ///
    /// # Errors
    /// I/O errors.
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()>;
    /// Grows or truncates the device to `len` bytes.
    ///
    /// # Errors
    /// I/O errors.
    fn set_len(&self, len: u64) -> std::io::Result<()>;
    /// Makes every write so far durable.
    ///
    /// # Errors
    /// I/O errors.
    fn sync_data(&self) -> std::io::Result<()>;
    /// Writes `data` at `offset`.
    ///
    /// # Errors
    /// I/O errors.
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()>;
    /// Releases the device (the store closes).
    ///
    /// # Errors
    /// I/O errors.
    fn close(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length in bytes of redb's magic number at the start of its file (its header block). redb writes it last
/// when it creates a database: a file whose first bytes are zeros never held a commit.
pub(crate) const REDB_MAGIC_BYTES: usize = 9;
