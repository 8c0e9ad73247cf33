//! The port's transactions and tables on PostgreSQL: one pooled connection per transaction, one SQL statement
//! per port call (prepared once per connection), keyset pages for scans.
//!
//! Isolation: a read transaction is `REPEATABLE READ READ ONLY` (one snapshot, as redb's read transactions). A
//! write transaction is `READ COMMITTED` under a transaction-level advisory lock on the store's schema, so
//! writers take turns across every daemon, as redb's single writer within one process: the domain's
//! read-modify-write steps (counters, docnos, label usage) stay correct with no serialisation retries.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use parking_lot::Mutex;
use postgres::types::{ToSql, Type};
use postgres::{Row, Statement};

use super::vectors::{self, VectorIndex};
use super::{PgManager, pg_error};
use crate::error::Result;
use crate::storage::record::{SqlValue, decode};
use crate::storage::tables::VECTORS;
use crate::storage::{Borrowed, Durability, KeyType, Kind, KindStats, ValueType};

mod ahead;
mod pending;
mod search;
mod sql;
mod table;

use ahead::*;
use pending::*;
use sql::*;
pub use table::{PgRows, PgTable};

/// Rows per keyset page of a scan.
const PAGE: usize = 256;

thread_local! {
    /// Statements this thread has sent through the port's transactions ([`statements_sent`]).
    static SENT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts `n` statements sent by this thread.
pub(super) fn sent(n: u64) {
    SENT.with(|c| c.set(c.get() + n));
}

/// The SQL statements this thread has sent to PostgreSQL through the storage port's transactions since it
/// started: `BEGIN`, each read and write, `COMMIT` or `ROLLBACK` (a multi-statement `BEGIN` string counts once).
/// Background threads count their own, so the difference around a call on one thread is the statements that
/// call sent: what `tools/postgres/statements.sh` counts in the server's log, for one call.
pub fn statements_sent() -> u64 {
    SENT.with(std::cell::Cell::get)
}

/// One pooled connection and its prepared statements (by SQL text).
pub struct Conn {
    pub(super) client: postgres::Client,
    stmts: HashMap<String, Statement>,
}

impl Conn {
    pub(super) fn new(client: postgres::Client) -> Conn {
        Conn { client, stmts: HashMap::new() }
    }

    fn statement(&mut self, sql: &str) -> std::result::Result<Statement, postgres::Error> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.stmts.insert(sql.to_string(), s.clone());
        Ok(s)
    }

    fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>> {
        let stmt = self.statement(sql).map_err(|e| pg_error("preparing a statement failed", e))?;
        sent(1);
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        self.client.query(&stmt, &refs).map_err(|e| pg_error("a storage query failed", e))
    }

    /// Runs a query with typed parameters (prepared once per connection), returning its rows.
    fn query_typed(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        let stmt = self.statement(sql).map_err(|e| pg_error("preparing a statement failed", e))?;
        sent(1);
        self.client.query(&stmt, params).map_err(|e| pg_error("a storage query failed", e))
    }

    /// Sends `rows` (all of one shape, typed by the first row) into `table`'s `cols` by binary `COPY`: one
    /// statement. The rows are encoded into one buffer in PostgreSQL's binary copy format (its documentation,
    /// "COPY", "Binary Format": signature, flags, header extension; per row the field count and per field its
    /// length and bytes; -1 at the end), each value by its `ToSql`, and sent at once: the crate's
    /// `BinaryCopyInWriter` enters the connection's runtime once per row, which cost more than the rows.
    fn copy_in(&mut self, table: &str, cols: &str, rows: &[Vec<SqlValue>]) -> Result<()> {
        use bytes::BufMut;
        use std::io::Write;
        let Some(first) = rows.first() else { return Ok(()) };
        let types: Vec<Type> = first.iter().map(pg_type).collect();
        let failed = |e| pg_error(&format!("copying rows into {table} failed"), e);
        let encode = |e: Box<dyn std::error::Error + Sync + Send>| {
            crate::error::Error::new(crate::ErrorKind::Io, format!("encoding a row for {table} failed: {e}"))
        };
        let fields = i16::try_from(types.len()).map_err(|e| encode(Box::new(e)))?;
        let mut buf = bytes::BytesMut::with_capacity(19 + rows.len() * (2 + types.len() * 16));
        buf.put_slice(b"PGCOPY\n\xff\r\n\0");
        buf.put_i32(0);
        buf.put_i32(0);
        for row in rows {
            buf.put_i16(fields);
            for (v, ty) in row.iter().zip(&types) {
                let at = buf.len();
                buf.put_i32(0);
                let len = match v.to_sql_checked(ty, &mut buf).map_err(encode)? {
                    postgres::types::IsNull::Yes => -1,
                    postgres::types::IsNull::No => {
                        i32::try_from(buf.len() - at - 4).map_err(|e| encode(Box::new(e)))?
                    }
                };
                buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
            }
        }
        buf.put_i16(-1);
        sent(1);
        let mut sink =
            self.client.copy_in(&format!("COPY \"{table}\" ({cols}) FROM STDIN (FORMAT binary)")).map_err(failed)?;
        sink.write_all(&buf).map_err(|e| {
            crate::error::Error::new(crate::ErrorKind::Io, format!("copying rows into {table} failed: {e}"))
        })?;
        sink.finish().map_err(failed)?;
        Ok(())
    }

    /// Runs a statement with typed parameters (prepared once per connection).
    fn exec(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> std::result::Result<u64, postgres::Error> {
        let stmt = self.statement(sql)?;
        sent(1);
        self.client.execute(&stmt, params)
    }
}

/// A transaction's connection: `open` until committed or rolled back (on drop).
pub struct TxConn {
    conn: r2d2::PooledConnection<PgManager>,
    open: bool,
    /// Records stored with [`PgTable::put`] and not yet sent: one entry per table.
    pending: Vec<Pending>,
    /// The pgvector rows of the held-back `vectors` puts.
    side: Option<SidePending>,
    /// Change-feed bodies of [`PgTx::publish`], not yet sent.
    changes: Vec<Vec<u8>>,
    /// Write transactions only: what this transaction knows of each key it read or wrote.
    known: Option<Known>,
    /// The lowest and highest change-feed `seq` this transaction's sent changes took.
    published: Option<(u64, u64)>,
    /// Point reads asked for ahead ([`PgTx::read_ahead`]), not yet sent: they go with the next point read.
    ahead: Vec<Ahead>,
}

impl TxConn {
    /// Whether a write of `table` is held back.
    fn holds(&self, table: &str) -> bool {
        self.pending.iter().any(|p| p.table == table)
    }

    /// Sends every held-back write in one statement, if there is any.
    fn flush(&mut self) -> Result<()> {
        let mut pending = std::mem::take(&mut self.pending);
        let side = self.side.take();
        let changes = std::mem::take(&mut self.changes);
        // One text per set of tables, so that each is prepared once per connection.
        pending.sort_by_key(|p| p.table);
        let mut parts: Vec<String> = Vec::new();
        let mut params: Vec<Box<dyn ToSql + Sync>> = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for p in &mut pending {
            let (fresh, upsert) = p.split();
            if fresh.len() >= COPY_MIN {
                self.conn.copy_in(p.table, &p.cols, &fresh)?;
            } else if let Some(first) = fresh.first() {
                // New rows: no conflict to handle, so no speculative insertion per row.
                parts.push(format!("{}{})", p.head, array_params(first, params.len() + 1)));
                params.extend(arrays(fresh));
                names.push(p.table);
            }
            let Some(first) = upsert.first() else { continue };
            parts.push(format!("{}{}{}", p.head, array_params(first, params.len() + 1), p.tail));
            params.extend(arrays(upsert));
            names.push(p.table);
        }
        if let Some(side) = side.filter(|s| !s.rows.is_empty()) {
            let mut dims: Vec<usize> = side.rows.iter().map(|r| r.2.len()).collect();
            dims.sort_unstable();
            dims.dedup();
            for dim in dims {
                let conn = &mut self.conn;
                vectors::ensure_index(&mut |sql, p| conn.exec(sql, p), &side.index, dim)?;
            }
            let n = params.len();
            parts.push(format!(
                "INSERT INTO engram_vectors (k0, k1, dim, emb) SELECT k0, k1, dim, emb::{}.vector \
                 FROM unnest(${}::text[], ${}::int8[], ${}::int4[], ${}::text[]) AS u(k0, k1, dim, emb) \
                 ON CONFLICT (k0, k1) DO UPDATE SET dim = EXCLUDED.dim, emb = EXCLUDED.emb",
                side.index.ext,
                n + 1,
                n + 2,
                n + 3,
                n + 4
            ));
            let (mut spaces, mut docnos, mut dims, mut embs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (space, docno, v) in side.rows {
                spaces.push(space);
                docnos.push(docno);
                dims.push(i32::try_from(v.len()).unwrap_or(i32::MAX));
                embs.push(vectors::literal(&v));
            }
            params.push(Box::new(spaces));
            params.push(Box::new(docnos));
            params.push(Box::new(dims));
            params.push(Box::new(embs));
            names.push("engram_vectors");
        }
        let publishes = !changes.is_empty();
        if publishes {
            parts.push(format!(
                "{}${}::bytea[]) WITH ORDINALITY AS u(b, i) ORDER BY i RETURNING seq",
                super::feed::PUBLISH_MANY,
                params.len() + 1
            ));
            params.push(Box::new(changes));
            names.push("engram_changes");
        }
        if parts.is_empty() {
            return Ok(());
        }
        // The last query gives the feed's `seq`s, lowest and highest, when it is the feed's insert.
        let last = parts.len() - 1;
        let with: Vec<String> = parts[..last].iter().enumerate().map(|(i, p)| format!("w{i} AS ({p})")).collect();
        let sql = match (with.is_empty(), publishes) {
            (true, false) => parts[last].clone(),
            (false, false) => format!("WITH {}, w{last} AS ({}) SELECT 1", with.join(", "), parts[last]),
            (true, true) => format!("WITH f AS ({}) SELECT min(seq), max(seq) FROM f", parts[last]),
            (false, true) => {
                format!("WITH {}, f AS ({}) SELECT min(seq), max(seq) FROM f", with.join(", "), parts[last])
            }
        };
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|c| c.as_ref() as &(dyn ToSql + Sync)).collect();
        let failed = |e| pg_error(&format!("writing to {} failed", names.join(", ")), e);
        if !publishes {
            return self.conn.exec(&sql, &refs).map(|_| ()).map_err(failed);
        }
        let rows = self.conn.query_typed(&sql, &refs)?;
        let seqs = rows.first().and_then(|r| Some((r.try_get::<_, i64>(0).ok()?, r.try_get::<_, i64>(1).ok()?)));
        if let Some((lo, hi)) = seqs {
            let (lo, hi) = (lo.max(0) as u64, hi.max(0) as u64);
            self.published = Some(self.published.map_or((lo, hi), |(l, h)| (l.min(lo), h.max(hi))));
        }
        Ok(())
    }

    /// The connection, after sending every held-back write.
    fn conn(&mut self) -> Result<&mut Conn> {
        self.flush()?;
        Ok(&mut self.conn)
    }

    /// The connection for a statement that reads or writes `table` by a scan or a range: the held-back writes
    /// are sent first when some are of `table`, so the statement sees the transaction's own puts.
    fn conn_scanning(&mut self, table: &str) -> Result<&mut Conn> {
        if self.holds(table) {
            self.flush()?;
        }
        Ok(&mut self.conn)
    }

    /// The connection for point reads of keys of `table` that [`TxConn::known_value`] did not answer: no
    /// held-back write is of those keys, so none is sent, except where the table is not tracked.
    fn conn_point(&mut self, table: &'static str) -> Result<&mut Conn> {
        match &self.known {
            Some(k) if !k.unknown.contains(table) => Ok(&mut self.conn),
            _ => self.conn_scanning(table),
        }
    }

    /// What this write transaction knows `key` of `table` holds: `Some(None)` for nothing.
    fn known_value(&self, table: &'static str, key: &str) -> Option<Option<Vec<SqlValue>>> {
        let k = self.known.as_ref()?;
        if k.unknown.contains(table) {
            return None;
        }
        if let Some(p) = self.pending.iter().find(|p| p.table == table)
            && let Some(&i) = p.by_key.get(key)
        {
            return Some(Some(p.rows[i][p.parts..].to_vec()));
        }
        k.values.get(table)?.get(key).cloned()
    }

    /// Whether this write transaction knows what `key` of `table` holds ([`TxConn::known_value`]).
    fn knows(&self, table: &'static str, key: &str) -> bool {
        let Some(k) = &self.known else { return false };
        !k.unknown.contains(table)
            && (self.pending.iter().any(|p| p.table == table && p.by_key.contains_key(key))
                || k.values.get(table).is_some_and(|v| v.contains_key(key)))
    }

    /// Forgets what was read of `key` of `table`: the transaction is writing it.
    fn unremember(&mut self, table: &'static str, key: &str) {
        if let Some(v) = self.known.as_mut().and_then(|k| k.values.get_mut(table)) {
            v.remove(key);
        }
    }

    /// Records what a point read or a delete found under `key` of `table` (write transactions only).
    fn remember(&mut self, table: &'static str, key: String, value: Option<Vec<SqlValue>>) {
        if self.known.as_ref().is_some_and(|k| k.every_read) {
            self.remember_ahead(table, key, value);
        }
    }

    /// Records what a read ahead found under `key` of `table`.
    fn remember_ahead(&mut self, table: &'static str, key: String, value: Option<Vec<SqlValue>>) {
        if let Some(k) = &mut self.known
            && !k.unknown.contains(table)
        {
            k.values.entry(table).or_default().insert(key, value);
        }
    }

    /// Queues point reads of `keys` of `table` (keys this transaction knows and kinds it does not track are left
    /// out): they are sent with the next point read of any kind.
    fn queue_ahead(&mut self, table: &'static str, keys: Vec<Vec<SqlValue>>) {
        let Some(known) = &self.known else { return };
        if known.unknown.contains(table) {
            return;
        }
        let Some(info) = crate::storage::tables::ALL.iter().find(|k| k.name == table) else { return };
        let keys: Vec<Vec<SqlValue>> = keys.into_iter().filter(|k| !self.knows(table, &fingerprint(k))).collect();
        if keys.is_empty() {
            return;
        }
        match self.ahead.iter_mut().find(|a| a.table == table) {
            Some(a) => a.keys.extend(keys),
            None => self.ahead.push(Ahead { table, values: info.value, keys }),
        }
    }

    /// Sends the queued point reads ([`TxConn::queue_ahead`]) as one statement, one `unnest .. JOIN` per kind
    /// under `UNION ALL`, and remembers what each key holds. A key this transaction came to know since it was
    /// queued (it wrote it) keeps what it knows.
    fn send_ahead(&mut self) -> Result<()> {
        let mut asks = std::mem::take(&mut self.ahead);
        for a in &mut asks {
            let mut seen = std::collections::HashSet::new();
            a.keys.retain(|k| {
                let fp = fingerprint(k);
                self.known_value(a.table, &fp).is_none() && seen.insert(fp)
            });
        }
        asks.retain(|a| !a.keys.is_empty() && self.known.as_ref().is_some_and(|k| !k.unknown.contains(a.table)));
        if asks.is_empty() {
            return Ok(());
        }
        let (sql, params) = ahead_sql(&asks);
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|c| c.as_ref() as &(dyn ToSql + Sync)).collect();
        let rows = self.conn.query_typed(&sql, &refs)?;
        let mut found: Vec<Vec<Option<Vec<SqlValue>>>> = asks.iter().map(|a| vec![None; a.keys.len()]).collect();
        let bases = slot_bases(&asks);
        for r in rows {
            let get = |e: postgres::Error| pg_error("reading a column failed", e);
            let (Ok(n), Ok(i)) = (usize::try_from(r.try_get::<_, i32>(0).map_err(get)?), r.try_get::<_, i64>(1)) else {
                continue;
            };
            let (Some(a), Ok(i)) = (asks.get(n), usize::try_from(i - 1)) else { continue };
            if i >= a.keys.len() {
                continue;
            }
            let mut used = [0usize; SLOT_TYPES.len()];
            let mut value = Vec::with_capacity(a.values.len());
            for t in a.values {
                let s = SLOT_TYPES.iter().position(|x| x == t).unwrap_or(SLOT_TYPES.len() - 1);
                value.push(column(&r, 2 + bases[s] + used[s])?);
                used[s] += 1;
            }
            found[n][i] = Some(value);
        }
        for (a, values) in asks.into_iter().zip(found) {
            for (k, v) in a.keys.iter().zip(values) {
                self.remember_ahead(a.table, fingerprint(k), v);
            }
        }
        Ok(())
    }

    /// Stops answering point reads of `table` from memory (after deletes by a scan).
    fn forget(&mut self, table: &'static str) {
        if let Some(k) = &mut self.known {
            k.values.remove(table);
            k.unknown.insert(table);
        }
    }
}

impl Drop for TxConn {
    fn drop(&mut self) {
        if self.open {
            // A failure leaves a broken connection, which the pool discards.
            sent(1);
            let _ = self.conn.client.batch_execute("ROLLBACK");
        }
    }
}

/// A read or write transaction.
pub struct PgTx(Arc<Mutex<TxConn>>, Option<Arc<VectorIndex>>);

impl PgTx {
    pub(super) fn begin(
        conn: r2d2::PooledConnection<PgManager>,
        write: Option<Durability>,
        vectors: Option<Arc<VectorIndex>>,
    ) -> Result<PgTx> {
        let mut tx = TxConn {
            conn,
            open: false,
            pending: Vec::new(),
            side: None,
            changes: Vec::new(),
            known: Some(Known { every_read: write.is_some(), ..Known::default() }),
            published: None,
            ahead: Vec::new(),
        };
        let sql = match write {
            None => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            // An acknowledged write is in the server's WAL, whatever the server's default.
            Some(Durability::Immediate) => {
                "BEGIN ISOLATION LEVEL READ COMMITTED;
                 SET LOCAL synchronous_commit = on;
                 SELECT pg_advisory_xact_lock(hashtextextended('engram:write:' || current_schema(), 0))"
            }
            Some(Durability::Eventual) => {
                "BEGIN ISOLATION LEVEL READ COMMITTED;
                 SET LOCAL synchronous_commit = off;
                 SELECT pg_advisory_xact_lock(hashtextextended('engram:write:' || current_schema(), 0))"
            }
        };
        sent(1);
        tx.conn.client.batch_execute(sql).map_err(|e| pg_error("starting a transaction failed", e))?;
        tx.open = true;
        Ok(PgTx(Arc::new(Mutex::new(tx)), vectors))
    }

    /// The table of `kind` in this transaction.
    pub fn table<'t, K: KeyType, V: ValueType>(&self, kind: Kind<K, V>) -> PgTable<'t, K, V> {
        let side = if kind.name() == VECTORS.name() { self.1.clone() } else { None };
        PgTable { tx: self.0.clone(), name: kind.name(), side, types: PhantomData }
    }

    /// Vector candidates from pgvector's HNSW index (`vectors.rs`), or `None` where the server has no pgvector
    /// 0.8.0+ (the caller scans the vectors kind then).
    ///
    /// # Errors
    /// Database errors.
    pub fn vector_candidates(&self, space: &str, query: &[f32], k: usize) -> Result<Option<Vec<(u64, f32)>>> {
        let Some(index) = &self.1 else { return Ok(None) };
        vectors::candidates(&mut self.0.lock().conn()?.client, index, space, query, k).map(Some)
    }

    /// Asks for the records under `keys` of the kind named `table` ahead of their reads: they are read with
    /// the next point read ([`PgTable::get`], [`PgTable::get_many`]) of any kind, all asked kinds in that one
    /// statement, and the reads of these keys after it are answered from what it read (in a read transaction as
    /// of its snapshot). Correctness never depends on it, only the number of statements.
    pub fn read_ahead(&self, table: &'static str, keys: Vec<Vec<SqlValue>>) {
        self.0.lock().queue_ahead(table, keys);
    }

    /// Appends `body` to the change feed in this (write) transaction (`feed.rs`): held back and sent with the
    /// transaction's other held-back writes, at the latest with the commit.
    ///
    /// # Errors
    /// None today; database errors surface when the change is sent.
    pub fn publish(&self, body: &[u8]) -> Result<()> {
        self.0.lock().changes.push(body.to_vec());
        Ok(())
    }

    /// The last change-feed `seq` committed as of this transaction's snapshot.
    ///
    /// # Errors
    /// Database errors.
    pub fn change_head(&self) -> Result<u64> {
        let rows = self.0.lock().conn()?.query(super::feed::HEAD, &[])?;
        Ok(rows.first().and_then(|r| r.try_get::<_, i64>(0).ok()).unwrap_or(0).max(0) as u64)
    }

    /// Commits; gives the lowest and highest change-feed `seq` its changes took, when it published any.
    ///
    /// # Errors
    /// Database errors; nothing is written then.
    pub fn commit(self) -> Result<Option<(u64, u64)>> {
        let mut tx = self.0.lock();
        tx.flush()?;
        tx.open = false;
        sent(1);
        tx.conn.client.batch_execute("COMMIT").map_err(|e| pg_error("commit failed", e))?;
        Ok(tx.published)
    }

    /// The bytes of `name`'s table (the main forks of its heap and TOAST table as stored bytes, its indexes as
    /// metadata).
    ///
    /// # Errors
    /// Database errors.
    pub fn kind_stats(&self, name: &str) -> Result<KindStats> {
        let rows = self.0.lock().conn()?.query(
            "SELECT coalesce(pg_relation_size(c.oid) + coalesce(pg_relation_size(nullif(c.reltoastrelid, 0)), 0), 0),
                    coalesce(pg_indexes_size(c.oid), 0)
             FROM (SELECT to_regclass($1) AS oid) r LEFT JOIN pg_class c ON c.oid = r.oid",
            &[SqlValue::Text(format!("\"{name}\""))],
        )?;
        let get = |i: usize| rows.first().and_then(|r| r.try_get::<_, i64>(i).ok()).unwrap_or(0).max(0) as u64;
        Ok(KindStats { stored_bytes: get(0), metadata_bytes: get(1), fragmented_bytes: 0 })
    }
}
