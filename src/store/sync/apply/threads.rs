//! Threads and their messages in the merge (docs/sync.md, "Threads and their messages"): a thread's record as a
//! register, a message as a register by deduplication key put after the thread's last, and the settling that
//! gives a changed thread's messages the order of their stamps once a batch is merged.

use std::collections::BTreeSet;

use super::{Merge, json};
use crate::error::{Error, ErrorKind, Result};
use crate::model::{Item, ItemClock, Message, Thread};
use crate::store::records::{sync, thread};

impl Merge<'_, '_> {
    /// A thread's record. Deleted elsewhere while this device holds messages of it that no delete reached (a
    /// concurrent append), it stays as the placeholder until they go.
    pub(super) fn thread(&mut self, space: &str, id: &str, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        let Some(v) = value else {
            if self.th.count(space, id)? == 0 {
                self.th.remove_record(space, id)?;
                return Ok(None);
            }
            let p = sync::placeholder_thread(space, id);
            self.threads.dirty.insert((space.to_string(), id.to_string()));
            self.th.put(&p)?;
            return Ok(Some(sync::hash(&json(&p)?)));
        };
        let mut t: Thread = sync::value_of(v)?;
        if t.space_id != space || t.thread_id != id {
            return Err(Error::new(ErrorKind::InvalidInput, "a thread change names another thread than its item"));
        }
        self.ensure_space(space)?;
        t.message_count = self.th.count(space, id)?;
        self.th.put(&t)?;
        Ok(Some(sync::hash(&json(&sync::thread_projection(&t))?)))
    }

    /// One message of a thread, put after the thread's last; [`Threads::settle`] gives it its place (the order
    /// of the messages' stamps) once the batch is merged. A message whose thread is not here gets the
    /// placeholder thread.
    pub(super) fn message(&mut self, item: &Item, value: Option<&[u8]>) -> Result<Option<[u8; 16]>> {
        let Some((space, tid, key)) = item.message_parts() else {
            return Err(Error::new(ErrorKind::InvalidInput, "a message change names no thread"));
        };
        if let Some(i) = self.th.index_of(space, tid, key)? {
            self.th.remove_message(space, tid, i, key)?;
        }
        self.threads.dirty.insert((space.to_string(), tid.to_string()));
        let Some(v) = value else { return Ok(None) };
        let mut m: Message = sync::value_of(v)?;
        if !self.th.contains(space, tid)? {
            self.ensure_space(space)?;
            self.th.put(&sync::placeholder_thread(space, tid))?;
            self.threads.placeholders.insert((space.to_string(), tid.to_string()));
        }
        m.order_index = self.th.next_index(space, tid)?;
        m.id = format!("{tid}#{}", m.order_index);
        self.th.put_message(space, tid, &m, Some(key))?;
        Ok(Some(sync::hash(&json(&sync::message_projection(&m))?)))
    }
}

/// The threads a batch touched, settled once it is merged.
#[derive(Default)]
pub(super) struct Threads {
    /// Threads whose messages changed: their messages are put in the order of their stamps.
    pub(super) dirty: BTreeSet<(String, String)>,
    /// Threads created as placeholders for messages that came without them.
    pub(super) placeholders: BTreeSet<(String, String)>,
}

impl Threads {
    /// Gives every changed thread's messages their order (by stamp, then deduplication key: the same on every
    /// device), its message count, and drops a placeholder thread left without messages. A placeholder is
    /// never stamped: its clock records only its hash, so it is not logged as this device's change.
    pub(super) fn settle(self, th: &mut thread::Writer<'_>, clocks: &mut sync::ItemClocks<'_>) -> Result<()> {
        for (space, tid) in self.dirty.union(&self.placeholders) {
            let mut order = Vec::new();
            for (key, at) in th.keys(space, tid)? {
                let stamp = clocks.get(Item::message(space, tid, &key).key())?.and_then(|c: ItemClock| c.winner);
                order.push((stamp, key, at));
            }
            order.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            let moves: Vec<(u64, u64, String)> = order
                .into_iter()
                .enumerate()
                .filter(|(new, (_, _, old))| *new as u64 != *old)
                .map(|(new, (_, key, old))| (old, new as u64, key))
                .collect();
            th.move_messages(space, tid, &moves)?;
            let item = Item::Thread(space.clone(), tid.clone());
            let mut ic: ItemClock = clocks.get(item.key())?.unwrap_or_default();
            let placeholder = sync::hash(&json(&sync::placeholder_thread(space, tid))?);
            let held = ic.hash.is_none() || ic.hash == Some(placeholder);
            let n = th.count(space, tid)?;
            match th.get(space, tid)? {
                Some(_) if held && n == 0 => {
                    th.remove_record(space, tid)?;
                    if ic.hash.take().is_some() {
                        clocks.put(item.key(), &ic)?;
                    }
                }
                Some(mut t) => {
                    if t.message_count != n {
                        t.message_count = n;
                        th.put(&t)?;
                    }
                    if ic.hash.is_none() {
                        ic.hash = Some(placeholder);
                        clocks.put(item.key(), &ic)?;
                    }
                }
                None => {}
            }
        }
        Ok(())
    }
}
