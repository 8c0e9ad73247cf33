//! The query, options and results of a search.

use crate::index::catalog::MemoryFilter;
use crate::store::types::MemoryView;

/// Which rankings a search uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// BM25 and vectors, fused.
    #[default]
    Hybrid,
    /// BM25 only.
    Lexical,
    /// Vectors only.
    Vector,
}

impl SearchMode {
    /// The name reported in `search_metadata.search_mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Hybrid => "hybrid",
            SearchMode::Lexical => "lexical",
            SearchMode::Vector => "vector",
        }
    }
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    /// Query text, 1..=4,096 bytes.
    pub query: String,
    /// Space to search.
    pub space_id: String,
    /// Hits wanted, 1..=100.
    pub limit: usize,
    /// Filters; a filtered search still returns `limit` hits when that many match.
    pub filter: MemoryFilter,
    /// Rankings used.
    pub mode: SearchMode,
    /// Fusion for this query (None: the store's configured one).
    pub fusion: Option<crate::index::fusion::Fusion>,
    /// The query's vector, for stores with an external embedder (rules of [`NewMemory::embedding`](crate::store::NewMemory::embedding)). Without
    /// it such a store searches lexically and says so in [`SearchResults::fallback`].
    pub query_embedding: Option<Vec<f32>>,
    /// Per-query switches of ranking stages, and the context returned with each hit.
    pub options: SearchOptions,
}

impl Default for SearchQuery {
    /// An empty hybrid query of the default space for 10 hits.
    fn default() -> Self {
        SearchQuery {
            query: String::new(),
            space_id: crate::store::DEFAULT_SPACE.to_string(),
            limit: 10,
            filter: MemoryFilter::default(),
            mode: SearchMode::Hybrid,
            fusion: None,
            query_embedding: None,
            options: SearchOptions::default(),
        }
    }
}

impl SearchQuery {
    /// A hybrid search for `query` in the default space, 10 hits; change the rest with the setters or
    /// struct update syntax (`SearchQuery { limit: 5, ..SearchQuery::new("q") }`).
    pub fn new(query: impl Into<String>) -> Self {
        SearchQuery { query: query.into(), ..SearchQuery::default() }
    }

    /// Searches `space_id`.
    pub fn in_space(mut self, space_id: impl Into<String>) -> Self {
        self.space_id = space_id.into();
        self
    }

    /// Wants `limit` hits (1..=100).
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Uses `mode`.
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = mode;
        self
    }

    /// Filters the hits.
    pub fn filter(mut self, filter: MemoryFilter) -> Self {
        self.filter = filter;
        self
    }
}

/// Most neighbours on each side [`SearchOptions::include_context`] returns.
pub const MAX_CONTEXT_WINDOW: usize = 10;

/// Per-query switches of the ranking stages (None: the store's configuration) and of the context returned.
/// The stages are described in `docs/retrieval.md`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SearchOptions {
    /// Context-expanded BM25 ([`crate::index::context::score_context`]); `Some(false)` scores memories by their
    /// own text only.
    pub context_bm25: Option<bool>,
    /// Neighbour expansion after fusion ([`crate::index::context::expand`]); `Some(false)` switches it off.
    pub expand_neighbours: Option<bool>,
    /// Entity, PageRank and decay adjustments of hybrid scores; `Some(false)` switches them off.
    pub priors: Option<bool>,
    /// Return, with each hit that has a position, its neighbouring messages (thread memories) or chunks
    /// (source memories), this many on each side (1..=10). None or 0: no context.
    pub include_context: Option<usize>,
    /// Context-expanded BM25 settings for this query (None: the store's [`crate::StoreConfig::context`]).
    pub context_params: Option<crate::index::context::ContextParams>,
    /// Neighbour expansion settings for this query (None: the store's [`crate::StoreConfig::expansion`]).
    pub expansion_params: Option<crate::index::context::Expansion>,
    /// BM25 `k1` and `b` for this query (None: the store's [`crate::StoreConfig::bm25`]).
    pub bm25: Option<crate::index::bm25::Bm25Params>,
    /// Temporal boost for this query (None: the store's [`crate::StoreConfig::temporal_boost`]; 0 off).
    pub temporal_boost: Option<f32>,
    /// Question penalty for this query (None: the store's [`crate::StoreConfig::question_penalty`]; 0 off).
    pub question_penalty: Option<f32>,
    /// Context-blended cosine weight `γ` for this query, 0..=1 (None: the store's
    /// [`crate::StoreConfig::effective_vector_context`]; 0 off).
    pub vector_context: Option<f32>,
}

impl SearchOptions {
    /// Memories scored by their own text alone: no context-expanded BM25 or context-blended cosine, no neighbour
    /// expansion (duplicate and review detection compare one memory with another, not conversations).
    pub const OWN_TEXT: SearchOptions = SearchOptions {
        context_bm25: Some(false),
        expand_neighbours: Some(false),
        priors: None,
        include_context: None,
        context_params: None,
        expansion_params: None,
        bm25: None,
        temporal_boost: None,
        question_penalty: Some(0.0),
        vector_context: Some(0.0),
    };
}

/// One search hit.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The memory.
    pub view: MemoryView,
    /// Fused score (0..=1 with the default convex fusion).
    pub score: f32,
    /// BM25 score when the lexical ranking found it.
    pub lexical_score: Option<f32>,
    /// Cosine similarity (-1..=1) when the vector ranking found it: the context-blended cosine when that stage
    /// is on ([`crate::StoreConfig::effective_vector_context`]) and the memory has a position.
    pub vector_score: Option<f32>,
    /// Query terms (stemmed) found in the memory.
    pub matched_terms: Vec<String>,
    /// Score received from neighbouring hits by neighbour expansion.
    pub expansion_score: Option<f32>,
    /// Neighbouring messages or chunks, in order, with the hit's own ([`SearchOptions::include_context`]).
    pub context: Vec<ContextItem>,
}

/// One message or chunk of a hit's context.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct ContextItem {
    /// `message` (of the memory's thread), `chunk` (of its source) or `memory` (a neighbouring memory, when
    /// the thread or source is not stored).
    pub kind: String,
    /// Message index, chunk index or ordinal in the sequence.
    pub index: u64,
    /// Message role (`user`, `assistant`, ...) for messages; empty otherwise.
    pub role: String,
    /// The text.
    pub content: String,
    /// True for the message(s) or chunk the hit itself came from.
    pub is_hit: bool,
    /// The memory id, for `memory` items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_id: Option<String>,
}

impl SearchHit {
    /// A one-line explanation of why the memory matched.
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        if !self.matched_terms.is_empty() {
            parts.push(format!("keyword match: {}", self.matched_terms.join(", ")));
        }
        if let Some(v) = self.vector_score {
            parts.push(format!("semantic similarity {v:.2}"));
        }
        if self.expansion_score.is_some() {
            parts.push("next to a match in its thread or source".into());
        }
        if parts.is_empty() { "ranked by fusion".into() } else { parts.join("; ") }
    }
}

/// Search output.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResults {
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Mode used.
    pub mode: SearchMode,
    /// Memories of the space that passed the filters (every live memory of the space when no filter is set).
    pub candidates: usize,
    /// Time spent, in milliseconds.
    pub elapsed_ms: f64,
    /// Why the search ran below the mode asked for (None: it did not). While a space's memories are being
    /// re-embedded, vector and hybrid searches answer from BM25 alone and say so here.
    pub fallback: Option<String>,
}
