//! Key and value types as columns: how a backend that stores parts in typed columns (PostgreSQL) converts a
//! record kind's keys and values to column values and back. Keys and values travel through the port in redb's
//! own byte encoding (`redb::Value::as_bytes`), so a row read from another backend is served by the same
//! [`super::Got`] accessor as a redb page. Shared by both backends, so it lives beside them, not in either.

use crate::error::{Error, ErrorKind, Result};

/// One column value.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// `text`.
    Text(String),
    /// A `u64` key or value part, stored as `bigint` (two's complement: values above `i64::MAX` keep their
    /// bits, but order below zero; stored ids, counts and docnos never reach them).
    U64(u64),
    /// `double precision`.
    Float(f64),
    /// `bytea`.
    Bytes(Vec<u8>),
}

/// A scalar part of a key or value: `&str`, `u64`, `f64`, `&[u8]`.
pub trait Part: redb::Value + 'static {
    /// The part as a column value.
    fn to_sql(v: &Self::SelfType<'_>) -> SqlValue;
    /// The column value as the part; `None` when the column holds another type.
    fn from_sql(v: &SqlValue) -> Option<Self::SelfType<'_>>;
}

impl Part for &'static str {
    fn to_sql(v: &&str) -> SqlValue {
        SqlValue::Text((*v).to_string())
    }
    fn from_sql(v: &SqlValue) -> Option<&str> {
        match v {
            SqlValue::Text(s) => Some(s.as_str()),
            _ => None,
        }
    }
}

impl Part for u64 {
    fn to_sql(v: &u64) -> SqlValue {
        SqlValue::U64(*v)
    }
    fn from_sql(v: &SqlValue) -> Option<u64> {
        match v {
            SqlValue::U64(x) => Some(*x),
            _ => None,
        }
    }
}

impl Part for f64 {
    fn to_sql(v: &f64) -> SqlValue {
        SqlValue::Float(*v)
    }
    fn from_sql(v: &SqlValue) -> Option<f64> {
        match v {
            SqlValue::Float(x) => Some(*x),
            _ => None,
        }
    }
}

impl Part for &'static [u8] {
    fn to_sql(v: &&[u8]) -> SqlValue {
        SqlValue::Bytes(v.to_vec())
    }
    fn from_sql(v: &SqlValue) -> Option<&[u8]> {
        match v {
            SqlValue::Bytes(b) => Some(b.as_slice()),
            _ => None,
        }
    }
}

fn mismatch() -> Error {
    Error::new(ErrorKind::Corrupt, "a stored row does not match its record kind's column types")
}

/// A whole key or value: a [`Part`], `()` (no column) or a tuple of parts.
pub trait Record: redb::Value + 'static {
    /// How many columns.
    const PARTS: usize;
    /// Appends the columns of `v` to `out`.
    fn to_sql(v: &Self::SelfType<'_>, out: &mut Vec<SqlValue>);
    /// The redb encoding of the record whose columns are `vals` ([`Record::PARTS`] of them).
    ///
    /// # Errors
    /// [`ErrorKind::Corrupt`] when the columns do not have the record's types.
    fn encode(vals: &[SqlValue]) -> Result<Vec<u8>>;
}

fn bytes<T: redb::Value>(v: &T::SelfType<'_>) -> Vec<u8> {
    T::as_bytes(v).as_ref().to_vec()
}

impl<T: Part> Record for T {
    const PARTS: usize = 1;
    fn to_sql(v: &Self::SelfType<'_>, out: &mut Vec<SqlValue>) {
        out.push(<T as Part>::to_sql(v));
    }
    fn encode(vals: &[SqlValue]) -> Result<Vec<u8>> {
        let a = vals.first().and_then(T::from_sql).ok_or_else(mismatch)?;
        Ok(bytes::<T>(&a))
    }
}

impl Record for () {
    const PARTS: usize = 0;
    fn to_sql(_: &(), _: &mut Vec<SqlValue>) {}
    fn encode(_: &[SqlValue]) -> Result<Vec<u8>> {
        Ok(Vec::new())
    }
}

impl<A: Part, B: Part> Record for (A, B) {
    const PARTS: usize = 2;
    fn to_sql(v: &Self::SelfType<'_>, out: &mut Vec<SqlValue>) {
        out.push(A::to_sql(&v.0));
        out.push(B::to_sql(&v.1));
    }
    fn encode(vals: &[SqlValue]) -> Result<Vec<u8>> {
        let [a, b] = vals else { return Err(mismatch()) };
        let v = (A::from_sql(a).ok_or_else(mismatch)?, B::from_sql(b).ok_or_else(mismatch)?);
        Ok(bytes::<(A, B)>(&v))
    }
}

impl<A: Part, B: Part, C: Part> Record for (A, B, C) {
    const PARTS: usize = 3;
    fn to_sql(v: &Self::SelfType<'_>, out: &mut Vec<SqlValue>) {
        out.push(A::to_sql(&v.0));
        out.push(B::to_sql(&v.1));
        out.push(C::to_sql(&v.2));
    }
    fn encode(vals: &[SqlValue]) -> Result<Vec<u8>> {
        let [a, b, c] = vals else { return Err(mismatch()) };
        let v = (
            A::from_sql(a).ok_or_else(mismatch)?,
            B::from_sql(b).ok_or_else(mismatch)?,
            C::from_sql(c).ok_or_else(mismatch)?,
        );
        Ok(bytes::<(A, B, C)>(&v))
    }
}

impl<A: Part, B: Part, C: Part, D: Part, E: Part> Record for (A, B, C, D, E) {
    const PARTS: usize = 5;
    fn to_sql(v: &Self::SelfType<'_>, out: &mut Vec<SqlValue>) {
        out.push(A::to_sql(&v.0));
        out.push(B::to_sql(&v.1));
        out.push(C::to_sql(&v.2));
        out.push(D::to_sql(&v.3));
        out.push(E::to_sql(&v.4));
    }
    fn encode(vals: &[SqlValue]) -> Result<Vec<u8>> {
        let [a, b, c, d, e] = vals else { return Err(mismatch()) };
        let v = (
            A::from_sql(a).ok_or_else(mismatch)?,
            B::from_sql(b).ok_or_else(mismatch)?,
            C::from_sql(c).ok_or_else(mismatch)?,
            D::from_sql(d).ok_or_else(mismatch)?,
            E::from_sql(e).ok_or_else(mismatch)?,
        );
        Ok(bytes::<(A, B, C, D, E)>(&v))
    }
}

/// The record encoded by [`Record::encode`] (or stored by redb), borrowed from `bytes`.
pub fn decode<T: redb::Value>(bytes: &[u8]) -> T::SelfType<'_> {
    T::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuples_round_trip_through_columns() {
        let key: (&str, &str, u64) = ("space", "term", 42);
        let mut cols = Vec::new();
        <(&str, &str, u64) as Record>::to_sql(&key, &mut cols);
        assert_eq!(cols, vec![SqlValue::Text("space".into()), SqlValue::Text("term".into()), SqlValue::U64(42)]);
        let enc = <(&str, &str, u64) as Record>::encode(&cols).unwrap();
        assert_eq!(decode::<(&str, &str, u64)>(&enc), key);
        let v = <f64 as Record>::encode(&[SqlValue::Float(0.25)]).unwrap();
        assert_eq!(decode::<f64>(&v), 0.25);
        assert!(<(u64, u64) as Record>::encode(&[SqlValue::Text("x".into()), SqlValue::U64(1)]).is_err());
        assert!(<(u64, u64) as Record>::encode(&[SqlValue::U64(1)]).is_err());
        let row: (u64, &str, u64, u64, &[u8]) = (3, "thread:t1", 7, 12, b"meta");
        let mut cols = Vec::new();
        <(u64, &str, u64, u64, &[u8]) as Record>::to_sql(&row, &mut cols);
        let enc = <(u64, &str, u64, u64, &[u8]) as Record>::encode(&cols).unwrap();
        assert_eq!(decode::<(u64, &str, u64, u64, &[u8])>(&enc), row);
    }
}
