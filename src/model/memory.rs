//! The Memory record (spec: "Memory (full record)") and its small enumerations.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

use super::common::{Metadata, Timestamp};

/// The kind of knowledge unit (spec: `unit_type`, default `fact`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum UnitType {
    /// A fact about the world or the user (the default).
    #[default]
    Fact,
    /// What someone likes or wants.
    Preference,
    /// A choice that was made.
    Decision,
    /// Something intended for the future.
    Plan,
    /// How to do something.
    Procedure,
    /// Something learned, an insight.
    Learning,
    /// Background context.
    Context,
    /// Something that happened at a time.
    Event,
}

impl UnitType {
    /// Every value, in the spec's order.
    pub const ALL: [UnitType; 8] = [
        UnitType::Fact,
        UnitType::Preference,
        UnitType::Decision,
        UnitType::Plan,
        UnitType::Procedure,
        UnitType::Learning,
        UnitType::Context,
        UnitType::Event,
    ];

    /// The wire name (`fact`, `preference`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            UnitType::Fact => "fact",
            UnitType::Preference => "preference",
            UnitType::Decision => "decision",
            UnitType::Plan => "plan",
            UnitType::Procedure => "procedure",
            UnitType::Learning => "learning",
            UnitType::Context => "context",
            UnitType::Event => "event",
        }
    }

    /// Parses a wire name (exact, lowercase).
    pub fn parse(s: &str) -> Option<Self> {
        UnitType::ALL.into_iter().find(|u| u.as_str() == s)
    }
}

/// When the knowledge holds (spec: `temporal_context`, default `timeless`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum TemporalContext {
    /// About the past.
    Past,
    /// About now.
    Present,
    /// About the future.
    Future,
    /// Not tied to a time (the default).
    #[default]
    Timeless,
}

impl TemporalContext {
    /// Every value.
    pub const ALL: [TemporalContext; 4] =
        [TemporalContext::Past, TemporalContext::Present, TemporalContext::Future, TemporalContext::Timeless];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TemporalContext::Past => "past",
            TemporalContext::Present => "present",
            TemporalContext::Future => "future",
            TemporalContext::Timeless => "timeless",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        TemporalContext::ALL.into_iter().find(|u| u.as_str() == s)
    }
}

/// Lifecycle state of a memory (list filter `state`, default `active`). See `docs/api.md` for the moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "lowercase")]
pub enum MemoryState {
    /// In everyday recall (the default).
    #[default]
    Active,
    /// Hidden from recall, still readable by id and listable with `state=archived`.
    Archived,
    /// Marked outdated, kept for history.
    Deprecated,
    /// Replaced by a newer memory.
    Superseded,
    /// Removed from recall and by-id reads; graph rows kept.
    Forgotten,
}

impl MemoryState {
    /// Every value.
    pub const ALL: [MemoryState; 5] = [
        MemoryState::Active,
        MemoryState::Archived,
        MemoryState::Deprecated,
        MemoryState::Superseded,
        MemoryState::Forgotten,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryState::Active => "active",
            MemoryState::Archived => "archived",
            MemoryState::Deprecated => "deprecated",
            MemoryState::Superseded => "superseded",
            MemoryState::Forgotten => "forgotten",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        MemoryState::ALL.into_iter().find(|u| u.as_str() == s)
    }
}

/// A memory: one short unit of knowledge. Every field and default of the spec's full record.
///
/// Stored with postcard behind a format-version byte; serialized to JSON as the spec's full record.
/// `embedding` is not part of this struct: vectors live in their own table and are not echoed by the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Memory {
    /// Identifier, unique across spaces (caller-chosen or a UUIDv7).
    pub id: String,
    /// Always `memory`.
    pub node_type: String,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change of content or fields.
    pub updated_at: Timestamp,
    /// Free-form caller data.
    pub metadata: Metadata,
    /// Body text, 1..=32,768 bytes of UTF-8.
    pub content: String,
    /// Title, at most 500 characters; empty when not given.
    pub title: String,
    /// Importance in 0..=1 (default 0.5).
    pub importance: f64,
    /// Confidence in 0..=1 (default 1).
    pub confidence: f64,
    /// PageRank score over the entity graph (0 until the graph issue computes it).
    pub pagerank_score: f64,
    /// Range of the source the memory came from, e.g. `{"start_index": 2, "end_index": 5}`.
    pub source_range: BTreeMap<String, f64>,
    /// Where the memory came from (free text such as `cli`, `api`).
    pub source: String,
    /// The space holding the memory (default `default`).
    pub space_id: String,
    /// Semantic field (free text; empty by default).
    pub semantic_field: String,
    /// True while the vector of this memory is not built by the active embedder.
    pub reindex_needed: bool,
    /// When the vector was last built.
    pub last_reindexed_at: Option<Timestamp>,
    /// Last read by id.
    pub last_accessed_at: Option<Timestamp>,
    /// Last click (client-reported).
    pub last_clicked_at: Option<Timestamp>,
    /// Last evaluation (client-reported).
    pub last_evaluated_at: Option<Timestamp>,
    /// Reads by id.
    pub access_count: i64,
    /// Appearances in search results.
    pub appearances: i64,
    /// Clicks (client-reported).
    pub clicks: i64,
    /// Dwell time in milliseconds (client-reported).
    pub total_dwell_time_ms: i64,
    /// Cached decay score in 0..=1 (default 1).
    pub decay_score_cached: f64,
    /// `past`, `present`, `future` or `timeless` (default).
    pub temporal_context: TemporalContext,
    /// Temporal type (free text, e.g. `point`, `range`).
    pub temporal_type: Option<String>,
    /// Event start: `YYYY`, `YYYY-MM`, `YYYY-MM-DD` or an RFC 3339 date-time.
    pub event_start: Option<String>,
    /// Event end, same forms as `event_start`.
    pub event_end: Option<String>,
    /// `year`, `month`, `day` or `time`, derived from the form of `event_start`.
    pub temporal_precision: Option<String>,
    /// Confidence in the temporal fields, 0..=1.
    pub temporal_confidence: Option<f64>,
    /// Kind of unit (default `fact`).
    pub unit_type: UnitType,
    /// False once superseded by a newer version.
    pub is_latest: bool,
    /// Version number, 1 for a new memory, +1 on each content change.
    pub version: i64,
    /// True for crystals (memories synthesised from several others).
    pub is_crystal: bool,
    /// Title of a crystal.
    pub crystal_title: Option<String>,
    /// Number of source memories of a crystal.
    pub source_unit_count: Option<i64>,
    /// How the memory was made (default `manual`).
    pub extraction_method: String,
    /// Review status (default empty).
    pub review_status: String,
    /// Lifecycle state (default `active`).
    pub state: MemoryState,
    /// Marked as favourite.
    pub is_favorite: bool,
    /// Id of the thread the memory came from, when the caller supplied one.
    pub source_thread_id: Option<String>,
    /// Id of the message the memory came from, when the caller supplied one.
    pub source_message_id: Option<String>,
    /// When the memory expires (RFC 3339 in JSON), if ever. From then on it leaves search, listings and the
    /// context bundle but stays readable by id (with `expired: true`); the expiry worker forgets it after the
    /// grace period (`StoreConfig::expiry_grace`). Engram extension, after mem0's `expiration_date`; added in
    /// store format 2.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

impl Memory {
    /// A memory with every spec default, the given id, space and content, stamped `now`.
    pub fn with_defaults(id: String, space_id: String, content: String, now: super::common::Timestamp) -> Self {
        Memory {
            id,
            node_type: "memory".into(),
            created_at: now,
            updated_at: now,
            metadata: Metadata::new(),
            content,
            title: String::new(),
            importance: 0.5,
            confidence: 1.0,
            pagerank_score: 0.0,
            source_range: BTreeMap::new(),
            source: String::new(),
            space_id,
            semantic_field: String::new(),
            reindex_needed: false,
            last_reindexed_at: None,
            last_accessed_at: None,
            last_clicked_at: None,
            last_evaluated_at: None,
            access_count: 0,
            appearances: 0,
            clicks: 0,
            total_dwell_time_ms: 0,
            decay_score_cached: 1.0,
            temporal_context: TemporalContext::Timeless,
            temporal_type: None,
            event_start: None,
            event_end: None,
            temporal_precision: None,
            temporal_confidence: None,
            unit_type: UnitType::Fact,
            is_latest: true,
            version: 1,
            is_crystal: false,
            crystal_title: None,
            source_unit_count: None,
            extraction_method: "manual".into(),
            review_status: String::new(),
            state: MemoryState::Active,
            is_favorite: false,
            source_thread_id: None,
            source_message_id: None,
            expires_at: None,
        }
    }

    /// True when the memory has an expiry time at or before `now`.
    pub fn expired_at(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|e| e <= now)
    }

    /// The text the indexes see: title, content, and the event date spelled out (`8 May 2023`) so that
    /// questions naming a date or month find the memory lexically.
    pub fn index_text(&self) -> String {
        let mut s = String::with_capacity(self.title.len() + self.content.len() + 24);
        if !self.title.is_empty() {
            s.push_str(&self.title);
            s.push('\n');
        }
        s.push_str(&self.content);
        if let Some(date) = self.event_start.as_deref().and_then(spell_date) {
            s.push('\n');
            s.push_str(&date);
        }
        s
    }
}

/// English month names, January first (used to spell and parse dates).
pub const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `2023-05-08...` to `8 May 2023`, `2023-05` to `May 2023`, `2023` to `2023`; None for anything else.
pub fn spell_date(s: &str) -> Option<String> {
    let head: String = s.chars().take(10).collect();
    let parts: Vec<&str> = head.split('-').collect();
    let year: i32 = parts.first()?.parse().ok()?;
    match parts.len() {
        1 => Some(year.to_string()),
        2 | 3 => {
            let month: usize = parts[1].parse().ok()?;
            let name = MONTH_NAMES.get(month.checked_sub(1)?)?;
            if parts.len() == 2 {
                Some(format!("{name} {year}"))
            } else {
                let day: u32 = parts[2].get(..2)?.parse().ok()?;
                Some(format!("{day} {name} {year}"))
            }
        }
        _ => None,
    }
}

/// The precision of a date string: `year`, `month`, `day` or `time`; None if it is none of the accepted forms.
pub fn date_precision(s: &str) -> Option<&'static str> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    match b.len() {
        4 if digits(0..4) => Some("year"),
        7 if digits(0..4) && b[4] == b'-' && digits(5..7) => {
            let m: u32 = s[5..7].parse().ok()?;
            (1..=12).contains(&m).then_some("month")
        }
        10 => super::common::Timestamp::parse(s).map(|_| "day"),
        _ => super::common::Timestamp::parse(s).map(|_| "time"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_spelled_and_classified() {
        assert_eq!(spell_date("2023-05-08").as_deref(), Some("8 May 2023"));
        assert_eq!(spell_date("2023-05").as_deref(), Some("May 2023"));
        assert_eq!(spell_date("2023-05-08T13:56:00Z").as_deref(), Some("8 May 2023"));
        assert_eq!(spell_date("soon"), None);
        assert_eq!(date_precision("2023"), Some("year"));
        assert_eq!(date_precision("2023-13"), None);
        assert_eq!(date_precision("2023-02-30"), None);
        assert_eq!(date_precision("2023-02-28"), Some("day"));
        assert_eq!(date_precision("2023-02-28T10:00:00+02:00"), Some("time"));
    }
}
