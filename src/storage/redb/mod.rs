//! The redb backend of the storage port: one file per store. [`db`] implements the port's types as newtypes
//! over redb's; `error.rs` turns redb's errors into Engram's. The only module that names the redb crate.

mod db;
mod error;

pub use db::{
    Borrowed, Db, FileDevice, Got, KeyType, KindStats, ReadTable, ReadTx, Readable, Rows, Table, ValueType, WriteTx,
};
