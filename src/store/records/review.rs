//! Timeline review events: the only place the `reviews` kind is opened.

use super::{Bytes, K2, Records, Tx};
use crate::error::Result;
use crate::model::ReviewEvent;
use crate::storage::tables::REVIEWS;

/// `(space id, rev_<uuidv7>)` -> [`ReviewEvent`].
///
/// # Errors
/// Storage errors.
pub(crate) fn reviews<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, ReviewEvent>> {
    super::records(tx, REVIEWS)
}
