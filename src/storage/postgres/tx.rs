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
/// `unnest($1::text[], ..)`.
fn arrays(rows: &[Vec<SqlValue>]) -> Vec<Box<dyn ToSql + Sync>> {
    let n = rows.first().map_or(0, Vec::len);
    let mut columns: Vec<Box<dyn ToSql + Sync>> = Vec::with_capacity(n);
    for c in 0..n {
        let column: Box<dyn ToSql + Sync> = match &rows[0][c] {
            SqlValue::Text(_) => Box::new(
                rows.iter()
                    .map(|r| if let SqlValue::Text(t) = &r[c] { t.clone() } else { String::new() })
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
                rows.iter()
                    .map(|r| if let SqlValue::Bytes(b) = &r[c] { b.clone() } else { Vec::new() })
                    .collect::<Vec<_>>(),
            ),
        };
        columns.push(column);
    }
    columns
}

/// The SQL array type of each column of `row`: `$1::text[], $2::int8[]`.
fn array_params(row: &[SqlValue]) -> String {
    row.iter()
        .enumerate()
        .map(|(i, v)| {
            let t = match v {
                SqlValue::Text(_) => "text",
                SqlValue::U64(_) => "int8",
                SqlValue::Float(_) => "float8",
                SqlValue::Bytes(_) => "bytea",
            };
            format!("${}::{t}[]", i + 1)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A transaction's connection: `open` until committed or rolled back (on drop).
pub struct TxConn {
    conn: r2d2::PooledConnection<PgManager>,
    open: bool,
    /// Records stored with [`PgTable::put`] and not yet sent.
    pending: Option<Pending>,
}

/// Rows most held back before a flush.
const PENDING_MAX: usize = 1000;

/// Writes of one table held back by [`PgTable::put`] until the transaction next talks to the server: then one
/// `INSERT .. SELECT * FROM unnest($1::t[], ..) ON CONFLICT .. DO UPDATE` sends them all (one round trip
/// instead of one per record). A later put of the same key replaces the earlier (one statement may not update
/// a row twice).
struct Pending {
    table: &'static str,
    /// The statement, made from the first row's column types.
    sql: String,
    rows: Vec<Vec<SqlValue>>,
    /// Row index by key (the key columns' debug form).
    by_key: HashMap<String, usize>,
}

impl TxConn {
    /// Sends the held-back writes, if any.
    fn flush(&mut self) -> Result<()> {
        let Some(p) = self.pending.take() else { return Ok(()) };
        let columns = arrays(&p.rows);
        let refs: Vec<&(dyn ToSql + Sync)> = columns.iter().map(|c| c.as_ref() as &(dyn ToSql + Sync)).collect();
        self.conn.exec(&p.sql, &refs).map(|_| ()).map_err(|e| pg_error(&format!("writing to {} failed", p.table), e))
    }

    /// The connection, after sending the held-back writes: every statement goes through here, so a read sees
    /// the transaction's own puts.
    fn conn(&mut self) -> Result<&mut Conn> {
        self.flush()?;
        Ok(&mut self.conn)
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
        let mut tx = TxConn { conn, open: false, pending: None };
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

    /// Appends `body` to the change feed in this (write) transaction (`feed.rs`).
    ///
    /// # Errors
    /// Database errors.
    pub fn publish(&self, body: &[u8]) -> Result<()> {
        self.0
            .lock()
            .conn()?
            .exec(super::feed::PUBLISH, &[&body])
            .map(|_| ())
            .map_err(|e| pg_error("writing the change feed failed", e))
    }

    /// The last change-feed `seq` committed as of this transaction's snapshot.
    ///
    /// # Errors
    /// Database errors.
    pub fn change_head(&self) -> Result<u64> {
        let rows = self.0.lock().conn()?.query(super::feed::HEAD, &[])?;
        Ok(rows.first().and_then(|r| r.try_get::<_, i64>(0).ok()).unwrap_or(0).max(0) as u64)
    }

    /// Commits.
    ///
    /// # Errors
    /// Database errors; nothing is written then.
    pub fn commit(self) -> Result<()> {
        let mut tx = self.0.lock();
        tx.flush()?;
        tx.open = false;
        sent(1);
        tx.conn.client.batch_execute("COMMIT").map_err(|e| pg_error("commit failed", e))
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
        let sql = "WITH q AS (SELECT t.term, t.qtf FROM unnest($2::text[], $3::int[]) AS t(term, qtf)),
             st AS (SELECT greatest(coalesce(max(v0), 0), 1)::float8 AS n,
                           CASE WHEN coalesce(max(v0), 0) = 0 OR max(v1) = 0 THEN 1.0
                                ELSE max(v1)::float8 / max(v0) END AS avgdl
                    FROM lex_stats WHERE k0 = $1),
             p AS (SELECT q.term, q.qtf, po.k2 AS docno, (po.v0 >> 32)::float8 AS tf,
                          (po.v0 & 4294967295)::float8 AS dl
                   FROM q JOIN postings po ON po.k0 = $1 AND po.k1 = q.term),
             df AS (SELECT term, count(*)::float8 AS df FROM p GROUP BY term)
             SELECT p.docno,
                    sum(ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * p.tf * ($4::float8 + 1)
                        / (p.tf + $4::float8 * (1 - $5::float8 + $5::float8 * p.dl / st.avgdl)) * p.qtf) AS score
             FROM p JOIN df USING (term) CROSS JOIN st
             GROUP BY p.docno ORDER BY score DESC, p.docno LIMIT $6";
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

    fn query(&self, sql: &str, params: &[SqlValue]) -> Result<Vec<Row>> {
        self.tx.lock().conn()?.query(sql, params)
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

    /// The value under `key`, in redb's encoding.
    pub fn get(&self, key: &Borrowed<'_, K>) -> Result<Option<Vec<u8>>> {
        let sql = format!("SELECT {} FROM \"{}\" WHERE {}", Self::value_cols(), self.name, key_eq(K::PARTS));
        match self.query(&sql, &key_of::<K>(key))?.first() {
            Some(r) => Ok(Some(Self::value(r, 0)?)),
            None => Ok(None),
        }
    }

    /// The rows of the kind whose first `parts` key columns equal those of one of `keys` (key columns, at least
    /// `parts` of them each), with the index of that key: one statement, the keys travelling as arrays
    /// (`unnest(..) WITH ORDINALITY`) joined to the kind's table. `select` names the columns after the index,
    /// `order` is appended (an `ORDER BY` or nothing).
    fn by_keys(&self, keys: &[Vec<SqlValue>], parts: usize, select: &str, order: &str) -> Result<Vec<(usize, Row)>> {
        let Some(first) = keys.first() else { return Ok(Vec::new()) };
        let join = (0..parts).map(|i| format!("t.k{i} = q.p{i}")).collect::<Vec<_>>().join(" AND ");
        let sql = format!(
            "SELECT q.i, {select} FROM unnest({}) WITH ORDINALITY AS q({}, i) JOIN \"{}\" t ON {join}{order}",
            array_params(&first[..parts]),
            list("p", parts),
            self.name,
        );
        let trimmed: Vec<Vec<SqlValue>> = keys.iter().map(|k| k[..parts].to_vec()).collect();
        let arrs = arrays(&trimmed);
        let refs: Vec<&(dyn ToSql + Sync)> = arrs.iter().map(|c| c.as_ref() as &(dyn ToSql + Sync)).collect();
        let rows = self.tx.lock().conn()?.query_typed(&sql, &refs)?;
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
    /// joined on the whole primary key.
    pub fn get_many(&self, keys: &[Borrowed<'_, K>]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = vec![None; keys.len()];
        let params: Vec<Vec<SqlValue>> = keys.iter().map(key_of::<K>).collect();
        let values = if V::PARTS == 0 { "1".to_string() } else { list("t.v", V::PARTS) };
        for (i, r) in self.by_keys(&params, K::PARTS, &values, "")? {
            out[i] = Some(Self::value(&r, 1)?);
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

    /// Stores `value` under `key`, returning the value replaced.
    pub fn insert(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<Option<Vec<u8>>> {
        let mut params = key_of::<K>(key);
        V::to_sql(value, &mut params);
        let keys = list("k", K::PARTS);
        let on_conflict = if V::PARTS == 0 {
            "DO NOTHING".to_string()
        } else {
            let set: Vec<String> = (0..V::PARTS).map(|i| format!("v{i} = EXCLUDED.v{i}")).collect();
            format!("DO UPDATE SET {}", set.join(", "))
        };
        let cols = if V::PARTS == 0 { keys.clone() } else { format!("{keys}, {}", list("v", V::PARTS)) };
        let sql = format!(
            "WITH old AS (SELECT {} FROM \"{n}\" WHERE {}), \
             ins AS (INSERT INTO \"{n}\" ({cols}) VALUES ({}) ON CONFLICT ({keys}) {on_conflict}) \
             SELECT * FROM old",
            Self::value_cols(),
            key_eq(K::PARTS),
            placeholders(1, K::PARTS + V::PARTS),
            n = self.name,
        );
        let old = match self.query(&sql, &params)?.first() {
            Some(r) => Some(Self::value(r, 0)?),
            None => None,
        };
        if let (Some(index), [SqlValue::Text(space), SqlValue::U64(docno), SqlValue::Bytes(b)]) =
            (&self.side, params.as_slice())
        {
            let v = crate::storage::codec::vector_from_bytes(b);
            let mut tx = self.tx.lock();
            let conn = tx.conn()?;
            vectors::put(&mut |sql, p| conn.exec(sql, p), index, space, *docno as i64, &v)?;
        }
        Ok(old)
    }

    /// Stores `value` under `key` without reading the value replaced: held back and sent with the next puts of
    /// this table in one statement, before anything else runs on the transaction. The `vectors` kind (which also
    /// writes pgvector's table) is written at once.
    pub fn put(&mut self, key: &Borrowed<'_, K>, value: &Borrowed<'_, V>) -> Result<()> {
        if self.side.is_some() {
            return self.insert(key, value).map(|_| ());
        }
        let mut row = key_of::<K>(key);
        V::to_sql(value, &mut row);
        let fingerprint = format!("{:?}", &row[..K::PARTS]);
        let mut tx = self.tx.lock();
        if tx.pending.as_ref().is_some_and(|p| p.table != self.name || p.rows.len() >= PENDING_MAX) {
            tx.flush()?;
        }
        let p = tx.pending.get_or_insert_with(|| {
            let keys = list("k", K::PARTS);
            let cols = if V::PARTS == 0 { keys.clone() } else { format!("{keys}, {}", list("v", V::PARTS)) };
            let on_conflict = if V::PARTS == 0 {
                "DO NOTHING".to_string()
            } else {
                let set: Vec<String> = (0..V::PARTS).map(|i| format!("v{i} = EXCLUDED.v{i}")).collect();
                format!("DO UPDATE SET {}", set.join(", "))
            };
            Pending {
                table: self.name,
                sql: format!(
                    "INSERT INTO \"{}\" ({cols}) SELECT * FROM unnest({}) ON CONFLICT ({keys}) {on_conflict}",
                    self.name,
                    array_params(&row)
                ),
                rows: Vec::new(),
                by_key: HashMap::new(),
            }
        });
        match p.by_key.get(&fingerprint) {
            Some(&i) => p.rows[i] = row,
            None => {
                p.by_key.insert(fingerprint, p.rows.len());
                p.rows.push(row);
            }
        }
        Ok(())
    }

    /// Deletes every record of the kind in one statement (and, for `vectors`, every pgvector row).
    pub fn clear(&mut self) -> Result<()> {
        let mut tx = self.tx.lock();
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
        match self.query(&sql, &key)?.first() {
            Some(r) => Ok(Some(Self::value(r, 0)?)),
            None => Ok(None),
        }
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
