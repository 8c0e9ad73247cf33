//! Import: one write transaction over the verified archive, record kind by record kind, then the recount of
//! what follows from the edges.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;

use redb::{ReadableTable, ReadableTableMetadata};

use crate::error::Result;
use crate::model::{Entity, Label, Message, Source, Space, Thread, Timestamp};
use crate::store::label_maint::LabelMerge;
use crate::store::memories::WTables;
use crate::store::relations::MemoryRelation;
use crate::store::tables::*;
use crate::store::working::WorkingMemory;
use crate::store::{KnowledgeStore, StoredMemory, get_record, meta_u64, schema};

use super::*;

/// True when a (space, id) keyed table has a row of `space`.
pub(super) fn any_in(t: &impl ReadableTable<(&'static str, &'static str), &'static [u8]>, space: &str) -> Result<bool> {
    match t.range((space, "")..)?.next() {
        Some(row) => Ok(row?.0.value().0 == space),
        None => Ok(false),
    }
}

impl KnowledgeStore {
    /// Imports an archive written by [`KnowledgeStore::export_data`] in one write transaction (see the module
    /// documentation for modes and guarantees). `progress` counts records as they are written. After the commit
    /// the in-memory indexes are rebuilt, vectors are recomputed in the background (progress in
    /// [`KnowledgeStore::health`]) and communities are recomputed.
    ///
    /// # Errors
    /// * [`ErrorKind::Forbidden`] (`path_not_allowed`): the path is outside the allowed directories.
    /// * [`ErrorKind::InvalidInput`] (`archive_invalid`): not a readable archive, an entry escaping or a
    ///   symbolic link, over a cap, a checksum mismatch, a newer format, a malformed record. Nothing is written.
    /// * Storage errors; nothing is written.
    pub fn import_data(&self, path: &Path, mode: ImportMode, progress: &ImportProgress) -> Result<ImportReport> {
        let started = std::time::Instant::now();
        let real = self.config.confine_named(path, "import_path")?;
        let mut ar = Archive::open(&real)?;
        let total: u64 = ar.manifest.files.values().map(|f| f.records).sum();
        progress.total.store(total, Ordering::Release);
        progress.processed.store(0, Ordering::Release);
        let now = Timestamp::now();
        let mut report = ImportReport { records: total, ..Default::default() };
        let tick = || {
            progress.processed.fetch_add(1, Ordering::Relaxed);
        };
        let _w = self.writer.lock();
        let touched = self.write_txn(|txn| {
            let mut touched: BTreeSet<String> = BTreeSet::new();
            let c = &mut report.counts;
            // Spaces first: every other record needs its space.
            {
                let mut t = txn.open_table(SPACES)?;
                let k = c.entry("spaces".into()).or_default();
                let (mems, threads, sources) =
                    (txn.open_table(MEMORIES)?, txn.open_table(THREADS)?, txn.open_table(SOURCES)?);
                ar.lines("spaces.jsonl", |s: Space| {
                    // A stored space holding nothing yet (the default space of a new store) takes the
                    // archive's record as it is.
                    let id = s.id.as_str();
                    let holds = any_in(&mems, id)? || any_in(&threads, id)? || any_in(&sources, id)?;
                    let existing: Option<Space> = if holds { get_record(&t, id)? } else { None };
                    let d = decide(mode, existing, s.clone())?;
                    k.note(&d);
                    if let Decision::Insert(v) | Decision::Replace(v) = &d {
                        t.insert(s.id.as_str(), schema::encode(v)?.as_slice())?;
                    }
                    tick();
                    Ok(())
                })?;
            }
            let known_spaces: HashSet<String> = {
                let t = txn.open_table(SPACES)?;
                let mut v = HashSet::new();
                for row in t.iter()? {
                    v.insert(row?.0.value().to_string());
                }
                v
            };
            let need_space = |s: &str| -> Result<()> {
                if known_spaces.contains(s) {
                    Ok(())
                } else {
                    Err(archive_invalid(format!("a record names space '{s}', which the archive does not hold")))
                }
            };
            {
                let mut t = txn.open_table(LABELS)?;
                let k = c.entry("labels".into()).or_default();
                ar.lines("labels.jsonl", |l: Label| {
                    need_space(&l.space_id)?;
                    let existing: Option<Label> = get_record(&t, (l.space_id.as_str(), l.id.as_str()))?;
                    let d = decide(mode, existing, l.clone())?;
                    k.note(&d);
                    put_record(&mut t, &l.space_id, &l.id, &d)?;
                    touched.insert(l.space_id.clone());
                    tick();
                    Ok(())
                })?;
                let mut t = txn.open_table(LABEL_MERGES)?;
                let k = c.entry("label_merges".into()).or_default();
                ar.lines("label_merges.jsonl", |m: LabelMerge| {
                    need_space(&m.space_id)?;
                    let existing: Option<LabelMerge> = get_record(&t, (m.space_id.as_str(), m.merge_id.as_str()))?;
                    let d = decide(mode, existing, m.clone())?;
                    k.note(&d);
                    put_record(&mut t, &m.space_id, &m.merge_id, &d)?;
                    tick();
                    Ok(())
                })?;
            }
            // Entities before memories; mention edges come with the memories.
            {
                let mut t = txn.open_table(ENTITIES)?;
                let k = c.entry("entities".into()).or_default();
                ar.lines("entities.jsonl", |e: Entity| {
                    need_space(&e.space_id)?;
                    let existing: Option<Entity> = get_record(&t, (e.space_id.as_str(), e.id.as_str()))?;
                    let d = decide(mode, existing, e.clone())?;
                    k.note(&d);
                    put_record(&mut t, &e.space_id, &e.id, &d)?;
                    tick();
                    Ok(())
                })?;
                let mut keys = txn.open_table(ENTITY_KEYS)?;
                let k = c.entry("entity_keys".into()).or_default();
                ar.lines("entity_keys.jsonl", |r: KeyLine| {
                    need_space(&r.space_id)?;
                    let cur = keys.get((r.space_id.as_str(), r.key.as_str()))?.map(|v| v.value().to_string());
                    match (cur, mode) {
                        (None, _) => {
                            keys.insert((r.space_id.as_str(), r.key.as_str()), r.value.as_str())?;
                            k.inserted += 1;
                        }
                        (Some(v), ImportMode::Overwrite) if v != r.value => {
                            keys.insert((r.space_id.as_str(), r.key.as_str()), r.value.as_str())?;
                            k.updated += 1;
                        }
                        _ => k.skipped += 1,
                    }
                    tick();
                    Ok(())
                })?;
            }
            {
                let label_names: HashMap<(String, String), String> = {
                    let t = txn.open_table(LABELS)?;
                    let mut m = HashMap::new();
                    for row in t.iter()? {
                        let (k, v) = row?;
                        let (s, id) = k.value();
                        let l: Label = schema::decode(v.value())?;
                        m.insert((s.to_string(), id.to_string()), l.name);
                    }
                    m
                };
                let n_mem = ar.manifest.files.get("memories.jsonl").map_or(0, |f| f.records);
                let mut next_docno = KnowledgeStore::alloc_docnos(txn, n_mem)?;
                let mut t = WTables::open(txn)?;
                let k = c.entry("memories".into()).or_default();
                ar.lines("memories.jsonl", |line: MemoryLine| {
                    let space = line.memory.space_id.clone();
                    need_space(&space)?;
                    touched.insert(space.clone());
                    let id = line.memory.id.clone();
                    // Ids are unique across spaces: a memory of another space with this id is a conflict too.
                    let at = t.memory_space.get(id.as_str())?.map(|v| v.value().to_string());
                    let existing: Option<StoredMemory> = match &at {
                        Some(s) => get_record(&t.memories, (s.as_str(), id.as_str()))?,
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
                    let d = decide(mode, existing.as_ref().map(|sm| sm.memory.clone()), line.memory.clone())?;
                    let labels_now = match &at {
                        Some(s) => t.label_ids(s, &id)?,
                        None => BTreeSet::new(),
                    };
                    let mentions_now: BTreeSet<String> = match &at {
                        Some(s) => crate::store::range_prefix3(&t.mentions, s, &id)?.into_iter().collect(),
                        None => BTreeSet::new(),
                    };
                    let (labels, mentions): (BTreeSet<String>, BTreeSet<String>) = match (&d, mode) {
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
                        let embedder = &*self.config.embedder;
                        if let Some(v) =
                            line.embedding.as_ref().filter(|v| embedder.external() && v.len() == embedder.dim())
                            && v.iter().all(|x| x.is_finite())
                        {
                            t.vectors.insert((space.as_str(), docno), schema::vector_to_bytes(v).as_slice())?;
                        }
                    }
                    tick();
                    Ok(())
                })?;
            }
            {
                let mut t = WTables::open(txn)?;
                let k = c.entry("relations".into()).or_default();
                ar.lines("relations.jsonl", |r: MemoryRelation| {
                    need_space(&r.space_id)?;
                    let existing: Option<MemoryRelation> =
                        get_record(&t.relations, (r.space_id.as_str(), r.id.as_str()))?;
                    let d = decide(mode, existing, r.clone())?;
                    k.note(&d);
                    if let Decision::Insert(v) | Decision::Replace(v) = &d {
                        t.relations.insert((r.space_id.as_str(), r.id.as_str()), schema::encode(v)?.as_slice())?;
                        t.relation_space.insert(r.id.as_str(), r.space_id.as_str())?;
                        t.memory_relations
                            .insert((r.space_id.as_str(), v.source_memory_id.as_str(), r.id.as_str()), ())?;
                        t.memory_relations
                            .insert((r.space_id.as_str(), v.target_memory_id.as_str(), r.id.as_str()), ())?;
                    }
                    tick();
                    Ok(())
                })?;
                drop(t);
                let mut cs = txn.open_table(CRYSTAL_SOURCES)?;
                let k = c.entry("crystal_sources".into()).or_default();
                ar.lines("crystal_sources.jsonl", |r: CrystalSourceLine| {
                    need_space(&r.space_id)?;
                    let key = (r.space_id.as_str(), r.crystal_id.as_str(), r.memory_id.as_str());
                    let cur = cs.get(key)?.map(|v| v.value());
                    match (cur, mode) {
                        (None, _) => {
                            cs.insert(key, r.weight)?;
                            k.inserted += 1;
                        }
                        (Some(w), ImportMode::Overwrite) if w != r.weight => {
                            cs.insert(key, r.weight)?;
                            k.updated += 1;
                        }
                        _ => k.skipped += 1,
                    }
                    tick();
                    Ok(())
                })?;
            }
            {
                let mut t = txn.open_table(THREADS)?;
                let mut ts = txn.open_table(THREAD_SPACES)?;
                let k = c.entry("threads".into()).or_default();
                // Threads whose messages the archive decides (new or replaced threads, and merged ones).
                let mut take_messages: HashSet<(String, String)> = HashSet::new();
                let mut replaced: Vec<(String, String)> = Vec::new();
                ar.lines("threads.jsonl", |th: Thread| {
                    need_space(&th.space_id)?;
                    let existing: Option<Thread> = get_record(&t, (th.space_id.as_str(), th.thread_id.as_str()))?;
                    let had = existing.is_some();
                    let d = decide(mode, existing, th.clone())?;
                    k.note(&d);
                    put_record(&mut t, &th.space_id, &th.thread_id, &d)?;
                    ts.insert((th.thread_id.as_str(), th.space_id.as_str()), ())?;
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
                    tick();
                    Ok(())
                })?;
                drop(t);
                drop(ts);
                let mut msgs = txn.open_table(MESSAGES)?;
                let mut mkeys = txn.open_table(MESSAGE_KEYS)?;
                for (s, th) in &replaced {
                    msgs.retain_in((s.as_str(), th.as_str(), 0u64)..=(s.as_str(), th.as_str(), u64::MAX), |_, _| {
                        false
                    })?;
                    mkeys
                        .retain_in((s.as_str(), th.as_str(), "")..(s.as_str(), th.as_str(), "\u{10ffff}"), |_, _| {
                            false
                        })?;
                }
                let k = c.entry("messages".into()).or_default();
                ar.lines("messages.jsonl", |m: MessageLine| {
                    let key = (m.space_id.clone(), m.thread_id.clone());
                    if !take_messages.contains(&key) {
                        k.skipped += 1;
                    } else {
                        let at = (m.space_id.as_str(), m.thread_id.as_str(), m.index);
                        let existing: Option<Message> = get_record(&msgs, at)?;
                        let d = decide(mode, existing, m.message.clone())?;
                        k.note(&d);
                        if let Decision::Insert(v) | Decision::Replace(v) = &d {
                            msgs.insert(at, schema::encode(v)?.as_slice())?;
                        }
                    }
                    tick();
                    Ok(())
                })?;
                let k = c.entry("message_keys".into()).or_default();
                ar.lines("message_keys.jsonl", |m: MessageKeyLine| {
                    let key = (m.space_id.clone(), m.thread_id.clone());
                    let at = (m.space_id.as_str(), m.thread_id.as_str(), m.key.as_str());
                    if take_messages.contains(&key) && mkeys.get(at)?.is_none() {
                        mkeys.insert(at, m.index)?;
                        k.inserted += 1;
                    } else {
                        k.skipped += 1;
                    }
                    tick();
                    Ok(())
                })?;
                // A merged thread may have gained messages: its count follows its rows.
                drop(msgs);
                let msgs = txn.open_table(MESSAGES)?;
                let mut t = txn.open_table(THREADS)?;
                for (s, th) in &take_messages {
                    let n = msgs.range((s.as_str(), th.as_str(), 0u64)..=(s.as_str(), th.as_str(), u64::MAX))?.count()
                        as u64;
                    if let Some(mut rec) = get_record::<_, Thread>(&t, (s.as_str(), th.as_str()))?
                        && rec.message_count != n
                        && n > 0
                    {
                        rec.message_count = n;
                        t.insert((s.as_str(), th.as_str()), schema::encode(&rec)?.as_slice())?;
                    }
                }
            }
            {
                let mut t = txn.open_table(WORKING_MEMORY)?;
                let k = c.entry("working_memory".into()).or_default();
                ar.lines("working_memory.jsonl", |w: WorkingMemory| {
                    need_space(&w.space_id)?;
                    let existing: Option<WorkingMemory> = get_record(&t, (w.space_id.as_str(), w.date.as_str()))?;
                    let d = decide(mode, existing, w.clone())?;
                    k.note(&d);
                    put_record(&mut t, &w.space_id, &w.date, &d)?;
                    tick();
                    Ok(())
                })?;
            }
            {
                let mut lines: Vec<SourceLine> = Vec::new();
                ar.lines("sources.jsonl", |s: SourceLine| {
                    lines.push(s);
                    Ok(())
                })?;
                let mut st = txn.open_table(SOURCES)?;
                let mut ss = txn.open_table(SOURCE_SPACE)?;
                let mut sha = txn.open_table(SOURCE_SHA)?;
                let mut text = txn.open_table(SOURCE_TEXT)?;
                let mut files = txn.open_table(SOURCE_FILES)?;
                let mut chunks = txn.open_table(SOURCE_CHUNKS)?;
                let k = c.entry("sources".into()).or_default();
                for line in lines {
                    let s = &line.source;
                    need_space(&s.space_id)?;
                    touched.insert(s.space_id.clone());
                    let id = s.id.as_str();
                    let dup = sha.get((s.space_id.as_str(), s.sha256.as_str()))?.map(|v| v.value().to_string());
                    if dup.as_deref().is_some_and(|d| d != id) {
                        // The same bytes are already another source of the space.
                        k.skipped += 1;
                        tick();
                        continue;
                    }
                    let existing: Option<Source> = get_record(&st, (s.space_id.as_str(), id))?;
                    let had = existing.is_some();
                    let d = decide(mode, existing, s.clone())?;
                    k.note(&d);
                    put_record(&mut st, &s.space_id, id, &d)?;
                    let replace_body = !had || (mode == ImportMode::Overwrite && matches!(d, Decision::Replace(_)));
                    if replace_body || (mode == ImportMode::Merge && text.get(id)?.is_none()) {
                        ss.insert(id, s.space_id.as_str())?;
                        sha.insert((s.space_id.as_str(), s.sha256.as_str()), id)?;
                        text.insert(id, line.text.as_bytes())?;
                        chunks.retain_in((id, 0u64)..=(id, u64::MAX), |_, _| false)?;
                        for (i, ch) in line.chunks.iter().enumerate() {
                            chunks.insert((id, i as u64), schema::encode(ch)?.as_slice())?;
                        }
                        if let Some(bytes) = ar.blob(&format!("source_files/{id}"))? {
                            files.insert(id, bytes.as_slice())?;
                        }
                    }
                    tick();
                }
            }
            {
                // Communities are derived; they are taken only into a store that has none (the graph worker
                // recomputes them after the import either way).
                let mut ct = txn.open_table(COMMUNITIES)?;
                let k = c.entry("communities".into()).or_default();
                let empty = ct.is_empty()?;
                let mut members = txn.open_table(COMMUNITY_MEMBERS)?;
                let mut ec = txn.open_table(ENTITY_COMMUNITY)?;
                let mut max_id = 0u64;
                ar.lines("communities.jsonl", |l: CommunityLine| {
                    if empty {
                        ct.insert(l.community.id, schema::encode(&l.community)?.as_slice())?;
                        for (s, e, r) in &l.members {
                            members.insert((l.community.id, s.as_str(), e.as_str()), *r)?;
                            ec.insert((s.as_str(), e.as_str()), l.community.id)?;
                        }
                        max_id = max_id.max(l.community.id);
                        k.inserted += 1;
                    } else {
                        k.skipped += 1;
                    }
                    tick();
                    Ok(())
                })?;
                let mut pr = txn.open_table(MEMORY_PAGERANK)?;
                ar.lines("memory_pagerank.jsonl", |l: PagerankLine| {
                    if empty {
                        pr.insert((l.space_id.as_str(), l.memory_id.as_str()), l.score)?;
                    }
                    tick();
                    Ok(())
                })?;
                if empty && max_id > 0 {
                    let mut meta = txn.open_table(META)?;
                    let next = meta_u64(&meta, "next_community_id")?.unwrap_or(1).max(max_id + 1);
                    meta.insert("next_community_id", next.to_le_bytes().as_slice())?;
                }
            }
            for space in &touched {
                recount(txn, space)?;
            }
            Ok(touched)
        })?;
        drop(_w);
        self.after_bulk_change(&touched)?;
        report.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(report)
    }

    /// Rebuilds the in-memory state after a bulk change of the file (import): indexes, ranks, caches; starts
    /// re-embedding and wakes the graph workers.
    pub(super) fn after_bulk_change(&self, touched: &BTreeSet<String>) -> Result<()> {
        self.load_indexes()?;
        self.graph.write().memory_rank = crate::store::communities::load_ranks(&self.db)?;
        {
            let mut ci = self.chunk_index.write();
            for s in touched {
                ci.remove(s);
            }
        }
        self.label_vector_cache.lock().clear();
        self.builder.wake();
        self.graph_worker.wake();
        self.start_reembedding();
        Ok(())
    }
}

/// Recomputes what follows from the edges of `space`: label usage counts, entity mention counts and
/// RELATES_TO weights (memories mentioning both entities).
pub(super) fn recount(txn: &redb::WriteTransaction, space: &str) -> Result<()> {
    let lm = txn.open_table(LABEL_MEMORIES)?;
    let mut labels = txn.open_table(LABELS)?;
    let mut fixes: Vec<(String, Label)> = Vec::new();
    for row in labels.range((space, "")..)? {
        let (k, v) = row?;
        let (s, id) = k.value();
        if s != space {
            break;
        }
        let mut l: Label = schema::decode(v.value())?;
        let n = crate::store::range_prefix2_count(&lm, space, id)?;
        if l.usage_count != n {
            l.usage_count = n;
            fixes.push((id.to_string(), l));
        }
    }
    for (id, l) in fixes {
        labels.insert((space, id.as_str()), schema::encode(&l)?.as_slice())?;
    }
    let em = txn.open_table(ENTITY_MEMORIES)?;
    let mut ents = txn.open_table(ENTITIES)?;
    let mut fixes: Vec<(String, Entity)> = Vec::new();
    for row in ents.range((space, "")..)? {
        let (k, v) = row?;
        let (s, id) = k.value();
        if s != space {
            break;
        }
        let mut e: Entity = schema::decode(v.value())?;
        let n = crate::store::range_prefix2_count(&em, space, id)?;
        if e.mention_count != n {
            e.mention_count = n;
            fixes.push((id.to_string(), e));
        }
    }
    for (id, e) in fixes {
        ents.insert((space, id.as_str()), schema::encode(&e)?.as_slice())?;
    }
    // RELATES_TO from MENTIONS: every pair of entities a memory mentions, both directions.
    let mentions = txn.open_table(MENTIONS)?;
    let mut weights: HashMap<(String, String), u64> = HashMap::new();
    let mut cur_mem: Option<String> = None;
    let mut group: Vec<String> = Vec::new();
    let flush = |group: &mut Vec<String>, weights: &mut HashMap<(String, String), u64>| {
        for a in group.iter() {
            for b in group.iter() {
                if a != b {
                    *weights.entry((a.clone(), b.clone())).or_default() += 1;
                }
            }
        }
        group.clear();
    };
    for row in mentions.range((space, "", "")..)? {
        let (k, _) = row?;
        let (s, m, e) = k.value();
        if s != space {
            break;
        }
        if cur_mem.as_deref() != Some(m) {
            flush(&mut group, &mut weights);
            cur_mem = Some(m.to_string());
        }
        group.push(e.to_string());
    }
    flush(&mut group, &mut weights);
    let mut rt = txn.open_table(RELATES_TO)?;
    rt.retain_in((space, "", "")..(space, "\u{10ffff}", ""), |_, _| false)?;
    for ((a, b), w) in weights {
        rt.insert((space, a.as_str(), b.as_str()), w)?;
    }
    Ok(())
}
