//! Encrypting, decrypting and rekeying a store in its data directory (`engram encrypt`, `engram decrypt`,
//! `engram rekey`), with its side files and backup copies. The store file is converted through a temporary
//! file beside it (`storage::crypt::convert`), checked, and swapped in with the old file kept as a backup until
//! the new one opens; the side files (index snapshot, saved HNSW graphs) are resealed so that the next open
//! stays fast; upgrade backups (`engram.redb.format-<n>.bak`) are converted with the store. None of them runs
//! while another process holds the store.

use std::path::{Path, PathBuf};

use crate::config::StoreConfig;
use crate::error::{Error, ErrorCode, ErrorKind, Result};
use crate::storage::Db;
use crate::storage::crypt::convert::{self, Sealing};
use crate::storage::crypt::{self, Encryption, EncryptionStatus, FileKind, KeySource, SideFiles};

/// What a conversion did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConversionReport {
    /// The store's encryption now.
    pub status: EncryptionStatus,
    /// Bytes of redb's file converted.
    pub bytes: u64,
    /// Side files resealed (index snapshot, HNSW graphs); a side file that could not be is deleted (rebuilt at
    /// the next open).
    pub side_files: usize,
    /// Upgrade backups converted with the store.
    pub backups: Vec<String>,
    /// Files left as they were that still hold plaintext (exports, files moved aside): the caller should tell
    /// the person.
    pub plaintext_left: Vec<String>,
    /// Milliseconds taken.
    pub elapsed_ms: f64,
}

fn store_path(data_dir: &Path) -> PathBuf {
    StoreConfig::new(data_dir).db_path()
}

/// The upgrade backups of the store at `db`: `engram.redb.format-<n>.bak`.
fn backups(db: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (db.parent(), db.file_name().and_then(|n| n.to_str())) else { return Vec::new() };
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{name}.format-")) && n.ends_with(".bak"))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Side files of the store in `data_dir`: the index snapshot and the saved HNSW graphs.
fn side_files(data_dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![super::snapshot::path(data_dir)];
    if let Ok(rd) = std::fs::read_dir(data_dir.join("hnsw")) {
        out.extend(rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "graph")));
    }
    out.retain(|p| p.is_file());
    out
}

/// Files in `data_dir` that hold the store's content in plaintext and that a conversion leaves alone.
fn plaintext_copies(data_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut walk = vec![data_dir.to_path_buf()];
    while let Some(dir) = walk.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            if p.is_dir() {
                if name == "exports" {
                    walk.push(p);
                }
                continue;
            }
            let export = dir.ends_with("exports") && !crypt::is_age_file(&p);
            let incomplete = name.contains(".redb.incomplete-") && crypt::file_kind(&p).ok() == Some(FileKind::Plain);
            if export || incomplete {
                out.push(p.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Reseals each side file from `from` to `to` (through a temporary file); one that cannot be read or written
/// is deleted (a cache: rebuilt at the next open). Returns how many were resealed.
fn reseal(data_dir: &Path, from: &SideFiles, to: &SideFiles) -> usize {
    let mut n = 0;
    for p in side_files(data_dir) {
        let tmp = p.with_extension("reseal.tmp");
        // Streamed: memory does not grow with the file (an index snapshot at 1M memories is 270 to 480 MB).
        let done = from.reader(&p).and_then(|mut r| {
            let mut w = to.create(&tmp)?;
            std::io::copy(&mut r, &mut w)?;
            w.finish()?.sync_all()?;
            std::fs::rename(&tmp, &p)
        });
        match done {
            Ok(()) => n += 1,
            Err(e) => {
                tracing::info!(file = %p.display(), error = %e, "side file not resealed; deleted, rebuilt at the next open");
                let _ = std::fs::remove_file(&tmp);
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    n
}

/// Checks that no other process holds the plaintext store at `path`, repairing it if it was not closed cleanly,
/// and returns a read-only handle that keeps daemons out while the copy runs.
fn hold_plaintext(path: &Path) -> Result<Db> {
    drop(Db::open(path, 1 << 20, None)?);
    Db::open_read_only(path, 1 << 20)?
        .ok_or_else(|| Error::new(ErrorKind::Internal, "the store needs a repair after a clean open"))
}

/// Swaps `tmp` in for `path`, keeping the old file at `keep` until `verify` passes on the new one, then removes
/// the old file. When `verify` fails, the old file is put back.
fn swap(path: &Path, tmp: &Path, keep: &Path, verify: impl Fn() -> Result<()>) -> Result<()> {
    std::fs::rename(path, keep)?;
    std::fs::rename(tmp, path)?;
    if let Some(d) = path.parent().and_then(|d| std::fs::File::open(d).ok()) {
        let _ = d.sync_all();
    }
    if let Err(e) = verify() {
        let _ = std::fs::rename(path, tmp);
        std::fs::rename(keep, path)?;
        return Err(e);
    }
    std::fs::remove_file(keep)?;
    Ok(())
}

fn lock_error(path: &Path) -> impl Fn(Error) -> Error + '_ {
    move |e| {
        if e.kind() == ErrorKind::Locked {
            Error::new(
                ErrorKind::Locked,
                format!("the store {} is open in another process (the daemon?); stop it first", path.display()),
            )
        } else {
            e
        }
    }
}

/// Encrypts the plaintext store in `data_dir` with a new random data key and one key slot for `enc.source`
/// (docs/security.md), with its side files and upgrade backups. `progress(done, total)` gets bytes of the store
/// file. Memory use does not grow with the store (1 MiB chunks).
///
/// # Errors
/// * [`ErrorKind::Locked`]: another process (the daemon) holds the store; nothing changed.
/// * [`ErrorKind::NotFound`]: no store in `data_dir`; [`ErrorKind::Conflict`]: it is encrypted already.
/// * Key source errors; I/O errors (the plaintext store is left in place).
pub fn encrypt_store(data_dir: &Path, enc: &Encryption, progress: &dyn Fn(u64, u64)) -> Result<ConversionReport> {
    let started = std::time::Instant::now();
    let path = store_path(data_dir);
    match crypt::file_kind(&path)? {
        FileKind::Missing => return Err(no_store(&path)),
        FileKind::Encrypted => {
            return Err(Error::new(ErrorKind::Conflict, format!("the store {} is encrypted already", path.display())));
        }
        FileKind::Plain => {}
    }
    let hold = hold_plaintext(&path).map_err(lock_error(&path))?;
    let sealing = Sealing::new(enc)?;
    let tmp = path.with_extension("redb.encrypting");
    let unlocked = convert::encrypt_file(&path, &tmp, &sealing, progress)?;
    let bytes = std::fs::metadata(&path)?.len();
    let mut converted = Vec::new();
    for b in backups(&path) {
        if crypt::file_kind(&b)? != FileKind::Plain {
            continue;
        }
        let t = b.with_extension("bak.encrypting");
        convert::encrypt_file(&b, &t, &sealing, &|_, _| {})?;
        std::fs::rename(&t, &b)?;
        converted.push(b.display().to_string());
    }
    let side = reseal(data_dir, &SideFiles::default(), &SideFiles::new(Some(unlocked.side.clone())));
    let keep = path.with_extension("redb.plaintext-before-encrypt");
    // The hold is on the old file's inode: it keeps daemons out until the new file is in place.
    swap(&path, &tmp, &keep, || verify(data_dir, Some(enc.clone())))?;
    drop(hold);
    Ok(ConversionReport {
        status: unlocked.status,
        bytes,
        side_files: side,
        backups: converted,
        plaintext_left: plaintext_copies(data_dir),
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// Decrypts the encrypted store in `data_dir` (opened with `source`) back to a plaintext redb file, with its side
/// files and upgrade backups, removing the keychain entries its slots used.
///
/// # Errors
/// * [`ErrorKind::Locked`]: another process holds the store; [`ErrorKind::WrongKey`]: `source` does not open
///   it; nothing changed in either case.
/// * [`ErrorKind::NotFound`]: no store; [`ErrorKind::Conflict`]: it is not encrypted.
pub fn decrypt_store(data_dir: &Path, source: &KeySource, progress: &dyn Fn(u64, u64)) -> Result<ConversionReport> {
    let started = std::time::Instant::now();
    let path = store_path(data_dir);
    expect_encrypted(&path)?;
    let lock = crypt::lock_file(&path, true).map_err(lock_error(&path))?;
    let tmp = path.with_extension("redb.decrypting");
    let unlocked = convert::decrypt_file(&path, &tmp, source, progress)?;
    let bytes = std::fs::metadata(&tmp)?.len();
    let mut converted = Vec::new();
    for b in backups(&path) {
        if crypt::file_kind(&b)? != FileKind::Encrypted {
            continue;
        }
        let t = b.with_extension("bak.decrypting");
        match convert::decrypt_file(&b, &t, source, &|_, _| {}) {
            Ok(_) => {
                std::fs::rename(&t, &b)?;
                converted.push(b.display().to_string());
            }
            Err(e) => {
                let _ = std::fs::remove_file(&t);
                tracing::warn!(backup = %b.display(), error = %e, "backup left encrypted: the key does not open it");
            }
        }
    }
    let side = reseal(data_dir, &SideFiles::new(Some(unlocked.side.clone())), &SideFiles::default());
    let slots = crypt::header_slots(&path)?;
    let keep = path.with_extension("redb.encrypted-before-decrypt");
    swap(&path, &tmp, &keep, || verify(data_dir, None))?;
    drop(lock);
    crypt::forget_keychain_slots(&slots);
    Ok(ConversionReport {
        status: EncryptionStatus::plaintext(),
        bytes,
        side_files: side,
        backups: converted,
        plaintext_left: Vec::new(),
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// Changes how the encrypted store in `data_dir` is opened: opens it with `source`, then gives it a key slot for
/// `new.source`, replacing the others (or beside them with `add`). Without `rotate` only the key header changes
/// (O(1)); with `rotate` every block is re-encrypted under a new data key and file id (through a temporary
/// file, as [`encrypt_store`]), and the store then has the one new slot. Upgrade backups follow the store.
///
/// # Errors
/// * [`ErrorKind::Locked`]: another process holds the store; [`ErrorKind::WrongKey`]: `source` does not open
///   it; nothing changed in either case.
/// * Key source errors for `new`; [`ErrorKind::InvalidInput`] past 8 slots or for `add` with `rotate`.
pub fn rekey_store(
    data_dir: &Path,
    source: &KeySource,
    new: &Encryption,
    add: bool,
    rotate: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<ConversionReport> {
    let started = std::time::Instant::now();
    let path = store_path(data_dir);
    expect_encrypted(&path)?;
    if !rotate {
        let mut files = vec![path.clone()];
        files.extend(backups(&path).into_iter().filter(|b| crypt::file_kind(b).ok() == Some(FileKind::Encrypted)));
        let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
        let (status, skipped) = convert::rekey(&refs, source, new, add).map_err(lock_error(&path))?;
        for s in &skipped {
            tracing::warn!(file = %s.display(), "not rekeyed: it holds another data key (written before a rotation)");
        }
        return Ok(ConversionReport {
            status,
            bytes: 0,
            side_files: 0,
            backups: files[1..].iter().filter(|f| !skipped.contains(f)).map(|f| f.display().to_string()).collect(),
            plaintext_left: Vec::new(),
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
        });
    }
    if add {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "--add and --rotate-data-key do not go together: a rotated store has the one new key slot",
        ));
    }
    let lock = crypt::lock_file(&path, true).map_err(lock_error(&path))?;
    let slots = crypt::header_slots(&path)?;
    let sealing = Sealing::new(new)?;
    let tmp = path.with_extension("redb.rekeying");
    let (old, unlocked) = convert::reencrypt_file(&path, &tmp, source, &sealing, progress)?;
    let bytes = std::fs::metadata(&path)?.len();
    let mut converted = Vec::new();
    for b in backups(&path) {
        let t = b.with_extension("bak.rekeying");
        if crypt::file_kind(&b)? == FileKind::Encrypted
            && convert::reencrypt_file(&b, &t, source, &sealing, &|_, _| {}).is_ok()
        {
            std::fs::rename(&t, &b)?;
            converted.push(b.display().to_string());
        } else {
            let _ = std::fs::remove_file(&t);
        }
    }
    let side = reseal(data_dir, &SideFiles::new(Some(old.side.clone())), &SideFiles::new(Some(unlocked.side.clone())));
    let keep = path.with_extension("redb.before-rekey");
    swap(&path, &tmp, &keep, || verify(data_dir, Some(new.clone())))?;
    drop(lock);
    crypt::forget_keychain_slots(&slots);
    Ok(ConversionReport {
        status: unlocked.status,
        bytes,
        side_files: side,
        backups: converted,
        plaintext_left: Vec::new(),
        elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

fn no_store(path: &Path) -> Error {
    Error::new(ErrorKind::NotFound, format!("no store at {}", path.display())).with_code(ErrorCode::FileNotFound)
}

fn expect_encrypted(path: &Path) -> Result<()> {
    match crypt::file_kind(path)? {
        FileKind::Missing => Err(no_store(path)),
        FileKind::Plain => {
            Err(Error::new(ErrorKind::Conflict, format!("the store {} is not encrypted", path.display()))
                .with_code(ErrorCode::StoreNotEncrypted))
        }
        FileKind::Encrypted => Ok(()),
    }
}

/// Opens the converted store's file (with `enc`'s key) and reads its format: the swap keeps the old file until
/// this passes.
fn verify(data_dir: &Path, enc: Option<Encryption>) -> Result<()> {
    let mut config = StoreConfig::new(data_dir);
    config.encryption = enc;
    let (db, _) = super::db::open_db(&config)?;
    let rtx = db.read()?;
    crate::store::records::meta::meta(&rtx)?;
    Ok(())
}
