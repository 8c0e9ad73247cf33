//! The redb backend: every table definition ([`tables`]), the record codec ([`codec`]) and the transaction
//! helpers ([`txn`]). redb's errors convert into Engram's here (`error.rs`). The domain in `src/store` still opens
//! these tables itself; the storage port (issue 18) moves those calls behind read and write transactions.

pub mod codec;
mod error;
pub mod tables;
pub mod txn;
