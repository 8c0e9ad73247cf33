//! The records of sync's change log (`docs/sync.md`): what one replicated item is ([`Item`]), one stamped change
//! of it ([`Change`]), and what a device keeps per item to merge changes whatever their order ([`ItemClock`]).

use serde::{Deserialize, Serialize};

use super::Stamp;

/// One replicated item: the unit a change stamps and last-writer-wins decides. Memories are keyed by id alone
/// (ids are unique across spaces, and a move between spaces is a change of the memory); labels and working
/// memory days by their space and id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Item {
    /// A space, by id.
    Space(String),
    /// A memory, by id: its fields (less the device's own bookkeeping) and its label assignments.
    Memory(String),
    /// A label: (space id, label id).
    Label(String, String),
    /// A day of working memory: (space id, `YYYY-MM-DD`).
    Working(String, String),
    /// A relation between two memories, by id.
    Relation(String),
    /// A thread's record (title, metadata, favourite, ...): (space id, thread id). Its message count is derived.
    Thread(String, String),
    /// One message of a thread: (space id, `<thread id>/<deduplication key>`). Messages are never edited; their
    /// order in the thread follows their stamps ([`Item::message`]).
    Message(String, String),
    /// A label merge record: (space id, merge id). While it holds (not reversed, and the merged-away label not
    /// created again) it redirects that label to the survivor on every memory.
    LabelMerge(String, String),
    /// A source, by id: its record, parsed text and chunks (not its original bytes). The memories extracted from
    /// it are memories of their own.
    Source(String),
    /// A timeline review event and its decision: (space id, review id).
    Review(String, String),
}

impl Item {
    /// The item's key in the store's clock kind: (kind, space, id); the space is empty for items keyed by id.
    pub fn key(&self) -> (&'static str, &str, &str) {
        match self {
            Item::Space(id) => ("space", id, ""),
            Item::Memory(id) => ("memory", "", id),
            Item::Label(s, id) => ("label", s, id),
            Item::Working(s, d) => ("working", s, d),
            Item::Relation(id) => ("relation", "", id),
            Item::Thread(s, id) => ("thread", s, id),
            Item::Message(s, key) => ("message", s, key),
            Item::LabelMerge(s, id) => ("label_merge", s, id),
            Item::Source(id) => ("source", "", id),
            Item::Review(s, id) => ("review", s, id),
        }
    }

    /// The message of thread `thread` (an id without `/`) of `space` with deduplication key `key`.
    pub fn message(space: &str, thread: &str, key: &str) -> Item {
        Item::Message(space.to_string(), format!("{thread}/{key}"))
    }

    /// A message's (space id, thread id, deduplication key); None for other items.
    pub fn message_parts(&self) -> Option<(&str, &str, &str)> {
        match self {
            Item::Message(s, tk) => tk.split_once('/').map(|(t, k)| (s.as_str(), t, k)),
            _ => None,
        }
    }

    /// The item of a clock key ([`Item::key`]); None for a kind this release does not know.
    pub fn from_key(kind: &str, space: &str, id: &str) -> Option<Item> {
        Some(match kind {
            "space" => Item::Space(space.to_string()),
            "memory" => Item::Memory(id.to_string()),
            "label" => Item::Label(space.to_string(), id.to_string()),
            "working" => Item::Working(space.to_string(), id.to_string()),
            "relation" => Item::Relation(id.to_string()),
            "thread" => Item::Thread(space.to_string(), id.to_string()),
            "message" => Item::Message(space.to_string(), id.to_string()),
            "label_merge" => Item::LabelMerge(space.to_string(), id.to_string()),
            "source" => Item::Source(id.to_string()),
            "review" => Item::Review(space.to_string(), id.to_string()),
            _ => return None,
        })
    }
}

/// What a change does to its item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// The item's value is now `value` (the JSON of its replicated fields). `base` is the stamp of the value
    /// this one replaced on the device that made it (None for a new item): two changes with the same base are
    /// concurrent edits.
    Put {
        /// The replaced value's stamp.
        base: Option<Stamp>,
        /// The JSON of the item's replicated fields.
        value: Vec<u8>,
    },
    /// The item was deleted (a tombstone); `base` as in [`Op::Put`].
    Delete {
        /// The deleted value's stamp.
        base: Option<Stamp>,
    },
    /// A memory was given the label `label` (a label id): an add of the add-wins set, tagged with the change's
    /// stamp.
    TagAdd {
        /// The label id.
        label: String,
    },
    /// A memory's label `label` was taken off: it removes the adds up to `observed`, the add it saw.
    TagRemove {
        /// The label id.
        label: String,
        /// The stamp of the add the removing device saw.
        observed: Stamp,
    },
}

/// One stamped change of one item: the unit of the change log and of segments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The item changed.
    pub item: Item,
    /// When and where (HLC and device id).
    pub stamp: Stamp,
    /// What changed.
    pub op: Op,
}

/// One label of a memory's add-wins set: the greatest add seen and the greatest add a removal saw. The label is
/// on the memory while `add` is greater than `removed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    /// The greatest stamp of an add.
    pub add: Stamp,
    /// The greatest add a removal observed, if any.
    pub removed: Option<Stamp>,
}

impl Tag {
    /// Whether the label is on the memory: some add is newer than every removal saw.
    pub fn present(&self) -> bool {
        self.removed.is_none_or(|r| self.add > r)
    }
}

/// A head of a memory's edit history that lost last-writer-wins to a concurrent edit: its stamp and its value
/// (the JSON of its replicated fields; None for a delete).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Loser {
    /// The losing change's stamp.
    pub stamp: Stamp,
    /// Its value (None: a concurrent delete).
    pub value: Option<Vec<u8>>,
}

/// What a device keeps per replicated item to merge changes in any order (the `sync_items` kind).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItemClock {
    /// The stamp of the value the store holds (or of the delete): the winner of last-writer-wins. None: never
    /// stamped (an item written before sync was turned on).
    pub winner: Option<Stamp>,
    /// SHA-256 (first 16 bytes) of the winner's value as stamped; None for a delete or an item never stamped.
    /// A write that leaves the replicated fields as they were (a read count, a recount) makes no change.
    pub hash: Option<[u8; 16]>,
    /// A memory's edit history as (stamp, base) pairs (for a thread's message: its winning write and that
    /// write's base): its heads (stamps no other change names as base) are
    /// the winner and the concurrent edits that lost ([`ItemClock::losers`]).
    pub nodes: Vec<(Stamp, Option<Stamp>)>,
    /// The heads that lost, with their values, kept so that nothing a person typed disappears.
    pub losers: Vec<Loser>,
    /// A memory's label assignments, by label id.
    pub tags: Vec<(String, Tag)>,
}

impl ItemClock {
    /// Whether `stamp` is a known change of this item's history (a duplicate delivery).
    pub fn knows(&self, stamp: Stamp) -> bool {
        self.winner == Some(stamp) || self.nodes.iter().any(|(s, _)| *s == stamp)
    }

    /// The heads of the edit history: stamps no other node names as its base, greatest first.
    pub fn heads(&self) -> Vec<Stamp> {
        let mut heads: Vec<Stamp> =
            self.nodes.iter().map(|(s, _)| *s).filter(|s| !self.nodes.iter().any(|(_, b)| *b == Some(*s))).collect();
        heads.sort_unstable_by(|a, b| b.cmp(a));
        heads.dedup();
        heads
    }

    /// The tag of `label`, if any was seen.
    pub fn tag(&self, label: &str) -> Option<Tag> {
        self.tags.iter().find(|(l, _)| l == label).map(|(_, t)| *t)
    }

    /// Sets the tag of `label`.
    pub fn set_tag(&mut self, label: &str, tag: Tag) {
        match self.tags.iter_mut().find(|(l, _)| l == label) {
            Some((_, t)) => *t = tag,
            None => {
                self.tags.push((label.to_string(), tag));
                self.tags.sort_by(|a, b| a.0.cmp(&b.0));
            }
        }
    }

    /// The label ids on the memory under the add-wins rule.
    pub fn present_labels(&self) -> std::collections::BTreeSet<String> {
        self.tags.iter().filter(|(_, t)| t.present()).map(|(l, _)| l.clone()).collect()
    }
}
