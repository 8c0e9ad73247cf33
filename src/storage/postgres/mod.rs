//! The PostgreSQL backend of the storage port (feature `postgres`; issue 19, in progress). So far: the schema,
//! one table per record kind ([`crate::storage::tables::ALL`]), created and versioned by [`migrate`]. The
//! transactions, the candidate primitives in SQL (BM25 over the postings table, pgvector) and the multi-daemon
//! rules of the scale-out design follow.
//!
//! Each kind's table has one column per key part (`k0`, `k1`, ...: the primary key, `space_id` first wherever
//! the kind belongs to a space) and one per value part (`v0`, ...), typed by [`crate::storage::Columns`].

pub use postgres::{Client, Config, NoTls};

use crate::error::{Error, ErrorKind, Result};
use crate::storage::KindInfo;
use crate::storage::tables::ALL;

/// Version of the PostgreSQL schema this build creates and reads.
pub const SCHEMA_VERSION: i32 = 1;

fn db_error(what: &str, e: postgres::Error) -> Error {
    Error::new(ErrorKind::Io, format!("{what}: {e}")).with_source(e)
}

/// Connects to `url` (`postgres://user@host/db`, or key-value form `host=/run/postgresql user=engram dbname=x`).
///
/// # Errors
/// [`ErrorKind::Io`] naming what failed: an unreachable server, a refused login, an unknown database.
pub fn connect(url: &str) -> Result<Client> {
    Client::connect(url, postgres::NoTls).map_err(|e| db_error("connecting to PostgreSQL failed", e))
}

/// The `CREATE TABLE IF NOT EXISTS` statement of one kind's table.
pub fn create_table_sql(k: &KindInfo) -> String {
    let mut cols: Vec<String> = k.key.iter().enumerate().map(|(i, t)| format!("k{i} {t} NOT NULL")).collect();
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
    let mut tx = client.transaction().map_err(|e| db_error("starting the schema transaction failed", e))?;
    // One migration at a time, whichever daemon gets there first.
    tx.batch_execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('engram:schema', 0));
         CREATE TABLE IF NOT EXISTS engram_schema (version integer NOT NULL)",
    )
    .map_err(|e| db_error("locking the schema failed", e))?;
    let found: i32 = tx
        .query_opt("SELECT max(version) FROM engram_schema", &[])
        .map_err(|e| db_error("reading the schema version failed", e))?
        .and_then(|r| r.get::<_, Option<i32>>(0))
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("the database holds Engram schema {found}; this build reads {SCHEMA_VERSION} and older"),
        ));
    }
    for k in ALL {
        tx.batch_execute(&create_table_sql(k)).map_err(|e| db_error(&format!("creating table {}", k.name), e))?;
    }
    if found < SCHEMA_VERSION {
        tx.execute("DELETE FROM engram_schema", &[]).map_err(|e| db_error("recording the schema version", e))?;
        tx.execute("INSERT INTO engram_schema (version) VALUES ($1)", &[&SCHEMA_VERSION])
            .map_err(|e| db_error("recording the schema version", e))?;
    }
    tx.commit().map_err(|e| db_error("committing the schema failed", e))?;
    Ok(found)
}
