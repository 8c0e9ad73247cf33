//! Threads, where each thread id lives, their messages and the messages' deduplication keys: the only place these kinds are opened.

use super::{Bytes, K2, K2N, K3, Opened, Records, Tx};
use crate::error::Result;
use crate::model::{Message, Thread};
use crate::storage::tables::{MESSAGE_KEYS, MESSAGES, THREAD_SPACES, THREADS};

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
