//! Sync between one person's devices (issue 67; the design and its merge rules: `docs/sync.md`).
//!
//! Built so far: the hybrid logical clock that orders every replicated change ([`hlc`]), the device id every
//! store is given when it is created (`META.device_id`), and the merge rules as pure functions ([`merge`]); the
//! store's change log and its apply are `KnowledgeStore::sync`. The folder and HTTP transports and pairing
//! follow; `docs/sync.md` says which parts exist.

pub mod compact;
pub mod hlc;
pub mod merge;
pub mod segment;

pub use crate::model::{Change, Item, ItemClock, Loser, Op, Tag};
pub use hlc::{DeviceId, Hlc, HlcClock, MAX_DRIFT_MS, Refused, Stamp, SystemClock, WallClock};
