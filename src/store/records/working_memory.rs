//! Working memory, one record per space and day: the only place the `working_memory` kind is opened.

use super::{Bytes, K2, Records, Tx};
use crate::error::Result;
use crate::model::WorkingMemory;
use crate::storage::tables::WORKING_MEMORY;

/// `(space id, day YYYY-MM-DD)` -> [`WorkingMemory`].
///
/// # Errors
/// Storage errors.
pub(crate) fn days<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, WorkingMemory>> {
    super::records(tx, WORKING_MEMORY)
}

/// The latest working memory of `space` (by day), if any.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`] when the record does not decode.
pub(crate) fn latest<X: Tx>(tx: &X, space: &str) -> Result<Option<WorkingMemory>> {
    match days(tx)?.range((space, "")..=(space, "9999-99-99"))?.next_back() {
        Some(row) => Ok(Some(row?.1)),
        None => Ok(None),
    }
}

/// The working memories of `space`, newest day first, at most `limit`.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`] when a record does not decode.
pub(crate) fn recent<X: Tx>(tx: &X, space: &str, limit: usize) -> Result<Vec<WorkingMemory>> {
    let t = days(tx)?;
    let mut out = Vec::new();
    for row in t.range((space, "")..=(space, "9999-99-99"))?.rev().take(limit) {
        out.push(row?.1);
    }
    Ok(out)
}
