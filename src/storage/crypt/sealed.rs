//! Sealed files beside the store: its side files and encrypted exports.
//!
//! * **Side files** (`indexes.snapshot`, `hnsw/*.graph`) are sealed in the side-file format of `super::side`
//!   (the store's block cipher, in 64 KiB chunks that open on every core), under a key derived from the data
//!   key, so they open with the store's key and nothing else, and a truncated or changed file fails as a
//!   whole, never in part. Side files of earlier releases, age files to the store's identity (below), are
//!   still read.
//! * **Exports** ([`ArchiveKey`]) are age files (age-encryption.org/v1: ChaCha20-Poly1305 in 64 KiB chunks,
//!   STREAM), so that they open without Engram: sealed to a passphrase (age's scrypt recipient, which opens
//!   with the `age` command alone), to age recipients (`age1...`), or to the store's own X25519 identity,
//!   derived from its data key and file id with HKDF-SHA256 (info `engram/side-files/x25519/v1`).

use std::io::{Read, Seek, Write};
use std::str::FromStr;

use secrecy::{ExposeSecret, SecretString};
use zeroize::Zeroizing;

use super::cipher::Cipher;
use super::keys::{KEY_BYTES, SecretKey};
use super::side::{self, SealReader, SealWriter, SideCipher};
use crate::error::{Error, ErrorKind, Result};

/// The first bytes of every age file (binary form).
pub const AGE_MAGIC: &[u8] = b"age-encryption.org/v1\n";

/// Whether `head` (the first bytes of a file) is an age file.
pub fn is_age(head: &[u8]) -> bool {
    head.starts_with(AGE_MAGIC) || head.starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----")
}

/// Whether the file at `path` is an age file (false when it cannot be read).
pub fn is_age_file(path: &std::path::Path) -> bool {
    is_age(&head_of(path))
}

/// Whether the file at `path` is a sealed side file (false when it cannot be read).
pub fn is_sealed_side_file(path: &std::path::Path) -> bool {
    side::is_sealed(&head_of(path))
}

/// Up to the first 40 bytes of the file at `path` (none when it cannot be read).
fn head_of(path: &std::path::Path) -> Vec<u8> {
    let mut head = vec![0u8; 40];
    let Ok(mut f) = std::fs::File::open(path) else { return Vec::new() };
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    head.truncate(n);
    head
}

/// The keys of an encrypted store's side files and store-key exports (module docs): the side-file cipher and
/// the store's X25519 identity. Never printed.
pub struct SideKey {
    side: SideCipher,
    identity: age::x25519::Identity,
    recipient: age::x25519::Recipient,
}

impl std::fmt::Debug for SideKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SideKey(..)")
    }
}

impl SideKey {
    /// The keys of the store whose data key is `data_key`, file id `file_id` and block cipher `cipher`.
    pub(crate) fn derive(data_key: &SecretKey, file_id: &[u8; 16], cipher: Cipher) -> SideKey {
        let mut secret = Zeroizing::new([0u8; KEY_BYTES]);
        // HKDF-SHA256 with a 32-byte output cannot fail (the output is far under 255 hash lengths).
        let _ = hkdf::Hkdf::<sha2::Sha256>::new(Some(file_id), data_key.bytes())
            .expand(b"engram/side-files/x25519/v1", &mut secret[..]);
        let text = bech32::Hrp::parse("age-secret-key-")
            .ok()
            .and_then(|hrp| bech32::encode_upper::<bech32::Bech32>(hrp, &secret[..]).ok())
            .map(Zeroizing::new);
        // The HRP is a constant and 32 bytes always encode: the fallback never runs, and would still be a
        // key of its own rather than a known one.
        let identity =
            text.and_then(|t| age::x25519::Identity::from_str(&t).ok()).unwrap_or_else(age::x25519::Identity::generate);
        let recipient = identity.to_public();
        SideKey { side: SideCipher::derive(data_key, file_id, cipher), identity, recipient }
    }

    pub(crate) fn side_cipher(&self) -> &SideCipher {
        &self.side
    }

    /// A reader of an age file sealed to this store's identity (side files of earlier releases).
    ///
    /// # Errors
    /// `InvalidData` when the file is no age file or not sealed to this store.
    fn open_age<R: Read>(&self, input: R) -> std::io::Result<age::stream::StreamReader<R>> {
        let d = age::Decryptor::new(input).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let id: &dyn age::Identity = &self.identity;
        d.decrypt(std::iter::once(id)).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    fn recipient(&self) -> &dyn age::Recipient {
        &self.recipient
    }
}

/// How a store's side files are written and read: sealed to the store's [`SideKey`] when it is encrypted,
/// plain otherwise. A side file of the other kind is refused as unusable (its caller deletes it and rebuilds).
#[derive(Clone, Debug, Default)]
pub struct SideFiles(Option<std::sync::Arc<SideKey>>);

impl SideFiles {
    /// Side files of a store encrypted with `key`, or plain ones (`None`).
    pub fn new(key: Option<std::sync::Arc<SideKey>>) -> Self {
        SideFiles(key)
    }

    /// Whether side files are sealed.
    pub fn sealed(&self) -> bool {
        self.0.is_some()
    }

    /// The store's key, when it is encrypted.
    pub fn key(&self) -> Option<&SideKey> {
        self.0.as_deref()
    }

    /// Creates `path` (truncating it) for writing through a 1 MiB buffer.
    ///
    /// # Errors
    /// I/O errors.
    pub fn create(&self, path: &std::path::Path) -> std::io::Result<SideWriter> {
        let f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
        Ok(match &self.0 {
            Some(k) => SideWriter::Sealed(Box::new(SealWriter::new(k.clone(), f)?)),
            None => SideWriter::Plain(f),
        })
    }

    /// The whole content of `path`.
    ///
    /// # Errors
    /// I/O errors; `InvalidData` for a file of the other kind, or a sealed one that fails to open (damaged,
    /// truncated, or another store's).
    pub fn read(&self, path: &std::path::Path) -> std::io::Result<Vec<u8>> {
        let head = head_of(path);
        if let (Some(k), true) = (&self.0, side::is_sealed(&head)) {
            return side::open_all(k.side_cipher(), std::fs::read(path)?);
        }
        if self.0.is_none() && !is_age(&head) && !side::is_sealed(&head) {
            return std::fs::read(path);
        }
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut out = Vec::with_capacity(len as usize);
        self.reader(path)?.read_to_end(&mut out)?;
        Ok(out)
    }

    /// A reader of the content of `path` (for reading its first bytes only, say).
    ///
    /// # Errors
    /// As [`SideFiles::read`].
    pub fn reader(&self, path: &std::path::Path) -> std::io::Result<Box<dyn Read>> {
        let head = head_of(path);
        let (ours, age) = (side::is_sealed(&head), is_age(&head));
        match (&self.0, ours || age) {
            (Some(k), true) => {
                let f = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
                Ok(if ours { Box::new(SealReader::new(k.clone(), f)?) } else { Box::new(k.open_age(f)?) })
            }
            (None, false) => Ok(Box::new(std::fs::File::open(path)?)),
            (Some(_), false) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "a plaintext side file beside an encrypted store",
            )),
            (None, true) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "an encrypted side file beside a plaintext store",
            )),
        }
    }
}

/// A side file being written: [`SideWriter::finish`] ends it and returns the file for syncing.
pub enum SideWriter {
    /// Plain bytes.
    Plain(std::io::BufWriter<std::fs::File>),
    /// Sealed with the store's side-file key.
    Sealed(Box<SealWriter<std::io::BufWriter<std::fs::File>>>),
}

impl Write for SideWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            SideWriter::Plain(w) => w.write(b),
            SideWriter::Sealed(w) => w.write(b),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            SideWriter::Plain(w) => w.flush(),
            SideWriter::Sealed(w) => w.flush(),
        }
    }
}

impl SideWriter {
    /// Ends the file (the last sealed chunk) and returns it, flushed, for `sync_all`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn finish(self) -> std::io::Result<std::fs::File> {
        let buffered = match self {
            SideWriter::Plain(w) => w,
            SideWriter::Sealed(w) => w.finish()?,
        };
        buffered.into_inner().map_err(|e| e.into_error())
    }
}

/// Who can open an encrypted export.
#[derive(Clone)]
pub enum ArchiveKey {
    /// A passphrase (age's scrypt recipient): `age -d` opens it with the passphrase alone.
    Passphrase(SecretString),
    /// age X25519 recipients (`age1...`): their identities open it.
    Recipients(Vec<String>),
    /// The store's own key: only this store (or one with the same data key) opens it.
    Store,
}

impl std::fmt::Debug for ArchiveKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArchiveKey::Passphrase(_) => f.write_str("Passphrase(..)"),
            ArchiveKey::Recipients(r) => f.debug_tuple("Recipients").field(r).finish(),
            ArchiveKey::Store => f.write_str("Store"),
        }
    }
}

impl ArchiveKey {
    /// Wraps `out` so that what is written to it is sealed for this key.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a recipient that is no `age1...` key, an empty passphrase, or
    /// [`ArchiveKey::Store`] on a plaintext store; I/O errors.
    pub(crate) fn seal<W: Write>(&self, store: Option<&SideKey>, out: W) -> Result<age::stream::StreamWriter<W>> {
        let enc = match self {
            ArchiveKey::Passphrase(p) => {
                if p.expose_secret().is_empty() {
                    return Err(invalid("encrypt_passphrase", "the passphrase is empty"));
                }
                age::Encryptor::with_user_passphrase(p.clone())
            }
            ArchiveKey::Recipients(list) => {
                let parsed = list
                    .iter()
                    .map(|r| {
                        age::x25519::Recipient::from_str(r.trim()).map_err(|_| {
                            invalid("encrypt_recipients", &format!("'{r}' is not an age recipient (age1...)"))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                if parsed.is_empty() {
                    return Err(invalid("encrypt_recipients", "no recipient given"));
                }
                age::Encryptor::with_recipients(parsed.iter().map(|r| r as &dyn age::Recipient))
                    .map_err(|e| invalid("encrypt_recipients", &e.to_string()))?
            }
            ArchiveKey::Store => {
                let Some(k) = store else {
                    return Err(invalid(
                        "encrypt",
                        "this store is not encrypted: give a passphrase or age recipients to encrypt the export",
                    ));
                };
                age::Encryptor::with_recipients(std::iter::once(k.recipient()))
                    .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?
            }
        };
        Ok(enc.wrap_output(out)?)
    }
}

fn invalid(field: &str, msg: &str) -> Error {
    Error::invalid_value(&[field], "value_error", msg, serde_json::Value::Null)
}

/// Opens an encrypted archive: with `passphrase` when it was sealed to one, else with the store's identity
/// or the age identities in `identity_file`.
///
/// # Errors
/// [`ErrorKind::WrongKey`] for a wrong passphrase or when no given identity opens it (`key_required` when a
/// passphrase is needed and none was given); [`ErrorKind::InvalidInput`] (`archive_invalid`) for a damaged age
/// header.
pub(crate) fn open_archive<R: Read + Seek>(
    input: R,
    passphrase: Option<&SecretString>,
    store: Option<&SideKey>,
) -> Result<age::stream::StreamReader<R>> {
    let d = age::Decryptor::new(input).map_err(archive_error)?;
    if d.is_scrypt() {
        let Some(p) = passphrase else {
            return Err(Error::new(ErrorKind::WrongKey, "the archive is encrypted with a passphrase; give it")
                .with_code(crate::error::ErrorCode::KeyRequired));
        };
        let id = age::scrypt::Identity::new(p.clone());
        return d.decrypt(std::iter::once(&id as &dyn age::Identity)).map_err(archive_error);
    }
    let Some(k) = store else {
        return Err(Error::new(
            ErrorKind::WrongKey,
            "the archive is encrypted to a key, not a passphrase, and this store's key does not open it",
        ));
    };
    d.decrypt(std::iter::once(&k.identity as &dyn age::Identity)).map_err(archive_error)
}

fn archive_error(e: age::DecryptError) -> Error {
    match e {
        age::DecryptError::DecryptionFailed
        | age::DecryptError::NoMatchingKeys
        | age::DecryptError::KeyDecryptionFailed => {
            Error::new(ErrorKind::WrongKey, "wrong key: the passphrase or key does not open this encrypted archive")
        }
        age::DecryptError::Io(io) => io.into(),
        other => Error::invalid_value(
            &["import_path"],
            "archive_invalid",
            format!("not a readable encrypted archive: {other}"),
            serde_json::Value::Null,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cipher: Cipher) -> std::sync::Arc<SideKey> {
        std::sync::Arc::new(SideKey::derive(&SecretKey::random(), &[1; 16], cipher))
    }

    fn write(files: &SideFiles, p: &std::path::Path, body: &[u8]) {
        let mut w = files.create(p).unwrap();
        // In uneven pieces, so that chunk edges fall inside writes.
        for piece in body.chunks(7_777) {
            w.write_all(piece).unwrap();
        }
        w.finish().unwrap().sync_all().unwrap();
    }

    #[test]
    fn side_files_round_trip_at_chunk_edges_under_both_ciphers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        for cipher in [Cipher::Xaes256Gcm, Cipher::XChaCha20Poly1305] {
            let files = SideFiles::new(Some(key(cipher)));
            for len in [0, 1, 65_535, 65_536, 65_537, 3 * 65_536, 200_001] {
                let body: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
                write(&files, &p, &body);
                assert!(is_sealed_side_file(&p) && !is_age_file(&p));
                assert_eq!(files.read(&p).unwrap(), body, "{cipher} {len}: whole");
                let mut streamed = Vec::new();
                files.reader(&p).unwrap().read_to_end(&mut streamed).unwrap();
                assert_eq!(streamed, body, "{cipher} {len}: streamed");
                let sealed_len = std::fs::metadata(&p).unwrap().len() as usize;
                assert_eq!(sealed_len, 26 + len + (len / 65_536 + 1) * 40, "{cipher} {len}: 40 bytes a chunk");
            }
        }
    }

    #[test]
    fn side_files_refuse_another_store_a_flip_a_cut_or_a_swap() {
        let dir = tempfile::tempdir().unwrap();
        let files = SideFiles::new(Some(key(Cipher::Xaes256Gcm)));
        let p = dir.path().join("f");
        let body: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        write(&files, &p, &body);
        let fails = |bytes: &[u8], what: &str| {
            std::fs::write(&p, bytes).unwrap();
            assert!(files.read(&p).is_err(), "{what}: whole");
            let mut out = Vec::new();
            let streamed = files.reader(&p).and_then(|mut r| r.read_to_end(&mut out));
            assert!(streamed.is_err(), "{what}: streamed");
        };
        let good = std::fs::read(&p).unwrap();
        assert!(SideFiles::new(Some(key(Cipher::Xaes256Gcm))).read(&p).is_err(), "another store's key");
        assert!(SideFiles::new(Some(key(Cipher::XChaCha20Poly1305))).read(&p).is_err(), "another cipher");
        assert!(SideFiles::default().read(&p).is_err(), "a plaintext store never reads a sealed file");
        for at in [3, 9, 12, 30, good.len() / 2, good.len() - 1] {
            let mut bytes = good.clone();
            bytes[at] ^= 1;
            fails(&bytes, &format!("flip at {at}"));
        }
        const FULL: usize = 24 + 65_536 + 16;
        for cut in [good.len() - 100, 26 + 3 * FULL, 26 + FULL, 30] {
            fails(&good[..cut], &format!("cut at {cut}"));
        }
        let mut swapped = good.clone();
        let (a, b) = swapped[26..26 + 2 * FULL].split_at_mut(FULL);
        a.swap_with_slice(b);
        fails(&swapped, "two chunks swapped");
        let mut extended = good.clone();
        extended.extend_from_slice(&good[26..26 + FULL]);
        fails(&extended, "a chunk appended");
    }

    #[test]
    fn an_age_side_file_of_an_earlier_release_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        let k = key(Cipher::Xaes256Gcm);
        let p = dir.path().join("old");
        let r: &dyn age::Recipient = &k.recipient;
        let mut w = age::Encryptor::with_recipients(std::iter::once(r))
            .unwrap()
            .wrap_output(std::fs::File::create(&p).unwrap())
            .unwrap();
        w.write_all(b"an index snapshot of an earlier release").unwrap();
        w.finish().unwrap();
        let files = SideFiles::new(Some(k));
        assert_eq!(files.read(&p).unwrap(), b"an index snapshot of an earlier release");
        assert!(SideFiles::default().read(&p).is_err());
    }

    #[test]
    fn the_derived_identity_is_stable_for_a_key_and_differs_across_keys() {
        let dk = SecretKey::random();
        let a = SideKey::derive(&dk, &[2; 16], Cipher::Xaes256Gcm);
        let b = SideKey::derive(&dk, &[2; 16], Cipher::XChaCha20Poly1305);
        let c = SideKey::derive(&dk, &[3; 16], Cipher::Xaes256Gcm);
        assert_eq!(a.recipient.to_string(), b.recipient.to_string());
        assert_ne!(a.recipient.to_string(), c.recipient.to_string());
    }
}
