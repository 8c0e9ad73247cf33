//! Relations between two memories.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::common::Timestamp;

/// A relation between two memories.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryRelation {
    /// `rel_<uuidv7>`.
    pub id: String,
    /// The memory the relation starts at.
    pub source_memory_id: String,
    /// The memory it points to.
    pub target_memory_id: String,
    /// Free-form type such as `supports`, `contradicts`, `follows_from` (1..=64 characters).
    pub relation_type: String,
    /// Why (at most 1,000 characters).
    pub reason: String,
    /// Strength in 0..=1 (default 1).
    pub strength: f64,
    /// Confidence in 0..=1 (default 1).
    pub confidence: f64,
    /// Whether it holds both ways.
    pub bidirectional: bool,
    /// `active`, `suggested`, `dismissed` or `deleted`.
    pub status: String,
    /// Who made it (free text, e.g. `cli`).
    pub source: String,
    /// The space of both memories.
    pub space_id: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}
