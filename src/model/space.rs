//! Spaces: isolation scopes. Every record's storage key starts with its space id.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::common::Timestamp;

/// A space (spec: "Space"). JSON field names follow the spec, including its camelCase ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Space {
    /// Identifier used in `space_id` parameters (`default` always exists).
    pub id: String,
    /// Stable key, equal to `id`.
    pub key: String,
    /// Display name.
    pub name: String,
    /// Other names the space resolves by.
    pub aliases: Vec<String>,
    /// Description.
    pub description: String,
    /// Icon (free text, e.g. an emoji).
    pub icon: String,
    /// Instructions for agents working in the space.
    pub instructions: String,
    /// Spaces whose records are visible from this one.
    #[serde(rename = "sharedSpaceIds")]
    pub shared_space_ids: Vec<String>,
    /// Retrieval mode, `strict` by default.
    #[serde(rename = "defaultRetrievalMode")]
    pub default_retrieval_mode: String,
    /// True for the `default` space.
    pub is_default: bool,
    /// Record counts (filled when read; zero in storage).
    pub usage: SpaceUsage,
    /// Whether the space is observed (reserved; false).
    pub observed: bool,
    /// Whether the space has a profile (reserved; false).
    #[serde(rename = "hasProfile")]
    pub has_profile: bool,
    /// Creation time.
    pub created_at: Timestamp,
}

/// Record counts of a space.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SpaceUsage {
    /// Memories in any state but forgotten.
    pub memories: u64,
    /// Threads.
    pub threads: u64,
    /// Sources.
    pub sources: u64,
    /// Whether working memory exists.
    #[serde(rename = "hasWorkingMemory")]
    pub has_working_memory: bool,
}
