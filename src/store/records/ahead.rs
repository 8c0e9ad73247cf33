//! The records a write transaction asks for ahead of its reads ([`WriteTx::read_ahead`]): on PostgreSQL every
//! kind asked for travels in the one statement of the transaction's next point read, so that a memory write
//! reads all it needs in one round trip instead of one per kind (issue 36). On a redb file this does nothing.
//! A key asked for and never read, or read and never asked for, changes no result, only the statements sent.
//! A search asks its read transaction the same way ([`ask_search`]).

use crate::storage::tables::{ENTITIES, ENTITY_KEYS, LABELS, LEX_STATS, MEMORY_SPACE, RELATES_TO, SPACES};
use crate::storage::{ReadTx, WriteTx};

/// The keys one memory write is expected to read, kind by kind (space ids first, as the kinds' keys). Its
/// counters are asked for by the write path itself ([`super::meta::ask_ahead`]).
#[derive(Default)]
pub(crate) struct WriteReads<'a> {
    /// Spaces, whose records are checked and whose BM25 statistics (`lex_stats`) change.
    pub spaces: Vec<&'a str>,
    /// Memory ids given by the caller: where each lives (`memory_space`).
    pub memory_ids: Vec<&'a str>,
    /// (space, label id).
    pub labels: Vec<(&'a str, String)>,
    /// (space, entity lookup key).
    pub entity_keys: Vec<(&'a str, String)>,
    /// (space, entity id).
    pub entities: Vec<(&'a str, String)>,
    /// (space, entity, other entity): RELATES_TO weights.
    pub relates: Vec<(&'a str, String, String)>,
}

/// Asks `txn` for every key of `reads` ahead of their reads.
pub(crate) fn ask(txn: &WriteTx, reads: &WriteReads<'_>) {
    txn.read_ahead(SPACES, &reads.spaces);
    txn.read_ahead(LEX_STATS, &reads.spaces);
    txn.read_ahead(MEMORY_SPACE, &reads.memory_ids);
    txn.read_ahead(LABELS, &pairs(&reads.labels));
    txn.read_ahead(ENTITY_KEYS, &pairs(&reads.entity_keys));
    txn.read_ahead(ENTITIES, &pairs(&reads.entities));
    let triples: Vec<(&str, &str, &str)> = reads.relates.iter().map(|(s, a, b)| (*s, a.as_str(), b.as_str())).collect();
    txn.read_ahead(RELATES_TO, &triples);
}

/// (space, key) pairs as the port's borrowed two-part keys.
fn pairs<'a>(v: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    v.iter().map(|(s, k)| (*s, k.as_str())).collect()
}

/// Asks a search's read transaction for its space (`space`), the query's entity lookup keys and the entities
/// they are expected to name, all of `space`: on PostgreSQL one statement reads the three kinds.
pub(crate) fn ask_search(rtx: &ReadTx, space: &str, entity_keys: &[&str], entity_ids: &[&str]) {
    rtx.read_ahead(SPACES, &[space]);
    rtx.read_ahead(ENTITY_KEYS, &with_space(space, entity_keys));
    rtx.read_ahead(ENTITIES, &with_space(space, entity_ids));
}

/// `(space, key)` for each of `keys`.
fn with_space<'a>(space: &'a str, keys: &[&'a str]) -> Vec<(&'a str, &'a str)> {
    keys.iter().map(|k| (space, *k)).collect()
}
