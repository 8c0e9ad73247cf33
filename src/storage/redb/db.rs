//! The storage port's types as the redb backend implements them: the database handle, read and write
//! transactions, and typed handles on one record kind. Every type is a thin newtype over redb's own (no copy,
//! no boxing on the hot path); `crate::storage`'s port types dispatch to them.

use std::borrow::Borrow;
use std::ops::RangeBounds;
use std::path::Path;

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableHandle};

use crate::error::{Error, ErrorKind, Result};
use crate::storage::record::Record;
use crate::storage::{Device, Durability, Kind, KindStats};

/// A key type a record kind may use: `&str`, `u64` and tuples of them (redb's `Key`).
pub trait KeyType: redb::Key + Record + 'static {}
impl<T: redb::Key + Record + 'static> KeyType for T {}

/// A value type a record kind may hold: `&[u8]` (a record), `&str`, `u64`, `f64`, `(u64, u64)`, `()`.
pub trait ValueType: redb::Value + Record + 'static {}
impl<T: redb::Value + Record + 'static> ValueType for T {}

/// The borrowed form of a key or value type (`&str` for `&str`, a tuple of borrows for a tuple).
pub type Borrowed<'a, T> = <T as redb::Value>::SelfType<'a>;

fn def<K: KeyType, V: ValueType>(kind: Kind<K, V>) -> redb::TableDefinition<'static, K, V> {
    redb::TableDefinition::new(kind.name())
}

/// An open store database: one file, locked for this process.
pub struct RedbDb {
    /// Read-locked only while a transaction begins (transactions own their state), write-locked by a compaction
    /// step, which redb refuses while any transaction is open.
    inner: parking_lot::RwLock<Handle>,
}

/// The file opened for reading and writing, or for reading only ([`RedbDb::open_read_only`]).
enum Handle {
    ReadWrite(redb::Database),
    ReadOnly(redb::ReadOnlyDatabase),
}

impl Handle {
    fn rw(&self) -> Result<&redb::Database> {
        match self {
            Handle::ReadWrite(d) => Ok(d),
            Handle::ReadOnly(_) => Err(Error::new(ErrorKind::Internal, "a write on a store opened read-only")),
        }
    }
}

impl std::fmt::Debug for RedbDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbDb").finish_non_exhaustive()
    }
}

/// A [`Device`] as redb's storage backend.
#[derive(Debug)]
struct DeviceBackend(Box<dyn Device>);

impl redb::StorageBackend for DeviceBackend {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read(offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        self.0.close()
    }
}

/// The plain file as a [`Device`]: what a [`crate::StorageFactory`] wraps to inject faults.
#[derive(Debug)]
pub struct FileDevice(redb::backends::FileBackend);

impl FileDevice {
    /// Opens (creating if missing) the file at `path` for reading and writing.
    ///
    /// # Errors
    /// The I/O error of opening the file.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        redb::backends::FileBackend::new(file).map(FileDevice).map_err(std::io::Error::other)
    }
}

impl Device for FileDevice {
    fn len(&self) -> std::io::Result<u64> {
        redb::StorageBackend::len(&self.0)
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        redb::StorageBackend::read(&self.0, offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        redb::StorageBackend::set_len(&self.0, len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        redb::StorageBackend::sync_data(&self.0)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        redb::StorageBackend::write(&self.0, offset, data)
    }
    fn close(&self) -> std::io::Result<()> {
        redb::StorageBackend::close(&self.0)
    }
}

impl RedbDb {
    /// Opens or creates the database at `path` with a page cache of `cache_bytes`, on `device` in place of the
    /// file when given (fault injection).
    ///
    /// # Errors
    /// [`ErrorKind::Locked`] when another process holds the file, [`ErrorKind::Corrupt`] for a damaged file or
    /// another file format, [`ErrorKind::Io`] for I/O errors.
    pub fn open(path: &Path, cache_bytes: usize, device: Option<Box<dyn Device>>) -> Result<RedbDb> {
        let mut builder = redb::Builder::new();
        builder.set_cache_size(cache_bytes);
        let inner = match device {
            Some(d) => builder.create_with_backend(DeviceBackend(d))?,
            None => builder.create(path)?,
        };
        Ok(RedbDb { inner: parking_lot::RwLock::new(Handle::ReadWrite(inner)) })
    }

    /// Opens the existing file at `path` for reading only: nothing is written to it, not even its header
    /// (`engram upgrade --check`). Writes on it are an [`ErrorKind::Internal`] error. `None` when the file was
    /// not closed cleanly and needs the repair that only a read-write open makes.
    ///
    /// # Errors
    /// As [`RedbDb::open`].
    pub fn open_read_only(path: &Path, cache_bytes: usize, device: Option<Box<dyn Device>>) -> Result<Option<RedbDb>> {
        let mut builder = redb::Builder::new();
        builder.set_cache_size(cache_bytes);
        let opened = match device {
            Some(d) => builder.open_read_only_with_backend(DeviceBackend(d)),
            None => builder.open_read_only(path),
        };
        match opened {
            Ok(d) => Ok(Some(RedbDb { inner: parking_lot::RwLock::new(Handle::ReadOnly(d)) })),
            Err(redb::DatabaseError::RepairAborted) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// A read transaction: a consistent snapshot of the last commit. Never blocks writers.
    ///
    /// # Errors
    /// Storage errors.
    pub fn read(&self) -> Result<RedbRead> {
        Ok(RedbRead(match &*self.inner.read() {
            Handle::ReadWrite(d) => d.begin_read()?,
            Handle::ReadOnly(d) => d.begin_read()?,
        }))
    }

    /// A write transaction. One at a time per database; a second waits. Committed with `durability`:
    /// [`Durability::Immediate`] is on disk when [`WriteTx::commit`] returns, [`Durability::Eventual`] at the
    /// next immediate commit.
    ///
    /// # Errors
    /// Storage errors.
    pub fn write(&self, durability: Durability) -> Result<RedbWrite> {
        let mut txn = self.inner.read().rw()?.begin_write()?;
        if durability == Durability::Eventual {
            txn.set_durability(redb::Durability::None)
                .map_err(|e| Error::new(ErrorKind::Internal, "setting durability failed").with_source(e))?;
        }
        Ok(RedbWrite(txn, None))
    }

    /// Bytes of the file's pages in use (allocated pages × page size): what a compaction could shrink it to.
    ///
    /// # Errors
    /// Storage errors.
    pub fn used_bytes(&self) -> Result<u64> {
        let w = self.inner.read().rw()?.begin_write()?;
        let st = w.stats()?;
        w.abort()?;
        Ok(st.allocated_pages() * st.page_size() as u64)
    }

    /// One compaction step: moves pages towards the front and truncates the file. `Ok(true)` when another step
    /// may shrink it further. No transaction may be open (redb refuses then: an error, nothing changed).
    ///
    /// # Errors
    /// Storage errors; the file stays valid.
    pub fn compact_step(&self) -> Result<bool> {
        match &mut *self.inner.write() {
            Handle::ReadWrite(d) => {
                d.compact().map_err(|e| Error::new(ErrorKind::Io, "compaction failed").with_source(e))
            }
            Handle::ReadOnly(_) => Ok(false),
        }
    }
}

/// A read transaction ([`Db::read`]).
pub struct RedbRead(redb::ReadTransaction);

impl RedbRead {
    /// The records of one kind, as of this transaction's snapshot.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`] when the kind exists with other key or value types.
    pub fn table<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<RedbReadTable<K, V>> {
        Ok(RedbReadTable(self.0.open_table(def(kind))?))
    }

    /// Bytes used by the record kind named `name` (zeros for a kind not created yet).
    ///
    /// # Errors
    /// Storage errors.
    pub fn kind_stats(&self, name: &str) -> Result<KindStats> {
        for handle in self.0.list_tables()? {
            if handle.name() == name {
                let st = self.0.open_untyped_table(handle)?.stats()?;
                return Ok(KindStats {
                    stored_bytes: st.stored_bytes(),
                    metadata_bytes: st.metadata_bytes(),
                    fragmented_bytes: st.fragmented_bytes(),
                });
            }
        }
        Ok(KindStats::default())
    }
}

/// A write transaction ([`Db::write`]). Dropped without [`WriteTx::commit`], it writes nothing.
pub struct RedbWrite(redb::WriteTransaction, Option<Capture>);

/// What a write transaction captures ([`RedbWrite::capture`]): the kinds, and the keys written or removed in
/// them so far, each as the kind's name and redb's bytes of the key.
struct Capture {
    kinds: &'static [&'static str],
    touched: Touched,
}

/// The keys a capturing write transaction wrote or removed: (kind name, redb's bytes of the key), in the order
/// of the writes, repeats included.
pub type Touched = std::cell::RefCell<Vec<(&'static str, Vec<u8>)>>;

impl RedbWrite {
    /// The records of one kind, for reading and writing; the kind is created empty on first use.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`] when the kind exists with other key or value types.
    pub fn table<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<RedbTable<'_, K, V>> {
        let touched = self.1.as_ref().filter(|c| c.kinds.contains(&kind.name())).map(|c| (kind.name(), &c.touched));
        Ok(RedbTable(self.0.open_table(def(kind))?, touched))
    }

    /// From now on, notes the key of every write and removal in the kinds named `kinds` (tables opened before
    /// this call are not watched).
    pub fn capture(&mut self, kinds: &'static [&'static str]) {
        self.1 = Some(Capture { kinds, touched: Touched::default() });
    }

    /// The keys noted since [`RedbWrite::capture`] (emptied); none when the transaction does not capture.
    pub fn take_touched(&self) -> Vec<(&'static str, Vec<u8>)> {
        self.1.as_ref().map(|c| c.touched.take()).unwrap_or_default()
    }

    /// Makes every write of the transaction visible (and durable, as [`Db::write`] asked) at once.
    ///
    /// # Errors
    /// Storage errors; nothing is written then.
    pub fn commit(self) -> Result<()> {
        Ok(self.0.commit()?)
    }
}

/// One stored key or value, borrowed from the transaction's pages.
pub struct RedbGot<'a, V: ValueType>(redb::AccessGuard<'a, V>);

impl<V: ValueType> RedbGot<'_, V> {
    /// The stored value.
    pub fn value(&self) -> Borrowed<'_, V> {
        self.0.value()
    }
}

type Pair<'a, K, V> = (RedbGot<'a, K>, RedbGot<'a, V>);

/// Records of one kind in key order, both ends.
pub struct RedbRows<'a, K: KeyType, V: ValueType>(redb::Range<'a, K, V>);

impl<'a, K: KeyType, V: ValueType> Iterator for RedbRows<'a, K, V> {
    type Item = Result<Pair<'a, K, V>>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|r| r.map(|(k, v)| (RedbGot(k), RedbGot(v))).map_err(Error::from))
    }
}

impl<K: KeyType, V: ValueType> DoubleEndedIterator for RedbRows<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|r| r.map(|(k, v)| (RedbGot(k), RedbGot(v))).map_err(Error::from))
    }
}

macro_rules! readable {
    ($t:ident $(<$l:lifetime>)?) => {
        impl<$($l,)? K: KeyType, V: ValueType> $t<$($l,)? K, V> {
            pub fn get<'a>(&self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<RedbGot<'_, V>>> {
                Ok(self.0.get(key)?.map(RedbGot))
            }
            pub fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<RedbRows<'_, K, V>>
            where
                KR: Borrow<Borrowed<'a, K>> + 'a,
            {
                Ok(RedbRows(self.0.range(range)?))
            }
            pub fn iter(&self) -> Result<RedbRows<'_, K, V>> {
                Ok(RedbRows(self.0.iter()?))
            }
            pub fn len(&self) -> Result<u64> {
                Ok(self.0.len()?)
            }
            pub fn first(&self) -> Result<Option<Pair<'_, K, V>>> {
                Ok(self.0.first()?.map(|(k, v)| (RedbGot(k), RedbGot(v))))
            }
            pub fn last(&self) -> Result<Option<Pair<'_, K, V>>> {
                Ok(self.0.last()?.map(|(k, v)| (RedbGot(k), RedbGot(v))))
            }
        }
    };
}

/// One record kind in a read transaction.
pub struct RedbReadTable<K: KeyType, V: ValueType>(redb::ReadOnlyTable<K, V>);

/// One record kind in a write transaction: reads see the transaction's own writes.
pub struct RedbTable<'t, K: KeyType, V: ValueType>(redb::Table<'t, K, V>, Option<(&'static str, &'t Touched)>);

readable!(RedbReadTable);
readable!(RedbTable<'t>);

impl<K: KeyType, V: ValueType> RedbTable<'_, K, V> {
    fn note(&self, key: &Borrowed<'_, K>) {
        if let Some((kind, touched)) = self.1 {
            touched.borrow_mut().push((kind, K::as_bytes(key).as_ref().to_vec()));
        }
    }

    pub fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<Borrowed<'k, K>>,
        value: impl Borrow<Borrowed<'v, V>>,
    ) -> Result<Option<RedbGot<'_, V>>> {
        self.note(key.borrow());
        Ok(self.0.insert(key, value)?.map(RedbGot))
    }

    pub fn remove<'a>(&mut self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<RedbGot<'_, V>>> {
        self.note(key.borrow());
        Ok(self.0.remove(key)?.map(RedbGot))
    }

    pub fn retain<F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool>(&mut self, keep: F) -> Result<()> {
        let keep = noting::<K, V, F>(self.1, keep);
        Ok(self.0.retain(keep)?)
    }

    pub fn retain_in<'a, KR, F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool>(
        &mut self,
        range: impl RangeBounds<KR> + 'a,
        keep: F,
    ) -> Result<()>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a,
    {
        let keep = noting::<K, V, F>(self.1, keep);
        Ok(self.0.retain_in(range, keep)?)
    }
}

/// `keep`, noting in `touched` (a captured kind's name and list) the key of every row it drops.
fn noting<'t, K: KeyType, V: ValueType, F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool + 't>(
    touched: Option<(&'static str, &'t Touched)>,
    mut keep: F,
) -> impl for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool + 't {
    move |k, v| {
        let bytes = touched.map(|_| K::as_bytes(&k).as_ref().to_vec());
        let kept = keep(k, v);
        if let (false, Some((kind, t)), Some(bytes)) = (kept, touched, bytes) {
            t.borrow_mut().push((kind, bytes));
        }
        kept
    }
}
