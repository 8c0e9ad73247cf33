//! SQL text and parameters: record values as PostgreSQL parameters and columns, unnest arrays, key
//! predicates and range bounds of keyset scans.

use super::*;

impl ToSql for SqlValue {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            SqlValue::Text(s) => s.to_sql(ty, out),
            // Two's complement: the bits of a u64 above i64::MAX survive (see SqlValue::U64).
            SqlValue::U64(x) => (*x as i64).to_sql(ty, out),
            SqlValue::Float(f) => f.to_sql(ty, out),
            SqlValue::Bytes(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::TEXT | Type::INT8 | Type::FLOAT8 | Type::BYTEA)
    }

    postgres::types::to_sql_checked!();
}

pub(super) fn column(row: &Row, i: usize) -> Result<SqlValue> {
    let get = |e: postgres::Error| pg_error("reading a column failed", e);
    Ok(match *row.columns()[i].type_() {
        Type::TEXT => SqlValue::Text(row.try_get(i).map_err(get)?),
        Type::INT8 => SqlValue::U64(row.try_get::<_, i64>(i).map_err(get)? as u64),
        Type::FLOAT8 => SqlValue::Float(row.try_get(i).map_err(get)?),
        _ => SqlValue::Bytes(row.try_get(i).map_err(get)?),
    })
}

pub(super) fn columns(row: &Row, from: usize, n: usize) -> Result<Vec<SqlValue>> {
    (from..from + n).map(|i| column(row, i)).collect()
}

/// The columns of `rows` (all of one shape, typed by the first row) as arrays, one parameter each, for
/// `unnest($1::text[], ..)`. The values are moved, not copied.
pub(super) fn arrays(mut rows: Vec<Vec<SqlValue>>) -> Vec<Box<dyn ToSql + Sync>> {
    let n = rows.first().map_or(0, Vec::len);
    let mut columns: Vec<Box<dyn ToSql + Sync>> = Vec::with_capacity(n);
    let take = |r: &mut Vec<SqlValue>, c: usize| std::mem::replace(&mut r[c], SqlValue::U64(0));
    for c in 0..n {
        let column: Box<dyn ToSql + Sync> = match &rows[0][c] {
            SqlValue::Text(_) => Box::new(
                rows.iter_mut()
                    .map(|r| if let SqlValue::Text(t) = take(r, c) { t } else { String::new() })
                    .collect::<Vec<_>>(),
            ),
            // Two's complement, as `SqlValue::U64` is written one at a time.
            SqlValue::U64(_) => Box::new(
                rows.iter().map(|r| if let SqlValue::U64(x) = &r[c] { *x as i64 } else { 0 }).collect::<Vec<_>>(),
            ),
            SqlValue::Float(_) => {
                Box::new(rows.iter().map(|r| if let SqlValue::Float(x) = &r[c] { *x } else { 0.0 }).collect::<Vec<_>>())
            }
            SqlValue::Bytes(_) => Box::new(
                rows.iter_mut()
                    .map(|r| if let SqlValue::Bytes(b) = take(r, c) { b } else { Vec::new() })
                    .collect::<Vec<_>>(),
            ),
        };
        columns.push(column);
    }
    columns
}

/// The PostgreSQL type a value is sent as (`ToSql for SqlValue`).
pub(super) fn pg_type(v: &SqlValue) -> Type {
    match v {
        SqlValue::Text(_) => Type::TEXT,
        SqlValue::U64(_) => Type::INT8,
        SqlValue::Float(_) => Type::FLOAT8,
        SqlValue::Bytes(_) => Type::BYTEA,
    }
}

/// The SQL array type of each column of `row`, numbered from `$from`: `$1::text[], $2::int8[]`.
pub(super) fn array_params(row: &[SqlValue], from: usize) -> String {
    row.iter()
        .enumerate()
        .map(|(i, v)| format!("${}::{}[]", i + from, pg_type(v).name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A key's columns as one string, to find it again among held-back and known records: per column a tag, the
/// length or value in decimal and, for text and bytes, the content (so that two keys share a fingerprint only
/// when equal).
pub(super) fn fingerprint(key: &[SqlValue]) -> String {
    use std::fmt::Write;
    let mut s =
        String::with_capacity(key.iter().map(|v| if let SqlValue::Text(t) = v { t.len() + 8 } else { 22 }).sum());
    for v in key {
        // Writing to a String cannot fail.
        let _ = match v {
            SqlValue::Text(t) => write!(s, "t{}:{t}", t.len()),
            SqlValue::U64(x) => write!(s, "u{x};"),
            SqlValue::Float(f) => write!(s, "f{};", f.to_bits()),
            SqlValue::Bytes(b) => {
                let _ = write!(s, "b{}:", b.len());
                b.iter().try_for_each(|x| write!(s, "{x:02x}"))
            }
        };
    }
    s
}

pub(super) fn list(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>().join(", ")
}

pub(super) fn placeholders(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// `k0 = $1 AND k1 = $2 ...`.
pub(super) fn key_eq(n: usize) -> String {
    (0..n).map(|i| format!("k{i} = ${}", i + 1)).collect::<Vec<_>>().join(" AND ")
}

/// A bound as SQL over the key columns: `(k0, k1) >= ($3, $4)`, its values appended to `params`. A `u64` part
/// above `i64::MAX` (a bound such as `u64::MAX`; stored parts never reach it) is clamped to `i64::MAX`, the
/// comparison cut after it and made inclusive for an upper bound, exclusive for a lower one: the same rows.
pub(super) fn bound_sql(b: Bound<Vec<SqlValue>>, lower: bool, params: &mut Vec<SqlValue>) -> Option<String> {
    let (mut vals, mut inclusive) = match b {
        Bound::Unbounded => return None,
        Bound::Included(v) => (v, true),
        Bound::Excluded(v) => (v, false),
    };
    if let Some(i) = vals.iter().position(|v| matches!(v, SqlValue::U64(x) if *x > i64::MAX as u64)) {
        vals.truncate(i + 1);
        vals[i] = SqlValue::U64(i64::MAX as u64);
        inclusive = !lower;
    }
    let op = match (lower, inclusive) {
        (true, true) => ">=",
        (true, false) => ">",
        (false, true) => "<=",
        (false, false) => "<",
    };
    let cols = list("k", vals.len());
    let ph = placeholders(params.len() + 1, vals.len());
    params.extend(vals);
    Some(format!("({cols}) {op} ({ph})"))
}

pub(super) fn key_of<K: KeyType>(k: &Borrowed<'_, K>) -> Vec<SqlValue> {
    let mut out = Vec::with_capacity(K::PARTS);
    K::to_sql(k, &mut out);
    out
}

pub(super) fn bound_of<'a, K: KeyType, KR: Borrow<Borrowed<'a, K>>>(b: Bound<&KR>) -> Bound<Vec<SqlValue>> {
    match b {
        Bound::Included(k) => Bound::Included(key_of::<K>(k.borrow())),
        Bound::Excluded(k) => Bound::Excluded(key_of::<K>(k.borrow())),
        Bound::Unbounded => Bound::Unbounded,
    }
}

pub(super) type Encoded = (Vec<SqlValue>, Vec<u8>, Vec<u8>);

/// A record in redb's encoding: key bytes, value bytes.
pub(super) type RawPair = (Vec<u8>, Vec<u8>);
