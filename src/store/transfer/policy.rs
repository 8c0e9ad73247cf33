//! Conflict policy of an import: what `merge`, `skip` and `overwrite` do with a record that exists.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorKind, Result};

use super::*;

pub(super) fn is_empty(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::String(s) => s.is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

pub(super) fn fill(into: &mut serde_json::Value, from: &serde_json::Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            match a.get_mut(k) {
                Some(cur) if cur.is_object() && v.is_object() => fill(cur, v),
                Some(cur) if !is_empty(cur) => {}
                _ => {
                    a.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// `existing` with its empty fields filled from `incoming` (nested objects key by key).
pub(crate) fn fill_empty<T: Serialize + DeserializeOwned>(existing: &T, incoming: &T) -> Result<T> {
    let mut e = serde_json::to_value(existing).map_err(|x| Error::new(ErrorKind::Internal, x.to_string()))?;
    let i = serde_json::to_value(incoming).map_err(|x| Error::new(ErrorKind::Internal, x.to_string()))?;
    fill(&mut e, &i);
    serde_json::from_value(e).map_err(|x| Error::new(ErrorKind::Internal, x.to_string()))
}

/// What to do with one archive record.
pub(super) enum Decision<T> {
    Insert(T),
    Replace(T),
    Keep,
}

pub(super) fn decide<T: Serialize + DeserializeOwned + PartialEq>(
    mode: ImportMode,
    existing: Option<T>,
    incoming: T,
) -> Result<Decision<T>> {
    Ok(match (existing, mode) {
        (None, _) => Decision::Insert(incoming),
        (Some(_), ImportMode::Skip) => Decision::Keep,
        (Some(e), ImportMode::Overwrite) => {
            if e == incoming {
                Decision::Keep
            } else {
                Decision::Replace(incoming)
            }
        }
        (Some(e), ImportMode::Merge) => {
            let m = fill_empty(&e, &incoming)?;
            if m == e { Decision::Keep } else { Decision::Replace(m) }
        }
    })
}

impl KindCounts {
    pub(super) fn note<T>(&mut self, d: &Decision<T>) {
        match d {
            Decision::Insert(_) => self.inserted += 1,
            Decision::Replace(_) => self.updated += 1,
            Decision::Keep => self.skipped += 1,
        }
    }
}

/// A `(space, id)`-keyed record kind of a write transaction.
pub(super) type RecordsMut<'t, T> = crate::store::records::Records<
    crate::storage::Table<'t, crate::store::records::K2, crate::store::records::Bytes>,
    crate::store::records::K2,
    T,
>;

/// Writes a (space, id) keyed record per the decision; returns whether it wrote.
pub(super) fn put_record<T: crate::storage::codec::Versioned>(
    t: &mut RecordsMut<'_, T>,
    space: &str,
    id: &str,
    d: &Decision<T>,
) -> Result<bool> {
    match d {
        Decision::Insert(v) | Decision::Replace(v) => {
            t.put((space, id), v)?;
            Ok(true)
        }
        Decision::Keep => Ok(false),
    }
}
