//! The sealed side-file format: an encrypted store's index snapshot and saved HNSW graphs under the store's
//! block cipher ([`super::cipher`]), in chunks that open on every core.
//!
//! | bytes | what |
//! |---|---|
//! | 0..8 | magic `ENGRAMsf` |
//! | 8 | format (1) |
//! | 9 | cipher id (as the key header's) |
//! | 10..26 | a random 128-bit salt, new for every file written |
//! | 26.. | chunks: nonce (24), ciphertext, tag (16); every chunk but the last holds 64 KiB, the last less (0 bytes for an empty content or one of whole chunks) |
//!
//! The key is derived from the data key and the store's file id with HKDF-SHA256 (info
//! `engram/side-files/v2`), apart from the key of the store's blocks. Each chunk gets a fresh random 192-bit
//! nonce; its associated data is the file's 26-byte header, the chunk's number (8 bytes, LE) and whether it is
//! the last (1 byte), the rule of the STREAM construction (Hoang, Reyhanitabar, Rogaway and Vizár, "Online
//! Authenticated-Encryption and its Nonce-Reuse Misuse-Resistance", CRYPTO 2015) that age follows too: chunks
//! cannot be reordered, dropped or moved between files, and a file cut anywhere fails as a whole.
//!
//! Why not age, which seals exports: age's payload cipher is ChaCha20-Poly1305 only, read one chunk after
//! another. A reopen reads the index snapshot on its critical path; under XAES-256-GCM and on both cores it
//! opens about three times faster (docs/security.md). Side files sealed by earlier releases (age files) are
//! still read.

use std::io::{Read, Write};
use std::sync::Arc;

use super::cipher::{BlockCipher, Cipher, NONCE, TAG, array};
use super::keys::{self, KEY_BYTES, SecretKey};

/// The first bytes of a sealed side file.
pub(crate) const MAGIC: &[u8; 8] = b"ENGRAMsf";
const FORMAT: u8 = 1;
const HEADER: usize = 26;
/// Plaintext bytes of every chunk but the last.
const CHUNK: usize = 64 * 1024;
/// Bytes of a full chunk on disk.
const FULL: usize = NONCE + CHUNK + TAG;

/// The store's side-file cipher (module docs).
pub(crate) struct SideCipher {
    cipher: BlockCipher,
    id: u8,
}

impl SideCipher {
    /// The side-file cipher of the store with data key `data_key`, file id `file_id` and block cipher `cipher`.
    pub(crate) fn derive(data_key: &SecretKey, file_id: &[u8; 16], cipher: Cipher) -> SideCipher {
        let mut k = SecretKey::zeroed();
        // HKDF-SHA256 with a 32-byte output cannot fail (the output is far under 255 hash lengths).
        let _ = hkdf::Hkdf::<sha2::Sha256>::new(Some(file_id), data_key.bytes())
            .expand(b"engram/side-files/v2", &mut k.bytes_mut()[..KEY_BYTES]);
        SideCipher { cipher: BlockCipher::of(cipher, &k), id: cipher.id() }
    }
}

fn aad(header: &[u8; HEADER], index: u64, last: bool) -> [u8; HEADER + 9] {
    let mut a = [0u8; HEADER + 9];
    a[..HEADER].copy_from_slice(header);
    a[HEADER..HEADER + 8].copy_from_slice(&index.to_le_bytes());
    a[HEADER + 8] = u8::from(last);
    a
}

fn invalid(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, format!("sealed side file: {msg}"))
}

/// Checks a file's header against `key` (magic, format, the store's cipher).
fn check_header(key: &SideCipher, head: &[u8]) -> std::io::Result<[u8; HEADER]> {
    let header: [u8; HEADER] =
        head.get(..HEADER).and_then(|h| h.try_into().ok()).ok_or_else(|| invalid("too short"))?;
    if &header[..8] != MAGIC || header[8] != FORMAT {
        return Err(invalid("not one (or from a newer release)"));
    }
    if header[9] != key.id {
        return Err(invalid("sealed under another cipher than this store's"));
    }
    Ok(header)
}

/// Whether `head` (a file's first bytes) starts a sealed side file.
pub(crate) fn is_sealed(head: &[u8]) -> bool {
    head.starts_with(MAGIC)
}

/// Opens a whole sealed side file held in `raw`, its chunks on every core, and returns its content in the same
/// buffer.
///
/// # Errors
/// `InvalidData` when the header is not this store's, or any chunk fails authentication, is missing, or the
/// file is cut or extended.
pub(crate) fn open_all(key: &SideCipher, mut raw: Vec<u8>) -> std::io::Result<Vec<u8>> {
    use rayon::prelude::*;
    let header = check_header(key, &raw)?;
    let body = &mut raw[HEADER..];
    // The last chunk is the only short one: a body of whole chunks lost its last.
    if body.len() % FULL < NONCE + TAG {
        return Err(invalid("cut short"));
    }
    let chunks = body.len().div_ceil(FULL);
    body.par_chunks_mut(FULL)
        .enumerate()
        .try_for_each(|(i, frame)| open_chunk(key, &header, i as u64, i + 1 == chunks, frame))?;
    // The plaintexts moved down over the nonces, tags and header in place: one buffer, not two (an index
    // snapshot at 1,000,000 memories is 270 to 480 MB).
    let total = body.len();
    let mut len = 0;
    for at in (0..total).step_by(FULL) {
        let plain = at + NONCE..(at + FULL).min(total) - TAG;
        let n = plain.len();
        raw.copy_within(HEADER + plain.start..HEADER + plain.end, len);
        len += n;
    }
    raw.truncate(len);
    Ok(raw)
}

/// Opens one chunk in place (`frame`: nonce, ciphertext, tag; the plaintext is then `frame[NONCE..len - TAG]`).
///
/// # Errors
/// `InvalidData` when it fails authentication.
fn open_chunk(
    key: &SideCipher,
    header: &[u8; HEADER],
    index: u64,
    last: bool,
    frame: &mut [u8],
) -> std::io::Result<()> {
    let (nonce, rest) = frame.split_at_mut(NONCE);
    let (ct, tag) = rest.split_at_mut(rest.len() - TAG);
    let (nonce, tag): ([u8; NONCE], [u8; TAG]) = (array(nonce), array(tag));
    key.cipher
        .open(&nonce, &aad(header, index, last), ct, &tag)
        .map_err(|_| invalid(&format!("chunk {index} failed authentication: damaged, cut or another store's")))
}

/// Reads a sealed side file chunk by chunk (for reading its first bytes, or streaming a large one).
pub struct SealReader<R: Read> {
    key: Arc<super::SideKey>,
    input: R,
    header: [u8; HEADER],
    index: u64,
    frame: Vec<u8>,
    /// The current chunk's plaintext is `frame[NONCE + pos..NONCE + end]`.
    pos: usize,
    end: usize,
    done: bool,
}

impl<R: Read> SealReader<R> {
    /// A reader of `input`, checking its header.
    ///
    /// # Errors
    /// `InvalidData` for a header that is not this store's; I/O errors.
    pub(crate) fn new(key: Arc<super::SideKey>, mut input: R) -> std::io::Result<Self> {
        let mut head = [0u8; HEADER];
        input.read_exact(&mut head).map_err(|_| invalid("too short"))?;
        let header = check_header(key.side_cipher(), &head)?;
        Ok(SealReader { key, input, header, index: 0, frame: vec![0u8; FULL], pos: 0, end: 0, done: false })
    }

    fn next_chunk(&mut self) -> std::io::Result<()> {
        let mut n = 0;
        while n < FULL {
            match self.input.read(&mut self.frame[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if n < NONCE + TAG {
            return Err(invalid("cut short"));
        }
        let last = n < FULL;
        open_chunk(self.key.side_cipher(), &self.header, self.index, last, &mut self.frame[..n])?;
        (self.pos, self.end, self.done) = (0, n - NONCE - TAG, last);
        self.index += 1;
        Ok(())
    }
}

impl<R: Read> Read for SealReader<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.end {
            if self.done {
                return Ok(0);
            }
            self.next_chunk()?;
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.frame[NONCE + self.pos..NONCE + self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Writes a sealed side file: [`SealWriter::finish`] seals the last chunk.
pub struct SealWriter<W: Write> {
    key: Arc<super::SideKey>,
    out: W,
    header: [u8; HEADER],
    index: u64,
    buf: Vec<u8>,
    frame: Vec<u8>,
}

impl<W: Write> SealWriter<W> {
    /// Starts a sealed file on `out` (writes its header, with a new random salt).
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn new(key: Arc<super::SideKey>, mut out: W) -> std::io::Result<Self> {
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(MAGIC);
        header[8] = FORMAT;
        header[9] = key.side_cipher().id;
        header[10..].copy_from_slice(&keys::random::<16>());
        out.write_all(&header)?;
        Ok(SealWriter { key, out, header, index: 0, buf: Vec::with_capacity(CHUNK), frame: vec![0u8; FULL] })
    }

    fn seal(&mut self, last: bool) -> std::io::Result<()> {
        let n = self.buf.len();
        let nonce = keys::random::<NONCE>();
        let frame = &mut self.frame[..NONCE + n + TAG];
        frame[..NONCE].copy_from_slice(&nonce);
        frame[NONCE..NONCE + n].copy_from_slice(&self.buf);
        let aad = aad(&self.header, self.index, last);
        let tag = self.key.side_cipher().cipher.seal(&nonce, &aad, &mut frame[NONCE..NONCE + n])?;
        frame[NONCE + n..].copy_from_slice(&tag);
        self.out.write_all(frame)?;
        self.buf.clear();
        self.index += 1;
        Ok(())
    }

    /// Seals the last chunk and returns the output.
    ///
    /// # Errors
    /// I/O errors.
    pub(crate) fn finish(mut self) -> std::io::Result<W> {
        self.seal(true)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> Write for SealWriter<W> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        // A full chunk is never the last (the last is shorter): seal it now.
        if self.buf.len() == CHUNK {
            self.seal(false)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
