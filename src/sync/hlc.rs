//! Hybrid logical clocks (HLC): timestamps that follow the wall clock when it moves forward, never go backwards
//! when it does not, and order every event a device has seen before the events it makes next.
//!
//! The algorithm is HLC of Kulkarni, Demirbas, Madappa, Avva and Leone, "Logical Physical Clocks and Consistent
//! Snapshots in Globally Distributed Databases" (OPODIS 2014), figure 5: a timestamp is `(l, c)`, the largest
//! physical time seen (`l`, here milliseconds since the Unix epoch) and a counter (`c`) that orders events
//! within one `l`.
//!
//! Two choices go beyond the paper:
//! - **A remote time far in the future is refused, not adopted** ([`MAX_DRIFT_MS`], one hour). Adopting it would
//!   drag every later stamp of this device ahead with it, and under last-writer-wins merging that device would
//!   win every conflict until real time caught up. The caller reports the refusal; the clock is left unchanged.
//! - **The counter never wraps.** At `u32::MAX` the clock moves `l` one millisecond ahead of real time instead, so
//!   stamps stay strictly increasing (after about four billion events in one millisecond).
//!
//! A [`Stamp`] pairs a timestamp with the device that made it. Stamps are totally ordered (time, then counter,
//! then device id), so two devices that stamp the same `(l, c)` still compare one way on both: the deterministic
//! tie-break of last-writer-wins (`docs/sync.md`).

use std::fmt;

/// How far a remote timestamp may run ahead of this device's wall clock before it is refused: one hour, in
/// milliseconds.
pub const MAX_DRIFT_MS: u64 = 60 * 60 * 1000;

pub use crate::model::{DeviceId, Hlc, Stamp};

/// A remote timestamp the clock refused; the clock did not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The remote time runs more than [`MAX_DRIFT_MS`] ahead of this device's wall clock.
    FarFuture {
        /// The remote physical time, in milliseconds since the epoch.
        remote_ms: u64,
        /// This device's wall clock when it was refused, in milliseconds since the epoch.
        local_ms: u64,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::FarFuture { remote_ms, local_ms } => write!(
                f,
                "a remote clock runs {} s ahead of this device's (more than the {} s allowed); its change is not \
                 applied",
                remote_ms.saturating_sub(*local_ms) / 1000,
                MAX_DRIFT_MS / 1000
            ),
        }
    }
}

impl std::error::Error for Refused {}

/// The wall clock an [`HlcClock`] reads: milliseconds since the Unix epoch. Tests give their own.
pub trait WallClock {
    /// Now, in milliseconds since 1970-01-01T00:00:00Z (may go backwards: the HLC absorbs it).
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// One device's hybrid logical clock: [`HlcClock::tick`] stamps a local event, [`HlcClock::observe`] takes in a
/// remote one. Not shared: the store holds it behind its write lock, so stamps follow commit order.
#[derive(Debug, Clone)]
pub struct HlcClock<W: WallClock = SystemClock> {
    last: Hlc,
    device: DeviceId,
    wall: W,
}

impl<W: WallClock> HlcClock<W> {
    /// A clock for `device` that has seen nothing later than `last` (the largest stamp in its store, or
    /// `Hlc::default()` for a new one).
    pub fn new(device: DeviceId, last: Hlc, wall: W) -> Self {
        HlcClock { last, device, wall }
    }

    /// The device this clock stamps for.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// The largest timestamp this clock has made or seen.
    pub fn last(&self) -> Hlc {
        self.last
    }

    /// The stamp of a new local event: strictly greater than every stamp this clock made or observed before
    /// (paper, figure 5, "send or local event").
    pub fn tick(&mut self) -> Stamp {
        let pt = self.wall.now_ms();
        let next = if pt > self.last.ms { Hlc { ms: pt, counter: 0 } } else { bump(self.last) };
        self.last = next;
        Stamp { hlc: next, device: self.device }
    }

    /// Takes in a remote timestamp (a change received from another device), so that every later local stamp
    /// orders after it (paper, figure 5, "receive event of message m").
    ///
    /// # Errors
    /// [`Refused::FarFuture`] when `remote` runs more than [`MAX_DRIFT_MS`] ahead of the wall clock; the clock
    /// is left as it was.
    pub fn observe(&mut self, remote: Hlc) -> Result<(), Refused> {
        let pt = self.wall.now_ms();
        if remote.ms > pt.saturating_add(MAX_DRIFT_MS) {
            return Err(Refused::FarFuture { remote_ms: remote.ms, local_ms: pt });
        }
        let ms = self.last.ms.max(remote.ms).max(pt);
        let next = if ms == self.last.ms && ms == remote.ms {
            Hlc { ms, counter: self.last.counter.max(remote.counter) }
        } else if ms == self.last.ms {
            self.last
        } else if ms == remote.ms {
            remote
        } else {
            Hlc { ms, counter: 0 }
        };
        // The paper's receive also counts the receive as an event (c + 1); the next tick does that here, so
        // observing many changes of one batch does not spend counters. Every branch above is >= `last`.
        debug_assert!(next >= self.last);
        self.last = next;
        Ok(())
    }
}

/// The next timestamp after `h` at the same physical time, or one millisecond on when the counter is spent.
fn bump(h: Hlc) -> Hlc {
    match h.counter.checked_add(1) {
        Some(counter) => Hlc { ms: h.ms, counter },
        None => Hlc { ms: h.ms.saturating_add(1), counter: 0 },
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use proptest::prelude::*;

    use super::*;

    /// A wall clock the test sets.
    #[derive(Debug, Clone, Default)]
    struct Manual(Rc<Cell<u64>>);

    impl WallClock for Manual {
        fn now_ms(&self) -> u64 {
            self.0.get()
        }
    }

    fn clock(start: u64) -> (HlcClock<Manual>, Rc<Cell<u64>>) {
        let wall = Manual(Rc::new(Cell::new(start)));
        let cell = wall.0.clone();
        (HlcClock::new(DeviceId([1; 16]), Hlc::default(), wall), cell)
    }

    #[test]
    fn stamps_follow_the_wall_clock_and_count_within_a_millisecond() {
        let (mut c, wall) = clock(1_000);
        assert_eq!(c.tick().hlc, Hlc { ms: 1_000, counter: 0 });
        assert_eq!(c.tick().hlc, Hlc { ms: 1_000, counter: 1 });
        wall.set(1_005);
        assert_eq!(c.tick().hlc, Hlc { ms: 1_005, counter: 0 });
        wall.set(900); // the wall clock went back: the HLC does not
        assert_eq!(c.tick().hlc, Hlc { ms: 1_005, counter: 1 });
    }

    #[test]
    fn a_far_future_remote_time_is_refused_and_changes_nothing() {
        let (mut c, _) = clock(10_000);
        c.tick();
        let before = c.last();
        let far = Hlc { ms: 10_000 + MAX_DRIFT_MS + 1, counter: 0 };
        let e = c.observe(far).unwrap_err();
        assert_eq!(e, Refused::FarFuture { remote_ms: far.ms, local_ms: 10_000 });
        assert!(e.to_string().contains("3600 s"), "{e}");
        assert_eq!(c.last(), before);
        // Just inside the bound is taken, and the next stamp orders after it.
        let near = Hlc { ms: 10_000 + MAX_DRIFT_MS, counter: 7 };
        c.observe(near).expect("within the bound");
        assert!(c.tick().hlc > near);
    }

    #[test]
    fn the_counter_never_wraps() {
        let (mut c, _) = clock(5);
        c.observe(Hlc { ms: 5, counter: u32::MAX }).expect("observe");
        assert_eq!(c.tick().hlc, Hlc { ms: 6, counter: 0 });
    }

    #[test]
    fn stamps_order_by_time_then_device() {
        let t = Hlc { ms: 7, counter: 2 };
        let (a, b) = (Stamp { hlc: t, device: DeviceId([1; 16]) }, Stamp { hlc: t, device: DeviceId([2; 16]) });
        assert!(a < b);
        assert!(Stamp { hlc: Hlc { ms: 8, counter: 0 }, device: DeviceId([0; 16]) } > b);
        let h = Hlc { ms: 1_765_000_000_000, counter: 3 };
        assert_eq!(Hlc::from_bytes(h.to_bytes()), h);
        assert!(h.to_bytes() < Hlc { ms: h.ms, counter: 4 }.to_bytes());
        let d = DeviceId::random();
        assert_eq!(DeviceId::parse(&d.to_hex()), Some(d));
        assert_eq!(DeviceId::parse("not a device"), None);
    }

    /// One step of a device's life: its wall clock moves (forwards or backwards), then it stamps a local event
    /// or receives a remote timestamp.
    #[derive(Debug, Clone)]
    enum Step {
        Local { wall_delta: i64 },
        Remote { wall_delta: i64, remote_offset: i64, counter: u32 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (-5_000i64..5_000).prop_map(|wall_delta| Step::Local { wall_delta }),
            (-5_000i64..5_000, -(2 * MAX_DRIFT_MS as i64)..(2 * MAX_DRIFT_MS as i64), any::<u32>())
                .prop_map(|(wall_delta, remote_offset, counter)| Step::Remote { wall_delta, remote_offset, counter }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever the wall clock does: every local stamp is greater than every stamp made or accepted before
        /// it; a remote time is refused exactly when it runs more than an hour ahead, leaving the clock as it
        /// was; and the clock never runs more than the allowed drift ahead of the largest wall time it has read.
        #[test]
        fn stamps_increase_and_accepted_remote_times_are_passed(steps in proptest::collection::vec(step(), 1..200)) {
            let start = 1_700_000_000_000u64;
            let (mut c, wall) = clock(start);
            let mut floor = Hlc::default();
            let mut max_wall = start;
            for s in steps {
                let delta = match &s { Step::Local { wall_delta } | Step::Remote { wall_delta, .. } => *wall_delta };
                wall.set(wall.get().saturating_add_signed(delta));
                max_wall = max_wall.max(wall.get());
                match s {
                    Step::Local { .. } => {
                        let h = c.tick().hlc;
                        prop_assert!(h > floor, "{h} after {floor}");
                        floor = h;
                    }
                    Step::Remote { remote_offset, counter, .. } => {
                        let remote = Hlc { ms: wall.get().saturating_add_signed(remote_offset), counter };
                        let before = c.last();
                        match c.observe(remote) {
                            Ok(()) => {
                                prop_assert!(remote.ms <= wall.get() + MAX_DRIFT_MS);
                                floor = floor.max(remote);
                                prop_assert!(c.last() >= floor);
                            }
                            Err(Refused::FarFuture { .. }) => {
                                prop_assert!(remote.ms > wall.get() + MAX_DRIFT_MS);
                                prop_assert_eq!(c.last(), before);
                            }
                        }
                    }
                }
                // Only accepted remote times (at most an hour ahead) or spent counters move l past real time.
                prop_assert!(c.last().ms <= max_wall + MAX_DRIFT_MS + 1);
            }
        }
    }
}
