//! In-memory mirror of one space's BM25 postings. The postings live in redb (the persistent index, no
//! re-tokenising on open); this mirror is loaded from them on open and updated after each commit, so that a
//! query scores common terms' long posting lists from memory (about 16 bytes a posting) instead of reading
//! them from the B-tree.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::bm25::Posting;

/// Postings of one space: term -> postings sorted by docno, plus BM25 collection statistics.
#[derive(Debug, Default, Clone)]
pub struct Lexicon {
    postings: HashMap<String, Vec<Posting>>,
    /// Documents indexed.
    pub docs: u64,
    /// Sum of document lengths in terms.
    pub total_len: u64,
    /// Length in terms of each document with at least one term.
    lens: FxHashMap<u64, u32>,
}

impl Lexicon {
    /// Adds one posting while loading (any order); call [`Lexicon::finish_load`] afterwards.
    pub fn load(&mut self, term: &str, p: Posting) {
        self.lens.insert(p.docno, p.doc_len);
        self.postings.entry(term.to_string()).or_default().push(p);
    }

    /// Sorts the lists after [`Lexicon::load`].
    pub fn finish_load(&mut self) {
        for l in self.postings.values_mut() {
            l.sort_unstable_by_key(|p| p.docno);
        }
    }

    /// Indexes document `docno` with its term frequencies and length.
    pub fn add(&mut self, docno: u64, terms: &[(String, u32)], doc_len: u32) {
        for (t, tf) in terms {
            let list = self.postings.entry(t.clone()).or_default();
            let p = Posting { docno, tf: *tf, doc_len };
            match list.binary_search_by_key(&docno, |p| p.docno) {
                Ok(i) => list[i] = p,
                Err(i) => list.insert(i, p),
            }
        }
        if doc_len > 0 {
            self.lens.insert(docno, doc_len);
        }
        self.docs += 1;
        self.total_len += u64::from(doc_len);
    }

    /// Removes document `docno` (its distinct terms given) and its length from the statistics.
    pub fn remove(&mut self, docno: u64, terms: &[String], doc_len: u32) {
        for t in terms {
            if let Some(list) = self.postings.get_mut(t) {
                if let Ok(i) = list.binary_search_by_key(&docno, |p| p.docno) {
                    list.remove(i);
                }
                if list.is_empty() {
                    self.postings.remove(t);
                }
            }
        }
        self.lens.remove(&docno);
        self.docs = self.docs.saturating_sub(1);
        self.total_len = self.total_len.saturating_sub(u64::from(doc_len));
    }

    /// The postings of `term` (sorted by docno), or an empty slice.
    pub fn postings(&self, term: &str) -> &[Posting] {
        self.postings.get(term).map_or(&[], Vec::as_slice)
    }

    /// Distinct terms and postings.
    pub fn size(&self) -> (u64, u64) {
        (self.postings.len() as u64, self.postings.values().map(|l| l.len() as u64).sum())
    }

    /// Length in terms of document `docno` (0 when it has no terms or is not indexed).
    pub fn doc_len(&self, docno: u64) -> u32 {
        self.lens.get(&docno).copied().unwrap_or(0)
    }

    /// Average document length (1 for an empty space).
    pub fn avg_len(&self) -> f32 {
        if self.docs == 0 { 1.0 } else { self.total_len as f32 / self.docs as f32 }
    }
}

/// Term frequencies and length of a text, as the lexical index stores them.
pub fn analyse(text: &str) -> (Vec<(String, u32)>, u32) {
    let terms = crate::text::terms(text);
    let len = terms.len() as u32;
    let mut tf: HashMap<String, u32> = HashMap::new();
    for t in terms {
        *tf.entry(t).or_default() += 1;
    }
    let mut v: Vec<(String, u32)> = tf.into_iter().collect();
    v.sort_unstable();
    (v, len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_and_remove_keep_lists_sorted_and_stats_right() {
        let mut l = Lexicon::default();
        let (a, la) = analyse("red apples and red pears");
        let (b, lb) = analyse("green apples");
        l.add(5, &a, la);
        l.add(2, &b, lb);
        assert_eq!(l.postings("appl").iter().map(|p| p.docno).collect::<Vec<_>>(), vec![2, 5]);
        assert_eq!(l.postings("red")[0].tf, 2);
        assert_eq!((l.docs, l.total_len), (2, 6));
        l.remove(5, &a.iter().map(|x| x.0.clone()).collect::<Vec<_>>(), la);
        assert!(l.postings("red").is_empty());
        assert_eq!((l.docs, l.total_len), (1, 2));
    }
}
