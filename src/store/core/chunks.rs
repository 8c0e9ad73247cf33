//! The BM25 indexes over source chunks, one per space: built by the sources service on a space's first chunk
//! search (`store/sources/search.rs`), dropped when the space's sources change, here or in another process (the
//! change feed drops them, [`super::feed`]).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::index::lexicon::Lexicon;

/// BM25 over the chunks of one space's sources (and their file names, as chunk `u64::MAX`).
pub(crate) struct ChunkIndex {
    /// The chunks' postings; a chunk's document number is its row in `docs`.
    pub lex: Lexicon,
    /// Per document: (source id, chunk index or `u64::MAX` for the file name, the first 300 characters).
    pub docs: Vec<(String, u64, String)>,
}

/// Space id -> its chunk index, for the spaces searched since their sources last changed.
pub(crate) type ChunkIndexes = Arc<RwLock<HashMap<String, Arc<ChunkIndex>>>>;
