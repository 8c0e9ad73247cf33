//! The one write path. Every change to the store (public calls and background workers alike) goes through
//! [`Writes::write`], which owns the whole write transaction:
//!
//! 1. the writer lock (one writer at a time in this process; on PostgreSQL the transaction also takes the
//!    writers' advisory lock, so one at a time across processes);
//! 2. one write transaction, in which the caller's closure writes its records and lists its index operations;
//! 3. on a redb file, `META.index_snapshot` unset (the index snapshot no longer matches,
//!    [`super::snapshot`]); the generation bump (`META.generation`), unless the write is not a change of knowledge ([`Commit`]);
//! 4. on PostgreSQL, the index operations applied to the database's search catalog (`catalog`, see
//!    [`crate::store::records::catalog`]) and published to the change feed, in the same transaction;
//! 5. in a store that belongs to a sync group, a change of knowledge's replicated changes stamped and logged
//!    ([`super::changes`]);
//! 6. the commit, with the store's durability or the one [`Commit`] asks for;
//! 7. after the commit, the index operations applied to the in-memory indexes (directly, or through the feed
//!    on a shared database). Nothing is written or applied when the closure fails.
//!
//! No other code takes the writer lock.

use std::sync::Arc;

use parking_lot::Mutex;

use super::changes::SyncClock;
use super::feed::{ChangeOut, Feed};
use crate::config::Durability;
use crate::error::Result;
use crate::index::ops::IndexOp;
use crate::storage::{Db, WriteTx};
use crate::store::records::meta;

/// How a write commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Commit {
    /// Durability of the commit; None: the store's ([`crate::StoreConfig::durability`]).
    pub durability: Option<Durability>,
    /// Bump `META.generation`: true for a change of knowledge (derived results must be recomputed); false
    /// for bookkeeping (read counts, derived tables, checkpoints).
    pub bump: bool,
    /// In a sync group, log the replicated changes of the write ([`super::changes`]). False for bookkeeping,
    /// which must then change no field that sync replicates.
    pub capture: bool,
}

impl Commit {
    /// A change of knowledge with the store's durability.
    pub const KNOWLEDGE: Commit = Commit { durability: None, bump: true, capture: true };
    /// Bookkeeping with the store's durability: no generation bump.
    pub const BOOKKEEPING: Commit = Commit { durability: None, bump: false, capture: false };
    /// A write no derived result reads but whose records replicate (timeline review events): no generation
    /// bump, captured in a sync group.
    pub const REPLICATED_BOOKKEEPING: Commit = Commit { durability: None, bump: false, capture: true };
}

/// The store's writer: the database, the writer lock, the durability, the change feed and sync's clock.
pub(crate) struct Writes {
    db: Arc<Db>,
    lock: Mutex<()>,
    durability: Durability,
    feed: Arc<Feed>,
    /// Sync's clock: while the store is in a sync group, every write's replicated changes are logged
    /// ([`super::changes`]).
    pub(crate) sync: SyncClock,
}

impl Writes {
    pub(crate) fn new(db: Arc<Db>, durability: Durability, feed: Arc<Feed>) -> Arc<Writes> {
        Arc::new(Writes { db, lock: Mutex::new(()), durability, feed, sync: SyncClock::default() })
    }

    /// Runs `f` in one write transaction under the writer lock (the steps in the module documentation) and
    /// returns its value. `f` gets the transaction and a list for its index operations.
    ///
    /// # Errors
    /// `f`'s error (nothing is written), storage errors of the transaction or the commit (nothing is
    /// applied).
    pub(crate) fn write<T>(&self, c: Commit, f: impl FnOnce(&WriteTx, &mut Vec<IndexOp>) -> Result<T>) -> Result<T> {
        self.run(true, c, f).unwrap_or_else(|| Err(crate::error::Error::new(crate::ErrorKind::Internal, "no lock")))
    }

    /// [`Writes::write`] when no other write holds the lock now; None (and nothing done) when one does.
    pub(crate) fn try_write<T>(
        &self,
        c: Commit,
        f: impl FnOnce(&WriteTx, &mut Vec<IndexOp>) -> Result<T>,
    ) -> Option<Result<T>> {
        self.run(false, c, f)
    }

    /// The only place the writer lock is taken: waiting for it (`wait`) or only when free (None otherwise).
    fn run<T>(
        &self,
        wait: bool,
        c: Commit,
        f: impl FnOnce(&WriteTx, &mut Vec<IndexOp>) -> Result<T>,
    ) -> Option<Result<T>> {
        let asked = std::time::Instant::now();
        let _w = if wait { Some(self.lock.lock()) } else { self.lock.try_lock() }?;
        let got = std::time::Instant::now();
        let out = self.locked(c, f);
        let m = crate::metrics::global();
        m.writer_lock_wait.observe((got - asked).as_secs_f64());
        m.write_duration.observe(got.elapsed().as_secs_f64());
        if out.is_ok() {
            m.writes.inc();
        }
        Some(out)
    }

    /// Runs `f` with every write held off: under the writer lock, after a durable commit that records
    /// `META.last_backup_at` (so everything committed, eventual commits included, is in the file), and with a
    /// write transaction of the database itself open, so that no writer outside this lock can start either.
    /// Reads go on. What an online backup copies the file under ([`super::backup`]).
    ///
    /// # Errors
    /// Storage errors of the commit (`f` does not run), and `f`'s.
    pub(crate) fn paused<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let _w = self.lock.lock();
        let txn = self.db.write(Durability::Immediate)?;
        meta::meta(&txn)?.put_u64("last_backup_at", crate::model::Timestamp::now().0.max(0) as u64)?;
        txn.commit()?;
        let hold = self.db.write(Durability::Immediate)?;
        let out = f();
        drop(hold);
        out
    }

    fn locked<T>(&self, c: Commit, f: impl FnOnce(&WriteTx, &mut Vec<IndexOp>) -> Result<T>) -> Result<T> {
        let mut ops = Vec::new();
        let mut txn = self.db.write(c.durability.unwrap_or(self.durability))?;
        // Bookkeeping never changes a replicated field (read counts, derived rows, checkpoints): not captured.
        let capturing = c.capture && self.sync.on();
        if capturing {
            txn.capture(crate::store::records::sync::REPLICATED);
        }
        if !self.db.shared() {
            // Any commit makes the index snapshot stale ([`super::snapshot`]).
            meta::meta(&txn)?.remove(meta::INDEX_SNAPSHOT)?;
        }
        if c.bump && self.db.shared() {
            // The two counters a memory write reads, asked for ahead: PostgreSQL reads them with the write's
            // first point read, in its one statement, and answers their reads from what it read.
            meta::ask_ahead(&txn, &["next_docno", "generation"]);
        }
        let out = f(&txn, &mut ops)?;
        // The replicated changes are logged in the transaction that makes them (docs/sync.md).
        let logged = if capturing {
            self.sync.with(|clock| super::changes::capture(&txn, clock)).transpose()?.unwrap_or(0)
        } else {
            0
        };
        if self.db.shared() && !ops.is_empty() {
            // The database's search catalog changes with the commit that changes the indexes.
            crate::store::records::catalog::keep(&txn, &ops)?;
        }
        if c.bump {
            let mut meta = meta::meta(&txn)?;
            let g = meta.u64("generation")?.unwrap_or(0) + 1;
            meta.put_u64("generation", g)?;
        }
        self.feed.publish(&txn, ChangeOut::Index(&ops))?;
        let published = txn.commit_published()?;
        if logged > 0 {
            self.sync.count(logged);
        }
        if !ops.is_empty() {
            self.feed.apply_own(ops, published);
        }
        Ok(out)
    }
}
