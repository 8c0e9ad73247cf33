//! Review events: a write that looks like an update or a contradiction of an active memory.

use serde::{Deserialize, Serialize};

use super::common::Timestamp;

/// A review event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewEvent {
    /// `rev_<uuidv7>`.
    pub id: String,
    /// The space of both memories.
    pub space_id: String,
    /// `update` or `contradiction`.
    pub kind: String,
    /// The memory the write stored.
    pub newer_memory_id: String,
    /// The active memory it looks like an update or contradiction of.
    pub older_memory_id: String,
    /// What differs, e.g. `number: 12 -> 15`, `negation`, `year: 2021 -> 2023`, `value: blue -> green`.
    pub signals: Vec<String>,
    /// Dice similarity of the content terms, 0..=1.
    pub similarity: f64,
    /// Names of the shared entities.
    pub shared_entities: Vec<String>,
    /// When it was raised.
    pub created_at: Timestamp,
    /// How it was resolved, once it is.
    pub resolution: Option<Resolution>,
}

/// The resolution of a review event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Resolution {
    /// One of [`crate::REVIEW_ACTIONS`].
    pub action: String,
    /// The person's or agent's note.
    pub note: String,
    /// When.
    pub resolved_at: Timestamp,
    /// What was changed, in words.
    pub effects: Vec<String>,
}
