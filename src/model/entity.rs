//! Entities (the spec's Entity record) found in memories, and the graph edges around them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Metadata, Timestamp};

/// A named thing mentioned by memories: one record per (space, kind, canonical name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Entity {
    /// `ent_<16 hex digits>`: FNV-1a 64 of `<kind>:<lowercased canonical name>`, stable across stores.
    pub id: String,
    /// Always `entity`.
    pub node_type: String,
    /// First mention.
    pub created_at: Timestamp,
    /// Last change of its mentions.
    pub updated_at: Timestamp,
    /// Free-form data.
    pub metadata: Metadata,
    /// Canonical name.
    pub name: String,
    /// `person`, `organization`, `location`, `product`, `date`, `time`, `quantity`, `email` or `url`.
    pub entity_type: String,
    /// Short description (empty until the wiki issue writes one).
    pub description: String,
    /// Other spellings seen in memories (case-insensitive distinct, at most 20).
    pub aliases: Vec<String>,
    /// Confidence of the extraction, 0..=1.
    pub confidence: f64,
    /// When the entity began, if known.
    pub entity_created: Option<String>,
    /// When the entity ended, if known.
    pub entity_ended: Option<String>,
    /// Precision of the dates above.
    pub temporal_precision: Option<String>,
    /// Past, present, future or timeless.
    pub temporal_context: Option<String>,
    /// Confidence of the dates, 0..=1.
    pub temporal_confidence: f64,
    /// The space holding it.
    pub space_id: String,
    /// Memories mentioning it.
    pub mention_count: u64,
}
