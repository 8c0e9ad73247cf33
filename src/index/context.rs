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
/// Memory: 24 bytes per expanded posting (the posting, and the document's own tf and length), about 3 expanded
/// postings per own posting of a positioned memory at window 1, plus 8 bytes per own posting for the forward
/// index (at 1,000,000 positioned memories, peak RSS 740 MiB higher than plain). Built only for spaces that
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

/// An expanded text: distinct term ids with their expanded and own frequencies (sorted by id), the expanded
/// length and the own length.
type ExpandedDoc = (Vec<(u32, u32, u32)>, u32, u32);

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
            for (d, (terms, len, own_len)) in texts {
                x.total_len += u64::from(len);
                for (id, tf, own_tf) in terms {
                    let list = &mut x.lists[id as usize];
                    list.postings.push(Posting { docno: d, tf, doc_len: len });
                    list.paired.push((own_tf, own_len));
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
    /// count, a u64 byte length and the postings as LEB128 varints (docno gap, tf, length, own tf, own length);
    /// then a u64 count of own texts, a u64 byte length and per document in docno order the varints docno gap,
    /// length, term count and per term its id gap and tf. About 5 bytes an expanded posting (a term of a
    /// thread's message is in three neighbouring expanded texts, so the gaps are small), against 24 in memory.
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
            for (p, (own_tf, own_len)) in l.postings.iter().zip(&l.paired) {
                // Wrapping: lists out of order (never, by construction) fail the read, they do not panic here.
                let gap = p.docno.wrapping_sub(prev);
                for v in [gap, u64::from(p.tf), u64::from(p.doc_len), u64::from(*own_tf), u64::from(*own_len)] {
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
                        own: l.map_or(&[][..], |l| l.paired.as_slice()),
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
        let mut terms: Vec<(u32, u32, u32)> =
            own.map(|o| o.0.iter().map(|(id, tf)| (*id, *tf, *tf)).collect()).unwrap_or_default();
        let own_len = own.map_or(0, |o| o.1);
        let mut len = own_len;
        for (x, _) in &nb {
            if let Some((t, l)) = self.own.get(x) {
                terms.extend(t.iter().map(|(id, tf)| (*id, *tf, 0)));
                len += l;
            }
        }
        if !nb.is_empty() {
            terms.sort_unstable_by_key(|t| t.0);
            terms.dedup_by(|next, kept| {
                if next.0 == kept.0 {
                    kept.1 += next.1;
                    kept.2 += next.2;
                    true
                } else {
                    false
                }
            });
        }
        Some((terms, len, own_len))
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
            let (old, old_len, _) = before.unwrap_or_default();
            let (new, new_len, own_len) = after.unwrap_or_default();
            self.total_len = self.total_len - u64::from(old_len) + u64::from(new_len);
            let (mut i, mut j) = (0, 0);
            while i < old.len() || j < new.len() {
                match (old.get(i), new.get(j)) {
                    (Some(o), Some(n)) if o.0 == n.0 => {
                        let p = Posting { docno: d, tf: n.1, doc_len: new_len };
                        self.lists[n.0 as usize].put_paired(p, Some((n.2, own_len)));
                        i += 1;
                        j += 1;
                    }
                    (Some(o), n) if n.is_none_or(|n| o.0 < n.0) => {
                        self.lists[o.0 as usize].remove(d);
                        i += 1;
                    }
                    (_, Some(n)) => {
                        let p = Posting { docno: d, tf: n.1, doc_len: new_len };
                        self.lists[n.0 as usize].put_paired(p, Some((n.2, own_len)));
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
    // Each posting takes at least 5 bytes: a count beyond that is damage, not a reason to allocate.
    if count > b.len() / 5 {
        return Err("posting count out of range".into());
    }
    let mut r = super::bytes::Reader::new(b);
    let mut l =
        TermList { postings: Vec::with_capacity(count), paired: Vec::with_capacity(count), ..Default::default() };
    let mut docno = 0u64;
    for i in 0..count {
        docno = r.gap_from(docno, i == 0).map_err(|e| format!("expanded postings: {e}"))?;
        let (tf, doc_len, own_tf, own_len) = (r.varint32()?, r.varint32()?, r.varint32()?, r.varint32()?);
        l.postings.push(Posting { docno, tf, doc_len });
        l.paired.push((own_tf, own_len));
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
mod tests {
    use super::*;
    use crate::index::catalog::DocMeta;
    use crate::index::lexicon::analyse;
    use crate::model::{Memory, Metadata, Timestamp};

    fn turn(catalog: &mut SpaceCatalog, lex: &mut Lexicon, docno: u64, thread: Option<&str>, i: u64, text: &str) {
        let mut m = Memory::with_defaults(format!("m{docno}"), "s".into(), text.into(), Timestamp(0));
        if let Some(t) = thread {
            m.source_thread_id = Some(t.into());
            m.metadata =
                Metadata(serde_json::json!({"source_message_indices": [i]}).as_object().cloned().unwrap_or_default());
        }
        catalog.insert(docno, DocMeta::of(&m, Default::default()));
        let (tf, len) = analyse(text);
        lex.add(docno, &tf, len);
    }

    #[test]
    fn context_cosines_blend_each_memory_with_its_neighbourhood() {
        use crate::index::vector::{SpaceVectors, VectorParams};
        let (mut catalog, mut lex) = (SpaceCatalog::default(), Lexicon::default());
        // A thread of four turns (docnos 1-4; turn 3 has no vector) and a memory without a position (5).
        for (d, i) in [(1, 0), (2, 1), (3, 2), (4, 3)] {
            turn(&mut catalog, &mut lex, d, Some("t"), i, "words");
        }
        turn(&mut catalog, &mut lex, 5, None, 0, "words");
        let mut vectors = SpaceVectors::new(2, VectorParams::default());
        let s = std::f32::consts::FRAC_1_SQRT_2;
        vectors.insert_batch(&[(1, vec![1.0, 0.0]), (2, vec![0.0, 1.0]), (4, vec![s, s]), (5, vec![1.0, 0.0])]);
        let q = [1.0, 0.0];
        let docs = [1, 2, 3, 4, 5];
        let got = context_cosines(&vectors, &catalog, &q, &docs, 0.5);
        let (c1, c2, c4) = (1.0f32, 0.0f32, s);
        let want = [
            0.5 * c1 + 0.5 * (c1 + c2) / 2.0, // first of the thread: itself and the next
            0.5 * c2 + 0.5 * (c2 + c1) / 2.0, // turn 3 has no vector: left out of the mean
            0.0,                              // no vector: 0, as the vector ranking gives it
            0.5 * c4 + 0.5 * c4,              // its only neighbour (3) has no vector
            1.0,                              // no position: its own cosine
        ];
        for ((d, g), w) in docs.iter().zip(&got).zip(want) {
            assert!((g - w).abs() < 1e-6, "docno {d}: {g} against {w}");
        }
        // γ 0, below 0 or NaN: the plain cosines; above 1 is clamped to 1 (the mean alone).
        let plain = vectors.similarities(&q, &docs);
        for g in [0.0, -1.0, f32::NAN] {
            assert_eq!(context_cosines(&vectors, &catalog, &q, &docs, g), plain, "{g}");
        }
        let all = context_cosines(&vectors, &catalog, &q, &docs, 7.0);
        assert!((all[1] - (c2 + c1) / 2.0).abs() < 1e-6, "{all:?}");
    }

    #[test]
    fn positions_come_from_threads_and_sources() {
        let mut m = Memory::with_defaults("a".into(), "s".into(), "x".into(), Timestamp(0));
        assert_eq!(position_of(&m), None);
        m.source_thread_id = Some("t1".into());
        m.source_range.insert("start_index".into(), 4.0);
        assert_eq!(position_of(&m).map(|p| (p.group.to_string(), p.ordinal)), Some(("thread:t1".into(), 4)));
        m.source_range.clear();
        assert_eq!(position_of(&m), None, "a thread without an index gives no position");
        m.source_thread_id = None;
        m.metadata.0.insert("source_id".into(), "src".into());
        m.metadata.0.insert("chunk_index".into(), 7.into());
        assert_eq!(position_of(&m).map(|p| (p.group.to_string(), p.ordinal)), Some(("source:src".into(), 7)));
        m.metadata.0.insert("chunk_index".into(), (-1).into());
        assert_eq!(position_of(&m), None);
    }

    #[test]
    fn expanded_scores_see_the_neighbours_text_and_plain_spaces_are_unchanged() {
        let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
        turn(&mut c, &mut l, 1, Some("t"), 0, "Where did you go on holiday?");
        turn(&mut c, &mut l, 2, Some("t"), 1, "We went to Lisbon in May.");
        turn(&mut c, &mut l, 3, Some("t"), 2, "The food was great.");
        turn(&mut c, &mut l, 4, None, 0, "holiday plans for next year");
        let mut nb = Vec::new();
        c.neighbours(2, 1, &mut nb);
        assert_eq!(nb, vec![(1, 1), (3, 1)]);
        c.neighbours(4, 1, &mut nb);
        assert!(nb.is_empty());
        let total = expanded_total_len(&c, &l, 1);
        let q = analyse("holiday").0;
        let lists: Vec<(u32, &[Posting])> = q.iter().map(|(t, n)| (*n, l.postings(t))).collect();
        let s = score_context(Bm25Params::default(), total as f32 / l.docs as f32, &lists, &c, &l, 1, &|_| true);
        // Turn 2 does not say "holiday" but its previous turn does.
        assert_eq!(s.iter().map(|x| x.0).collect::<Vec<_>>(), vec![1, 2, 4]);
        // Without sequences the expanded score is the plain BM25.
        let (mut c2, mut l2) = (SpaceCatalog::default(), Lexicon::default());
        turn(&mut c2, &mut l2, 1, None, 0, "holiday in Lisbon");
        turn(&mut c2, &mut l2, 2, None, 0, "a long holiday holiday trip to the sea");
        let lists: Vec<(u32, &[Posting])> = q.iter().map(|(t, n)| (*n, l2.postings(t))).collect();
        let plain = super::super::bm25::score(Bm25Params::default(), l2.docs, l2.avg_len(), &lists, &|_| true);
        let total = expanded_total_len(&c2, &l2, 1);
        let ctx = score_context(Bm25Params::default(), total as f32 / l2.docs as f32, &lists, &c2, &l2, 1, &|_| true);
        assert_eq!(plain, ctx);
    }

    #[test]
    fn window_one_links_agree_with_the_ordered_sets_through_inserts_moves_and_removes() {
        let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for step in 0..2000u64 {
            let docno = rnd(60);
            match rnd(4) {
                0 => c.remove(docno),
                1 => turn(&mut c, &mut l, docno, None, 0, "plain"),
                _ => {
                    let thread = format!("t{}", rnd(3));
                    turn(&mut c, &mut l, docno, Some(&thread), rnd(25), "turn");
                }
            }
            for d in 0..60 {
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                c.neighbours(d, 1, &mut fast);
                // Window 2 walks the ordered set; its distance-1 entries are the window-1 neighbourhood.
                c.neighbours(d, 2, &mut slow);
                slow.retain(|(_, dist)| *dist == 1);
                assert_eq!(fast, slow, "docno {d} after step {step}");
            }
        }
    }

    #[test]
    fn expansion_shares_scores_with_neighbours_decayed_by_distance() {
        let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
        for i in 0..5 {
            turn(&mut c, &mut l, 10 + i, Some("t"), i, "turn");
        }
        turn(&mut c, &mut l, 99, None, 0, "plain");
        let mut fused = vec![
            Fused { docno: 12, score: 1.0, lexical: Some(3.0), vector: None, expansion: None },
            Fused { docno: 99, score: 0.9, lexical: Some(2.0), vector: None, expansion: None },
        ];
        let p = Expansion { weight: 0.5, window: 2, sum: false };
        let added = expand(&mut fused, &c, p, 10, &|d| d != 14);
        assert_eq!(added, 3, "11, 13 and 10 enter; 14 is filtered out");
        let score = |d: u64| fused.iter().find(|f| f.docno == d).map(|f| f.score);
        assert_eq!(score(12), Some(1.0));
        assert_eq!(score(99), Some(0.9), "a memory without neighbours keeps its score");
        assert_eq!(score(11), Some(0.5));
        assert_eq!(score(13), Some(0.5));
        assert_eq!(score(10), Some(0.25));
        assert_eq!(score(14), None);
        assert_eq!(fused.iter().map(|f| f.docno).collect::<Vec<_>>(), vec![12, 99, 11, 13, 10]);
    }

    /// Non-empty expanded lists by term, and the expanded total length.
    #[allow(clippy::type_complexity)]
    fn snapshot(x: &ExpandedIndex) -> (std::collections::BTreeMap<String, (Vec<Posting>, Vec<(u32, u32)>)>, u64) {
        let lists = x
            .ids
            .iter()
            .map(|(t, id)| {
                let l = &x.lists[*id as usize];
                (t.clone(), (l.postings.clone(), l.paired.clone()))
            })
            .filter(|(_, l)| !l.0.is_empty())
            .collect();
        (lists, x.total_len)
    }

    /// A thread of four turns, its expanded postings and their snapshot encoding.
    fn four_turns() -> (SpaceCatalog, Lexicon, ExpandedIndex, Vec<u8>) {
        let mut c = SpaceCatalog::default();
        let mut l = Lexicon::default();
        for (i, text) in ["red apples", "green apples and pears", "ripe red pears", "apples"].iter().enumerate() {
            turn(&mut c, &mut l, i as u64 + 1, Some("t"), i as u64, text);
        }
        let x = ExpandedIndex::build(&c, &l, 1);
        let mut bytes = Vec::new();
        x.write_to(&mut bytes).unwrap();
        (c, l, x, bytes)
    }

    #[test]
    fn a_damaged_snapshot_of_the_expanded_postings_is_an_error_not_a_panic() {
        let (c, _, x, bytes) = four_turns();
        let back = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
        assert_eq!(snapshot(&back), snapshot(&x));
        assert!(back.postings() > 10 && back.postings() == x.postings());
        for cut in 0..bytes.len() {
            let mut r = crate::index::bytes::Reader::new(&bytes[..cut]);
            assert!(ExpandedIndex::read_from(&mut r).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[at] ^= flip;
                // The own texts are decoded at the first change: neither that nor the change panics.
                if let Ok(mut x) = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&b)) {
                    let mut pending = Pending::default();
                    x.note(&c, 2, c.get(2), &mut pending);
                    x.finish(&c, pending);
                }
            }
        }
    }

    #[test]
    fn own_texts_stay_encoded_until_a_change_and_damaged_ones_mark_the_index() {
        let (_, _, x, bytes) = four_turns();
        let mut back = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
        assert!(back.own.is_empty() && back.own_encoded.is_some());
        // Written back as read, without decoding.
        let mut again = Vec::new();
        back.write_to(&mut again).unwrap();
        assert_eq!(again, bytes);
        back.own_texts();
        assert_eq!((&back.own, back.own_encoded.is_none(), back.is_damaged()), (&x.own, true, false));
        // Decoded off the index: installed while still encoded, not after a change decoded them.
        let mut back = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
        let (job, late) = (back.encoded_own().unwrap().decode(), back.encoded_own().unwrap().decode());
        back.take_own(job);
        assert_eq!((&back.own, back.own_encoded.is_none(), back.is_damaged()), (&x.own, true, false));
        assert!(back.encoded_own().is_none());
        back.set_own(1, None);
        back.take_own(late);
        assert!(!back.own.contains_key(&1) && back.own.len() == x.own.len() - 1);

        let mut damaged = ExpandedIndex::read_from(&mut crate::index::bytes::Reader::new(&bytes)).unwrap();
        let (docs, b) = damaged.own_encoded.clone().unwrap();
        assert_eq!(docs, 4);
        let mut b = b.to_vec();
        // Document 1, "red apples": gap, length, term count and two (id gap, tf): the next docno gap is byte 7;
        // 0 puts the documents out of order.
        b[7] = 0;
        damaged.own_encoded = Some((docs, b.into()));
        assert!(!damaged.is_damaged());
        let apples = analyse("apples").0;
        damaged.set_own(5, Some((&apples, 1)));
        assert!(damaged.is_damaged());
    }

    fn doc(docno: u64, thread: Option<u8>, ordinal: u64, latest: bool) -> DocMeta {
        let mut m = Memory::with_defaults(format!("m{docno}"), "s".into(), "x".into(), Timestamp(0));
        if let Some(t) = thread {
            m.source_thread_id = Some(format!("t{t}"));
            m.metadata = Metadata(
                serde_json::json!({"source_message_indices": [ordinal]}).as_object().cloned().unwrap_or_default(),
            );
        }
        m.is_latest = latest;
        DocMeta::of(&m, Default::default())
    }

    /// [`put_doc`] when `batch` is 1, else [`put_doc_batched`] into `p`.
    #[allow(clippy::too_many_arguments)]
    fn put_in(
        batch: usize,
        c: &mut SpaceCatalog,
        l: &mut Lexicon,
        x: Option<&mut ExpandedIndex>,
        p: &mut Pending,
        d: u64,
        m: DocMeta,
        t: Option<(&[(String, u32)], u32)>,
    ) {
        if batch == 1 { put_doc(c, l, x, d, m, t) } else { put_doc_batched(c, l, x, p, d, m, t) }
    }

    /// [`remove_doc`] when `batch` is 1, else [`remove_doc_batched`] into `p`.
    fn remove_in(
        batch: usize,
        c: &mut SpaceCatalog,
        l: &mut Lexicon,
        x: Option<&mut ExpandedIndex>,
        p: &mut Pending,
        d: u64,
        t: Option<(&[String], u32)>,
    ) {
        if batch == 1 { remove_doc(c, l, x, d, t) } else { remove_doc_batched(c, l, x, p, d, t) }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// The materialised expanded postings, kept up to date through inserts, text changes, moves, documents
        /// leaving their sequence and removals, equal a rebuild from scratch; and the pruned blended search over
        /// them equals the exhaustive context-expanded scoring (documents, order, scores to the bit).
        #[test]
        fn expanded_postings_follow_changes_and_pruned_search_equals_exhaustive(
            ops in proptest::collection::vec(
                (0u64..30, 0u8..6, 0u8..3, 0u64..10, proptest::collection::vec(0u8..8, 0..5)), 1..90),
            query in proptest::collection::vec(0u8..9, 1..4),
            k in 1usize..12,
            window in 1usize..3,
            beta in proptest::prop_oneof![proptest::strategy::Just(1.0f32), proptest::strategy::Just(0.9f32), proptest::strategy::Just(0.5f32)],
            batch in 1usize..9,
        ) {
            let (mut c, mut l) = (SpaceCatalog::default(), Lexicon::default());
            let mut x = ExpandedIndex::build(&c, &l, window);
            let mut texts: std::collections::HashMap<u64, (Vec<(String, u32)>, u32)> = Default::default();
            // Batches of `batch` changes, each finished once (1: every change on its own, through put_doc and
            // remove_doc).
            let mut pending = Pending::default();
            for (i, (docno, kind, thread, ordinal, words)) in ops.into_iter().enumerate() {
                if i % batch == 0 {
                    x.finish(&c, std::mem::take(&mut pending));
                }
                let text = analyse(&words.iter().map(|w| format!("w{w}")).collect::<Vec<_>>().join(" "));
                let old = texts.get(&docno).map(|(t, len)| (t.iter().map(|x| x.0.clone()).collect::<Vec<_>>(), *len));
                match kind {
                    0 => {
                        remove_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, old.as_ref().map(|(t, len)| (t.as_slice(), *len)));
                        texts.remove(&docno);
                    }
                    1 | 2 => {
                        if let Some((t, len)) = &old {
                            remove_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, Some((t.as_slice(), *len)));
                        }
                        let meta = doc(docno, (kind == 2).then_some(thread), ordinal, true);
                        put_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, meta, Some((&text.0, text.1)));
                        texts.insert(docno, text);
                    }
                    // A move, or leaving the sequence (superseded), without a change of text.
                    3 | 4 if old.is_some() => {
                        put_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, doc(docno, Some(thread), ordinal, kind == 3), None);
                    }
                    _ => {
                        // An entry of the catalog alone (a memory whose text is not indexed yet).
                        if old.is_none() {
                            put_in(batch, &mut c, &mut l, Some(&mut x), &mut pending, docno, doc(docno, Some(thread), ordinal, true), None);
                        }
                    }
                }
            }
            x.finish(&c, pending);
            proptest::prop_assert_eq!(snapshot(&x), snapshot(&ExpandedIndex::build(&c, &l, window)));
            proptest::prop_assert_eq!(x.total_len, expanded_total_len(&c, &l, window));
            // The snapshot encoding gives back the same index.
            let mut bytes = Vec::new();
            x.write_to(&mut bytes).unwrap();
            let mut r = crate::index::bytes::Reader::new(&bytes);
            let mut back = ExpandedIndex::read_from(&mut r).unwrap();
            proptest::prop_assert!(r.done());
            back.own_texts();
            proptest::prop_assert!(!back.is_damaged());
            proptest::prop_assert_eq!(snapshot(&back), snapshot(&x));
            proptest::prop_assert_eq!(
                (&back.ids, &back.own, back.window, back.lists.len()),
                (&x.ids, &x.own, x.window, x.lists.len())
            );
            for list in &x.lists {
                for p in &list.postings {
                    let mut one = super::super::bm25::TfBounds::default();
                    one.add(p.tf, p.doc_len);
                    let params = Bm25Params::default();
                    proptest::prop_assert!(
                        one.max_score(params, 1.0, 1, 10.0) <= list.bounds.max_score(params, 1.0, 1, 10.0)
                    );
                }
            }

            let mut qtf = std::collections::BTreeMap::new();
            for w in &query {
                *qtf.entry(format!("w{w}")).or_insert(0u32) += 1;
            }
            let params = Bm25Params::default();
            let lists: Vec<(u32, &[Posting])> = qtf.iter().map(|(t, n)| (*n, l.postings(t))).collect();
            let avg = if l.docs == 0 { 1.0 } else { x.total_len as f32 / l.docs as f32 };
            let accept = |d: u64| d % 4 != 1;
            let expanded = score_context(params, avg, &lists, &c, &l, window, &accept);
            let own = super::super::bm25::score(params, l.docs, l.avg_len(), &lists, &accept);
            let mut want: Vec<(u64, f32)> = expanded
                .iter()
                .map(|(d, e)| {
                    if beta >= 1.0 {
                        (*d, *e)
                    } else {
                        let o = own.iter().find(|x| x.0 == *d).map_or(0.0, |x| x.1);
                        (*d, (1.0 - beta) * o + beta * e)
                    }
                })
                .collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            want.truncate(k);
            use super::super::bm25::{Combine, score_doc, top_k};
            let combine = if beta >= 1.0 { Combine::Expanded } else { Combine::Blend(beta) };
            let terms: Vec<(&str, u32)> = qtf.iter().map(|(t, n)| (t.as_str(), *n)).collect();
            let scored = x.scored(&l, &terms, beta < 1.0);
            let got = top_k(params, &scored, combine, k, &accept);
            proptest::prop_assert_eq!(&got, &want);
            // Split by docno (at a window's start, and at a docno that is not): the parts' merge is the same.
            let window = 1u64 << super::super::bm25::BLOCK_SHIFT;
            for at in [&[window][..], &[5], &[17], &[5, 17, window]] {
                let got = super::super::bm25::tests::split_in_both_orders(&scored, combine, k, &accept, at);
                proptest::prop_assert_eq!(&got, &want);
            }
            for (d, s) in &want {
                proptest::prop_assert_eq!(score_doc(params, &scored, combine, *d), *s);
            }
        }
    }
}
