//! Pending writes: puts and deletes held back until a read needs them or the transaction commits, then sent
//! as one statement per table.

use super::*;

/// Rows of one table most held back before a flush, of those that may replace a stored record.
pub(super) const PENDING_MAX: usize = 4000;

/// Rows of one table most held back before a flush, of those new to the table ([`PgTable::put_new`]): they
/// stream by `COPY`, so a flush may carry many more.
pub(super) const FRESH_MAX: usize = 50_000;

/// New rows of one table ([`PgTable::put_new`]) from which a flush sends them by binary `COPY` (one more
/// statement, but no executor work per row) instead of in its one `INSERT` statement.
pub(super) const COPY_MIN: usize = 1000;

/// Writes of one table held back by [`PgTable::put`] until the transaction reads that table with a scan, or
/// commits: then one `INSERT .. SELECT * FROM unnest($1::t[], ..) ON CONFLICT .. DO UPDATE` sends them all (one
/// round trip instead of one per record), and the held-back writes of every table go out together as one
/// statement (each table's insert a data-modifying `WITH` query). A later put of the same key replaces the
/// earlier (one statement may not update a row twice).
pub(super) struct Pending {
    pub(super) table: &'static str,
    /// The statement before its array parameters: `INSERT INTO "t" (k0, v0) SELECT * FROM unnest(`.
    pub(super) head: String,
    /// The statement after them: `) ON CONFLICT (k0) DO UPDATE SET v0 = EXCLUDED.v0`.
    pub(super) tail: String,
    /// The columns: `k0, v0`.
    pub(super) cols: String,
    /// Key columns at the front of each row.
    pub(super) parts: usize,
    pub(super) rows: Vec<Vec<SqlValue>>,
    /// Per row: held with [`PgTable::put_new`] (no stored record has its key). A later put of the same key
    /// replaces the row and keeps its flag: nothing of it was sent.
    pub(super) fresh: Vec<bool>,
    /// How many of `fresh` are true.
    pub(super) fresh_rows: usize,
    /// Row index by key fingerprint.
    pub(super) by_key: HashMap<String, usize>,
}

impl Pending {
    /// `(fresh, upsert)` rows: those new to the table, and those that may replace a stored record.
    pub(super) fn split(&mut self) -> (Vec<Vec<SqlValue>>, Vec<Vec<SqlValue>>) {
        let mut fresh = Vec::with_capacity(self.fresh_rows);
        let mut upsert = Vec::with_capacity(self.rows.len() - self.fresh_rows);
        for (row, new) in std::mem::take(&mut self.rows).into_iter().zip(&self.fresh) {
            if *new { fresh.push(row) } else { upsert.push(row) }
        }
        (fresh, upsert)
    }
}

/// pgvector rows held back with the `vectors` puts, sent with them.
pub(super) struct SidePending {
    pub(super) index: Arc<VectorIndex>,
    /// (space, docno, vector), one per key.
    pub(super) rows: Vec<(String, i64, Vec<f32>)>,
    pub(super) by_key: HashMap<(String, i64), usize>,
}

/// What a transaction knows each key holds, besides its held-back writes (`TxConn::pending`, looked at first):
/// the values it read, `None` where it found or deleted nothing. Writers take turns under the store's advisory
/// lock, so nothing but this transaction changes a key between its reads: a point read answered from here is the
/// server's answer, and a key neither here nor held back needs no flush to be read. A read transaction reads one
/// snapshot (`REPEATABLE READ`), so the same holds for it; it keeps only what it read ahead
/// ([`TxConn::queue_ahead`]), not every point read, so that a long read does not hold all it read in memory.
#[derive(Default)]
pub(super) struct Known {
    /// Every point read is kept (write transactions); else only what was read ahead.
    pub(super) every_read: bool,
    /// By table, then key fingerprint. Held-back writes are not here but in `TxConn::pending`, which is
    /// looked at first; a put drops the key from here, since once sent the server holds what it wrote.
    pub(super) values: HashMap<&'static str, HashMap<String, Option<Vec<SqlValue>>>>,
    /// Tables deleted from by a scan (`clear`, `retain_in`): their point reads go to the server.
    pub(super) unknown: std::collections::HashSet<&'static str>,
}
