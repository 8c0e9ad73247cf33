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
