//! Helpers over the port: prefix scans of edge kinds (3-tuple keys with no value).

use super::{Borrowed, KeyType, Readable, Rows, ValueType};
use crate::error::Result;

/// The third parts of the 3-tuple keys whose first two parts are `(a, b)`, in order (the values unread).
pub(crate) fn range_prefix3<V: super::ValueType>(
    t: &impl Readable<(&'static str, &'static str, &'static str), V>,
    a: &str,
    b: &str,
) -> Result<Vec<String>> {
    Ok(range_prefix3_with(t, a, b, |_| ())?.into_iter().map(|(z, ())| z).collect())
}

/// [`range_prefix3`] with each row's value, as `value` reads it.
///
/// # Errors
/// Storage errors.
pub(crate) fn range_prefix3_with<V: super::ValueType, O>(
    t: &impl Readable<(&'static str, &'static str, &'static str), V>,
    a: &str,
    b: &str,
    value: impl Fn(super::Borrowed<'_, V>) -> O,
) -> Result<Vec<(String, O)>> {
    let mut out = Vec::new();
    for row in t.range((a, b, "")..)? {
        let (k, v) = row?;
        let (x, y, z) = k.value();
        if x != a || y != b {
            break;
        }
        out.push((z.to_string(), value(v.value())));
    }
    Ok(out)
}

/// For each `b` of `bs`, the third parts of the 3-tuple keys whose first two are `(a, b)` ([`range_prefix3`] for
/// many prefixes at once: one statement on PostgreSQL).
///
/// # Errors
/// Storage errors.
pub(crate) fn range_prefix3_many<V: super::ValueType>(
    t: &impl Readable<(&'static str, &'static str, &'static str), V>,
    a: &str,
    bs: &[&str],
) -> Result<Vec<Vec<String>>> {
    let keys: Vec<(&str, &str, &str)> = bs.iter().map(|b| (a, *b, "")).collect();
    t.prefix_many(&keys, 2)?
        .into_iter()
        .map(|rows| Ok(rows.iter().map(|(k, _)| k.value().2.to_string()).collect()))
        .collect()
}

/// Writes an edge both ways for each `b` of `bs`: `(a, from, b)` into `forward` and `(a, b, from)` into
/// `backward`, all of one kind before the other, so that PostgreSQL sends each kind's rows in one statement
/// (interleaved puts would send one statement per edge).
///
/// # Errors
/// Storage errors.
pub(crate) fn put_edges_both_ways(
    forward: &mut super::Table<'_, (&'static str, &'static str, &'static str), ()>,
    backward: &mut super::Table<'_, (&'static str, &'static str, &'static str), ()>,
    a: &str,
    from: &str,
    bs: &[&str],
) -> Result<()> {
    for b in bs {
        forward.put((a, from, *b), ())?;
    }
    for b in bs {
        backward.put((a, *b, from), ())?;
    }
    Ok(())
}

/// How many 3-tuple keys have `a` as their first part (the edges of one space), by a range from `(a, "", "")`.
pub(crate) fn range_prefix1_count<V: super::ValueType>(
    t: &impl Readable<(&'static str, &'static str, &'static str), V>,
    a: &str,
) -> Result<u64> {
    let mut n = 0;
    for row in t.range((a, "", "")..)? {
        let (k, _) = row?;
        if k.value().0 != a {
            break;
        }
        n += 1;
    }
    Ok(n)
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

/// `rows` with each key and value borrowed into `f`: a lazy iterator of what `f` makes of them (an archive
/// writer streams a whole kind this way without holding it).
pub(crate) fn map_rows<'a, K: KeyType, V: ValueType, O>(
    rows: Rows<'a, K, V>,
    mut f: impl FnMut(Borrowed<'_, K>, Borrowed<'_, V>) -> O + 'a,
) -> impl Iterator<Item = Result<O>> + 'a {
    rows.map(move |row| row.map(|(k, v)| f(k.value(), v.value())))
}
