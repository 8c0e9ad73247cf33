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

impl ToSql for SqlValue {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            SqlValue::Text(s) => s.to_sql(ty, out),
            // Two's complement: the bits of a u64 above i64::MAX survive (see SqlValue::U64).
            SqlValue::U64(x) => (*x as i64).to_sql(ty, out),
            SqlValue::Float(f) => f.to_sql(ty, out),
            SqlValue::Bytes(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::TEXT | Type::INT8 | Type::FLOAT8 | Type::BYTEA)
    }

    postgres::types::to_sql_checked!();
}

fn column(row: &Row, i: usize) -> Result<SqlValue> {
    let get = |e: postgres::Error| pg_error("reading a column failed", e);
    Ok(match *row.columns()[i].type_() {
        Type::TEXT => SqlValue::Text(row.try_get(i).map_err(get)?),
        Type::INT8 => SqlValue::U64(row.try_get::<_, i64>(i).map_err(get)? as u64),
        Type::FLOAT8 => SqlValue::Float(row.try_get(i).map_err(get)?),
        _ => SqlValue::Bytes(row.try_get(i).map_err(get)?),
    })
}

fn columns(row: &Row, from: usize, n: usize) -> Result<Vec<SqlValue>> {
    (from..from + n).map(|i| column(row, i)).collect()
}

/// The columns of `rows` (all of one shape, typed by the first row) as arrays, one parameter each, for
/// `unnest($1::text[], ..)`. The values are moved, not copied.
fn arrays(mut rows: Vec<Vec<SqlValue>>) -> Vec<Box<dyn ToSql + Sync>> {
    let n = rows.first().map_or(0, Vec::len);
    let mut columns: Vec<Box<dyn ToSql + Sync>> = Vec::with_capacity(n);
    let take = |r: &mut Vec<SqlValue>, c: usize| std::mem::replace(&mut r[c], SqlValue::U64(0));
    for c in 0..n {
        let column: Box<dyn ToSql + Sync> = match &rows[0][c] {
            SqlValue::Text(_) => Box::new(
                rows.iter_mut()
                    .map(|r| if let SqlValue::Text(t) = take(r, c) { t } else { String::new() })
                    .collect::<Vec<_>>(),
            ),
            // Two's complement, as `SqlValue::U64` is written one at a time.
            SqlValue::U64(_) => Box::new(
                rows.iter().map(|r| if let SqlValue::U64(x) = &r[c] { *x as i64 } else { 0 }).collect::<Vec<_>>(),
            ),
            SqlValue::Float(_) => {
                Box::new(rows.iter().map(|r| if let SqlValue::Float(x) = &r[c] { *x } else { 0.0 }).collect::<Vec<_>>())
            }
            SqlValue::Bytes(_) => Box::new(
                rows.iter_mut()
                    .map(|r| if let SqlValue::Bytes(b) = take(r, c) { b } else { Vec::new() })
                    .collect::<Vec<_>>(),
            ),
        };
        columns.push(column);
    }
    columns
}

/// The PostgreSQL type a value is sent as (`ToSql for SqlValue`).
fn pg_type(v: &SqlValue) -> Type {
    match v {
        SqlValue::Text(_) => Type::TEXT,
        SqlValue::U64(_) => Type::INT8,
        SqlValue::Float(_) => Type::FLOAT8,
        SqlValue::Bytes(_) => Type::BYTEA,
    }
}

/// The SQL array type of each column of `row`, numbered from `$from`: `$1::text[], $2::int8[]`.
fn array_params(row: &[SqlValue], from: usize) -> String {
    row.iter()
        .enumerate()
        .map(|(i, v)| format!("${}::{}[]", i + from, pg_type(v).name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A key's columns as one string, to find it again among held-back and known records: per column a tag, the
/// length or value in decimal and, for text and bytes, the content (so that two keys share a fingerprint only
/// when equal).
fn fingerprint(key: &[SqlValue]) -> String {
    use std::fmt::Write;
    let mut s =
        String::with_capacity(key.iter().map(|v| if let SqlValue::Text(t) = v { t.len() + 8 } else { 22 }).sum());
    for v in key {
        // Writing to a String cannot fail.
        let _ = match v {
            SqlValue::Text(t) => write!(s, "t{}:{t}", t.len()),
            SqlValue::U64(x) => write!(s, "u{x};"),
            SqlValue::Float(f) => write!(s, "f{};", f.to_bits()),
            SqlValue::Bytes(b) => {
                let _ = write!(s, "b{}:", b.len());
                b.iter().try_for_each(|x| write!(s, "{x:02x}"))
            }
        };
    }
    s
}

/// How many value columns of each of [`SLOT_TYPES`] the widest of `asks` has: a read-ahead statement's slots.
fn slot_counts(asks: &[Ahead]) -> [usize; SLOT_TYPES.len()] {
    let mut most = [0usize; SLOT_TYPES.len()];
    for a in asks {
        for (s, t) in SLOT_TYPES.iter().enumerate() {
            most[s] = most[s].max(a.values.iter().filter(|v| *v == t).count());
        }
    }
    most
}

/// The first slot column of each of [`SLOT_TYPES`], counted after the statement's two leading columns.
fn slot_bases(asks: &[Ahead]) -> [usize; SLOT_TYPES.len()] {
    let counts = slot_counts(asks);
    let mut bases = [0usize; SLOT_TYPES.len()];
    for s in 1..SLOT_TYPES.len() {
        bases[s] = bases[s - 1] + counts[s - 1];
    }
    bases
}

/// The read-ahead statement of `asks` and its parameters: for ask `n`, `SELECT n, q.i, <slots> FROM
/// unnest(<key arrays>) WITH ORDINALITY AS q(p0, .., i) JOIN "<kind>" t ON t.k0 = q.p0 AND ..`, the branches
/// joined by `UNION ALL`. Each row gives the ask, the key's index (from 1) and the value columns in typed
/// slots (`NULL` in the slots the kind does not use), since the branches of a union share their columns.
fn ahead_sql(asks: &[Ahead]) -> (String, Vec<Box<dyn ToSql + Sync>>) {
    let counts = slot_counts(asks);
    let mut params: Vec<Box<dyn ToSql + Sync>> = Vec::new();
    let mut branches = Vec::with_capacity(asks.len());
    for (n, a) in asks.iter().enumerate() {
        let parts = a.keys[0].len();
        let mut slots = Vec::new();
        for (s, t) in SLOT_TYPES.iter().enumerate() {
            let cols: Vec<usize> = (0..a.values.len()).filter(|&i| a.values[i] == *t).collect();
            for j in 0..counts[s] {
                slots.push(match cols.get(j) {
                    Some(c) => format!(", t.v{c}"),
                    None => format!(", NULL::{t}"),
                });
            }
        }
        let join = (0..parts).map(|i| format!("t.k{i} = q.p{i}")).collect::<Vec<_>>().join(" AND ");
        branches.push(format!(
            "SELECT {n}::int4, q.i{} FROM unnest({}) WITH ORDINALITY AS q({}, i) JOIN \"{}\" t ON {join}",
            slots.concat(),
            array_params(&a.keys[0], params.len() + 1),
            list("p", parts),
            a.table,
        ));
        params.extend(arrays(a.keys.clone()));
    }
    (branches.join(" UNION ALL "), params)
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

/// Keys of one kind asked for ahead of their reads ([`PgTx::read_ahead`]).
struct Ahead {
    table: &'static str,
    /// The SQL types of the kind's value columns (`tables::ALL`).
    values: &'static [&'static str],
    keys: Vec<Vec<SqlValue>>,
}

/// The SQL types of value columns a read-ahead statement has slots for, in slot order.
const SLOT_TYPES: [&str; 4] = ["text", "bigint", "double precision", "bytea"];

/// Rows of one table most held back before a flush, of those that may replace a stored record.
const PENDING_MAX: usize = 4000;

/// Rows of one table most held back before a flush, of those new to the table ([`PgTable::put_new`]): they
/// stream by `COPY`, so a flush may carry many more.
const FRESH_MAX: usize = 50_000;

/// New rows of one table ([`PgTable::put_new`]) from which a flush sends them by binary `COPY` (one more
/// statement, but no executor work per row) instead of in its one `INSERT` statement.
const COPY_MIN: usize = 1000;

/// Writes of one table held back by [`PgTable::put`] until the transaction reads that table with a scan, or
/// commits: then one `INSERT .. SELECT * FROM unnest($1::t[], ..) ON CONFLICT .. DO UPDATE` sends them all (one
/// round trip instead of one per record), and the held-back writes of every table go out together as one
/// statement (each table's insert a data-modifying `WITH` query). A later put of the same key replaces the
/// earlier (one statement may not update a row twice).
struct Pending {
    table: &'static str,
    /// The statement before its array parameters: `INSERT INTO "t" (k0, v0) SELECT * FROM unnest(`.
    head: String,
    /// The statement after them: `) ON CONFLICT (k0) DO UPDATE SET v0 = EXCLUDED.v0`.
    tail: String,
    /// The columns: `k0, v0`.
    cols: String,
    /// Key columns at the front of each row.
    parts: usize,
    rows: Vec<Vec<SqlValue>>,
    /// Per row: held with [`PgTable::put_new`] (no stored record has its key). A later put of the same key
    /// replaces the row and keeps its flag: nothing of it was sent.
    fresh: Vec<bool>,
    /// How many of `fresh` are true.
    fresh_rows: usize,
    /// Row index by key fingerprint.
    by_key: HashMap<String, usize>,
}

impl Pending {
    /// `(fresh, upsert)` rows: those new to the table, and those that may replace a stored record.
    fn split(&mut self) -> (Vec<Vec<SqlValue>>, Vec<Vec<SqlValue>>) {
        let mut fresh = Vec::with_capacity(self.fresh_rows);
        let mut upsert = Vec::with_capacity(self.rows.len() - self.fresh_rows);
        for (row, new) in std::mem::take(&mut self.rows).into_iter().zip(&self.fresh) {
            if *new { fresh.push(row) } else { upsert.push(row) }
        }
        (fresh, upsert)
    }
}

/// pgvector rows held back with the `vectors` puts, sent with them.
struct SidePending {
    index: Arc<VectorIndex>,
    /// (space, docno, vector), one per key.
    rows: Vec<(String, i64, Vec<f32>)>,
    by_key: HashMap<(String, i64), usize>,
}

/// What a transaction knows each key holds, besides its held-back writes (`TxConn::pending`, looked at first):
/// the values it read, `None` where it found or deleted nothing. Writers take turns under the store's advisory
/// lock, so nothing but this transaction changes a key between its reads: a point read answered from here is the
/// server's answer, and a key neither here nor held back needs no flush to be read. A read transaction reads one
/// snapshot (`REPEATABLE READ`), so the same holds for it; it keeps only what it read ahead
/// ([`TxConn::queue_ahead`]), not every point read, so that a long read does not hold all it read in memory.
#[derive(Default)]
struct Known {
    /// Every point read is kept (write transactions); else only what was read ahead.
    every_read: bool,
    /// By table, then key fingerprint. Held-back writes are not here but in `TxConn::pending`, which is
    /// looked at first; a put drops the key from here, since once sent the server holds what it wrote.
    values: HashMap<&'static str, HashMap<String, Option<Vec<SqlValue>>>>,
    /// Tables deleted from by a scan (`clear`, `retain_in`): their point reads go to the server.
    unknown: std::collections::HashSet<&'static str>,
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

/// The types a [`PgTable`] carries without holding: its kind's key and value, and the transaction's lifetime.
type Types<'t, K, V> = PhantomData<fn() -> (&'t (), K, V)>;

/// The BM25 statements' common head (`lexical_candidates`, `bm25_scores`): the query terms `q` from `$2`/`$3`
/// and the space `$1`'s statistics `st` from `lex_stats` (document count `n`, average length `avgdl`).
macro_rules! bm25_head {
    () => {
        "WITH q AS (SELECT t.term, t.qtf FROM unnest($2::text[], $3::int[]) AS t(term, qtf)),
         st AS (SELECT greatest(coalesce(max(v0), 0), 1)::float8 AS n,
                       CASE WHEN coalesce(max(v0), 0) = 0 OR max(v1) = 0 THEN 1.0
                            ELSE max(v1)::float8 / max(v0) END AS avgdl
                FROM lex_stats WHERE k0 = $1),"
    };
}

/// The BM25 statements' common tail: each document's score, the sum over its postings `p` of the terms'
/// weights with the document frequencies `df` (Robertson and Zaragoza 2009; `k1` = `$4`, `b` = `$5`), as in
/// `crate::index::bm25::score`.
macro_rules! bm25_sum {
    () => {
        "SELECT p.docno,
                sum(ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * p.tf * ($4::float8 + 1)
                    / (p.tf + $4::float8 * (1 - $5::float8 + $5::float8 * p.dl / st.avgdl)) * p.qtf) AS score
         FROM p JOIN df USING (term) CROSS JOIN st"
    };
}

impl PgTx {
    /// BM25 candidates in one statement over the `postings` and `lex_stats` tables: the same formula, statistics
    /// and order as the redb backend's scan (`crate::index::bm25::score`; Robertson and Zaragoza 2009), in
    /// double precision (scores agree to about 1e-6 relative). Terms and their query counts come from Engram's
    /// tokeniser (scale-out design §5.1, rule 2).
    ///
    /// # Errors
    /// Database errors.
    pub fn lexical_candidates(
        &self,
        space: &str,
        terms: &[(String, u32)],
        params: crate::index::bm25::Bm25Params,
        k: usize,
    ) -> Result<Vec<(u64, f32)>> {
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let words: Vec<&str> = terms.iter().map(|(t, _)| t.as_str()).collect();
        let counts: Vec<i32> = terms.iter().map(|(_, q)| i32::try_from(*q).unwrap_or(i32::MAX)).collect();
        let (k1, b) = (f64::from(params.k1), f64::from(params.b));
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let sql = concat!(
            bm25_head!(),
            "
             p AS (SELECT q.term, q.qtf, po.k2 AS docno, (po.v0 >> 32)::float8 AS tf,
                          (po.v0 & 4294967295)::float8 AS dl
                   FROM q JOIN postings po ON po.k0 = $1 AND po.k1 = q.term),
             df AS (SELECT term, count(*)::float8 AS df FROM p GROUP BY term)
             ",
            bm25_sum!(),
            " GROUP BY p.docno ORDER BY score DESC, p.docno LIMIT $6"
        );
        let mut tx = self.0.lock();
        let client = &mut tx.conn()?.client;
        let rows = client
            .query(sql, &[&space, &words, &counts, &k1, &b, &limit])
            .map_err(|e| pg_error("BM25 candidates failed", e))?;
        rows.iter()
            .map(|r| {
                let docno: i64 = r.try_get(0).map_err(|e| pg_error("reading a candidate failed", e))?;
                let score: f64 = r.try_get(1).map_err(|e| pg_error("reading a candidate failed", e))?;
                Ok((docno as u64, score as f32))
            })
            .collect()
    }
}

impl PgTx {
    /// The counts of `space`'s catalog and the length its sequence neighbours add to the expanded collection
    /// of `window` (see [`crate::storage::ReadTx::catalog_stats`]): each member's length times its neighbours
    /// within `window` on each side, from its rank in its group.
    ///
    /// # Errors
    /// Database errors.
    pub fn catalog_stats(&self, space: &str, window: usize) -> Result<crate::storage::CatalogStats> {
        let w = i64::try_from(window).unwrap_or(i64::MAX);
        let sql = "SELECT e.entries, e.live, s.sequenced, s.neighbour_len
             FROM (SELECT count(*)::bigint AS entries, count(*) FILTER (WHERE v0 & 1 = 0)::bigint AS live
                   FROM catalog WHERE k0 = $1) e,
                  (SELECT count(*)::bigint AS sequenced,
                          coalesce(sum(v3 * (least($2, rn - 1) + least($2, cnt - rn))), 0)::bigint AS neighbour_len
                   FROM (SELECT v3, row_number() OVER (PARTITION BY v1 ORDER BY v2, k1) AS rn,
                                count(*) OVER (PARTITION BY v1) AS cnt
                         FROM catalog WHERE k0 = $1 AND v1 <> '') m) s";
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space, &w])?;
        let get = |i: usize| -> Result<u64> {
            let v: i64 = rows
                .first()
                .map(|r| r.try_get(i))
                .transpose()
                .map_err(|e| pg_error("reading the catalog's counts failed", e))?
                .unwrap_or(0);
            Ok(v.max(0) as u64)
        };
        Ok(crate::storage::CatalogStats { entries: get(0)?, live: get(1)?, sequenced: get(2)?, neighbour_len: get(3)? })
    }

    /// The catalog rows of `space` with an expiry time, as `(docno, length, record)`, by docno.
    ///
    /// # Errors
    /// Database errors.
    pub fn catalog_expiring(&self, space: &str) -> Result<Vec<(u64, u64, Vec<u8>)>> {
        let sql = "SELECT k1, v3, v4 FROM catalog WHERE k0 = $1 AND v0 & 4 <> 0 ORDER BY k1";
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space])?;
        rows.iter()
            .map(|r| {
                let read = |e| pg_error("reading the catalog failed", e);
                let docno: i64 = r.try_get(0).map_err(read)?;
                let len: i64 = r.try_get(1).map_err(read)?;
                let record: Vec<u8> = r.try_get(2).map_err(read)?;
                Ok((docno as u64, len.max(0) as u64, record))
            })
            .collect()
    }

    /// The sequence neighbours of `docnos` in `space` (see [`crate::storage::ReadTx::sequence_neighbours`]) in
    /// one statement: for each docno with a sequence group, two index ranges of the catalog's sequence index,
    /// `window` entries before it and `window` after.
    ///
    /// # Errors
    /// Database errors.
    pub fn sequence_neighbours(&self, space: &str, docnos: &[u64], window: usize) -> Result<Vec<Vec<(u64, u32)>>> {
        let ids: Vec<i64> = docnos.iter().map(|d| *d as i64).collect();
        let w = i64::try_from(window).unwrap_or(i64::MAX);
        let sql = "SELECT d.i, n.side, n.k1 FROM unnest($2::bigint[]) WITH ORDINALITY AS d(docno, i)
             JOIN catalog c ON c.k0 = $1 AND c.k1 = d.docno AND c.v1 <> ''
             CROSS JOIN LATERAL (
               (SELECT 0 AS side, p.v2, p.k1 FROM catalog p
                WHERE p.k0 = $1 AND p.v1 = c.v1 AND (p.v2, p.k1) < (c.v2, c.k1) AND p.v1 <> ''
                ORDER BY p.v2 DESC, p.k1 DESC LIMIT $3)
               UNION ALL
               (SELECT 1 AS side, p.v2, p.k1 FROM catalog p
                WHERE p.k0 = $1 AND p.v1 = c.v1 AND (p.v2, p.k1) > (c.v2, c.k1) AND p.v1 <> ''
                ORDER BY p.v2, p.k1 LIMIT $3)) n
             ORDER BY d.i, n.side, CASE WHEN n.side = 0 THEN -n.v2 ELSE n.v2 END,
                      CASE WHEN n.side = 0 THEN -n.k1 ELSE n.k1 END";
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space, &ids, &w])?;
        let mut out = vec![Vec::new(); docnos.len()];
        let mut last = (usize::MAX, -1i32, 0u32);
        for r in rows {
            let read = |e| pg_error("reading a sequence neighbour failed", e);
            let i: i64 = r.try_get(0).map_err(read)?;
            let side: i32 = r.try_get(1).map_err(read)?;
            let docno: i64 = r.try_get(2).map_err(read)?;
            let i = usize::try_from(i - 1).unwrap_or(usize::MAX);
            let distance = if (last.0, last.1) == (i, side) { last.2 + 1 } else { 1 };
            last = (i, side, distance);
            if let Some(list) = out.get_mut(i) {
                list.push((docno as u64, distance));
            }
        }
        Ok(out)
    }
}

impl PgTx {
    /// BM25 scores of `docnos` for the query `terms` (see [`crate::storage::ReadTx::bm25_scores`]) in one
    /// statement: the documents' postings of the terms, each term's document frequency counted over its whole
    /// list, the space's statistics from `lex_stats`; the formula of [`PgTx::lexical_candidates`]. The counts are
    /// a `MATERIALIZED` CTE: inlined, PostgreSQL 15 ran each count once per posting row and use (24 s instead of
    /// 0.2 s for 100 documents and two terms of 317,000 postings each at 1M memories).
    ///
    /// # Errors
    /// Database errors.
    pub fn bm25_scores(
        &self,
        space: &str,
        terms: &[(String, u32)],
        params: crate::index::bm25::Bm25Params,
        docnos: &[u64],
    ) -> Result<Vec<f32>> {
        if terms.is_empty() || docnos.is_empty() {
            return Ok(vec![0.0; docnos.len()]);
        }
        let words: Vec<&str> = terms.iter().map(|(t, _)| t.as_str()).collect();
        let counts: Vec<i32> = terms.iter().map(|(_, q)| i32::try_from(*q).unwrap_or(i32::MAX)).collect();
        let ids: Vec<i64> = docnos.iter().map(|d| *d as i64).collect();
        let (k1, b) = (f64::from(params.k1), f64::from(params.b));
        let sql = concat!(
            bm25_head!(),
            "
             df AS MATERIALIZED (SELECT q.term,
                    (SELECT count(*) FROM postings po WHERE po.k0 = $1 AND po.k1 = q.term)::float8 AS df FROM q),
             p AS (SELECT q.term, q.qtf, po.k2 AS docno, (po.v0 >> 32)::float8 AS tf, (po.v0 & 4294967295)::float8 AS dl
                   FROM q JOIN postings po ON po.k0 = $1 AND po.k1 = q.term AND po.k2 = ANY($6::bigint[]))
             ",
            bm25_sum!(),
            " GROUP BY p.docno"
        );
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space, &words, &counts, &k1, &b, &ids])?;
        let mut scores: std::collections::HashMap<u64, f32> = std::collections::HashMap::new();
        for r in rows {
            let read = |e| pg_error("reading a BM25 score failed", e);
            let docno: i64 = r.try_get(0).map_err(read)?;
            let score: f64 = r.try_get(1).map_err(read)?;
            scores.insert(docno as u64, score as f32);
        }
        Ok(docnos.iter().map(|d| scores.get(d).copied().unwrap_or(0.0)).collect())
    }
}

/// One record kind in a transaction.
pub struct PgTable<'t, K, V> {
    tx: Arc<Mutex<TxConn>>,
    name: &'static str,
    /// For the `vectors` kind where pgvector is enabled: every write also goes to `engram_vectors`.
    side: Option<Arc<VectorIndex>>,
    types: Types<'t, K, V>,
}

fn list(prefix: &str, n: usize) -> String {
    (0..n).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>().join(", ")
}

fn placeholders(from: usize, n: usize) -> String {
    (from..from + n).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

/// `k0 = $1 AND k1 = $2 ...`.
fn key_eq(n: usize) -> String {
    (0..n).map(|i| format!("k{i} = ${}", i + 1)).collect::<Vec<_>>().join(" AND ")
}

/// A bound as SQL over the key columns: `(k0, k1) >= ($3, $4)`, its values appended to `params`. A `u64` part
/// above `i64::MAX` (a bound such as `u64::MAX`; stored parts never reach it) is clamped to `i64::MAX`, the
/// comparison cut after it and made inclusive for an upper bound, exclusive for a lower one: the same rows.
fn bound_sql(b: Bound<Vec<SqlValue>>, lower: bool, params: &mut Vec<SqlValue>) -> Option<String> {
    let (mut vals, mut inclusive) = match b {
        Bound::Unbounded => return None,
        Bound::Included(v) => (v, true),
        Bound::Excluded(v) => (v, false),
    };
    if let Some(i) = vals.iter().position(|v| matches!(v, SqlValue::U64(x) if *x > i64::MAX as u64)) {
        vals.truncate(i + 1);
        vals[i] = SqlValue::U64(i64::MAX as u64);
        inclusive = !lower;
    }
    let op = match (lower, inclusive) {
        (true, true) => ">=",
        (true, false) => ">",
        (false, true) => "<=",
        (false, false) => "<",
    };
    let cols = list("k", vals.len());
    let ph = placeholders(params.len() + 1, vals.len());
    params.extend(vals);
    Some(format!("({cols}) {op} ({ph})"))
}

fn key_of<K: KeyType>(k: &Borrowed<'_, K>) -> Vec<SqlValue> {
    let mut out = Vec::with_capacity(K::PARTS);
    K::to_sql(k, &mut out);
    out
}

fn bound_of<'a, K: KeyType, KR: Borrow<Borrowed<'a, K>>>(b: Bound<&KR>) -> Bound<Vec<SqlValue>> {
    match b {
        Bound::Included(k) => Bound::Included(key_of::<K>(k.borrow())),
        Bound::Excluded(k) => Bound::Excluded(key_of::<K>(k.borrow())),
        Bound::Unbounded => Bound::Unbounded,
    }
}

type Encoded = (Vec<SqlValue>, Vec<u8>, Vec<u8>);

/// A record in redb's encoding: key bytes, value bytes.
type RawPair = (Vec<u8>, Vec<u8>);

impl<'t, K: KeyType, V: ValueType> PgTable<'t, K, V> {
    /// The value columns to select: `v0, v1` (`1` for a kind without value).
    fn value_cols() -> String {
        if V::PARTS == 0 { "1".to_string() } else { list("v", V::PARTS) }
    }

    /// Runs a statement that reads or writes this table by a scan or a key (held-back writes of the table
    /// sent first).
    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>> {
        self.tx.lock().conn_scanning(self.name)?.query(sql, params)
    }

    fn value(row: &Row, from: usize) -> Result<Vec<u8>> {
        V::encode(&columns(row, from, V::PARTS)?)
    }

    /// The rows of one page between `lo` and `hi`, ascending or descending, as (key columns, key, value).
    fn page(&self, lo: &Bound<Vec<SqlValue>>, hi: &Bound<Vec<SqlValue>>, desc: bool, n: usize) -> Result<Vec<Encoded>> {
        let mut params = Vec::new();
        let conds: Vec<String> = [bound_sql(lo.clone(), true, &mut params), bound_sql(hi.clone(), false, &mut params)]
            .into_iter()
            .flatten()
            .collect();
        let dir = if desc { " DESC" } else { "" };
        let order = (0..K::PARTS).map(|i| format!("k{i}{dir}")).collect::<Vec<_>>().join(", ");
        let sql = format!(
            "SELECT {}, {} FROM \"{}\"{}{} ORDER BY {order} LIMIT {n}",
            list("k", K::PARTS),
            Self::value_cols(),
            self.name,
            if conds.is_empty() { "" } else { " WHERE " },
            conds.join(" AND "),
        );
        let rows = self.query(&sql, &params)?;
        rows.iter()
            .map(|r| {
                let key = columns(r, 0, K::PARTS)?;
                let enc = K::encode(&key)?;
                Ok((key, enc, Self::value(r, K::PARTS)?))
            })
            .collect()
    }

    /// The value under `key`, in redb's encoding. A write transaction answers keys it wrote or read before
    /// without a statement.
    pub fn get(&self, key: &Borrowed<'_, K>) -> Result<Option<Vec<u8>>> {
        let cols = key_of::<K>(key);
        let fp = fingerprint(&cols);
        let mut tx = self.tx.lock();
        if !tx.ahead.is_empty() {
            tx.queue_ahead(self.name, vec![cols.clone()]);
            tx.send_ahead()?;
        }
        if let Some(known) = tx.known_value(self.name, &fp) {
            return known.map(|v| V::encode(&v)).transpose();
        }
        let sql = format!("SELECT {} FROM \"{}\" WHERE {}", Self::value_cols(), self.name, key_eq(K::PARTS));
        let rows = tx.conn_point(self.name)?.query(&sql, &cols)?;
        let value = rows.first().map(|r| columns(r, 0, V::PARTS)).transpose()?;
        let out = value.as_ref().map(|v| V::encode(v)).transpose()?;
        tx.remember(self.name, fp, value);
        Ok(out)
    }

    /// The rows of the kind whose first `parts` key columns equal those of one of `keys` (key columns, at least
    /// `parts` of them each), with the index of that key: one statement, the keys travelling as arrays
    /// (`unnest(..) WITH ORDINALITY`) joined to the kind's table. `select` names the columns after the index,
    /// `order` is appended (an `ORDER BY` or nothing).
    fn by_keys(&self, keys: &[Vec<SqlValue>], parts: usize, select: &str, order: &str) -> Result<Vec<(usize, Row)>> {
        Self::by_keys_on(self.tx.lock().conn_scanning(self.name)?, self.name, keys, parts, select, order)
    }

    /// [`PgTable::by_keys`] on `conn`.
    fn by_keys_on(
        conn: &mut Conn,
        name: &str,
        keys: &[Vec<SqlValue>],
        parts: usize,
        select: &str,
        order: &str,
    ) -> Result<Vec<(usize, Row)>> {
        let Some(first) = keys.first() else { return Ok(Vec::new()) };
        let join = (0..parts).map(|i| format!("t.k{i} = q.p{i}")).collect::<Vec<_>>().join(" AND ");
        let sql = format!(
            "SELECT q.i, {select} FROM unnest({}) WITH ORDINALITY AS q({}, i) JOIN \"{}\" t ON {join}{order}",
            array_params(&first[..parts], 1),
            list("p", parts),
            name,
        );
        let trimmed: Vec<Vec<SqlValue>> = keys.iter().map(|k| k[..parts].to_vec()).collect();
        let arrs = arrays(trimmed);
        let refs: Vec<&(dyn ToSql + Sync)> = arrs.iter().map(|c| c.as_ref() as &(dyn ToSql + Sync)).collect();
        let rows = conn.query_typed(&sql, &refs)?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let i = r.try_get::<_, i64>(0).map_err(|e| pg_error("reading a column failed", e))?;
            if let Some(i) = usize::try_from(i - 1).ok().filter(|i| *i < keys.len()) {
                out.push((i, r));
            }
        }
        Ok(out)
    }

    /// The values under each of `keys`, in their order (`None` where nothing is stored), in one statement
    /// joined on the whole primary key. A write transaction answers keys it wrote or read before without one.
    pub fn get_many(&self, keys: &[Borrowed<'_, K>]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = vec![None; keys.len()];
        let mut tx = self.tx.lock();
        if !tx.ahead.is_empty() {
            tx.queue_ahead(self.name, keys.iter().map(key_of::<K>).collect());
            tx.send_ahead()?;
        }
        let mut asked: Vec<(usize, String, Vec<SqlValue>)> = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            let cols = key_of::<K>(k);
            let fp = fingerprint(&cols);
            match tx.known_value(self.name, &fp) {
                Some(known) => out[i] = known.map(|v| V::encode(&v)).transpose()?,
                None => asked.push((i, fp, cols)),
            }
        }
        if asked.is_empty() {
            return Ok(out);
        }
        let params: Vec<Vec<SqlValue>> = asked.iter().map(|a| a.2.clone()).collect();
        let values = if V::PARTS == 0 { "1".to_string() } else { list("t.v", V::PARTS) };
        let rows = Self::by_keys_on(tx.conn_point(self.name)?, self.name, &params, K::PARTS, &values, "")?;
        let mut found: Vec<Option<Vec<SqlValue>>> = vec![None; asked.len()];
        for (j, r) in rows {
            found[j] = Some(columns(&r, 1, V::PARTS)?);
        }
        for ((i, fp, _), value) in asked.into_iter().zip(found) {
            out[i] = value.as_ref().map(|v| V::encode(v)).transpose()?;
            tx.remember(self.name, fp, value);
        }
        Ok(out)
    }

    /// For each of `keys`, the records whose first `parts` key parts equal its own, in key order, in one
    /// statement joined on those parts only.
    pub fn prefix_many(&self, keys: &[Borrowed<'_, K>], parts: usize) -> Result<Vec<Vec<RawPair>>> {
        let parts = parts.clamp(1, K::PARTS);
        let mut out = vec![Vec::new(); keys.len()];
        let params: Vec<Vec<SqlValue>> = keys.iter().map(key_of::<K>).collect();
        let values = if V::PARTS == 0 { "1".to_string() } else { list("t.v", V::PARTS) };
        let order = (0..K::PARTS).map(|i| format!("t.k{i}")).collect::<Vec<_>>().join(", ");
        let select = format!("{}, {values}", list("t.k", K::PARTS));
        for (i, r) in self.by_keys(&params, parts, &select, &format!(" ORDER BY q.i, {order}"))? {
            out[i].push((K::encode(&columns(&r, 1, K::PARTS)?)?, Self::value(&r, 1 + K::PARTS)?));
        }
        Ok(out)
    }

    /// The records in `range`, in key order, fetched in keyset pages.
    pub fn range<'a, KR>(&self, range: impl RangeBounds<KR> + 'a) -> Result<PgRows<'t, K, V>>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a,
    {
        let lo = bound_of::<K, KR>(range.start_bound());
        let hi = bound_of::<K, KR>(range.end_bound());
        Ok(PgRows {
            table: PgTable { tx: self.tx.clone(), name: self.name, side: None, types: PhantomData },
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
            exhausted: false,
        })
    }

    /// The number of records.
    pub fn len(&self) -> Result<u64> {
        let rows = self.query(&format!("SELECT count(*) FROM \"{}\"", self.name), &[])?;
        Ok(rows.first().and_then(|r| r.try_get::<_, i64>(0).ok()).unwrap_or(0).max(0) as u64)
    }

    /// Whether the kind holds no record.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The first or last record.
    pub fn end(&self, last: bool) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.page(&Bound::Unbounded, &Bound::Unbounded, last, 1)?.pop().map(|(_, k, v)| (k, v)))
    }

    /// Stores `value` under `key`, returning the value replaced: [`PgTable::get`], then [`PgTable::put`].
    pub fn insert(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<Option<Vec<u8>>> {
        let old = self.get(key)?;
        self.put(key, value)?;
        Ok(old)
    }

    /// Stores `value` under `key` without reading the value replaced: held back and sent with the
    /// transaction's other held-back writes in one statement, when a scan of this table or the commit comes
    /// (`Pending`). For the `vectors` kind the pgvector row is held back with it.
    pub fn put(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<()> {
        self.hold(key, value, false)
    }

    /// [`PgTable::put`] of a key no stored record has (the caller knows, as for a posting of a document
    /// number its transaction allocated): sent without conflict handling, and by binary `COPY` when a flush
    /// holds at least 1,000 of them for this kind. A key that is stored after all fails that statement,
    /// and so the transaction (PostgreSQL's `unique_violation`): nothing is overwritten.
    pub fn put_new(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<()> {
        self.hold(key, value, true)
    }

    /// Holds back a put; `fresh`: the key is new to the table ([`PgTable::put_new`]).
    fn hold(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>, fresh: bool) -> Result<()> {
        let mut row = key_of::<K>(key);
        V::to_sql(value, &mut row);
        let fp = fingerprint(&row[..K::PARTS]);
        let mut tx = self.tx.lock();
        if tx
            .pending
            .iter()
            .any(|p| p.table == self.name && (p.rows.len() - p.fresh_rows >= PENDING_MAX || p.fresh_rows >= FRESH_MAX))
        {
            tx.flush()?;
        }
        if let (Some(index), [SqlValue::Text(space), SqlValue::U64(docno), SqlValue::Bytes(b)]) =
            (&self.side, row.as_slice())
        {
            let v = crate::storage::codec::vector_from_bytes(b);
            let key = (space.clone(), *docno as i64);
            let side = tx.side.get_or_insert_with(|| SidePending {
                index: index.clone(),
                rows: Vec::new(),
                by_key: HashMap::new(),
            });
            if let Some(&i) = side.by_key.get(&key) {
                side.rows.swap_remove(i);
                side.by_key.remove(&key);
                if let Some(moved) = side.rows.get(i) {
                    side.by_key.insert((moved.0.clone(), moved.1), i);
                }
            }
            if v.is_empty() {
                // No vector: its pgvector row goes (vectors::put deletes for an empty one).
                let conn = tx.conn()?;
                vectors::delete(&mut |sql, p| conn.exec(sql, p), &key.0, key.1)?;
            } else {
                side.by_key.insert(key.clone(), side.rows.len());
                side.rows.push((key.0, key.1, v));
            }
        }
        tx.unremember(self.name, &fp);
        let at = match tx.pending.iter().position(|p| p.table == self.name) {
            Some(i) => i,
            None => {
                let keys = list("k", K::PARTS);
                let cols = if V::PARTS == 0 { keys.clone() } else { format!("{keys}, {}", list("v", V::PARTS)) };
                let on_conflict = if V::PARTS == 0 {
                    "DO NOTHING".to_string()
                } else {
                    let set: Vec<String> = (0..V::PARTS).map(|i| format!("v{i} = EXCLUDED.v{i}")).collect();
                    format!("DO UPDATE SET {}", set.join(", "))
                };
                tx.pending.push(Pending {
                    table: self.name,
                    head: format!("INSERT INTO \"{}\" ({cols}) SELECT * FROM unnest(", self.name),
                    tail: format!(") ON CONFLICT ({keys}) {on_conflict}"),
                    cols,
                    parts: K::PARTS,
                    rows: Vec::new(),
                    fresh: Vec::new(),
                    fresh_rows: 0,
                    by_key: HashMap::new(),
                });
                tx.pending.len() - 1
            }
        };
        let p = &mut tx.pending[at];
        match p.by_key.get(&fp) {
            // The held-back row is replaced; it keeps its kind: a row new to the table stays new (none was
            // sent), one that may replace a stored record keeps its conflict handling.
            Some(&i) => p.rows[i] = row,
            None => {
                p.by_key.insert(fp, p.rows.len());
                p.rows.push(row);
                p.fresh.push(fresh);
                p.fresh_rows += usize::from(fresh);
            }
        }
        Ok(())
    }

    /// Deletes every record of the kind in one statement (and, for `vectors`, every pgvector row).
    pub fn clear(&mut self) -> Result<()> {
        let mut tx = self.tx.lock();
        tx.forget(self.name);
        let conn = tx.conn()?;
        conn.query(&format!("DELETE FROM \"{}\"", self.name), &[])?;
        if self.side.is_some() {
            conn.query("DELETE FROM engram_vectors", &[])?;
        }
        Ok(())
    }

    /// Deletes the side row (pgvector) of a `vectors` key.
    fn delete_side(&self, key: &[SqlValue]) -> Result<()> {
        if let (Some(_), [SqlValue::Text(space), SqlValue::U64(docno)]) = (&self.side, key) {
            let mut tx = self.tx.lock();
            let conn = tx.conn()?;
            vectors::delete(&mut |sql, p| conn.exec(sql, p), space, *docno as i64)?;
        }
        Ok(())
    }

    /// Deletes the record under `key`, returning its value.
    pub fn remove(&mut self, key: &Borrowed<'_, K>) -> Result<Option<Vec<u8>>> {
        let sql = format!("DELETE FROM \"{}\" WHERE {} RETURNING {}", self.name, key_eq(K::PARTS), Self::value_cols());
        let key = key_of::<K>(key);
        self.delete_side(&key)?;
        let old = match self.query(&sql, &key)?.first() {
            Some(r) => Some(Self::value(r, 0)?),
            None => None,
        };
        self.tx.lock().remember(self.name, fingerprint(&key), None);
        Ok(old)
    }

    /// Deletes the records in `range` for which `keep` is false.
    pub fn retain_in<'a, KR, F: for<'f> FnMut(Borrowed<'f, K>, Borrowed<'f, V>) -> bool>(
        &mut self,
        range: impl RangeBounds<KR> + 'a,
        mut keep: F,
    ) -> Result<()>
    where
        KR: Borrow<Borrowed<'a, K>> + 'a,
    {
        let mut lo = bound_of::<K, KR>(range.start_bound());
        let hi = bound_of::<K, KR>(range.end_bound());
        let sql = format!("DELETE FROM \"{}\" WHERE {}", self.name, key_eq(K::PARTS));
        self.tx.lock().forget(self.name);
        loop {
            let page = self.page(&lo, &hi, false, PAGE)?;
            let full = page.len() == PAGE;
            for (cols, k, v) in &page {
                if !keep(decode::<K>(k), decode::<V>(v)) {
                    self.query(&sql, cols)?;
                    self.delete_side(cols)?;
                }
            }
            match page.into_iter().last() {
                Some((cols, _, _)) if full => lo = Bound::Excluded(cols),
                _ => return Ok(()),
            }
        }
    }
}

/// Records in key order from a [`PgTable`], fetched a page at a time from either end: the next page from the
/// front starts after the last key fetched at the front, the next from the back before the last fetched at the
/// back, so the two ends never hand out one record twice.
pub struct PgRows<'a, K, V> {
    table: PgTable<'a, K, V>,
    lo: Bound<Vec<SqlValue>>,
    hi: Bound<Vec<SqlValue>>,
    front: VecDeque<(Vec<u8>, Vec<u8>)>,
    back: VecDeque<(Vec<u8>, Vec<u8>)>,
    exhausted: bool,
}

type Item<'a, K, V> = Result<(crate::storage::Got<'a, K>, crate::storage::Got<'a, V>)>;

impl<'a, K: KeyType, V: ValueType> PgRows<'a, K, V> {
    fn fill(&mut self, desc: bool) -> Result<()> {
        let page = self.table.page(&self.lo, &self.hi, desc, PAGE)?;
        if page.len() < PAGE {
            self.exhausted = true;
        }
        if let Some((cols, _, _)) = page.last() {
            if desc {
                self.hi = Bound::Excluded(cols.clone());
            } else {
                self.lo = Bound::Excluded(cols.clone());
            }
        }
        let buf = if desc { &mut self.back } else { &mut self.front };
        buf.extend(page.into_iter().map(|(_, k, v)| (k, v)));
        Ok(())
    }

    fn take(&mut self, desc: bool) -> Option<Item<'a, K, V>> {
        let own = if desc { &self.back } else { &self.front };
        if own.is_empty()
            && !self.exhausted
            && let Err(e) = self.fill(desc)
        {
            self.exhausted = true;
            return Some(Err(e));
        }
        let got = if desc {
            self.back.pop_front().or_else(|| self.front.pop_back())
        } else {
            self.front.pop_front().or_else(|| self.back.pop_back())
        };
        got.map(|(k, v)| Ok((crate::storage::Got::owned(k), crate::storage::Got::owned(v))))
    }
}

impl<'a, K: KeyType, V: ValueType> Iterator for PgRows<'a, K, V> {
    type Item = Item<'a, K, V>;
    fn next(&mut self) -> Option<Self::Item> {
        self.take(false)
    }
}

impl<K: KeyType, V: ValueType> DoubleEndedIterator for PgRows<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.take(true)
    }
}
