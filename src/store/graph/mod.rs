//! The knowledge-graph service ([`Graph`], `store.graph()`): what is derived from the entities memories
//! mention, and the typed relations people add between memories.
//!
//! - `entities.rs`: entity extraction at write time (`MENTIONS` and `RELATES_TO` edges) and entity reads;
//! - `relations.rs`: typed relations between two memories of one space (client contract section 4);
//! - `compute.rs` (and `compute/crystals.rs`): communities (Louvain) and PageRank, recomputed by a background
//!   worker once writes pause, and the crystals written with them;
//! - `communities.rs`: reading communities, PageRank and crystal sources;
//! - `wiki.rs`: the reads the library and wiki export and the console's graph view need.

mod communities;
mod compute;
pub(crate) mod entities;
mod relations;
mod wiki;

pub use compute::{Community, CommunityEntity, CommunityMemory, GraphReport, crystal_id};
pub(crate) use compute::{Ctx, start_worker};
pub use entities::{MentionReport, entity_id};
pub use relations::{
    MAX_RELATIONS_LIMIT, MemoryRelation, RELATION_STATUSES, RelationInput, RelationQuery, RelationView,
};
pub(crate) use wiki::date_of;
pub use wiki::{EntityGraph, GraphEdge, GraphNode, LibrarySelection, Subgraph, memory_line};

use super::KnowledgeStore;

/// The knowledge graph of a store, borrowed from the store (`store.graph()`).
///
/// Owns: the `entity` records (entities, `MENTIONS` and `RELATES_TO` edges), the `relation` records (typed
/// relations between memories), and the `graph` records derived from them (communities, their members, PageRank
/// and crystal sources), with the background worker that recomputes those.
#[derive(Clone, Copy)]
pub struct Graph<'s> {
    pub(crate) store: &'s KnowledgeStore,
}
