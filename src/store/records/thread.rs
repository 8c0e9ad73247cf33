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
