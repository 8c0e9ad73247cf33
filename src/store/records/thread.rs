//! Threads, where each thread id lives, their messages and the messages' deduplication keys: the only place these kinds are opened.

use super::{Bytes, K2, K2N, K3, Opened, Records, Tx};
use crate::error::Result;
use crate::model::{Message, Thread};
use crate::storage::tables::{MESSAGE_KEYS, MESSAGES, THREAD_SPACES, THREADS};
use crate::storage::{Readable, Table, WriteTx};

/// `(space id, thread id)` -> [`Thread`].
///
/// # Errors
/// Storage errors.
pub(crate) fn threads<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, Thread>> {
    super::records(tx, THREADS)
}

/// `(thread id, space id)`: the spaces a thread id lives in.
///
/// # Errors
/// Storage errors.
pub(crate) fn thread_spaces<X: Tx>(tx: &X) -> Result<X::Table<'_, K2, ()>> {
    tx.open(THREAD_SPACES)
}

/// `(space id, thread id, order index)` -> [`Message`].
///
/// # Errors
/// Storage errors.
pub(crate) fn messages<X: Tx>(tx: &X) -> Result<Opened<'_, X, K2N, Message>> {
    super::records(tx, MESSAGES)
}

/// `(space id, thread id, deduplication key)` -> order index.
///
/// # Errors
/// Storage errors.
pub(crate) fn message_keys<X: Tx>(tx: &X) -> Result<X::Table<'_, K3, u64>> {
    tx.open(MESSAGE_KEYS)
}

/// The thread kinds of one write transaction (threads, where each lives, messages, their deduplication keys),
/// each opened once.
pub(crate) struct Writer<'t> {
    records: Opened<'t, WriteTx, K2, Thread>,
    spaces: Table<'t, K2, ()>,
    messages: Opened<'t, WriteTx, K2N, Message>,
    keys: Table<'t, K3, u64>,
}

impl<'t> Writer<'t> {
    /// Opens the thread kinds in `txn`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn open(txn: &'t WriteTx) -> Result<Self> {
        Ok(Writer {
            records: threads(txn)?,
            spaces: thread_spaces(txn)?,
            messages: messages(txn)?,
            keys: message_keys(txn)?,
        })
    }

    /// Thread `id` of `space`.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn get(&self, space: &str, id: &str) -> Result<Option<Thread>> {
        self.records.get((space, id))
    }

    /// Whether thread `id` exists in `space`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn contains(&self, space: &str, id: &str) -> Result<bool> {
        self.records.contains((space, id))
    }

    /// Stores thread `t` and where it lives.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] when the record does not encode.
    pub(crate) fn put(&mut self, t: &Thread) -> Result<()> {
        self.records.put((t.space_id.as_str(), t.thread_id.as_str()), t)?;
        self.spaces.put((t.thread_id.as_str(), t.space_id.as_str()), ())
    }

    /// Whether thread `thread` of `space` already holds a message with deduplication key `key`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn has_key(&self, space: &str, thread: &str, key: &str) -> Result<bool> {
        Ok(self.keys.get((space, thread, key))?.is_some())
    }

    /// Stores message `m` of thread `thread` of `space` at its `order_index`, with its deduplication key.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Internal`] when the record does not encode.
    pub(crate) fn put_message(&mut self, space: &str, thread: &str, m: &Message, key: Option<&str>) -> Result<()> {
        self.messages.put((space, thread, m.order_index), m)?;
        match key {
            Some(k) => self.keys.put((space, thread, k), m.order_index),
            None => Ok(()),
        }
    }

    /// Deletes the record of thread `id` of `space` and where it lives, not its messages (sync: a thread deleted
    /// elsewhere whose messages go with their own changes).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove_record(&mut self, space: &str, id: &str) -> Result<()> {
        self.records.remove((space, id))?;
        self.spaces.remove((id, space))?;
        Ok(())
    }

    /// The deduplication keys of thread `thread` of `space`, each with the order index of its message.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn keys(&self, space: &str, thread: &str) -> Result<Vec<(String, u64)>> {
        crate::storage::txn::range_prefix3_with(&self.keys, space, thread, |i| i)
    }

    /// The order index of the message with deduplication key `key` in thread `thread` of `space`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn index_of(&self, space: &str, thread: &str, key: &str) -> Result<Option<u64>> {
        Ok(self.keys.get((space, thread, key))?.map(|i| i.value()))
    }

    /// How many messages thread `thread` of `space` holds.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn count(&self, space: &str, thread: &str) -> Result<u64> {
        self.messages.count_keys_range((space, thread, 0u64)..=(space, thread, u64::MAX))
    }

    /// The order index after the last message of thread `thread` of `space` (0 when it has none).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn next_index(&self, space: &str, thread: &str) -> Result<u64> {
        match self.messages.range((space, thread, 0u64)..=(space, thread, u64::MAX))?.next_back() {
            Some(row) => Ok(row?.0.value().2 + 1),
            None => Ok(0),
        }
    }

    /// Moves messages to new order indices: each `(old, new, key)` takes the message at `old` to `new` (its id
    /// `<thread>#<new>`) with its deduplication key `key`. All are read and taken out before any is put back,
    /// so the moves may overlap.
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Corrupt`].
    pub(crate) fn move_messages(&mut self, space: &str, thread: &str, moves: &[(u64, u64, String)]) -> Result<()> {
        let mut moving = Vec::with_capacity(moves.len());
        for (old, new, key) in moves {
            if let Some(m) = self.messages.get((space, thread, *old))? {
                moving.push((m, *new, key));
            }
        }
        for (old, _, _) in moves {
            self.messages.remove((space, thread, *old))?;
        }
        for (mut m, new, key) in moving {
            m.order_index = new;
            m.id = format!("{thread}#{new}");
            self.put_message(space, thread, &m, Some(key))?;
        }
        Ok(())
    }

    /// Deletes the message at `order_index` of thread `thread` of `space` and its deduplication key `key`.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove_message(&mut self, space: &str, thread: &str, order_index: u64, key: &str) -> Result<()> {
        self.messages.remove((space, thread, order_index))?;
        self.keys.remove((space, thread, key))?;
        Ok(())
    }

    /// Deletes thread `id` of `space` with its messages and their keys; the number of messages deleted, or
    /// None when there is no such thread (nothing changed).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn remove(&mut self, space: &str, id: &str) -> Result<Option<u64>> {
        if !self.records.remove((space, id))? {
            return Ok(None);
        }
        self.spaces.remove((id, space))?;
        let all = (space, id, 0u64)..=(space, id, u64::MAX);
        let n = self.messages.count_keys_range(all.clone())?;
        self.messages.remove_range(all)?;
        let keys = crate::storage::txn::range_prefix3(&self.keys, space, id)?;
        for k in keys {
            self.keys.remove((space, id, k.as_str()))?;
        }
        Ok(Some(n))
    }
}

/// The messages of thread `(space, thread)` from order index `lo` to `hi` (inclusive), at most `limit`, in order.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`] when a message does not decode.
pub(crate) fn messages_between<X: Tx>(
    tx: &X,
    (space, thread): (&str, &str),
    lo: u64,
    hi: u64,
    limit: usize,
) -> Result<Vec<Message>> {
    let t = messages(tx)?;
    let mut out = Vec::new();
    for row in t.range((space, thread, lo)..=(space, thread, hi))?.take(limit) {
        out.push(row?.1);
    }
    Ok(out)
}

/// How many messages thread `(space, thread)` holds (keys counted, nothing decoded).
///
/// # Errors
/// Storage errors.
pub(crate) fn count_messages<X: Tx>(tx: &X, space: &str, thread: &str) -> Result<u64> {
    messages(tx)?.count_keys_range((space, thread, 0u64)..=(space, thread, u64::MAX))
}

/// Calls `f` with each message of `space` (its thread id and the message), thread after thread, in order, until
/// `f` returns false.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`] when a message does not decode.
pub(crate) fn each_message_in<X: Tx>(tx: &X, space: &str, mut f: impl FnMut(&str, Message) -> bool) -> Result<()> {
    let t = messages(tx)?;
    for row in t.range((space, "", 0u64)..)? {
        let (k, m) = row?;
        let (s, thread, _) = k.value();
        if s != space || !f(thread, m) {
            break;
        }
    }
    Ok(())
}

/// The deduplication key a message without one gets in a store of a sync group (every replicated message is
/// known by its key): `~` and a UUIDv7, unique on every device.
pub(crate) fn sync_key() -> String {
    format!("~{}", uuid::Uuid::now_v7().simple())
}

/// Gives every message without a deduplication key a [`sync_key`] (a store joining a sync group); returns how
/// many it gave.
///
/// # Errors
/// Storage errors.
pub(crate) fn key_keyless(txn: &WriteTx) -> Result<u64> {
    let mut keyed = std::collections::HashSet::new();
    for (s, t, _, i) in all_keys(txn)? {
        keyed.insert((s, t, i));
    }
    let mut missing = Vec::new();
    for row in messages(txn)?.iter()? {
        let (k, _) = row?;
        let (s, t, i) = k.value();
        if !keyed.contains(&(s.to_string(), t.to_string(), i)) {
            missing.push((s.to_string(), t.to_string(), i));
        }
    }
    let mut keys = message_keys(txn)?;
    for (s, t, i) in &missing {
        keys.put((s.as_str(), t.as_str(), sync_key().as_str()), *i)?;
    }
    Ok(missing.len() as u64)
}

/// The message with deduplication key `key` of thread `(space, thread)`, if any.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`].
pub(crate) fn message_with_key<X: Tx>(tx: &X, space: &str, thread: &str, key: &str) -> Result<Option<Message>> {
    match message_keys(tx)?.get((space, thread, key))? {
        Some(i) => messages(tx)?.get((space, thread, i.value())),
        None => Ok(None),
    }
}

/// Every message deduplication key of the store: (space id, thread id, key, order index), in key order.
///
/// # Errors
/// Storage errors.
pub(crate) fn all_keys<X: Tx>(tx: &X) -> Result<Vec<(String, String, String, u64)>> {
    let mut out = Vec::new();
    for row in message_keys(tx)?.iter()? {
        let (k, i) = row?;
        let (s, t, key) = k.value();
        out.push((s.to_string(), t.to_string(), key.to_string(), i.value()));
    }
    Ok(out)
}

/// A space holding thread `id` (the first by space id), if any.
///
/// # Errors
/// Storage errors.
pub(crate) fn a_space_of<X: Tx>(tx: &X, id: &str) -> Result<Option<String>> {
    match thread_spaces(tx)?.range((id, "")..)?.next() {
        Some(row) => {
            let (k, _) = row?;
            let (tid, s) = k.value();
            Ok((tid == id).then(|| s.to_string()))
        }
        None => Ok(None),
    }
}
