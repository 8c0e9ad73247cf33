//! Threads and messages: create, append (deduplicated and checkpointed), read, list, search, metadata merge,
//! favourite, delete, and distilling memories from them. One write transaction per call; a failed call writes
//! nothing. The service is [`Threads`] (`store.threads()`); `extract.rs` distils, `search.rs` searches.
//!
//! Deduplication key of a message (when `deduplicate` is true, the default): its `metadata.external_id`, else
//! `<idempotency_key>:<position in the request>` when the request has an idempotency key, else none (the message
//! is always appended). A key seen before in the thread skips the message, so replaying a sync is idempotent
//! (client contract 5.3).
use crate::storage::Readable;

use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Message, Metadata, Thread, Timestamp};
use crate::store::{DEFAULT_SPACE, KnowledgeStore, Page};
use crate::store::{memory, space, thread};
use crate::text;

mod extract;
mod search;
mod types;

pub use extract::{PER_MESSAGE, thread_memory_prefix};
pub use types::{
    AppendMessages, AppendReport, CreatedThread, Extraction, NewMessage, NewThread, ThreadDeleteReport, ThreadMatch,
};

/// The threads of a store's spaces, borrowed from the store (`store.threads()`).
///
/// Owns: the `thread` records (threads, their messages in order, message deduplication keys) and distilling
/// memories from them.
#[derive(Clone, Copy)]
pub struct Threads<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

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

/// How a request's messages are appended.
#[derive(Clone, Copy)]
struct Appending<'a> {
    deduplicate: bool,
    idempotency_key: Option<&'a str>,
    now: Timestamp,
    /// The store is in a sync group: a message without a deduplication key gets one ([`thread::sync_key`]).
    synced: bool,
}

/// Stores `msgs` after the thread's current messages, skipping duplicates; updates `thread`.
fn append_messages(
    w: &mut thread::Writer<'_>,
    thread: &mut Thread,
    msgs: &[NewMessage],
    how: &Appending<'_>,
) -> Result<(Vec<Message>, u64)> {
    let Appending { deduplicate, idempotency_key, now, synced } = *how;
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
        let key = if synced { key.or_else(|| Some(thread::sync_key())) } else { key };
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

fn thread_not_found(id: &str) -> Error {
    Error::not_found(ErrorCode::ThreadNotFound, format!("thread not found: '{id}'"))
}

impl Threads<'_> {
    /// Calls `f(thread_id, message)` for every message of `space`, by thread id and order, until it returns
    /// false.
    ///
    /// # Errors
    /// Storage errors.
    pub fn scan_messages(&self, space: &str, mut f: impl FnMut(&str, &crate::model::Message) -> bool) -> Result<()> {
        thread::each_message_in(&self.store.core.db.read()?, space, |th, m| f(th, &m))
    }

    /// The space holding thread `id`: `space` when given, else `default` when it holds the id, else the first
    /// space that does.
    fn locate(&self, rtx: &crate::storage::ReadTx, id: &str, space: Option<&str>) -> Result<String> {
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
    pub fn create(&self, new: NewThread) -> Result<CreatedThread> {
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
        self.store
            .core
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
                let how = Appending {
                    deduplicate: new.deduplicate,
                    idempotency_key: new.idempotency_key.as_deref(),
                    now,
                    synced: self.store.core.writes.sync.on(),
                };
                let (messages, _) = append_messages(&mut t, &mut thread, &new.messages, &how)?;
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

    /// Appends messages to thread `id` (in `space`, or located as [`Threads::get`](crate::store::Threads::get) does).
    ///
    /// # Errors
    /// * [`ErrorKind::NotFound`] (`thread_not_found`).
    /// * [`ErrorKind::Conflict`] (`checkpoint_conflict`) when `expected_message_count` differs from the count.
    /// * [`ErrorKind::InvalidInput`] for bad messages. Nothing is added on any error.
    pub fn append(&self, id: &str, space: Option<&str>, req: AppendMessages) -> Result<AppendReport> {
        let mut errs = Vec::new();
        check_messages(&req.messages, &mut errs);
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let now = Timestamp::now();
        let (thread, (added, skipped)) = self.modify(id, space, |t, thread| {
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
            let how = Appending {
                deduplicate: req.deduplicate,
                idempotency_key: req.idempotency_key.as_deref(),
                now,
                synced: self.store.core.writes.sync.on(),
            };
            append_messages(t, thread, &req.messages, &how)
        })?;
        let extraction = self.extract_or_warn(&thread, &added);
        let checkpointed = req.expected_message_count.is_some();
        Ok(AppendReport { thread, added, skipped, checkpointed, extraction })
    }

    /// Thread `id`: in `space` when given, else in `default`, else in the first space holding that id.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn get(&self, id: &str, space: Option<&str>) -> Result<Thread> {
        let rtx = self.store.core.db.read()?;
        let space = self.locate(&rtx, id, space)?;
        thread::threads(&rtx)?.get((space.as_str(), id))?.ok_or_else(|| thread_not_found(id))
    }

    /// Thread `id` and its messages `offset..offset+limit` in order.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn messages(&self, id: &str, space: Option<&str>, limit: usize, offset: u64) -> Result<(Thread, Vec<Message>)> {
        let rtx = self.store.core.db.read()?;
        let space = self.locate(&rtx, id, space)?;
        let thread: Thread = thread::threads(&rtx)?.get((space.as_str(), id))?.ok_or_else(|| thread_not_found(id))?;
        Ok((thread, thread::messages_between(&rtx, (space.as_str(), id), offset, u64::MAX, limit)?))
    }

    /// Thread `id` and all its messages in order, read in keyset pages of 1,000 (each page starts after the last
    /// order index read, so no read is unbounded; appends between pages show, as in a live file).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`).
    pub fn all_messages(&self, id: &str, space: Option<&str>) -> Result<(Thread, Vec<Message>)> {
        const PAGE: usize = 1000;
        let (thread, mut out) = self.messages(id, space, PAGE, 0)?;
        let mut last = out.len();
        while last == PAGE {
            let after = out.last().map_or(0, |m| m.order_index + 1);
            let (_, more) = self.messages(id, Some(&thread.space_id), PAGE, after)?;
            last = more.len();
            out.extend(more);
        }
        Ok((thread, out))
    }

    /// Threads of `space`, most recently updated first, optionally of one `source`.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn list(&self, space: &str, source: Option<&str>, limit: usize, offset: usize) -> Result<Page<Thread>> {
        self.store.spaces().require(space)?;
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
        Ok(thread::threads(&self.store.core.db.read()?)?.in_space(space)?.into_iter().map(|(_, t)| t).collect())
    }

    /// Merges `metadata` into the thread's (keys already present are kept when `only_missing`).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`thread_not_found`); [`ErrorKind::InvalidInput`] when the result exceeds 64 KiB.
    pub fn merge_metadata(
        &self,
        id: &str,
        space: Option<&str>,
        metadata: Metadata,
        only_missing: bool,
    ) -> Result<Thread> {
        self.update(id, space, |t| {
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
    pub fn set_favorite(&self, id: &str, space: Option<&str>, favorite: bool) -> Result<Thread> {
        self.update(id, space, |t| {
            t.is_favorite = favorite;
            Ok(())
        })
    }

    fn update(&self, id: &str, space: Option<&str>, f: impl FnOnce(&mut Thread) -> Result<()>) -> Result<Thread> {
        let (thread, ()) = self.modify(id, space, |_, thread| {
            f(thread)?;
            thread.updated_at = Timestamp::now();
            Ok(())
        })?;
        Ok(thread)
    }

    /// Runs `f` on thread `id` (located as [`Threads::get`](crate::store::Threads::get) does) in one write transaction under
    /// the writer lock, and stores the thread it leaves; nothing is written when `f` fails.
    fn modify<T>(
        &self,
        id: &str,
        space: Option<&str>,
        f: impl FnOnce(&mut thread::Writer<'_>, &mut Thread) -> Result<T>,
    ) -> Result<(Thread, T)> {
        let space = self.locate(&self.store.core.db.read()?, id, space)?;
        self.store.core.write(|txn, _| {
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
    pub fn favorites(&self, limit: usize) -> Result<Vec<Thread>> {
        let rtx = self.store.core.db.read()?;
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
    pub fn delete(&self, id: &str, space: Option<&str>, cascade_memories: bool) -> Result<ThreadDeleteReport> {
        let space = self.locate(&self.store.core.db.read()?, id, space)?;
        let doomed: Vec<String> = if cascade_memories {
            let mut ids = Vec::new();
            memory::memories(&self.store.core.db.read()?)?.each_in_space(&space, |_, sm: super::StoredMemory| {
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
            self.store.core.write(|txn, _| {
                let mut t = thread::Writer::open(txn)?;
                t.remove(&space, id)?.ok_or_else(|| thread_not_found(id))
            })?
        };
        let mut deleted_memories = 0;
        for mid in doomed {
            if self.store.memories().delete(&mid, Some(&space)).is_ok() {
                deleted_memories += 1;
            }
        }
        Ok(ThreadDeleteReport { deleted_messages, deleted_memories })
    }
}
