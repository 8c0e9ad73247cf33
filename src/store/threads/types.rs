//! The input and report types of the thread service.

use super::*;

/// A message to store.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewMessage {
    /// `user`, `assistant`, ... (1..=50 characters).
    pub role: String,
    /// Text, at most 262,144 bytes (may be empty).
    pub content: String,
    /// When it was said (RFC 3339 or `YYYY-MM-DD`); default: now.
    pub timestamp: Option<String>,
    /// Caller data; `external_id` is the deduplication key.
    pub metadata: Option<Metadata>,
}

/// A thread to create.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewThread {
    /// Client-chosen id (1..=200 characters, no `/`); a UUIDv7 when None.
    pub thread_id: Option<String>,
    /// Title, at most 500 characters.
    pub title: Option<String>,
    /// Messages in order.
    pub messages: Vec<NewMessage>,
    /// Origin.
    pub source: Option<String>,
    /// Project.
    pub project: Option<String>,
    /// Workspace.
    pub workspace: Option<String>,
    /// Participants.
    pub participants: Vec<String>,
    /// Tool version.
    pub tool_version: Option<String>,
    /// Import date (RFC 3339 or `YYYY-MM-DD`).
    pub import_date: Option<String>,
    /// Caller data.
    pub metadata: Option<Metadata>,
    /// Space (default `default`); must exist.
    pub space_id: Option<String>,
    /// Deduplicate messages within the new thread on their keys (default true).
    pub deduplicate: bool,
    /// Derives deduplication keys for messages without `metadata.external_id`.
    pub idempotency_key: Option<String>,
}

/// Messages to append.
#[derive(Debug, Clone, PartialEq)]
pub struct AppendMessages {
    /// Messages in order.
    pub messages: Vec<NewMessage>,
    /// Skip messages whose key was seen (default true).
    pub deduplicate: bool,
    /// Derives keys for messages without `metadata.external_id`.
    pub idempotency_key: Option<String>,
    /// When Some, the append happens only if the thread holds exactly this many messages (else 409
    /// `checkpoint_conflict`).
    pub expected_message_count: Option<u64>,
}

/// Memories extracted from messages (see [`crate::extract`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extraction {
    /// False when extraction was switched off for the thread (`metadata.analysis` is
    /// `searchable-now-distill-on-demand`) or there was nothing to extract from.
    pub performed: bool,
    /// The memories written (created or updated).
    pub memories: Vec<crate::store::CreatedMemory>,
    /// Units dropped as near-duplicates of stored memories (term-set Jaccard at least 0.85).
    pub merged: usize,
    /// Why extraction did not run to the end (the messages are stored regardless).
    pub warnings: Vec<String>,
}

/// Result of a create.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedThread {
    /// The thread.
    pub thread: Thread,
    /// The stored messages.
    pub messages: Vec<Message>,
    /// Memories extracted from them.
    pub extraction: Extraction,
}

/// Result of an append.
#[derive(Debug, Clone, PartialEq)]
pub struct AppendReport {
    /// The thread after the append.
    pub thread: Thread,
    /// Messages stored by this call.
    pub added: Vec<Message>,
    /// Messages skipped as duplicates.
    pub skipped: u64,
    /// True when `expected_message_count` was checked.
    pub checkpointed: bool,
    /// Memories extracted from the added messages.
    pub extraction: Extraction,
}

/// A thread whose messages match a search.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadMatch {
    /// The thread.
    pub thread: Thread,
    /// Messages containing every query term.
    pub matched_messages: u64,
    /// Messages that hold every query term only together with their neighbours (the store's context window,
    /// [`crate::StoreConfig::context`]), such as a question and its answer.
    pub context_matches: u64,
}

/// What a thread delete removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadDeleteReport {
    /// Messages removed.
    pub deleted_messages: u64,
    /// Memories removed (those whose `source_thread_id` is the thread), with `cascade_delete_memories`.
    pub deleted_memories: u64,
}

impl Default for AppendMessages {
    fn default() -> Self {
        AppendMessages { messages: vec![], deduplicate: true, idempotency_key: None, expected_message_count: None }
    }
}
