//! In-memory mirror of one space's BM25 postings. The postings live in redb (the persistent index, no
//! re-tokenising on open); this mirror is loaded from them on open and updated after each commit, so that a
//! query scores common terms' long posting lists from memory (about 16 bytes a posting) instead of reading
//! them from the B-tree.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::bm25::{BLOCK_SHIFT, BLOCKED_FROM, Block, Part, Posting, ScoredList, TfBounds, blocks_of, idf};

/// One term's postings sorted by docno, with bounds for pruning ([`crate::index::bm25::top_k`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TermList {
    /// Postings sorted by docno.
    pub postings: Vec<Posting>,
    /// Bounds for pruning: raised by every insert, never lowered by a removal (a bound stays valid when
    /// postings leave).
    pub bounds: TfBounds,
    /// The same per docno block, with where each block's postings start ([`crate::index::bm25::blocks_of`]),
    /// once the list has [`crate::index::bm25::BLOCKED_FROM`] postings; empty before.
    pub blocks: Vec<Block>,
}

impl TermList {
    /// Bytes its vectors allocated (postings and blocks).
    pub fn heap_bytes(&self) -> usize {
        use super::alloc_bytes;
        alloc_bytes(self.postings.capacity() * std::mem::size_of::<Posting>())
            + alloc_bytes(self.blocks.capacity() * std::mem::size_of::<crate::index::bm25::Block>())
    }

    /// Inserts or replaces the posting of `p.docno`.
    pub fn put(&mut self, p: Posting) {
        if self.postings.is_empty() {
            self.bounds = TfBounds::default();
            self.blocks.clear();
        }
        self.bounds.add(p.tf, p.doc_len);
        let at = match self.postings.last() {
            Some(last) if last.docno < p.docno => Err(self.postings.len()),
            None => Err(0),
            _ => self.postings.binary_search_by_key(&p.docno, |x| x.docno),
        };
        let (i, inserted) = match at {
            Ok(i) => (i, false),
            Err(i) => (i, true),
        };
        if inserted {
            self.postings.insert(i, p);
        } else {
            self.postings[i] = p;
        }
        if !self.blocks.is_empty() {
            let b = p.docno >> BLOCK_SHIFT;
            let k = match self.blocks.last() {
                Some(last) if last.id < b => Err(self.blocks.len()),
                Some(last) if last.id == b => Ok(self.blocks.len() - 1),
                _ => self.blocks.binary_search_by_key(&b, |x| x.id),
            };
            let k = match k {
                Ok(k) => k,
                Err(k) => {
                    // A new block: its first posting is this one (the list holds no other posting in it).
                    self.blocks.insert(k, Block { id: b, bounds: TfBounds::default(), first: i as u32 });
                    if inserted {
                        // The postings after this one moved by one; the new block's own entry is exact already.
                        for x in &mut self.blocks[k + 1..] {
                            x.first += 1;
                        }
                    }
                    self.blocks[k].bounds.add(p.tf, p.doc_len);
                    return;
                }
            };
            self.blocks[k].bounds.add(p.tf, p.doc_len);
            if inserted {
                for x in &mut self.blocks[k + 1..] {
                    x.first += 1;
                }
            }
        } else if self.postings.len() >= BLOCKED_FROM {
            self.blocks = blocks_of(&self.postings);
        }
    }

    /// Removes the posting of `docno`, if any.
    pub fn remove(&mut self, docno: u64) {
        if let Ok(i) = self.postings.binary_search_by_key(&docno, |p| p.docno) {
            self.postings.remove(i);
            // Blocks after this one start a posting earlier; this block's own start is unchanged (the next
            // posting takes the removed one's place), and its bounds stay valid.
            let after = self.blocks.partition_point(|b| b.id <= docno >> BLOCK_SHIFT);
            for x in &mut self.blocks[after..] {
                x.first = x.first.saturating_sub(1);
            }
        }
    }

    /// The list of `l` (none: an empty list) for [`crate::index::bm25::top_k`]: its idf among `n` documents of
    /// average length `avg`, the term's count `qtf` in the query, the sum it adds to; no own side.
    pub fn scored(l: Option<&TermList>, n: f32, qtf: u32, avg: f32, part: Part) -> ScoredList<'_> {
        let list = l.map_or(&[][..], |l| l.postings.as_slice());
        ScoredList {
            list,
            idf: idf(n, list.len()),
            qtf,
            avg,
            bounds: l.map_or_else(Default::default, |l| l.bounds),
            blocks: l.map_or(&[][..], |l| l.blocks.as_slice()),
            part,
            paired: None,
        }
    }

    /// Recomputes the bounds exactly (after loading).
    pub fn tighten(&mut self) {
        self.bounds = TfBounds::of(&self.postings);
        self.blocks = if self.postings.len() >= BLOCKED_FROM { blocks_of(&self.postings) } else { Vec::new() };
    }
}

/// Postings of one space: term -> postings sorted by docno, plus BM25 collection statistics.
#[derive(Debug, Default, Clone)]
pub struct Lexicon {
    postings: HashMap<String, TermList>,
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
        self.postings.entry(term.to_string()).or_default().postings.push(p);
    }

    /// Sets the length in terms of `docno` ([`Lexicon::doc_len`]) without a posting: for a lexicon of a few
    /// terms that a search builds (`crate::store`'s database index mode), whose documents' lengths come from
    /// the search catalog.
    pub fn note_len(&mut self, docno: u64, len: u32) {
        if len > 0 {
            self.lens.insert(docno, len);
        }
    }

    /// Sorts the lists and sets their bounds after [`Lexicon::load`].
    pub fn finish_load(&mut self) {
        for l in self.postings.values_mut() {
            l.postings.sort_unstable_by_key(|p| p.docno);
            l.tighten();
        }
    }

    /// Indexes document `docno` with its term frequencies and length.
    pub fn add(&mut self, docno: u64, terms: &[(String, u32)], doc_len: u32) {
        for (t, tf) in terms {
            self.postings.entry(t.clone()).or_default().put(Posting { docno, tf: *tf, doc_len });
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
                list.remove(docno);
                if list.postings.is_empty() {
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
        self.postings.get(term).map_or(&[], |l| l.postings.as_slice())
    }

    /// The list of `term` with its bounds.
    pub fn term(&self, term: &str) -> Option<&TermList> {
        self.postings.get(term)
    }

    /// Every term with its list, in no order.
    pub fn terms(&self) -> impl Iterator<Item = (&str, &TermList)> {
        self.postings.iter().map(|(t, l)| (t.as_str(), l))
    }

    /// The lists of a query's distinct `terms` (with their counts in the query) for [`crate::index::bm25::top_k`],
    /// in the order given.
    pub fn scored<'a>(&'a self, terms: &[(&str, u32)]) -> Vec<ScoredList<'a>> {
        let n = self.docs.max(1) as f32;
        let avg = self.avg_len();
        let avg = if avg > 0.0 { avg } else { 1.0 };
        terms.iter().map(|(t, qtf)| TermList::scored(self.postings.get(*t), n, *qtf, avg, Part::Own)).collect()
    }

    /// Distinct terms and postings.
    pub fn size(&self) -> (u64, u64) {
        (self.postings.len() as u64, self.postings.values().map(|l| l.postings.len() as u64).sum())
    }

    /// Estimated bytes held: the term table with its terms, the posting lists (16 bytes a posting) with their
    /// blocks, and the document lengths.
    pub fn heap_bytes(&self) -> usize {
        use super::{alloc_bytes, table_bytes};
        let lists: usize = self.postings.iter().map(|(t, l)| alloc_bytes(t.capacity()) + l.heap_bytes()).sum();
        table_bytes(self.postings.capacity(), 24 + std::mem::size_of::<TermList>())
            + lists
            + table_bytes(self.lens.capacity(), 12)
    }

    /// Length in terms of document `docno` (0 when it has no terms or is not indexed).
    pub fn doc_len(&self, docno: u64) -> u32 {
        self.lens.get(&docno).copied().unwrap_or(0)
    }

    /// Average document length (1 for an empty space).
    pub fn avg_len(&self) -> f32 {
        if self.docs == 0 { 1.0 } else { self.total_len as f32 / self.docs as f32 }
    }

    /// Writes the lexicon to `out`, as [`Lexicon::read_from`] reads it (an index snapshot, [`crate::store`]'s
    /// `snapshot` module). Little-endian: u64 documents, u64 total length; u64 count and that many
    /// `(u64 docno, u64 length)`; u64 term count, then per term a u32 byte length and its UTF-8, a u64 posting
    /// count and that many `(u64 docno, u64 packed tf and length)` ([`Posting::pack`]), by docno. About 16
    /// bytes per posting.
    ///
    /// # Errors
    /// `out`'s I/O errors.
    pub(crate) fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        out.write_all(&self.docs.to_le_bytes())?;
        out.write_all(&self.total_len.to_le_bytes())?;
        out.write_all(&(self.lens.len() as u64).to_le_bytes())?;
        for (d, l) in &self.lens {
            out.write_all(&d.to_le_bytes())?;
            out.write_all(&u64::from(*l).to_le_bytes())?;
        }
        out.write_all(&(self.postings.len() as u64).to_le_bytes())?;
        for (t, l) in &self.postings {
            out.write_all(&(t.len() as u32).to_le_bytes())?;
            out.write_all(t.as_bytes())?;
            out.write_all(&(l.postings.len() as u64).to_le_bytes())?;
            for p in &l.postings {
                out.write_all(&p.docno.to_le_bytes())?;
                out.write_all(&Posting::pack(p.tf, p.doc_len).to_le_bytes())?;
            }
        }
        Ok(())
    }

    /// Reads a lexicon written by [`Lexicon::write_to`] and recomputes its pruning bounds.
    ///
    /// # Errors
    /// A message when the bytes are truncated, a term is not UTF-8 or appears twice, or a list is empty or not
    /// in strictly increasing docno order.
    pub(crate) fn read_from(r: &mut crate::index::bytes::Reader<'_>) -> Result<Lexicon, String> {
        use crate::index::bytes::pair;
        let (docs, total_len) = (r.u64()?, r.u64()?);
        let n = usize::try_from(r.u64()?).map_err(|_| "size overflow")?;
        let lens: FxHashMap<u64, u32> = r
            .items(n, 16)?
            .chunks_exact(16)
            .map(|c| {
                let (d, l) = pair(c);
                (d, l as u32)
            })
            .collect();
        let terms = usize::try_from(r.u64()?).map_err(|_| "size overflow")?;
        let mut postings = HashMap::with_capacity(terms.min(1 << 24));
        for _ in 0..terms {
            let len = r.u32()? as usize;
            let term = std::str::from_utf8(r.take(len)?).map_err(|_| "term not UTF-8")?.to_string();
            let n = usize::try_from(r.u64()?).map_err(|_| "size overflow")?;
            let list: Vec<Posting> = r
                .items(n, 16)?
                .chunks_exact(16)
                .map(|c| {
                    let (d, v) = pair(c);
                    Posting::unpack(d, v)
                })
                .collect();
            if list.is_empty() || list.windows(2).any(|w| w[0].docno >= w[1].docno) {
                return Err(format!("postings of {term:?} empty or out of order"));
            }
            let mut l = TermList { postings: list, ..Default::default() };
            l.tighten();
            if postings.insert(term, l).is_some() {
                return Err("a term appears twice".into());
            }
        }
        Ok(Lexicon { postings, docs, total_len, lens })
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

    proptest::proptest! {
        /// Block bounds kept by `put` cover every posting of their block, through inserts in any order,
        /// replacements and removals, before and after the list grows past the blocking threshold.
        #[test]
        fn block_bounds_cover_every_posting_and_skip_entries_are_exact(
            ops in proptest::collection::vec((0u64..6000, 1u32..12, 1u32..40, proptest::bool::weighted(0.1)), 1..1500),
        ) {
            use crate::index::bm25::{BLOCK_SHIFT, Bm25Params};
            let mut l = TermList::default();
            for (docno, tf, len, remove) in ops {
                if remove {
                    l.remove(docno);
                } else {
                    l.put(Posting { docno, tf, doc_len: len });
                }
            }
            let params = Bm25Params::default();
            let score = |b: &TfBounds| b.max_score(params, 1.0, 1, 10.0);
            for p in &l.postings {
                let one = TfBounds::of(std::slice::from_ref(p));
                proptest::prop_assert!(score(&one) <= score(&l.bounds));
                if !l.blocks.is_empty() {
                    let b = l.blocks.iter().find(|b| b.id == p.docno >> BLOCK_SHIFT);
                    proptest::prop_assert!(b.is_some_and(|b| score(&one) <= score(&b.bounds)), "docno {}", p.docno);
                }
            }
            proptest::prop_assert!(l.postings.windows(2).all(|w| w[0].docno < w[1].docno));
            for b in &l.blocks {
                // Each skip entry points at the first posting of its block or later.
                let want = l.postings.partition_point(|p| p.docno < b.id << BLOCK_SHIFT);
                proptest::prop_assert_eq!(b.first as usize, want, "block {}", b.id);
            }
        }
    }
}
