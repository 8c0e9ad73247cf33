//! The domain's records: every stored kind is opened here and nowhere else, with its value codec on the kind,
//! so the rest of the domain reads and writes typed records and never encodes by hand (docs/storage.md;
//! docs/design.md, "Changing the format").
//!
//! One module per kind family owns those kinds' storage: [`memory`], [`label`], [`entity`], [`thread`],
//! [`source`], [`relation`], [`graph`], [`space`], [`working_memory`], [`review`] and [`meta`]. Each opens its kinds
//! in a read or a write transaction ([`Tx`]); a kind holding records opens as [`Records`] (values decoded to
//! the record type, older versions upgraded on read), a kind holding a typed column (`u64`, `&str`, `()`, ...)
//! as the port's table.
//!
//! | kind (table) | record | version and history |
//! |---|---|---|
//! | `memories` | [`StoredMemory`] | `StoredMemory::VERSION`; each older layout is a frozen `StoredMemoryV<n>` in [`memory`] |
//! | `vectors` | [`Vector`] (`f32`s; stored half precision) | tag `0xF1`; untagged `f32`s: format 1 |
//! | `catalog` (database stores only) | `DocMeta`, beside typed columns | 1; added with PostgreSQL schema 2 |
//! | every other record table | its model type | 1; unchanged since format 1 |

use std::marker::PhantomData;

use crate::error::Result;
use crate::storage::codec::{Versioned, decode, encode, version_one};
use crate::storage::{Borrowed, Got, KeyType, Kind, ReadTable, ReadTx, Readable, Rows, Table, ValueType, WriteTx};

pub(crate) mod ahead;
pub(crate) mod catalog;
pub(crate) mod entity;
pub(crate) mod graph;
pub(crate) mod label;
pub(crate) mod memory;
pub(crate) mod meta;
pub(crate) mod relation;
pub(crate) mod review;
pub(crate) mod source;
pub(crate) mod space;
pub(crate) mod sync;
pub(crate) mod thread;
pub(crate) mod working_memory;

pub(crate) use memory::{StoredMemory, StoredMemoryV1, Vector};

/// `f` of the value stored under `key` in `t`, borrowed (a document's bytes are read without a copy), or `None`
/// when nothing is stored: for kinds without a record type (an index from a key to an id, a weight, a count, a
/// document's text or original file), opened once by the caller and read many times.
///
/// # Errors
/// Storage errors.
pub(crate) fn value_at<'k, K: KeyType, V: ValueType, O>(
    t: &impl Readable<K, V>,
    key: Borrowed<'k, K>,
    f: impl FnOnce(Borrowed<'_, V>) -> O,
) -> Result<Option<O>> {
    Ok(t.get(key)?.map(|v| f(v.value())))
}

version_one!(
    crate::model::Space,
    crate::model::Label,
    crate::model::Thread,
    crate::model::Message,
    crate::model::Entity,
    crate::model::Source,
    crate::model::Chunk,
    super::Community,
    super::MemoryRelation,
    super::ReviewEvent,
    super::WorkingMemory,
    super::LabelMerge,
    crate::model::ItemClock,
    crate::model::Change,
);

/// A record value column.
pub(crate) type Bytes = &'static [u8];
/// A one-part text key.
pub(crate) type K1 = &'static str;
/// A two-part text key (space id first wherever the kind belongs to a space).
pub(crate) type K2 = (&'static str, &'static str);
/// A three-part text key (an edge: space id, one end, the other end).
pub(crate) type K3 = (&'static str, &'static str, &'static str);

/// A text key with a number: (space or source id, docno or index).
pub(crate) type KN = (&'static str, u64);
/// Two text parts and a number: (space id, thread id, order index) and the like.
pub(crate) type K2N = (&'static str, &'static str, u64);

/// The records of kind `K -> R` opened in transaction type `X`.
pub(crate) type Opened<'t, X, K, R> = Records<<X as Tx>::Table<'t, K, Bytes>, K, R>;

/// A transaction a kind opens in: [`ReadTx`] (a snapshot) or [`WriteTx`] (sees its own writes).
pub(crate) trait Tx {
    /// The port's table of one kind in this transaction.
    type Table<'t, K: KeyType, V: ValueType>: Readable<K, V>
    where
        Self: 't;

    /// Opens `kind`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when the kind exists with other key or value types.
    fn open<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<Self::Table<'_, K, V>>;
}

impl<X: Tx> Tx for &X {
    type Table<'t, K: KeyType, V: ValueType>
        = X::Table<'t, K, V>
    where
        Self: 't;

    fn open<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<Self::Table<'_, K, V>> {
        (**self).open(kind)
    }
}

impl Tx for ReadTx {
    type Table<'t, K: KeyType, V: ValueType> = ReadTable<K, V>;

    fn open<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<ReadTable<K, V>> {
        self.table(kind)
    }
}

impl Tx for WriteTx {
    type Table<'t, K: KeyType, V: ValueType> = Table<'t, K, V>;

    fn open<K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> Result<Table<'_, K, V>> {
        self.table(kind)
    }
}

/// How a record type is stored: [`Versioned`] records are a version byte and postcard ([`encode`],
/// [`decode`]); [`Vector`]s are half-precision floats.
pub(crate) trait Codec: Sized {
    /// The stored bytes.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Internal`] when the value does not encode.
    fn to_bytes(&self) -> Result<Vec<u8>>;

    /// The value from its stored bytes, older versions upgraded.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Corrupt`] when the bytes do not decode.
    fn from_bytes(bytes: &[u8]) -> Result<Self>;
}

impl<T: Versioned> Codec for T {
    fn to_bytes(&self) -> Result<Vec<u8>> {
        encode(self)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        decode(bytes)
    }
}

/// Opens every kind of [`crate::storage::tables::ALL`] once, which creates the missing ones (a new store, or
/// a kind a later release added), so that read transactions find them all.
///
/// # Errors
/// Storage errors.
pub(crate) fn create_all(txn: &WriteTx) -> Result<()> {
    use crate::storage::tables::*;
    macro_rules! create {
        ($($k:ident),* $(,)?) => {$( txn.open($k)?; )*};
    }
    create!(META, SPACES, MEMORIES, MEMORY_SPACE, VECTORS, POSTINGS, LEX_STATS, LABELS, MEMORY_LABELS, LABEL_MEMORIES);
    create!(THREADS, THREAD_SPACES, MESSAGES, MESSAGE_KEYS, ENTITIES, ENTITY_KEYS, MENTIONS, ENTITY_MEMORIES);
    create!(RELATES_TO, WORKING_MEMORY, RELATIONS, MEMORY_RELATIONS, RELATION_SPACE, LABEL_MERGES, COMMUNITIES);
    create!(COMMUNITY_MEMBERS, ENTITY_COMMUNITY, MEMORY_PAGERANK, CRYSTAL_SOURCES, SOURCES, SOURCE_SPACE, SOURCE_SHA);
    create!(SOURCE_TEXT, SOURCE_FILES, SOURCE_CHUNKS, REVIEWS, CATALOG, SYNC_ITEMS, SYNC_LOG);
    Ok(())
}

/// The name of every kind, in declaration order (for storage statistics).
pub(crate) fn kind_names() -> impl Iterator<Item = &'static str> {
    crate::storage::tables::ALL.iter().map(|k| k.name)
}

/// The kind `kind` opened in `tx` as records of type `R`.
fn records<X: Tx, K: KeyType, R: Codec>(tx: &X, kind: Kind<K, Bytes>) -> Result<Records<X::Table<'_, K, Bytes>, K, R>> {
    Ok(Records { table: tx.open(kind)?, types: PhantomData })
}

/// One record kind of a transaction, typed: keys of type `K`, values decoded to `R` on every read (older
/// versions upgraded) and encoded at the current version on every write.
pub(crate) struct Records<T, K, R> {
    table: T,
    types: PhantomData<fn() -> (K, R)>,
}

/// A decoded row: the stored key and the record.
pub(crate) type Row<'a, K, R> = (Got<'a, K>, R);

fn decoded<'a, K: KeyType, R: Codec>(
    rows: Rows<'a, K, Bytes>,
) -> impl DoubleEndedIterator<Item = Result<Row<'a, K, R>>> {
    rows.map(|row| {
        let (k, v) = row?;
        Ok((k, R::from_bytes(v.value())?))
    })
}

impl<T: Readable<K, Bytes>, K: KeyType, R: Codec> Records<T, K, R> {
    /// The record under `key`, if any.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when the stored bytes do not decode.
    pub(crate) fn get<'a>(&self, key: Borrowed<'a, K>) -> Result<Option<R>> {
        self.table.get(key)?.map(|v| R::from_bytes(v.value())).transpose()
    }

    /// The records under each of `keys`, in their order (one statement on PostgreSQL: [`Readable::get_many`]).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when stored bytes do not decode.
    pub(crate) fn get_many<'a>(&self, keys: &[Borrowed<'a, K>]) -> Result<Vec<Option<R>>> {
        self.table.get_many(keys)?.into_iter().map(|v| v.map(|v| R::from_bytes(v.value())).transpose()).collect()
    }

    /// Whether a record is stored under `key` (without decoding it).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn contains<'a>(&self, key: Borrowed<'a, K>) -> Result<bool> {
        Ok(self.table.get(key)?.is_some())
    }

    /// The records whose keys fall in `range`, in key order, decoded.
    ///
    /// # Errors
    /// Storage errors (each row: also [`crate::ErrorKind::Corrupt`]).
    pub(crate) fn range<'a, KR>(
        &self,
        range: impl std::ops::RangeBounds<KR> + 'a,
    ) -> Result<impl DoubleEndedIterator<Item = Result<Row<'_, K, R>>>>
    where
        KR: std::borrow::Borrow<Borrowed<'a, K>> + 'a,
    {
        Ok(decoded(self.table.range(range)?))
    }

    /// Every record of the kind, in key order, decoded.
    ///
    /// # Errors
    /// Storage errors (each row: also [`crate::ErrorKind::Corrupt`]).
    pub(crate) fn iter(&self) -> Result<impl DoubleEndedIterator<Item = Result<Row<'_, K, R>>>> {
        Ok(decoded(self.table.iter()?))
    }

    /// Every record in key order with its key borrowed into `f`: a lazy iterator of what `f` makes of them
    /// (fallible: `f` may read other kinds).
    ///
    /// # Errors
    /// Storage errors (each row: also [`crate::ErrorKind::Corrupt`], or `f`'s error).
    pub(crate) fn map_each<'a, O: 'a>(
        &'a self,
        mut f: impl FnMut(crate::storage::Borrowed<'_, K>, R) -> Result<O> + 'a,
    ) -> Result<impl Iterator<Item = Result<O>> + 'a> {
        Ok(self.iter()?.map(move |row| row.and_then(|(k, r)| f(k.value(), r))))
    }

    /// The number of records.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn len(&self) -> Result<u64> {
        self.table.len()
    }

    /// How many records have a key `keep` accepts (without decoding them).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn count_keys(&self, mut keep: impl FnMut(Borrowed<'_, K>) -> bool) -> Result<u64> {
        let mut n = 0;
        for row in self.table.iter()? {
            n += u64::from(keep(row?.0.value()));
        }
        Ok(n)
    }

    /// How many records have keys in `range` (without decoding them).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn count_keys_range<'a, KR>(&self, range: impl std::ops::RangeBounds<KR> + 'a) -> Result<u64>
    where
        KR: std::borrow::Borrow<Borrowed<'a, K>> + 'a,
    {
        let mut n = 0;
        for row in self.table.range(range)? {
            row?;
            n += 1;
        }
        Ok(n)
    }

    /// Whether the kind holds no record.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn is_empty(&self) -> Result<bool> {
        self.table.is_empty()
    }

    /// Every record, decoded, in key order.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn all(&self) -> Result<Vec<R>> {
        self.iter()?.map(|r| r.map(|(_, v)| v)).collect()
    }
}

impl<T: Readable<K2, Bytes>, R: Codec> Records<T, K2, R> {
    /// The records of `space` (the kinds whose key is `(space id, id)`), with their ids, in id order.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn in_space(&self, space: &str) -> Result<Vec<(String, R)>> {
        let mut out = Vec::new();
        self.each_in_space(space, |id, r| {
            out.push((id.to_string(), r));
            true
        })?;
        Ok(out)
    }

    /// How many records `space` holds, counting up to `limit` (without decoding them).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn count_keys_in(&self, space: &str, limit: usize) -> Result<usize> {
        let mut n = 0;
        for row in self.table.range((space, "")..)? {
            if n == limit || row?.0.value().0 != space {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    /// How many records `space` holds (without decoding them).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn count_in_space(&self, space: &str) -> Result<usize> {
        self.count_keys_in(space, usize::MAX)
    }
}

impl<K: KeyType, R: Codec> Records<Table<'_, K, Bytes>, K, R> {
    /// Stores `record` under `key` at its kind's current version, replacing any record there.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] when the record does not encode.
    pub(crate) fn put<'a>(&mut self, key: Borrowed<'a, K>, record: &R) -> Result<()> {
        let bytes = record.to_bytes()?;
        self.table.put(key, bytes.as_slice())
    }

    /// [`Records::put`] of a `key` no stored record has, as a key with a document number its own transaction
    /// allocated ([`Table::put_new`]: in bulk on PostgreSQL, by binary `COPY`).
    ///
    /// # Errors
    /// As [`Records::put`]; a key that is stored after all fails the transaction ([`Table::put_new`]).
    pub(crate) fn put_new<'a>(&mut self, key: Borrowed<'a, K>, record: &R) -> Result<()> {
        let bytes = record.to_bytes()?;
        self.table.put_new(key, bytes.as_slice())
    }

    /// Stores bytes as they are, for migrations and tests that write older versions.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn put_raw<'a>(&mut self, key: Borrowed<'a, K>, bytes: &[u8]) -> Result<()> {
        self.table.put(key, bytes)
    }

    /// Deletes the record under `key`; whether there was one.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove<'a>(&mut self, key: Borrowed<'a, K>) -> Result<bool> {
        Ok(self.table.remove(key)?.is_some())
    }

    /// Deletes the records whose keys fall in `range`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove_range<'a, KR>(&mut self, range: impl std::ops::RangeBounds<KR> + 'a) -> Result<()>
    where
        KR: std::borrow::Borrow<Borrowed<'a, K>> + 'a,
    {
        self.table.retain_in(range, |_, _| false)
    }

    /// Deletes every record of the kind.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn clear(&mut self) -> Result<()> {
        self.table.clear()
    }
}

impl<T: Readable<K, Bytes>, K: KeyType, R: crate::storage::codec::Versioned> Records<T, K, R> {
    /// Records stored at an older version than `R`'s current one (what a migration would rewrite).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn count_older(&self) -> Result<u64> {
        let mut n = 0;
        for row in self.table.iter()? {
            if crate::storage::codec::older_version::<R>(row?.1.value()).is_some() {
                n += 1;
            }
        }
        Ok(n)
    }
}

impl<R: crate::storage::codec::Versioned> Records<Table<'_, K2, Bytes>, K2, R> {
    /// Rewrites every record stored at an older version at `R`'s current one (read old, write new); returns
    /// how many. The keys are gathered first (about 50 bytes each), then each record is read, upgraded and
    /// written back.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when an old record does not decode.
    pub(crate) fn rewrite_older(&mut self) -> Result<u64> {
        let mut keys: Vec<(String, String)> = Vec::new();
        for row in self.table.iter()? {
            let (k, v) = row?;
            if crate::storage::codec::older_version::<R>(v.value()).is_some() {
                let (space, id) = k.value();
                keys.push((space.to_owned(), id.to_owned()));
            }
        }
        for (space, id) in &keys {
            if let Some(record) = self.get((space.as_str(), id.as_str()))? {
                self.put((space.as_str(), id.as_str()), &record)?;
            }
        }
        Ok(keys.len() as u64)
    }
}

impl<T: Readable<K2, Bytes>, R: Codec> Records<T, K2, R> {
    /// Calls `f` with each record of `space` (its id, the key's second part, and the record), in key order,
    /// until `f` returns false.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when a record does not decode.
    pub(crate) fn each_in_space(&self, space: &str, mut f: impl FnMut(&str, R) -> bool) -> Result<()> {
        for row in self.range((space, "")..)? {
            let (k, r) = row?;
            let (s, id) = k.value();
            if s != space || !f(id, r) {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with each record of every space (its space and id, the key's parts, and the record), in key
    /// order, until `f` returns false.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`] when a record does not decode.
    pub(crate) fn each(&self, mut f: impl FnMut(&str, &str, R) -> bool) -> Result<()> {
        for row in self.iter()? {
            let (k, r) = row?;
            let (space, id) = k.value();
            if !f(space, id, r) {
                break;
            }
        }
        Ok(())
    }
}
