//! Threads (conversations) and their ordered messages, as the spec's Thread and Message records.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Metadata, Timestamp};

/// A conversation. Its id is chosen by the client (`thread_id`) and unique within a space.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Thread {
    /// Same as `thread_id`.
    pub id: String,
    /// Always `thread`.
    pub node_type: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change (append, metadata merge, favourite).
    pub updated_at: Timestamp,
    /// Free-form caller data (merged by `POST /threads/{id}/metadata/merge`).
    pub metadata: Metadata,
    /// The client-chosen id, 1..=200 characters without `/` or control characters.
    pub thread_id: String,
    /// Title, at most 500 characters.
    pub title: String,
    /// Extractive summary of the conversation (at most 300 characters).
    pub summary: String,
    /// Messages stored.
    pub message_count: u64,
    /// Participant names.
    pub participants: Vec<String>,
    /// Origin (e.g. `cli`, `claude-code`).
    pub source: String,
    /// The space holding the thread.
    pub space_id: String,
    /// Project, workspace and tool version reported by the client.
    pub project: String,
    /// Workspace reported by the client.
    pub workspace: String,
    /// Tool version reported by the client.
    pub tool_version: String,
    /// When the client imported the conversation.
    pub import_date: Option<Timestamp>,
    /// Marked as favourite.
    pub is_favorite: bool,
}

/// One message of a thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Message {
    /// `<thread_id>#<order_index>`.
    pub id: String,
    /// Always `message`.
    pub node_type: String,
    /// When it was stored.
    pub created_at: Timestamp,
    /// Same as `created_at` (messages are not edited).
    pub updated_at: Timestamp,
    /// Caller data (`external_id`, `source_app`, `exclude_from_distillation`, ...).
    pub metadata: Metadata,
    /// Text, at most 262,144 bytes.
    pub content: String,
    /// `user`, `assistant`, `system`, `tool`, ... (at most 50 characters).
    pub role: String,
    /// Position in the thread, from 0.
    pub order_index: u64,
    /// When it was said (the client's timestamp, else the time it was stored).
    pub timestamp: Timestamp,
    /// Words in `content` (maximal runs of letters and digits, Unicode-aware).
    pub token_count: u64,
}
