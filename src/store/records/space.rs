//! Spaces: the only place the `spaces` kind is opened.

use super::{Bytes, K1, Records, Tx};
use crate::error::Result;
use crate::model::Space;
use crate::storage::tables::SPACES;

/// space id -> [`Space`].
///
/// # Errors
/// Storage errors.
pub(crate) fn spaces<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K1, Bytes>, K1, Space>> {
    super::records(tx, SPACES)
}

/// The ids of every space, in key order.
///
/// # Errors
/// Storage errors.
pub(crate) fn ids<X: Tx>(tx: &X) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for row in spaces(tx)?.iter()? {
        out.push(row?.0.value().to_string());
    }
    Ok(out)
}

/// Deletes every record that belongs to space `id` from the kinds a space owns (memories and their index
/// records, labels, threads and messages, entities and edges, working memory, relations, label merges, and
/// the by-id lookups that point into the space); the `spaces` record itself stays for the caller.
///
/// # Errors
/// Storage errors.
pub(crate) fn drop_space_records(txn: &crate::storage::WriteTx, id: &str) -> Result<()> {
    use crate::storage::tables::*;
    macro_rules! drop_space {
        ($($t:ident),*) => {$( txn.open($t)?.retain(|k, _| k.0 != id)?; )*};
    }
    drop_space!(MEMORIES, VECTORS, LABELS, THREADS, ENTITIES, ENTITY_KEYS, WORKING_MEMORY, RELATIONS, LABEL_MERGES);
    drop_space!(POSTINGS, MEMORY_LABELS, LABEL_MEMORIES, MESSAGES, MESSAGE_KEYS, MENTIONS, ENTITY_MEMORIES);
    drop_space!(RELATES_TO, MEMORY_RELATIONS, CATALOG);
    txn.open(LEX_STATS)?.remove(id)?;
    txn.open(MEMORY_SPACE)?.retain(|_, v| v != id)?;
    txn.open(RELATION_SPACE)?.retain(|_, v| v != id)?;
    txn.open(THREAD_SPACES)?.retain(|k, _| k.1 != id)?;
    Ok(())
}
