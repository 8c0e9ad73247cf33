//! The storage port's types as the redb backend implements them: the database handle, read and write
//! transactions, and typed handles on one record kind. Every type is a thin newtype over redb's own (no copy,
//! no boxing on the hot path); the domain sees only these names, re-exported by `crate::storage`.

use std::borrow::Borrow;
use std::ops::RangeBounds;
use std::path::Path;

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableHandle};

use crate::error::{Error, ErrorKind, Result};
use crate::storage::{Device, Durability, Kind};

/// A key type a record kind may use: `&str`, `u64` and tuples of them (redb's `Key`).
pub trait KeyType: redb::Key + 'static {}
impl<T: redb::Key + 'static> KeyType for T {}

/// A value type a record kind may hold: `&[u8]` (a record), `&str`, `u64`, `f64`, `(u64, u64)`, `()`.
pub trait ValueType: redb::Value + 'static {}
impl<T: redb::Value + 'static> ValueType for T {}

/// The borrowed form of a key or value type (`&str` for `&str`, a tuple of borrows for a tuple).
pub type Borrowed<'a, T> = <T as redb::Value>::SelfType<'a>;

fn def<K: KeyType, V: ValueType>(kind: Kind<K, V>) -> redb::TableDefinition<'static, K, V> {
    redb::TableDefinition::new(kind.name())
}

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

/// An open store database: one file, locked for this process.
pub struct Db {
    inner: redb::Database,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").finish_non_exhaustive()
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

impl Db {
    /// Opens or creates the database at `path` with a page cache of `cache_bytes`, on `device` in place of the
    /// file when given (fault injection).
    ///
    /// # Errors
    /// [`ErrorKind::Locked`] when another process holds the file, [`ErrorKind::Corrupt`] for a damaged file or
    /// another file format, [`ErrorKind::Io`] for I/O errors.
    pub fn open(path: &Path, cache_bytes: usize, device: Option<Box<dyn Device>>) -> Result<Db> {
        let mut builder = redb::Builder::new();
        builder.set_cache_size(cache_bytes);
        let inner = match device {
            Some(d) => builder.create_with_backend(DeviceBackend(d))?,
            None => builder.create(path)?,
        };
        Ok(Db { inner })
    }

    /// A read transaction: a consistent snapshot of the last commit. Never blocks writers.
    ///
    /// # Errors
    /// Storage errors.
    pub fn read(&self) -> Result<ReadTx> {
        Ok(ReadTx(self.inner.begin_read()?))
    }

    /// A write transaction. One at a time per database; a second waits. Committed with `durability`:
    /// [`Durability::Immediate`] is on disk when [`WriteTx::commit`] returns, [`Durability::Eventual`] at the
    /// next immediate commit.
    ///
    /// # Errors
    /// Storage errors.
    pub fn write(&self, durability: Durability) -> Result<WriteTx> {
        let mut txn = self.inner.begin_write()?;
        if durability == Durability::Eventual {
            txn.set_durability(redb::Durability::None)
                .map_err(|e| Error::new(ErrorKind::Internal, "setting durability failed").with_source(e))?;
        }
        Ok(WriteTx(txn))
    }

    /// Bytes of the file's pages in use (allocated pages × page size): what a compaction could shrink it to.
    ///
    /// # Errors
    /// Storage errors.
    pub fn used_bytes(&self) -> Result<u64> {
        let w = self.inner.begin_write()?;
        let st = w.stats()?;
        w.abort()?;
        Ok(st.allocated_pages() * st.page_size() as u64)
    }

    /// One compaction step: moves pages towards the front and truncates the file. `Ok(true)` when another step
    /// may shrink it further. Needs the only handle on the database (no open transaction).
    ///
    /// # Errors
    /// Storage errors; the file stays valid.
    pub fn compact_step(&mut self) -> Result<bool> {
        self.inner.compact().map_err(|e| Error::new(ErrorKind::Io, "compaction failed").with_source(e))
    }
}

/// A read transaction ([`Db::read`]).
pub struct ReadTx(redb::ReadTransaction);

impl ReadTx {
    /// The records of one kind, as of this transaction's snapshot.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`] when the kind exists with other key or value types.
    pub fn table<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<ReadTable<K, V>> {
        Ok(ReadTable(self.0.open_table(def(kind))?))
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
pub struct WriteTx(redb::WriteTransaction);

impl WriteTx {
    /// The records of one kind, for reading and writing; the kind is created empty on first use.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Corrupt`] when the kind exists with other key or value types.
    pub fn table<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<Table<'_, K, V>> {
        Ok(Table(self.0.open_table(def(kind))?))
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
pub struct Got<'a, V: ValueType>(redb::AccessGuard<'a, V>);

impl<V: ValueType> Got<'_, V> {
    /// The stored value.
    pub fn value(&self) -> Borrowed<'_, V> {
        self.0.value()
    }
}

/// Records of one kind in key order (both ends: `.rev()`, `.next_back()`), from [`Readable::range`] or
/// [`Readable::iter`]. Each item is a storage result.
pub struct Rows<'a, K: KeyType, V: ValueType>(redb::Range<'a, K, V>);

impl<'a, K: KeyType, V: ValueType> Iterator for Rows<'a, K, V> {
    type Item = Result<(Got<'a, K>, Got<'a, V>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|r| r.map(|(k, v)| (Got(k), Got(v))).map_err(Error::from))
    }
}

impl<K: KeyType, V: ValueType> DoubleEndedIterator for Rows<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|r| r.map(|(k, v)| (Got(k), Got(v))).map_err(Error::from))
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
    /// prefix scan is `(a, "")..` stopped at the first key whose first part differs.
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

    /// The record with the smallest key.
    ///
    /// # Errors
    /// Storage errors.
    #[allow(clippy::type_complexity)]
    fn first(&self) -> Result<Option<(Got<'_, K>, Got<'_, V>)>>;

    /// The record with the largest key.
    ///
    /// # Errors
    /// Storage errors.
    #[allow(clippy::type_complexity)]
    fn last(&self) -> Result<Option<(Got<'_, K>, Got<'_, V>)>>;
}

macro_rules! readable {
    ($t:ident $(<$l:lifetime>)?) => {
        impl<$($l,)? K: KeyType, V: ValueType> Readable<K, V> for $t<$($l,)? K, V> {
            fn get<'a>(&self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<Got<'_, V>>> {
                Ok(self.0.get(key)?.map(Got))
            }
            fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<Rows<'_, K, V>>
            where
                KR: Borrow<Borrowed<'a, K>> + 'a,
            {
                Ok(Rows(self.0.range(range)?))
            }
            fn iter(&self) -> Result<Rows<'_, K, V>> {
                Ok(Rows(self.0.iter()?))
            }
            fn len(&self) -> Result<u64> {
                Ok(self.0.len()?)
            }
            fn first(&self) -> Result<Option<(Got<'_, K>, Got<'_, V>)>> {
                Ok(self.0.first()?.map(|(k, v)| (Got(k), Got(v))))
            }
            fn last(&self) -> Result<Option<(Got<'_, K>, Got<'_, V>)>> {
                Ok(self.0.last()?.map(|(k, v)| (Got(k), Got(v))))
            }
        }
    };
}

/// One record kind in a read transaction ([`ReadTx::table`]).
pub struct ReadTable<K: KeyType, V: ValueType>(redb::ReadOnlyTable<K, V>);

/// One record kind in a write transaction ([`WriteTx::table`]): reads see the transaction's own writes.
pub struct Table<'t, K: KeyType, V: ValueType>(redb::Table<'t, K, V>);

readable!(ReadTable);
readable!(Table<'t>);

impl<K: KeyType, V: ValueType> Table<'_, K, V> {
    /// Stores `value` under `key`, replacing and returning any value there.
    ///
    /// # Errors
    /// Storage errors; [`ErrorKind::Internal`] for a value over 3 GiB.
    pub fn insert<'k, 'v>(
        &mut self,
        key: impl Borrow<Borrowed<'k, K>>,
        value: impl Borrow<Borrowed<'v, V>>,
    ) -> Result<Option<Got<'_, V>>> {
        Ok(self.0.insert(key, value)?.map(Got))
    }

    /// Deletes the record under `key`, returning its value.
    ///
    /// # Errors
    /// Storage errors.
    pub fn remove<'a>(&mut self, key: impl Borrow<Borrowed<'a, K>>) -> Result<Option<Got<'_, V>>> {
        Ok(self.0.remove(key)?.map(Got))
    }

    /// Keeps only the records for which `keep` returns true.
    ///
    /// # Errors
    /// Storage errors.
    pub fn retain<F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool>(&mut self, keep: F) -> Result<()> {
        Ok(self.0.retain(keep)?)
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
        Ok(self.0.retain_in(range, keep)?)
    }
}
