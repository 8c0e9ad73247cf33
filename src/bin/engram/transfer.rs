//! `engram export`, `engram import` and `engram upgrade`: whole-store commands that run without the daemon.

use std::path::{Path, PathBuf};

use engram::storage::crypt::ArchiveKey;
use engram::{KnowledgeStore, StoreConfig};

use super::DatabaseArgs;
use super::keys::{self, KeyArgs};

/// How `engram export` seals its archive.
pub struct ArchiveSeal {
    /// With a passphrase.
    pub passphrase: bool,
    /// To these age recipients.
    pub recipients: Vec<String>,
    /// To the store's own key.
    pub store_key: bool,
}

impl ArchiveSeal {
    fn key(self) -> engram::Result<Option<ArchiveKey>> {
        Ok(if !self.recipients.is_empty() {
            Some(ArchiveKey::Recipients(self.recipients))
        } else if self.store_key {
            Some(ArchiveKey::Store)
        } else if self.passphrase {
            let file = std::env::var_os("ENGRAM_EXPORT_PASSPHRASE_FILE").map(PathBuf::from);
            Some(ArchiveKey::Passphrase(keys::passphrase(file.as_deref(), "passphrase for the archive: ", true)?))
        } else {
            None
        })
    }
}

/// The configuration of the store in `data_dir` for a command run without the daemon.
pub(crate) fn config(data_dir: &Path, database: DatabaseArgs, key: &KeyArgs) -> engram::Result<StoreConfig> {
    let mut config = StoreConfig::new(data_dir);
    config.database_url = database.database_url;
    config.encryption = key.encryption(data_dir)?;
    Ok(config)
}

/// `engram export`: the whole store into an archive.
pub fn export(
    path: Option<PathBuf>,
    data_dir: PathBuf,
    no_zip: bool,
    overwrite: bool,
    seal: ArchiveSeal,
    database: DatabaseArgs,
    key: &KeyArgs,
) -> engram::Result<()> {
    let mut config = config(&data_dir, database, key)?;
    // A path named on the command line is the operator's own: allow its directory.
    if let Some(dir) =
        path.as_ref().and_then(|p| std::path::absolute(p).ok()).and_then(|p| p.parent().map(|d| d.to_path_buf()))
    {
        std::fs::create_dir_all(&dir)?;
        config = config.allow_path(dir);
    }
    let encrypt = seal.key()?;
    let store = KnowledgeStore::open(config)?;
    let opts = engram::ExportOptions {
        path: path.map(|p| std::path::absolute(&p).unwrap_or(p)),
        compress: !no_zip,
        overwrite,
        include: engram::Include::default(),
        encrypt,
    };
    let r = store.transfer().export(&opts)?;
    let sealed = if r.encrypted { ", encrypted (age)" } else { "" };
    println!("exported to {} ({} bytes{sealed}, sha256 {})", r.export_path, r.bytes, r.sha256);
    for (k, v) in &r.counts {
        println!("  {k}: {v}");
    }
    if !r.encrypted && store.admin().encryption().encrypted {
        eprintln!("note: the store is encrypted but this archive is not; --encrypt seals it");
    }
    Ok(())
}

/// The passphrase an encrypted archive needs, if it was sealed to one.
fn archive_passphrase(path: &Path, file: Option<&Path>) -> engram::Result<Option<secrecy::SecretString>> {
    if !engram::storage::crypt::is_age_file(path) {
        return Ok(None);
    }
    let scrypt = std::fs::File::open(path)
        .ok()
        .and_then(|f| age::Decryptor::new(std::io::BufReader::new(f)).ok())
        .is_some_and(|d| d.is_scrypt());
    if !scrypt {
        return Ok(None);
    }
    keys::passphrase(file, "passphrase of the archive: ", false).map(Some)
}

/// `engram import`: an archive into the store, with a progress bar.
pub fn import(
    path: PathBuf,
    data_dir: PathBuf,
    mode: String,
    archive_passphrase_file: Option<PathBuf>,
    database: DatabaseArgs,
    key: &KeyArgs,
) -> engram::Result<()> {
    let path = std::path::absolute(&path).unwrap_or(path);
    let mut config = config(&data_dir, database, key)?;
    if let Some(dir) = path.parent() {
        config = config.allow_path(dir);
    }
    let passphrase = archive_passphrase(&path, archive_passphrase_file.as_deref())?;
    let store = std::sync::Arc::new(KnowledgeStore::open(config)?);
    let mode = engram::ImportMode::parse(&mode).unwrap_or_default();
    let progress = std::sync::Arc::new(engram::ImportProgress::default());
    let worker = {
        let (store, progress, path) = (store.clone(), progress.clone(), path.clone());
        std::thread::spawn(move || store.transfer().import_with(&path, mode, &progress, passphrase.as_ref()))
    };
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("importing {bar:40} {pos}/{len} records, {per_sec}, ETA {eta}")
    {
        bar.set_style(style);
    }
    while !worker.is_finished() {
        bar.set_length(progress.total.load(std::sync::atomic::Ordering::Relaxed));
        bar.set_position(progress.processed.load(std::sync::atomic::Ordering::Relaxed));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out =
        worker.join().map_err(|_| engram::Error::new(engram::ErrorKind::Internal, "the import thread panicked"))?;
    match out {
        Ok(r) => {
            bar.finish_and_clear();
            println!("imported {} records in {:.1} s", r.records, r.elapsed_ms / 1000.0);
            for (k, c) in &r.counts {
                if c.inserted + c.updated + c.skipped > 0 {
                    println!("  {k}: {} inserted, {} updated, {} skipped", c.inserted, c.updated, c.skipped);
                }
            }
            println!("vectors are recomputed in the background when the store next opens (progress in /health)");
            Ok(())
        }
        Err(e) => {
            bar.abandon();
            Err(e)
        }
    }
}

/// `engram upgrade [--check]`.
pub fn upgrade(check: bool, data_dir: PathBuf, database: DatabaseArgs, key: &KeyArgs) -> engram::Result<()> {
    let config = config(&data_dir, database, key)?;
    let plan = engram::store::upgrade::plan_for(&config)?;
    let found = match plan.found {
        None => {
            println!("no store yet: opening creates one at format {}", plan.current);
            return Ok(());
        }
        Some(f) => f,
    };
    if plan.refused {
        println!(
            "the store is at format {found}, newer than this release (format {}): it would be refused",
            plan.current
        );
        return Err(engram::Error::new(engram::ErrorKind::Corrupt, "the store is newer than this release"));
    }
    if plan.steps.is_empty() {
        println!("the store is at format {found}, this release's: nothing to do");
        return Ok(());
    }
    println!("the store is at format {found}; this release writes format {}:", plan.current);
    for s in &plan.steps {
        println!("  {} -> {}: {} ({} records)", s.from, s.to, s.what, s.records);
    }
    if let Some(b) = &plan.backup {
        println!("  a copy of the file is written first: {}", b.display());
    }
    if check {
        println!("(--check: nothing was changed)");
        return Ok(());
    }
    match engram::store::upgrade::upgrade_store(&config)? {
        Some(r) => println!(
            "upgraded from format {} to {}: {} records rewritten in {:.0} ms{}",
            r.from,
            r.to,
            r.records,
            r.elapsed_ms,
            r.backup.map(|b| format!("; backup {b}")).unwrap_or_default()
        ),
        None => println!("the store was already current (another process upgraded it)"),
    }
    Ok(())
}
