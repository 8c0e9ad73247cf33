//! Labels (`labels`), the HAS_LABEL edges both ways and label merges: the only place these kinds are opened.

use std::collections::{BTreeSet, HashMap};

use super::{Bytes, K2, K3, Opened, Records, Tx};
use crate::error::Result;
use crate::model::Label;
use crate::model::LabelMerge;
use crate::storage::tables::{LABEL_MEMORIES, LABEL_MERGES, LABELS, MEMORY_LABELS};
use crate::storage::{Readable, Table, WriteTx};

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

/// Every HAS_LABEL edge as `(space id, memory id)` -> label ids, read in one pass over the edges (the open's
/// index load and the catalog's fill, which then walk the memories).
///
/// # Errors
/// Storage errors.
pub(crate) fn labels_by_memory<X: Tx>(tx: &X) -> Result<HashMap<(String, String), BTreeSet<String>>> {
    let mut labels: HashMap<(String, String), BTreeSet<String>> = HashMap::new();
    for row in memory_labels(tx)?.iter()? {
        let (k, _) = row?;
        let (space, memory, label) = k.value();
        labels.entry((space.to_string(), memory.to_string())).or_default().insert(label.to_string());
    }
    Ok(labels)
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

/// The label kinds of one write transaction (`labels` and the HAS_LABEL edges both ways), each opened once.
pub(crate) struct Writer<'t> {
    records: Opened<'t, WriteTx, K2, Label>,
    memory_labels: Table<'t, K3, ()>,
    label_memories: Table<'t, K3, ()>,
}

impl<'t> Writer<'t> {
    /// Opens the label kinds in `txn`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn open(txn: &'t WriteTx) -> Result<Self> {
        Ok(Writer { records: labels(txn)?, memory_labels: memory_labels(txn)?, label_memories: label_memories(txn)? })
    }

    /// The label records, for readers that take any transaction's (a merge plan, a label by id).
    pub(crate) fn records(&self) -> &Opened<'t, WriteTx, K2, Label> {
        &self.records
    }

    /// The HAS_LABEL edges by label, for readers that take any transaction's.
    pub(crate) fn by_label(&self) -> &Table<'t, K3, ()> {
        &self.label_memories
    }

    /// Label `id` of `space`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn get(&self, space: &str, id: &str) -> Result<Option<Label>> {
        self.records.get((space, id))
    }

    /// Labels `ids` of `space`, in their order (one batched read: [`crate::storage::Readable::get_many`]).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn get_many(&self, space: &str, ids: &[&str]) -> Result<Vec<Option<Label>>> {
        let keys: Vec<(&str, &str)> = ids.iter().map(|id| (space, *id)).collect();
        self.records.get_many(&keys)
    }

    /// Stores label `l` under id `id` of `space`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] when the record does not encode.
    pub(crate) fn put(&mut self, space: &str, id: &str, l: &Label) -> Result<()> {
        self.records.put((space, id), l)
    }

    /// Deletes label `id` of `space` (its edges are the caller's).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove(&mut self, space: &str, id: &str) -> Result<()> {
        self.records.remove((space, id)).map(|_| ())
    }

    /// The label ids of memory `memory` of `space`, in order.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn of_memory(&self, space: &str, memory: &str) -> Result<Vec<String>> {
        crate::storage::txn::range_prefix3(&self.memory_labels, space, memory)
    }

    /// The memory ids label `label` of `space` is on, in order.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn memories_of(&self, space: &str, label: &str) -> Result<Vec<String>> {
        crate::storage::txn::range_prefix3(&self.label_memories, space, label)
    }

    /// Puts label `label` on memory `memory` (the edge both ways).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn link(&mut self, space: &str, memory: &str, label: &str) -> Result<()> {
        self.memory_labels.put((space, memory, label), ())?;
        self.label_memories.put((space, label, memory), ())
    }

    /// Puts each of `labels` on memory `memory` (the edges both ways), written kind by kind so that PostgreSQL
    /// sends each kind's rows in one statement.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn link_many(&mut self, space: &str, memory: &str, labels: &[&str]) -> Result<()> {
        crate::storage::txn::put_edges_both_ways(
            &mut self.memory_labels,
            &mut self.label_memories,
            space,
            memory,
            labels,
        )
    }

    /// Takes label `label` off memory `memory` (the edge both ways).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn unlink(&mut self, space: &str, memory: &str, label: &str) -> Result<()> {
        self.memory_labels.remove((space, memory, label))?;
        self.label_memories.remove((space, label, memory)).map(|_| ())
    }
}
