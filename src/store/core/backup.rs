//! Online backups of a redb store, their verification, and restoring one (`engram backup`, `engram restore`,
//! `POST /admin/backup`; docs/operations.md).
//!
//! * **Backup** ([`backup`]): the store file is copied while the store serves. Writes are held off for the copy
//!   only ([`super::write::Writes::paused`]: after a durable commit, so the file holds every acknowledged
//!   write, eventual commits included); reads go on. The copy is what redb would find after a power cut at
//!   that instant, so it is then opened read-write once, away from the live store (redb's crash repair runs on
//!   it and it is closed cleanly), checked read-only ([`verify`]), and only then renamed to its name. A copy
//!   cut short (a crash, a full disk) stays in a hidden `.engram-backup-*` directory beside the destination,
//!   never under the backup's name. An encrypted store's backup is the same ciphertext under the same key
//!   header: it stays encrypted and opens with the store's key.
//! * **Verify** ([`verify`]): opens a backup read-only (nothing is written to it) and reads its format version,
//!   generation, every record kind's statistics and every memory record.
//! * **Restore** ([`restore`]): refuses while a process holds the store; verifies the backup first; copies it
//!   beside the store, keeps the current store as `engram.redb.before-restore-<unix ms>` and renames the copy
//!   in. The derived files (index snapshot, saved HNSW graphs) are removed: the next open rebuilds them from
//!   the restored records.
//!
//! A PostgreSQL store is backed up by its server's tools (`pg_dump`, base backups; docs/deploy.md).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::Core;
use crate::config::StoreConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::model::Timestamp;
use crate::storage::Db;
use crate::store::records::{memory, meta};

/// What a backup wrote.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BackupReport {
    /// The backup file written (named as the request's `backup_path`, not `path`: a client or a fuzzer that
    /// chains answers into requests must not take a store file for a source to ingest).
    pub backup_path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The store generation it holds (every write acknowledged before the backup began is in it).
    pub generation: u64,
    /// Memory records in it (live, forgotten and archived), each decoded by the check.
    pub memories: u64,
    /// Whether it is encrypted at rest (as the store is).
    pub encrypted: bool,
    /// Milliseconds the backup took, from start to the renamed, verified file.
    pub elapsed_ms: f64,
    /// Milliseconds writes were held off (the copy of the file); reads went on.
    pub writes_paused_ms: f64,
}

/// What [`verify`] found in a backup (or any store file).
#[derive(Debug, Clone, Serialize)]
pub struct BackupCheck {
    /// The file checked.
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its store format version (at most this release's).
    pub format_version: u32,
    /// Its store generation.
    pub generation: u64,
    /// Memory records in it, each decoded (live, forgotten and archived alike).
    pub memories: u64,
    /// Record kinds present.
    pub kinds: usize,
    /// When the backup was taken (`META.last_backup_at`, Unix ms), if recorded.
    pub taken_at_ms: Option<u64>,
}

/// What [`restore`] did.
#[derive(Debug, Clone, Serialize)]
pub struct RestoreReport {
    /// The backup restored, as checked before anything changed.
    pub check: BackupCheck,
    /// Where the store that was replaced was kept, if there was one.
    pub previous: Option<String>,
}

fn refuse_shared(config: &StoreConfig) -> Result<()> {
    if config.database_url.is_some() {
        return Err(Error::new(
            ErrorKind::Unavailable,
            "a PostgreSQL store is backed up with the server's own tools: pg_dump, or base backups with \
             point-in-time recovery (docs/deploy.md, \"Backups\")",
        ));
    }
    Ok(())
}

/// Writes a verified backup of the store to the file `dest` (refused if it exists) while the store serves.
///
/// # Errors
/// * [`ErrorKind::Unavailable`]: a PostgreSQL store.
/// * [`ErrorKind::Conflict`]: `dest` exists.
/// * [`ErrorKind::Io`]: the copy failed (the store is untouched; nothing is left under `dest`).
/// * [`ErrorKind::Corrupt`]: the copy did not verify (nothing is left under `dest`).
pub(crate) fn backup(core: &Core, dest: &Path) -> Result<BackupReport> {
    refuse_shared(&core.config)?;
    let started = Instant::now();
    if dest.exists() {
        return Err(Error::new(ErrorKind::Conflict, format!("{} exists; choose another name", dest.display())));
    }
    let parent = folder_for(dest)?;
    // The copy is made, repaired and checked in a directory of its own beside the destination (same file
    // system, so the final rename is atomic); a copy cut short stays there, never under `dest`.
    let work = parent.join(format!(".engram-backup-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir(&work)?;
    let out = copy_and_check(core, &work, dest, started);
    let _ = std::fs::remove_dir_all(&work);
    let m = crate::metrics::global();
    match &out {
        Ok(_) => m.backup_duration.observe(started.elapsed().as_secs_f64()),
        Err(_) => {
            m.backup_failures.inc();
        }
    }
    out
}

/// The folder `dest` goes in, created if missing.
///
/// # Errors
/// [`ErrorKind::Conflict`] when a file stands where one of its folders should be; I/O errors creating it.
fn folder_for(dest: &Path) -> Result<&Path> {
    let parent = dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Some(file) = parent.ancestors().find(|a| a.is_file()) {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!("{} is a file, not a folder: choose another backup path", file.display()),
        ));
    }
    std::fs::create_dir_all(parent)?;
    Ok(parent)
}

fn copy_and_check(core: &Core, work: &Path, dest: &Path, started: Instant) -> Result<BackupReport> {
    let copy = work.join("engram.redb");
    let paused = Instant::now();
    core.writes.paused(|| {
        std::fs::copy(core.config.db_path(), &copy)?;
        Ok(())
    })?;
    let writes_paused_ms = paused.elapsed().as_secs_f64() * 1000.0;
    let check = finish(&core.config, &copy, dest)?;
    Ok(BackupReport::of(check, core.encryption.encrypted, started, writes_paused_ms))
}

impl BackupReport {
    /// The report of the checked backup `check`, begun at `started`.
    fn of(check: BackupCheck, encrypted: bool, started: Instant, writes_paused_ms: f64) -> BackupReport {
        BackupReport {
            backup_path: check.path,
            bytes: check.bytes,
            generation: check.generation,
            memories: check.memories,
            encrypted,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            writes_paused_ms,
        }
    }
}

/// A backup of the store of `config` when no process has it open (`engram backup` without a running
/// daemon): the store is opened (crash repair if it needs one) and closed, then copied and checked as
/// [`crate::store::Admin::backup`] does. Nothing else can write meanwhile: the copy holds the store's lock.
///
/// # Errors
/// [`ErrorKind::Locked`] when a process holds the store (ask that daemon: `POST /admin/backup`); otherwise as
/// [`crate::store::Admin::backup`].
pub fn backup_closed(config: &StoreConfig, dest: &Path) -> Result<BackupReport> {
    refuse_shared(config)?;
    let started = Instant::now();
    if dest.exists() {
        return Err(Error::new(ErrorKind::Conflict, format!("{} exists; choose another name", dest.display())));
    }
    if !config.db_path().is_file() {
        return Err(Error::new(ErrorKind::NotFound, format!("no store in {}", config.data_dir.display())));
    }
    let parent = folder_for(dest)?;
    let work = parent.join(format!(".engram-backup-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir(&work)?;
    let out = (|| {
        let (db, unlocked) = super::db::open_db(config)?;
        let copy = work.join("engram.redb");
        let paused = Instant::now();
        std::fs::copy(config.db_path(), &copy)?;
        let writes_paused_ms = paused.elapsed().as_secs_f64() * 1000.0;
        drop(db);
        let check = finish(config, &copy, dest)?;
        Ok(BackupReport::of(check, unlocked.is_some(), started, writes_paused_ms))
    })();
    let _ = std::fs::remove_dir_all(&work);
    out
}

/// Repairs, checks and renames the copy `copy` (named `engram.redb` in its own directory) to `dest`.
fn finish(config: &StoreConfig, copy: &Path, dest: &Path) -> Result<BackupCheck> {
    // The copy is a crash image: a read-write open runs redb's repair on it and closes it cleanly.
    let dir = copy.parent().unwrap_or(Path::new("."));
    let at = StoreConfig { data_dir: dir.to_path_buf(), ..config.clone() };
    drop(super::db::open_db(&at)?);
    let check = verify(config, copy)?;
    std::fs::File::open(copy)?.sync_all()?;
    std::fs::rename(copy, dest)?;
    if let Some(p) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::File::open(p).and_then(|d| d.sync_all());
    }
    Ok(BackupCheck { path: dest.display().to_string(), ..check })
}

/// Opens the store file `file` read-only (with `config`'s key when it is encrypted) and checks it: format
/// version, generation, every record kind, every memory record decoded.
///
/// # Errors
/// * [`ErrorKind::NotFound`]: no file at `file`.
/// * [`ErrorKind::WrongKey`]: an encrypted file without the key that opens it.
/// * [`ErrorKind::Corrupt`]: not a store file, a damaged one, one that needs crash repair (not a finished
///   backup), or one of a newer format.
pub fn verify(config: &StoreConfig, file: &Path) -> Result<BackupCheck> {
    if !file.is_file() {
        return Err(Error::new(ErrorKind::NotFound, format!("no backup file at {}", file.display())));
    }
    let db = open_read_only(config, file)?;
    let rtx = db.read()?;
    let m = meta::meta(&rtx)?;
    let format_version = super::upgrade::stored_format(&m)?
        .ok_or_else(|| Error::new(ErrorKind::Corrupt, format!("{} holds no Engram store", file.display())))?;
    if format_version > super::upgrade::FORMAT_VERSION {
        return Err(super::upgrade::newer(format_version));
    }
    let generation = m.u64("generation")?.unwrap_or(0);
    let taken_at_ms = m.u64("last_backup_at")?;
    let mut kinds = 0;
    for name in crate::store::records::kind_names() {
        let st = rtx.kind_stats(name)?;
        kinds += usize::from(st.stored_bytes > 0 || st.metadata_bytes > 0);
    }
    let mut memories = 0u64;
    for row in memory::memories(&rtx)?.iter()? {
        row?;
        memories += 1;
    }
    Ok(BackupCheck {
        path: file.display().to_string(),
        bytes: std::fs::metadata(file)?.len(),
        format_version,
        generation,
        memories,
        kinds,
        taken_at_ms,
    })
}

/// The store file `file` opened read-only: plain, or encrypted under `config`'s key.
fn open_read_only(config: &StoreConfig, file: &Path) -> Result<Db> {
    let not_finished = || {
        Error::new(
            ErrorKind::Corrupt,
            format!("{} was not closed cleanly (a copy cut short?): not a finished backup", file.display()),
        )
    };
    let dir = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if file.file_name().is_some_and(|n| n == "engram.redb") {
        let at = StoreConfig { data_dir: dir.to_path_buf(), ..config.clone() };
        if let Some(db) = super::db::open_db_read_only(&at)? {
            return Ok(db);
        }
    } else if crate::storage::crypt::file_kind(file)? == crate::storage::crypt::FileKind::Encrypted {
        // The encrypted open names the file `engram.redb` in its directory: look at it through a link.
        let work = dir.join(format!(".engram-verify-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir(&work)?;
        let linked = std::fs::hard_link(file, work.join("engram.redb"))
            .or_else(|_| std::fs::copy(file, work.join("engram.redb")).map(|_| ()));
        let out = linked.map_err(Error::from).and_then(|()| open_read_only(config, &work.join("engram.redb")));
        let _ = std::fs::remove_dir_all(&work);
        return out;
    }
    Db::open_read_only(file, 1 << 20)?.ok_or_else(not_finished)
}

/// Puts the backup `src` in place of the store of `config`. Refused while a process holds the store.
///
/// # Errors
/// * [`ErrorKind::Unavailable`]: a PostgreSQL store.
/// * [`ErrorKind::Locked`]: the daemon (or another program) holds the store; stop it first.
/// * As [`verify`] for `src` (nothing changed).
/// * [`ErrorKind::Io`]: the copy failed (the store is untouched).
pub fn restore(config: &StoreConfig, src: &Path) -> Result<RestoreReport> {
    refuse_shared(config)?;
    let check = verify(config, src)?;
    let live = config.db_path();
    std::fs::create_dir_all(&config.data_dir)?;
    if live.exists() {
        // Locked while the daemon holds the store. The probe opens the file without a key (a plaintext file is
        // opened and closed again; an encrypted one only has its lock tried), so that restoring an encrypted
        // backup over a plaintext store, or the reverse, is not refused for the key.
        let probe = StoreConfig { encryption: None, ..config.clone() };
        match super::db::open_db(&probe) {
            Err(e) if e.kind() == ErrorKind::Locked => return Err(e),
            _ => {}
        }
    }
    let incoming = live.with_extension("redb.restoring");
    std::fs::copy(src, &incoming)?;
    std::fs::File::open(&incoming)?.sync_all()?;
    let previous = if live.exists() {
        let kept = live.with_extension(format!("redb.before-restore-{}", Timestamp::now().0));
        std::fs::rename(&live, &kept)?;
        Some(kept.display().to_string())
    } else {
        None
    };
    std::fs::rename(&incoming, &live)?;
    let _ = std::fs::File::open(&config.data_dir).and_then(|d| d.sync_all());
    // Derived from the records: rebuilt at the next open.
    let _ = std::fs::remove_file(super::snapshot::path(&config.data_dir));
    let _ = std::fs::remove_dir_all(config.data_dir.join("hnsw"));
    tracing::info!(generation = check.generation, memories = check.memories, "store restored from a backup");
    Ok(RestoreReport { check, previous })
}

/// The scheduled backups in `dir` (`engram-<UTC time>.redb`, as [`scheduled_name`] makes them), oldest first.
pub fn scheduled_backups(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("engram-") && n.ends_with(".redb"))
        })
        .collect();
    out.sort();
    out
}

/// The name of a backup taken now: `engram-20261206T161500123Z.redb` (sorts by time).
pub fn scheduled_name() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "engram-{:04}{:02}{:02}T{:02}{:02}{:02}{:03}Z.redb",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.millisecond()
    )
}
