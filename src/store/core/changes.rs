//! Sync's change capture (docs/sync.md, "The change log"): in a store that belongs to a sync group, every write
//! transaction notes the keys it writes in the replicated kinds ([`crate::storage::tables::REPLICATED`]), and
//! before it commits, each item behind them whose replicated value changed is stamped with the device's hybrid
//! logical clock and appended to the change log, in the same transaction. A write that leaves the replicated
//! fields as they were (a read count, a recount, a change from another device applied as it came) logs nothing.

use parking_lot::Mutex;

use crate::error::Result;
use crate::model::{Change, Item, ItemClock, Op};
use crate::storage::WriteTx;
use crate::store::records::{label, memory, meta, sync};
use crate::sync::{DeviceId, Hlc, HlcClock, merge};

/// `META` key: the last sequence number of the change log.
pub(crate) const SEQ_KEY: &str = "sync_seq";
/// `META` key: the device's last HLC timestamp (JSON), so that a restart with a clock set back stays monotonic.
pub(crate) const HLC_KEY: &str = "sync_hlc";
/// `META` key: set while the store belongs to a sync group (its value: when it joined, RFC 3339).
pub(crate) const ENABLED_KEY: &str = "sync_enabled";

/// The device's clock while the store is in a sync group (None otherwise: nothing is captured), and how many
/// changes this process has logged (what a sync worker watches without opening a transaction).
#[derive(Default)]
pub(crate) struct SyncClock(Mutex<Option<HlcClock>>, std::sync::atomic::AtomicU64, pub(crate) Progress);

/// A folder pass's progress through the other devices' segments, in memory (what `/health` and the CLI's bar
/// show during a first sync).
#[derive(Default)]
pub(crate) struct Progress {
    /// A pass is applying segments.
    pub running: std::sync::atomic::AtomicBool,
    /// Segments applied by the running (or last) pass.
    pub done: std::sync::atomic::AtomicU64,
    /// Segments the running (or last) pass found to apply when it started.
    pub total: std::sync::atomic::AtomicU64,
}

impl SyncClock {
    /// The folder pass's progress.
    pub(crate) fn progress(&self) -> &Progress {
        &self.2
    }

    /// Changes logged by this process since the store opened.
    pub(crate) fn logged(&self) -> u64 {
        self.1.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Counts `n` more changes logged (after their commit).
    pub(crate) fn count(&self, n: u64) {
        self.1.fetch_add(n, std::sync::atomic::Ordering::AcqRel);
    }

    /// Whether writes are captured.
    pub(crate) fn on(&self) -> bool {
        self.0.lock().is_some()
    }

    /// Starts capturing with `device`'s clock, from `last` (the last timestamp it made or saw).
    pub(crate) fn start(&self, device: DeviceId, last: Hlc) {
        *self.0.lock() = Some(HlcClock::new(device, last, crate::sync::SystemClock));
    }

    /// Runs `f` with the clock; None when the store is in no sync group.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut HlcClock) -> T) -> Option<T> {
        self.0.lock().as_mut().map(f)
    }
}

/// Starts capturing on `core` with `device`'s clock from `last`, unless it already does.
///
/// # Errors
/// [`crate::ErrorKind::InvalidInput`] on a PostgreSQL store: several daemons already share its one database, and
/// sync is for the embedded redb store.
pub(crate) fn start(core: &super::Core, device: DeviceId, last: Hlc) -> Result<()> {
    if core.db.shared() {
        return Err(crate::error::Error::new(
            crate::ErrorKind::InvalidInput,
            "sync is for the embedded redb store; on PostgreSQL several daemons already share one database",
        ));
    }
    if !core.writes.sync.on() {
        core.writes.sync.start(device, last);
    }
    Ok(())
}

/// Logs the changes of every item the transaction touched (module documentation), then saves the clock.
/// Returns how many changes were logged.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`].
pub(crate) fn capture(txn: &WriteTx, clock: &mut HlcClock) -> Result<u64> {
    let touched = txn.take_touched();
    if touched.is_empty() {
        return Ok(0);
    }
    let items = sync::stamp_order(txn, sync::touched_items(&touched))?;
    log_items(txn, clock, items)
}

/// Logs the change of each of `items` whose replicated value differs from what its clock last stamped, then
/// saves the log's sequence number and the clock in `META`.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`].
pub(crate) fn log_items(txn: &WriteTx, clock: &mut HlcClock, items: impl IntoIterator<Item = Item>) -> Result<u64> {
    let mut clocks = sync::items(txn)?;
    let mut log = sync::log(txn)?;
    let mut m = meta::meta(txn)?;
    let mut seq = m.u64(SEQ_KEY)?.unwrap_or(0);
    let first = seq;
    // Each space's label redirects, read once per transaction (its label merges and labels are written before
    // the capture runs).
    let mut redirects_of: std::collections::HashMap<String, sync::Redirects> = std::collections::HashMap::new();
    for item in items {
        let mut c: ItemClock = clocks.get(item.key())?.unwrap_or_default();
        let mut changes = Vec::new();
        let current = sync::current(txn, &item)?;
        let hash = current.as_ref().map(|(v, _)| sync::hash(v));
        if hash != c.hash {
            let stamp = clock.tick();
            let base = if matches!(item, Item::Memory(_)) { merge::local_edit(&mut c, stamp) } else { c.winner };
            let op = match &current {
                Some((value, _)) => Op::Put { base, value: value.clone() },
                None => Op::Delete { base },
            };
            c.winner = Some(stamp);
            c.hash = hash;
            if matches!(item, Item::Message(..)) {
                // A message's clock keeps its winning write's base ([`merge::message_wins`]).
                c.nodes = vec![(stamp, base)];
            }
            changes.push(Change { item: item.clone(), stamp, op });
        }
        if let (Item::Memory(id), Some((_, labels))) = (&item, &current) {
            // The labels the memory shows are its add-wins set through the space's label merges: a memory that
            // shows the survivor of a merge logs nothing, and taking the survivor off removes every label
            // redirected to it.
            let present = c.present_labels();
            let redirects = match memory::space_of(txn, id)? {
                Some(space) => match redirects_of.get(&space) {
                    Some(r) => r.clone(),
                    None => {
                        let known = label::labels(txn)?;
                        let r = sync::Redirects::of(txn, &space, |l| known.contains((space.as_str(), l)))?;
                        redirects_of.insert(space, r.clone());
                        r
                    }
                },
                None => sync::Redirects::default(),
            };
            let shown = redirects.apply(&present);
            for added in labels.difference(&shown) {
                let stamp = clock.tick();
                merge::tag_add(&mut c, added, stamp);
                changes.push(Change { item: item.clone(), stamp, op: Op::TagAdd { label: added.clone() } });
            }
            for gone in shown.difference(labels) {
                for source in redirects.sources_of(gone).intersection(&present) {
                    if let Some(t) = c.tag(source) {
                        let stamp = clock.tick();
                        merge::tag_remove(&mut c, source, t.add);
                        let op = Op::TagRemove { label: source.clone(), observed: t.add };
                        changes.push(Change { item: item.clone(), stamp, op });
                    }
                }
            }
        }
        if changes.is_empty() {
            continue;
        }
        clocks.put(item.key(), &c)?;
        for change in &changes {
            seq += 1;
            log.put(seq, change)?;
        }
    }
    if seq != first {
        m.put_u64(SEQ_KEY, seq)?;
        m.put_json(HLC_KEY, &clock.last())?;
    }
    Ok(seq - first)
}
