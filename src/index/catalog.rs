//! In-memory catalog of live documents: for every memory, the few fields that filters and listings need, keyed
//! by document number. Derived from the store on open; updated after each committed write.

use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::{Memory, MemoryState, Timestamp, UnitType};

mod docs;
use docs::Docs;

/// The filterable fields of one memory.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DocMeta {
    /// Memory id.
    pub id: String,
    /// Lifecycle state.
    pub state: MemoryState,
    /// Unit type.
    pub unit_type: UnitType,
    /// Importance 0..=1.
    pub importance: f64,
    /// Creation time.
    pub created_at: Timestamp,
    /// Event start as a time (first instant of the year, month or day it names).
    pub event_start: Option<Timestamp>,
    /// Label ids.
    pub labels: BTreeSet<String>,
    /// Crystal flag.
    pub is_crystal: bool,
    /// False once superseded.
    pub is_latest: bool,
    /// Reads by id.
    pub access_count: i64,
    /// Last use: the later of creation and last read by id (input of [`crate::index::decay`]).
    pub last_used: Timestamp,
    /// Place in a thread or source ([`crate::index::context::position_of`]), when the memory has one.
    pub position: Option<Position>,
    /// The text states a time that extraction resolved (`metadata.temporal_expression`).
    pub dated: bool,
    /// The text is a question: its content ends with `?` (`text::is_question`).
    pub question: bool,
    /// When the memory expires, if ever ([`Memory::expires_at`]).
    pub expires_at: Option<Timestamp>,
}

/// Where a memory sits in a sequence: the group (a thread or a source) and its ordinal in it (first message
/// index, chunk index). Neighbours are the memories of the same group nearest in ordinal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Position {
    /// `thread:<thread id>` or `source:<source id>`.
    pub group: Arc<str>,
    /// Message or chunk index, 0-based.
    pub ordinal: u64,
}

impl DocMeta {
    /// The catalog entry of `m` with its label ids.
    pub fn of(m: &Memory, labels: BTreeSet<String>) -> Self {
        DocMeta {
            id: m.id.clone(),
            state: m.state,
            unit_type: m.unit_type,
            importance: m.importance,
            created_at: m.created_at,
            event_start: m.event_start.as_deref().and_then(parse_loose_date),
            labels,
            is_crystal: m.is_crystal,
            is_latest: m.is_latest,
            access_count: m.access_count,
            last_used: m.last_accessed_at.map_or(m.created_at, |a| a.max(m.created_at)),
            position: super::context::position_of(m),
            dated: m.metadata.0.get("temporal_expression").and_then(|v| v.as_str()).is_some_and(|s| !s.is_empty()),
            question: crate::text::is_question(&m.content),
            expires_at: m.expires_at,
        }
    }
}

/// `YYYY`, `YYYY-MM`, `YYYY-MM-DD` or RFC 3339 to the first instant it names.
pub fn parse_loose_date(s: &str) -> Option<Timestamp> {
    match s.len() {
        4 => Timestamp::parse(&format!("{s}-01-01")),
        7 => Timestamp::parse(&format!("{s}-01")),
        _ => Timestamp::parse(s),
    }
}

/// The last millisecond of the period a date names, for inclusive upper bounds: `YYYY` ends on 31 December
/// 23:59:59.999, `YYYY-MM` on the month's last millisecond, `YYYY-MM-DD` on the day's; any other form is an
/// instant and ends where it starts. `start_ms` is `parse_loose_date(s)` in milliseconds since the epoch.
pub fn end_of_period(s: &str, start_ms: i64) -> i64 {
    const DAY: i64 = 86_400_000;
    match s.len() {
        4 => parse_loose_date(&format!("{}", s.parse::<i32>().unwrap_or(0) + 1)).map_or(start_ms, |t| t.0 - 1),
        7 => {
            let (y, m) = (s[..4].parse::<i32>().unwrap_or(0), s[5..].parse::<u32>().unwrap_or(1));
            let next = if m >= 12 { format!("{}-01", y + 1) } else { format!("{y}-{:02}", m + 1) };
            parse_loose_date(&next).map_or(start_ms, |t| t.0 - 1)
        }
        10 => start_ms + DAY - 1,
        _ => start_ms,
    }
}

/// Filters over memories. Every set field must match (AND); label ids must all be present.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryFilter {
    /// Accepted states; empty means `active` only.
    pub states: Vec<MemoryState>,
    /// Only this unit type.
    pub unit_type: Option<UnitType>,
    /// Minimum importance (inclusive).
    pub importance_min: Option<f64>,
    /// Required label ids (AND).
    pub label_ids: Vec<String>,
    /// Crystals only (true), non-crystals only (false), or both (None).
    pub is_crystal: Option<bool>,
    /// Also older versions (`is_latest` false); default only latest.
    pub include_history: bool,
    /// Created at or after (inclusive).
    pub recorded_from: Option<Timestamp>,
    /// Created before or at (inclusive).
    pub recorded_to: Option<Timestamp>,
    /// Event start at or after (inclusive); memories without an event date fail the test.
    pub event_from: Option<Timestamp>,
    /// Event start at or before (inclusive).
    pub event_to: Option<Timestamp>,
    /// Only these memory ids (for example those mentioning an entity); None: any.
    pub memory_ids: Option<BTreeSet<String>>,
    /// Only the memories placed in this sequence ([`Position::group`]: `thread:<id>` or `source:<id>`).
    pub group: Option<String>,
    /// Also memories whose `expires_at` has passed; default false: an expired memory leaves searches and
    /// listings (it stays readable by id). Expiry is judged against the clock when a memory with an expiry
    /// time is tested.
    pub include_expired: bool,
}

impl MemoryFilter {
    /// True when the filter accepts every active latest memory (no narrowing beyond the defaults).
    pub fn is_trivial(&self) -> bool {
        (self.states.is_empty() || self.states == [MemoryState::Active])
            && self.unit_type.is_none()
            && self.importance_min.is_none_or(|x| x <= 0.0)
            && self.label_ids.is_empty()
            && self.is_crystal.is_none()
            && self.recorded_from.is_none()
            && self.recorded_to.is_none()
            && self.event_from.is_none()
            && self.event_to.is_none()
            && self.memory_ids.is_none()
            && self.group.is_none()
    }

    /// Whether `d` passes.
    pub fn accepts(&self, d: &DocMeta) -> bool {
        // Default: active memories; `include_history` also brings back superseded versions.
        let state_ok = if self.states.is_empty() {
            d.state == MemoryState::Active || (self.include_history && d.state == MemoryState::Superseded)
        } else {
            self.states.contains(&d.state)
        };
        state_ok
            && (self.include_history || d.is_latest)
            && self.unit_type.is_none_or(|u| u == d.unit_type)
            && self.importance_min.is_none_or(|x| d.importance >= x)
            && self.label_ids.iter().all(|l| d.labels.contains(l))
            && self.is_crystal.is_none_or(|c| c == d.is_crystal)
            && self.recorded_from.is_none_or(|t| d.created_at >= t)
            && self.recorded_to.is_none_or(|t| d.created_at <= t)
            && self.event_from.is_none_or(|t| d.event_start.is_some_and(|e| e >= t))
            && self.event_to.is_none_or(|t| d.event_start.is_some_and(|e| e <= t))
            && self.memory_ids.as_ref().is_none_or(|ids| ids.contains(&d.id))
            && self.group.as_deref().is_none_or(|g| d.position.as_ref().is_some_and(|p| &*p.group == g))
            && (self.include_expired || d.expires_at.is_none_or(|e| e > Timestamp::now()))
    }
}

/// Live documents of one space by document number, with a reverse map from memory id and the sequences
/// (threads, sources) memories with a position belong to.
#[derive(Debug, Default, Clone)]
pub struct SpaceCatalog {
    /// The entries, by document number and by memory id.
    docs: Docs,
    /// Group -> its members as `(ordinal, docno)`, in order. Members are the latest, not forgotten memories
    /// with a position.
    groups: FxHashMap<Arc<str>, BTreeSet<(u64, u64)>>,
    /// Member -> its previous and next member (`NONE` at either end): the window-1 neighbourhood, kept so that
    /// the search hot path needs one lookup per document instead of two B-tree walks.
    links: FxHashMap<u64, [u64; 2]>,
    /// Memories with an expiry time, as `(expires_at, docno)` in time order: the expired ones are a prefix.
    expiring: BTreeSet<(Timestamp, u64)>,
    /// The documents every trivial filter accepts ([`MemoryFilter::is_trivial`]: active, latest, importance at
    /// least 0, no expiry time), one bit each in blocks of 512 docnos (a cache line) keyed by `docno >> 9`, as
    /// Lucene's live-docs bitset: a search asks this instead of the entry, whose table misses the cache at 1M
    /// documents. A block with no bit set is dropped, so the blocks take at most 72 bytes per document.
    plain: FxHashMap<u64, [u64; 8]>,
}

/// True when every trivial filter accepts `m`, at any time.
pub fn is_plain(m: &DocMeta) -> bool {
    m.state == MemoryState::Active && m.is_latest && m.importance >= 0.0 && m.expires_at.is_none()
}

/// No neighbour on that side.
const NONE: u64 = u64::MAX;

/// True when `m` takes part in its group's sequence: it has a position, is the latest version and is not
/// forgotten.
pub fn in_sequence(m: &DocMeta) -> bool {
    m.position.is_some() && m.is_latest && m.state != MemoryState::Forgotten
}

impl SpaceCatalog {
    /// Inserts or replaces `docno`.
    pub fn insert(&mut self, docno: u64, mut meta: DocMeta) {
        // One shared group name per group.
        if let Some(p) = meta.position.as_mut()
            && let Some((k, _)) = self.groups.get_key_value(&p.group)
        {
            p.group = k.clone();
        }
        // An older document of the same memory leaves; so does whatever memory the docno held.
        if let Some(old) = self.docs.docno_of(&meta.id)
            && old != docno
            && let Some(m) = self.docs.remove(old)
        {
            self.leave_group(old, &m);
        }
        if let Some(m) = self.docs.remove(docno) {
            self.leave_group(docno, &m);
        }
        if in_sequence(&meta)
            && let Some(p) = &meta.position
        {
            let set = self.groups.entry(p.group.clone()).or_default();
            let key = (p.ordinal, docno);
            set.insert(key);
            let prev = set.range(..key).next_back().map_or(NONE, |x| x.1);
            let next =
                set.range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded)).next().map_or(NONE, |x| x.1);
            self.links.insert(docno, [prev, next]);
            if let Some(l) = self.links.get_mut(&prev) {
                l[1] = docno;
            }
            if let Some(l) = self.links.get_mut(&next) {
                l[0] = docno;
            }
        }
        if let Some(e) = meta.expires_at {
            self.expiring.insert((e, docno));
        }
        self.set_plain(docno, is_plain(&meta));
        // Both were removed above, so the insert cannot be refused.
        self.docs.insert(docno, meta);
    }

    /// The catalog of `entries` (distinct docnos and memory ids, in any order), built in one pass: the same
    /// catalog as inserting them one by one ([`SpaceCatalog::insert`]), with pre-sized tables and each sequence
    /// sorted once instead of a B-tree walk and three link updates per member (used when an open reads the
    /// index snapshot, [`crate::store`]).
    ///
    /// # Errors
    /// A message when a docno or a memory id appears twice.
    pub fn from_entries(entries: Vec<(u64, DocMeta)>) -> Result<Self, String> {
        let n = entries.len();
        let mut c = SpaceCatalog { docs: Docs::with_capacity(n), ..Default::default() };
        let mut members: FxHashMap<Arc<str>, Vec<(u64, u64)>> = FxHashMap::default();
        let mut expiring = Vec::new();
        for (docno, mut meta) in entries {
            if let Some(p) = meta.position.as_mut()
                && let Some((k, _)) = members.get_key_value(&p.group)
            {
                p.group = k.clone();
            }
            if c.docs.docno_of(&meta.id).is_some() {
                return Err(format!("memory id {:?} appears twice", meta.id));
            }
            if c.docs.get(docno).is_some() {
                return Err(format!("docno {docno} appears twice"));
            }
            if in_sequence(&meta)
                && let Some(p) = &meta.position
            {
                members.entry(p.group.clone()).or_default().push((p.ordinal, docno));
            }
            if let Some(e) = meta.expires_at {
                expiring.push((e, docno));
            }
            if is_plain(&meta) {
                c.set_plain(docno, true);
            }
            c.docs.insert(docno, meta);
        }
        c.links = FxHashMap::with_capacity_and_hasher(members.values().map(Vec::len).sum(), Default::default());
        for (group, mut seq) in members {
            seq.sort_unstable();
            for (i, (_, d)) in seq.iter().enumerate() {
                let prev = if i == 0 { NONE } else { seq[i - 1].1 };
                let next = seq.get(i + 1).map_or(NONE, |x| x.1);
                c.links.insert(*d, [prev, next]);
            }
            c.groups.insert(group, seq.into_iter().collect());
        }
        c.expiring = expiring.into_iter().collect();
        Ok(c)
    }

    fn set_plain(&mut self, docno: u64, on: bool) {
        let (word, bit) = (((docno >> 6) & 7) as usize, 1u64 << (docno & 63));
        if on {
            self.plain.entry(docno >> 9).or_default()[word] |= bit;
        } else if let Some(block) = self.plain.get_mut(&(docno >> 9)) {
            block[word] &= !bit;
            if block.iter().all(|w| *w == 0) {
                self.plain.remove(&(docno >> 9));
            }
        }
    }

    /// True when every trivial filter ([`MemoryFilter::is_trivial`]) accepts `docno` (a live, active, latest
    /// memory without an expiry time); false does not mean that one rejects it (ask [`MemoryFilter::accepts`]).
    #[inline]
    pub fn plainly_accepted(&self, docno: u64) -> bool {
        self.plain.get(&(docno >> 9)).is_some_and(|b| b[((docno >> 6) & 7) as usize] & (1u64 << (docno & 63)) != 0)
    }

    fn leave_group(&mut self, docno: u64, m: &DocMeta) {
        self.set_plain(docno, false);
        if let Some(e) = m.expires_at {
            self.expiring.remove(&(e, docno));
        }
        if let Some(p) = &m.position
            && let Some(set) = self.groups.get_mut(&p.group)
        {
            if set.remove(&(p.ordinal, docno))
                && let Some([prev, next]) = self.links.remove(&docno)
            {
                if let Some(l) = self.links.get_mut(&prev) {
                    l[1] = next;
                }
                if let Some(l) = self.links.get_mut(&next) {
                    l[0] = prev;
                }
            }
            if set.is_empty() {
                self.groups.remove(&p.group);
            }
        }
    }

    /// Removes `docno`.
    pub fn remove(&mut self, docno: u64) {
        if let Some(m) = self.docs.remove(docno) {
            self.leave_group(docno, &m);
        }
    }

    /// True when some memory of the space has a position (a thread or source sequence exists).
    pub fn has_sequences(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Memories taking part in a sequence.
    pub fn positioned(&self) -> usize {
        self.groups.values().map(|g| g.len()).sum()
    }

    /// The groups and their members `(ordinal, docno)` in order.
    pub fn sequences(&self) -> impl Iterator<Item = &BTreeSet<(u64, u64)>> {
        self.groups.values()
    }

    /// The neighbours of `docno` in its sequence, at most `window` on each side, as `(docno, distance)` with
    /// distance 1 for the nearest; before-neighbours first (nearest first), then after-neighbours. Empty for a
    /// memory without a position or outside the sequence (superseded, forgotten).
    pub fn neighbours(&self, docno: u64, window: usize, out: &mut Vec<(u64, u32)>) {
        out.clear();
        if window == 0 {
            return;
        }
        if window == 1 {
            if let Some([prev, next]) = self.links.get(&docno) {
                out.extend([(*prev, 1), (*next, 1)].into_iter().filter(|(d, _)| *d != NONE));
            }
            return;
        }
        let Some(m) = self.docs.get(docno).filter(|m| in_sequence(m)) else { return };
        let Some(p) = &m.position else { return };
        let Some(set) = self.groups.get(&p.group) else { return };
        let key = (p.ordinal, docno);
        for (i, (_, d)) in set.range(..key).rev().take(window).enumerate() {
            out.push((*d, i as u32 + 1));
        }
        for (i, (_, d)) in
            set.range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded)).take(window).enumerate()
        {
            out.push((*d, i as u32 + 1));
        }
    }

    /// The neighbours `docno` would have, at most `window` on each side, once inserted with entry `meta`
    /// (asked before [`SpaceCatalog::insert`]); the memory's present entry and an older document of the same
    /// memory id do not count. Docnos only, nearest first on each side.
    pub fn neighbours_as(&self, docno: u64, meta: &DocMeta, window: usize, out: &mut Vec<u64>) {
        out.clear();
        if window == 0 || !in_sequence(meta) {
            return;
        }
        let Some(p) = &meta.position else { return };
        let Some(set) = self.groups.get(&p.group) else { return };
        let replaced = self.docs.docno_of(&meta.id);
        let other = |x: &&(u64, u64)| x.1 != docno && Some(x.1) != replaced;
        let key = (p.ordinal, docno);
        out.extend(set.range(..key).rev().filter(other).take(window).map(|x| x.1));
        out.extend(
            set.range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
                .filter(other)
                .take(window)
                .map(|x| x.1),
        );
    }

    /// True when replacing the entry of `docno` by `meta` leaves every sequence as it is (same memory, same
    /// position, same membership).
    pub fn same_place(&self, docno: u64, meta: &DocMeta) -> bool {
        self.docs.get(docno).is_some_and(|old| {
            old.id == meta.id && old.position == meta.position && in_sequence(old) == in_sequence(meta)
        })
    }

    /// The entry of `docno`.
    pub fn get(&self, docno: u64) -> Option<&DocMeta> {
        self.docs.get(docno)
    }

    /// The document number of memory `id`.
    pub fn docno_of(&self, id: &str) -> Option<u64> {
        self.docs.docno_of(id)
    }

    /// Number of live documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.docs.len() == 0
    }

    /// All entries.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &DocMeta)> {
        self.docs.iter()
    }

    /// Memories whose expiry time is at or before `at`, as `(expires_at, docno)`, earliest first.
    pub fn expired(&self, at: Timestamp) -> impl Iterator<Item = (Timestamp, u64)> + '_ {
        self.expiring.range(..=(at, u64::MAX)).copied()
    }

    /// Estimated bytes held: the entries with their ids and labels, the two lookup tables, the sequences and
    /// links, the expiry order and the live bits (B-tree nodes counted at 1.5 times their keys).
    pub fn heap_bytes(&self) -> usize {
        use super::{alloc_bytes, table_bytes};
        let entries: usize = self
            .docs
            .iter()
            .map(|(_, m)| {
                alloc_bytes(m.id.capacity())
                    + m.labels.iter().map(|l| 36 + alloc_bytes(l.capacity())).sum::<usize>()
                    + if m.labels.is_empty() { 0 } else { 64 }
            })
            .sum();
        let groups: usize = self.groups.iter().map(|(k, set)| alloc_bytes(16 + k.len()) + set.len() * 24).sum();
        self.docs.heap_bytes()
            + entries
            + table_bytes(self.groups.capacity(), 40)
            + groups
            + table_bytes(self.links.capacity(), 24)
            + self.expiring.len() * 24
            + table_bytes(self.plain.capacity(), 72)
    }

    /// Number of entries `f` accepts.
    pub fn count(&self, f: &MemoryFilter) -> usize {
        self.docs.iter().filter(|(_, d)| f.accepts(d)).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Memory, Timestamp};

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// A catalog built in bulk from the entries of one built by inserts, moves and replacements (threads,
        /// forgotten and superseded members, expiry times) has the same tables; a repeated entry is an error.
        #[test]
        fn a_catalog_built_in_bulk_equals_one_built_by_inserts(
            ops in proptest::collection::vec((0u64..200, 0u8..40, 0u8..6, 0u8..5, 0u64..6), 1..150),
        ) {
            let mut c = SpaceCatalog::default();
            for (docno, id, thread, flavour, ordinal) in ops {
                let mut m = Memory::with_defaults(format!("m{id}"), "s".into(), "x".into(), Timestamp(0));
                if thread > 0 {
                    m.source_thread_id = Some(format!("t{thread}"));
                    let md = serde_json::json!({"source_message_indices": [ordinal]});
                    m.metadata = crate::model::Metadata(md.as_object().cloned().unwrap_or_default());
                }
                match flavour {
                    1 => m.state = MemoryState::Forgotten,
                    2 => m.is_latest = false,
                    3 => m.expires_at = Some(Timestamp(i64::from(id))),
                    _ => {}
                }
                c.insert(docno, DocMeta::of(&m, BTreeSet::new()));
            }
            let entries: Vec<(u64, DocMeta)> = c.iter().map(|(d, m)| (d, m.clone())).collect();
            let bulk = SpaceCatalog::from_entries(entries.clone()).unwrap();
            proptest::prop_assert_eq!(bulk.docs.sorted(), c.docs.sorted());
            proptest::prop_assert_eq!(&bulk.groups, &c.groups);
            proptest::prop_assert_eq!(&bulk.links, &c.links);
            proptest::prop_assert_eq!(&bulk.expiring, &c.expiring);
            proptest::prop_assert_eq!(&bulk.plain, &c.plain);
            if let Some(first) = entries.first().cloned() {
                let mut twice = entries.clone();
                twice.push(first);
                proptest::prop_assert!(SpaceCatalog::from_entries(twice).is_err());
            }
        }

        /// The live bits follow inserts, replacements (same docno, or the same memory under a new docno) and
        /// removals: a bit is set exactly when the entry is plain, and a set bit is accepted by every trivial
        /// filter, with or without history and expired memories.
        #[test]
        fn live_bits_equal_the_entries(
            ops in proptest::collection::vec((0u64..1500, 0u8..6, 0u8..4, 0u8..4), 1..120),
        ) {
            let mut c = SpaceCatalog::default();
            for (docno, id, kind, flavour) in ops {
                if kind == 0 {
                    c.remove(docno);
                    continue;
                }
                let mut m = Memory::with_defaults(format!("m{id}"), "s".into(), "x".into(), Timestamp(0));
                match flavour {
                    1 => m.state = MemoryState::Archived,
                    2 => m.is_latest = false,
                    3 => m.expires_at = Some(Timestamp(i64::MAX / 2)),
                    _ => {}
                }
                c.insert(docno, DocMeta::of(&m, BTreeSet::new()));
            }
            let filters = [
                MemoryFilter::default(),
                MemoryFilter { include_history: true, include_expired: true, ..Default::default() },
                MemoryFilter { states: vec![MemoryState::Active], ..Default::default() },
            ];
            for d in 0..1500u64 {
                let entry = c.get(d);
                proptest::prop_assert_eq!(c.plainly_accepted(d), entry.is_some_and(is_plain), "docno {}", d);
                if c.plainly_accepted(d) {
                    for f in &filters {
                        proptest::prop_assert!(f.is_trivial() && entry.is_some_and(|m| f.accepts(m)));
                    }
                }
            }
            proptest::prop_assert!(c.plain.values().all(|b| b.iter().any(|w| *w != 0)), "an empty block is kept");
        }
    }
}
