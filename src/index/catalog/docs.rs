//! The catalog's entries: one dense table, found by document number and by memory id.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use super::DocMeta;

/// Catalog entries `(docno, entry)` in a dense `Vec`, with two hash indexes of row numbers into it: by document
/// number and by memory id (the id is not copied: the index compares against the entry's own).
///
/// A `HashMap<u64, DocMeta>` keeps each entry inside its bucket array, which hashbrown sizes to the next power
/// of two above 8/7 of the entries: at 1,000,000 memories, 2,097,152 buckets of 152 bytes (320 MiB) for 1M
/// entries. Here the buckets hold a `u32` row (8 MiB each index) and the rows are packed. A second map from id to
/// docno held every id twice (a `String` of 24 bytes and its 48-byte allocation per memory, in buckets of 32
/// bytes: about 110 MiB at 1M).
///
/// Ids are user input, so their index hashes with the standard library's keyed SipHash (`RandomState`, as a
/// `HashMap<String, _>` did); document numbers with FxHash. A removal moves the last row into the hole
/// (`swap_remove`), so iteration order is insertion order only until the first removal.
#[derive(Debug, Clone, Default)]
pub(super) struct Docs {
    rows: Vec<(u64, DocMeta)>,
    by_docno: HashTable<u32>,
    by_id: HashTable<u32>,
    ids: RandomState,
}

fn docno_hash(docno: u64) -> u64 {
    FxBuildHasher.hash_one(docno)
}

impl Docs {
    /// Room for `n` entries.
    pub(super) fn with_capacity(n: usize) -> Self {
        Docs {
            rows: Vec::with_capacity(n),
            by_docno: HashTable::with_capacity(n),
            by_id: HashTable::with_capacity(n),
            ids: RandomState::new(),
        }
    }

    fn row_of(&self, docno: u64) -> Option<usize> {
        let rows = &self.rows;
        self.by_docno.find(docno_hash(docno), |&r| rows[r as usize].0 == docno).map(|&r| r as usize)
    }

    /// The entry of `docno`.
    pub(super) fn get(&self, docno: u64) -> Option<&DocMeta> {
        self.row_of(docno).map(|r| &self.rows[r].1)
    }

    /// The document number of memory `id`.
    pub(super) fn docno_of(&self, id: &str) -> Option<u64> {
        let rows = &self.rows;
        self.by_id.find(self.ids.hash_one(id), |&r| rows[r as usize].1.id == id).map(|&r| rows[r as usize].0)
    }

    /// Adds `meta` as the entry of `docno`. The caller removes first any entry of `docno` or of `meta.id`
    /// ([`Docs::remove`]); false, adding nothing, when one is still there.
    pub(super) fn insert(&mut self, docno: u64, meta: DocMeta) -> bool {
        if self.row_of(docno).is_some() || self.docno_of(&meta.id).is_some() {
            return false;
        }
        let Ok(row) = u32::try_from(self.rows.len()) else { return false };
        let (id_hash, ids) = (self.ids.hash_one(&meta.id), &self.ids);
        self.rows.push((docno, meta));
        let rows = &self.rows;
        self.by_docno.insert_unique(docno_hash(docno), row, |&r| docno_hash(rows[r as usize].0));
        self.by_id.insert_unique(id_hash, row, |&r| ids.hash_one(&rows[r as usize].1.id));
        true
    }

    /// Removes and returns the entry of `docno`.
    pub(super) fn remove(&mut self, docno: u64) -> Option<DocMeta> {
        let row = self.row_of(docno)?;
        let id_hash = self.ids.hash_one(&self.rows[row].1.id);
        let row32 = row as u32;
        if let Ok(e) = self.by_docno.find_entry(docno_hash(docno), |&r| r == row32) {
            e.remove();
        }
        if let Ok(e) = self.by_id.find_entry(id_hash, |&r| r == row32) {
            e.remove();
        }
        let (_, meta) = self.rows.swap_remove(row);
        // The last row moved into `row`: point its two index entries there.
        if let Some((moved, m)) = self.rows.get(row) {
            let last = self.rows.len() as u32;
            let h = (docno_hash(*moved), self.ids.hash_one(&m.id));
            if let Some(r) = self.by_docno.find_mut(h.0, |&r| r == last) {
                *r = row32;
            }
            if let Some(r) = self.by_id.find_mut(h.1, |&r| r == last) {
                *r = row32;
            }
        }
        Some(meta)
    }

    /// Entries held.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// All entries.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, &DocMeta)> {
        self.rows.iter().map(|(d, m)| (*d, m))
    }

    /// Every entry, by docno (tests compare two catalogs).
    #[cfg(test)]
    pub(super) fn sorted(&self) -> Vec<(u64, DocMeta)> {
        let mut v = self.rows.clone();
        v.sort_unstable_by_key(|x| x.0);
        v
    }

    /// Bytes allocated: the rows (not what their entries allocate) and the two indexes (4-byte buckets and a
    /// control byte each).
    pub(super) fn heap_bytes(&self) -> usize {
        use crate::index::table_bytes;
        self.rows.capacity() * std::mem::size_of::<(u64, DocMeta)>()
            + table_bytes(self.by_docno.capacity(), 4)
            + table_bytes(self.by_id.capacity(), 4)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use crate::model::{Memory, Timestamp};

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Through inserts and removals in any order (rows moved by every removal), each entry is found by its
        /// docno and by its id, and nothing else is: as a map by docno and a map by id would answer.
        #[test]
        fn entries_are_found_by_docno_and_by_id(ops in proptest::collection::vec((0u64..60, 0u8..40, proptest::bool::ANY), 1..200)) {
            let (mut docs, mut by_docno, mut by_id) = (Docs::default(), HashMap::new(), HashMap::new());
            for (docno, id, insert) in ops {
                let id = format!("m{id}");
                if insert {
                    let taken = by_docno.contains_key(&docno) || by_id.contains_key(&id);
                    let meta = DocMeta::of(&Memory::with_defaults(id.clone(), "s".into(), "x".into(), Timestamp(0)), BTreeSet::new());
                    proptest::prop_assert_eq!(docs.insert(docno, meta), !taken);
                    if !taken {
                        by_docno.insert(docno, id.clone());
                        by_id.insert(id, docno);
                    }
                } else {
                    let gone = docs.remove(docno).map(|m| m.id);
                    proptest::prop_assert_eq!(&gone, &by_docno.remove(&docno));
                    if let Some(id) = gone {
                        by_id.remove(&id);
                    }
                }
                proptest::prop_assert_eq!(docs.len(), by_docno.len());
            }
            for d in 0..60 {
                proptest::prop_assert_eq!(docs.get(d).map(|m| &m.id), by_docno.get(&d));
            }
            for i in 0..40 {
                let id = format!("m{i}");
                proptest::prop_assert_eq!(docs.docno_of(&id), by_id.get(&id).copied());
            }
        }
    }
}
