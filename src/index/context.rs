//! Conversation and document structure in ranking (`docs/retrieval.md`).
//!
//! A memory extracted from a thread or a source has a *position*: its group (the thread or the source) and its
//! ordinal in it (first message index, chunk index). Evidence in a conversation sits next to the turn that
//! matches a question, so three stages use the neighbours of a memory in its group:
//!
//! * **Context-expanded BM25** ([`score_context`]): a memory is scored as if its text were concatenated with the
//!   text of its `window` nearest neighbours on each side. Nothing extra is stored: the expanded term
//!   frequency of a document is its own plus its neighbours' (read from the same postings), its length the sum
//!   of theirs, and the collection statistics (document frequencies, average length) are those of the expanded
//!   collection. This is document expansion by context (in the spirit of Tao et al., "Language Model Information
//!   Retrieval with Document Expansion", NAACL 2006, with the sequence as the neighbourhood). The lexical score
//!   is `(1 - β) · BM25(own) + β · BM25(expanded)` ([`ContextParams::blend`]). A memory without a position
//!   keeps its own text, and in a space without positions both scores are equal.
//! * **Neighbour expansion** ([`expand`]), a stage after fusion: every hit `h` of the candidate list passes a
//!   share of its score to its neighbours `n` at distance `d` (1 for adjacent) in its group,
//!   `s'(n) = s(n) + a · agg_h s(h) / d`, with `agg` the maximum or the sum ([`Expansion::sum`]). A neighbour
//!   that no ranking found enters the list with that share alone.
//!
//! * **Context-blended cosine** ([`context_cosines`]), the vector side's counterpart of the first stage: a
//!   memory's cosine is blended with the mean cosine of itself and its neighbours.
//!
//! The stages were measured on the LoCoMo dev conversations (`engram eval locomo --ablation`); the figures are
//! in `docs/retrieval.md`.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::bm25::{Bm25Params, Paired, Part, Posting, ScoredList, idf};
use super::catalog::DocMeta;
use super::catalog::{Position, SpaceCatalog};
use super::fusion::Fused;
use super::lexicon::{Lexicon, TermList};
use crate::model::Memory;

/// Context-expanded BM25 settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextParams {
    /// Neighbours on each side whose text is added to a memory's, 0 switches the stage off.
    pub window: usize,
    /// Weight `β` in 0..=1 of the expanded score: 1 replaces the plain score, 0 keeps only it.
    pub blend: f32,
}

impl Default for ContextParams {
    /// Window 1 (previous and next), `β` 1: measured best on LoCoMo dev (`docs/retrieval.md`).
    fn default() -> Self {
        ContextParams { window: 1, blend: 0.9 }
    }
}

impl ContextParams {
    /// True when the stage changes scores.
    pub fn is_on(&self) -> bool {
        self.window > 0 && self.blend > 0.0
    }
}

/// Neighbour expansion settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expansion {
    /// Share `a` of a hit's score its nearest neighbour receives (0 switches the stage off).
    pub weight: f32,
    /// Neighbours on each side that receive a share.
    pub window: usize,
    /// Add the shares from several hits (true) or keep the largest (false).
    pub sum: bool,
}

impl Default for Expansion {
    /// `a` 0.5, window 1, maximum: measured best on LoCoMo dev (`docs/retrieval.md`).
    fn default() -> Self {
        Expansion { weight: 0.5, window: 1, sum: false }
    }
}

impl Expansion {
    /// True when the stage changes scores.
    pub fn is_on(&self) -> bool {
        self.weight > 0.0 && self.window > 0
    }
}

/// The position of a memory, when it has one:
///
/// 1. `source_thread_id` set: group `thread:<id>`, ordinal `source_range.start_index`, else the first of
///    `metadata.source_message_indices`, else `metadata.message_index`;
/// 2. `metadata.source_id` (a string) with `metadata.chunk_index`: group `source:<id>`, ordinal the chunk index.
///
/// Ordinals are non-negative integers (a float with a fraction or a negative number gives no position).
pub fn position_of(m: &Memory) -> Option<Position> {
    let md = &m.metadata.0;
    let uint = |v: &serde_json::Value| {
        v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
    };
    if let Some(t) = m.source_thread_id.as_deref().filter(|t| !t.is_empty()) {
        let ordinal = m
            .source_range
            .get("start_index")
            .and_then(|f| (*f >= 0.0 && f.fract() == 0.0).then_some(*f as u64))
            .or_else(|| {
                md.get("source_message_indices").and_then(|v| v.as_array()).and_then(|a| a.first()).and_then(uint)
            })
            .or_else(|| md.get("message_index").and_then(uint))?;
        return Some(Position { group: Arc::from(format!("thread:{t}")), ordinal });
    }
    let source = md.get("source_id").and_then(|v| v.as_str()).filter(|s| !s.is_empty())?;
    let ordinal = md.get("chunk_index").and_then(uint)?;
    Some(Position { group: Arc::from(format!("source:{source}")), ordinal })
}

/// The context-expanded postings of one space for one window, materialised: for every document, the postings
/// of its expanded text (its own terms plus its neighbours', its length plus theirs), kept current as
/// documents enter, leave or move ([`ExpandedIndex::note`], [`ExpandedIndex::finish`]). With them the expanded
/// BM25 of [`score_context`] is plain BM25 over another set of lists, so that it can be pruned
/// ([`crate::index::bm25::top_k`]) instead of walking every posting and its neighbours per query.
///
/// Memory: 16 bytes per expanded posting (a blended score reads the own side from the term's own list), about
/// 3 expanded postings per own posting of a positioned memory at window 1, plus 8 bytes per own posting for the
/// forward index (at 1,000,000 memories in threads of 20, 1,114 bytes a memory). Built only for spaces that
/// have sequences.
///
/// Read from the index snapshot (`ExpandedIndex::read_from`), the own texts stay in their encoding (about
/// 2 bytes a term) until the background thread an open starts ([`ExpandedIndex::encoded_own`]) or the first
/// write decodes them.
#[derive(Debug, Default, Clone)]
pub struct ExpandedIndex {
    window: usize,
    ids: std::collections::HashMap<String, u32>,
    lists: Vec<TermList>,
    /// Own terms (ids, sorted) and length of every indexed document with at least one term; empty while
    /// `own_encoded` holds them.
    own: FxHashMap<u64, OwnText>,
    /// `(document count, encoded own texts)` of [`ExpandedIndex::write_to`] as read from the index snapshot,
    /// until the first change decodes them: searches do not need them.
    own_encoded: Option<(usize, Arc<[u8]>)>,
    /// Set when the own texts read from a snapshot failed to decode: the next write rebuilds the index
    /// ([`ExpandedIndex::is_damaged`]).
    damaged: bool,
    /// Sum of the expanded lengths: divided by the document count, the expanded collection's average length.
    pub total_len: u64,
}

/// A document's own text: distinct term ids with frequencies (sorted by id) and its length.
type OwnText = (Box<[(u32, u32)]>, u32);

/// An expanded text: distinct term ids with their expanded frequencies (sorted by id) and the expanded length.
type ExpandedDoc = (Vec<(u32, u32)>, u32);

/// The documents one index change, or a batch of them, may touch, with their expanded texts before the first
/// change that touched each ([`ExpandedIndex::note`]).
#[derive(Debug, Default)]
pub struct Pending {
    docs: Vec<(u64, Option<ExpandedDoc>)>,
    seen: rustc_hash::FxHashSet<u64>,
}

/// Own texts of an index snapshot, encoded, then decoded off the index lock ([`ExpandedIndex::encoded_own`]).
#[derive(Debug)]
pub struct OwnTexts {
    docs: usize,
    terms: usize,
    bytes: Arc<[u8]>,
    decoded: Option<Result<FxHashMap<u64, OwnText>, String>>,
}

impl OwnTexts {
    /// Decodes them on the calling thread (about 0.8 s for 1,000,000 texts on one core of this machine).
    pub fn decode(mut self) -> Self {
        self.decoded = Some(decode_own(self.docs, &self.bytes, self.terms));
        self
    }
}

/// A batch with at least this many touched documents computes their new expanded texts on every core.
const PARALLEL_FINISH: usize = 256;

impl ExpandedIndex {
    /// Estimated bytes held: the expanded posting lists, the term table, and the own texts (decoded, or the
    /// encoded bytes read from a snapshot).
    pub fn heap_bytes(&self) -> usize {
        use super::{alloc_bytes, table_bytes};
        let own: usize = self.own.values().map(|(terms, _)| alloc_bytes(terms.len() * 8)).sum();
        self.lists.iter().map(|l| l.heap_bytes()).sum::<usize>()
            + self.lists.capacity() * std::mem::size_of::<TermList>()
            + table_bytes(self.ids.capacity(), 28)
            + self.ids.keys().map(|k| alloc_bytes(k.capacity())).sum::<usize>()
            + table_bytes(self.own.capacity(), 32)
            + own
            + self.own_encoded.as_ref().map_or(0, |(_, b)| alloc_bytes(b.len()))
    }

    /// The expanded postings of the documents of `catalog` and `lexicon` with `window` neighbours on each side.
    /// O(postings · log) plus O(documents · window).
    pub fn build(catalog: &SpaceCatalog, lexicon: &Lexicon, window: usize) -> Self {
        let own = FxHashMap::with_capacity_and_hasher(lexicon.docs as usize, Default::default());
        Self::build_seeded(catalog, lexicon, window, own)
    }

    /// The expanded postings of a lexicon that holds only some terms of a space (a search's query terms, read
    /// from the database in the database index mode), over a catalog holding at least the documents with a
    /// posting, their neighbours and those neighbours' neighbours. `lens` gives the length of each of those
    /// documents (their own terms are not all in `lexicon`), and `total_len` the whole space's expanded length
    /// ([`crate::storage::ReadTx::catalog_stats`]), so that each listed document's expanded frequency and
    /// length, and the collection's average length, equal what [`ExpandedIndex::build`] gives over the whole
    /// space.
    pub fn build_for_terms(
        catalog: &SpaceCatalog,
        lexicon: &Lexicon,
        window: usize,
        lens: impl IntoIterator<Item = (u64, u32)>,
        total_len: u64,
    ) -> Self {
        let seeds = lens.into_iter().filter(|(_, len)| *len > 0).map(|(d, len)| (d, (Vec::new(), len))).collect();
        let mut x = Self::build_seeded(catalog, lexicon, window, seeds);
        x.total_len = total_len;
        x
    }

    fn build_seeded(
        catalog: &SpaceCatalog,
        lexicon: &Lexicon,
        window: usize,
        mut own: FxHashMap<u64, (Vec<(u32, u32)>, u32)>,
    ) -> Self {
        let started = std::time::Instant::now();
        let lap = |phase: &str| tracing::debug!(phase, ms = started.elapsed().as_secs_f64() * 1000.0, "expanded build");
        let mut x = ExpandedIndex { window, ..Default::default() };
        let mut terms: Vec<(&str, &TermList)> = lexicon.terms().collect();
        terms.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (term, list) in terms {
            let id = x.id_of(term);
            for p in &list.postings {
                let e = own.entry(p.docno).or_insert_with(|| (Vec::new(), p.doc_len));
                e.0.push((id, p.tf));
            }
        }
        x.own = own.into_iter().map(|(d, (t, len))| (d, (t.into_boxed_slice(), len))).collect();
        lap("own texts");
        let mut docs: Vec<u64> = x.own.keys().copied().chain(catalog.iter().map(|(d, _)| d)).collect();
        docs.sort_unstable();
        docs.dedup();
        // The expanded texts on every core, a chunk at a time (bounded memory); the lists are filled in docno
        // order, so they come out sorted.
        use rayon::prelude::*;
        for chunk in docs.chunks(1 << 15) {
            let texts: Vec<(u64, ExpandedDoc)> =
                chunk.par_iter().filter_map(|d| x.expanded(catalog, *d).map(|e| (*d, e))).collect();
            for (d, (terms, len)) in texts {
                x.total_len += u64::from(len);
                for (id, tf) in terms {
                    x.lists[id as usize].postings.push(Posting { docno: d, tf, doc_len: len });
                }
            }
        }
        lap("lists filled");
        for l in &mut x.lists {
            l.tighten();
        }
        lap("tightened");
        x
    }

    /// Writes the expanded postings for the index snapshot ([`crate::store::snapshot`]): u64 window, u64
    /// total length, u32 term count and each term (u32 length, UTF-8) in id order; per term list a u64 posting
    /// count, a u64 byte length and the postings as LEB128 varints (docno gap, tf, length);
    /// then a u64 count of own texts, a u64 byte length and per document in docno order the varints docno gap,
    /// length, term count and per term its id gap and tf. About 3 bytes an expanded posting (a term of a
    /// thread's message is in three neighbouring expanded texts, so the gaps are small), against 16 in memory.
    pub(crate) fn write_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        use super::bytes::put_varint;
        out.write_all(&(self.window as u64).to_le_bytes())?;
        out.write_all(&self.total_len.to_le_bytes())?;
        let mut terms: Vec<(&String, u32)> = self.ids.iter().map(|(t, id)| (t, *id)).collect();
        terms.sort_unstable_by_key(|t| t.1);
        out.write_all(&(terms.len() as u32).to_le_bytes())?;
        for (t, _) in &terms {
            out.write_all(&(t.len() as u32).to_le_bytes())?;
            out.write_all(t.as_bytes())?;
        }
        let mut buf = Vec::new();
        for l in &self.lists {
            buf.clear();
            let mut prev = 0;
            for p in &l.postings {
                // Wrapping: lists out of order (never, by construction) fail the read, they do not panic here.
                let gap = p.docno.wrapping_sub(prev);
                for v in [gap, u64::from(p.tf), u64::from(p.doc_len)] {
                    put_varint(&mut buf, v);
                }
                prev = p.docno;
            }
            out.write_all(&(l.postings.len() as u64).to_le_bytes())?;
            out.write_all(&(buf.len() as u64).to_le_bytes())?;
            out.write_all(&buf)?;
        }
        if let Some((docs, b)) = &self.own_encoded {
            out.write_all(&(*docs as u64).to_le_bytes())?;
            out.write_all(&(b.len() as u64).to_le_bytes())?;
            return out.write_all(b);
        }
        let mut docs: Vec<(&u64, &OwnText)> = self.own.iter().collect();
        docs.sort_unstable_by_key(|d| *d.0);
        buf.clear();
        let mut prev = 0;
        for (d, (terms, len)) in docs.iter().copied() {
            put_varint(&mut buf, d.wrapping_sub(prev));
            put_varint(&mut buf, u64::from(*len));
            put_varint(&mut buf, terms.len() as u64);
            let mut prev_id = 0;
            for (id, tf) in terms {
                put_varint(&mut buf, u64::from(id.wrapping_sub(prev_id)));
                put_varint(&mut buf, u64::from(*tf));
                prev_id = *id;
            }
            prev = *d;
        }
        out.write_all(&(docs.len() as u64).to_le_bytes())?;
        out.write_all(&(buf.len() as u64).to_le_bytes())?;
        out.write_all(&buf)
    }

    /// Reads expanded postings written by [`ExpandedIndex::write_to`], decoding the lists on every core and
    /// setting their pruning bounds. The own texts are kept in their encoding until a background thread
    /// ([`ExpandedIndex::encoded_own`]) or the first change decodes them (at 1,000,000 memories in threads of 20, 1M texts an open no longer decodes: about 0.5 s of its
    /// CPU time on this 2-core machine).
    ///
    /// # Errors
    /// A message when the bytes are truncated or hold a value out of range, a term appears twice, a list is
    /// not in strictly increasing docno order, or the own texts' count exceeds their bytes. Own texts damaged
    /// otherwise (an unknown term id, documents out of order) are found when they are decoded, and mark the
    /// index damaged ([`ExpandedIndex::is_damaged`]).
    pub(crate) fn read_from(r: &mut super::bytes::Reader<'_>) -> Result<ExpandedIndex, String> {
        use rayon::prelude::*;
        let window = usize::try_from(r.u64()?).map_err(|_| "window out of range")?;
        let total_len = r.u64()?;
        let n = r.u32()? as usize;
        // Capacities from the bytes left, not the counts read: a damaged count must not allocate.
        let mut ids = std::collections::HashMap::with_capacity(n.min(r.left() / 4));
        for id in 0..n {
            let len = r.u32()? as usize;
            let term = std::str::from_utf8(r.take(len)?).map_err(|_| "term not UTF-8")?.to_string();
            if ids.insert(term, id as u32).is_some() {
                return Err("a term appears twice".into());
            }
        }
        let mut encoded = Vec::with_capacity(n.min(r.left() / 16));
        for _ in 0..n {
            let count = usize::try_from(r.u64()?).map_err(|_| "size overflow")?;
            let bytes = usize::try_from(r.u64()?).map_err(|_| "size overflow")?;
            encoded.push((count, r.take(bytes)?));
        }
        let docs = usize::try_from(r.u64()?).map_err(|_| "size overflow")?;
        let own_bytes = usize::try_from(r.u64()?).map_err(|_| "size overflow")?;
        let own_bytes = r.take(own_bytes)?;
        if docs > own_bytes.len() / 3 {
            return Err("document count out of range".into());
        }
        let lists = encoded
            .into_par_iter()
            .map(|(count, b)| decode_list(count, b))
            .collect::<Result<Vec<TermList>, String>>()?;
        Ok(ExpandedIndex {
            window,
            ids,
            lists,
            own: FxHashMap::default(),
            own_encoded: Some((docs, Arc::from(own_bytes))),
            total_len,
            damaged: false,
        })
    }

    /// Whether the own texts read from the index snapshot failed to decode at the first change: the index is
    /// then wrong for the documents that change touched, and should be rebuilt ([`ExpandedIndex::build`]).
    pub fn is_damaged(&self) -> bool {
        self.damaged
    }

    /// Marks the index damaged, as own texts that do not decode would (tests of its callers).
    #[cfg(test)]
    pub(crate) fn damage(&mut self) {
        self.damaged = true;
    }

    /// Decodes the own texts if they are still encoded (before any change): own texts that do not decode
    /// mark the index damaged and are left empty.
    fn own_texts(&mut self) {
        if let Some(job) = self.encoded_own() {
            self.take_own(job.decode());
        }
    }

    /// The own texts still encoded, to decode without holding the index ([`OwnTexts::decode`], then
    /// [`ExpandedIndex::take_own`]): an open starts this on a background thread, so that the first write does
    /// not decode them under the index lock (0.8 s at 1,000,000 memories in threads of 20).
    pub fn encoded_own(&self) -> Option<OwnTexts> {
        let (docs, bytes) = self.own_encoded.as_ref()?;
        Some(OwnTexts { docs: *docs, terms: self.lists.len(), bytes: bytes.clone(), decoded: None })
    }

    /// Installs own texts decoded from [`ExpandedIndex::encoded_own`], unless a write decoded them meanwhile.
    pub fn take_own(&mut self, own: OwnTexts) {
        let Some(decoded) = own.decoded else { return };
        if self.own_encoded.as_ref().is_some_and(|(_, b)| Arc::ptr_eq(b, &own.bytes)) {
            self.own_encoded = None;
            match decoded {
                Ok(own) => self.own = own,
                Err(why) => {
                    tracing::error!(%why, "the own texts of the index snapshot do not decode");
                    self.damaged = true;
                }
            }
        }
    }

    /// The window the postings are for.
    pub fn window(&self) -> usize {
        self.window
    }

    /// The expanded list of `term`.
    pub fn term(&self, term: &str) -> Option<&TermList> {
        self.ids.get(term).map(|id| &self.lists[*id as usize])
    }

    /// The expanded lists of a query's distinct `terms` (with their counts in the query) for
    /// [`crate::index::bm25::top_k`], in the order given; with `paired`, each also carries the own side from
    /// `lexicon` (for a blend of both scores).
    pub fn scored<'a>(&'a self, lexicon: &'a Lexicon, terms: &[(&str, u32)], paired: bool) -> Vec<ScoredList<'a>> {
        let n = lexicon.docs.max(1) as f32;
        let avg = if lexicon.docs == 0 { 1.0 } else { self.total_len as f32 / lexicon.docs as f32 };
        let avg = if avg > 0.0 { avg } else { 1.0 };
        let own_avg = lexicon.avg_len();
        let own_avg = if own_avg > 0.0 { own_avg } else { 1.0 };
        terms
            .iter()
            .map(|(t, qtf)| {
                let l = self.term(t);
                let mut scored = TermList::scored(l, n, *qtf, avg, Part::Expanded);
                scored.paired = paired.then(|| {
                    let o = lexicon.term(t);
                    Paired {
                        own: o.map_or(&[][..], |o| o.postings.as_slice()),
                        idf: idf(n, o.map_or(0, |o| o.postings.len())),
                        avg: own_avg,
                        bounds: o.map_or_else(Default::default, |o| o.bounds),
                        blocks: o.map_or(&[][..], |o| o.blocks.as_slice()),
                    }
                });
                scored
            })
            .collect()
    }

    /// Expanded postings held.
    pub fn postings(&self) -> usize {
        self.lists.iter().map(|l| l.postings.len()).sum()
    }

    fn id_of(&mut self, term: &str) -> u32 {
        if let Some(id) = self.ids.get(term) {
            return *id;
        }
        let id = self.lists.len() as u32;
        self.ids.insert(term.to_string(), id);
        self.lists.push(TermList::default());
        id
    }

    /// The expanded text of `d` now; None for a document neither indexed nor in the catalog.
    fn expanded(&self, catalog: &SpaceCatalog, d: u64) -> Option<ExpandedDoc> {
        let own = self.own.get(&d);
        if own.is_none() && catalog.get(d).is_none() {
            return None;
        }
        let mut nb = Vec::new();
        catalog.neighbours(d, self.window, &mut nb);
        let mut terms: Vec<(u32, u32)> = own.map(|o| o.0.to_vec()).unwrap_or_default();
        let mut len = own.map_or(0, |o| o.1);
        for (x, _) in &nb {
            if let Some((t, l)) = self.own.get(x) {
                terms.extend_from_slice(t);
                len += l;
            }
        }
        if !nb.is_empty() {
            terms.sort_unstable_by_key(|t| t.0);
            terms.dedup_by(|next, kept| {
                if next.0 == kept.0 {
                    kept.1 += next.1;
                    true
                } else {
                    false
                }
            });
        }
        Some((terms, len))
    }

    /// Call before a change of document `docno` (`meta`: its entry after the change, None when it leaves the
    /// catalog): adds to `pending` the documents whose expanded text the change may alter (the document, its
    /// neighbours before and after), each with its present expanded text unless an earlier change of the same
    /// batch noted it already. Then change the catalog and the lexicon and the own terms
    /// ([`ExpandedIndex::set_own`]); after the batch's last change, call [`ExpandedIndex::finish`] once. A
    /// document no change noted keeps its expanded text, so the text noted first is the one from before the
    /// batch, and the finish writes each touched document's postings once (a thread's message is touched as a
    /// new memory and again as the next one's neighbour).
    pub fn note(&mut self, catalog: &SpaceCatalog, docno: u64, meta: Option<&DocMeta>, pending: &mut Pending) {
        self.own_texts();
        let mut touched = vec![docno];
        let mut nb = Vec::new();
        catalog.neighbours(docno, self.window, &mut nb);
        touched.extend(nb.iter().map(|x| x.0));
        if let Some(m) = meta {
            let mut after = Vec::new();
            catalog.neighbours_as(docno, m, self.window, &mut after);
            touched.extend(after);
            if let Some(old) = catalog.docno_of(&m.id).filter(|o| *o != docno) {
                touched.push(old);
                catalog.neighbours(old, self.window, &mut nb);
                touched.extend(nb.iter().map(|x| x.0));
            }
        }
        for d in touched {
            if pending.seen.insert(d) {
                pending.docs.push((d, self.expanded(catalog, d)));
            }
        }
    }

    /// Sets (Some) or removes (None) the own terms and length of `docno`, as the lexicon indexes them.
    pub fn set_own(&mut self, docno: u64, terms: Option<(&[(String, u32)], u32)>) {
        self.own_texts();
        match terms {
            Some((terms, len)) => {
                let mut ids: Vec<(u32, u32)> = terms.iter().map(|(t, tf)| (self.id_of(t), *tf)).collect();
                ids.sort_unstable_by_key(|t| t.0);
                if ids.is_empty() && len == 0 {
                    self.own.remove(&docno);
                } else {
                    self.own.insert(docno, (ids.into_boxed_slice(), len));
                }
            }
            None => {
                self.own.remove(&docno);
            }
        }
    }

    /// Brings the expanded postings of the documents `pending` noted up to date, after the change.
    pub fn finish(&mut self, catalog: &SpaceCatalog, pending: Pending) {
        self.own_texts();
        let mut docs = pending.docs;
        // In docno order, so that new documents' postings are appended to the lists.
        docs.sort_unstable_by_key(|x| x.0);
        let afters: Vec<Option<ExpandedDoc>> = if docs.len() >= PARALLEL_FINISH {
            use rayon::prelude::*;
            docs.par_iter().map(|(d, _)| self.expanded(catalog, *d)).collect()
        } else {
            docs.iter().map(|(d, _)| self.expanded(catalog, *d)).collect()
        };
        for ((d, before), after) in docs.into_iter().zip(afters) {
            if before == after {
                continue;
            }
            let (old, old_len) = before.unwrap_or_default();
            let (new, new_len) = after.unwrap_or_default();
            self.total_len = self.total_len - u64::from(old_len) + u64::from(new_len);
            let (mut i, mut j) = (0, 0);
            while i < old.len() || j < new.len() {
                match (old.get(i), new.get(j)) {
                    (Some(o), Some(n)) if o.0 == n.0 => {
                        // The same term: rewritten only when its tf or the document's length changed.
                        if (o.1, old_len) != (n.1, new_len) {
                            self.lists[n.0 as usize].put(Posting { docno: d, tf: n.1, doc_len: new_len });
                        }
                        i += 1;
                        j += 1;
                    }
                    (Some(o), n) if n.is_none_or(|n| o.0 < n.0) => {
                        self.lists[o.0 as usize].remove(d);
                        i += 1;
                    }
                    (_, Some(n)) => {
                        self.lists[n.0 as usize].put(Posting { docno: d, tf: n.1, doc_len: new_len });
                        j += 1;
                    }
                    _ => break,
                }
            }
        }
    }
}

/// One list of [`ExpandedIndex::write_to`]: `count` postings in `b`.
fn decode_list(count: usize, b: &[u8]) -> Result<TermList, String> {
    // Each posting takes at least 3 bytes: a count beyond that is damage, not a reason to allocate.
    if count > b.len() / 3 {
        return Err("posting count out of range".into());
    }
    let mut r = super::bytes::Reader::new(b);
    let mut l = TermList { postings: Vec::with_capacity(count), ..Default::default() };
    let mut docno = 0u64;
    for i in 0..count {
        docno = r.gap_from(docno, i == 0).map_err(|e| format!("expanded postings: {e}"))?;
        let (tf, doc_len) = (r.varint32()?, r.varint32()?);
        l.postings.push(Posting { docno, tf, doc_len });
    }
    if !r.done() {
        return Err("trailing bytes in an expanded list".into());
    }
    l.tighten();
    Ok(l)
}

/// The own texts of [`ExpandedIndex::write_to`]: `docs` documents in `b`, term ids below `terms`.
fn decode_own(docs: usize, b: &[u8], terms: usize) -> Result<FxHashMap<u64, OwnText>, String> {
    if docs > b.len() / 3 {
        return Err("document count out of range".into());
    }
    let mut r = super::bytes::Reader::new(b);
    let mut own = FxHashMap::with_capacity_and_hasher(docs, Default::default());
    let mut docno = 0u64;
    for i in 0..docs {
        docno = r.gap_from(docno, i == 0).map_err(|e| format!("own texts: {e}"))?;
        let len = r.varint32()?;
        let k = usize::try_from(r.varint()?).map_err(|_| "size overflow")?;
        if k > r.left() / 2 {
            return Err("term count out of range".into());
        }
        let mut text = Vec::with_capacity(k);
        let mut id = 0u64;
        for j in 0..k {
            id = r.gap_from(id, j == 0).map_err(|e| format!("own terms: {e}"))?;
            let known = u32::try_from(id).ok().filter(|id| (*id as usize) < terms).ok_or("unknown term id")?;
            text.push((known, r.varint32()?));
        }
        own.insert(docno, (text.into_boxed_slice(), len));
    }
    if !r.done() {
        return Err("trailing bytes in the own texts".into());
    }
    Ok(own)
}

/// Puts document `docno` with catalog entry `meta` and, when its text changed, its analysed text
/// (`(terms with frequencies, length)`) into the catalog, the lexicon and the expanded postings, in the order
/// the expanded postings need (see [`ExpandedIndex::note`]).
pub fn put_doc(
    catalog: &mut SpaceCatalog,
    lexicon: &mut Lexicon,
    mut expanded: Option<&mut ExpandedIndex>,
    docno: u64,
    meta: DocMeta,
    text: Option<(&[(String, u32)], u32)>,
) {
    let mut pending = Pending::default();
    put_doc_batched(catalog, lexicon, expanded.as_deref_mut(), &mut pending, docno, meta, text);
    if let Some(x) = expanded {
        x.finish(catalog, pending);
    }
}

/// [`put_doc`] as one change of a batch: the expanded postings of the documents it touches are noted in
/// `pending` and written by one [`ExpandedIndex::finish`] after the batch's last change.
pub fn put_doc_batched(
    catalog: &mut SpaceCatalog,
    lexicon: &mut Lexicon,
    mut expanded: Option<&mut ExpandedIndex>,
    pending: &mut Pending,
    docno: u64,
    meta: DocMeta,
    text: Option<(&[(String, u32)], u32)>,
) {
    if let Some(x) = expanded.as_deref_mut()
        && (text.is_some() || !catalog.same_place(docno, &meta))
    {
        x.note(catalog, docno, Some(&meta), pending);
    }
    catalog.insert(docno, meta);
    if let Some((terms, len)) = text {
        lexicon.add(docno, terms, len);
    }
    if let (Some(x), Some((terms, len))) = (expanded, text) {
        x.set_own(docno, Some((terms, len)));
    }
}

/// Removes document `docno` from the catalog and, when `text` (its distinct terms and length) is given, from
/// the lexicon; the expanded postings follow.
pub fn remove_doc(
    catalog: &mut SpaceCatalog,
    lexicon: &mut Lexicon,
    mut expanded: Option<&mut ExpandedIndex>,
    docno: u64,
    text: Option<(&[String], u32)>,
) {
    let mut pending = Pending::default();
    remove_doc_batched(catalog, lexicon, expanded.as_deref_mut(), &mut pending, docno, text);
    if let Some(x) = expanded {
        x.finish(catalog, pending);
    }
}

/// [`remove_doc`] as one change of a batch (see [`put_doc_batched`]).
pub fn remove_doc_batched(
    catalog: &mut SpaceCatalog,
    lexicon: &mut Lexicon,
    mut expanded: Option<&mut ExpandedIndex>,
    pending: &mut Pending,
    docno: u64,
    text: Option<(&[String], u32)>,
) {
    if let Some(x) = expanded.as_deref_mut() {
        x.note(catalog, docno, None, pending);
    }
    catalog.remove(docno);
    if let Some((terms, len)) = text {
        lexicon.remove(docno, terms, len);
    }
    if let Some(x) = expanded
        && text.is_some()
    {
        x.set_own(docno, None);
    }
}

/// Sum of the expanded lengths of every document of the space: each document's length plus, for a memory
/// with a position, the lengths of its neighbours within `window`. Divided by the document count it is the
/// average length of the expanded collection. O(memories with a position × window).
pub fn expanded_total_len(catalog: &SpaceCatalog, lexicon: &Lexicon, window: usize) -> u64 {
    let mut total = lexicon.total_len;
    for seq in catalog.sequences() {
        let lens: Vec<u64> = seq.iter().map(|(_, d)| u64::from(lexicon.doc_len(*d))).collect();
        for i in 0..lens.len() {
            let lo = i.saturating_sub(window);
            let hi = (i + window).min(lens.len() - 1);
            total += lens[lo..=hi].iter().sum::<u64>() - lens[i];
        }
    }
    total
}

/// Context-expanded BM25 of every document whose expanded text holds a query term and that `accept` passes,
/// sorted by docno. `postings`: one list per distinct query term with its count in the query (as
/// [`super::bm25::score`]); `expanded_avg_len` is the average length of the expanded collection
/// ([`expanded_total_len`] over the lexicon's document count). Cost: O(Σ postings × window) hash-map updates.
pub fn score_context(
    params: Bm25Params,
    expanded_avg_len: f32,
    postings: &[(u32, &[Posting])],
    catalog: &SpaceCatalog,
    lexicon: &Lexicon,
    window: usize,
    accept: &dyn Fn(u64) -> bool,
) -> Vec<(u64, f32)> {
    let n = lexicon.docs.max(1) as f32;
    let avg = if expanded_avg_len > 0.0 { expanded_avg_len } else { 1.0 };
    let mut nb = Vec::new();
    let most = postings.iter().map(|(_, l)| l.len()).max().unwrap_or(0) * (1 + 2 * window);
    let mut lens: FxHashMap<u64, f32> = FxHashMap::default();
    let mut scores: FxHashMap<u64, f32> = FxHashMap::default();
    let mut tf: FxHashMap<u64, u32> = FxHashMap::with_capacity_and_hasher(most, Default::default());
    for (qtf, list) in postings {
        tf.clear();
        for p in *list {
            *tf.entry(p.docno).or_default() += p.tf;
            catalog.neighbours(p.docno, window, &mut nb);
            for (d, _) in &nb {
                *tf.entry(*d).or_default() += p.tf;
            }
        }
        let df = tf.len() as f32;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        for (&d, &t) in &tf {
            let len = *lens.entry(d).or_insert_with(|| {
                catalog.neighbours(d, window, &mut nb);
                (lexicon.doc_len(d) + nb.iter().map(|(x, _)| lexicon.doc_len(*x)).sum::<u32>()) as f32
            });
            let t = t as f32;
            let norm = params.k1 * (1.0 - params.b + params.b * len / avg);
            *scores.entry(d).or_default() += idf * t * (params.k1 + 1.0) / (t + norm) * (*qtf as f32);
        }
    }
    let mut out: Vec<(u64, f32)> = scores.into_iter().filter(|(d, _)| accept(*d)).collect();
    out.sort_unstable_by_key(|x| x.0);
    out
}

/// The shares of neighbour expansion: each hit `(docno, score)` with a positive score gives `weight · score / d`
/// to every neighbour at distance `d` that `neighbours` lists (it fills the vector with `(docno, d)`), combined
/// per neighbour by the largest share or their sum ([`Expansion::sum`]). Used for memories ([`expand`]) and for
/// the chunks of a source.
pub fn shares(
    hits: impl Iterator<Item = (u64, f32)>,
    params: Expansion,
    mut neighbours: impl FnMut(u64, &mut Vec<(u64, u32)>),
) -> FxHashMap<u64, f32> {
    let mut bonus: FxHashMap<u64, f32> = FxHashMap::default();
    let mut nb = Vec::new();
    for (docno, score) in hits {
        if score <= 0.0 {
            continue;
        }
        nb.clear();
        neighbours(docno, &mut nb);
        for (d, dist) in &nb {
            let share = params.weight * score / *dist as f32;
            let b = bonus.entry(*d).or_default();
            *b = if params.sum { *b + share } else { b.max(share) };
        }
    }
    bonus
}

/// Neighbour expansion of a fused ranking (best first), in place: the first `depth` hits pass
/// `weight · score / distance` to their neighbours (see the module docs); hits that gain are re-sorted, and
/// neighbours that `accept` passes and that were not in the list are added with their share (no lexical or
/// vector score). Returns how many were added. Scores of hits without neighbours are unchanged.
pub fn expand(
    fused: &mut Vec<Fused>,
    catalog: &SpaceCatalog,
    params: Expansion,
    depth: usize,
    accept: &dyn Fn(u64) -> bool,
) -> usize {
    if !params.is_on() || !catalog.has_sequences() {
        return 0;
    }
    let mut bonus = shares(fused.iter().take(depth).map(|f| (f.docno, f.score)), params, |d, nb| {
        catalog.neighbours(d, params.window, nb)
    });
    if bonus.is_empty() {
        return 0;
    }
    for f in fused.iter_mut() {
        if let Some(b) = bonus.remove(&f.docno) {
            f.score += b;
            f.expansion = Some(b);
        }
    }
    let mut added = 0;
    let mut extra: Vec<(u64, f32)> = bonus.into_iter().filter(|(d, _)| accept(*d)).collect();
    extra.sort_unstable_by_key(|x| x.0);
    for (d, b) in extra {
        fused.push(Fused { docno: d, score: b, lexical: None, vector: None, expansion: Some(b) });
        added += 1;
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.docno.cmp(&b.docno)));
    added
}

/// The question penalty: among the top `depth` of `fused`, a memory that is a question ([`DocMeta::question`])
/// and is followed in its thread or source by a memory starting at the very next message (ordinal + 1: the
/// reply, when a transcript is stored turn by turn) has its score multiplied by `1 - penalty`; then the top
/// `depth` are sorted again. A question without such a reply is left alone: it may be the only record of what
/// it asks about. `penalty` is clamped to 0..=1; 0 or NaN changes nothing. Returns the number of memories
/// penalised.
///
/// Why: a question restates the topic words of the questions asked of the store, so it matches them well, yet
/// holds no fact; on LoCoMo dev (turns) a quarter of the turns end with `?`, a third of the top-10 hits did, and
/// only a ninth of the evidence turns do (`docs/retrieval.md`).
pub fn penalise_questions(fused: &mut [Fused], catalog: &SpaceCatalog, penalty: f32, depth: usize) -> usize {
    let penalty = if penalty.is_nan() { 0.0 } else { penalty.clamp(0.0, 1.0) };
    if penalty == 0.0 || !catalog.has_sequences() {
        return 0;
    }
    let n = fused.len().min(depth);
    let mut nb = Vec::new();
    let mut count = 0;
    for f in fused[..n].iter_mut() {
        let Some(meta) = catalog.get(f.docno).filter(|m| m.question) else { continue };
        let Some(p) = &meta.position else { continue };
        catalog.neighbours(f.docno, 1, &mut nb);
        let replied = nb.iter().any(|(d, _)| {
            catalog.get(*d).and_then(|m| m.position.as_ref()).is_some_and(|q| q.ordinal == p.ordinal + 1)
        });
        if replied {
            f.score *= 1.0 - penalty;
            count += 1;
        }
    }
    if count > 0 {
        fused[..n].sort_by(|a, b| b.score.total_cmp(&a.score).then(a.docno.cmp(&b.docno)));
    }
    count
}

/// Context-blended cosine similarities of `docs` to the query vector `qv`, in the order of `docs`:
/// `(1 - γ) · cos(q, d) + γ · mean(cos(q, x))` over `x` in `d` and its previous and next memory of the same
/// thread or source that have a vector, `γ` = `gamma` clamped to 0..=1 (0 or NaN: the plain cosines). A document
/// without a vector keeps 0.0, and a memory without a position keeps its own cosine, as does every memory of a
/// space without sequences. The neighbours are those of `catalog` whatever the search's filter, as the
/// context-expanded BM25 reads them. Cost: one cosine per document and per neighbour (`2·docs.len()` more at
/// most), each `dim` multiply-adds.
///
/// Why: a turn stored alone ("Yes, every weekend!") says little to an embedding model; its neighbours say what it
/// is about. This is the vector side's counterpart of the context-expanded BM25 ([`score_context`]), blending
/// scores rather than vectors (the cosine of the neighbourhood's summed vectors was measured worse); on LoCoMo dev
/// (turns, MiniLM) it raised the vector half's recall@10 from 0.498 to 0.533 and hybrid from 0.821 to 0.831
/// (`docs/retrieval.md`).
pub fn context_cosines(
    vectors: &super::vector::SpaceVectors,
    catalog: &SpaceCatalog,
    qv: &[f32],
    docs: &[u64],
    gamma: f32,
) -> Vec<f32> {
    let own = vectors.similarities(qv, docs);
    let gamma = if gamma.is_nan() { 0.0 } else { gamma.clamp(0.0, 1.0) };
    if gamma == 0.0 || !catalog.has_sequences() {
        return own;
    }
    let mut nb = Vec::new();
    let mut around: Vec<Vec<u64>> = Vec::with_capacity(docs.len());
    let mut cos: FxHashMap<u64, f32> = FxHashMap::default();
    for (d, c) in docs.iter().zip(&own) {
        if vectors.contains(*d) {
            cos.insert(*d, *c);
        }
        catalog.neighbours(*d, 1, &mut nb);
        around.push(nb.iter().map(|x| x.0).filter(|x| vectors.contains(*x)).collect());
    }
    let mut missing: Vec<u64> = around.iter().flatten().copied().filter(|x| !cos.contains_key(x)).collect();
    missing.sort_unstable();
    missing.dedup();
    cos.extend(missing.iter().copied().zip(vectors.similarities(qv, &missing)));
    docs.iter()
        .zip(own)
        .zip(&around)
        .map(|((d, c), nbs)| {
            if !cos.contains_key(d) || nbs.is_empty() {
                return c;
            }
            let sum: f32 = c + nbs.iter().map(|x| cos.get(x).copied().unwrap_or(0.0)).sum::<f32>();
            (1.0 - gamma) * c + gamma * sum / (nbs.len() + 1) as f32
        })
        .collect()
}

#[cfg(test)]
mod tests;
