//! The key header of an encrypted store file: plaintext, two copies at the start of the file (bytes 0..4096 and
//! 4096..8192), each `MAGIC (8) | format version (1) | body length (2, LE) | body (postcard) | SHA-256 of the
//! bytes before it (32)`, zero-padded to 4 KiB. The body names the cipher, a generation (raised by every
//! rewrite), the file's random id and the key slots.
//!
//! A rewrite (`engram rekey`) writes the copy that is not the newest, syncs, then the other, and syncs: a crash
//! or torn write leaves at least one whole copy, the old header or the new. An open takes the valid copy with the
//! highest generation; a copy whose checksum fails is damaged, and is rewritten from the other at the next
//! read-write open.

use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::corrupt;
use super::keys::KeySlot;
use crate::error::{Error, ErrorKind, Result};
use crate::storage::Device;

/// The magic number at the start of each key header copy.
pub(crate) const MAGIC: [u8; 8] = *b"ENGRAMcx";
/// The encrypted file format this release writes and reads.
pub(crate) const FORMAT: u8 = 1;
/// Bytes of one key header copy.
pub(crate) const SLOT_BYTES: usize = 4096;
/// Most key slots a header holds.
pub(crate) const MAX_KEY_SLOTS: usize = 8;

/// The key header's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyHeader {
    pub cipher: u8,
    pub generation: u64,
    pub file_id: [u8; 16],
    pub slots: Vec<KeySlot>,
}

impl KeyHeader {
    /// The cipher's name, for `/health`.
    pub fn cipher_name(&self) -> &'static str {
        super::cipher::Cipher::from_id(self.cipher).map_or("unknown", |c| c.name())
    }

    /// One copy, 4 KiB.
    pub fn encode(&self) -> Result<Vec<u8>> {
        if self.slots.is_empty() || self.slots.len() > MAX_KEY_SLOTS {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("a store has 1 to {MAX_KEY_SLOTS} key slots; this change would leave {}", self.slots.len()),
            ));
        }
        let body = postcard::to_allocvec(self).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
        let mut out = Vec::with_capacity(SLOT_BYTES);
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT);
        let len = u16::try_from(body.len()).ok().filter(|l| (*l as usize) + 11 + 32 <= SLOT_BYTES);
        let len = len.ok_or_else(|| Error::new(ErrorKind::InvalidInput, "the key slots do not fit in the header"))?;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&body);
        let sum = sha2::Sha256::digest(&out);
        out.extend_from_slice(&sum);
        out.resize(SLOT_BYTES, 0);
        Ok(out)
    }
}

/// What one copy of the key header holds.
#[derive(Debug)]
pub(crate) enum Copy {
    Valid(KeyHeader),
    /// Never written (zeros).
    Empty,
    /// Wrong magic, checksum or body: the reason.
    Damaged(String),
    /// A format version this release does not read.
    Newer(u8),
}

/// Decodes one copy.
pub(crate) fn decode(b: &[u8]) -> Copy {
    if b.iter().all(|x| *x == 0) {
        return Copy::Empty;
    }
    if b.len() < 11 + 32 || b[..8] != MAGIC {
        return Copy::Damaged("no magic number".into());
    }
    let len = u16::from_le_bytes([b[9], b[10]]) as usize;
    if 11 + len + 32 > b.len() {
        return Copy::Damaged("body length out of bounds".into());
    }
    let (head, rest) = b.split_at(11 + len);
    if sha2::Sha256::digest(head)[..] != rest[..32] {
        return Copy::Damaged("checksum mismatch".into());
    }
    if b[8] != FORMAT {
        return if b[8] > FORMAT { Copy::Newer(b[8]) } else { Copy::Damaged(format!("format {}", b[8])) };
    }
    match postcard::from_bytes::<KeyHeader>(&head[11..]) {
        Ok(h) if !h.slots.is_empty() && h.slots.len() <= MAX_KEY_SLOTS => Copy::Valid(h),
        Ok(_) => Copy::Damaged("no key slot".into()),
        Err(e) => Copy::Damaged(format!("body: {e}")),
    }
}

/// Both copies as read, and the one to use.
pub(crate) struct Headers {
    pub header: KeyHeader,
    /// The copy `header` came from (0 or 1).
    pub newest: usize,
    /// Whether the other copy is damaged, empty or older (a read-write open rewrites it).
    pub other_stale: bool,
}

/// Reads both copies from `dev` and picks the valid one with the highest generation.
///
/// # Errors
/// [`ErrorKind::Corrupt`] when neither copy is valid (naming why) or the format is newer than this release's.
pub(crate) fn read(dev: &dyn Device) -> Result<Headers> {
    let len = dev.len()?;
    let mut copies = Vec::with_capacity(2);
    for i in 0..2u64 {
        let mut b = vec![0u8; SLOT_BYTES];
        if len >= (i + 1) * SLOT_BYTES as u64 {
            dev.read(i * SLOT_BYTES as u64, &mut b)?;
        } else {
            b.clear();
        }
        copies.push(if b.is_empty() { Copy::Empty } else { decode(&b) });
    }
    for c in &copies {
        if let Copy::Newer(v) = c {
            return Err(corrupt(format!(
                "the store file is encrypted with format {v}, newer than this release's ({FORMAT}); \
                 open it with a newer Engram"
            )));
        }
    }
    let valid: Vec<(usize, &KeyHeader)> = copies
        .iter()
        .enumerate()
        .filter_map(|(i, c)| if let Copy::Valid(h) = c { Some((i, h)) } else { None })
        .collect();
    let Some((newest, header)) = valid.iter().max_by_key(|(i, h)| (h.generation, usize::MAX - i)).copied() else {
        let why: Vec<String> = copies
            .iter()
            .map(|c| match c {
                Copy::Empty => "empty".into(),
                Copy::Damaged(w) => w.clone(),
                _ => "?".into(),
            })
            .collect();
        return Err(corrupt(format!(
            "both copies of the encrypted store's key header are damaged ({}; {})",
            why[0], why[1]
        )));
    };
    let other_stale = match &copies[1 - newest] {
        Copy::Valid(h) => h != header,
        _ => true,
    };
    if other_stale && let Copy::Damaged(why) = &copies[1 - newest] {
        tracing::warn!(copy = 1 - newest, %why, "one copy of the encrypted store's key header is damaged; the other is used");
    }
    Ok(Headers { header: header.clone(), newest, other_stale })
}

/// Writes `header` (its generation raised past `prev`) to both copies, the one that is not `newest` first,
/// syncing after each: at every moment one whole copy (old or new) is on disk.
pub(crate) fn write(dev: &dyn Device, header: &mut KeyHeader, newest: usize) -> Result<()> {
    header.generation += 1;
    let bytes = header.encode()?;
    for copy in [1 - newest, newest] {
        dev.write((copy * SLOT_BYTES) as u64, &bytes)?;
        dev.sync_data()?;
    }
    Ok(())
}

/// Rewrites a stale or damaged copy from the valid one (a read-write open).
pub(crate) fn repair(dev: &dyn Device, h: &Headers) -> Result<()> {
    if h.other_stale {
        let bytes = h.header.encode()?;
        dev.write(((1 - h.newest) * SLOT_BYTES) as u64, &bytes)?;
        dev.sync_data()?;
        tracing::info!(copy = 1 - h.newest, "rewrote a copy of the encrypted store's key header");
    }
    Ok(())
}
