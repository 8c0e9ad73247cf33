//! Labels (`labels`), the HAS_LABEL edges both ways and label merges: the only place these kinds are opened.

use super::{Bytes, K2, K3, Records, Tx};
use crate::error::Result;
use crate::model::Label;
use crate::storage::tables::{LABEL_MEMORIES, LABEL_MERGES, LABELS, MEMORY_LABELS};
use crate::store::LabelMerge;

/// `(space id, label id)` -> [`Label`].
///
/// # Errors
/// Storage errors.
pub(crate) fn labels<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, Label>> {
    super::records(tx, LABELS)
}

/// HAS_LABEL edges: `(space id, memory id, label id)`.
///
/// # Errors
/// Storage errors.
pub(crate) fn memory_labels<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, ()>> {
    tx.open(MEMORY_LABELS)
}

/// HAS_LABEL edges reversed: `(space id, label id, memory id)`.
///
/// # Errors
/// Storage errors.
pub(crate) fn label_memories<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, ()>> {
    tx.open(LABEL_MEMORIES)
}

/// `(space id, merge id)` -> [`LabelMerge`]: what a merge changed, so it can be reversed.
///
/// # Errors
/// Storage errors.
pub(crate) fn label_merges<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, LabelMerge>> {
    super::records(tx, LABEL_MERGES)
}
