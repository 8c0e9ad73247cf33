//! Communities (topics) of the entity graph, as the graph service computes them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::common::Timestamp;

/// An entity of a community, ranked by PageRank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CommunityEntity {
    /// Entity id.
    pub entity_id: String,
    /// Its space.
    pub space_id: String,
    /// Canonical name.
    pub name: String,
    /// Entity kind.
    pub entity_type: String,
    /// Memories mentioning it.
    pub mention_count: u64,
    /// PageRank over the entity and memory graph, scaled so the top entity of the whole graph is 1.
    pub pagerank: f64,
}

/// A memory that represents a community: it mentions the most of the community's entities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CommunityMemory {
    /// Memory id.
    pub memory_id: String,
    /// Its space.
    pub space_id: String,
    /// Title, or the first 120 characters of content.
    pub title: String,
    /// Community entities it mentions.
    pub entities_mentioned: u64,
}

/// A community (topic) of the entity graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Community {
    /// Stable integer id: kept by a recomputation while at least half of the community persists.
    pub id: u64,
    /// The names of its three most central entities.
    pub title: String,
    /// Extractive summary: size, kinds, central entities and representative memories (no language model).
    pub summary: String,
    /// Entities in it.
    pub entity_count: u64,
    /// Distinct memories mentioning any of its entities.
    pub memory_count: u64,
    /// Spaces its entities live in.
    pub spaces: Vec<String>,
    /// Entities, most central first (at most 50).
    pub top_entities: Vec<CommunityEntity>,
    /// Representative memories (at most 10).
    pub top_memories: Vec<CommunityMemory>,
    /// Sum of its members' PageRank (a size-aware importance).
    pub weight: f64,
    /// When it was computed.
    pub updated_at: Timestamp,
}

/// Outcome of one graph computation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GraphReport {
    /// Entity nodes.
    pub entities: u64,
    /// RELATES_TO edges (each pair once).
    pub edges: u64,
    /// Memory nodes in PageRank.
    pub memories: u64,
    /// Communities of two or more entities.
    pub communities: u64,
    /// Modularity of the partition.
    pub modularity: f64,
    /// Crystals after this run.
    pub crystals: u64,
    /// Crystals written or removed by this run.
    pub crystals_changed: u64,
    /// Milliseconds spent.
    pub elapsed_ms: f64,
    /// Write generation the computation saw.
    pub generation: u64,
}
