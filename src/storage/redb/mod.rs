//! The redb backend of the storage port: one file per store. [`db`] implements the port's types as newtypes
//! over redb's; `error.rs` turns redb's errors into Engram's; `record.rs` converts keys and values (redb's
//! encoding) to typed columns for a database backend. The only module that names the redb crate.

mod db;
mod error;

pub use db::{Borrowed, FileDevice, KeyType, ValueType};
pub(crate) use db::{RedbDb, RedbGot, RedbRead, RedbReadTable, RedbRows, RedbTable, RedbWrite};
