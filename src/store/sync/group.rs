//! A sync group's keys, heads and members (docs/sync.md, "Heads, removing a device and key rotation").
//!
//! - **Keys by epoch.** The group starts with one key (epoch 0); each removal of a device rotates it: a new
//!   random key of the next epoch, sealed (age, X25519) to each remaining device's public key. Every file of the
//!   folder names the epoch of the key that sealed it; a device keeps every key it learned, so old segments stay
//!   readable.
//! - **Heads.** Each device writes one small sealed file, `<folder>/<device>/head`: its age public key (what a
//!   rotation seals the new key to), its last segment and snapshot, and how far it has read every other device
//!   (what compaction waits for).
//! - **Rotations.** A removal writes `<epoch>.key` (the new key, an age file to the remaining devices) and
//!   `<epoch>.rot` (sealed under the new key: the devices removed so far with the last of their segments still
//!   accepted, the devices kept, every earlier key, and a proof that its writer held the previous key).
//!   Every pass reads the rotations in epoch order: a device kept in one learns the new key from the `.key`
//!   file, a device that joins later with the new pairing code learns the older keys from the `.rot` file.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use age::secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::SyncService;
use super::folder::{KEY_KEY, PEERS_KEY, Peer, pairing_code, write_atomically};
use crate::error::{Error, ErrorKind, Result};
use crate::model::DeviceId;
use crate::storage::crypt::keys::hex;
use crate::store::core::write::Commit;
use crate::store::records::meta;
use crate::sync::segment::{self, GroupKey, Keyring, Kind, Opened};

/// `META` key: the epoch of the current group key (`sync_key`).
pub(crate) const EPOCH_KEY: &str = "sync_epoch";
/// `META` key: every group key this device learned, by epoch (JSON of hex keys).
pub(crate) const KEYS_KEY: &str = "sync_keys";
/// `META` key: this device's age X25519 identity (`AGE-SECRET-KEY-1...`), the secret half of the public key in
/// its head file.
pub(crate) const IDENTITY_KEY: &str = "sync_identity";
/// `META` key: why this device cannot go on in its group (removed, or left out of a key rotation), if so.
pub(crate) const GROUP_ERROR_KEY: &str = "sync_group_error";
/// `META` key: the devices removed from the group as the last pass saw them (JSON, for the status).
pub(crate) const REMOVED_KEY: &str = "sync_removed";
/// `META` key: the head this device last wrote (JSON), so that an idle pass writes nothing.
pub(crate) const HEAD_KEY: &str = "sync_head";

/// The file name of a device's head.
pub const HEAD_NAME: &str = "head";

/// The file name of the rotation record of key epoch `epoch`.
pub fn rotation_name(epoch: u32) -> String {
    format!("{epoch:010}.rot")
}

/// The file name of the new key of epoch `epoch`, sealed to the kept devices.
pub fn wrapped_name(epoch: u32) -> String {
    format!("{epoch:010}.key")
}

/// A device's head file: what the other devices need to know of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct HeadBody {
    /// Its age X25519 public key (`age1...`).
    pub recipient: String,
    /// Its last segment written.
    pub segment: u64,
    /// Its last snapshot (0: none): its segments up to this number are compacted into it.
    pub snapshot: u64,
    /// The last segment of each other device it has applied, by device id.
    pub cursors: BTreeMap<String, u64>,
}

/// A key rotation's record, sealed under the new key.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RotationBody {
    epoch: u32,
    /// Every device removed so far, with the last of its segments still accepted.
    removed: BTreeMap<String, u64>,
    /// The devices the new key was sealed to.
    members: Vec<String>,
    /// Every earlier key, by epoch (hex).
    previous: BTreeMap<u32, String>,
    /// HKDF-SHA256 of the previous key with the new key as salt: its writer held the previous key.
    proof: String,
}

/// What [`SyncService::remove_device`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct RemoveReport {
    /// The device removed (32 hex digits).
    pub device_id: String,
    /// The last of its segments still accepted: those in the folder when it was removed. Its later ones are
    /// refused.
    pub last_accepted_segment: u64,
    /// The new key's epoch.
    pub epoch: u32,
    /// The devices the new key was sealed to, this one included.
    pub kept: Vec<String>,
    /// The new pairing code, for a device that joins from now on (the old one no longer joins).
    pub pairing_code: String,
}

/// The group as this device sees it at the start of a pass.
pub(super) struct Group {
    pub ring: Keyring,
    pub folder: PathBuf,
    pub me: DeviceId,
    /// Devices removed, with the last of their segments still accepted.
    pub removed: BTreeMap<DeviceId, u64>,
    /// Per epoch: the devices its rotation kept (their segments under the epoch before stay accepted).
    pub members: BTreeMap<u32, BTreeSet<DeviceId>>,
    /// Why this device cannot go on, if so.
    pub error: Option<String>,
}

impl Group {
    /// Why segment (or snapshot) `n` of `device`, sealed under key epoch `epoch`, is refused; None to accept it.
    pub fn refuses(&self, device: DeviceId, n: u64, epoch: u32) -> Option<String> {
        if let Some(after) = self.removed.get(&device) {
            if n > *after {
                return Some(format!("this device was removed from the group: its segments after {after} are refused"));
            }
            return None;
        }
        let current = self.ring.current().map_or(0, |(e, _)| e);
        let kept = self.members.get(&(epoch + 1)).is_some_and(|m| m.contains(&device));
        (epoch < current && !kept).then(|| {
            format!(
                "sealed under the group key of epoch {epoch} by a device the rotation to epoch {} did not keep",
                epoch + 1
            )
        })
    }

    /// The current key and its epoch.
    pub fn current(&self) -> Result<(u32, &GroupKey)> {
        self.ring.current().ok_or_else(|| Error::new(ErrorKind::Internal, "a sync group without a key"))
    }
}

fn proof(previous: &GroupKey, new: &GroupKey, epoch: u32, writer: DeviceId) -> String {
    let mut out = [0u8; 32];
    let mut info = b"engram-sync-rotation-v1".to_vec();
    info.extend_from_slice(&epoch.to_be_bytes());
    info.extend_from_slice(&writer.0);
    // A 32-byte output is far under HKDF's limit: expand cannot fail.
    let _ = hkdf::Hkdf::<sha2::Sha256>::new(Some(&new.0), &previous.0).expand(&info, &mut out);
    hex(&out)
}

/// The other device directories of `folder` (32 hex digits), `me` included when `with_me`.
pub(super) fn devices(folder: &Path, me: DeviceId, with_me: bool) -> Vec<DeviceId> {
    let Ok(entries) = std::fs::read_dir(folder) else { return Vec::new() };
    let mut out: Vec<DeviceId> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().filter(|n| n.len() == 32).and_then(DeviceId::parse))
        .filter(|d| with_me || *d != me)
        .collect();
    out.sort();
    out
}

/// The rotation files of every device directory: (epoch, writer), in epoch order, then writer.
fn rotations(folder: &Path, me: DeviceId) -> Vec<(u32, DeviceId)> {
    let mut out = Vec::new();
    for d in devices(folder, me, true) {
        let Ok(entries) = std::fs::read_dir(segment::device_dir(folder, d)) else { continue };
        for e in entries.filter_map(|e| e.ok()) {
            if let Some(epoch) =
                e.file_name().to_str().and_then(|n| n.strip_suffix(".rot")).and_then(|n| n.parse().ok())
            {
                out.push((epoch, d));
            }
        }
    }
    out.sort();
    out
}

/// Whether `device`, whose head does not open, is still a member of `g`'s group: its directory is empty (it
/// joined and has not synced), its head is still being copied, or its first segment opens under the group's
/// keys. A directory of another group's device is none of these.
fn member_without_head(g: &Group, device: DeviceId) -> bool {
    let dir = segment::device_dir(&g.folder, device);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .map(|es| es.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().to_string()).collect())
        .unwrap_or_default();
    if names.iter().all(|n| n.starts_with('.')) {
        return true;
    }
    if let Ok(bytes) = std::fs::read(dir.join(HEAD_NAME))
        && matches!(segment::open_file(&g.ring, Kind::Head, device, 0, &bytes), Opened::Partial)
    {
        return true;
    }
    let first = super::direct::numbers(&g.folder, device).first().copied();
    first.is_some_and(|n| {
        std::fs::read(dir.join(segment::file_name(n)))
            .is_ok_and(|b| matches!(segment::open(&g.ring, device, n, &b), segment::Read::Whole(..)))
    })
}

/// Opens the rotation record of `epoch` written by `writer` with a ring that holds the epoch's key.
fn open_rotation(ring: &Keyring, folder: &Path, writer: DeviceId, epoch: u32) -> Option<RotationBody> {
    let bytes = std::fs::read(segment::device_dir(folder, writer).join(rotation_name(epoch))).ok()?;
    match segment::open_file(ring, Kind::Rotation, writer, u64::from(epoch), &bytes) {
        Opened::Whole(plain, e) if e == epoch => {
            serde_json::from_slice::<RotationBody>(&plain).ok().filter(|b| b.epoch == epoch)
        }
        _ => None,
    }
}

/// What a device finds in a rotation's `.key` file.
enum Unwrapped {
    /// The new key, sealed to this device.
    Key(GroupKey),
    /// A whole file that is sealed to other devices only: this device was left out.
    NotForMe,
    /// Not there, or not whole yet (still being copied): look again at the next pass.
    NotYet,
}

/// The group key of `epoch` sealed to `identity` in `writer`'s `.key` file.
fn unwrap_key(folder: &Path, writer: DeviceId, epoch: u32, identity: &age::x25519::Identity) -> Unwrapped {
    let Ok(bytes) = std::fs::read(segment::device_dir(folder, writer).join(wrapped_name(epoch))) else {
        return Unwrapped::NotYet;
    };
    let Ok(d) = age::Decryptor::new(&bytes[..]) else { return Unwrapped::NotYet };
    match d.decrypt(std::iter::once(identity as &dyn age::Identity)) {
        Ok(mut r) => {
            let mut k = [0u8; 32];
            match r.read_exact(&mut k) {
                Ok(()) => Unwrapped::Key(GroupKey(k)),
                Err(_) => Unwrapped::NotYet,
            }
        }
        Err(age::DecryptError::NoMatchingKeys) => Unwrapped::NotForMe,
        Err(_) => Unwrapped::NotYet,
    }
}

impl SyncService<'_> {
    /// This device's age identity, made and saved at its first use.
    pub(super) fn identity(&self) -> Result<age::x25519::Identity> {
        if let Some(t) = meta::meta(&self.store.core.db.read()?)?.text(IDENTITY_KEY)?
            && let Ok(id) = age::x25519::Identity::from_str(&t)
        {
            return Ok(id);
        }
        let id = age::x25519::Identity::generate();
        let text = id.to_string();
        self.store
            .core
            .writes
            .write(Commit::BOOKKEEPING, |txn, _| meta::meta(txn)?.put_text(IDENTITY_KEY, text.expose_secret()))?;
        Ok(id)
    }

    /// The group's keys as this device holds them.
    pub(super) fn keyring(&self) -> Result<Keyring> {
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        let epoch = u32::try_from(m.u64(EPOCH_KEY)?.unwrap_or(0)).unwrap_or(u32::MAX);
        let key = m.text(KEY_KEY)?.and_then(|k| GroupKey::from_hex(&k)).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidInput,
                "this store is in no sync group with a folder (`engram sync init --folder DIR`)",
            )
        })?;
        let mut ring = Keyring::new(epoch, key);
        let old: BTreeMap<u32, String> = m.json(KEYS_KEY)?.unwrap_or_default();
        for (e, k) in old {
            if let Some(k) = GroupKey::from_hex(&k) {
                ring.insert(e, k);
            }
        }
        Ok(ring)
    }

    /// Saves `ring` (its newest key becomes the one this device seals with).
    pub(super) fn save_ring(&self, ring: &Keyring) -> Result<()> {
        let Some((epoch, key)) = ring.current() else { return Ok(()) };
        let all: BTreeMap<u32, String> = ring.iter().map(|(e, k)| (e, k.to_hex())).collect();
        let key = key.to_hex();
        self.store.core.writes.write(Commit::BOOKKEEPING, |txn, _| {
            let mut m = meta::meta(txn)?;
            m.put_text(KEY_KEY, &key)?;
            m.put_u64(EPOCH_KEY, u64::from(epoch))?;
            m.put_json(KEYS_KEY, &all)
        })
    }

    /// The group at the start of a pass: the keys, with every rotation in the folder this device can follow
    /// adopted (and saved), the devices removed, and why this device cannot go on, if so.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when the store is in no group with a folder; storage errors.
    pub(super) fn load_group(&self) -> Result<Group> {
        let (_, folder, me) = self.group()?;
        let mut ring = self.keyring()?;
        let before = ring.clone();
        let identity = self.identity()?;
        let mut g = Group {
            ring: Keyring::default(),
            folder: folder.clone(),
            me,
            removed: BTreeMap::new(),
            members: BTreeMap::new(),
            error: None,
        };
        // Sweeps until no key is learned: a device that joined with a later key learns the earlier ones from that
        // rotation's record, and reads the earlier records with them at the next sweep.
        let files = rotations(&folder, me);
        loop {
            let known = ring.iter().count();
            g.members.clear();
            g.removed.clear();
            g.error = None;
            let mut seen = BTreeSet::new();
            for (epoch, writer) in files.iter().copied() {
                if seen.contains(&epoch) {
                    continue; // of two rotations to one epoch, the first (smallest writer id) that opens counts
                }
                let current = ring.current().map_or(0, |(e, _)| e);
                let body = if ring.get(epoch).is_some() {
                    open_rotation(&ring, &folder, writer, epoch)
                } else if epoch == current + 1 {
                    match unwrap_key(&folder, writer, epoch, &identity) {
                        Unwrapped::Key(k) => {
                            let mut next = ring.clone();
                            next.insert(epoch, k);
                            let body = open_rotation(&next, &folder, writer, epoch);
                            if body.is_some() {
                                ring = next;
                            }
                            body
                        }
                        Unwrapped::NotYet => None,
                        Unwrapped::NotForMe => {
                            // Only once its record is there too: a rotation still being copied is no verdict.
                            if std::fs::metadata(segment::device_dir(&folder, writer).join(rotation_name(epoch)))
                                .is_ok()
                            {
                                g.error = Some(format!(
                                    "the group key was rotated (epoch {epoch}, by device {writer}) without this device: it \
                                     was removed from the group"
                                ));
                            }
                            None
                        }
                    }
                } else {
                    None
                };
                let Some(body) = body else { continue };
                for (e, k) in &body.previous {
                    if let Some(k) = GroupKey::from_hex(k) {
                        ring.insert(*e, k);
                    }
                }
                let (Some(prev), Some(new)) = (epoch.checked_sub(1).and_then(|p| ring.get(p)), ring.get(epoch)) else {
                    continue;
                };
                if proof(prev, new, epoch, writer) != body.proof {
                    g.error = Some(format!(
                        "the rotation to key epoch {epoch} by device {writer} does not prove its writer held the previous key: ignored"
                    ));
                    continue;
                }
                seen.insert(epoch);
                g.error = None;
                g.members.insert(epoch, body.members.iter().filter_map(|d| DeviceId::parse(d)).collect());
                for (d, n) in &body.removed {
                    if let Some(d) = DeviceId::parse(d) {
                        let e = g.removed.entry(d).or_insert(*n);
                        *e = (*e).max(*n);
                    }
                }
            }
            if ring.iter().count() == known {
                break;
            }
        }
        if g.removed.contains_key(&me) {
            g.error =
                Some("this device was removed from the sync group: its segments are refused by the others".into());
        }
        if ring != before {
            self.save_ring(&ring)?;
        }
        let removed: BTreeMap<String, u64> = g.removed.iter().map(|(d, n)| (d.to_hex(), *n)).collect();
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        let changed = m.text(GROUP_ERROR_KEY)? != g.error
            || m.json::<BTreeMap<String, u64>>(REMOVED_KEY)?.unwrap_or_default() != removed;
        drop(rtx);
        if changed {
            let err = g.error.clone();
            self.store.core.writes.write(Commit::BOOKKEEPING, |txn, _| {
                let mut m = meta::meta(txn)?;
                m.put_json(REMOVED_KEY, &removed)?;
                match &err {
                    Some(e) => m.put_text(GROUP_ERROR_KEY, e),
                    None => m.remove(GROUP_ERROR_KEY),
                }
            })?;
        }
        g.ring = ring;
        Ok(g)
    }

    /// The heads of the other devices of `g` that open under its keys, by device.
    pub(super) fn read_heads(&self, g: &Group) -> BTreeMap<DeviceId, HeadBody> {
        let mut out = BTreeMap::new();
        for d in devices(&g.folder, g.me, false) {
            let Ok(bytes) = std::fs::read(segment::device_dir(&g.folder, d).join(HEAD_NAME)) else { continue };
            if let Opened::Whole(plain, _) = segment::open_file(&g.ring, Kind::Head, d, 0, &bytes)
                && let Ok(h) = serde_json::from_slice::<HeadBody>(&plain)
            {
                out.insert(d, h);
            }
        }
        out
    }

    /// Writes this device's head when it changed since it was last written (an idle pass writes nothing).
    pub(super) fn write_head(&self, g: &Group, snapshot: u64) -> Result<()> {
        let identity = self.identity()?;
        let rtx = self.store.core.db.read()?;
        let m = meta::meta(&rtx)?;
        let peers: BTreeMap<String, Peer> = m.json(PEERS_KEY)?.unwrap_or_default();
        let head = HeadBody {
            recipient: identity.to_public().to_string(),
            segment: m.u64(super::folder::SEGMENT_KEY)?.unwrap_or(0),
            snapshot,
            cursors: peers.into_iter().map(|(d, p)| (d, p.cursor)).collect(),
        };
        let (epoch, key) = g.current()?;
        let written: Option<(u32, HeadBody)> = m.json(HEAD_KEY)?;
        drop(rtx);
        let dir = segment::device_dir(&g.folder, g.me);
        if written.as_ref() == Some(&(epoch, head.clone())) && dir.join(HEAD_NAME).exists() {
            return Ok(());
        }
        let plain = serde_json::to_vec(&head).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
        let bytes = segment::seal_file(key, epoch, Kind::Head, g.me, 0, &plain)
            .map_err(|e| Error::new(ErrorKind::Internal, e))?;
        write_atomically(&dir, HEAD_NAME, &bytes)?;
        self.store.core.writes.write(Commit::BOOKKEEPING, |txn, _| meta::meta(txn)?.put_json(HEAD_KEY, &(epoch, &head)))
    }

    /// Removes `device` (32 hex digits) from the sync group and rotates the group key: a new key of the next
    /// epoch, sealed to every other device's public key (from its head file) and this one's. The removed
    /// device's segments already in the folder (or applied by any device, as the heads say) stay accepted;
    /// every later one is refused by every device, and the removed device cannot read what the others write
    /// from now on. Returns the new pairing code: the old one no longer joins.
    ///
    /// The removed device still holds the old keys, so it can read what was written before; a device known to
    /// be lost or stolen should also lose its access to the folder itself (unshare it in the folder tool).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a malformed id, this device's own id, or a store in no group;
    /// [`ErrorKind::NotFound`] when the folder has no such device; [`ErrorKind::Conflict`] when another device
    /// of the group has written no head yet (it has not synced since it joined, so the new key cannot be sealed
    /// to it: sync it first, or remove it too), when the device was removed already, or when this device was
    /// removed itself; [`ErrorKind::Io`].
    pub fn remove_device(&self, device: &str) -> Result<RemoveReport> {
        let g = self.load_group()?;
        if let Some(e) = &g.error {
            return Err(Error::new(ErrorKind::Conflict, e.clone()));
        }
        let d = DeviceId::parse(device.trim()).ok_or_else(|| {
            Error::new(ErrorKind::InvalidInput, "a device id is 32 hex digits (`engram sync status`)")
        })?;
        if d == g.me {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "a device cannot remove itself: remove it from another one",
            ));
        }
        if g.removed.contains_key(&d) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("device {} was removed from the group already", d.to_hex()),
            ));
        }
        let present = devices(&g.folder, g.me, false);
        if !present.contains(&d) {
            return Err(Error::new(ErrorKind::NotFound, format!("no device {} in the sync folder", d.to_hex())));
        }
        let heads = self.read_heads(&g);
        let mut kept = vec![g.me];
        let mut recipients = vec![self.identity()?.to_public()];
        for o in present.iter().filter(|o| **o != d && !g.removed.contains_key(o)) {
            match heads.get(o).and_then(|h| age::x25519::Recipient::from_str(&h.recipient).ok()) {
                Some(r) => {
                    kept.push(*o);
                    recipients.push(r);
                }
                // A directory of another group (or of junk) has no head this group opens: not a member.
                None if !member_without_head(&g, *o) => {}
                None => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!(
                            "device {} has no head yet (it has not synced since it joined, or its head is still being \
                             copied): run `engram sync now` on it first, or remove it too",
                            o.to_hex()
                        ),
                    ));
                }
            }
        }
        // The last of its segments anyone may hold: those in the folder, and any a device says it applied.
        let peers = self.peers()?;
        let after = super::direct::numbers(&g.folder, d)
            .last()
            .copied()
            .into_iter()
            .chain(heads.values().filter_map(|h| h.cursors.get(&d.to_hex()).copied()))
            .chain(peers.get(&d.to_hex()).map(|p| p.cursor))
            .chain(heads.get(&d).map(|h| h.segment.max(h.snapshot)))
            .max()
            .unwrap_or(0);
        let (prev_epoch, prev) = g.current()?;
        let epoch = prev_epoch + 1;
        let key = GroupKey::random();
        // The new key, sealed to the kept devices.
        let enc = age::Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))
            .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
        let mut wrapped = Vec::new();
        let seal_fail = |e: std::io::Error| Error::new(ErrorKind::Internal, format!("sealing the new key: {e}"));
        let mut w = enc.wrap_output(&mut wrapped).map_err(seal_fail)?;
        w.write_all(&key.0).map_err(seal_fail)?;
        w.finish().map_err(seal_fail)?;
        let mut removed: BTreeMap<String, u64> = g.removed.iter().map(|(d, n)| (d.to_hex(), *n)).collect();
        removed.insert(d.to_hex(), after);
        let body = RotationBody {
            epoch,
            removed,
            members: kept.iter().map(|k| k.to_hex()).collect(),
            previous: g.ring.iter().map(|(e, k)| (e, k.to_hex())).collect(),
            proof: proof(prev, &key, epoch, g.me),
        };
        let plain = serde_json::to_vec(&body).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
        let sealed = segment::seal_file(&key, epoch, Kind::Rotation, g.me, u64::from(epoch), &plain)
            .map_err(|e| Error::new(ErrorKind::Internal, e))?;
        let dir = segment::device_dir(&g.folder, g.me);
        // The key first: a device that sees the record finds its key beside it.
        write_atomically(&dir, &wrapped_name(epoch), &wrapped)?;
        write_atomically(&dir, &rotation_name(epoch), &sealed)?;
        let mut ring = g.ring.clone();
        ring.insert(epoch, key.clone());
        self.save_ring(&ring)?;
        self.load_group()?; // the status shows the removal at once
        tracing::info!(device = %d.to_hex(), epoch, after, "sync: device removed, group key rotated");
        Ok(RemoveReport {
            device_id: d.to_hex(),
            last_accepted_segment: after,
            epoch,
            kept: kept.iter().map(|k| k.to_hex()).collect(),
            pairing_code: pairing_code(epoch, &key),
        })
    }

    /// Why this device cannot go on in its group (it was removed, or left out of a key rotation), if so.
    ///
    /// # Errors
    /// Storage errors.
    pub fn group_error(&self) -> Result<Option<String>> {
        meta::meta(&self.store.core.db.read()?)?.text(GROUP_ERROR_KEY)
    }
}
