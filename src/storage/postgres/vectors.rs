//! Vectors in pgvector beside the `vectors` kind (scale-out design §5.2, §5.3): `engram_vectors (k0 space,
//! k1 docno, dim, emb vector)`, written in the same transaction as every write of the kind, with one partial HNSW
//! index per dimension (`(emb::vector(d)) vector_cosine_ops WHERE dim = d`: a new embedder of another dimension
//! gets its own index beside the old one). Vector candidates come from that index with an iterative scan, so a
//! search filtered to one space still returns k hits (pgvector 0.8.0+; `tests/postgres_schema.rs` measures the
//! plain scan starving under such a filter).
//!
//! Only where the server has pgvector 0.8.0 or later; elsewhere the backend keeps the `vectors` kind alone and
//! vector candidates scan it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use postgres::Client;
use postgres::types::ToSql;

use super::pg_error;
use crate::error::Result;

/// HNSW search breadth for vector candidates (pgvector's `hnsw.ef_search`; Engram's own index uses 96).
const EF_SEARCH: usize = 96;

/// pgvector in this database: the schema the extension lives in (its type and operators are named through it,
/// so stores in other schemas of the database share one installation), and the dimensions whose partial index
/// this process has made sure of.
#[derive(Debug)]
pub struct VectorIndex {
    /// The extension's schema, quoted as an identifier.
    pub(super) ext: String,
    indexed: Mutex<HashSet<usize>>,
    /// While a bulk load runs ([`defer`]): vectors are written without making sure of their dimension's index.
    deferred: AtomicBool,
    /// This process's row in `engram_bulk_loads` while its bulk load runs.
    bulk_load: Mutex<Option<uuid::Uuid>>,
}

fn version_at_least_0_8(v: &str) -> bool {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (0, 8)
}

/// Makes sure of the extension (creating it when the role may) and the table, and fills the table from the
/// `vectors` kind when it is empty while the kind is not (a store that predates the extension). `Ok(None)`
/// where the server has no pgvector 0.8.0 or later.
///
/// # Errors
/// Database errors other than a missing or older extension.
pub(super) fn setup(client: &mut Client) -> Result<Option<VectorIndex>> {
    let available: Option<String> = client
        .query_opt("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'", &[])
        .map_err(|e| pg_error("looking for pgvector failed", e))?
        .map(|r| r.get(0));
    let Some(available) = available else {
        tracing::info!("pgvector is not installed on the server: vector candidates scan the vectors table");
        return Ok(None);
    };
    let installed = |client: &mut Client| {
        client
            .query_opt(
                "SELECT e.extversion, quote_ident(n.nspname) FROM pg_extension e
                 JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
                &[],
            )
            .map(|r| r.map(|r| (r.get::<_, String>(0), r.get::<_, String>(1))))
            .map_err(|e| pg_error("reading pgvector's version failed", e))
    };
    let found = match installed(client)? {
        Some(found) => found,
        None => {
            // In `public` where it exists and the role may create there (so that no store's schema owns it),
            // else the current schema. Another store of the database may create it at the same moment: look
            // again after a failure.
            let created = client
                .batch_execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                .or_else(|_| client.batch_execute("CREATE EXTENSION IF NOT EXISTS vector"));
            match (installed(client)?, created) {
                (Some(found), _) => found,
                (None, Err(e)) => {
                    tracing::warn!(error = %e, "pgvector could not be enabled (CREATE EXTENSION vector): vector \
                                                candidates scan");
                    return Ok(None);
                }
                (None, Ok(())) => return Ok(None),
            }
        }
    };
    let (installed, ext) = found;
    if !version_at_least_0_8(&installed) {
        tracing::warn!(installed, available, "pgvector older than 0.8.0 (no iterative scans): vector candidates scan");
        return Ok(None);
    }
    client
        .batch_execute(&format!(
            "SET client_min_messages = warning;
             CREATE TABLE IF NOT EXISTS engram_vectors (k0 text COLLATE \"C\" NOT NULL, k1 bigint NOT NULL,
                 dim integer NOT NULL, emb {ext}.vector NOT NULL, PRIMARY KEY (k0, k1));
             CREATE TABLE IF NOT EXISTS engram_bulk_loads (id uuid PRIMARY KEY,
                 since timestamptz NOT NULL DEFAULT now());
             RESET client_min_messages"
        ))
        .map_err(|e| pg_error("creating engram_vectors failed", e))?;
    let empty = client
        .query_one("SELECT NOT EXISTS (SELECT 1 FROM engram_vectors), EXISTS (SELECT 1 FROM vectors)", &[])
        .map_err(|e| pg_error("reading engram_vectors failed", e))?;
    let index =
        VectorIndex { ext, indexed: Mutex::default(), deferred: AtomicBool::new(false), bulk_load: Mutex::default() };
    if empty.get::<_, bool>(0) && empty.get::<_, bool>(1) {
        backfill(client, &index)?;
    }
    Ok(Some(index))
}

/// Copies every stored vector of the `vectors` kind into `engram_vectors`, a page at a time, in one transaction.
fn backfill(client: &mut Client, index: &VectorIndex) -> Result<()> {
    let mut tx = client.transaction().map_err(|e| pg_error("starting the vector backfill failed", e))?;
    let mut after: Option<(String, i64)> = None;
    let mut n = 0usize;
    loop {
        let rows = match &after {
            None => tx.query("SELECT k0, k1, v0 FROM vectors ORDER BY k0, k1 LIMIT 1000", &[]),
            Some((s, d)) => {
                tx.query("SELECT k0, k1, v0 FROM vectors WHERE (k0, k1) > ($1, $2) ORDER BY k0, k1 LIMIT 1000", &[s, d])
            }
        }
        .map_err(|e| pg_error("reading vectors for the backfill failed", e))?;
        for r in &rows {
            let (space, docno, bytes): (String, i64, Vec<u8>) = (r.get(0), r.get(1), r.get(2));
            let v = crate::storage::codec::vector_from_bytes(&bytes);
            put(&mut |sql, p| tx.execute(sql, p), index, &space, docno, &v)?;
            n += 1;
        }
        match rows.last() {
            Some(r) if rows.len() == 1000 => after = Some((r.get(0), r.get(1))),
            _ => break,
        }
    }
    tx.commit().map_err(|e| pg_error("committing the vector backfill failed", e))?;
    tracing::info!(vectors = n, "pgvector table filled from the stored vectors");
    Ok(())
}

/// Runs one statement; the rows it affected or returned.
type Exec<'a> = dyn FnMut(&str, &[&(dyn ToSql + Sync)]) -> std::result::Result<u64, postgres::Error> + 'a;

/// Makes the partial HNSW index of dimension `dim` unless this process made it, a bulk load defers it, or
/// another process's bulk load runs ([`bulk_loading`]).
pub(super) fn ensure_index(exec: &mut Exec<'_>, index: &VectorIndex, dim: usize) -> Result<()> {
    let ext = &index.ext;
    if !index.deferred.load(Ordering::Acquire) && !index.indexed.lock().contains(&dim) && !bulk_loading(exec)? {
        exec(
            &format!(
                "CREATE INDEX IF NOT EXISTS engram_vectors_hnsw_{dim} ON engram_vectors
                 USING hnsw ((emb::{ext}.vector({dim})) {ext}.vector_cosine_ops) WHERE dim = {dim}"
            ),
            &[],
        )
        .map_err(|e| pg_error("creating a vector index failed", e))?;
        index.indexed.lock().insert(dim);
    }
    Ok(())
}

/// pgvector's text form of `v`, `[0.25,-1,...]`: Rust prints the shortest decimal that reads back as the same
/// `f32`, and pgvector reads it with `strtof`, so the stored vector is exactly `v`.
pub(super) fn literal(v: &[f32]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(v.len() * 11 + 2);
    out.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{x}");
    }
    out.push(']');
    out
}

/// Writes one vector (replacing the docno's), first making sure of its dimension's partial HNSW index.
pub(super) fn put(exec: &mut Exec<'_>, index: &VectorIndex, space: &str, docno: i64, v: &[f32]) -> Result<()> {
    let dim = v.len();
    if dim == 0 {
        return delete(exec, space, docno);
    }
    ensure_index(exec, index, dim)?;
    let ext = &index.ext;
    let d = dim as i32;
    exec(
        &format!(
            "INSERT INTO engram_vectors (k0, k1, dim, emb) VALUES ($1, $2, $3, $4::real[]::{ext}.vector)
             ON CONFLICT (k0, k1) DO UPDATE SET dim = EXCLUDED.dim, emb = EXCLUDED.emb"
        ),
        &[&space, &docno, &d, &v],
    )
    .map(|_| ())
    .map_err(|e| pg_error("writing a vector failed", e))
}

/// Whether a bulk load of another process runs ([`defer`]): a row of `engram_bulk_loads` younger than a day (a
/// loader that died leaves its row; after a day the next write makes the index again).
fn bulk_loading(exec: &mut Exec<'_>) -> Result<bool> {
    exec("SELECT 1 FROM engram_bulk_loads WHERE since > now() - interval '1 day' LIMIT 1", &[])
        .map(|rows| rows > 0)
        .map_err(|e| pg_error("looking for bulk loads failed", e))
}

/// Deletes one docno's vector.
pub(super) fn delete(exec: &mut Exec<'_>, space: &str, docno: i64) -> Result<()> {
    exec("DELETE FROM engram_vectors WHERE k0 = $1 AND k1 = $2", &[&space, &docno])
        .map(|_| ())
        .map_err(|e| pg_error("deleting a vector failed", e))
}

/// Drops the current schema's partial HNSW indexes on `engram_vectors` for a bulk load (pgvector's advice:
/// building an index after loading is much faster than inserting into it), and writes vectors without them
/// until [`build`]. Returns how many indexes were dropped. Vector candidates scan the table meanwhile (exact).
///
/// # Errors
/// Database errors.
pub(super) fn defer(client: &mut Client, index: &VectorIndex) -> Result<usize> {
    index.deferred.store(true, Ordering::Release);
    // Seen by the other processes' writes, so that none makes the index again meanwhile.
    let id = uuid::Uuid::new_v4();
    client
        .execute("INSERT INTO engram_bulk_loads (id) VALUES ($1::text::uuid)", &[&id.to_string()])
        .map_err(|e| pg_error("registering a bulk load failed", e))?;
    *index.bulk_load.lock() = Some(id);
    let names: Vec<String> = client
        .query(
            "SELECT quote_ident(indexname) FROM pg_indexes WHERE schemaname = current_schema()
             AND tablename = 'engram_vectors' AND indexname LIKE 'engram\\_vectors\\_hnsw\\_%'",
            &[],
        )
        .map_err(|e| pg_error("listing the vector indexes failed", e))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for name in &names {
        client
            .batch_execute(&format!("DROP INDEX IF EXISTS {name}"))
            .map_err(|e| pg_error("dropping a vector index for a bulk load failed", e))?;
    }
    index.indexed.lock().clear();
    Ok(names.len())
}

/// How long building the HNSW indexes after a bulk load took, and over how many vectors.
#[derive(Debug, Clone, Copy, Default)]
pub struct IndexBuild {
    /// Vectors in `engram_vectors` when the build started (all spaces and dimensions of the schema).
    pub vectors: u64,
    /// Indexes built (one per dimension present).
    pub indexes: usize,
    /// Wall time of the builds.
    pub elapsed: Duration,
}

/// Builds the partial HNSW index of every dimension present in `engram_vectors` (after [`defer`]), with
/// `maintenance_work_mem` raised to 1 GiB for the session where it is lower (pgvector builds fastest when the
/// graph fits in it; a 256-dimension vector took 1.7 KB, so 1 GiB holds about 600,000; a warning names the
/// memory a larger build needs, which the role's own setting can give) and pgvector's
/// parallel build where the server allows it; a parallel build that fails (a small `/dev/shm` in a container)
/// is retried serially. Vectors are indexed on write again from then on.
///
/// # Errors
/// Database errors; the indexes not built stay missing (vector candidates scan) and a later [`build`] retries.
pub(super) fn build(client: &mut Client, index: &VectorIndex) -> Result<IndexBuild> {
    let started = Instant::now();
    let row = client
        .query_one("SELECT count(*), coalesce(array_agg(DISTINCT dim), '{}') FROM engram_vectors", &[])
        .map_err(|e| pg_error("reading the vector dimensions failed", e))?;
    let vectors = row.get::<_, i64>(0).max(0) as u64;
    let dims: Vec<i32> = row.get(1);
    client
        .batch_execute(
            "DO $$ BEGIN IF pg_size_bytes(current_setting('maintenance_work_mem')) < 1073741824 THEN
                 PERFORM set_config('maintenance_work_mem', '1GB', false); END IF; END $$",
        )
        .map_err(|e| pg_error("configuring the vector index build failed", e))?;
    // pgvector builds in memory while the graph fits maintenance_work_mem and about ten times slower after
    // (measured at 1M vectors of 256 dimensions: 1.7 KB a vector, 4 bytes a dimension plus about 700 of graph).
    let have: i64 = client
        .query_one("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))", &[])
        .map_err(|e| pg_error("configuring the vector index build failed", e))?
        .get(0);
    let widest = dims.iter().copied().max().unwrap_or(0).max(0) as u64;
    let need = vectors.saturating_mul(4 * widest + 700);
    if need > have.max(0) as u64 {
        tracing::warn!(
            vectors,
            need_mib = need >> 20,
            maintenance_work_mem_mib = have >> 20,
            "the vector index graph will not fit maintenance_work_mem and its build will be about ten times \
             slower: raise it for Engram's role (ALTER ROLE ... SET maintenance_work_mem) where the server has the memory"
        );
    }
    let ext = index.ext.clone();
    for dim in &dims {
        let sql = format!(
            "CREATE INDEX IF NOT EXISTS engram_vectors_hnsw_{dim} ON engram_vectors
             USING hnsw ((emb::{ext}.vector({dim})) {ext}.vector_cosine_ops) WHERE dim = {dim}"
        );
        if let Err(e) = client.batch_execute(&sql) {
            tracing::warn!(error = %e, dim, "a parallel vector index build failed: building it serially");
            client
                .batch_execute(&format!("SET max_parallel_maintenance_workers = 0; {sql}"))
                .map_err(|e| pg_error("building a vector index failed", e))?;
        }
        index.indexed.lock().insert(*dim as usize);
    }
    client
        .batch_execute("RESET maintenance_work_mem; RESET max_parallel_maintenance_workers")
        .map_err(|e| pg_error("configuring the vector index build failed", e))?;
    index.deferred.store(false, Ordering::Release);
    if let Some(id) = index.bulk_load.lock().take() {
        client
            .execute("DELETE FROM engram_bulk_loads WHERE id = $1::text::uuid", &[&id.to_string()])
            .map_err(|e| pg_error("ending a bulk load failed", e))?;
    }
    Ok(IndexBuild { vectors, indexes: dims.len(), elapsed: started.elapsed() })
}

/// The `k` nearest vectors of `space` to `query` by cosine similarity, best first (ties by docno), from the
/// dimension's HNSW index with `hnsw.iterative_scan = relaxed_order` and `hnsw.ef_search` 96 (approximate, as
/// Engram's own graph).
pub(super) fn candidates(
    client: &mut Client,
    index: &VectorIndex,
    space: &str,
    query: &[f32],
    k: usize,
) -> Result<Vec<(u64, f32)>> {
    let dim = query.len();
    if dim == 0 || k == 0 {
        return Ok(Vec::new());
    }
    let limit = i64::try_from(k).unwrap_or(i64::MAX);
    super::tx::sent(2);
    client
        .batch_execute(&format!(
            "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {}",
            EF_SEARCH.max(k)
        ))
        .map_err(|e| pg_error("configuring the vector search failed", e))?;
    let ext = &index.ext;
    let distance = format!("(emb::{ext}.vector({dim})) OPERATOR({ext}.<=>) ($2::real[]::{ext}.vector({dim}))");
    let sql = format!(
        "SELECT k1, 1 - ({distance}) FROM engram_vectors WHERE k0 = $1 AND dim = {dim} ORDER BY {distance} LIMIT $3"
    );
    let rows = client.query(&sql, &[&space, &query, &limit]).map_err(|e| pg_error("vector candidates failed", e))?;
    let mut out: Vec<(u64, f32)> =
        rows.iter().map(|r| (r.get::<_, i64>(0) as u64, r.get::<_, f64>(1) as f32)).collect();
    // relaxed_order may hand rows slightly out of order.
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pgvector_versions_with_iterative_scans() {
        for (v, ok) in
            [("0.8.0", true), ("0.8.3", true), ("0.10.1", true), ("1.0", true), ("0.7.4", false), ("x", false)]
        {
            assert_eq!(super::version_at_least_0_8(v), ok, "{v}");
        }
    }
}
