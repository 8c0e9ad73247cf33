//! Encryption at rest for a redb store (docs/security.md): the store file, its side files and its exports.
//!
//! * **The store file** lives on an [`EncryptedDevice`], a [`super::Device`] under redb, so that every table and
//!   every page is covered. The file holds two copies of a plaintext key header (which cipher, the key slots
//!   that wrap the data key, a SHA-256 of itself), two copies of redb's header block, then one frame per 4 KiB
//!   block of redb's file: a random 192-bit nonce, the block under the header's [`Cipher`] (XAES-256-GCM where
//!   the CPU has AES instructions, XChaCha20-Poly1305 elsewhere) and its tag. A block's
//!   associated data names the file (a random 128-bit id) and the block's number, so that blocks cannot be
//!   swapped or moved between files (as SQLCipher 4's per-page MAC and Turso's per-page AEAD).
//! * **redb's commit** flips one byte of its header block (block 0), which also holds both commit slots. That
//!   block is kept in memory and written only at a sync, after the other blocks are on disk, to whichever of
//!   its two copies is not the last durable one, with a counter: a torn write damages only the copy being
//!   written, and the open takes the valid copy with the highest counter, which is the old or the new commit.
//! * **Keys** (`keys`): a random 256-bit data key encrypts the store. Each key slot of the header holds it
//!   wrapped (XChaCha20-Poly1305) under a key-encryption key from a passphrase (Argon2id, RFC 9106), a key file
//!   (HKDF-SHA256) or the OS keychain. A slot's tag is the key check: a key that opens no slot is
//!   [`crate::ErrorKind::WrongKey`]; a header whose SHA-256 fails is [`crate::ErrorKind::Corrupt`].
//! * **Side files** (the index snapshot, saved HNSW graphs) are sealed under the store's cipher in 64 KiB
//!   chunks (`side`, with a key derived from the data key); **encrypted exports** are age files (`sealed`): to
//!   an X25519 identity derived from the data key, or to a passphrase or recipients.
//!
//! Cryptography comes from maintained crates (RustCrypto's `xaes-256-gcm`, `chacha20poly1305`, `argon2`, `hkdf`,
//! `sha2`, and
//! `age`); this module only chooses and documents the parameters and the file layout.

mod cipher;
pub(crate) mod convert;
mod device;
mod header;
mod keychain;
pub(crate) mod keys;
pub(crate) mod sealed;
mod side;

use std::path::{Path, PathBuf};

pub use cipher::Cipher;
pub use device::{EncryptedDevice, Opened, Unlocked, lock_file};
pub use keys::{Argon2Params, write_key_file};
pub use sealed::{ArchiveKey, SideFiles, SideKey, SideWriter, is_age_file, is_sealed_side_file};

use secrecy::SecretString;

/// Where the key that opens an encrypted store comes from. `Debug` never shows a passphrase.
#[derive(Clone)]
pub enum KeySource {
    /// A passphrase, stretched with Argon2id (the parameters stored in the slot; new slots use
    /// [`Encryption::kdf`]).
    Passphrase(SecretString),
    /// A key file: at least 32 bytes of random data (for example `engram keygen FILE`), at most 64 KiB, read
    /// whole and put through HKDF-SHA256 with the slot's salt.
    KeyFile(PathBuf),
    /// A random key kept in the OS keychain (macOS Keychain, Windows Credential Manager, Linux kernel keyutils)
    /// under service `engram` and an account named after the store.
    Keychain,
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Passphrase(_) => f.write_str("Passphrase(..)"),
            KeySource::KeyFile(p) => write!(f, "KeyFile({})", p.display()),
            KeySource::Keychain => f.write_str("Keychain"),
        }
    }
}

impl KeySource {
    /// `passphrase`, `key_file` or `keychain`: what `/health` reports.
    pub fn kind(&self) -> &'static str {
        match self {
            KeySource::Passphrase(_) => "passphrase",
            KeySource::KeyFile(_) => "key_file",
            KeySource::Keychain => "keychain",
        }
    }
}

/// Encryption of a redb store ([`crate::StoreConfig::encryption`]): the key source that opens it, and the
/// Argon2id parameters of a passphrase slot made now (a new store, `engram encrypt`, `engram rekey`).
#[derive(Clone, Debug)]
pub struct Encryption {
    /// The key source.
    pub source: KeySource,
    /// Argon2id parameters for a new passphrase slot (default [`Argon2Params::default`]: 64 MiB, 3 passes,
    /// 4 lanes). An existing slot keeps the parameters stored in it.
    pub kdf: Argon2Params,
    /// The block cipher of a file made now (a new store, `engram encrypt`, `rekey --rotate-data-key`); `None`
    /// (the default) takes [`Cipher::fastest_here`]. An existing file keeps the cipher its header names.
    pub cipher: Option<Cipher>,
    /// The data key this source unwrapped, with its file's id: an open reads the store's format before it
    /// opens it for writing, and each would otherwise run Argon2id. Shared by clones; zeroized when dropped.
    pub(crate) unlocked: std::sync::Arc<parking_lot::Mutex<Option<UnlockedKey>>>,
}

/// A data key unwrapped from a file's key slots, with the id of that file (16 bytes).
pub(crate) type UnlockedKey = ([u8; 16], keys::SecretKey);

impl Encryption {
    /// Encryption opened by `source`, with the default Argon2id parameters.
    pub fn new(source: KeySource) -> Self {
        Encryption { source, kdf: Argon2Params::default(), cipher: None, unlocked: Default::default() }
    }

    /// This encryption with `cipher` for the files it makes.
    pub fn with_cipher(mut self, cipher: Cipher) -> Self {
        self.cipher = Some(cipher);
        self
    }

    /// Encryption by a passphrase.
    pub fn passphrase(passphrase: impl Into<String>) -> Self {
        Encryption::new(KeySource::Passphrase(SecretString::from(passphrase.into())))
    }

    /// Encryption by a key file.
    pub fn key_file(path: impl AsRef<Path>) -> Self {
        Encryption::new(KeySource::KeyFile(path.as_ref().to_path_buf()))
    }

    /// Encryption by a key in the OS keychain.
    pub fn keychain() -> Self {
        Encryption::new(KeySource::Keychain)
    }
}

/// What `/health` and the console say about a store's encryption. Never holds key material.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct EncryptionStatus {
    /// Whether the store file is encrypted.
    pub encrypted: bool,
    /// `xaes-256-gcm` or `xchacha20-poly1305` for an encrypted store; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cipher: Option<String>,
    /// The key source this process opened the store with (`passphrase`, `key_file`, `keychain`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_source: Option<String>,
    /// Every key slot of the file (a store may open by several sources), by kind.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub key_slots: Vec<String>,
    /// Argon2id parameters of the passphrase slot, as `m=65536,t=3,p=4` (KiB, passes, lanes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kdf: Option<String>,
    /// The encrypted file format's version byte (1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u8>,
}

impl EncryptionStatus {
    /// The status of a store that is not encrypted.
    pub fn plaintext() -> Self {
        EncryptionStatus {
            encrypted: false,
            cipher: None,
            key_source: None,
            key_slots: Vec::new(),
            kdf: None,
            format_version: None,
        }
    }
}

/// What a store file is, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// No file, or an empty one.
    Missing,
    /// A plaintext redb file (or one whose creation was cut short: zeros).
    Plain,
    /// An encrypted store (either key header copy carries the magic number).
    Encrypted,
}

/// What the file at `path` is. Reads at most its first 4,104 bytes.
///
/// # Errors
/// I/O errors other than a missing file.
pub fn file_kind(path: &Path) -> crate::Result<FileKind> {
    use std::io::Read;
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileKind::Missing),
        Err(e) => return Err(e.into()),
    };
    let mut head = Vec::with_capacity(header::SLOT_BYTES + 8);
    f.by_ref().take((header::SLOT_BYTES + 8) as u64).read_to_end(&mut head)?;
    if head.is_empty() {
        return Ok(FileKind::Missing);
    }
    let magic_at = |at: usize| head.get(at..at + header::MAGIC.len()) == Some(&header::MAGIC[..]);
    Ok(if magic_at(0) || magic_at(header::SLOT_BYTES) { FileKind::Encrypted } else { FileKind::Plain })
}

pub use crate::error::Damage;

/// The key slots of the encrypted file at `path` (to remove their keychain entries once it is replaced).
pub(crate) fn header_slots(path: &Path) -> crate::Result<Vec<keys::KeySlot>> {
    Ok(header::read(&crate::storage::FileDevice::open(path)?)?.header.slots)
}

pub(crate) use keys::forget_keychain as forget_keychain_slots;

pub(crate) fn corrupt(msg: impl Into<String>) -> crate::Error {
    crate::Error::new(crate::ErrorKind::Corrupt, msg)
}

pub(crate) fn wrong_key(msg: impl Into<String>) -> crate::Error {
    crate::Error::new(crate::ErrorKind::WrongKey, msg)
}

#[cfg(test)]
mod tests;
