//! Transaction helpers over the redb tables: the write transaction with its durability and generation bump,
//! record reads, and prefix scans of tuple keys.

use redb::ReadableTable;

use super::codec as schema;
use super::tables::*;
use crate::config::Durability;
use crate::error::{Error, ErrorKind, Result};

pub(crate) fn meta_u64(t: &impl ReadableTable<&'static str, &'static [u8]>, key: &str) -> Result<Option<u64>> {
    Ok(t.get(key)?.and_then(|v| v.value().try_into().ok().map(u64::from_le_bytes)))
}

/// One write transaction on `db`: runs `f`, bumps the store generation (`META.generation`) and commits with
/// `durability`. Nothing is written if `f` fails. (`KnowledgeStore::write_txn` on the store's database.)
pub(crate) fn write_txn_on<T>(
    db: &redb::Database,
    durability: Durability,
    f: impl FnOnce(&redb::WriteTransaction) -> Result<T>,
) -> Result<T> {
    let mut txn = db.begin_write()?;
    if durability == Durability::Eventual {
        txn.set_durability(redb::Durability::None)
            .map_err(|e| Error::new(ErrorKind::Internal, "setting durability failed").with_source(e))?;
    }
    let out = f(&txn)?;
    {
        let mut meta = txn.open_table(META)?;
        let g = meta_u64(&meta, "generation")?.unwrap_or(0) + 1;
        meta.insert("generation", g.to_le_bytes().as_slice())?;
    }
    txn.commit()?;
    Ok(out)
}

/// Iterates the keys of a table with a 2-tuple key whose first part equals `first`.
pub(crate) fn range_prefix2<'a, V: redb::Value + 'static>(
    t: &'a impl ReadableTable<(&'static str, &'static str), V>,
    first: &str,
) -> Result<Vec<(String, redb::AccessGuard<'a, V>)>> {
    let mut out = Vec::new();
    for row in t.range((first, "")..)? {
        let (k, v) = row?;
        let (a, b) = k.value();
        if a != first {
            break;
        }
        out.push((b.to_string(), v));
    }
    Ok(out)
}

/// The third parts of the 3-tuple keys whose first two parts are `(a, b)`.
pub(crate) fn range_prefix3(
    t: &impl ReadableTable<(&'static str, &'static str, &'static str), ()>,
    a: &str,
    b: &str,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for row in t.range((a, b, "")..)? {
        let (k, _) = row?;
        let (x, y, z) = k.value();
        if x != a || y != b {
            break;
        }
        out.push(z.to_string());
    }
    Ok(out)
}

/// How many 3-tuple keys have `(a, b)` as their first two parts.
pub(crate) fn range_prefix2_count(
    t: &impl ReadableTable<(&'static str, &'static str, &'static str), ()>,
    a: &str,
    b: &str,
) -> Result<u64> {
    let mut n = 0;
    for row in t.range((a, b, "")..)? {
        let (k, _) = row?;
        let (x, y, _) = k.value();
        if x != a || y != b {
            break;
        }
        n += 1;
    }
    Ok(n)
}

/// Decodes the record stored under `key`, if any.
pub(crate) fn get_record<K: redb::Key + 'static, T: serde::de::DeserializeOwned>(
    t: &impl ReadableTable<K, &'static [u8]>,
    key: K::SelfType<'_>,
) -> Result<Option<T>> {
    match t.get(key)? {
        Some(v) => Ok(Some(schema::decode(v.value())?)),
        None => Ok(None),
    }
}
