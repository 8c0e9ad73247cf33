//! Working memory: one markdown document per space and day.

use super::common::Timestamp;

/// One day's working memory.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkingMemory {
    /// Space.
    pub space_id: String,
    /// Day, `YYYY-MM-DD` (UTC).
    pub date: String,
    /// Markdown.
    pub content: String,
    /// Last write.
    pub updated_at: Timestamp,
}
