//! The unit of change of the derived indexes: what a committed write does to a space's catalog, lexicon and
//! vectors. The store's write path makes them, the catalog records keep them, the change feed carries them.

use std::collections::BTreeSet;

use crate::index::catalog::DocMeta;
use crate::model::Memory;

/// The analysed text of a document: distinct terms with frequencies, and its length in terms.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct LexEntry {
    pub terms: Vec<(String, u32)>,
    pub len: u32,
}

/// A change to apply to the in-memory indexes once its transaction has committed. `lex` is Some when the
/// document's postings changed; `vector` is Some when its vector did. Also the change feed's unit
/// (the store's change feed).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) enum IndexOp {
    Remove { space: String, docno: u64, lex: Option<LexEntry> },
    Put { space: String, docno: u64, meta: DocMeta, vector: Option<Vec<f32>>, lex: Option<LexEntry> },
}

impl IndexOp {
    /// The catalog entry of a stored memory (`memory`, document number `docno`) changed (state, labels,
    /// counters); its text and vector did not.
    pub(crate) fn meta(space: &str, docno: u64, memory: &Memory, labels: BTreeSet<String>) -> Self {
        IndexOp::Put { space: space.to_string(), docno, meta: DocMeta::of(memory, labels), vector: None, lex: None }
    }
}
