//! Helpers over the port: the store's write transaction with its generation bump, record reads, and prefix
//! scans of tuple keys.

use super::codec as schema;
use super::{KeyType, Readable, ValueType};
use crate::error::Result;

/// `META[key]` as a little-endian u64.
pub(crate) fn meta_u64(t: &impl Readable<&'static str, &'static [u8]>, key: &str) -> Result<Option<u64>> {
    Ok(t.get(key)?.and_then(|v| v.value().try_into().ok().map(u64::from_le_bytes)))
}

/// The second key parts and values of a table with a 2-tuple key whose first part equals `first`.
pub(crate) fn range_prefix2<'a, V: ValueType>(
    t: &'a impl Readable<(&'static str, &'static str), V>,
    first: &str,
) -> Result<Vec<(String, super::Got<'a, V>)>> {
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
    t: &impl Readable<(&'static str, &'static str, &'static str), ()>,
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
    t: &impl Readable<(&'static str, &'static str, &'static str), ()>,
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
pub(crate) fn get_record<K: KeyType, T: crate::storage::codec::Versioned>(
    t: &impl Readable<K, &'static [u8]>,
    key: super::Borrowed<'_, K>,
) -> Result<Option<T>> {
    match t.get(key)? {
        Some(v) => Ok(Some(schema::decode(v.value())?)),
        None => Ok(None),
    }
}
