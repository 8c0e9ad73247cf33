//! The port's types: the database handle, read and write transactions, typed handles on one record kind, and
//! the rows they return. Each dispatches to its backend: redb (`super::redb`, rows borrowed from its pages) or
//! PostgreSQL (`super::postgres`, feature `postgres`; rows arrive as typed columns and are carried in redb's key
//! encoding, so both backends hand the domain the same borrowed values).

use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::path::Path;

#[cfg(feature = "postgres")]
use super::postgres::{PgClaim, PgDb, PgRows, PgTable, PgTx};
use super::record::decode;
use super::redb::{
    Borrowed, KeyType, RedbDb, RedbGot, RedbRead, RedbReadTable, RedbRows, RedbTable, RedbWrite, ValueType,
};
use super::{Device, Durability, Kind};
use crate::error::Result;

/// Bytes used by one record kind ([`ReadTx::kind_stats`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct KindStats {
    /// Bytes of keys and values.
    pub stored_bytes: u64,
    /// Bytes of index structure (B-tree branches).
    pub metadata_bytes: u64,
    /// Bytes allocated but unused inside the kind's pages.
    pub fragmented_bytes: u64,
}

enum DbInner {
    Redb(RedbDb),
    #[cfg(feature = "postgres")]
    Pg(Box<PgDb>),
}

/// An open store database: one redb file locked for this process, or a PostgreSQL database shared by any
/// number of processes.
pub struct Db(DbInner);

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("backend", &self.backend()).finish_non_exhaustive()
    }
}

/// A database's vector index built after a bulk load ([`Db::end_bulk_load`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct VectorIndexBuild {
    /// Vectors stored when the build started (every space and dimension of the store).
    pub vectors: u64,
    /// Indexes built: one per embedding dimension present.
    pub indexes: usize,
    /// Wall time of the build, milliseconds.
    pub elapsed_ms: f64,
}

impl Db {
    /// Opens or creates the redb file at `path` with a page cache of `cache_bytes`, on `device` in place of the
    /// file when given (fault injection).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Locked`] when another process holds the file, [`crate::ErrorKind::Corrupt`] for a
    /// damaged file or another file format, [`crate::ErrorKind::Io`] for I/O errors.
    pub fn open(path: &Path, cache_bytes: usize, device: Option<Box<dyn Device>>) -> Result<Db> {
        Ok(Db(DbInner::Redb(RedbDb::open(path, cache_bytes, device)?)))
    }

    /// Opens the existing redb file at `path` for reading only: nothing is written to it, not even its header;
    /// writes fail. `None` when the file was not closed cleanly and needs the repair only [`Db::open`] makes.
    ///
    /// # Errors
    /// As [`Db::open`].
    pub fn open_read_only(path: &Path, cache_bytes: usize) -> Result<Option<Db>> {
        Ok(RedbDb::open_read_only(path, cache_bytes, None)?.map(|d| Db(DbInner::Redb(d))))
    }

    /// [`Db::open_read_only`] on `device` (an encrypted store's, opened read-only) in place of the file.
    ///
    /// # Errors
    /// As [`Db::open`].
    pub fn open_read_only_on(path: &Path, cache_bytes: usize, device: Box<dyn Device>) -> Result<Option<Db>> {
        Ok(RedbDb::open_read_only(path, cache_bytes, Some(device))?.map(|d| Db(DbInner::Redb(d))))
    }

    /// Connects to the PostgreSQL database at `url` with a pool of at most `pool_size` connections, and
    /// creates or migrates its schema (see [`super::postgres::migrate`]).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unreachable`] when the server cannot be reached or refuses the login, naming what
    /// failed; [`crate::ErrorKind::Corrupt`] for a database of a newer Engram schema.
    #[cfg(feature = "postgres")]
    pub fn connect(url: &str, pool_size: u32) -> Result<Db> {
        Ok(Db(DbInner::Pg(Box::new(PgDb::connect(url, pool_size)?))))
    }

    /// `"redb"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        match &self.0 {
            DbInner::Redb(_) => "redb",
            #[cfg(feature = "postgres")]
            DbInner::Pg(_) => "postgres",
        }
    }

    /// A read transaction: a consistent snapshot of the last commit. Never blocks writers.
    ///
    /// # Errors
    /// Storage errors.
    pub fn read(&self) -> Result<ReadTx> {
        Ok(ReadTx(match &self.0 {
            DbInner::Redb(d) => ReadInner::Redb(d.read()?),
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => ReadInner::Pg(d.read()?),
        }))
    }

    /// A write transaction. One at a time per database (on PostgreSQL across every process: a transaction-level
    /// advisory lock); a second waits. Committed with `durability`: [`Durability::Immediate`] is on disk when
    /// [`WriteTx::commit`] returns, [`Durability::Eventual`] at the next immediate commit (redb) or within the
    /// server's WAL writer delay (PostgreSQL's `synchronous_commit = off`).
    ///
    /// # Errors
    /// Storage errors.
    pub fn write(&self, durability: Durability) -> Result<WriteTx> {
        Ok(WriteTx(match &self.0 {
            DbInner::Redb(d) => WriteInner::Redb(d.write(durability)?),
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => WriteInner::Pg(d.write(durability)?),
        }))
    }

    /// Bytes of the file's pages in use (allocated pages × page size): what a compaction could shrink it to.
    /// `None` on a database server, which manages its own space.
    ///
    /// # Errors
    /// Storage errors.
    pub fn used_bytes(&self) -> Result<Option<u64>> {
        match &self.0 {
            DbInner::Redb(d) => d.used_bytes().map(Some),
            #[cfg(feature = "postgres")]
            DbInner::Pg(_) => Ok(None),
        }
    }

    /// Bytes of the store's tables and indexes on a database server (the current schema's relations); `None`
    /// for a redb file, whose size the file system reports.
    ///
    /// # Errors
    /// Storage errors.
    pub fn size_bytes(&self) -> Result<Option<u64>> {
        match &self.0 {
            DbInner::Redb(_) => Ok(None),
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => d.size_bytes().map(Some),
        }
    }

    /// Starts a bulk load: on PostgreSQL drops the pgvector HNSW indexes of the store's schema, so vectors are
    /// written without maintaining them until [`Db::end_bulk_load`] builds them again (pgvector's advice:
    /// building after loading is much faster than inserting into the index). Vector candidates scan meanwhile.
    /// Nothing to do on a redb file (the in-memory HNSW graph is built in the background either way).
    ///
    /// # Errors
    /// Storage errors.
    pub fn begin_bulk_load(&self) -> Result<()> {
        match &self.0 {
            DbInner::Redb(_) => Ok(()),
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => d.defer_vector_index().map(|_| ()),
        }
    }

    /// Ends a bulk load: on PostgreSQL builds the pgvector HNSW index of every dimension present and returns how
    /// long that took; `None` on a redb file or without pgvector.
    ///
    /// # Errors
    /// Storage errors; a later call retries the indexes not built.
    pub fn end_bulk_load(&self) -> Result<Option<VectorIndexBuild>> {
        match &self.0 {
            DbInner::Redb(_) => Ok(None),
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => Ok(d.build_vector_index()?.map(|b| VectorIndexBuild {
                vectors: b.vectors,
                indexes: b.indexes,
                elapsed_ms: b.elapsed.as_secs_f64() * 1000.0,
            })),
        }
    }

    /// Whether other processes may write this database at the same time (PostgreSQL): the store then keeps
    /// its in-memory indexes current from the change feed ([`WriteTx::publish`], [`Db::changes_since`]).
    pub fn shared(&self) -> bool {
        !matches!(self.0, DbInner::Redb(_))
    }

    /// Claims the background work named `name` (`"graph"`, `"reembed"`) for this process: `None` when another
    /// process holds it. A redb file has one process: always claimed. Released when the [`Claim`] is dropped.
    ///
    /// # Errors
    /// Storage errors.
    pub fn claim(&self, name: &str) -> Result<Option<Claim>> {
        match &self.0 {
            DbInner::Redb(_) => {
                let _ = name;
                Ok(Some(Claim(ClaimInner::Local)))
            }
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => Ok(d.claim(name)?.map(|c| Claim(ClaimInner::Pg(Box::new(c))))),
        }
    }

    /// The change feed after `after`, oldest first, at most `limit` entries, and the highest `seq` pruned from
    /// it. Empty on a redb file (no other writer).
    ///
    /// # Errors
    /// Storage errors.
    pub fn changes_since(&self, after: u64, limit: usize) -> Result<Changes> {
        match &self.0 {
            DbInner::Redb(_) => {
                let _ = (after, limit);
                Ok(Changes::default())
            }
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => d.changes_since(after, limit),
        }
    }

    /// Deletes change-feed entries older than ten minutes; returns how many (0 on a redb file).
    ///
    /// # Errors
    /// Storage errors.
    pub fn prune_changes(&self) -> Result<u64> {
        match &self.0 {
            DbInner::Redb(_) => Ok(0),
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => d.prune_changes(),
        }
    }

    /// Replaces the index snapshot published in a shared database with `files` (`(name relative to the data
    /// directory, path to read)`), reflecting change-feed `position`; returns the bytes written (0 on a redb
    /// file, which has no other process to publish to). See `storage/postgres/publish.rs`.
    ///
    /// # Errors
    /// Storage and I/O errors; the publication before stays then.
    pub fn publish(&self, position: u64, files: &[(String, std::path::PathBuf)]) -> Result<u64> {
        match &self.0 {
            DbInner::Redb(_) => {
                let _ = (position, files);
                Ok(0)
            }
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => d.publish(position, files),
        }
    }

    /// The published index snapshot's change-feed position, age and size, if any (never on a redb file).
    ///
    /// # Errors
    /// Storage errors.
    pub fn publication(&self) -> Result<Option<Publication>> {
        match &self.0 {
            DbInner::Redb(_) => Ok(None),
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => d.publication(),
        }
    }

    /// Downloads the published files that `place` maps to a path, each written beside its path and renamed over
    /// it when complete: the publication's position and the paths written, or `None` without one.
    ///
    /// # Errors
    /// Storage and I/O errors; no partial file is left.
    pub fn fetch_publication(
        &self,
        place: &dyn Fn(&str) -> Option<std::path::PathBuf>,
    ) -> Result<Option<(u64, Vec<std::path::PathBuf>)>> {
        match &self.0 {
            DbInner::Redb(_) => {
                let _ = place;
                Ok(None)
            }
            #[cfg(feature = "postgres")]
            DbInner::Pg(d) => d.fetch_publication(place),
        }
    }

    /// One compaction step: moves pages towards the front and truncates the file. `Ok(true)` when another step
    /// may shrink it further. Needs the only handle on the database (no open transaction). Nothing to do on a
    /// database server.
    ///
    /// # Errors
    /// Storage errors; the file stays valid.
    pub fn compact_step(&self) -> Result<bool> {
        match &self.0 {
            DbInner::Redb(d) => d.compact_step(),
            #[cfg(feature = "postgres")]
            DbInner::Pg(_) => Ok(false),
        }
    }
}

enum ClaimInner {
    Local,
    #[cfg(feature = "postgres")]
    #[allow(dead_code)] // Held for its Drop.
    Pg(Box<PgClaim>),
}

/// Change-feed entries ([`Db::changes_since`]).
#[derive(Debug, Default)]
pub struct Changes {
    /// The highest `seq` pruned from the feed: a reader whose position is below it missed entries.
    pub pruned: u64,
    /// `(seq, body)`, oldest first.
    pub entries: Vec<(u64, Vec<u8>)>,
}

/// The index snapshot published in a shared database ([`Db::publication`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Publication {
    /// The change-feed `seq` its files reflect.
    pub position: u64,
    /// Seconds since it was written, by the database server's clock.
    pub age_secs: f64,
    /// Total size of its files, in bytes.
    pub bytes: u64,
}

/// Background work claimed by this process ([`Db::claim`]); released on drop.
pub struct Claim(#[allow(dead_code)] ClaimInner);

enum ReadInner {
    Redb(RedbRead),
    #[cfg(feature = "postgres")]
    Pg(PgTx),
}

/// `keys` as the SQL values of their parts, one list per key (what a read ahead sends).
#[cfg(feature = "postgres")]
fn sql_keys<K: KeyType>(keys: &[Borrowed<'_, K>]) -> Vec<Vec<super::record::SqlValue>> {
    keys.iter()
        .map(|k| {
            let mut cols = Vec::with_capacity(K::PARTS);
            K::to_sql(k, &mut cols);
            cols
        })
        .collect()
}

/// A read transaction ([`Db::read`]).
pub struct ReadTx(ReadInner);

impl ReadTx {
    /// The records of one kind, as of this transaction's snapshot.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when the kind exists with other key or value types.
    pub fn table<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<ReadTable<K, V>> {
        Ok(ReadTable(match &self.0 {
            ReadInner::Redb(t) => TableInner::RedbRead(t.table(kind)?),
            #[cfg(feature = "postgres")]
            ReadInner::Pg(t) => TableInner::Pg(t.table(kind)),
        }))
    }

    /// Whether [`ReadTx::read_ahead`] saves statements: true on PostgreSQL, false on a redb file (whose reads are
    /// local), where a caller need not work out what to ask for.
    pub fn reads_ahead(&self) -> bool {
        match &self.0 {
            ReadInner::Redb(_) => false,
            #[cfg(feature = "postgres")]
            ReadInner::Pg(_) => true,
        }
    }

    /// Asks for the records of `kind` under `keys` ahead of their reads, as [`WriteTx::read_ahead`] does: on
    /// PostgreSQL they travel with the transaction's next point read of any kind, and the reads of these keys
    /// after it are answered, as of this transaction's snapshot, from what it read (a search reads its space and
    /// the query's entities in one statement). On a redb file it does nothing. Results never depend on it.
    pub fn read_ahead<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>, keys: &[Borrowed<'_, K>]) {
        match &self.0 {
            ReadInner::Redb(_) => {
                let _ = (kind, keys);
            }
            #[cfg(feature = "postgres")]
            ReadInner::Pg(t) => t.read_ahead(kind.name(), sql_keys::<K>(keys)),
        }
    }

    /// The PostgreSQL transaction, for the primitives it answers in SQL.
    #[cfg(feature = "postgres")]
    pub(super) fn pg(&self) -> Option<&PgTx> {
        match &self.0 {
            ReadInner::Pg(t) => Some(t),
            ReadInner::Redb(_) => None,
        }
    }

    /// The last change-feed `seq` committed as of this snapshot (0 on a redb file, which has no feed).
    ///
    /// # Errors
    /// Storage errors.
    pub fn change_head(&self) -> Result<u64> {
        match &self.0 {
            ReadInner::Redb(_) => Ok(0),
            #[cfg(feature = "postgres")]
            ReadInner::Pg(t) => t.change_head(),
        }
    }

    /// Bytes used by the record kind named `name` (zeros for a kind not created yet).
    ///
    /// # Errors
    /// Storage errors.
    pub fn kind_stats(&self, name: &str) -> Result<KindStats> {
        match &self.0 {
            ReadInner::Redb(t) => t.kind_stats(name),
            #[cfg(feature = "postgres")]
            ReadInner::Pg(t) => t.kind_stats(name),
        }
    }
}

// One value per open write transaction, never in a collection: boxing redb's would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum WriteInner {
    Redb(RedbWrite),
    #[cfg(feature = "postgres")]
    Pg(PgTx),
}

/// A key of kind type `K` from the bytes [`WriteTx::take_touched`] gave.
pub fn key_from_bytes<K: KeyType>(bytes: &[u8]) -> Borrowed<'_, K> {
    K::from_bytes(bytes)
}

/// A write transaction ([`Db::write`]). Dropped without [`WriteTx::commit`], it writes nothing.
pub struct WriteTx(WriteInner);

impl WriteTx {
    /// The records of one kind, for reading and writing; the kind is created empty on first use.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when the kind exists with other key or value types.
    pub fn table<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<Table<'_, K, V>> {
        Ok(Table(match &self.0 {
            WriteInner::Redb(t) => TableInner::Redb(t.table(kind)?),
            #[cfg(feature = "postgres")]
            WriteInner::Pg(t) => TableInner::Pg(t.table(kind)),
        }))
    }

    /// From now on, notes the key of every write and removal in the kinds named `kinds` (the replicated kinds
    /// of sync, [`super::tables::REPLICATED`]), for [`WriteTx::take_touched`]. Tables opened before this call
    /// are not watched. On PostgreSQL, which sync does not serve, it notes nothing.
    pub fn capture(&mut self, kinds: &'static [&'static str]) {
        match &mut self.0 {
            WriteInner::Redb(t) => t.capture(kinds),
            #[cfg(feature = "postgres")]
            WriteInner::Pg(_) => {
                let _ = kinds;
            }
        }
    }

    /// The keys written or removed since [`WriteTx::capture`], in order, repeats included: (kind name, the key's
    /// bytes, read back with [`key_from_bytes`]). Emptied by the call.
    pub fn take_touched(&self) -> Vec<(&'static str, Vec<u8>)> {
        match &self.0 {
            WriteInner::Redb(t) => t.take_touched(),
            #[cfg(feature = "postgres")]
            WriteInner::Pg(_) => Vec::new(),
        }
    }

    /// Whether [`WriteTx::read_ahead`] saves statements: true on PostgreSQL, false on a redb file (whose reads
    /// are local), where a caller need not work out what to ask for.
    pub fn reads_ahead(&self) -> bool {
        match &self.0 {
            WriteInner::Redb(_) => false,
            #[cfg(feature = "postgres")]
            WriteInner::Pg(_) => true,
        }
    }

    /// Asks for the records of `kind` under `keys` ahead of their reads. On PostgreSQL they are read with the
    /// transaction's next point read (`get`, `get_many`) of any kind, every kind asked for in that one statement,
    /// and the reads of these keys after it need none. On a redb file, whose reads are local, it does nothing.
    /// Asking for keys that are never read, or not asking, changes no result: only the statements sent.
    pub fn read_ahead<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>, keys: &[Borrowed<'_, K>]) {
        match &self.0 {
            WriteInner::Redb(_) => {
                let _ = (kind, keys);
            }
            #[cfg(feature = "postgres")]
            WriteInner::Pg(t) => t.read_ahead(kind.name(), sql_keys::<K>(keys)),
        }
    }

    /// Appends `body` to the change feed, visible with the transaction's other writes (a no-op on a redb file,
    /// whose one process applies its changes itself).
    ///
    /// # Errors
    /// Storage errors.
    pub fn publish(&self, body: &[u8]) -> Result<()> {
        match &self.0 {
            WriteInner::Redb(_) => {
                let _ = body;
                Ok(())
            }
            #[cfg(feature = "postgres")]
            WriteInner::Pg(t) => t.publish(body),
        }
    }

    /// Makes every write of the transaction visible (and durable, as [`Db::write`] asked) at once.
    ///
    /// # Errors
    /// Storage errors; nothing is written then.
    pub fn commit(self) -> Result<()> {
        self.commit_published().map(|_| ())
    }

    /// [`WriteTx::commit`], returning the change-feed `seq`s of what the transaction published, lowest and
    /// highest (`None` when it published nothing, and always on a redb file).
    ///
    /// # Errors
    /// Storage errors; nothing is written then.
    pub fn commit_published(self) -> Result<Option<(u64, u64)>> {
        match self.0 {
            WriteInner::Redb(t) => t.commit().map(|()| None),
            #[cfg(feature = "postgres")]
            WriteInner::Pg(t) => t.commit(),
        }
    }
}

enum GotInner<'a, V: ValueType> {
    Redb(RedbGot<'a, V>),
    /// redb's encoding of a value read from another backend.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Owned(Vec<u8>, PhantomData<&'a ()>),
}

/// One stored key or value: borrowed from the transaction's pages (redb) or held (a database row).
pub struct Got<'a, V: ValueType>(GotInner<'a, V>);

impl<V: ValueType> Got<'_, V> {
    /// The stored value.
    pub fn value(&self) -> Borrowed<'_, V> {
        match &self.0 {
            GotInner::Redb(g) => g.value(),
            GotInner::Owned(b, _) => decode::<V>(b),
        }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn owned(bytes: Vec<u8>) -> Self {
        Got(GotInner::Owned(bytes, PhantomData))
    }
}

type Pair<'a, K, V> = (Got<'a, K>, Got<'a, V>);

/// A write on a read transaction's table: the port's types do not allow it, so this is a bug.
fn read_only() -> crate::error::Error {
    crate::error::Error::new(crate::error::ErrorKind::Internal, "a write on a read-only table")
}

fn redb_pair<'a, K: KeyType, V: ValueType>((k, v): (RedbGot<'a, K>, RedbGot<'a, V>)) -> Pair<'a, K, V> {
    (Got(GotInner::Redb(k)), Got(GotInner::Redb(v)))
}

enum RowsInner<'a, K: KeyType, V: ValueType> {
    Redb(RedbRows<'a, K, V>),
    #[cfg(feature = "postgres")]
    Pg(PgRows<'a, K, V>),
}

/// Records of one kind in key order (both ends: `.rev()`, `.next_back()`), from [`Readable::range`] or
/// [`Readable::iter`]. Each item is a storage result.
pub struct Rows<'a, K: KeyType, V: ValueType>(RowsInner<'a, K, V>);

impl<'a, K: KeyType, V: ValueType> Iterator for Rows<'a, K, V> {
    type Item = Result<Pair<'a, K, V>>;
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            RowsInner::Redb(r) => r.next().map(|r| r.map(redb_pair)),
            #[cfg(feature = "postgres")]
            RowsInner::Pg(r) => r.next(),
        }
    }
}

impl<K: KeyType, V: ValueType> DoubleEndedIterator for Rows<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            RowsInner::Redb(r) => r.next_back().map(|r| r.map(redb_pair)),
            #[cfg(feature = "postgres")]
            RowsInner::Pg(r) => r.next_back(),
        }
    }
}

#[cfg(feature = "postgres")]
impl<'a, K: KeyType, V: ValueType> From<PgRows<'a, K, V>> for Rows<'a, K, V> {
    fn from(r: PgRows<'a, K, V>) -> Self {
        Rows(RowsInner::Pg(r))
    }
}

/// Reading one record kind: what both [`ReadTable`] and [`Table`] offer.
pub trait Readable<K: KeyType, V: ValueType> {
    /// The value stored under `key`.
    ///
    /// # Errors
    /// Storage errors.
    fn get<'a>(&self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<Got<'_, V>>>;

    /// The records whose keys fall in `range`, in key order. A tuple key orders by its parts, left first, so a
    /// prefix scan is `(a, "")..` stopped at the first key whose first part differs. Text orders by bytes (UTF-8
    /// code points) on every backend.
    ///
    /// # Errors
    /// Storage errors.
    fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Rows<'_, K, V>>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a;

    /// Every record of the kind, in key order.
    ///
    /// # Errors
    /// Storage errors.
    fn iter(&self) -> Result<Rows<'_, K, V>>;

    /// The number of records.
    ///
    /// # Errors
    /// Storage errors.
    fn len(&self) -> Result<u64>;

    /// Whether there is no record.
    ///
    /// # Errors
    /// Storage errors.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The values stored under each of `keys`, in the order of `keys` (`None` where nothing is stored). On
    /// PostgreSQL this is one statement for all of them, where [`Readable::get`] is one per key; on redb it is
    /// `get` per key.
    ///
    /// # Errors
    /// Storage errors.
    fn get_many<'a>(&self, keys: &[Borrowed<'a, K>]) -> Result<Vec<Option<Got<'_, V>>>>;

    /// For each of `keys`, the records whose first `parts` key parts (1 up to the key's parts) equal its own, in
    /// key order: a prefix scan per key, in one statement on PostgreSQL. The scan of each key starts at the key
    /// itself, so its parts after `parts` must be the least of their type (`""`, `0`) for the whole prefix to be
    /// read; PostgreSQL ignores them.
    ///
    /// # Errors
    /// Storage errors.
    fn prefix_many<'a>(&self, keys: &[Borrowed<'a, K>], parts: usize) -> Result<Vec<Vec<Pair<'_, K, V>>>>;

    /// The record with the smallest key.
    ///
    /// # Errors
    /// Storage errors.
    fn first(&self) -> Result<Option<Pair<'_, K, V>>>;

    /// The record with the largest key.
    ///
    /// # Errors
    /// Storage errors.
    fn last(&self) -> Result<Option<Pair<'_, K, V>>>;
}

enum TableInner<'t, K: KeyType, V: ValueType> {
    RedbRead(RedbReadTable<K, V>),
    Redb(RedbTable<'t, K, V>),
    #[cfg(feature = "postgres")]
    Pg(PgTable<'t, K, V>),
}

/// One record kind in a read transaction ([`ReadTx::table`]).
pub struct ReadTable<K: KeyType, V: ValueType>(TableInner<'static, K, V>);

/// One record kind in a write transaction ([`WriteTx::table`]): reads see the transaction's own writes.
pub struct Table<'t, K: KeyType, V: ValueType>(TableInner<'t, K, V>);

impl<K: KeyType, V: ValueType> TableInner<'_, K, V> {
    fn get<'a>(&self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<Got<'_, V>>> {
        Ok(match self {
            TableInner::RedbRead(t) => t.get(key)?.map(|g| Got(GotInner::Redb(g))),
            TableInner::Redb(t) => t.get(key)?.map(|g| Got(GotInner::Redb(g))),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.get(key.borrow())?.map(Got::owned),
        })
    }
    fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Rows<'_, K, V>>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a,
    {
        Ok(match self {
            TableInner::RedbRead(t) => Rows(RowsInner::Redb(t.range(range)?)),
            TableInner::Redb(t) => Rows(RowsInner::Redb(t.range(range)?)),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.range(range)?.into(),
        })
    }
    fn iter(&self) -> Result<Rows<'_, K, V>> {
        Ok(match self {
            TableInner::RedbRead(t) => Rows(RowsInner::Redb(t.iter()?)),
            TableInner::Redb(t) => Rows(RowsInner::Redb(t.iter()?)),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.range::<Borrowed<'static, K>>(..)?.into(),
        })
    }
    fn len(&self) -> Result<u64> {
        match self {
            TableInner::RedbRead(t) => t.len(),
            TableInner::Redb(t) => t.len(),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.len(),
        }
    }
    fn get_many<'a>(&self, keys: &[Borrowed<'a, K>]) -> Result<Vec<Option<Got<'_, V>>>> {
        match self {
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => Ok(t.get_many(keys)?.into_iter().map(|v| v.map(Got::owned)).collect()),
            _ => keys.iter().map(|k| self.get(k)).collect(),
        }
    }
    fn prefix_many<'a>(&self, keys: &[Borrowed<'a, K>], parts: usize) -> Result<Vec<Vec<Pair<'_, K, V>>>> {
        #[cfg(feature = "postgres")]
        if let TableInner::Pg(t) = self {
            return Ok(t
                .prefix_many(keys, parts)?
                .into_iter()
                .map(|rows| rows.into_iter().map(|(k, v)| (Got::owned(k), Got::owned(v))).collect())
                .collect());
        }
        let parts = parts.clamp(1, K::PARTS);
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let mut want = Vec::with_capacity(K::PARTS);
            K::to_sql(key, &mut want);
            want.truncate(parts);
            let mut rows = Vec::new();
            // The scan's start, re-borrowed from its bytes for the scan's own lifetime.
            let start = <K as redb::Value>::as_bytes(key).as_ref().to_vec();
            for row in self.range(<K as redb::Value>::from_bytes(&start)..)? {
                let (k, v) = row?;
                let mut have = Vec::with_capacity(K::PARTS);
                K::to_sql(&k.value(), &mut have);
                if have[..parts] != want[..] {
                    break;
                }
                rows.push((k, v));
            }
            out.push(rows);
        }
        Ok(out)
    }
    fn end(&self, last: bool) -> Result<Option<Pair<'_, K, V>>> {
        Ok(match self {
            TableInner::RedbRead(t) => if last { t.last()? } else { t.first()? }.map(redb_pair),
            TableInner::Redb(t) => if last { t.last()? } else { t.first()? }.map(redb_pair),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.end(last)?.map(|(k, v)| (Got::owned(k), Got::owned(v))),
        })
    }
}

macro_rules! readable {
    ($t:ident $(<$l:lifetime>)?) => {
        impl<$($l,)? K: KeyType, V: ValueType> Readable<K, V> for $t<$($l,)? K, V> {
            fn get<'a>(&self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<Got<'_, V>>> {
                self.0.get(key)
            }
            fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Rows<'_, K, V>>
            where
                KR: Borrow<Borrowed<'a, K>> + 'a,
            {
                self.0.range(range)
            }
            fn iter(&self) -> Result<Rows<'_, K, V>> {
                self.0.iter()
            }
            fn len(&self) -> Result<u64> {
                self.0.len()
            }
            fn get_many<'a>(&self, keys: &[Borrowed<'a, K>]) -> Result<Vec<Option<Got<'_, V>>>> {
                self.0.get_many(keys)
            }
            fn prefix_many<'a>(&self, keys: &[Borrowed<'a, K>], parts: usize) -> Result<Vec<Vec<Pair<'_, K, V>>>> {
                self.0.prefix_many(keys, parts)
            }
            fn first(&self) -> Result<Option<Pair<'_, K, V>>> {
                self.0.end(false)
            }
            fn last(&self) -> Result<Option<Pair<'_, K, V>>> {
                self.0.end(true)
            }
        }
    };
}

readable!(ReadTable);
readable!(Table<'t>);

impl<K: KeyType, V: ValueType> Table<'_, K, V> {
    /// Stores `value` under `key`, replacing and returning any value there.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] for a value over 3 GiB (redb) or 1 GiB (PostgreSQL).
    pub fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<Borrowed<'k, K>>,
        value: impl Borrow<Borrowed<'v, V>>,
    ) -> Result<Option<Got<'_, V>>> {
        Ok(match &mut self.0 {
            TableInner::Redb(t) => t.insert(key, value)?.map(|g| Got(GotInner::Redb(g))),
            TableInner::RedbRead(_) => return Err(read_only()),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.insert(key.borrow(), value.borrow())?.map(Got::owned),
        })
    }

    /// Stores `value` under `key`, like [`Table::insert`] without reading the value it replaces. On PostgreSQL
    /// consecutive puts to one kind travel in one statement, sent before the transaction's next read, write of
    /// another kind or commit (so reads see them); an error of theirs (text PostgreSQL cannot hold) surfaces
    /// there, still inside the transaction.
    ///
    /// # Errors
    /// Storage errors; as [`Table::insert`].
    pub fn put<'k, 'v>(
        &mut self,
        key: impl Borrow<Borrowed<'k, K>>,
        value: impl Borrow<Borrowed<'v, V>>,
    ) -> Result<()> {
        match &mut self.0 {
            TableInner::Redb(t) => t.insert(key, value).map(|_| ()),
            TableInner::RedbRead(_) => Err(read_only()),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.put(key.borrow(), value.borrow()),
        }
    }

    /// [`Table::put`] of a `key` the caller knows no stored record has, as a posting of a document number its
    /// own transaction allocated. On redb the same write as [`Table::put`]. On PostgreSQL the record is sent
    /// without conflict handling, and where one flush holds 1,000 or more of one kind, by binary `COPY`
    /// (PostgreSQL's fastest load path; docs/deploy.md, "Postings by `COPY`").
    ///
    /// # Errors
    /// Storage errors; as [`Table::put`]. A key that is stored after all fails the transaction, which must then
    /// be dropped, so nothing is overwritten: on redb this call returns [`crate::ErrorKind::Internal`], on
    /// PostgreSQL the transaction's next statement or its commit returns a storage error (`unique_violation`).
    pub fn put_new<'k, 'v>(
        &mut self,
        key: impl Borrow<Borrowed<'k, K>>,
        value: impl Borrow<Borrowed<'v, V>>,
    ) -> Result<()> {
        match &mut self.0 {
            TableInner::Redb(t) => match t.insert(key, value)? {
                None => Ok(()),
                Some(_) => Err(crate::error::Error::new(
                    crate::error::ErrorKind::Internal,
                    "a record put as new replaced a stored one: the write is abandoned",
                )),
            },
            TableInner::RedbRead(_) => Err(read_only()),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.put_new(key.borrow(), value.borrow()),
        }
    }

    /// Deletes the record under `key`, returning its value.
    ///
    /// # Errors
    /// Storage errors.
    pub fn remove<'a>(&mut self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<Got<'_, V>>> {
        Ok(match &mut self.0 {
            TableInner::Redb(t) => t.remove(key)?.map(|g| Got(GotInner::Redb(g))),
            TableInner::RedbRead(_) => return Err(read_only()),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.remove(key.borrow())?.map(Got::owned),
        })
    }

    /// Keeps only the records for which `keep` returns true.
    ///
    /// # Errors
    /// Storage errors.
    pub fn retain<F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool>(&mut self, keep: F) -> Result<()> {
        match &mut self.0 {
            TableInner::Redb(t) => t.retain(keep),
            TableInner::RedbRead(_) => Err(read_only()),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.retain_in::<Borrowed<'static, K>, F>(.., keep),
        }
    }

    /// Deletes every record of the kind (on PostgreSQL one statement, where `retain` deletes row by row).
    ///
    /// # Errors
    /// Storage errors.
    pub fn clear(&mut self) -> Result<()> {
        match &mut self.0 {
            TableInner::Redb(t) => t.retain(|_, _| false),
            TableInner::RedbRead(_) => Err(read_only()),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.clear(),
        }
    }

    /// Keeps only the records in `range` for which `keep` returns true; records outside `range` stay.
    ///
    /// # Errors
    /// Storage errors.
    pub fn retain_in<'a, KR, F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool>(
        &mut self,
        range: impl RangeBounds<KR> + 'a,
        keep: F,
    ) -> Result<()>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a,
    {
        match &mut self.0 {
            TableInner::Redb(t) => t.retain_in(range, keep),
            TableInner::RedbRead(_) => Err(read_only()),
            #[cfg(feature = "postgres")]
            TableInner::Pg(t) => t.retain_in(range, keep),
        }
    }
}
