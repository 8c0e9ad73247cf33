//! The PostgreSQL backend of the storage port (feature `postgres`; the scale-out design). The schema is one
//! table per record kind ([`crate::storage::tables::ALL`]), created and versioned by [`migrate`]; the port's
//! transactions and tables are in `tx.rs` ([`PgDb`]: a pool of connections, one per open transaction).
//!
//! Each kind's table has one column per key part (`k0`, `k1`, ...: the primary key, `space_id` first wherever
//! the kind belongs to a space) and one per value part (`v0`, ...), typed by [`crate::storage::Columns`]. Text
//! key columns use the `"C"` collation, so keys order by bytes as in redb and a prefix scan is one index range.
//! The tables live in the connection's current schema: several stores share a database by connecting with
//! another `search_path` (`options=-csearch_path=team_a` in the URL).

mod feed;
mod publish;
mod tx;
mod vectors;

use std::time::Duration;

pub use postgres::{Client, Config, NoTls};
pub use tx::{PgRows, PgTable, PgTx, statements_sent};

use crate::error::{Error, ErrorKind, Result};
use crate::storage::tables::ALL;
use crate::storage::{Durability, KindInfo};

/// Version of the PostgreSQL schema this build creates and reads. History: 1, the first; 2, the search catalog
/// (`catalog`, kept by every write: a build of schema 1 would write without keeping it, so it is refused) and
/// its index by sequence position.
pub const SCHEMA_VERSION: i32 = 2;

/// The catalog's index of the memories with an expiry time (flag 4), for the expiry sweep of a daemon in the
/// database index mode.
const CATALOG_EXPIRING_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS catalog_expiring ON catalog (k0, k1) WHERE v0 & 4 <> 0";

/// The catalog's index by sequence position, for a memory's neighbours in its thread or source: `(space, group,
/// ordinal, docno)` of the memories that take part in a sequence.
const CATALOG_SEQUENCE_INDEX: &str = "CREATE INDEX IF NOT EXISTS catalog_sequence ON catalog (k0, v1, v2, k1) \
                                      WHERE v1 <> ''";

/// A database error as Engram's: a lost or unreachable server is [`ErrorKind::Unreachable`] (503, retryable);
/// text the database cannot hold (U+0000 in a key such as a message's `external_id`) is
/// [`ErrorKind::InvalidInput`] at the input's root (`["body"]` over HTTP); anything else [`ErrorKind::Io`] with the server's message.
pub(crate) fn pg_error(what: &str, e: postgres::Error) -> Error {
    // PostgreSQL's text cannot hold U+0000, which redb's keys can: the caller's text, refused, nothing stored.
    if e.code().is_some_and(|c| matches!(c.code(), "22021" | "22P05")) {
        return Error::invalid_value(
            &[],
            "value_error",
            "text with a NUL character (U+0000) cannot be stored in this store's database",
            serde_json::Value::Null,
        );
    }
    let io = std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
    let lost = e.is_closed()
        || io
        || e.code().is_some_and(|c| {
            // Class 08 (connection exception), 57P01..57P03 (admin shutdown, crash shutdown, cannot connect now).
            c.code().starts_with("08") || matches!(c.code(), "57P01" | "57P02" | "57P03")
        });
    let kind = if lost { ErrorKind::Unreachable } else { ErrorKind::Io };
    let detail = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    };
    Error::new(kind, format!("{what}: {detail}")).with_source(e)
}

fn parse_url(url: &str) -> Result<Config> {
    url.parse().map_err(|e: postgres::Error| {
        Error::new(ErrorKind::InvalidInput, format!("the database URL does not parse: {e}"))
    })
}

/// Connects to `url` (`postgres://user@host/db`, or key-value form `host=/run/postgresql user=engram dbname=x`).
///
/// # Errors
/// [`ErrorKind::InvalidInput`] for a URL that does not parse; [`ErrorKind::Unreachable`] naming what failed:
/// an unreachable server, a refused login, an unknown database.
pub fn connect(url: &str) -> Result<Client> {
    parse_url(url)?.connect(NoTls).map_err(|e| {
        let detail = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        };
        Error::new(ErrorKind::Unreachable, format!("connecting to PostgreSQL failed: {detail}")).with_source(e)
    })
}

/// The pool's connection manager (r2d2): connects with the store's URL and drops connections the server
/// closed. Connections are not pinged when taken from the pool (see `PgDb::begin`).
pub struct PgManager {
    config: Config,
}

impl r2d2::ManageConnection for PgManager {
    type Connection = tx::Conn;
    type Error = postgres::Error;

    fn connect(&self) -> std::result::Result<tx::Conn, postgres::Error> {
        self.config.connect(NoTls).map(tx::Conn::new)
    }

    fn is_valid(&self, conn: &mut tx::Conn) -> std::result::Result<(), postgres::Error> {
        conn.client.simple_query("").map(|_| ())
    }

    fn has_broken(&self, conn: &mut tx::Conn) -> bool {
        conn.client.is_closed()
    }
}

/// A store's PostgreSQL database: a pool of connections (r2d2), one per open transaction. Any number of
/// processes may open the same store: writers take turns under an advisory lock, and each process keeps its
/// in-memory indexes current from the change feed (`feed.rs`).
pub struct PgDb {
    pool: r2d2::Pool<PgManager>,
    /// pgvector beside the vectors kind, where the server has 0.8.0+ (`vectors.rs`).
    vectors: Option<std::sync::Arc<vectors::VectorIndex>>,
}

/// A claim on one piece of background work ([`PgDb::claim`]): a transaction-level advisory lock in a transaction
/// kept open on a pooled connection (so PgBouncer in transaction mode keeps it on one server session), released
/// when dropped (`ROLLBACK`) or by the server when the process dies.
pub struct PgClaim {
    conn: r2d2::PooledConnection<PgManager>,
}

impl Drop for PgClaim {
    fn drop(&mut self) {
        // A connection that fails here lost its session, and the lock with it.
        let _ = self.conn.client.batch_execute("ROLLBACK");
    }
}

impl PgDb {
    /// Connects to `url`, creates or migrates the schema ([`migrate`]) and opens a pool of at most `pool_size`
    /// connections, made as needed; a transaction waits at most 5 s for one, then fails with
    /// [`ErrorKind::Unreachable`].
    ///
    /// # Errors
    /// See [`connect`] and [`migrate`].
    pub fn connect(url: &str, pool_size: u32) -> Result<PgDb> {
        let mut client = connect(url)?;
        migrate(&mut client)?;
        let vectors = vectors::setup(&mut client)?.map(std::sync::Arc::new);
        drop(client);
        let config = parse_url(url)?;
        let pool = r2d2::Pool::builder()
            .max_size(pool_size.max(1))
            .min_idle(Some(0))
            .connection_timeout(Duration::from_secs(5))
            // No ping per checkout (a round trip per transaction): a transaction whose BEGIN finds the
            // connection closed takes another (`PgDb::begin`).
            .test_on_check_out(false)
            .build_unchecked(PgManager { config });
        Ok(PgDb { pool, vectors })
    }

    /// Claims the background work named `name` for this process, unless another process holds it:
    /// `pg_try_advisory_xact_lock` on `engram:<name>:<schema>` in a transaction held open until the claim is
    /// dropped.
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`] when no connection can be had.
    pub fn claim(&self, name: &str) -> Result<Option<PgClaim>> {
        let mut conn = self.conn()?;
        conn.client.batch_execute("BEGIN").map_err(|e| pg_error("claiming background work failed", e))?;
        // From here on, dropping the claim ends the transaction, whatever happens.
        let mut claim = PgClaim { conn };
        let key = format!("engram:{name}:");
        let got: bool = claim
            .conn
            .client
            .query_one("SELECT pg_try_advisory_xact_lock(hashtextextended($1 || current_schema(), 0))", &[&key])
            .and_then(|r| r.try_get(0))
            .map_err(|e| pg_error("claiming background work failed", e))?;
        Ok(got.then_some(claim))
    }

    /// The change feed's rows after `after`, oldest first, at most `limit`, with the highest pruned `seq`
    /// (see `feed.rs`).
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`] and other database errors.
    pub fn changes_since(&self, after: u64, limit: usize) -> Result<crate::storage::Changes> {
        feed::since(&mut self.conn()?.client, after, limit)
    }

    /// Deletes change-feed rows older than ten minutes. Returns how many.
    ///
    /// # Errors
    /// Database errors.
    pub fn prune_changes(&self) -> Result<u64> {
        feed::prune(&mut self.conn()?.client)
    }

    /// Replaces the published index snapshot with `files` (`(name relative to the data directory, path)`) at
    /// change-feed `position` (see `publish.rs`). Returns the bytes written.
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`], other database errors and I/O errors reading the files; the publication
    /// before stays then.
    pub fn publish(&self, position: u64, files: &[(String, std::path::PathBuf)]) -> Result<u64> {
        publish::publish(&mut self.conn()?.client, position, files)
    }

    /// The published index snapshot's position, age and size, if one is published.
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`] and other database errors.
    pub fn publication(&self) -> Result<Option<crate::storage::Publication>> {
        publish::publication(&mut self.conn()?.client)
    }

    /// Downloads the published files that `place` maps to a path (see `publish.rs`): their position and the
    /// paths written, or `None` without a publication.
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`], other database errors and I/O errors; no partial file is left.
    pub fn fetch_publication(
        &self,
        place: &dyn Fn(&str) -> Option<std::path::PathBuf>,
    ) -> Result<Option<(u64, Vec<std::path::PathBuf>)>> {
        publish::fetch(&mut self.conn()?.client, place)
    }

    fn conn(&self) -> Result<r2d2::PooledConnection<PgManager>> {
        let asked = std::time::Instant::now();
        let c = self.pool.get();
        crate::metrics::global().pg_pool_wait.observe(asked.elapsed().as_secs_f64());
        c.map_err(|e| Error::new(ErrorKind::Unreachable, format!("no database connection: {e}")))
    }

    /// Drops the pgvector HNSW indexes for a bulk load (`vectors::defer`); 0 without pgvector.
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`] and other database errors.
    pub fn defer_vector_index(&self) -> Result<usize> {
        match &self.vectors {
            Some(index) => vectors::defer(&mut self.conn()?.client, index),
            None => Ok(0),
        }
    }

    /// Builds the pgvector HNSW indexes after a bulk load (`vectors::build`); `None` without pgvector.
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`] and other database errors.
    pub fn build_vector_index(&self) -> Result<Option<vectors::IndexBuild>> {
        match &self.vectors {
            Some(index) => vectors::build(&mut self.conn()?.client, index).map(Some),
            None => Ok(None),
        }
    }

    /// Bytes of every relation (tables, TOAST, indexes) in the connection's current schema.
    ///
    /// # Errors
    /// Database errors.
    pub fn size_bytes(&self) -> Result<u64> {
        let mut conn = self.conn()?;
        let row = conn
            .client
            .query_one(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
                 JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = current_schema() AND c.relkind = 'r'",
                &[],
            )
            .map_err(|e| pg_error("measuring the database failed", e))?;
        Ok(row.try_get::<_, i64>(0).unwrap_or(0).max(0) as u64)
    }

    /// A read transaction (`REPEATABLE READ READ ONLY`).
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`] when no connection can be had.
    pub fn read(&self) -> Result<PgTx> {
        self.begin(None)
    }

    /// A write transaction, after every other writer of the store (advisory lock).
    ///
    /// # Errors
    /// [`ErrorKind::Unreachable`] when no connection can be had.
    pub fn write(&self, durability: Durability) -> Result<PgTx> {
        self.begin(Some(durability))
    }

    /// Begins a transaction on a pooled connection. A connection the server closed since it was last used (a
    /// restart, an idle timeout) fails at `BEGIN`, before anything is done: it is dropped and another taken,
    /// up to the pool's size, so a database that came back serves the next request.
    fn begin(&self, write: Option<Durability>) -> Result<PgTx> {
        let mut attempts = self.pool.max_size().max(1) + 1;
        loop {
            match PgTx::begin(self.conn()?, write, self.vectors.clone()) {
                Err(e) if e.kind() == ErrorKind::Unreachable && attempts > 1 => attempts -= 1,
                other => return other,
            }
        }
    }
}

/// The `CREATE TABLE IF NOT EXISTS` statement of one kind's table.
pub fn create_table_sql(k: &KindInfo) -> String {
    let collate = |t: &str| if t == "text" { " COLLATE \"C\"" } else { "" };
    let mut cols: Vec<String> =
        k.key.iter().enumerate().map(|(i, t)| format!("k{i} {t}{} NOT NULL", collate(t))).collect();
    cols.extend(k.value.iter().enumerate().map(|(i, t)| format!("v{i} {t} NOT NULL")));
    let key: Vec<String> = (0..k.key.len()).map(|i| format!("k{i}")).collect();
    format!("CREATE TABLE IF NOT EXISTS \"{}\" ({}, PRIMARY KEY ({}))", k.name, cols.join(", "), key.join(", "))
}

/// Creates the table of every record kind and records [`SCHEMA_VERSION`], in one transaction; running it again
/// changes nothing. Returns the schema version found before (0 for an empty database).
///
/// # Errors
/// [`ErrorKind::Corrupt`] when the database holds a newer schema than this build;
/// [`ErrorKind::Io`] for database errors (nothing is changed then).
pub fn migrate(client: &mut Client) -> Result<i32> {
    let mut tx = client.transaction().map_err(|e| pg_error("starting the schema transaction failed", e))?;
    // One migration at a time, whichever daemon gets there first.
    // `IF NOT EXISTS` notices on every open are noise.
    tx.batch_execute(
        "SET LOCAL client_min_messages = warning;
         SELECT pg_advisory_xact_lock(hashtextextended('engram:schema', 0));
         CREATE TABLE IF NOT EXISTS engram_schema (version integer NOT NULL)",
    )
    .map_err(|e| pg_error("locking the schema failed", e))?;
    let found: i32 = tx
        .query_opt("SELECT max(version) FROM engram_schema", &[])
        .map_err(|e| pg_error("reading the schema version failed", e))?
        .and_then(|r| r.get::<_, Option<i32>>(0))
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("the database holds Engram schema {found}; this build reads {SCHEMA_VERSION} and older"),
        ));
    }
    tx.batch_execute(feed::CREATE).map_err(|e| pg_error("creating the change feed", e))?;
    feed::compress_with_lz4(&mut tx)?;
    tx.batch_execute(publish::CREATE).map_err(|e| pg_error("creating the publication tables", e))?;
    for k in ALL {
        tx.batch_execute(&create_table_sql(k)).map_err(|e| pg_error(&format!("creating table {}", k.name), e))?;
    }
    tx.batch_execute(CATALOG_SEQUENCE_INDEX).map_err(|e| pg_error("creating the catalog's sequence index", e))?;
    tx.batch_execute(CATALOG_EXPIRING_INDEX).map_err(|e| pg_error("creating the catalog's expiry index", e))?;
    if found < SCHEMA_VERSION {
        tx.execute("DELETE FROM engram_schema", &[]).map_err(|e| pg_error("recording the schema version", e))?;
        tx.execute("INSERT INTO engram_schema (version) VALUES ($1)", &[&SCHEMA_VERSION])
            .map_err(|e| pg_error("recording the schema version", e))?;
    }
    tx.commit().map_err(|e| pg_error("committing the schema failed", e))?;
    Ok(found)
}
