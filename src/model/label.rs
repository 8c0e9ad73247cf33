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
