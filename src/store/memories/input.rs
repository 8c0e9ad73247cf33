//! The input of a memory write: the fields of a [`NewMemory`] or a [`MemoryPatch`], each checked against its
//! limits (all errors collected, one 422 `detail` entry each, as the spec's `detail` shape), then applied onto
//! the memory. A new field of a memory that callers set is declared, checked and applied here.

use super::*;
use crate::model::{TemporalContext, UnitType};

/// A memory to create, or to upsert when `id` names an existing one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewMemory {
    /// Caller-chosen id (1..=200 characters, no `/` or control characters); a UUIDv7 when None.
    /// An existing id makes the call an upsert: given fields replace stored ones, others are kept.
    pub id: Option<String>,
    /// Body text, 1..=32,768 bytes after trimming.
    pub content: String,
    /// Title, at most 500 characters.
    pub title: Option<String>,
    /// 0..=1, default 0.5.
    pub importance: Option<f64>,
    /// 0..=1, default 1.
    pub confidence: Option<f64>,
    /// Origin, at most 200 characters (e.g. `cli`).
    pub source: Option<String>,
    /// Label names (1..=100 characters each, at most 64); on an upsert, Some replaces the set.
    pub labels: Option<Vec<String>>,
    /// Default `fact`.
    pub unit_type: Option<UnitType>,
    /// `YYYY`, `YYYY-MM`, `YYYY-MM-DD` or RFC 3339.
    pub event_start: Option<String>,
    /// Same forms as `event_start`.
    pub event_end: Option<String>,
    /// Default `timeless`.
    pub temporal_context: Option<TemporalContext>,
    /// Provenance: thread id supplied by the caller.
    pub source_thread_id: Option<String>,
    /// Provenance: message id supplied by the caller.
    pub source_message_id: Option<String>,
    /// Free-form object, at most 64 KiB as JSON.
    pub metadata: Option<Metadata>,
    /// Space, default `default`; must exist.
    pub space_id: Option<String>,
    /// Range of the source, e.g. `start_index`/`end_index`.
    pub source_range: Option<BTreeMap<String, f64>>,
    /// How the memory was made (default `manual`).
    pub extraction_method: Option<String>,
    /// Caller-supplied vector ([`crate::embed::ExternalEmbedder`] stores only): [`crate::embed::Embedder::dim`]
    /// finite floats, not all zero; stored L2-normalised. None in such a store: the memory has no vector and is
    /// found lexically.
    pub embedding: Option<Vec<f32>>,
    /// When the memory expires ([`Memory::expires_at`]); None: never. A time already past is accepted (the
    /// memory is stored expired).
    pub expires_at: Option<Timestamp>,
}

/// A partial update: every Some field replaces the stored one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryPatch {
    /// New title.
    pub title: Option<String>,
    /// New content (1..=32,768 bytes).
    pub content: Option<String>,
    /// New importance 0..=1.
    pub importance: Option<f64>,
    /// New confidence 0..=1.
    pub confidence: Option<f64>,
    /// New unit type.
    pub unit_type: Option<UnitType>,
    /// Moves the memory to this space (must exist); labels follow by name.
    pub space_id: Option<String>,
    /// Replaces the label set.
    pub labels: Option<Vec<String>>,
    /// New source.
    pub source: Option<String>,
    /// New event start.
    pub event_start: Option<String>,
    /// New event end.
    pub event_end: Option<String>,
    /// New temporal context.
    pub temporal_context: Option<TemporalContext>,
    /// Replaces metadata.
    pub metadata: Option<Metadata>,
    /// A new caller-supplied vector (external-embedder stores only; rules of [`NewMemory::embedding`]). In such a
    /// store a content change without one keeps the old vector: it cannot be recomputed.
    pub embedding: Option<Vec<f32>>,
    /// Sets (`Some(Some(t))`) or clears (`Some(None)`) the expiry time; None leaves it.
    pub expires_at: Option<Option<Timestamp>>,
}

/// Checks a label name: trimmed, 1..=100 characters, no control characters.
pub(crate) fn check_label_name(name: &str, loc: &[&str], errs: &mut Vec<FieldError>) -> Option<String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > MAX_LABEL_CHARS || n.chars().any(char::is_control) {
        errs.push(
            FieldError::field(
                loc,
                "label_invalid",
                "label names are 1..=100 characters without control characters",
                n.into(),
            )
            .with_ctx(serde_json::json!({"max_length": MAX_LABEL_CHARS})),
        );
        return None;
    }
    Some(n.to_string())
}

pub(super) fn check_id(id: &str, loc: &[&str], errs: &mut Vec<FieldError>) {
    if id.trim().is_empty() || id.chars().count() > MAX_ID_CHARS || id.chars().any(|c| c.is_control() || c == '/') {
        errs.push(FieldError::field(
            loc,
            "id_invalid",
            "ids are 1..=200 characters without '/' or control characters",
            id.into(),
        ));
    }
}

pub(super) fn check_unit(x: Option<f64>, loc: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(v) = x
        && (!v.is_finite() || !(0.0..=1.0).contains(&v))
    {
        let kind = if v < 0.0 { "greater_than_equal" } else { "less_than_equal" };
        let msg = if v < 0.0 {
            "Input should be greater than or equal to 0"
        } else {
            "Input should be less than or equal to 1"
        };
        let input = serde_json::Number::from_f64(v).map(serde_json::Value::Number).unwrap_or_default();
        let ctx = if v < 0.0 { serde_json::json!({"ge": 0}) } else { serde_json::json!({"le": 1}) };
        errs.push(FieldError::field(loc, kind, msg, input).with_ctx(ctx));
    }
}

pub(super) fn check_content(c: &str, loc: &[&str], errs: &mut Vec<FieldError>) {
    if c.trim().is_empty() {
        errs.push(
            FieldError::field(loc, "string_too_short", "content must not be empty", c.into())
                .with_ctx(serde_json::json!({"min_length": 1})),
        );
    } else if c.len() > MAX_CONTENT_BYTES {
        errs.push(
            FieldError::field(
                loc,
                "string_too_long",
                format!("content is at most {MAX_CONTENT_BYTES} bytes"),
                serde_json::Value::Null,
            )
            .with_ctx(serde_json::json!({"max_length": MAX_CONTENT_BYTES})),
        );
    }
}

pub(super) fn check_len(s: Option<&str>, max: usize, loc: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(s) = s
        && s.chars().count() > max
    {
        errs.push(
            FieldError::field(loc, "string_too_long", format!("at most {max} characters"), serde_json::Value::Null)
                .with_ctx(serde_json::json!({"max_length": max})),
        );
    }
}

pub(super) fn check_date(s: Option<&str>, loc: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(s) = s
        && date_precision(s).is_none()
    {
        errs.push(FieldError::field(
            loc,
            "date_invalid",
            "expected YYYY, YYYY-MM, YYYY-MM-DD or an RFC 3339 date-time",
            s.into(),
        ));
    }
}

pub(super) fn check_metadata(m: Option<&Metadata>, loc: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(m) = m
        && serde_json::to_vec(&m.0).map_or(0, |v| v.len()) > MAX_METADATA_BYTES
    {
        errs.push(FieldError::field(
            loc,
            "too_large",
            "metadata is at most 65536 bytes of JSON",
            serde_json::Value::Null,
        ));
    }
}

pub(super) fn check_labels(labels: Option<&Vec<String>>, errs: &mut Vec<FieldError>) -> Option<BTreeSet<String>> {
    let labels = labels?;
    if labels.len() > MAX_LABELS {
        errs.push(FieldError::field(&["labels"], "too_long", "at most 64 labels", serde_json::Value::Null));
        return None;
    }
    let mut out = BTreeSet::new();
    for (i, l) in labels.iter().enumerate() {
        let idx = i.to_string();
        if let Some(n) = check_label_name(l, &["labels", &idx], errs) {
            out.insert(n);
        }
    }
    Some(out)
}

pub(super) fn validate_new(n: &NewMemory, errs: &mut Vec<FieldError>) -> Option<BTreeSet<String>> {
    if let Some(id) = &n.id {
        check_id(id, &["id"], errs);
    }
    check_content(&n.content, &["content"], errs);
    check_len(n.title.as_deref(), MAX_TITLE_CHARS, &["title"], errs);
    check_len(n.source.as_deref(), 200, &["source"], errs);
    check_unit(n.importance, &["importance"], errs);
    check_unit(n.confidence, &["confidence"], errs);
    check_date(n.event_start.as_deref(), &["event_start"], errs);
    check_date(n.event_end.as_deref(), &["event_end"], errs);
    check_metadata(n.metadata.as_ref(), &["metadata"], errs);
    if let Some(s) = &n.space_id {
        check_id(s, &["space_id"], errs);
    }
    check_labels(n.labels.as_ref(), errs)
}

pub(super) fn validate_patch(p: &MemoryPatch, errs: &mut Vec<FieldError>) -> Option<BTreeSet<String>> {
    if let Some(c) = &p.content {
        check_content(c, &["content"], errs);
    }
    check_len(p.title.as_deref(), MAX_TITLE_CHARS, &["title"], errs);
    check_len(p.source.as_deref(), 200, &["source"], errs);
    check_unit(p.importance, &["importance"], errs);
    check_unit(p.confidence, &["confidence"], errs);
    check_date(p.event_start.as_deref(), &["event_start"], errs);
    check_date(p.event_end.as_deref(), &["event_end"], errs);
    check_metadata(p.metadata.as_ref(), &["metadata"], errs);
    if let Some(s) = &p.space_id {
        check_id(s, &["space_id"], errs);
    }
    check_labels(p.labels.as_ref(), errs)
}

/// Applies the fields of `n` onto `m` (a fresh memory with defaults, or the stored one for an upsert): the
/// fields a patch also has, then the provenance fields only a create carries.
pub(super) fn apply_new(m: &mut Memory, n: &NewMemory) {
    let patch = MemoryPatch {
        title: n.title.clone(),
        content: Some(n.content.clone()),
        importance: n.importance,
        confidence: n.confidence,
        unit_type: n.unit_type,
        space_id: None,
        labels: None,
        source: n.source.clone(),
        event_start: n.event_start.clone(),
        event_end: n.event_end.clone(),
        temporal_context: n.temporal_context,
        metadata: n.metadata.clone(),
        embedding: None,
        // An upsert without an expiry keeps the stored one, as for every other field.
        expires_at: n.expires_at.map(Some),
    };
    apply_patch(m, &patch);
    if let Some(x) = &n.source_thread_id {
        m.source_thread_id = Some(x.clone());
    }
    if let Some(x) = &n.source_message_id {
        m.source_message_id = Some(x.clone());
    }
    if let Some(x) = &n.source_range {
        m.source_range = x.clone();
    }
    if let Some(x) = &n.extraction_method {
        m.extraction_method = x.clone();
    }
}

pub(super) fn apply_patch(m: &mut Memory, p: &MemoryPatch) {
    if let Some(e) = p.expires_at {
        m.expires_at = e;
    }
    if let Some(c) = &p.content {
        m.content = c.trim().to_string();
    }
    if let Some(t) = &p.title {
        m.title = t.trim().to_string();
    }
    if let Some(x) = p.importance {
        m.importance = x;
    }
    if let Some(x) = p.confidence {
        m.confidence = x;
    }
    if let Some(x) = p.unit_type {
        m.unit_type = x;
    }
    if let Some(x) = &p.source {
        m.source = x.clone();
    }
    if let Some(x) = &p.event_start {
        m.event_start = Some(x.clone());
        m.temporal_precision = date_precision(x).map(str::to_string);
    }
    if let Some(x) = &p.event_end {
        m.event_end = Some(x.clone());
    }
    if let Some(x) = p.temporal_context {
        m.temporal_context = x;
    }
    if let Some(x) = &p.metadata {
        m.metadata = x.clone();
    }
}
