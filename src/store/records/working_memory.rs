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
