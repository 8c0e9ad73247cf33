//! What a snapshot keeps of one device's changes (docs/sync.md, "Compaction"). Compaction rewrites a device's
//! old segments as a snapshot that only a device joining later reads; what it leaves out changes no merge
//! (each rule's state depends only on what it keeps):
//! - of a register's changes (a space, label, relation, thread record, source, working memory, review, label
//!   merge), only the newest: last-writer-wins takes the greatest stamp;
//! - of a memory's history, the edits a later edit of the same device was built on: the later edit takes
//!   their base, so the heads of the history (the winner and the kept concurrent edits, [`super::merge`]) are
//!   the same;
//! - of a label's adds and removals on a memory, all but the greatest of each: the add-wins set keeps the
//!   greatest add and the greatest add a removal saw;
//! - a thread's messages and every delete (a tombstone) are kept.
//!
//! Every change of one device has a stamp of its own, so a change is named by its stamp. Two passes: the
//! first notes every change ([`Plan::note`], no values kept), the second rewrites each ([`Keep::rewrite`]),
//! so compaction holds the item keys and stamps in memory, never the values.

use std::collections::{HashMap, HashSet};

use crate::model::{Change, Item, Op, Stamp};

/// Which of a device's changes a snapshot keeps (module docs).
#[derive(Debug, Default)]
pub struct Plan {
    /// A memory's nodes: (stamp, base).
    nodes: HashMap<String, Vec<(Stamp, Option<Stamp>)>>,
    /// A register's newest change.
    registers: HashMap<Item, Stamp>,
    /// A memory label's greatest add, and greatest removal (by the add it saw): (what orders it, its stamp).
    tags: HashMap<(String, String, bool), (Stamp, Stamp)>,
    /// Changes kept whole: messages.
    whole: HashSet<Stamp>,
}

/// What the snapshot keeps: each kept change, with its new base when it changes.
#[derive(Debug)]
pub struct Keep {
    keep: HashSet<Stamp>,
    rebase: HashMap<Stamp, Option<Stamp>>,
}

impl Plan {
    /// Notes one change (every change of the compacted segments, before [`Plan::finish`]).
    pub fn note(&mut self, c: &Change) {
        match (&c.item, &c.op) {
            (Item::Message(..), _) => {
                self.whole.insert(c.stamp);
            }
            (Item::Memory(id), Op::Put { base, .. } | Op::Delete { base }) => {
                self.nodes.entry(id.clone()).or_default().push((c.stamp, *base));
            }
            (Item::Memory(id), Op::TagAdd { label }) => self.tag(id, label, false, c.stamp, c.stamp),
            (Item::Memory(id), Op::TagRemove { label, observed }) => self.tag(id, label, true, *observed, c.stamp),
            (item, _) => {
                let e = self.registers.entry(item.clone()).or_insert(c.stamp);
                *e = (*e).max(c.stamp);
            }
        }
    }

    fn tag(&mut self, id: &str, label: &str, remove: bool, order: Stamp, stamp: Stamp) {
        let e = self.tags.entry((id.to_string(), label.to_string(), remove)).or_insert((order, stamp));
        *e = (*e).max((order, stamp));
    }

    /// What to keep of the noted changes.
    pub fn finish(self) -> Keep {
        let mut keep: HashSet<Stamp> = self.whole;
        keep.extend(self.registers.into_values());
        keep.extend(self.tags.into_values().map(|(_, s)| s));
        let mut rebase = HashMap::new();
        for nodes in self.nodes.into_values() {
            let named: HashSet<Stamp> = nodes.iter().filter_map(|(_, b)| *b).collect();
            let base_of: HashMap<Stamp, Option<Stamp>> = nodes.iter().copied().collect();
            for (stamp, base) in nodes.iter().filter(|(s, _)| !named.contains(s)) {
                keep.insert(*stamp);
                let mut b = *base;
                while let Some(x) = b.filter(|x| named.contains(x) && base_of.contains_key(x)) {
                    b = base_of.get(&x).copied().flatten();
                }
                if b != *base {
                    rebase.insert(*stamp, b);
                }
            }
        }
        Keep { keep, rebase }
    }
}

impl Keep {
    /// How many changes it keeps.
    pub fn len(&self) -> usize {
        self.keep.len()
    }

    /// Whether it keeps nothing.
    pub fn is_empty(&self) -> bool {
        self.keep.is_empty()
    }

    /// `c` as the snapshot keeps it (its base moved back past the edits left out), or None when it is left out.
    pub fn rewrite(&self, mut c: Change) -> Option<Change> {
        if !self.keep.contains(&c.stamp) {
            return None;
        }
        if let Some(b) = self.rebase.get(&c.stamp)
            && let Op::Put { base, .. } | Op::Delete { base } = &mut c.op
        {
            *base = *b;
        }
        Some(c)
    }
}

/// `changes` (one device's) as a snapshot keeps them, in their order.
pub fn compact(changes: &[Change]) -> Vec<Change> {
    let mut plan = Plan::default();
    changes.iter().for_each(|c| plan.note(c));
    let keep = plan.finish();
    changes.iter().filter_map(|c| keep.rewrite(c.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceId, Hlc};

    fn stamp(ms: u64, device: DeviceId) -> Stamp {
        Stamp { hlc: Hlc { ms, counter: 0 }, device }
    }

    #[test]
    fn a_chain_of_edits_keeps_its_last_on_the_first_base_and_registers_and_tags_their_greatest() {
        let (me, other) = (DeviceId::random(), DeviceId::random());
        let put = |ms, base: Option<Stamp>, item: Item| Change {
            item,
            stamp: stamp(ms, me),
            op: Op::Put { base, value: format!("{ms}").into_bytes() },
        };
        let m = || Item::Memory("m1".into());
        let theirs = stamp(1, other);
        let changes = vec![
            put(2, Some(theirs), m()),
            put(3, Some(stamp(2, me)), m()),
            put(4, Some(stamp(3, me)), m()),
            put(5, None, Item::Space("s".into())),
            put(6, None, Item::Space("s".into())),
            Change { item: m(), stamp: stamp(7, me), op: Op::TagAdd { label: "a".into() } },
            Change { item: m(), stamp: stamp(8, me), op: Op::TagAdd { label: "a".into() } },
            Change { item: m(), stamp: stamp(9, me), op: Op::TagRemove { label: "a".into(), observed: stamp(8, me) } },
            Change { item: Item::message("default", "t1", "k1"), stamp: stamp(10, me), op: Op::Delete { base: None } },
        ];
        let kept = compact(&changes);
        let stamps: Vec<u64> = kept.iter().map(|c| c.stamp.hlc.ms).collect();
        assert_eq!(stamps, vec![4, 6, 8, 9, 10]);
        // The last edit now names the base of the first: the other device's edit it was built on.
        assert!(matches!(&kept[0].op, Op::Put { base: Some(b), .. } if *b == theirs));
    }
}
