//! Store format upgrades: the ordered migrations from each older layout to [`FORMAT_VERSION`], run when a
//! store is opened, and the plan `engram upgrade --check` prints without changing anything.
//!
//! A store records its layout as `META.format_version`. At open:
//! * no version (a new store): this release's is written;
//! * a newer version: the store is refused ([`ErrorKind::Corrupt`], both versions named), nothing is changed;
//! * an older version: every migration from it runs in order, in **one** write transaction, with the new
//!   version and an [`UpgradeRecord`] (`META.last_upgrade`, shown in `/health`). A crash before the commit
//!   leaves the old store, which migrates at the next open; after it, the new one. On redb a copy of the file
//!   is written next to it first (`engram.redb.format-<old>.bak`, named in the log and in `/health`); on
//!   PostgreSQL the transaction holds the writers' advisory lock, so one daemon migrates while the others wait
//!   and then find the store current.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::config::{Durability, StoreConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::model::Timestamp;
use crate::storage::{Db, ReadTx, Readable, WriteTx};
use crate::store::records::meta::Meta;
use crate::store::records::{Bytes, StoredMemoryV1};
use crate::store::records::{memory, meta};

/// One step of the layout, from `from` to `from + 1`.
struct Migration {
    from: u32,
    what: &'static str,
    /// Records the step would rewrite (read-only).
    count: fn(&ReadTx) -> Result<u64>,
    /// Rewrites them; returns how many.
    run: fn(&WriteTx) -> Result<u64>,
}

/// Layout version of this release: 1 (the first release) plus one per migration, so appending a migration
/// raises it. History: the `what` of each migration (2: memories gain `expires_at`).
pub const FORMAT_VERSION: u32 = 1 + MIGRATIONS.len() as u32;

/// Every migration, in order. A release that changes the layout appends one (which raises [`FORMAT_VERSION`]).
const MIGRATIONS: &[Migration] = &[Migration {
    from: 1,
    what: "memories gain expires_at: every memory record is rewritten at record version 2",
    count: |rtx| memory::memories(rtx)?.count_older(),
    run: |txn| memory::memories(&txn)?.rewrite_older(),
}];

/// One step of an [`UpgradePlan`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpgradeStep {
    /// Format before the step.
    pub from: u32,
    /// Format after it.
    pub to: u32,
    /// What the step changes.
    pub what: String,
    /// Records it rewrites.
    pub records: u64,
}

/// What opening a store would do to its format ([`plan_for`],
/// `engram upgrade --check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpgradePlan {
    /// The store's format; `None` when there is no store yet (opening creates one at `current`).
    pub found: Option<u32>,
    /// This release's format.
    pub current: u32,
    /// The migrations opening would run, in order (empty when the store is current, or newer).
    pub steps: Vec<UpgradeStep>,
    /// Where the copy of the file would be written first (redb only).
    pub backup: Option<PathBuf>,
    /// The store is newer than this release: opening it is refused.
    pub refused: bool,
}

/// The last upgrade a store went through (`META.last_upgrade`; shown in `/health`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct UpgradeRecord {
    /// Format before.
    pub from: u32,
    /// Format after.
    pub to: u32,
    /// When it committed.
    pub at: Timestamp,
    /// Records rewritten.
    pub records: u64,
    /// The copy of the file written before it (redb), kept until the user removes it.
    pub backup: Option<String>,
    /// Milliseconds the migration transaction took (the copy not included).
    pub elapsed_ms: f64,
}

/// The store's recorded format, if any.
pub(crate) fn stored_format<T: Readable<&'static str, Bytes>>(t: &Meta<T>) -> Result<Option<u32>> {
    t.u32("format_version")
}

/// The last upgrade recorded in `META`, if any.
pub(crate) fn last_upgrade<T: Readable<&'static str, Bytes>>(t: &Meta<T>) -> Result<Option<UpgradeRecord>> {
    t.json("last_upgrade")
}

/// The store of `config` opened to read its format: a redb file read-only, so nothing is written to it, not
/// even its header. A file the read-only open cannot take (it needs redb's crash repair, or it is not what a
/// clean close leaves) is opened read-write once, which repairs it or reports what is wrong. PostgreSQL: the
/// usual connection.
fn open_for_reading(config: &StoreConfig) -> Result<Db> {
    if config.database_url.is_none() {
        if let Some(db) = super::db::open_db_read_only(config)? {
            return Ok(db);
        }
        if let Ok(Some(db)) = Db::open_read_only(&config.db_path(), 1 << 20) {
            return Ok(db);
        }
    }
    super::db::open_db(config).map(|(db, _)| db)
}

/// The format recorded in the store (None for a database no Engram has opened yet: it has no META table).
fn format_of(rtx: &ReadTx) -> Result<Option<u32>> {
    match meta::meta(&rtx) {
        Ok(t) => stored_format(&t),
        Err(_) => Ok(None),
    }
}

/// The refusal of a store written by a newer release.
pub(crate) fn newer(found: u32) -> Error {
    Error::new(
        ErrorKind::Corrupt,
        format!(
            "the store is at format {found}, written by a newer Engram; this release reads formats 1 to \
             {FORMAT_VERSION}. Open it with that release or a later one (nothing was changed)"
        ),
    )
}

/// The backup copy's path for a redb store at `format`.
pub(crate) fn backup_path(db_path: &Path, format: u32) -> PathBuf {
    db_path.with_extension(format!("redb.format-{format}.bak"))
}

/// The plan for a store at `found`.
fn plan(rtx: &ReadTx, found: Option<u32>, backup: Option<PathBuf>) -> Result<UpgradePlan> {
    let mut steps = Vec::new();
    if let Some(f) = found {
        for m in MIGRATIONS.iter().filter(|m| m.from >= f && m.from < FORMAT_VERSION) {
            steps.push(UpgradeStep { from: m.from, to: m.from + 1, what: m.what.into(), records: (m.count)(rtx)? });
        }
    }
    let refused = found.is_some_and(|f| f > FORMAT_VERSION);
    let backup = if steps.is_empty() { None } else { backup };
    Ok(UpgradePlan { found, current: FORMAT_VERSION, steps, backup, refused })
}

/// What opening the store of `config` would do to its format, without changing anything.
///
/// # Errors
/// [`ErrorKind::Locked`] when another process has the redb file open (stop it first); storage errors.
pub fn plan_for(config: &StoreConfig) -> Result<UpgradePlan> {
    if config.database_url.is_none() && !config.db_path().exists() {
        return Ok(UpgradePlan { found: None, current: FORMAT_VERSION, steps: vec![], backup: None, refused: false });
    }
    let db = open_for_reading(config)?;
    let rtx = db.read()?;
    let found = format_of(&rtx)?;
    let backup = (!db.shared()).then(|| backup_path(&config.db_path(), found.unwrap_or(FORMAT_VERSION)));
    plan(&rtx, found, backup)
}

/// Brings the store of `config` to [`FORMAT_VERSION`] without opening it for use (no index is loaded and the
/// embedder is not checked): what [`crate::KnowledgeStore::open`] does first, as `engram upgrade` runs it.
/// Returns the upgrade made, or None when the store was current (or does not exist yet).
///
/// # Errors
/// As [`crate::KnowledgeStore::open`]: [`ErrorKind::Locked`] while another process has the file open,
/// [`ErrorKind::Corrupt`] for a newer store (nothing changed), storage errors (nothing changed).
pub fn upgrade_store(config: &StoreConfig) -> Result<Option<UpgradeRecord>> {
    if config.database_url.is_none() && !config.db_path().exists() {
        return Ok(None);
    }
    let backup = backup_before_open(config)?;
    let (db, _) = super::db::open_db(config)?;
    match meta::meta(&db.read()?) {
        Ok(t) if stored_format(&t)?.is_some() => {}
        _ => return Ok(None),
    }
    upgrade_at_open(&db, backup)
}

/// Before a redb store is opened for use: when its file is at an older format, writes the backup copy and
/// returns its path. The copy is of the closed file, so it opens without a repair. A file that was not closed
/// cleanly is opened read-write once first (redb's crash repair) and closed. None on PostgreSQL, for a new
/// or current store, and with a custom storage device (fault-injection tests).
///
/// # Errors
/// [`ErrorKind::Io`] when the copy cannot be written (nothing changed); storage errors.
pub(crate) fn backup_before_open(config: &StoreConfig) -> Result<Option<PathBuf>> {
    let path = config.db_path();
    if config.database_url.is_some() || config.storage.is_some() || !path.exists() {
        return Ok(None);
    }
    super::db::discard_unborn_file(&path)?;
    if std::fs::metadata(&path).map_or(true, |m| m.len() == 0) {
        return Ok(None); // nothing stored yet: the open creates the store
    }
    // Closed again at the end of the statement, before the copy.
    let found = format_of(&open_for_reading(config)?.read()?)?;
    match found {
        Some(f) if f < FORMAT_VERSION => write_backup(&path, f).map(Some),
        _ => Ok(None),
    }
}

/// Brings the store to [`FORMAT_VERSION`] at open (see the module documentation). `backup`: the copy
/// [`backup_before_open`] wrote (redb). Returns the upgrade it made, if any.
///
/// # Errors
/// [`ErrorKind::Corrupt`] for a newer store (nothing changed) or a record that does not decode (the
/// transaction is dropped: nothing changed); [`ErrorKind::Io`] when the backup cannot be written (nothing
/// changed).
pub(crate) fn upgrade_at_open(db: &Db, backup: Option<PathBuf>) -> Result<Option<UpgradeRecord>> {
    let found = stored_format(&meta::meta(&db.read()?)?)?;
    match found {
        Some(f) if f > FORMAT_VERSION => return Err(newer(f)),
        Some(f) if f < FORMAT_VERSION => {}
        _ => return Ok(None),
    }
    let started = Instant::now();
    let txn = db.write(Durability::Immediate)?;
    // Another daemon on the same database may have migrated while this one waited for the writers' lock.
    let from = match stored_format(&meta::meta(&txn)?)? {
        Some(f) if f > FORMAT_VERSION => return Err(newer(f)),
        Some(f) if f < FORMAT_VERSION => f,
        _ => return Ok(None),
    };
    let mut records = 0;
    for m in MIGRATIONS.iter().filter(|m| m.from >= from && m.from < FORMAT_VERSION) {
        let n = (m.run)(&txn)?;
        tracing::info!(from = m.from, to = m.from + 1, records = n, what = m.what, "store format migration step");
        records += n;
    }
    let record = UpgradeRecord {
        from,
        to: FORMAT_VERSION,
        at: Timestamp::now(),
        records,
        backup: backup.as_ref().map(|p| p.display().to_string()),
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
    };
    {
        let mut meta = meta::meta(&txn)?;
        meta.put_u32("format_version", FORMAT_VERSION)?;
        meta.put_json("last_upgrade", &record)?;
    }
    txn.commit()?;
    tracing::warn!(
        from,
        to = FORMAT_VERSION,
        records,
        ms = record.elapsed_ms as u64,
        backup = record.backup.as_deref().unwrap_or("none (PostgreSQL: back up the database yourself)"),
        "store upgraded to this release's format; the backup copy is kept until you remove it"
    );
    Ok(Some(record))
}

/// Copies the closed redb file to its backup path (through a temporary name, so that a crash never leaves a
/// partial copy under the final name).
fn write_backup(db_path: &Path, format: u32) -> Result<PathBuf> {
    let to = backup_path(db_path, format);
    let tmp = to.with_extension("bak.partial");
    std::fs::copy(db_path, &tmp).map_err(|e| {
        Error::new(ErrorKind::Io, format!("writing the backup copy {} before the upgrade failed", tmp.display()))
            .with_source(e)
    })?;
    std::fs::File::open(&tmp).and_then(|f| f.sync_all())?;
    std::fs::rename(&tmp, &to)?;
    tracing::info!(backup = %to.display(), "backup copy written before the store format upgrade");
    Ok(to)
}

/// For tests and benchmarks of the upgrade path only: turns a current store into the format-1 store an
/// earlier release would have written (every memory record rewritten at version 1, without `expires_at`;
/// `META.format_version` 1; `META.last_upgrade` removed), in one write transaction. Not for users: it drops
/// every expiry time.
///
/// # Errors
/// Storage errors; [`ErrorKind::Locked`] while another process has the file open.
#[doc(hidden)]
pub fn downgrade_to_format_1(config: &StoreConfig) -> Result<u64> {
    let (db, _) = super::db::open_db(config)?;
    let txn = db.write(Durability::Immediate)?;
    let mut n = 0;
    {
        let mut t = memory::memories(&txn)?;
        let mut rows = Vec::new();
        t.each(|space, id, sm| {
            rows.push((space.to_owned(), id.to_owned(), sm));
            true
        })?;
        for (space, id, sm) in rows {
            t.put_raw((space.as_str(), id.as_str()), &StoredMemoryV1::bytes_of(&sm)?)?;
            n += 1;
        }
        let mut meta = meta::meta(&txn)?;
        meta.put_u32("format_version", 1)?;
        meta.remove("last_upgrade")?;
    }
    txn.commit()?;
    Ok(n)
}
