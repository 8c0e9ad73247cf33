//! The key options of every command that opens a store, and the commands that encrypt, decrypt and rekey one
//! (docs/security.md).

use std::path::{Path, PathBuf};

use engram::storage::crypt::{Encryption, FileKind, KeySource};
use engram::{Error, ErrorKind, Result};
use secrecy::{ExposeSecret, SecretString};

/// How the store's key is given. At most one of `--encrypted` (a passphrase), `--key-file` and `--keychain`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct KeyArgs {
    /// The store is encrypted with a passphrase (or is created so): read it from ENGRAM_PASSPHRASE_FILE, else
    /// ask on the terminal.
    #[arg(long)]
    pub encrypted: bool,
    /// A file holding the passphrase (its first line); implies --encrypted.
    #[arg(long, env = "ENGRAM_PASSPHRASE_FILE", hide_env_values = true)]
    pub passphrase_file: Option<PathBuf>,
    /// A key file (32 bytes to 64 KiB of random data; `engram keygen FILE` writes one) that opens the store.
    #[arg(long, env = "ENGRAM_KEY_FILE", hide_env_values = true)]
    pub key_file: Option<PathBuf>,
    /// The store's key is kept in the OS keychain (macOS Keychain, Windows Credential Manager, Linux keyutils).
    #[arg(long)]
    pub keychain: bool,
}

/// Reads a passphrase: the first line of `file`, else from the terminal (twice when `confirm`).
pub fn passphrase(file: Option<&Path>, prompt: &str, confirm: bool) -> Result<SecretString> {
    if let Some(f) = file {
        let text = zeroize::Zeroizing::new(std::fs::read_to_string(f).map_err(|e| {
            Error::new(ErrorKind::InvalidInput, format!("the passphrase file {} cannot be read: {e}", f.display()))
        })?);
        let line = text.lines().next().unwrap_or_default();
        if line.is_empty() {
            return Err(Error::new(ErrorKind::InvalidInput, format!("the passphrase file {} is empty", f.display())));
        }
        return Ok(SecretString::from(line.to_string()));
    }
    let ask = |p: &str| {
        rpassword::prompt_password(p).map(SecretString::from).map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "no terminal to read the passphrase from ({e}): set ENGRAM_PASSPHRASE_FILE to a file holding \
                     it, or use --key-file"
                ),
            )
        })
    };
    let first = ask(prompt)?;
    if first.expose_secret().is_empty() {
        return Err(Error::new(ErrorKind::InvalidInput, "the passphrase is empty"));
    }
    if confirm {
        let again = ask("the same passphrase again: ")?;
        if again.expose_secret() != first.expose_secret() {
            return Err(Error::new(ErrorKind::InvalidInput, "the two passphrases differ; nothing was changed"));
        }
    }
    Ok(first)
}

impl KeyArgs {
    fn count(&self) -> usize {
        [self.encrypted || self.passphrase_file.is_some(), self.key_file.is_some(), self.keychain]
            .iter()
            .filter(|b| **b)
            .count()
    }

    /// The key source given, if any; a passphrase is read now (confirmed on the terminal when `new`).
    pub fn source(&self, what: &str, new: bool) -> Result<Option<KeySource>> {
        if self.count() > 1 {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "give one key: --encrypted (a passphrase), --key-file FILE or --keychain",
            ));
        }
        Ok(if let Some(f) = &self.key_file {
            Some(KeySource::KeyFile(f.clone()))
        } else if self.keychain {
            Some(KeySource::Keychain)
        } else if self.encrypted || self.passphrase_file.is_some() {
            let prompt = if new { format!("new passphrase for {what}: ") } else { format!("passphrase of {what}: ") };
            Some(KeySource::Passphrase(passphrase(self.passphrase_file.as_deref(), &prompt, new)?))
        } else {
            None
        })
    }

    /// The encryption of the store in `data_dir` for an open: none for a plaintext store opened without a key;
    /// a passphrase is confirmed when it makes a new store.
    pub fn encryption(&self, data_dir: &Path) -> Result<Option<Encryption>> {
        let path = data_dir.join("engram.redb");
        let new = engram::storage::crypt::file_kind(&path)? == FileKind::Missing;
        Ok(self.source(&path.display().to_string(), new)?.map(|s| {
            if new && matches!(s, KeySource::Keychain) {
                warn_keychain_only();
            }
            Encryption::new(s)
        }))
    }
}

fn warn_keychain_only() {
    if cfg!(target_os = "linux") {
        eprintln!(
            "warning: the Linux keyring (keyutils) forgets keys at reboot; add a passphrase or key file as well: \
             engram rekey --keychain --add --new-key-file FILE"
        );
    }
}

/// The new key of `engram encrypt` and `engram rekey`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct NewKeyArgs {
    /// The new key is a key file (`engram keygen FILE` writes one).
    #[arg(long, conflicts_with = "new_keychain")]
    pub new_key_file: Option<PathBuf>,
    /// The new key is kept in the OS keychain.
    #[arg(long)]
    pub new_keychain: bool,
    /// A file holding the new passphrase (its first line); without it and without another new key, the new
    /// passphrase is asked on the terminal.
    #[arg(long, env = "ENGRAM_NEW_PASSPHRASE_FILE", hide_env_values = true)]
    pub new_passphrase_file: Option<PathBuf>,
    /// The block cipher of the new file: xaes-256-gcm or xchacha20-poly1305 (default: xaes-256-gcm where the
    /// CPU has AES instructions, else xchacha20-poly1305). With `rekey`, only with --rotate-data-key.
    #[arg(long)]
    pub cipher: Option<engram::storage::crypt::Cipher>,
}

impl NewKeyArgs {
    fn encryption(&self, what: &str) -> Result<Encryption> {
        let mut enc = Encryption::new(if let Some(f) = &self.new_key_file {
            KeySource::KeyFile(f.clone())
        } else if self.new_keychain {
            warn_keychain_only();
            KeySource::Keychain
        } else {
            KeySource::Passphrase(passphrase(
                self.new_passphrase_file.as_deref(),
                &format!("new passphrase for {what}: "),
                true,
            )?)
        });
        enc.cipher = self.cipher;
        Ok(enc)
    }
}

fn bar(total_known: bool) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    if total_known
        && let Ok(style) =
            indicatif::ProgressStyle::with_template("{msg} {bar:40} {bytes}/{total_bytes}, {bytes_per_sec}, ETA {eta}")
    {
        bar.set_style(style);
    }
    bar
}

fn report(verb: &str, r: &engram::store::encryption::ConversionReport) {
    println!(
        "{verb}: {} bytes in {:.1} s; {} side files resealed; {} backups converted",
        r.bytes,
        r.elapsed_ms / 1000.0,
        r.side_files,
        r.backups.len()
    );
    if r.status.encrypted {
        println!(
            "  cipher {}, key slots: {}",
            r.status.cipher.as_deref().unwrap_or("?"),
            r.status.key_slots.join(", ").replace('_', " ")
        );
    }
    if !r.plaintext_left.is_empty() {
        println!("  these files still hold plaintext; remove them or export again with --encrypt:");
        for f in &r.plaintext_left {
            println!("    {f}");
        }
    }
}

/// `engram encrypt`.
pub fn encrypt(data_dir: &Path, new: &NewKeyArgs) -> Result<()> {
    let enc = new.encryption(&data_dir.join("engram.redb").display().to_string())?;
    let b = bar(true);
    b.set_message("encrypting");
    let r = engram::store::encryption::encrypt_store(data_dir, &enc, &|done, total| {
        b.set_length(total);
        b.set_position(done);
    })?;
    b.finish_and_clear();
    report("encrypted", &r);
    if matches!(enc.source, KeySource::Passphrase(_)) {
        println!("  keep the passphrase safe: without it the data cannot be recovered (docs/security.md)");
    }
    Ok(())
}

/// `engram decrypt`.
pub fn decrypt(data_dir: &Path, key: &KeyArgs) -> Result<()> {
    let what = data_dir.join("engram.redb").display().to_string();
    let source = key.source(&what, false)?.ok_or_else(no_key)?;
    let b = bar(true);
    b.set_message("decrypting");
    let r = engram::store::encryption::decrypt_store(data_dir, &source, &|done, total| {
        b.set_length(total);
        b.set_position(done);
    })?;
    b.finish_and_clear();
    report("decrypted", &r);
    Ok(())
}

/// `engram rekey`.
pub fn rekey(data_dir: &Path, key: &KeyArgs, new: &NewKeyArgs, add: bool, rotate: bool) -> Result<()> {
    let what = data_dir.join("engram.redb").display().to_string();
    let source = key.source(&what, false)?.ok_or_else(no_key)?;
    if new.cipher.is_some() && !rotate {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "--cipher changes the cipher of every block: it goes with --rotate-data-key",
        ));
    }
    let enc = new.encryption(&what)?;
    let b = bar(rotate);
    b.set_message("re-encrypting");
    let r = engram::store::encryption::rekey_store(data_dir, &source, &enc, add, rotate, &|done, total| {
        b.set_length(total);
        b.set_position(done);
    })?;
    b.finish_and_clear();
    if rotate {
        report("re-encrypted under a new data key", &r);
    } else {
        println!(
            "rekeyed in {:.0} ms: the store now opens with {}",
            r.elapsed_ms,
            r.status.key_slots.join(", ").replace('_', " ")
        );
    }
    Ok(())
}

/// `engram keygen FILE`.
pub fn keygen(path: &Path) -> Result<()> {
    engram::storage::crypt::write_key_file(path)?;
    println!("wrote a new key file to {} (mode 0600); keep a copy somewhere safe", path.display());
    Ok(())
}

fn no_key() -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        "give the store's key: --encrypted (a passphrase), --key-file FILE or --keychain",
    )
}
