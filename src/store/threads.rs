//! Threads and messages: create, append (deduplicated and checkpointed), read, list, search, metadata merge,
//! favourite, delete. One write transaction per call; a failed call writes nothing.
//!
//! Deduplication key of a message (when `deduplicate` is true, the default): its `metadata.external_id`, else
//! `<idempotency_key>:<position in the request>` when the request has an idempotency key, else none (the message
//! is always appended). A key seen before in the thread skips the message, so replaying a sync is idempotent
//! (client contract 5.3).
use crate::storage::Readable;

use super::{DEFAULT_SPACE, KnowledgeStore, Page};
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Message, Metadata, Thread, Timestamp};
use crate::store::{memory, space, thread};
use crate::text;

/// Longest message content in bytes.
pub const MAX_MESSAGE_BYTES: usize = 262_144;
/// Most messages per create or append call.
pub const MAX_MESSAGES_PER_CALL: usize = 10_000;
/// Longest thread id in characters.
pub const MAX_THREAD_ID_CHARS: usize = 200;
/// Longest role in characters.
pub const MAX_ROLE_CHARS: usize = 50;
/// Longest thread title in characters.
pub const MAX_THREAD_TITLE_CHARS: usize = 500;
/// Largest metadata object (thread or message) as JSON, in bytes.
pub const MAX_THREAD_METADATA_BYTES: usize = 65_536;

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

impl Default for AppendMessages {
    fn default() -> Self {
        AppendMessages { messages: vec![], deduplicate: true, idempotency_key: None, expected_message_count: None }
    }
}

/// Memories extracted from messages (see [`crate::extract`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extraction {
    /// False when extraction was switched off for the thread (`metadata.analysis` is
    /// `searchable-now-distill-on-demand`) or there was nothing to extract from.
    pub performed: bool,
    /// The memories written (created or updated).
    pub memories: Vec<super::CreatedMemory>,
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

fn check_thread_id(id: &str, loc: &[&str], errs: &mut Vec<FieldError>) {
    if id.trim().is_empty()
        || id.chars().count() > MAX_THREAD_ID_CHARS
        || id.chars().any(|c| c.is_control() || c == '/')
    {
        errs.push(FieldError::field(
            loc,
            "id_invalid",
            "thread ids are 1..=200 characters without '/' or control characters",
            id.into(),
        ));
    }
}

fn metadata_too_big(m: &Metadata) -> bool {
    serde_json::to_vec(&m.0).map_or(0, |v| v.len()) > MAX_THREAD_METADATA_BYTES
}

fn check_messages(msgs: &[NewMessage], errs: &mut Vec<FieldError>) {
    if msgs.len() > MAX_MESSAGES_PER_CALL {
        errs.push(
            FieldError::field(&["messages"], "too_long", "at most 10000 messages per call", msgs.len().into())
                .with_ctx(serde_json::json!({"max_length": MAX_MESSAGES_PER_CALL})),
        );
        return;
    }
    for (i, m) in msgs.iter().enumerate() {
        let i = i.to_string();
        if m.role.trim().is_empty() || m.role.chars().count() > MAX_ROLE_CHARS {
            errs.push(FieldError::field(
                &["messages", &i, "role"],
                "role_invalid",
                "role is 1..=50 characters",
                m.role.clone().into(),
            ));
        }
        if m.content.len() > MAX_MESSAGE_BYTES {
            errs.push(
                FieldError::field(
                    &["messages", &i, "content"],
                    "string_too_long",
                    "message content is at most 262144 bytes",
                    m.content.len().into(),
                )
                .with_ctx(serde_json::json!({"max_length": MAX_MESSAGE_BYTES})),
            );
        }
        if let Some(ts) = &m.timestamp
            && Timestamp::parse(ts).is_none()
        {
            errs.push(FieldError::field(
                &["messages", &i, "timestamp"],
                "datetime_parsing",
                "timestamp is RFC 3339 (or YYYY-MM-DD)",
                ts.clone().into(),
            ));
        }
        if m.metadata.as_ref().is_some_and(metadata_too_big) {
            errs.push(FieldError::field(
                &["messages", &i, "metadata"],
                "too_long",
                "message metadata is at most 65536 bytes as JSON",
                serde_json::Value::Null,
            ));
        }
    }
}

/// The deduplication key of the `i`-th message of a request.
fn dedup_key(m: &NewMessage, i: usize, idempotency_key: Option<&str>) -> Option<String> {
    let ext = m.metadata.as_ref().and_then(|md| md.0.get("external_id")).and_then(|v| match v {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    ext.or_else(|| idempotency_key.filter(|k| !k.is_empty()).map(|k| format!("{k}:{i}")))
}

/// Extractive summary: the first sentence of the first non-empty user message (else of any message), at most
/// 300 characters.
fn summarize(messages: &[Message]) -> String {
    let first = messages
        .iter()
        .find(|m| m.role == "user" && !m.content.trim().is_empty())
        .or_else(|| messages.iter().find(|m| !m.content.trim().is_empty()));
    let Some(m) = first else { return String::new() };
    crate::extract::first_sentence(m.content.trim()).chars().take(300).collect()
}

/// Stores `msgs` after the thread's current messages, skipping duplicates; updates `thread`.
fn append_messages(
    w: &mut thread::Writer<'_>,
    thread: &mut Thread,
    msgs: &[NewMessage],
    deduplicate: bool,
    idempotency_key: Option<&str>,
    now: Timestamp,
) -> Result<(Vec<Message>, u64)> {
    let (space, tid) = (thread.space_id.clone(), thread.thread_id.clone());
    let mut added = Vec::new();
    let mut skipped = 0;
    let mut seen_here = std::collections::HashSet::new();
    for (i, m) in msgs.iter().enumerate() {
        let key = if deduplicate { dedup_key(m, i, idempotency_key) } else { None };
        if let Some(k) = &key
            && (w.has_key(&space, &tid, k)? || !seen_here.insert(k.clone()))
        {
            skipped += 1;
            continue;
        }
        let order_index = thread.message_count;
        let msg = Message {
            id: format!("{tid}#{order_index}"),
            node_type: "message".into(),
            created_at: now,
            updated_at: now,
            metadata: m.metadata.clone().unwrap_or_default(),
            content: m.content.clone(),
            role: m.role.trim().to_string(),
            order_index,
            timestamp: m.timestamp.as_deref().and_then(Timestamp::parse).unwrap_or(now),
            token_count: text::words(&m.content).len() as u64,
        };
        w.put_message(&space, &tid, &msg, key.as_deref())?;
        thread.message_count += 1;
        added.push(msg);
    }
    if !added.is_empty() {
        thread.updated_at = now;
    }
    if thread.summary.is_empty() {
        thread.summary = summarize(&added);
    }
    Ok((added, skipped))
}

/// `metadata.analysis` of a thread whose every message becomes one memory ([`crate::extract::units_per_message`]).
pub const PER_MESSAGE: &str = "per-message";

/// The id prefix of memories extracted from thread `thread_id` of `space`: the thread id, prefixed with
/// `<space>:` outside `default` (thread ids are unique per space, memory ids across spaces).
pub fn thread_memory_prefix(space: &str, thread_id: &str) -> String {
    if space == DEFAULT_SPACE { thread_id.to_string() } else { format!("{space}:{thread_id}") }
}

fn jaccard(a: &std::collections::BTreeSet<String>, b: &std::collections::BTreeSet<String>) -> f64 {
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    if union == 0 { 0.0 } else { inter as f64 / union as f64 }
}

fn thread_not_found(id: &str) -> Error {
    Error::not_found(ErrorCode::ThreadNotFound, format!("thread not found: '{id}'"))
}

impl KnowledgeStore {
    /// The space holding thread `id`: `space` when given, else `default` when it holds the id, else the first
    /// space that does.
    fn locate_thread(&self, rtx: &crate::storage::ReadTx, id: &str, space: Option<&str>) -> Result<String> {
        let t = thread::thread_spaces(&rtx)?;
        if let Some(s) = space {
            return if t.get((id, s))?.is_some() { Ok(s.to_string()) } else { Err(thread_not_found(id)) };
        }
        if t.get((id, DEFAULT_SPACE))?.is_some() {
            return Ok(DEFAULT_SPACE.into());
        }
        thread::a_space_of(rtx, id)?.ok_or_else(|| thread_not_found(id))
    }

    /// Creates a thread with its messages.
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: bad id, title, role, timestamp, sizes (limits in this module's constants).
    /// * [`ErrorKind::Conflict`] (`thread_exists`, detail "thread '`<id>`' already exists in space '`<space>`'").
    /// * [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn create_thread(&self, new: NewThread) -> Result<CreatedThread> {
        let mut errs = Vec::new();
        if let Some(id) = &new.thread_id {
            check_thread_id(id, &["thread_id"], &mut errs);
        }
        if new.title.as_ref().is_some_and(|t| t.chars().count() > MAX_THREAD_TITLE_CHARS) {
            errs.push(FieldError::field(
                &["title"],
                "string_too_long",
                "title is at most 500 characters",
                serde_json::Value::Null,
            ));
        }
        if let Some(d) = &new.import_date
            && Timestamp::parse(d).is_none()
        {
            errs.push(FieldError::field(
                &["import_date"],
                "datetime_parsing",
                "import_date is RFC 3339",
                d.clone().into(),
            ));
        }
        if new.metadata.as_ref().is_some_and(metadata_too_big) {
            errs.push(FieldError::field(
                &["metadata"],
                "too_long",
                "metadata is at most 65536 bytes as JSON",
                serde_json::Value::Null,
            ));
        }
        check_messages(&new.messages, &mut errs);
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let space = new.space_id.clone().unwrap_or_else(|| DEFAULT_SPACE.to_string());
        let id = new.thread_id.clone().unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let now = Timestamp::now();
        self.core
            .write(|txn, _| {
                if space::spaces(txn)?.get(space.as_str())?.is_none() {
                    return Err(Error::not_found(ErrorCode::SpaceNotFound, format!("space '{space}' does not exist")));
                }
                let mut t = thread::Writer::open(txn)?;
                if t.contains(&space, &id)? {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("thread '{id}' already exists in space '{space}'"),
                    )
                    .with_code(ErrorCode::ThreadExists));
                }
                let mut thread = Thread {
                    id: id.clone(),
                    node_type: "thread".into(),
                    created_at: now,
                    updated_at: now,
                    metadata: new.metadata.clone().unwrap_or_default(),
                    thread_id: id.clone(),
                    title: new.title.clone().unwrap_or_default(),
                    summary: String::new(),
                    message_count: 0,
                    participants: new.participants.clone(),
                    source: new.source.clone().unwrap_or_default(),
                    space_id: space.clone(),
                    project: new.project.clone().unwrap_or_default(),
                    workspace: new.workspace.clone().unwrap_or_default(),
                    tool_version: new.tool_version.clone().unwrap_or_default(),
                    import_date: new.import_date.as_deref().and_then(Timestamp::parse),
                    is_favorite: false,
                };
                let (messages, _) = append_messages(
                    &mut t,
                    &mut thread,
                    &new.messages,
                    new.deduplicate,
                    new.idempotency_key.as_deref(),
                    now,
                )?;
                if thread.title.is_empty() {
                    thread.title = thread.summary.chars().take(80).collect();
                }
                t.put(&thread)?;
                Ok(CreatedThread { thread, messages, extraction: Extraction::default() })
            })
            .map(|mut c| {
                c.extraction = self.extract_or_warn(&c.thread, &c.messages);
                c
            })
    }

    /// Appends messages to thread `id` (in `space`, or located as [`KnowledgeStore::get_thread`] does).
    ///
    /// # Errors
    /// * [`ErrorKind::NotFound`] (`thread_not_found`).
    /// * [`ErrorKind::Conflict`] (`checkpoint_conflict`) when `expected_message_count` differs from the count.
    /// * [`ErrorKind::InvalidInput`] for bad messages. Nothing is added on any error.
    pub fn append_messages(&self, id: &str, space: Option<&str>, req: AppendMessages) -> Result<AppendReport> {
        let mut errs = Vec::new();
        check_messages(&req.messages, &mut errs);
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let now = Timestamp::now();
        let (thread, (added, skipped)) = self.modify_thread(id, space, |t, thread| {
            if let Some(expected) = req.expected_message_count
                && expected != thread.message_count
            {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "checkpoint conflict: expected {expected} messages in thread '{id}', it has {}; resend the \
                         full snapshot without expected_message_count",
                        thread.message_count
                    ),
                )
                .with_code(ErrorCode::CheckpointConflict));
            }
            append_messages(t, thread, &req.messages, req.deduplicate, req.idempotency_key.as_deref(), now)
        })?;
        let extraction = self.extract_or_warn(&thread, &added);
        let checkpointed = req.expected_message_count.is_some();
        Ok(AppendReport { thread, added, skipped, checkpointed, extraction })
    }

    /// [`KnowledgeStore::extract_memories`] after the messages are committed: a failure there must not turn a
    /// stored create or append into an error (the client would retry and duplicate), so it becomes a warning.
    fn extract_or_warn(&self, thread: &Thread, messages: &[Message]) -> Extraction {
        self.extract_memories(thread, messages).unwrap_or_else(|e| {
            tracing::warn!(thread = %thread.thread_id, error = %e.chain(), "memory extraction failed");
            Extraction { warnings: vec![format!("memory extraction failed: {e}")], ..Extraction::default() }
        })
    }

    /// Extracts memories from `messages` of `thread` ([`crate::extract::units_from_messages`]) and writes them
    /// in one transaction, with provenance: `source_thread_id`, `metadata.source_message_indices`,
    /// `source_range {start_index, end_index}`. Ids are `<thread>#m<first message index>` (prefixed with the
    /// space outside `default`), so extracting the same messages again updates instead of duplicating. A unit
    /// whose stemmed terms overlap a stored memory of the space by Jaccard 0.85 or more is dropped as a
    /// near-duplicate.
    ///
    /// # Errors
    /// Store errors of [`KnowledgeStore::create_memories`].
    pub fn extract_memories(&self, thread: &Thread, messages: &[Message]) -> Result<Extraction> {
        let analysis = thread.metadata.0.get("analysis").and_then(|v| v.as_str());
        if analysis == Some("searchable-now-distill-on-demand") || messages.is_empty() {
            return Ok(Extraction::default());
        }
        let prefix = thread_memory_prefix(&thread.space_id, &thread.thread_id);
        let per_message = analysis == Some(PER_MESSAGE);
        self.extract_with(&thread.space_id, &prefix, Some(&thread.thread_id), messages, per_message)
    }

    /// Extraction from messages that are not stored as a thread (`POST /memories/distill` with
    /// `thread_content`): as [`KnowledgeStore::extract_memories`], with ids `<id_prefix>#m<index>` and
    /// `source_thread_id` only when the caller named a thread.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`) and store errors.
    pub fn extract_units(
        &self,
        space: &str,
        id_prefix: &str,
        source_thread: Option<&str>,
        messages: &[Message],
    ) -> Result<Extraction> {
        self.extract_with(space, id_prefix, source_thread, messages, false)
    }

    fn extract_with(
        &self,
        space: &str,
        id_prefix: &str,
        source_thread: Option<&str>,
        messages: &[Message],
        per_message: bool,
    ) -> Result<Extraction> {
        self.spaces().require(space)?;
        let units = if per_message {
            crate::extract::units_per_message(messages)
        } else {
            crate::extract::units_from_messages(messages)
        };
        let prefix = id_prefix.to_string();
        let prefix = if prefix.chars().count() > 180 {
            format!("thread-{:016x}", crate::embed::fnv1a(prefix.as_bytes()))
        } else {
            prefix
        };
        let mut batch = Vec::with_capacity(units.len());
        let mut merged = 0;
        let mut seen: Vec<std::collections::BTreeSet<String>> = Vec::new();
        for u in units {
            let terms: std::collections::BTreeSet<String> =
                if per_message { Default::default() } else { text::terms(&u.content).into_iter().collect() };
            if !per_message
                && (self.near_duplicate(space, &u.content, &terms)? || seen.iter().any(|s| jaccard(s, &terms) >= 0.85))
            {
                merged += 1;
                continue;
            }
            let first = u.message_indices.first().copied().unwrap_or(0);
            let last = u.message_indices.last().copied().unwrap_or(first);
            let mut md = serde_json::Map::new();
            md.insert("source_message_indices".into(), u.message_indices.clone().into());
            md.insert("extraction".into(), if per_message { PER_MESSAGE } else { "engram-rules-v1" }.into());
            if let Some(e) = &u.temporal_expression {
                md.insert("temporal_expression".into(), e.clone().into());
            }
            let mut range = std::collections::BTreeMap::new();
            range.insert("start_index".to_string(), first as f64);
            range.insert("end_index".to_string(), last as f64);
            batch.push(super::NewMemory {
                id: Some(format!("{prefix}#m{first}")),
                content: u.content,
                title: Some(u.title).filter(|t| !t.is_empty()),
                importance: Some(u.importance),
                confidence: Some(u.confidence),
                source: Some("thread".into()),
                unit_type: Some(u.unit_type),
                event_start: u.event_start,
                event_end: u.event_end,
                temporal_context: Some(u.temporal_context),
                source_thread_id: source_thread.map(str::to_string),
                metadata: Some(Metadata(md)),
                space_id: Some(space.to_string()),
                source_range: Some(range),
                extraction_method: Some("rules".into()),
                ..Default::default()
            });
            seen.push(terms);
        }
        // A transcript stored turn by turn is conversation, not distilled statements: no timeline reviews.
        let memories = if batch.is_empty() { Vec::new() } else { self.create_memories_with(batch, !per_message)? };
        Ok(Extraction { performed: true, memories, merged, warnings: vec![] })
    }

    /// True when a stored memory of `space` (among the top 3 BM25 hits for `content`) has a term set with
    /// Jaccard similarity at least 0.85 to `terms`.
    fn near_duplicate(&self, space: &str, content: &str, terms: &std::collections::BTreeSet<String>) -> Result<bool> {
        if terms.is_empty() {
            return Ok(false);
        }
        let query: String = content.chars().take(4000).collect();
        let q = super::SearchQuery {
            query,
            space_id: space.to_string(),
            limit: 3,
            filter: Default::default(),
            mode: super::SearchMode::Lexical,
            fusion: None,
            query_embedding: None,
            options: super::SearchOptions::OWN_TEXT,
        };
        let hits = match self.search(&q) {
            Ok(r) => r.hits,
            Err(e) if e.kind() == ErrorKind::InvalidInput => return Ok(false),
            Err(e) => return Err(e),
        };
        Ok(hits.iter().any(|h| {
            let other: std::collections::BTreeSet<String> = text::terms(&h.view.memory.content).into_iter().collect();
            jaccard(terms, &other) >= 0.85
        }))
    }

    /// Thread `id`: in `space` when given, else in `default`, else in the first space holding that id.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn get_thread(&self, id: &str, space: Option<&str>) -> Result<Thread> {
        let rtx = self.core.db.read()?;
        let space = self.locate_thread(&rtx, id, space)?;
        thread::threads(&rtx)?.get((space.as_str(), id))?.ok_or_else(|| thread_not_found(id))
    }

    /// Thread `id` and its messages `offset..offset+limit` in order.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn thread_messages(
        &self,
        id: &str,
        space: Option<&str>,
        limit: usize,
        offset: u64,
    ) -> Result<(Thread, Vec<Message>)> {
        let rtx = self.core.db.read()?;
        let space = self.locate_thread(&rtx, id, space)?;
        let thread: Thread = thread::threads(&rtx)?.get((space.as_str(), id))?.ok_or_else(|| thread_not_found(id))?;
        Ok((thread, thread::messages_between(&rtx, (space.as_str(), id), offset, u64::MAX, limit)?))
    }

    /// Thread `id` and all its messages in order, read in keyset pages of 1,000 (each page starts after the last
    /// order index read, so no read is unbounded; appends between pages show, as in a live file).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn all_thread_messages(&self, id: &str, space: Option<&str>) -> Result<(Thread, Vec<Message>)> {
        const PAGE: usize = 1000;
        let (thread, mut out) = self.thread_messages(id, space, PAGE, 0)?;
        let mut last = out.len();
        while last == PAGE {
            let after = out.last().map_or(0, |m| m.order_index + 1);
            let (_, more) = self.thread_messages(id, Some(&thread.space_id), PAGE, after)?;
            last = more.len();
            out.extend(more);
        }
        Ok((thread, out))
    }

    /// Threads of `space`, most recently updated first, optionally of one `source`.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn list_threads(&self, space: &str, source: Option<&str>, limit: usize, offset: usize) -> Result<Page<Thread>> {
        self.spaces().require(space)?;
        let mut all = self.threads_of(space)?;
        if let Some(src) = source {
            all.retain(|t| t.source == src);
        }
        all.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.thread_id.cmp(&b.thread_id)));
        let total = all.len();
        let items = all.into_iter().skip(offset).take(limit).collect();
        Ok(Page { items, total, limit, offset })
    }

    fn threads_of(&self, space: &str) -> Result<Vec<Thread>> {
        Ok(thread::threads(&self.core.db.read()?)?.in_space(space)?.into_iter().map(|(_, t)| t).collect())
    }

    /// Threads of `space` with messages containing every term of `query` (stemmed, case-insensitive), most
    /// matching messages first. A message also matches through its context: when every term occurs in it or
    /// its neighbours within the store's context window ([`crate::StoreConfig::context`], default 1), such as
    /// a question and its answer; those count as `context_matches` and rank after direct matches. A scan over
    /// the space's messages: O(messages).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a blank query; [`ErrorKind::NotFound`] (`space_not_found`). A query of
    /// stop words and punctuation only finds nothing.
    pub fn search_threads(
        &self,
        query: &str,
        space: &str,
        source: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ThreadMatch>> {
        if query.trim().is_empty() {
            return Err(Error::invalid_value(&["query"], "string_too_short", "query must not be empty", query.into()));
        }
        self.spaces().require(space)?;
        let terms: std::collections::BTreeSet<String> = text::terms(query).into_iter().collect();
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let rtx = self.core.db.read()?;
        let window = self.core.config.context.window;
        // Thread -> (direct matches, context-only matches).
        let mut counts: std::collections::HashMap<String, (u64, u64)> = Default::default();
        let mut current: Option<String> = None;
        let mut have: Vec<std::collections::HashSet<String>> = Vec::new();
        let mut tally = |tid: &str, have: &[std::collections::HashSet<String>]| {
            let (mut direct, mut near) = (0, 0);
            for i in 0..have.len() {
                if terms.iter().all(|t| have[i].contains(t)) {
                    direct += 1;
                } else if window > 0 {
                    let (lo, hi) = (i.saturating_sub(window), (i + window).min(have.len() - 1));
                    if terms.iter().all(|t| have[lo..=hi].iter().any(|h| h.contains(t))) {
                        near += 1;
                    }
                }
            }
            if direct + near > 0 {
                counts.insert(tid.to_string(), (direct, near));
            }
        };
        thread::each_message_in(&rtx, space, |tid, m| {
            if current.as_deref() != Some(tid) {
                if let Some(c) = current.take() {
                    tally(&c, &have);
                }
                have.clear();
                current = Some(tid.to_string());
            }
            have.push(text::terms(&m.content).into_iter().filter(|t| terms.contains(t)).collect());
            true
        })?;
        if let Some(c) = current.take() {
            tally(&c, &have);
        }
        let threads = thread::threads(&rtx)?;
        let mut out = Vec::new();
        for (tid, (direct, near)) in counts {
            if let Some(thread) = threads.get((space, tid.as_str()))?
                && source.is_none_or(|s| thread.source == s)
            {
                out.push(ThreadMatch { thread, matched_messages: direct, context_matches: near });
            }
        }
        out.sort_by(|a, b| {
            b.matched_messages
                .cmp(&a.matched_messages)
                .then_with(|| b.context_matches.cmp(&a.context_matches))
                .then_with(|| b.thread.updated_at.cmp(&a.thread.updated_at))
        });
        out.truncate(limit);
        Ok(out)
    }

    /// Merges `metadata` into the thread's (keys already present are kept when `only_missing`).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`); [`ErrorKind::InvalidInput`] when the result exceeds 64 KiB.
    pub fn merge_thread_metadata(
        &self,
        id: &str,
        space: Option<&str>,
        metadata: Metadata,
        only_missing: bool,
    ) -> Result<Thread> {
        self.update_thread(id, space, |t| {
            for (k, v) in metadata.0 {
                if !(only_missing && t.metadata.0.contains_key(&k)) {
                    t.metadata.0.insert(k, v);
                }
            }
            if metadata_too_big(&t.metadata) {
                return Err(Error::invalid_value(
                    &["metadata"],
                    "too_long",
                    "merged metadata is at most 65536 bytes as JSON",
                    serde_json::Value::Null,
                ));
            }
            Ok(())
        })
    }

    /// Marks or unmarks the thread as favourite.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn set_thread_favorite(&self, id: &str, space: Option<&str>, favorite: bool) -> Result<Thread> {
        self.update_thread(id, space, |t| {
            t.is_favorite = favorite;
            Ok(())
        })
    }

    fn update_thread(
        &self,
        id: &str,
        space: Option<&str>,
        f: impl FnOnce(&mut Thread) -> Result<()>,
    ) -> Result<Thread> {
        let (thread, ()) = self.modify_thread(id, space, |_, thread| {
            f(thread)?;
            thread.updated_at = Timestamp::now();
            Ok(())
        })?;
        Ok(thread)
    }

    /// Runs `f` on thread `id` (located as [`KnowledgeStore::get_thread`] does) in one write transaction under
    /// the writer lock, and stores the thread it leaves; nothing is written when `f` fails.
    fn modify_thread<T>(
        &self,
        id: &str,
        space: Option<&str>,
        f: impl FnOnce(&mut thread::Writer<'_>, &mut Thread) -> Result<T>,
    ) -> Result<(Thread, T)> {
        let space = self.locate_thread(&self.core.db.read()?, id, space)?;
        self.core.write(|txn, _| {
            let mut t = thread::Writer::open(txn)?;
            let mut thread: Thread = t.get(&space, id)?.ok_or_else(|| thread_not_found(id))?;
            let out = f(&mut t, &mut thread)?;
            t.put(&thread)?;
            Ok((thread, out))
        })
    }

    /// Favourite threads of every space, most recently updated first.
    ///
    /// # Errors
    /// [`ErrorKind::Io`] on storage failure.
    pub fn favorite_threads(&self, limit: usize) -> Result<Vec<Thread>> {
        let rtx = self.core.db.read()?;
        let mut out = Vec::new();
        for row in thread::threads(&rtx)?.iter()? {
            let (_, v) = row?;
            let t: Thread = v;
            if t.is_favorite {
                out.push(t);
            }
        }
        out.sort_by_key(|t| std::cmp::Reverse(t.updated_at));
        out.truncate(limit);
        Ok(out)
    }

    /// Deletes a thread and its messages; with `cascade_memories`, also the memories of its space whose
    /// `source_thread_id` is the thread.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn delete_thread(&self, id: &str, space: Option<&str>, cascade_memories: bool) -> Result<ThreadDeleteReport> {
        let space = self.locate_thread(&self.core.db.read()?, id, space)?;
        let doomed: Vec<String> = if cascade_memories {
            let mut ids = Vec::new();
            memory::memories(&self.core.db.read()?)?.each_in_space(&space, |_, sm: super::StoredMemory| {
                if sm.memory.source_thread_id.as_deref() == Some(id) {
                    ids.push(sm.memory.id);
                }
                true
            })?;
            ids
        } else {
            Vec::new()
        };
        let deleted_messages = {
            self.core.write(|txn, _| {
                let mut t = thread::Writer::open(txn)?;
                t.remove(&space, id)?.ok_or_else(|| thread_not_found(id))
            })?
        };
        let mut deleted_memories = 0;
        for mid in doomed {
            if self.delete_memory(&mid, Some(&space)).is_ok() {
                deleted_memories += 1;
            }
        }
        Ok(ThreadDeleteReport { deleted_messages, deleted_memories })
    }
}
