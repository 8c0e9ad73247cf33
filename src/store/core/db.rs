//! The store's database, opened: the redb file in the data directory (plain or on an encrypted device), or a
//! PostgreSQL database; the repair of a file whose creation was cut short; and compaction at close.

use std::time::Instant;

use crate::config::StoreConfig;
use crate::error::Result;
use crate::model::Timestamp;
use crate::storage::Db;
use crate::storage::crypt::{self, EncryptedDevice, FileKind, Unlocked};

/// Moves aside a store file whose creation was cut short. redb writes its magic number (the first 9 bytes) last
/// when it creates a file, after the empty structure is on disk; a crash or I/O error before that leaves a file
/// that starts with zeros, never held a commit, and that redb refuses to open ("not a redb database") for ever.
/// Such a file is renamed to `engram.redb.incomplete-<unix ms>` (kept, never deleted) so that the store can be
/// created again. A file starting with anything else is left alone.
pub(crate) fn discard_unborn_file(path: &std::path::Path) -> Result<()> {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else { return Ok(()) };
    let mut head = [0u8; crate::storage::REDB_MAGIC_BYTES];
    let mut got = 0;
    while got < head.len() {
        let n = f.read(&mut head[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    if got == 0 || head[..got].iter().any(|b| *b != 0) {
        return Ok(());
    }
    drop(f);
    let aside = path.with_extension(format!("redb.incomplete-{}", Timestamp::now().0));
    tracing::warn!(
        path = %path.display(),
        moved_to = %aside.display(),
        "the store file was never initialised (its creation was cut short); moved aside, creating a new one"
    );
    std::fs::rename(path, aside)?;
    Ok(())
}

/// Files smaller than this are never compacted at close.
pub(crate) const COMPACT_MIN_BYTES: u64 = 16 << 20;

/// Compacts the file at close when more than a quarter of it is free pages (bulk loads and big deletes leave
/// them; redb reuses them, but the file only shrinks by compaction). Errors are logged: the store stays valid.
pub(crate) fn compact_if_sparse(db: &Db, path: &std::path::Path) {
    let before = std::fs::metadata(path).map_or(0, |m| m.len());
    if before < COMPACT_MIN_BYTES {
        return;
    }
    let Ok(Some(used)) = db.used_bytes() else { return };
    if used.saturating_mul(4) >= before.saturating_mul(3) {
        return;
    }
    let started = Instant::now();
    for _ in 0..8 {
        match db.compact_step() {
            Ok(true) => continue,
            Ok(false) => break,
            Err(e) => {
                tracing::warn!(error = %e, "compaction at close stopped; the file stays valid");
                break;
            }
        }
    }
    let after = std::fs::metadata(path).map_or(0, |m| m.len());
    tracing::info!(before, after, ms = started.elapsed().as_millis() as u64, "store file compacted at close");
}

/// The store's database: the PostgreSQL database of `config.database_url`, or the redb file in the data
/// directory (on an [`EncryptedDevice`] when the file is encrypted or `config.encryption` makes a new one), with
/// what an encrypted file's key unlocked.
///
/// # Errors
/// As [`crate::KnowledgeStore::open`]; [`crate::ErrorKind::WrongKey`] (`key_required`) for an encrypted file without a
/// key, [`crate::ErrorKind::Conflict`] (`store_not_encrypted`) for a key and a plaintext file.
pub(crate) fn open_db(config: &StoreConfig) -> Result<(Db, Option<Unlocked>)> {
    if let Some(url) = &config.database_url {
        if config.encryption.is_some() {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidInput,
                "encryption at rest covers the redb file; a PostgreSQL store is encrypted by its server (disk or \
                 tablespace encryption, pg_tde: docs/deploy.md)",
            ));
        }
        #[cfg(feature = "postgres")]
        return Ok((Db::connect(url, config.database_pool_size)?, None));
        #[cfg(not(feature = "postgres"))]
        {
            let _ = url;
            return Err(crate::error::Error::new(
                crate::error::ErrorKind::Unavailable,
                "a database URL was given, but this build has no PostgreSQL backend (cargo feature `postgres`)",
            ));
        }
    }
    let path = config.db_path();
    discard_unborn_file(&path)?;
    let kind = crypt::file_kind(&path)?;
    let device = |path: &std::path::Path| -> Result<Box<dyn crate::storage::Device>> {
        Ok(match &config.storage {
            Some(open) => open(path)?,
            None => Box::new(crate::storage::FileDevice::open(path)?),
        })
    };
    match (kind, &config.encryption) {
        // Held by another process (the daemon): that comes first, so that `engram mcp` forwards to it.
        (FileKind::Encrypted, None)
            if crypt::lock_file(&path, false).is_err_and(|e| e.kind() == crate::ErrorKind::Locked) =>
        {
            Err(crate::Error::new(
                crate::ErrorKind::Locked,
                "the store is open in another process (the daemon or another program); close it first",
            ))
        }
        (FileKind::Encrypted, None) => Err(crate::Error::new(
            crate::ErrorKind::WrongKey,
            format!(
                "the store {} is encrypted: give its key (engram serve --encrypted with a passphrase on the \
                 terminal or in ENGRAM_PASSPHRASE_FILE, --key-file FILE or --keychain; StoreConfig::encrypted)",
                path.display()
            ),
        )
        .with_code(crate::ErrorCode::KeyRequired)),
        (FileKind::Plain, Some(_)) => Err(crate::Error::new(
            crate::ErrorKind::Conflict,
            format!(
                "the store {} is not encrypted, but a key was given; encrypt it first with `engram encrypt`",
                path.display()
            ),
        )
        .with_code(crate::ErrorCode::StoreNotEncrypted)),
        (FileKind::Missing | FileKind::Encrypted, Some(enc)) => {
            let lock = crypt::lock_file(&path, true)?;
            let (dev, unlocked) = if kind == FileKind::Missing {
                let (dev, unlocked) = EncryptedDevice::create(device(&path)?, enc)?;
                (Box::new(dev), unlocked)
            } else {
                match EncryptedDevice::open_with(device(&path)?, enc, false)? {
                    crypt::Opened::Ready(dev, unlocked) => (dev, unlocked),
                    crypt::Opened::Unborn => {
                        drop(lock);
                        let aside = path.with_extension(format!("redb.incomplete-{}", Timestamp::now().0));
                        tracing::warn!(
                            path = %path.display(),
                            moved_to = %aside.display(),
                            "the encrypted store file was never initialised (its creation was cut short); moved \
                             aside, creating a new one"
                        );
                        std::fs::rename(&path, aside)?;
                        return open_db(config);
                    }
                }
            };
            let dev = Box::new(dev.with_lock(lock));
            Ok((Db::open(&path, config.cache_size_bytes, Some(dev))?, Some(unlocked)))
        }
        (FileKind::Missing | FileKind::Plain, None) => {
            let dev = match &config.storage {
                Some(open) => Some(open(&path)?),
                None => None,
            };
            Ok((Db::open(&path, config.cache_size_bytes, dev)?, None))
        }
    }
}

/// An encrypted redb store opened for reading only (nothing is written, not even its header; a wrong key changes
/// nothing): `None` for a plaintext or missing file, or one that needs redb's crash repair.
///
/// # Errors
/// As [`open_db`].
pub(crate) fn open_db_read_only(config: &StoreConfig) -> Result<Option<Db>> {
    let path = config.db_path();
    if config.database_url.is_some() || crypt::file_kind(&path)? != FileKind::Encrypted {
        return Ok(None);
    }
    let Some(enc) = &config.encryption else {
        return open_db(config).map(|_| None);
    };
    let lock = crypt::lock_file(&path, false)?;
    match EncryptedDevice::open_with(Box::new(crate::storage::FileDevice::open(&path)?), enc, true)? {
        crypt::Opened::Ready(dev, _) => {
            Db::open_read_only_on(&path, config.cache_size_bytes, Box::new(dev.with_lock(lock)))
        }
        crypt::Opened::Unborn => Ok(None),
    }
}
