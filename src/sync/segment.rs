//! Segment files: a run of one device's changes, encrypted and authenticated end to end with the sync group's
//! key (docs/sync.md, "Segments"). A device writes only its own segments, in `<folder>/<device id>/`, each
//! once, never changed after.
//!
//! Layout (all integers big-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `ENGRAMSG` |
//! | 1 | format version (1) |
//! | 16 | device id |
//! | 8 | segment number (1, 2, ...) |
//! | 8 | length of the sealed body, tag included |
//! | 24 | nonce (random) |
//! | n | body: postcard of [`SegmentBody`], sealed with XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha; the
//! `chacha20poly1305` crate) under the group key; the associated data is the 41 header bytes before the nonce,
//! so a segment cannot be passed off under another device or number |
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
const VERSION: u8 = 1;
/// Bytes before the nonce: magic, version, device, number, body length (the associated data).
const AD_LEN: usize = 8 + 1 + 16 + 8 + 8;
/// Bytes before the body.
pub const HEADER_LEN: usize = AD_LEN + 24;
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

/// The outcome of reading a segment file.
#[derive(Debug)]
pub enum Read {
    /// The file, whole and authentic.
    Whole(SegmentBody),
    /// Shorter than its header says (or than a header): still being copied; read it again later.
    Partial,
    /// Damaged, tampered with, under another key, or not what its name says: the reason.
    Refused(String),
}

/// The file name of segment `n`: its number in 20 digits, so that names sort in number order.
pub fn file_name(n: u64) -> String {
    format!("{n:020}.seg")
}

/// The directory of `device`'s segments in `folder`.
pub fn device_dir(folder: &Path, device: DeviceId) -> PathBuf {
    folder.join(device.to_hex())
}

/// The bytes of segment `n` of `device` holding `body`, sealed under `key`.
///
/// # Errors
/// Only when the body does not encode (which a valid change list always does).
pub fn seal(key: &GroupKey, device: DeviceId, n: u64, body: &SegmentBody) -> Result<Vec<u8>, String> {
    let plain = postcard::to_allocvec(body).map_err(|e| format!("encoding a segment failed: {e}"))?;
    let body_len = plain.len() as u64 + 16;
    let mut out = Vec::with_capacity(HEADER_LEN + body_len as usize);
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&device.0);
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(&body_len.to_be_bytes());
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let cipher = XChaCha20Poly1305::new((&key.0).into());
    let sealed = cipher
        .encrypt(&nonce, Payload { msg: &plain, aad: &out[..AD_LEN] })
        .map_err(|_| "sealing a segment failed".to_string())?;
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// Reads the bytes of a file named as segment `n` of `device`'s directory ([`Read`]).
pub fn open(key: &GroupKey, device: DeviceId, n: u64, bytes: &[u8]) -> Read {
    if bytes.len() < HEADER_LEN {
        // A header not yet whole, unless what is there already is wrong.
        let have = bytes.len().min(MAGIC.len());
        if bytes[..have] != MAGIC[..have] {
            return Read::Refused("not a segment file (bad magic)".into());
        }
        return Read::Partial;
    }
    if &bytes[..8] != MAGIC {
        return Read::Refused("not a segment file (bad magic)".into());
    }
    if bytes[8] != VERSION {
        return Read::Refused(format!("segment format {} (this release reads {VERSION})", bytes[8]));
    }
    if bytes[9..25] != device.0 {
        return Read::Refused("the segment names another device than its directory".into());
    }
    let mut b8 = [0u8; 8];
    b8.copy_from_slice(&bytes[25..33]);
    if u64::from_be_bytes(b8) != n {
        return Read::Refused("the segment's number is not its file name's".into());
    }
    b8.copy_from_slice(&bytes[33..41]);
    let body_len = u64::from_be_bytes(b8);
    if !(16..=MAX_BODY).contains(&body_len) {
        return Read::Refused(format!("a body of {body_len} bytes"));
    }
    let whole = HEADER_LEN as u64 + body_len;
    let have = bytes.len() as u64;
    if have < whole {
        return Read::Partial;
    }
    if have > whole {
        return Read::Refused(format!("{} bytes after the body", have - whole));
    }
    let cipher = XChaCha20Poly1305::new((&key.0).into());
    let nonce = chacha20poly1305::XNonce::from_slice(&bytes[AD_LEN..HEADER_LEN]);
    let Ok(plain) = cipher.decrypt(nonce, Payload { msg: &bytes[HEADER_LEN..], aad: &bytes[..AD_LEN] }) else {
        return Read::Refused("the segment does not authenticate (damaged, tampered with, or another key)".into());
    };
    match postcard::from_bytes::<SegmentBody>(&plain) {
        Ok(body) if body.changes.iter().all(|c| c.stamp.device == device) => Read::Whole(body),
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
        let bytes = seal(&key, dev, 5, &body(dev)).unwrap();
        assert!(matches!(open(&key, dev, 5, &bytes), Read::Whole(b) if b == body(dev)));
        for cut in 0..bytes.len() {
            assert!(matches!(open(&key, dev, 5, &bytes[..cut]), Read::Partial), "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_byte_another_key_a_wrong_name_or_extra_bytes_are_refused() {
        let (key, dev) = (GroupKey::random(), DeviceId::random());
        let bytes = seal(&key, dev, 5, &body(dev)).unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            // A flip in the length field may make the file look partial (longer than it is): never whole.
            assert!(!matches!(open(&key, dev, 5, &bad), Read::Whole(_)), "flip at {i}");
        }
        assert!(matches!(open(&GroupKey::random(), dev, 5, &bytes), Read::Refused(_)));
        assert!(matches!(open(&key, dev, 6, &bytes), Read::Refused(_)));
        assert!(matches!(open(&key, DeviceId::random(), 5, &bytes), Read::Refused(_)));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(open(&key, dev, 5, &longer), Read::Refused(_)));
        // A device cannot pass off another device's changes under its own name.
        let other = DeviceId::random();
        let forged = seal(&key, dev, 1, &body(other)).unwrap();
        assert!(matches!(open(&key, dev, 1, &forged), Read::Refused(_)));
    }

    #[test]
    fn keys_print_and_parse_as_hex() {
        let k = GroupKey::random();
        assert_eq!(GroupKey::from_hex(&k.to_hex()), Some(k.clone()));
        assert_eq!(GroupKey::from_hex("zz"), None);
        assert_eq!(format!("{k:?}"), "GroupKey(..)");
    }
}
