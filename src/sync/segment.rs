//! Segment files: a run of one device's changes, encrypted and authenticated end to end with the sync group's
//! key (docs/sync.md, "Segments"). A device writes only its own segments, in `<folder>/<device id>/`, each
//! once, never changed after.
//!
//! Layout (all integers big-endian), format 2:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `ENGRAMSG` |
//! | 1 | format version (2) |
//! | 1 | kind ([`Kind`]: a segment, a snapshot part, a head file, a key rotation) |
//! | 4 | key epoch: which of the group's keys sealed it (0 until the first key rotation) |
//! | 16 | device id |
//! | 8 | number (a segment's or snapshot's number, a rotation's epoch; 0 for a head) |
//! | 8 | length of the sealed body, tag included |
//! | 24 | nonce (random) |
//! | n | body (a segment's or snapshot part's: postcard of [`SegmentBody`], deflated; a head's or rotation's:
//! JSON), sealed with XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha; the `chacha20poly1305` crate) under the
//! group key of that epoch; the associated data is the 46 header bytes before the nonce, so a file cannot be
//! passed off under another kind, key epoch, device or number |
//!
//! Format 1 (written before key rotation existed) is the same less the kind and epoch bytes: a segment under
//! the key of epoch 0. It is still read.
//!
//! A file shorter than its header says is still being copied by the folder tool: [`Read::Partial`], read again
//! later, never taken as damage. A longer file, a failed tag or a body that does not decode is
//! [`Read::Refused`].

use std::path::{Path, PathBuf};

use chacha20poly1305::XChaCha20Poly1305;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload, rand_core::RngCore};
use serde::{Deserialize, Serialize};

use crate::model::{Change, DeviceId};

const MAGIC: &[u8; 8] = b"ENGRAMSG";
const VERSION: u8 = 2;
/// Bytes before the nonce in format 1: magic, version, device, number, body length (the associated data).
const AD_LEN_V1: usize = 8 + 1 + 16 + 8 + 8;
/// Bytes before the nonce: magic, version, kind, epoch, device, number, body length (the associated data).
const AD_LEN: usize = 8 + 1 + 1 + 4 + 16 + 8 + 8;
/// Bytes before the body.
pub const HEADER_LEN: usize = AD_LEN + 24;

/// What a sealed file of the folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A run of one device's changes ([`SegmentBody`]).
    Segment = 0,
    /// One part of a device's snapshot: its compacted segments ([`SegmentBody`], `first` the part, `last` the
    /// number of parts).
    Snapshot = 1,
    /// A device's head file: its public key and how far it has read the others.
    Head = 2,
    /// A key rotation: the new group key's record (who was removed, the earlier keys).
    Rotation = 3,
}

/// The keys of a sync group by epoch: epoch 0 is the key the group started with, each rotation adds the next.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    keys: std::collections::BTreeMap<u32, GroupKey>,
}

impl Keyring {
    /// A ring of one key.
    pub fn new(epoch: u32, key: GroupKey) -> Self {
        let mut keys = std::collections::BTreeMap::new();
        keys.insert(epoch, key);
        Keyring { keys }
    }

    /// Adds the key of `epoch` (an epoch's key is never replaced once known).
    pub fn insert(&mut self, epoch: u32, key: GroupKey) {
        self.keys.entry(epoch).or_insert(key);
    }

    /// The key of `epoch`, if known.
    pub fn get(&self, epoch: u32) -> Option<&GroupKey> {
        self.keys.get(&epoch)
    }

    /// The newest key and its epoch (what this device seals with).
    pub fn current(&self) -> Option<(u32, &GroupKey)> {
        self.keys.iter().next_back().map(|(e, k)| (*e, k))
    }

    /// Every key, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &GroupKey)> {
        self.keys.iter().map(|(e, k)| (*e, k))
    }
}
/// Largest sealed body a reader accepts: 256 MiB.
pub const MAX_BODY: u64 = 256 << 20;

/// A sync group's key: 32 random bytes, shared by the paired devices.
#[derive(Clone, PartialEq, Eq)]
pub struct GroupKey(pub [u8; 32]);

impl std::fmt::Debug for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GroupKey(..)")
    }
}

impl GroupKey {
    /// A new random key (the operating system's generator).
    pub fn random() -> Self {
        let mut k = [0u8; 32];
        OsRng.fill_bytes(&mut k);
        GroupKey(k)
    }

    /// The key as 64 lowercase hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The key of 64 hex digits; None for anything else.
    pub fn from_hex(s: &str) -> Option<Self> {
        let s = s.trim();
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut k = [0u8; 32];
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(GroupKey(k))
    }
}

/// What a segment holds: the changes of the writer's log from `first` to `last` (its sequence numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SegmentBody {
    /// The sequence number of the first change in the writer's log.
    pub first: u64,
    /// The sequence number of the last change.
    pub last: u64,
    /// The changes, in log order.
    pub changes: Vec<Change>,
}

/// The outcome of reading a segment or snapshot file.
#[derive(Debug)]
pub enum Read {
    /// The file, whole and authentic, and the epoch of the key that sealed it.
    Whole(SegmentBody, u32),
    /// Shorter than its header says (or than a header): still being copied; read it again later.
    Partial,
    /// Damaged, tampered with, under another key, or not what its name says: the reason.
    Refused(String),
}

/// The outcome of reading any sealed file ([`open_file`]).
#[derive(Debug)]
pub enum Opened {
    /// The file, whole and authentic: its plaintext and the epoch of the key that sealed it.
    Whole(Vec<u8>, u32),
    /// Still being copied.
    Partial,
    /// Damaged, tampered with, under a key this device does not hold, or not what its name says.
    Refused(String),
}

/// The file name of segment `n`: its number in 20 digits, so that names sort in number order.
pub fn file_name(n: u64) -> String {
    format!("{n:020}.seg")
}

/// The file name of part `part` (from 1) of the snapshot of a device's segments up to `n`.
pub fn snapshot_name(n: u64, part: u64) -> String {
    format!("{n:020}.{part:06}.snap")
}

/// The directory of `device`'s segments in `folder`.
pub fn device_dir(folder: &Path, device: DeviceId) -> PathBuf {
    folder.join(device.to_hex())
}

/// The bytes of a sealed file of `kind`, number `n`, of `device`, holding `plain`, sealed under `key` of key
/// epoch `epoch`.
///
/// # Errors
/// Only when the cipher fails (it does not for a body under 256 GiB).
pub fn seal_file(
    key: &GroupKey,
    epoch: u32,
    kind: Kind,
    device: DeviceId,
    n: u64,
    plain: &[u8],
) -> Result<Vec<u8>, String> {
    let body_len = plain.len() as u64 + 16;
    let mut out = Vec::with_capacity(HEADER_LEN + body_len as usize);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&epoch.to_be_bytes());
    out.extend_from_slice(&device.0);
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(&body_len.to_be_bytes());
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let cipher = XChaCha20Poly1305::new((&key.0).into());
    let sealed = cipher
        .encrypt(&nonce, Payload { msg: plain, aad: &out[..AD_LEN] })
        .map_err(|_| "sealing a file failed".to_string())?;
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// The bytes of segment `n` of `device` holding `body`, sealed under `key` of key epoch `epoch`.
///
/// # Errors
/// Only when the body does not encode (which a valid change list always does).
pub fn seal(key: &GroupKey, epoch: u32, device: DeviceId, n: u64, body: &SegmentBody) -> Result<Vec<u8>, String> {
    seal_body(key, epoch, Kind::Segment, device, n, body)
}

/// The bytes of a segment or snapshot part of `kind` holding `body` ([`seal`]).
///
/// # Errors
/// As [`seal`].
pub fn seal_body(
    key: &GroupKey,
    epoch: u32,
    kind: Kind,
    device: DeviceId,
    n: u64,
    body: &SegmentBody,
) -> Result<Vec<u8>, String> {
    use std::io::Write;
    let plain = postcard::to_allocvec(body).map_err(|e| format!("encoding a segment failed: {e}"))?;
    // Deflate before sealing (ciphertext does not compress): a memory's JSON shrinks to about a third.
    let mut z = flate2::write::DeflateEncoder::new(Vec::with_capacity(plain.len() / 3), flate2::Compression::fast());
    z.write_all(&plain).map_err(|e| format!("compressing a segment failed: {e}"))?;
    let packed = z.finish().map_err(|e| format!("compressing a segment failed: {e}"))?;
    seal_file(key, epoch, kind, device, n, &packed)
}

/// Largest body a segment or snapshot part inflates to: 1 GiB.
const MAX_PLAIN: u64 = 1 << 30;

fn be_u64(b: &[u8]) -> u64 {
    let mut b8 = [0u8; 8];
    b8.copy_from_slice(&b[..8]);
    u64::from_be_bytes(b8)
}

/// Reads the bytes of a file named as the `kind` file number `n` of `device`'s directory, with the key of the
/// epoch it names ([`Opened`]). Format 1 files are segments under epoch 0.
pub fn open_file(ring: &Keyring, kind: Kind, device: DeviceId, n: u64, bytes: &[u8]) -> Opened {
    let have = bytes.len().min(MAGIC.len());
    if bytes[..have] != MAGIC[..have] {
        return Opened::Refused("not a sync file (bad magic)".into());
    }
    let Some(&version) = bytes.get(8) else { return Opened::Partial };
    let (ad_len, file_kind, epoch, rest) = match version {
        VERSION if bytes.len() >= AD_LEN => {
            let mut e4 = [0u8; 4];
            e4.copy_from_slice(&bytes[10..14]);
            (AD_LEN, bytes[9], u32::from_be_bytes(e4), &bytes[14..])
        }
        1 if bytes.len() >= AD_LEN_V1 => (AD_LEN_V1, Kind::Segment as u8, 0, &bytes[9..]),
        1 | VERSION => return Opened::Partial,
        v => return Opened::Refused(format!("sync file format {v} (this release reads 1 and {VERSION})")),
    };
    if file_kind != kind as u8 {
        return Opened::Refused(format!("a file of kind {file_kind} where kind {} was expected", kind as u8));
    }
    if rest[..16] != device.0 {
        return Opened::Refused("the file names another device than its directory".into());
    }
    if be_u64(&rest[16..24]) != n {
        return Opened::Refused("the file's number is not its name's".into());
    }
    let body_len = be_u64(&rest[24..32]);
    if !(16..=MAX_BODY).contains(&body_len) {
        return Opened::Refused(format!("a body of {body_len} bytes"));
    }
    let whole = (ad_len + 24) as u64 + body_len;
    let have = bytes.len() as u64;
    if have < whole {
        return Opened::Partial;
    }
    if have > whole {
        return Opened::Refused(format!("{} bytes after the body", have - whole));
    }
    let Some(key) = ring.get(epoch) else {
        return Opened::Refused(format!(
            "sealed under the group key of epoch {epoch}, which this device does not hold"
        ));
    };
    let cipher = XChaCha20Poly1305::new((&key.0).into());
    let nonce = chacha20poly1305::XNonce::from_slice(&bytes[ad_len..ad_len + 24]);
    match cipher.decrypt(nonce, Payload { msg: &bytes[ad_len + 24..], aad: &bytes[..ad_len] }) {
        Ok(plain) => Opened::Whole(plain, epoch),
        Err(_) => Opened::Refused("the file does not authenticate (damaged, tampered with, or another key)".into()),
    }
}

/// The key epoch a whole format-2 file names in its header (0 for format 1); None for bytes that are not a
/// whole sealed file (too short, too long, or no sync file).
pub fn epoch_of(bytes: &[u8]) -> Option<u32> {
    if bytes.len() < AD_LEN_V1 || &bytes[..8] != MAGIC {
        return None;
    }
    let (ad_len, epoch) = match bytes[8] {
        1 => (AD_LEN_V1, 0),
        VERSION if bytes.len() >= AD_LEN => {
            let mut e4 = [0u8; 4];
            e4.copy_from_slice(&bytes[10..14]);
            (AD_LEN, u32::from_be_bytes(e4))
        }
        _ => return None,
    };
    let body_len = be_u64(&bytes[ad_len - 8..ad_len]);
    ((ad_len + 24) as u64 + body_len == bytes.len() as u64).then_some(epoch)
}

/// Reads the bytes of a file named as segment `n` of `device`'s directory ([`Read`]).
pub fn open(ring: &Keyring, device: DeviceId, n: u64, bytes: &[u8]) -> Read {
    open_body(ring, Kind::Segment, device, n, bytes)
}

/// Reads a segment or a snapshot part ([`Read`]): it must hold only changes stamped by `device`.
pub fn open_body(ring: &Keyring, kind: Kind, device: DeviceId, n: u64, bytes: &[u8]) -> Read {
    use std::io::Read as _;
    let (mut plain, epoch) = match open_file(ring, kind, device, n, bytes) {
        Opened::Whole(p, e) => (p, e),
        Opened::Partial => return Read::Partial,
        Opened::Refused(why) => return Read::Refused(why),
    };
    // Format 2 bodies are deflated (format 1 ones are not).
    if bytes[8] == VERSION {
        let mut out = Vec::with_capacity(plain.len() * 3);
        let inflated = flate2::read::DeflateDecoder::new(plain.as_slice()).take(MAX_PLAIN + 1).read_to_end(&mut out);
        match inflated {
            Ok(len) if (len as u64) <= MAX_PLAIN => plain = out,
            Ok(_) => return Read::Refused("the segment inflates to more than 1 GiB".into()),
            Err(e) => return Read::Refused(format!("the segment's body does not inflate: {e}")),
        }
    }
    match postcard::from_bytes::<SegmentBody>(&plain) {
        Ok(body) if body.changes.iter().all(|c| c.stamp.device == device) => Read::Whole(body, epoch),
        Ok(_) => Read::Refused("the segment holds changes stamped by another device".into()),
        Err(e) => Read::Refused(format!("the segment's body does not decode: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Hlc, Item, Op, Stamp};

    fn body(device: DeviceId) -> SegmentBody {
        let stamp = Stamp { hlc: Hlc { ms: 7, counter: 1 }, device };
        let change =
            Change { item: Item::Memory("m1".into()), stamp, op: Op::Put { base: None, value: b"{}".to_vec() } };
        SegmentBody { first: 3, last: 3, changes: vec![change] }
    }

    #[test]
    fn a_segment_round_trips_and_every_prefix_is_partial() {
        let (key, dev) = (GroupKey::random(), DeviceId::random());
        let ring = Keyring::new(3, key.clone());
        let bytes = seal(&key, 3, dev, 5, &body(dev)).unwrap();
        assert!(matches!(open(&ring, dev, 5, &bytes), Read::Whole(b, 3) if b == body(dev)));
        for cut in 0..bytes.len() {
            assert!(matches!(open(&ring, dev, 5, &bytes[..cut]), Read::Partial), "cut at {cut}");
        }
        // A segment is no snapshot part, and a key the ring lacks opens nothing.
        assert!(matches!(open_body(&ring, Kind::Snapshot, dev, 5, &bytes), Read::Refused(_)));
        assert!(matches!(open(&Keyring::new(2, key.clone()), dev, 5, &bytes), Read::Refused(_)));
    }

    #[test]
    fn a_flipped_byte_another_key_a_wrong_name_or_extra_bytes_are_refused() {
        let (key, dev) = (GroupKey::random(), DeviceId::random());
        let ring = Keyring::new(0, key.clone());
        let bytes = seal(&key, 0, dev, 5, &body(dev)).unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            // A flip in the length field may make the file look partial (longer than it is): never whole.
            assert!(!matches!(open(&ring, dev, 5, &bad), Read::Whole(..)), "flip at {i}");
        }
        assert!(matches!(open(&Keyring::new(0, GroupKey::random()), dev, 5, &bytes), Read::Refused(_)));
        assert!(matches!(open(&ring, dev, 6, &bytes), Read::Refused(_)));
        assert!(matches!(open(&ring, DeviceId::random(), 5, &bytes), Read::Refused(_)));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(open(&ring, dev, 5, &longer), Read::Refused(_)));
        // A device cannot pass off another device's changes under its own name.
        let other = DeviceId::random();
        let forged = seal(&key, 0, dev, 1, &body(other)).unwrap();
        assert!(matches!(open(&ring, dev, 1, &forged), Read::Refused(_)));
        // Format 1 (no kind, no epoch) is still read, as a segment under epoch 0.
        let plain = postcard::to_allocvec(&body(dev)).unwrap();
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.push(1);
        v1.extend_from_slice(&dev.0);
        v1.extend_from_slice(&5u64.to_be_bytes());
        v1.extend_from_slice(&(plain.len() as u64 + 16).to_be_bytes());
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = XChaCha20Poly1305::new((&key.0).into())
            .encrypt(&nonce, Payload { msg: &plain, aad: &v1[..AD_LEN_V1] })
            .unwrap();
        v1.extend_from_slice(&nonce);
        v1.extend_from_slice(&sealed);
        assert!(matches!(open(&ring, dev, 5, &v1), Read::Whole(b, 0) if b == body(dev)));
    }

    #[test]
    fn keys_print_and_parse_as_hex() {
        let k = GroupKey::random();
        assert_eq!(GroupKey::from_hex(&k.to_hex()), Some(k.clone()));
        assert_eq!(GroupKey::from_hex("zz"), None);
        assert_eq!(format!("{k:?}"), "GroupKey(..)");
    }
}
