//! Import: one write transaction over the verified archive, record kind by record kind, then the recount of
//! what follows from the edges.

use crate::storage::{Readable, WriteTx};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::error::Result;
use crate::model::LabelMerge;
use crate::model::MemoryRelation;
use crate::model::{Entity, Label, Message, Source, Space, Thread, Timestamp};
use crate::store::StoredMemory;
use crate::store::memories::MemoryWrite;
use crate::store::records::graph;
use crate::store::records::{Bytes, K2, value_at};
use crate::store::working::WorkingMemory;
use crate::store::{entity, label, memory, meta, relation, source, space, thread, working_memory};

use super::*;

/// True when a (space, id) keyed table has a row of `space`.
pub(super) fn any_in<R: crate::store::records::Codec>(
    t: &crate::store::records::Records<impl Readable<K2, Bytes>, K2, R>,
    space: &str,
) -> Result<bool> {
    Ok(t.count_keys_in(space, 1)? > 0)
}

/// The state one import shares across its stages: the archive, the mode, the counts by record kind, the
/// spaces whose records changed, the spaces the archive holds, and the progress counter.
struct Import<'a> {
    ar: &'a mut Archive,
    mode: ImportMode,
    counts: &'a mut BTreeMap<String, KindCounts>,
    touched: BTreeSet<String>,
    spaces: HashSet<String>,
    progress: &'a ImportProgress,
}

/// Refuses a record of a space the archive does not hold.
fn need_space(spaces: &HashSet<String>, s: &str) -> Result<()> {
    if spaces.contains(s) {
        Ok(())
    } else {
        Err(archive_invalid(format!("a record names space '{s}', which the archive does not hold")))
    }
}

fn tick(progress: &ImportProgress) {
    progress.processed.fetch_add(1, Ordering::Relaxed);
}

/// A plain key -> value row (entity keys, crystal sources): written when absent, or in `overwrite` mode when it
/// differs; otherwise kept. Counts the outcome; true when the caller should write.
fn pair_write<V: PartialEq>(cur: Option<V>, new: &V, mode: ImportMode, k: &mut KindCounts) -> bool {
    match (cur, mode) {
        (None, _) => {
            k.inserted += 1;
            true
        }
        (Some(v), ImportMode::Overwrite) if v != *new => {
            k.updated += 1;
            true
        }
        _ => {
            k.skipped += 1;
            false
        }
    }
}

impl Import<'_> {
    /// Spaces first: every other record needs its space. A stored space holding nothing yet (the default
    /// space of a new store) takes the archive's record as it is.
    fn spaces(&mut self, txn: &WriteTx) -> Result<()> {
        let mut t = space::spaces(txn)?;
        let (mode, progress) = (self.mode, self.progress);
        let k = self.counts.entry("spaces".into()).or_default();
        let (mems, threads, sources) = (memory::memories(txn)?, thread::threads(txn)?, source::sources(txn)?);
        self.ar.lines("spaces.jsonl", |s: Space| {
            let id = s.id.as_str();
            let holds = any_in(&mems, id)? || any_in(&threads, id)? || any_in(&sources, id)?;
            let existing: Option<Space> = if holds { t.get(id)? } else { None };
            let d = decide(mode, existing, s.clone())?;
            k.note(&d);
            if let Decision::Insert(v) | Decision::Replace(v) = &d {
                t.put(s.id.as_str(), v)?;
            }
            tick(progress);
            Ok(())
        })?;
        for id in t.map_each(|id, _| Ok(id.to_string()))? {
            self.spaces.insert(id?);
        }
        Ok(())
    }

    /// One record kind stored as encoded records under `(space, id)` keys, from `<kind>.jsonl`: each record is
    /// decided by the mode against the stored one ([`decide`]), written, counted, and handed to `then` with the
    /// decision and whether a record was stored before (for the rows kept beside it). `touch` marks its space
    /// for the recount.
    fn keyed<T>(
        &mut self,
        mut t: RecordsMut<'_, T>,
        kind: &str,
        key: fn(&T) -> (&str, &str),
        touch: bool,
        mut then: impl FnMut(&T, &Decision<T>, bool) -> Result<()>,
    ) -> Result<()>
    where
        T: crate::storage::codec::Versioned + PartialEq + Clone,
    {
        let Import { ar, mode, counts, touched, spaces, progress } = self;
        let k = counts.entry(kind.into()).or_default();
        ar.lines(&format!("{kind}.jsonl"), |r: T| {
            let (space, id) = key(&r);
            need_space(spaces, space)?;
            let existing: Option<T> = t.get((space, id))?;
            let had = existing.is_some();
            let d = decide(*mode, existing, r.clone())?;
            k.note(&d);
            put_record(&mut t, space, id, &d)?;
            if touch {
                touched.insert(space.to_string());
            }
            then(&r, &d, had)?;
            tick(progress);
            Ok(())
        })
    }

    /// Entity keys (`(space, key) -> entity id`): a plain row per key.
    fn entity_keys(&mut self, txn: &WriteTx) -> Result<()> {
        let mut keys = entity::entity_keys(txn)?;
        let Import { ar, mode, counts, spaces, progress, .. } = self;
        let k = counts.entry("entity_keys".into()).or_default();
        ar.lines("entity_keys.jsonl", |r: KeyLine| {
            need_space(spaces, &r.space_id)?;
            let cur = value_at(&keys, (r.space_id.as_str(), r.key.as_str()), str::to_string)?;
            if pair_write(cur, &r.value, *mode, k) {
                keys.put((r.space_id.as_str(), r.key.as_str()), r.value.as_str())?;
            }
            tick(progress);
            Ok(())
        })
    }

    /// Relations, with the rows that find them by id and by memory.
    fn relations(&mut self, txn: &WriteTx) -> Result<()> {
        let mut relation_space = relation::relation_space(txn)?;
        let mut memory_relations = relation::memory_relations(txn)?;
        self.keyed(
            relation::relations(txn)?,
            "relations",
            |r: &MemoryRelation| (&r.space_id, &r.id),
            false,
            |r, d, _| {
                if let Decision::Insert(v) | Decision::Replace(v) = d {
                    relation_space.put(r.id.as_str(), r.space_id.as_str())?;
                    memory_relations.put((r.space_id.as_str(), v.source_memory_id.as_str(), r.id.as_str()), ())?;
                    memory_relations.put((r.space_id.as_str(), v.target_memory_id.as_str(), r.id.as_str()), ())?;
                }
                Ok(())
            },
        )
    }

    /// CRYSTALLIZED_FROM weights (`(space, crystal, memory) -> weight`): a plain row per edge.
    fn crystal_sources(&mut self, txn: &WriteTx) -> Result<()> {
        let mut cs = graph::crystal_sources(txn)?;
        let Import { ar, mode, counts, spaces, progress, .. } = self;
        let k = counts.entry("crystal_sources".into()).or_default();
        ar.lines("crystal_sources.jsonl", |r: CrystalSourceLine| {
            need_space(spaces, &r.space_id)?;
            let key = (r.space_id.as_str(), r.crystal_id.as_str(), r.memory_id.as_str());
            let cur = value_at(&cs, key, |w| w)?;
            if pair_write(cur, &r.weight, *mode, k) {
                cs.put(key, r.weight)?;
            }
            tick(progress);
            Ok(())
        })
    }

    /// Threads, then the messages and message keys of the threads the archive decides (new, replaced or
    /// merged ones); a replaced thread loses its stored messages first, and a merged one's count follows its
    /// rows.
    fn threads(&mut self, txn: &WriteTx) -> Result<()> {
        let mode = self.mode;
        let mut take_messages: HashSet<(String, String)> = HashSet::new();
        let mut replaced: Vec<(String, String)> = Vec::new();
        {
            let mut ts = thread::thread_spaces(txn)?;
            self.keyed(
                thread::threads(txn)?,
                "threads",
                |t: &Thread| (&t.space_id, &t.thread_id),
                false,
                |th, _, had| {
                    ts.put((th.thread_id.as_str(), th.space_id.as_str()), ())?;
                    let key = (th.space_id.clone(), th.thread_id.clone());
                    match mode {
                        ImportMode::Skip if had => {}
                        ImportMode::Overwrite if had => {
                            replaced.push(key.clone());
                            take_messages.insert(key);
                        }
                        _ => {
                            take_messages.insert(key);
                        }
                    }
                    Ok(())
                },
            )?;
        }
        let mut msgs = thread::messages(txn)?;
        let mut mkeys = thread::message_keys(txn)?;
        for (s, th) in &replaced {
            msgs.remove_range((s.as_str(), th.as_str(), 0u64)..=(s.as_str(), th.as_str(), u64::MAX))?;
            mkeys.retain_in((s.as_str(), th.as_str(), "")..(s.as_str(), th.as_str(), "\u{10ffff}"), |_, _| false)?;
        }
        let Import { ar, counts, progress, .. } = self;
        let k = counts.entry("messages".into()).or_default();
        ar.lines("messages.jsonl", |m: MessageLine| {
            let key = (m.space_id.clone(), m.thread_id.clone());
            if !take_messages.contains(&key) {
                k.skipped += 1;
            } else {
                let at = (m.space_id.as_str(), m.thread_id.as_str(), m.index);
                let existing: Option<Message> = msgs.get(at)?;
                let d = decide(mode, existing, m.message.clone())?;
                k.note(&d);
                if let Decision::Insert(v) | Decision::Replace(v) = &d {
                    msgs.put(at, v)?;
                }
            }
            tick(progress);
            Ok(())
        })?;
        let k = counts.entry("message_keys".into()).or_default();
        ar.lines("message_keys.jsonl", |m: MessageKeyLine| {
            let key = (m.space_id.clone(), m.thread_id.clone());
            let at = (m.space_id.as_str(), m.thread_id.as_str(), m.key.as_str());
            if take_messages.contains(&key) && mkeys.get(at)?.is_none() {
                mkeys.put(at, m.index)?;
                k.inserted += 1;
            } else {
                k.skipped += 1;
            }
            tick(progress);
            Ok(())
        })?;
        // A merged thread may have gained messages: its count follows its rows.
        drop(msgs);
        let mut t = thread::threads(txn)?;
        for (s, th) in &take_messages {
            let n = thread::count_messages(txn, s, th)?;
            if let Some(mut rec) = t.get((s.as_str(), th.as_str()))?
                && rec.message_count != n
                && n > 0
            {
                rec.message_count = n;
                t.put((s.as_str(), th.as_str()), &rec)?;
            }
        }
        Ok(())
    }

    /// Sources: the record, the rows that find it (space, SHA-256), its text, chunks and original bytes. The
    /// same bytes already stored as another source of the space are skipped.
    fn sources(&mut self, txn: &WriteTx) -> Result<()> {
        let mut lines: Vec<SourceLine> = Vec::new();
        self.ar.lines("sources.jsonl", |s: SourceLine| {
            lines.push(s);
            Ok(())
        })?;
        let mut st = source::sources(txn)?;
        let mut ss = source::source_space(txn)?;
        let mut sha = source::source_sha(txn)?;
        let mut text = source::source_text(txn)?;
        let mut files = source::source_files(txn)?;
        let mut chunks = source::source_chunks(txn)?;
        let k = self.counts.entry("sources".into()).or_default();
        for line in lines {
            let s = &line.source;
            need_space(&self.spaces, &s.space_id)?;
            self.touched.insert(s.space_id.clone());
            let id = s.id.as_str();
            let dup = value_at(&sha, (s.space_id.as_str(), s.sha256.as_str()), str::to_string)?;
            if dup.as_deref().is_some_and(|d| d != id) {
                // The same bytes are already another source of the space.
                k.skipped += 1;
                tick(self.progress);
                continue;
            }
            let existing: Option<Source> = st.get((s.space_id.as_str(), id))?;
            let had = existing.is_some();
            let d = decide(self.mode, existing, s.clone())?;
            k.note(&d);
            put_record(&mut st, &s.space_id, id, &d)?;
            let replace_body = !had || (self.mode == ImportMode::Overwrite && matches!(d, Decision::Replace(_)));
            if replace_body || (self.mode == ImportMode::Merge && text.get(id)?.is_none()) {
                ss.put(id, s.space_id.as_str())?;
                sha.put((s.space_id.as_str(), s.sha256.as_str()), id)?;
                text.put(id, line.text.as_bytes())?;
                chunks.remove_range((id, 0u64)..=(id, u64::MAX))?;
                for (i, ch) in line.chunks.iter().enumerate() {
                    chunks.put((id, i as u64), ch)?;
                }
                if let Some(bytes) = self.ar.blob(&format!("source_files/{id}"))? {
                    files.put(id, bytes.as_slice())?;
                }
            }
            tick(self.progress);
        }
        Ok(())
    }

    /// Communities are derived; they are taken only into a store that has none (the graph worker recomputes
    /// them after the import either way).
    fn communities(&mut self, txn: &WriteTx) -> Result<()> {
        // Communities are derived; they are taken only into a store that has none (the graph worker
        // recomputes them after the import either way).
        let mut ct = graph::communities(txn)?;
        let k = self.counts.entry("communities".into()).or_default();
        let empty = ct.is_empty()?;
        let mut members = graph::community_members(txn)?;
        let mut ec = graph::entity_community(txn)?;
        let mut max_id = 0u64;
        self.ar.lines("communities.jsonl", |l: CommunityLine| {
            if empty {
                ct.put(l.community.id, &l.community)?;
                for (s, e, r) in &l.members {
                    members.put((l.community.id, s.as_str(), e.as_str()), *r)?;
                    ec.put((s.as_str(), e.as_str()), l.community.id)?;
                }
                max_id = max_id.max(l.community.id);
                k.inserted += 1;
            } else {
                k.skipped += 1;
            }
            tick(self.progress);
            Ok(())
        })?;
        let mut pr = graph::memory_pagerank(txn)?;
        self.ar.lines("memory_pagerank.jsonl", |l: PagerankLine| {
            if empty {
                pr.put((l.space_id.as_str(), l.memory_id.as_str()), l.score)?;
            }
            tick(self.progress);
            Ok(())
        })?;
        if empty && max_id > 0 {
            let mut meta = meta::meta(txn)?;
            let next = meta.u64("next_community_id")?.unwrap_or(1).max(max_id + 1);
            meta.put_u64("next_community_id", next)?;
        }
        Ok(())
    }
}

impl Transfer<'_> {
    /// Imports an archive written by [`Transfer::export`](crate::store::Transfer::export) in one write transaction (see the module
    /// documentation for modes and guarantees). `progress` counts records as they are written. After the commit
    /// the in-memory indexes are rebuilt, vectors are recomputed in the background (progress in
    /// [`Admin::health`](crate::store::Admin::health)) and communities are recomputed.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::Forbidden`] (`path_not_allowed`): the path is outside the allowed directories.
    /// * [`crate::ErrorKind::InvalidInput`] (`archive_invalid`): not a readable archive, an entry escaping or a
    ///   symbolic link, over a cap, a checksum mismatch, a newer format, a malformed record. Nothing is written.
    /// * Storage errors; nothing is written.
    pub fn import(&self, path: &Path, mode: ImportMode, progress: &ImportProgress) -> Result<ImportReport> {
        self.import_with(path, mode, progress, None)
    }

    /// [`Transfer::import`](crate::store::Transfer::import) of an archive that may be encrypted (an age file, docs/security.md): one
    /// sealed to a passphrase opens with `passphrase`, one sealed to this store's key opens without.
    ///
    /// # Errors
    /// As [`Transfer::import`](crate::store::Transfer::import); [`crate::ErrorKind::WrongKey`] when the passphrase or this store's
    /// key does not open an encrypted archive (`key_required` when it needs a passphrase and none was given).
    pub fn import_with(
        &self,
        path: &Path,
        mode: ImportMode,
        progress: &ImportProgress,
        passphrase: Option<&secrecy::SecretString>,
    ) -> Result<ImportReport> {
        let started = std::time::Instant::now();
        let real = self.store.core.config.confine_named(path, "import_path")?;
        let keys = super::archive::ArchiveKeys { passphrase, store: self.store.core.graph_files.side.key() };
        let mut ar = Archive::open(&real, &keys)?;
        let total: u64 = ar.manifest.files.values().map(|f| f.records).sum();
        progress.total.store(total, Ordering::Release);
        progress.processed.store(0, Ordering::Release);
        let now = Timestamp::now();
        let mut report = ImportReport { records: total, ..Default::default() };
        let touched = self.store.core.write(|txn, _| {
            let mut im = Import {
                ar: &mut ar,
                mode,
                counts: &mut report.counts,
                touched: BTreeSet::new(),
                spaces: HashSet::new(),
                progress,
            };
            im.spaces(txn)?;
            im.keyed(label::labels(txn)?, "labels", |l: &Label| (&l.space_id, &l.id), true, |_, _, _| Ok(()))?;
            im.keyed(
                label::label_merges(txn)?,
                "label_merges",
                |m: &LabelMerge| (&m.space_id, &m.merge_id),
                false,
                |_, _, _| Ok(()),
            )?;
            // Entities before memories; mention edges come with the memories.
            im.keyed(entity::entities(txn)?, "entities", |e: &Entity| (&e.space_id, &e.id), false, |_, _, _| Ok(()))?;
            im.entity_keys(txn)?;
            self.import_memories(txn, &mut im, now)?;
            im.relations(txn)?;
            im.crystal_sources(txn)?;
            im.threads(txn)?;
            if self.store.core.writes.sync.on() {
                // In a sync group every message is known by a deduplication key (docs/sync.md).
                thread::key_keyless(txn)?;
            }
            im.keyed(
                working_memory::days(txn)?,
                "working_memory",
                |w: &WorkingMemory| (&w.space_id, &w.date),
                false,
                |_, _, _| Ok(()),
            )?;
            im.sources(txn)?;
            im.communities(txn)?;
            for space in &im.touched {
                super::recount::recount(txn, space)?;
            }
            // The records came in without index operations: a database's search catalog is made anew.
            self.store.core.refill_catalog(txn)?;
            Ok(im.touched)
        })?;
        self.after_bulk_change(&touched)?;
        report.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(report)
    }

    /// Memories with their label and mention edges, and caller-supplied vectors (an external store cannot
    /// recompute them). Ids are unique across spaces: a memory of another space with the same id is a conflict.
    fn import_memories(&self, txn: &WriteTx, im: &mut Import<'_>, now: Timestamp) -> Result<()> {
        let label_names: HashMap<(String, String), String> = {
            let t = label::labels(txn)?;
            let mut m = HashMap::new();
            t.each(|s, id, l: Label| {
                m.insert((s.to_string(), id.to_string()), l.name);
                true
            })?;
            m
        };
        let n_mem = im.ar.manifest.files.get("memories.jsonl").map_or(0, |f| f.records);
        let mut next_docno = meta::alloc_docnos(txn, n_mem)?;
        let mut t = MemoryWrite::open(txn)?;
        let k = im.counts.entry("memories".into()).or_default();
        im.ar.lines("memories.jsonl", |line: MemoryLine| {
            let space = line.memory.space_id.clone();
            need_space(&im.spaces, &space)?;
            im.touched.insert(space.clone());
            let id = line.memory.id.clone();
            // Ids are unique across spaces: a memory of another space with this id is a conflict too.
            let at = t.memories.space_of(&id)?;
            let existing: Option<StoredMemory> = match &at {
                Some(s) => t.memories.get(s, &id)?,
                None => None,
            };
            let names = |ids: &[String]| -> BTreeSet<String> {
                ids.iter()
                    .map(|lid| {
                        label_names
                            .get(&(space.clone(), lid.clone()))
                            .cloned()
                            .unwrap_or_else(|| lid.strip_prefix("label_").unwrap_or(lid).to_string())
                    })
                    .collect()
            };
            let d = decide(im.mode, existing.as_ref().map(|sm| sm.memory.clone()), line.memory.clone())?;
            let labels_now = match &at {
                Some(s) => t.label_ids(s, &id)?,
                None => BTreeSet::new(),
            };
            let mentions_now: BTreeSet<String> = match &at {
                Some(s) => t.entities.mentioned_by(s, &id)?.into_iter().collect(),
                None => BTreeSet::new(),
            };
            let (labels, mentions): (BTreeSet<String>, BTreeSet<String>) = match (&d, im.mode) {
                (Decision::Insert(_), _) | (_, ImportMode::Overwrite) => {
                    (line.label_ids.iter().cloned().collect(), line.mentions.iter().cloned().collect())
                }
                (_, ImportMode::Merge) => (
                    labels_now.iter().chain(&line.label_ids).cloned().collect(),
                    mentions_now.iter().chain(&line.mentions).cloned().collect(),
                ),
                (_, ImportMode::Skip) => (labels_now.clone(), mentions_now.clone()),
            };
            let edges_changed = labels != labels_now || mentions != mentions_now;
            let record = match d {
                Decision::Insert(m) | Decision::Replace(m) => Some(m),
                Decision::Keep if edges_changed => existing.as_ref().map(|sm| sm.memory.clone()),
                Decision::Keep => None,
            };
            match (&record, &existing) {
                (None, _) => k.skipped += 1,
                (Some(_), None) => k.inserted += 1,
                (Some(_), Some(_)) => k.updated += 1,
            }
            if let Some(m) = record {
                let docno = next_docno;
                next_docno += 1;
                let label_names: BTreeSet<String> = names(&labels.iter().cloned().collect::<Vec<_>>());
                let space = m.space_id.clone();
                let docno = t.import_memory(at.as_deref(), existing, m, &label_names, &mentions, docno, now)?;
                // Caller-supplied vectors come back with their memory (an external store cannot
                // recompute them); a vector of another dimension, or for a store that embeds by itself,
                // is left out and the text is embedded as usual.
                let embedder = &*self.store.core.config.embedder;
                if let Some(v) = line.embedding.as_ref().filter(|v| embedder.external() && v.len() == embedder.dim())
                    && v.iter().all(|x| x.is_finite())
                {
                    t.memories.put_vector(&space, docno, v.clone())?;
                }
            }
            tick(im.progress);
            Ok(())
        })?;
        Ok(())
    }

    /// Rebuilds the in-memory state after a bulk change of the file (import): indexes, ranks, caches; starts
    /// re-embedding and wakes the graph workers.
    pub(super) fn after_bulk_change(&self, touched: &BTreeSet<String>) -> Result<()> {
        self.store.core.load_indexes()?;
        {
            let mut ci = self.store.core.chunk_index.write();
            for s in touched {
                ci.remove(s);
            }
        }
        self.store.label_vector_cache.lock().clear();
        self.store.core.wake_builder();
        self.store.core.wake_graph();
        self.store.core.start_reembedding();
        Ok(())
    }
}
