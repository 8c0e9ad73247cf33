//! Labels: a vocabulary attached to memories (HAS_LABEL edges), scoped to a space.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::common::Timestamp;

/// A label record. Its id is `label_<name>` (so clients can derive names from ids by stripping `label_`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Label {
    /// `label_<name>`.
    pub id: String,
    /// The name as first given, 1..=100 characters.
    pub name: String,
    /// Hex colour, default `#3b82f6`.
    pub color: String,
    /// Description, default empty.
    pub description: String,
    /// Space the label belongs to.
    pub space_id: String,
    /// Number of memories carrying the label in its space.
    pub usage_count: u64,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

impl Label {
    /// The id of the label with `name`.
    pub fn id_for(name: &str) -> String {
        format!("label_{name}")
    }
}

/// A recorded merge: enough to put every edge back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LabelMerge {
    /// `merge_<uuidv7>`.
    pub merge_id: String,
    /// Space of both labels.
    pub space_id: String,
    /// The label merged away, as it was before the merge.
    pub source: Label,
    /// The survivor.
    pub target_id: String,
    /// Memories that carried the source only (their edge was re-pointed to the target).
    pub moved_memory_ids: Vec<String>,
    /// Memories that carried both (their source edge was dropped).
    pub shared_memory_ids: Vec<String>,
    /// When the merge happened.
    pub merged_at: Timestamp,
    /// When it was reversed, if it was.
    pub reversed_at: Option<Timestamp>,
}
