//! The key hierarchy: a random 256-bit data key encrypts the store; each key slot holds it wrapped under a
//! key-encryption key (KEK) from a passphrase, a key file or the OS keychain.
//!
//! * Passphrase: Argon2id (RFC 9106) with the slot's parameters and 128-bit salt; new slots use RFC 9106's
//!   second recommended option (64 MiB, 3 passes, 4 lanes), above OWASP's minimum (19 MiB, 2 passes, 1 lane).
//! * Key file: HKDF-SHA256 (RFC 5869) of the file's bytes with the slot's salt, info `engram/key-file/v1`.
//! * Keychain: a random 256-bit key stored in the OS keychain as 64 hexadecimal digits.
//! * Wrapping: XChaCha20-Poly1305 with a random nonce; the associated data is the file id and the slot's kind
//!   with its parameters, so that a slot cannot be moved to another file or have its parameters changed.
//!   Its tag is the key check: a KEK that does not open it is a wrong key, never corruption.

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload, rand_core::RngCore};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, Zeroizing};

use super::{KeySource, corrupt, keychain, wrong_key};
use crate::error::{Error, ErrorKind, Result};

/// Bytes of a key (256 bits).
pub const KEY_BYTES: usize = 32;
/// Bytes of a wrapped data key: 24 nonce + 32 key + 16 tag.
const WRAPPED_BYTES: usize = 24 + KEY_BYTES + 16;
/// The largest key file read (64 KiB); the smallest is [`KEY_BYTES`].
pub const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// A 256-bit secret key, zeroized when dropped; `Debug` never shows it.
#[derive(Clone)]
pub struct SecretKey(Box<Zeroizing<[u8; KEY_BYTES]>>);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// A key from the operating system's random source.
    pub fn random() -> Self {
        let mut k = SecretKey::zeroed();
        OsRng.fill_bytes(&mut k.0[..]);
        k
    }

    /// A key of zeros, to be filled in place (no copy of the secret is left behind).
    pub(crate) fn zeroed() -> Self {
        SecretKey(Box::new(Zeroizing::new([0u8; KEY_BYTES])))
    }

    fn from_slice(b: &[u8]) -> Option<Self> {
        let mut k = SecretKey::zeroed();
        k.bytes_mut().copy_from_slice(b.get(..KEY_BYTES).filter(|_| b.len() == KEY_BYTES)?);
        Some(k)
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8; KEY_BYTES] {
        &mut self.0
    }

    /// The key's bytes.
    pub(crate) fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.0
    }

    /// An XChaCha20-Poly1305 cipher under this key (zeroizes its copy when dropped).
    pub(crate) fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.bytes().into())
    }
}

/// `n` random bytes.
pub(crate) fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    OsRng.fill_bytes(&mut b);
    b
}

/// Argon2id parameters (RFC 9106): memory in KiB, passes and lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Argon2Params {
    /// Memory, KiB (at least 19,456 = 19 MiB, OWASP's minimum; at most 4 GiB).
    pub memory_kib: u32,
    /// Passes over the memory, 1..=64 (at least 2 below 46 MiB, as OWASP asks).
    pub iterations: u32,
    /// Lanes, 1..=16.
    pub lanes: u32,
}

impl Default for Argon2Params {
    /// RFC 9106 §4, the second recommended option: 64 MiB, 3 passes, 4 lanes (about 0.15 s on one core of the
    /// reference machine, docs/security.md).
    fn default() -> Self {
        Argon2Params { memory_kib: 64 << 10, iterations: 3, lanes: 4 }
    }
}

impl Argon2Params {
    /// Checks the parameters against the bounds above; a slot read from a file is checked too, so that a
    /// hostile header cannot ask for terabytes.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] naming the bound.
    pub fn validate(&self) -> Result<()> {
        let weak = self.memory_kib < 19_456 || (self.memory_kib < 47_104 && self.iterations < 2);
        if weak || self.memory_kib > 4 << 20 || !(1..=64).contains(&self.iterations) || !(1..=16).contains(&self.lanes)
        {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "Argon2id parameters m={} KiB, t={}, p={} are outside the allowed range (m 19,456..=4,194,304 KiB, \
                     at least 2 passes below 46 MiB, t 1..=64, p 1..=16)",
                    self.memory_kib, self.iterations, self.lanes
                ),
            ));
        }
        Ok(())
    }

    /// `m=65536,t=3,p=4`.
    pub fn describe(&self) -> String {
        format!("m={},t={},p={}", self.memory_kib, self.iterations, self.lanes)
    }
}

/// A key slot's kind and the parameters its KEK is derived with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum SlotKind {
    Passphrase { kdf: Argon2Params, salt: [u8; 16] },
    KeyFile { salt: [u8; 16] },
    Keychain { service: String, account: String },
}

impl SlotKind {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            SlotKind::Passphrase { .. } => "passphrase",
            SlotKind::KeyFile { .. } => "key_file",
            SlotKind::Keychain { .. } => "keychain",
        }
    }

    fn matches(&self, source: &KeySource) -> bool {
        self.name() == source.kind()
    }
}

/// One key slot: the data key wrapped under a KEK of `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeySlot {
    pub kind: SlotKind,
    pub wrapped: Vec<u8>,
}

fn wrap_aad(file_id: &[u8; 16], kind: &SlotKind) -> Result<Vec<u8>> {
    let mut aad = b"engram/wrap/v1".to_vec();
    aad.extend_from_slice(file_id);
    aad.extend(postcard::to_allocvec(kind).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?);
    Ok(aad)
}

/// Reads a key file: at least [`KEY_BYTES`], at most [`MAX_KEY_FILE_BYTES`].
fn read_key_file(path: &std::path::Path) -> Result<Zeroizing<Vec<u8>>> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| {
        Error::new(ErrorKind::WrongKey, format!("the key file {} cannot be read: {e}", path.display()))
            .with_code(crate::error::ErrorCode::KeyRequired)
    })?;
    let mut bytes = Zeroizing::new(Vec::new());
    f.take(MAX_KEY_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() < KEY_BYTES || bytes.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "the key file {} holds {} bytes; a key file holds 32 bytes to 64 KiB of random data \
                 (`engram keygen FILE` writes one)",
                path.display(),
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

/// Writes a new key file at `path` (64 hexadecimal digits and a newline, mode 0600), refusing to replace one.
///
/// # Errors
/// [`ErrorKind::Conflict`] when the file exists; I/O errors.
pub fn write_key_file(path: &std::path::Path) -> Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::new(ErrorKind::Conflict, format!("{} exists; a key file is never overwritten", path.display()))
        } else {
            e.into()
        }
    })?;
    let key = SecretKey::random();
    let mut hex = Zeroizing::new(String::with_capacity(2 * KEY_BYTES + 1));
    for b in key.bytes() {
        hex.push_str(&format!("{b:02x}"));
    }
    hex.push('\n');
    f.write_all(hex.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

/// The KEK of a slot of `kind` from `source` (the caller checked that they match).
fn kek(kind: &SlotKind, source: &KeySource) -> Result<SecretKey> {
    let mut out = SecretKey::zeroed();
    match (kind, source) {
        (SlotKind::Passphrase { kdf, salt }, KeySource::Passphrase(p)) => {
            kdf.validate().map_err(|e| corrupt(format!("the key header's passphrase slot: {}", e.message())))?;
            let params = argon2::Params::new(kdf.memory_kib, kdf.iterations, kdf.lanes, Some(KEY_BYTES))
                .map_err(|e| corrupt(format!("the key header's Argon2id parameters: {e}")))?;
            argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
                .hash_password_into(p.expose_secret().as_bytes(), salt, &mut out.0[..])
                .map_err(|e| Error::new(ErrorKind::Internal, format!("Argon2id failed: {e}")))?;
        }
        (SlotKind::KeyFile { salt }, KeySource::KeyFile(path)) => {
            let bytes = read_key_file(path)?;
            hkdf::Hkdf::<sha2::Sha256>::new(Some(salt), &bytes)
                .expand(b"engram/key-file/v1", &mut out.0[..])
                .map_err(|e| Error::new(ErrorKind::Internal, format!("HKDF failed: {e}")))?;
        }
        (SlotKind::Keychain { service, account }, KeySource::Keychain) => {
            out = keychain::get(service, account)?;
        }
        _ => return Err(Error::new(ErrorKind::Internal, "a key source applied to a slot of another kind")),
    }
    Ok(out)
}

/// A new slot of `source`'s kind for `file_id` holding `data_key`. A keychain slot stores a fresh random KEK in
/// the keychain under an account named after the file id.
///
/// # Errors
/// Key file and keychain errors; [`ErrorKind::InvalidInput`] for weak Argon2id parameters.
pub(crate) fn new_slot(
    data_key: &SecretKey,
    file_id: &[u8; 16],
    source: &KeySource,
    kdf: Argon2Params,
) -> Result<KeySlot> {
    let kind = match source {
        KeySource::Passphrase(p) => {
            kdf.validate()?;
            if p.expose_secret().is_empty() {
                return Err(Error::new(ErrorKind::InvalidInput, "the passphrase is empty"));
            }
            SlotKind::Passphrase { kdf, salt: random() }
        }
        KeySource::KeyFile(_) => SlotKind::KeyFile { salt: random() },
        KeySource::Keychain => {
            // An account of its own per slot: a rekey from the keychain to the keychain writes the new entry
            // before the header names it, and removes the old one only after.
            let account = format!("store-{}-{}", hex(file_id), hex(&random::<4>()));
            let service = keychain::SERVICE.to_string();
            keychain::put(&service, &account, &SecretKey::random())?;
            SlotKind::Keychain { service, account }
        }
    };
    let kek = kek(&kind, source)?;
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let aad = wrap_aad(file_id, &kind)?;
    let ct = kek
        .cipher()
        .encrypt(&nonce, Payload { msg: data_key.bytes(), aad: &aad })
        .map_err(|_| Error::new(ErrorKind::Internal, "wrapping the data key failed"))?;
    let mut wrapped = nonce.to_vec();
    wrapped.extend_from_slice(&ct);
    Ok(KeySlot { kind, wrapped })
}

/// The data key from the first slot of `source`'s kind that it opens.
///
/// # Errors
/// [`ErrorKind::WrongKey`]: no slot of that kind, or none that the key opens (`key_required` when the key
/// file or keychain entry is missing); [`ErrorKind::Corrupt`] for a malformed slot.
pub(crate) fn unwrap(slots: &[KeySlot], file_id: &[u8; 16], source: &KeySource) -> Result<SecretKey> {
    let candidates: Vec<&KeySlot> = slots.iter().filter(|s| s.kind.matches(source)).collect();
    if candidates.is_empty() {
        let have: Vec<&str> = slots.iter().map(|s| s.kind.name()).collect();
        return Err(wrong_key(format!(
            "the store has no {} key slot (it opens with: {})",
            source.kind().replace('_', " "),
            have.join(", ").replace('_', " ")
        )));
    }
    for slot in candidates {
        if slot.wrapped.len() != WRAPPED_BYTES {
            return Err(corrupt("a key slot of the key header has the wrong length"));
        }
        let kek = kek(&slot.kind, source)?;
        let aad = wrap_aad(file_id, &slot.kind)?;
        let nonce = XNonce::from_slice(&slot.wrapped[..24]);
        if let Ok(mut dk) = kek.cipher().decrypt(nonce, Payload { msg: &slot.wrapped[24..], aad: &aad }) {
            let key = SecretKey::from_slice(&dk);
            dk.zeroize();
            return key.ok_or_else(|| corrupt("a key slot holds a key of the wrong length"));
        }
    }
    Err(wrong_key(match source {
        KeySource::Passphrase(_) => "wrong passphrase: it does not open this store",
        KeySource::KeyFile(_) => "wrong key file: it does not open this store",
        KeySource::Keychain => "the key in the OS keychain does not open this store",
    }))
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Removes the keychain entries of `slots` (after a rekey or a decrypt made them unused). Errors are logged.
pub(crate) fn forget_keychain(slots: &[KeySlot]) {
    for s in slots {
        if let SlotKind::Keychain { service, account } = &s.kind
            && let Err(e) = keychain::delete(service, account)
        {
            tracing::warn!(account = %account, error = %e, "removing the old keychain entry failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_file(dir: &std::path::Path) -> KeySource {
        let p = dir.join("k");
        write_key_file(&p).unwrap();
        KeySource::KeyFile(p)
    }

    #[test]
    fn a_slot_opens_with_its_key_and_not_with_another() {
        let dir = tempfile::tempdir().unwrap();
        let (dk, id) = (SecretKey::random(), random::<16>());
        let src = key_file(dir.path());
        let slot = new_slot(&dk, &id, &src, Argon2Params::default()).unwrap();
        assert_eq!(unwrap(std::slice::from_ref(&slot), &id, &src).unwrap().bytes(), dk.bytes());
        let p2 = dir.path().join("k2");
        write_key_file(&p2).unwrap();
        let e = unwrap(std::slice::from_ref(&slot), &id, &KeySource::KeyFile(p2)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongKey);
        // Another file id: the associated data differs.
        let e = unwrap(std::slice::from_ref(&slot), &random::<16>(), &src).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongKey);
        // A passphrase against a key-file store: no slot of that kind.
        let e = unwrap(&[slot], &id, &KeySource::Passphrase("x".to_string().into())).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WrongKey);
        assert!(e.message().contains("no passphrase key slot"), "{}", e.message());
    }

    #[test]
    fn weak_or_hostile_argon2_parameters_are_refused() {
        for (m, t, p) in
            [(8192, 3, 1), (19_456, 1, 1), (8 << 20, 3, 1), (65_536, 0, 1), (65_536, 3, 0), (65_536, 3, 64)]
        {
            assert!(Argon2Params { memory_kib: m, iterations: t, lanes: p }.validate().is_err(), "{m} {t} {p}");
        }
        assert!(Argon2Params { memory_kib: 19_456, iterations: 2, lanes: 1 }.validate().is_ok());
        assert!(Argon2Params { memory_kib: 47_104, iterations: 1, lanes: 1 }.validate().is_ok());
        assert!(Argon2Params::default().validate().is_ok());
    }

    #[test]
    fn key_files_must_hold_enough_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("short");
        std::fs::write(&p, b"too short").unwrap();
        let e = new_slot(&SecretKey::random(), &random::<16>(), &KeySource::KeyFile(p), Argon2Params::default())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(write_key_file(&dir.path().join("short")).is_err(), "an existing file is never overwritten");
    }
}
