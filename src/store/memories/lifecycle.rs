//! Memory lifecycle: archive, forget, deprecate, supersede, and favourites.
//!
//! States and moves (docs/api.md "Lifecycle"):
//!
//! | from \ to   | archived | deprecated | superseded | forgotten |
//! |-------------|----------|------------|------------|-----------|
//! | active      | yes      | yes        | yes        | yes       |
//! | archived    | (no-op)  | yes        | yes        | yes       |
//! | deprecated  | yes      | (updates)  | yes        | yes       |
//! | superseded  | no       | no         | (no-op if same newer) | yes |
//!
//! A forgotten memory is gone from recall and by-id reads (404), so nothing moves out of it. Superseding sets
//! `is_latest` false, links the versions (`metadata.superseded_by` on the old one, `metadata.supersedes` on the
//! newer one) and needs the newer memory in the same space. Every move appends `{from, to, reason, at}` to
//! `metadata.lifecycle`. A refused move is 409 `invalid_state_transition` and changes nothing.

use super::{Memories, MemoryWrite};
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};
use crate::index::decay;
use crate::model::{MemoryState, Timestamp};
use crate::store::core::write::Commit;
use crate::store::{IndexOp, MemoryView, StoredMemory, memory};

/// A lifecycle move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// Hide from everyday recall; stays readable by id and listable with `state=archived`.
    Archive,
    /// Hide from recall and from by-id reads; records and graph rows stay.
    Forget,
    /// Mark as no longer current, optionally naming the replacement.
    Deprecate {
        /// The memory that replaces it (same space).
        replacement: Option<String>,
    },
    /// Mark as replaced by a newer version (same space).
    Supersede {
        /// The newer memory.
        newer: String,
    },
}

impl Transition {
    fn target(&self) -> MemoryState {
        match self {
            Transition::Archive => MemoryState::Archived,
            Transition::Forget => MemoryState::Forgotten,
            Transition::Deprecate { .. } => MemoryState::Deprecated,
            Transition::Supersede { .. } => MemoryState::Superseded,
        }
    }
}

/// Result of a lifecycle move.
#[derive(Debug, Clone, PartialEq)]
pub struct StateChange {
    /// The memory after the move.
    pub view: MemoryView,
    /// Its state before.
    pub previous: MemoryState,
    /// False when the memory already was in that state (nothing written).
    pub changed: bool,
}

fn refuse(from: MemoryState, to: MemoryState, why: &str) -> Error {
    Error::new(ErrorKind::Conflict, format!("cannot move a memory from {} to {}: {why}", from.as_str(), to.as_str()))
        .with_code(ErrorCode::InvalidStateTransition)
}

impl Memories<'_> {
    /// Applies a lifecycle move to memory `id` (in `space_guard` when given).
    ///
    /// # Errors
    /// * [`ErrorKind::NotFound`] (`memory_not_found`): no such memory, another space, or forgotten; also for an
    ///   unknown `replacement` or `newer` memory.
    /// * [`ErrorKind::Conflict`] (`invalid_state_transition`): a move the table in the module docs refuses, or a
    ///   memory superseding or replacing itself, or one in another space.
    /// * [`ErrorKind::InvalidInput`]: `reason` over 1,000 characters.
    pub fn change_state(
        &self,
        id: &str,
        space_guard: Option<&str>,
        t: Transition,
        reason: Option<String>,
    ) -> Result<StateChange> {
        if reason.as_ref().is_some_and(|r| r.chars().count() > 1000) {
            return Err(Error::invalid_value(
                &["reason"],
                "string_too_long",
                "reason is at most 1000 characters",
                serde_json::Value::Null,
            ));
        }
        let now = Timestamp::now();
        let out = self.store.core.write(|txn, ops| {
            let mut w = MemoryWrite::open(txn)?;
            let (space, mut sm) = w.locate(id, space_guard)?;
            let from = sm.memory.state;
            let to = t.target();
            let other = match &t {
                Transition::Supersede { newer } => Some(newer.clone()),
                Transition::Deprecate { replacement } => replacement.clone(),
                _ => None,
            };
            if other.as_deref() == Some(id) {
                return Err(refuse(from, to, "a memory cannot replace itself"));
            }
            let mut other_sm = match &other {
                Some(o) => {
                    let (os, osm) = w.locate(o, None)?;
                    if os != space {
                        return Err(refuse(from, to, "the newer memory is in another space"));
                    }
                    Some(osm)
                }
                None => None,
            };
            let same_link = |sm: &StoredMemory, key: &str| {
                sm.memory.metadata.0.get(key).and_then(|v| v.as_str()) == other.as_deref()
            };
            let noop = match (from, &t) {
                (MemoryState::Archived, Transition::Archive) => true,
                (MemoryState::Superseded, Transition::Supersede { .. }) => {
                    if same_link(&sm, "superseded_by") {
                        true
                    } else {
                        return Err(refuse(from, to, "it is already superseded by another memory"));
                    }
                }
                (MemoryState::Deprecated, Transition::Deprecate { .. }) => same_link(&sm, "replacement_memory_id"),
                (MemoryState::Superseded, Transition::Archive | Transition::Deprecate { .. }) => {
                    return Err(refuse(from, to, "a superseded memory only moves to forgotten"));
                }
                _ => false,
            };
            let labels = w.label_ids(&space, id)?;
            if noop {
                return Ok(StateChange {
                    view: MemoryView { memory: sm.memory, label_ids: labels.into_iter().collect() },
                    previous: from,
                    changed: false,
                });
            }
            let m = &mut sm.memory;
            m.state = to;
            m.updated_at = now;
            match &t {
                Transition::Supersede { newer } => {
                    m.is_latest = false;
                    m.metadata.0.insert("superseded_by".into(), newer.clone().into());
                }
                Transition::Deprecate { replacement: Some(r) } => {
                    m.metadata.0.insert("replacement_memory_id".into(), r.clone().into());
                }
                _ => {}
            }
            let entry = serde_json::json!({"from": from.as_str(), "to": to.as_str(), "reason": reason, "at": now});
            match m.metadata.0.get_mut("lifecycle").and_then(|v| v.as_array_mut()) {
                Some(list) => list.push(entry),
                None => {
                    m.metadata.0.insert("lifecycle".into(), serde_json::Value::Array(vec![entry]));
                }
            }
            w.memories.put(&space, &sm)?;
            ops.push(IndexOp::meta(&space, sm.docno, &sm.memory, labels.clone()));
            if let (Transition::Supersede { .. }, Some(osm)) = (&t, other_sm.as_mut()) {
                let list =
                    osm.memory.metadata.0.entry("supersedes").or_insert_with(|| serde_json::Value::Array(vec![]));
                if let Some(a) = list.as_array_mut()
                    && !a.iter().any(|v| v.as_str() == Some(id))
                {
                    a.push(id.into());
                }
                osm.memory.updated_at = now;
                w.memories.put(&space, osm)?;
            }
            Ok(StateChange {
                view: MemoryView { memory: sm.memory, label_ids: labels.into_iter().collect() },
                previous: from,
                changed: true,
            })
        })?;
        Ok(out)
    }

    /// Marks or unmarks memory `id` as favourite (not a lifecycle state).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`).
    pub fn set_favorite(&self, id: &str, space_guard: Option<&str>, favorite: bool) -> Result<MemoryView> {
        self.store.core.write(|txn, _| {
            let mut w = MemoryWrite::open(txn)?;
            let (space, mut sm) = w.locate(id, space_guard)?;
            if sm.memory.is_favorite != favorite {
                sm.memory.is_favorite = favorite;
                sm.memory.updated_at = Timestamp::now();
                w.memories.put(&space, &sm)?;
            }
            let labels = w.label_ids(&space, id)?;
            Ok(MemoryView { memory: sm.memory, label_ids: labels.into_iter().collect() })
        })
    }

    /// Favourite memories of every space (forgotten ones excluded), most recently updated first.
    ///
    /// # Errors
    /// Storage errors.
    pub fn favorites(&self, limit: usize) -> Result<Vec<MemoryView>> {
        let mut found = Vec::new();
        {
            let rtx = self.store.core.db.read()?;
            memory::memories(&rtx)?.each(|space, _, sm: StoredMemory| {
                if sm.memory.is_favorite && sm.memory.state != MemoryState::Forgotten {
                    found.push((space.to_string(), sm.memory));
                }
                true
            })?;
        }
        found.sort_by_key(|(_, m)| std::cmp::Reverse(m.updated_at));
        found.truncate(limit);
        let mut out = Vec::with_capacity(found.len());
        for (space, m) in found {
            out.push(self.get(&m.id, Some(&space))?);
        }
        Ok(out)
    }
}

/// Queued reads beyond which a read waits for the writer to count them.
const ACCESS_QUEUE_LIMIT: usize = 10_000;

impl Memories<'_> {
    /// Reads memory `id` as a user does: like [`Memories::get`](crate::store::Memories::get), and counts the read
    /// (`access_count` + 1, `last_accessed_at` now, `decay_score_cached` recomputed, see
    /// [`crate::index::decay`]); the returned view includes the count.
    ///
    /// The read itself never waits for a writer: the count is queued, and committed at once when no write is
    /// in progress, else by the next read that finds the writer free, a checkpoint, or closing the store (or
    /// when 10,000 memories wait to be counted). Count commits are not fsynced (redb `Durability::None`): they
    /// become durable with the next durable commit, and a crash may lose the last few counts, never other data.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`memory_not_found`) as for `get_memory`; storage errors of the read. A failed
    /// count commit is not an error of the read: the count stays queued.
    pub fn read(&self, id: &str, space_guard: Option<&str>) -> Result<MemoryView> {
        let now = Timestamp::now();
        let mut view = self.get(id, space_guard)?;
        let (queued, backlog) = {
            let mut q = self.store.access_queue.lock();
            let e = q.entry(id.to_string()).or_insert((0, now));
            e.0 = e.0.saturating_add(1);
            e.1 = now;
            (e.0, q.len())
        };
        let m = &mut view.memory;
        m.access_count = m.access_count.saturating_add(queued);
        m.last_accessed_at = Some(now);
        m.decay_score_cached = decay::decay_score(m.importance, m.access_count, now, now);
        // Counted at once when no write holds the lock; past the queue limit, waiting for it.
        if let Some(Err(e)) = self.flush_access_when(backlog > ACCESS_QUEUE_LIMIT) {
            tracing::warn!(error = %e, "counting reads failed; they stay queued");
        }
        Ok(view)
    }

    /// Commits the queued read counts in one transaction without fsync, through the write path (waiting for
    /// the writer lock). Memories deleted or forgotten meanwhile are skipped; on failure the counts go back to
    /// the queue.
    pub(crate) fn flush_access(&self) -> Result<()> {
        self.flush_access_when(true).unwrap_or(Ok(()))
    }

    /// [`Memories::flush_access`](crate::store::Memories::flush_access); with `wait` false, only when no write holds the writer lock now
    /// (None then, and the counts stay queued).
    fn flush_access_when(&self, wait: bool) -> Option<Result<()>> {
        let batch = std::mem::take(&mut *self.store.access_queue.lock());
        if batch.is_empty() {
            return Some(Ok(()));
        }
        // Not a change of knowledge: no generation bump, so derived results stay current.
        let commit = Commit { durability: Some(crate::config::Durability::Eventual), bump: false, capture: false };
        let count = |txn: &crate::storage::WriteTx, ops: &mut Vec<IndexOp>| -> Result<()> {
            let mut w = MemoryWrite::open(txn)?;
            for (id, (reads, last)) in &batch {
                let (space, mut sm) = match w.locate(id, None) {
                    Ok(found) => found,
                    Err(e) if e.kind() == ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                if sm.memory.state == MemoryState::Forgotten {
                    continue;
                }
                let m = &mut sm.memory;
                m.access_count = m.access_count.saturating_add(*reads);
                m.last_accessed_at = Some(m.last_accessed_at.map_or(*last, |t| t.max(*last)));
                m.decay_score_cached = decay::decay_score(m.importance, m.access_count, *last, *last);
                w.memories.put(&space, &sm)?;
                let labels = w.label_ids(&space, id)?;
                ops.push(IndexOp::meta(&space, sm.docno, &sm.memory, labels));
            }
            Ok(())
        };
        let result = if wait {
            Some(self.store.core.writes.write(commit, count))
        } else {
            self.store.core.writes.try_write(commit, count)
        };
        match result {
            Some(Ok(())) => {
                self.store.core.pending_access.fetch_add(batch.len() as u64, std::sync::atomic::Ordering::AcqRel);
                Some(Ok(()))
            }
            other => {
                let mut q = self.store.access_queue.lock();
                for (id, (reads, last)) in batch {
                    let e = q.entry(id).or_insert((0, last));
                    e.0 = e.0.saturating_add(reads);
                    e.1 = e.1.max(last);
                }
                other
            }
        }
    }
}
