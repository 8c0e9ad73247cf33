//! The change feed that keeps several daemons' in-memory indexes in step with one database.
//!
//! Every write transaction that changes what the in-memory indexes hold (a memory's catalog entry, postings or
//! vector; the PageRank table; a space's sources) appends one row to `engram_changes` in the same transaction:
//! `seq` from the sequence `engram_change_seq`, taken while the transaction holds the store's write lock, so
//! sequence order is commit order and a reader never sees a later row before an earlier one. Each daemon applies
//! the rows after the last `seq` it applied, in order, after each of its own writes and on a poll
//! (`KnowledgeStore`'s feed worker). Rows older than [`RETAIN_SECS`] are pruned; `engram_changes_pruned.upto`
//! records the highest pruned `seq`, and a daemon that finds it above its own position rebuilds its indexes from
//! the tables.

use postgres::Client;

use super::pg_error;
use crate::error::Result;

/// Rows stay this long (seconds) before pruning: a daemon that has not polled for longer rebuilds.
pub const RETAIN_SECS: i64 = 600;

/// Rows after the published index snapshot's position (`publish.rs`) stay up to this long (seconds, 24 hours),
/// so that a daemon starting from the publication can catch up. Daemons publish again every
/// [`RETAIN_SECS`] of writes, so this bound only matters when none is running a current build.
pub const RETAIN_PUBLISHED_SECS: i64 = 86_400;

/// The feed's tables, created by `migrate` in its transaction.
pub(super) const CREATE: &str = "
    CREATE SEQUENCE IF NOT EXISTS engram_change_seq;
    CREATE TABLE IF NOT EXISTS engram_changes (
        seq bigint PRIMARY KEY,
        at timestamptz NOT NULL DEFAULT now(),
        body bytea NOT NULL
    );
    CREATE TABLE IF NOT EXISTS engram_changes_pruned (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        upto bigint NOT NULL
    );
    INSERT INTO engram_changes_pruned (upto) VALUES (0) ON CONFLICT DO NOTHING;";

/// Compresses the feed's bodies with lz4 from now on, when the server has it (`migrate`, in its transaction,
/// under a savepoint): a batch's body is megabytes (its vectors and postings), and PostgreSQL's default pglz
/// took 14 % of the server's time in a bulk load; lz4 is several times faster. A server built without lz4
/// keeps pglz. Values stored before stay as they are.
///
/// # Errors
/// Database errors of reading the setting or of the savepoint; a failed `ALTER` (no lz4 in the server, a role
/// that does not own the table) is logged and leaves pglz.
pub(super) fn compress_with_lz4(tx: &mut postgres::Transaction<'_>) -> Result<()> {
    let done = tx
        .query_one(
            "SELECT coalesce(bool_or(attcompression = 'l'), false) FROM pg_attribute
             WHERE attrelid = 'engram_changes'::regclass AND attname = 'body'",
            &[],
        )
        .and_then(|r| r.try_get::<_, bool>(0))
        .map_err(|e| pg_error("reading the change feed's compression", e))?;
    if done {
        return Ok(());
    }
    let mut sp = tx.transaction().map_err(|e| pg_error("starting a savepoint", e))?;
    match sp.batch_execute("ALTER TABLE engram_changes ALTER COLUMN body SET COMPRESSION lz4") {
        Ok(()) => sp.commit().map_err(|e| pg_error("setting the change feed's compression", e)),
        Err(e) => {
            // No lz4 in the server, or a role that does not own the table: pglz stays, nothing else changes.
            if e.code() == Some(&postgres::error::SqlState::FEATURE_NOT_SUPPORTED) {
                tracing::info!("the PostgreSQL server has no lz4: the change feed stays compressed with pglz");
            } else {
                tracing::warn!(error = %e, "the change feed stays compressed with pglz");
            }
            sp.rollback().map_err(|e| pg_error("rolling back a savepoint", e))
        }
    }
}

/// Appends the changes of the caller's write transaction, in their order: the statement up to the array of
/// bodies (`$n::bytea[]`), which `WITH ORDINALITY AS u(b, i) ORDER BY i` follows. PostgreSQL evaluates the
/// volatile `nextval` after the sort (since 9.6), so the `seq`s follow the bodies' order.
pub(super) const PUBLISH_MANY: &str =
    "INSERT INTO engram_changes (seq, body) SELECT nextval('engram_change_seq'), b FROM unnest(";

/// The last `seq` committed as of the caller's snapshot (0 for none).
pub(super) const HEAD: &str =
    "SELECT greatest(coalesce((SELECT max(seq) FROM engram_changes), 0), (SELECT upto FROM engram_changes_pruned))";

/// Rows after `after`, oldest first, at most `limit`, and the pruned mark.
///
/// # Errors
/// Database errors.
pub(super) fn since(client: &mut Client, after: u64, limit: usize) -> Result<crate::storage::Changes> {
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // One round trip: the pruned mark's one row, joined to the entries after `after` (none: one row of NULLs).
    let rows = client
        .query(
            "SELECT p.upto, c.seq, c.body FROM engram_changes_pruned p
             LEFT JOIN LATERAL (SELECT seq, body FROM engram_changes WHERE seq > $1 ORDER BY seq LIMIT $2) c ON true
             ORDER BY c.seq",
            &[&after, &limit],
        )
        .map_err(|e| pg_error("reading the change feed failed", e))?;
    let pruned = rows.first().map_or(0, |r| r.get::<_, i64>(0));
    let entries = rows
        .iter()
        .filter_map(|r| Some((r.get::<_, Option<i64>>(1)?.max(0) as u64, r.get::<_, Option<Vec<u8>>>(2)?)))
        .collect();
    Ok(crate::storage::Changes { pruned: pruned.max(0) as u64, entries })
}

/// Deletes rows older than [`RETAIN_SECS`], except those after the published snapshot's position younger than
/// [`RETAIN_PUBLISHED_SECS`], and raises the pruned mark past them. Returns the rows deleted.
///
/// # Errors
/// Database errors.
pub(super) fn prune(client: &mut Client) -> Result<u64> {
    let row = client
        .query_one(
            "WITH d AS (DELETE FROM engram_changes WHERE at < now() - make_interval(secs => $1)
                        AND (seq <= coalesce((SELECT position FROM engram_published), 9223372036854775807)
                             OR at < now() - make_interval(secs => $2))
                        RETURNING seq),
                  u AS (UPDATE engram_changes_pruned SET upto = greatest(upto, (SELECT max(seq) FROM d))
                        WHERE EXISTS (SELECT 1 FROM d))
             SELECT count(*) FROM d",
            &[&(RETAIN_SECS as f64), &(RETAIN_PUBLISHED_SECS as f64)],
        )
        .map_err(|e| pg_error("pruning the change feed failed", e))?;
    Ok(row.get::<_, i64>(0).max(0) as u64)
}
