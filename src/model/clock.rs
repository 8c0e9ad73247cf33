//! The data of sync's clocks: hybrid logical clock timestamps ([`Hlc`]), device ids ([`DeviceId`]) and the stamp
//! every replicated change carries ([`Stamp`]). The clock that makes them is `crate::sync::hlc` (Kulkarni et al.,
//! OPODIS 2014); the change log that keeps them is `docs/sync.md`.

use std::fmt;

/// One HLC timestamp: physical milliseconds since the Unix epoch (`l`) and a counter within them (`c`).
/// Ordered by `l`, then `c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Hlc {
    /// The largest physical time seen, in milliseconds since 1970-01-01T00:00:00Z.
    pub ms: u64,
    /// Orders events that share `ms` (0 for the first).
    pub counter: u32,
}

impl Hlc {
    /// The timestamp as 12 big-endian bytes (`ms`, then `counter`): byte order is time order, for keys.
    pub fn to_bytes(self) -> [u8; 12] {
        let mut out = [0u8; 12];
        out[..8].copy_from_slice(&self.ms.to_be_bytes());
        out[8..].copy_from_slice(&self.counter.to_be_bytes());
        out
    }

    /// The timestamp of [`Hlc::to_bytes`].
    pub fn from_bytes(b: [u8; 12]) -> Self {
        let mut ms = [0u8; 8];
        ms.copy_from_slice(&b[..8]);
        let mut counter = [0u8; 4];
        counter.copy_from_slice(&b[8..]);
        Hlc { ms: u64::from_be_bytes(ms), counter: u32::from_be_bytes(counter) }
    }
}

impl fmt::Display for Hlc {
    /// `<ms>.<counter>`, for logs and status.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.ms, self.counter)
    }
}

/// A device's identity in a sync group: 16 random bytes (a UUID v4), made once per store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct DeviceId(pub [u8; 16]);

impl DeviceId {
    /// A new random device id.
    pub fn random() -> Self {
        DeviceId(*uuid::Uuid::new_v4().as_bytes())
    }

    /// The id as 32 lowercase hex digits (its name in folders and status).
    pub fn to_hex(self) -> String {
        uuid::Uuid::from_bytes(self.0).simple().to_string()
    }

    /// The id of 32 hex digits (as [`DeviceId::to_hex`] writes; hyphens and capitals are accepted); None for
    /// anything else.
    pub fn parse(s: &str) -> Option<Self> {
        uuid::Uuid::parse_str(s).ok().map(|u| DeviceId(*u.as_bytes()))
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// A change's position in the merged history: its timestamp and the device that made it. Ordered by the
/// timestamp, then the device id, so that every device orders any two stamps the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    /// When.
    pub hlc: Hlc,
    /// Who.
    pub device: DeviceId,
}
