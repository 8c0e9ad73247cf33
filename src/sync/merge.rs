//! The merge rules of sync as pure functions on an item's clock ([`ItemClock`]; docs/sync.md, "Merge rules").
//! The store's capture (`store/core/changes.rs`) and apply (`store/sync/apply.rs`) call them and do only the
//! reads and writes; the property test below runs them on model replicas, 10,000 cases.
//!
//! Each rule is a join of a semilattice, so the state reached depends on the set of changes delivered, not on
//! their order or their repeats:
//! - **last-writer-wins register** (spaces, labels, working memory days, relations): the greatest stamp holds
//!   (cr-sqlite's LWW columns; Ditto's HLC registers);
//! - **a memory's history**: the set of (stamp, base) nodes; its heads are the concurrent edits, the greatest
//!   head is the memory and the others are kept (a multi-value register as Dynamo's and Riak's siblings, shown
//!   by last-writer-wins);
//! - **a thread's messages**: registers keyed by deduplication key, compared by [`message_wins`] (the first of
//!   concurrent appends of one key wins and keeps its place; a delete wins over the appends it saw);
//! - **label assignments**: per label the greatest add and the greatest add a removal observed; the label is on
//!   while its add is newer (an observed-remove, add-wins set: Shapiro, Preguiça, Baquero and Zawirski,
//!   "Conflict-free Replicated Data Types", SSS 2011).

use std::collections::BTreeSet;

use crate::model::{ItemClock, Loser, Stamp, Tag};

/// Whether a change stamped `stamp` replaces the value of a register last written at `held` (None: never
/// stamped, which every change replaces).
pub fn register_wins(held: Option<Stamp>, stamp: Stamp) -> bool {
    held.is_none_or(|h| stamp > h)
}

/// One write of a thread's message as the message merge compares it: its stamp, the stamp of the write it
/// replaced on its device (None: the key was new there), and whether it deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageWrite {
    /// The change's stamp.
    pub stamp: Stamp,
    /// The stamp of the message's write it replaced (its base).
    pub base: Option<Stamp>,
    /// A delete (the thread was deleted).
    pub delete: bool,
}

/// Whether `change` replaces `held`, the winning write of a thread's message (None: none yet).
///
/// Messages are never edited: a key is appended, deleted with its thread, and may be appended again. A write
/// that saw more wins (the greater base: a delete of what was appended, an append after a delete, as the
/// causal length of cr-sqlite); of two writes on the same base, a delete wins over an append, and of two
/// appends of one deduplication key on two devices the first (the smaller stamp) wins, so that the message keeps
/// its first place in the thread. A total order on writes, so the winner does not depend on the order they
/// arrive in.
pub fn message_wins(held: Option<MessageWrite>, change: MessageWrite) -> bool {
    let Some(h) = held else { return true };
    if h.stamp == change.stamp {
        return false;
    }
    match (change.base, change.delete).cmp(&(h.base, h.delete)) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal if change.delete => change.stamp > h.stamp,
        std::cmp::Ordering::Equal => change.stamp < h.stamp,
    }
}

/// What merging one node into a memory's history did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeMerge {
    /// The node was known already (a repeat): nothing changed.
    Known,
    /// The node is an ancestor of a known node: recorded, nothing else changes.
    Buried,
    /// The node is the new winner: the store takes its value. `kept` is the previous winner when it stays a
    /// head (a concurrent edit that now lost): the caller keeps its value ([`keep_loser`]).
    Wins {
        /// The previous winner, now a kept loser.
        kept: Option<Stamp>,
    },
    /// The node is a head that lost to a greater one: the caller keeps its value ([`keep_loser`]).
    Loses,
}

/// Merges the node `(stamp, base)` into a memory's history (`clock.nodes`) and moves `clock.winner` to the
/// greatest head. The losers that stopped being heads are dropped ([`prune_losers`]).
pub fn merge_node(clock: &mut ItemClock, stamp: Stamp, base: Option<Stamp>) -> NodeMerge {
    if clock.knows(stamp) {
        return NodeMerge::Known;
    }
    let old = clock.winner;
    clock.nodes.push((stamp, base));
    let heads = clock.heads();
    let out = match heads.first() {
        Some(&w) if w == stamp => {
            clock.winner = Some(stamp);
            NodeMerge::Wins { kept: old.filter(|o| heads.contains(o)) }
        }
        _ if heads.contains(&stamp) => NodeMerge::Loses,
        _ => NodeMerge::Buried,
    };
    prune_losers(clock);
    out
}

/// Records a local edit of a memory: a new node on top of the winner, which it replaces (its base).
pub fn local_edit(clock: &mut ItemClock, stamp: Stamp) -> Option<Stamp> {
    let base = clock.winner;
    clock.nodes.push((stamp, base));
    clock.winner = Some(stamp);
    prune_losers(clock);
    base
}

/// Keeps the value of a losing head (`value` None: a concurrent delete).
pub fn keep_loser(clock: &mut ItemClock, stamp: Stamp, value: Option<Vec<u8>>) {
    if !clock.losers.iter().any(|l| l.stamp == stamp) {
        clock.losers.push(Loser { stamp, value });
    }
    prune_losers(clock);
}

/// Drops the kept losers that are no longer heads (an edit built on them arrived) or that are the winner;
/// orders the rest newest first.
pub fn prune_losers(clock: &mut ItemClock) {
    let heads: BTreeSet<Stamp> = clock.heads().into_iter().collect();
    let winner = clock.winner;
    clock.losers.retain(|l| heads.contains(&l.stamp) && Some(l.stamp) != winner);
    clock.losers.sort_by_key(|l| std::cmp::Reverse(l.stamp));
}

/// Merges an add of `label` stamped `stamp`; whether anything changed.
pub fn tag_add(clock: &mut ItemClock, label: &str, stamp: Stamp) -> bool {
    let tag = clock.tag(label);
    if tag.is_some_and(|t| t.add >= stamp) {
        return false;
    }
    clock.set_tag(label, Tag { add: stamp, removed: tag.and_then(|t| t.removed) });
    true
}

/// Merges a removal of `label` that observed the add `observed`; whether anything changed.
pub fn tag_remove(clock: &mut ItemClock, label: &str, observed: Stamp) -> bool {
    let tag = clock.tag(label);
    if tag.and_then(|t| t.removed).is_some_and(|r| r >= observed) {
        return false;
    }
    let add = tag.map_or(observed, |t| t.add.max(observed));
    clock.set_tag(label, Tag { add, removed: Some(observed) });
    true
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::model::{DeviceId, Hlc};

    /// A change of the model: one memory's edit or delete, a label add or removal, or a register write.
    #[derive(Debug, Clone, PartialEq)]
    enum Ch {
        Node { item: u8, stamp: Stamp, base: Option<Stamp>, value: Option<u32> },
        Add { item: u8, label: u8, stamp: Stamp },
        Remove { item: u8, label: u8, observed: Stamp },
        Reg { item: u8, stamp: Stamp, value: Option<u32> },
    }

    /// A model replica: per item its clock and value (a memory's value and a register's).
    #[derive(Default, Clone)]
    struct Replica {
        device: u8,
        /// The replica's wall clock, in milliseconds.
        wall: u64,
        /// The last HLC timestamp it made or saw.
        last: Hlc,
        mems: BTreeMap<u8, (ItemClock, Option<u32>)>,
        regs: BTreeMap<u8, (Option<Stamp>, Option<u32>)>,
        log: Vec<Ch>,
    }

    impl Replica {
        /// The next stamp (HLC): wall clocks that collide and run at different speeds, so ties in time are
        /// common and go to the counter, then the device id.
        fn stamp(&mut self, skew: u64) -> Stamp {
            self.wall += skew;
            self.last = if self.wall > self.last.ms {
                Hlc { ms: self.wall, counter: 0 }
            } else {
                Hlc { ms: self.last.ms, counter: self.last.counter + 1 }
            };
            Stamp { hlc: self.last, device: DeviceId([self.device; 16]) }
        }

        fn observe(&mut self, s: Stamp) {
            self.last = self.last.max(s.hlc);
        }

        fn local(&mut self, op: &Op) {
            let s = self.stamp(op.skew);
            match op.kind {
                Kind::Edit(v) | Kind::Delete(v) => {
                    let value = matches!(op.kind, Kind::Edit(_)).then_some(v);
                    let (c, val) = self.mems.entry(op.item).or_default();
                    let base = local_edit(c, s);
                    *val = value;
                    self.log.push(Ch::Node { item: op.item, stamp: s, base, value });
                }
                Kind::Add(l) => {
                    let (c, _) = self.mems.entry(op.item).or_default();
                    if !c.present_labels().contains(&l.to_string()) {
                        tag_add(c, &l.to_string(), s);
                        self.log.push(Ch::Add { item: op.item, label: l, stamp: s });
                    }
                }
                Kind::Remove(l) => {
                    let (c, _) = self.mems.entry(op.item).or_default();
                    if let Some(t) = c.tag(&l.to_string()).filter(|t| t.present()) {
                        tag_remove(c, &l.to_string(), t.add);
                        self.log.push(Ch::Remove { item: op.item, label: l, observed: t.add });
                    }
                }
                Kind::Set(v) => {
                    let value = (v != 0).then_some(v);
                    self.regs.insert(op.item, (Some(s), value));
                    self.log.push(Ch::Reg { item: op.item, stamp: s, value });
                }
            }
        }

        fn apply(&mut self, ch: &Ch) {
            match ch {
                Ch::Node { item, stamp, base, value } => {
                    self.observe(*stamp);
                    let (c, val) = self.mems.entry(*item).or_default();
                    match merge_node(c, *stamp, *base) {
                        NodeMerge::Wins { kept } => {
                            if let Some(k) = kept {
                                keep_loser(c, k, val.map(|v| v.to_le_bytes().to_vec()));
                            }
                            *val = *value;
                        }
                        NodeMerge::Loses => keep_loser(c, *stamp, value.map(|v| v.to_le_bytes().to_vec())),
                        NodeMerge::Known | NodeMerge::Buried => {}
                    }
                }
                Ch::Add { item, label, stamp } => {
                    self.observe(*stamp);
                    tag_add(&mut self.mems.entry(*item).or_default().0, &label.to_string(), *stamp);
                }
                Ch::Remove { item, label, observed } => {
                    tag_remove(&mut self.mems.entry(*item).or_default().0, &label.to_string(), *observed);
                }
                Ch::Reg { item, stamp, value } => {
                    self.observe(*stamp);
                    let r = self.regs.entry(*item).or_default();
                    if register_wins(r.0, *stamp) {
                        *r = (Some(*stamp), *value);
                    }
                }
            }
        }

        /// What must agree: each memory's value, kept losers and labels; each register's value.
        #[allow(clippy::type_complexity)]
        fn state(&self) -> (Vec<(u8, Option<u32>, Vec<Loser>, BTreeSet<String>)>, Vec<(u8, Option<u32>)>) {
            let mems = self
                .mems
                .iter()
                .map(|(i, (c, v))| (*i, *v, c.losers.clone(), c.present_labels()))
                .filter(|(_, v, l, labels)| v.is_some() || !l.is_empty() || !labels.is_empty())
                .collect();
            (mems, self.regs.iter().map(|(i, (_, v))| (*i, *v)).collect())
        }
    }

    #[derive(Debug, Clone, Copy)]
    enum Kind {
        Edit(u32),
        Delete(u32),
        Add(u8),
        Remove(u8),
        Set(u32),
    }

    #[derive(Debug, Clone, Copy)]
    struct Op {
        item: u8,
        kind: Kind,
        skew: u64,
    }

    #[derive(Debug, Clone)]
    enum Step {
        Local(usize, Op),
        /// Replica `to` gets changes of replica `from`'s log, picked by index, some twice, in this order.
        Deliver {
            from: usize,
            to: usize,
            pick: Vec<(usize, bool)>,
        },
    }

    fn step(n: usize) -> impl Strategy<Value = Step> {
        let kind = prop_oneof![
            4 => (1..5u32).prop_map(Kind::Edit),
            1 => Just(Kind::Delete(0)),
            3 => (0..3u8).prop_map(Kind::Add),
            2 => (0..3u8).prop_map(Kind::Remove),
            2 => (0..4u32).prop_map(Kind::Set),
        ];
        let op = (0..3u8, kind, 0..3u64).prop_map(|(item, kind, skew)| Op { item, kind, skew });
        prop_oneof![
            3 => (0..n, op).prop_map(|(r, op)| Step::Local(r, op)),
            2 => (0..n, 0..n, proptest::collection::vec((0..32usize, any::<bool>()), 0..8))
                .prop_map(|(from, to, pick)| Step::Deliver { from, to, pick }),
        ]
    }

    proptest! {
        // The merge rules are cheap: 10,000 cases of 3 to 5 replicas (docs/sync.md; issue 67's acceptance).
        #![proptest_config(ProptestConfig { cases: 10_000, max_shrink_iters: 2_000, ..ProptestConfig::default() })]

        #[test]
        fn replicas_converge_whatever_the_order_and_repeats_of_delivery(
            (n, steps, finish) in (3..=5usize).prop_flat_map(|n| (
                Just(n),
                proptest::collection::vec(step(n), 0..40),
                proptest::collection::vec(any::<u64>(), 5),
            ))
        ) {
            let mut rs: Vec<Replica> = (0..n).map(|i| Replica { device: i as u8 + 1, ..Default::default() }).collect();
            for s in &steps {
                match s {
                    Step::Local(r, op) => rs[*r].local(op),
                    Step::Deliver { from, to, pick } => {
                        let log = rs[*from].log.clone();
                        if log.is_empty() || from == to {
                            continue;
                        }
                        for (i, twice) in pick {
                            let ch = &log[i % log.len()];
                            rs[*to].apply(ch);
                            if *twice {
                                rs[*to].apply(ch);
                            }
                        }
                    }
                }
            }
            // Then every log reaches every replica, each in its own shuffled order.
            let all: Vec<Ch> = rs.iter().flat_map(|r| r.log.clone()).collect();
            for (r, seed) in rs.iter_mut().zip(finish) {
                let mut order: Vec<usize> = (0..all.len()).collect();
                let mut x = seed | 1;
                for i in (1..order.len()).rev() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    order.swap(i, (x % (i as u64 + 1)) as usize);
                }
                for i in order {
                    r.apply(&all[i]);
                }
            }
            let want = rs[0].state();
            for r in &rs[1..] {
                prop_assert_eq!(&r.state(), &want);
            }
            // Nothing a replica wrote disappears without a trace: every memory edit that is a head of the
            // merged history is the value or a kept loser.
            for (item, (c, _)) in &rs[0].mems {
                for h in c.heads() {
                    prop_assert!(c.winner == Some(h) || c.losers.iter().any(|l| l.stamp == h), "item {item}");
                }
            }
        }
    }

    #[test]
    fn a_tie_in_time_is_broken_by_the_device_id_the_same_way_everywhere() {
        let hlc = Hlc { ms: 5, counter: 0 };
        let (a, b) = (Stamp { hlc, device: DeviceId([1; 16]) }, Stamp { hlc, device: DeviceId([2; 16]) });
        assert!(register_wins(Some(a), b) && !register_wins(Some(b), a));
        let mut one = ItemClock::default();
        let mut two = ItemClock::default();
        assert_eq!(merge_node(&mut one, a, None), NodeMerge::Wins { kept: None });
        assert_eq!(merge_node(&mut one, b, None), NodeMerge::Wins { kept: Some(a) });
        assert_eq!(merge_node(&mut two, b, None), NodeMerge::Wins { kept: None });
        assert_eq!(merge_node(&mut two, a, None), NodeMerge::Loses);
        assert_eq!((one.winner, two.winner), (Some(b), Some(b)));
    }

    #[test]
    fn a_message_has_one_winner_whatever_the_order_its_writes_arrive_in() {
        let s = |ms, d| Stamp { hlc: Hlc { ms, counter: 0 }, device: DeviceId([d; 16]) };
        let w = |stamp, base, delete| MessageWrite { stamp, base, delete };
        // Devices 1 and 2 append one key (2 first); 1 deletes its thread (it saw its own append), then 2
        // appends the key again after the delete reached it.
        let writes = [
            w(s(5, 1), None, false),
            w(s(3, 2), None, false),
            w(s(7, 1), Some(s(5, 1)), true),
            w(s(9, 2), Some(s(7, 1)), false),
        ];
        let winner_of = |order: &[usize]| {
            let mut held: Option<MessageWrite> = None;
            for &i in order {
                if message_wins(held, writes[i]) {
                    held = Some(writes[i]);
                }
            }
            held.map(|h| h.stamp)
        };
        // Every order of a set of writes: the winner is the same.
        fn orders(of: &[usize]) -> Vec<Vec<usize>> {
            if of.is_empty() {
                return vec![vec![]];
            }
            (0..of.len())
                .flat_map(|i| {
                    let rest: Vec<usize> = of.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, x)| *x).collect();
                    orders(&rest).into_iter().map(move |o| [vec![of[i]], o].concat())
                })
                .collect()
        }
        assert_eq!(orders(&[0, 1, 2, 3]).len(), 24);
        for o in orders(&[0, 1, 2, 3]) {
            assert_eq!(winner_of(&o), Some(s(9, 2)), "{o:?}");
        }
        // Without the late append the delete wins; of the two first appends the earlier (device 2's) does.
        for o in orders(&[0, 1, 2]) {
            assert_eq!(winner_of(&o), Some(s(7, 1)), "{o:?}");
        }
        for o in orders(&[0, 1]) {
            assert_eq!(winner_of(&o), Some(s(3, 2)), "{o:?}");
        }
        // A repeat changes nothing.
        assert!(!message_wins(Some(writes[0]), writes[0]));
    }

    #[test]
    fn an_add_concurrent_with_a_removal_wins_and_a_removal_that_saw_it_does_not() {
        let s = |ms| Stamp { hlc: Hlc { ms, counter: 0 }, device: DeviceId([1; 16]) };
        let mut c = ItemClock::default();
        tag_add(&mut c, "work", s(1));
        // Device B removes the add it saw (1) while device A adds again (2): the new add stays.
        tag_add(&mut c, "work", s(2));
        tag_remove(&mut c, "work", s(1));
        assert!(c.present_labels().contains("work"));
        // A removal that saw the second add takes it off.
        tag_remove(&mut c, "work", s(2));
        assert!(c.present_labels().is_empty());
    }
}
