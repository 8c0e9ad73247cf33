//! Export: every record kind of the store into the archive, in one read transaction.

use crate::storage::Readable;
use sha2::Digest;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};
use crate::model::LabelMerge;
use crate::model::MemoryRelation;
use crate::model::{Entity, Label, Source, Space, Thread, Timestamp};
use crate::storage::txn::map_rows;
use crate::store::StoredMemory;
use crate::store::records::graph;
use crate::store::records::value_at;
use crate::store::working::WorkingMemory;
use crate::store::{entity, label, memory, relation, source, space, thread, working_memory};

use super::*;

impl Transfer<'_> {
    /// Writes a consistent snapshot (one read transaction) of the store to a ZIP archive (see the module
    /// documentation for the format). Returns where, what and the archive's checksum.
    ///
    /// # Errors
    /// * [`ErrorKind::Forbidden`] (`path_not_allowed`): the path is outside the allowed directories.
    /// * [`ErrorKind::Conflict`] (`export_exists`): the file exists and `overwrite` is false.
    /// * [`ErrorKind::Io`], [`ErrorKind::StorageFull`]: writing failed (the partial file is removed).
    pub fn export(&self, opts: &ExportOptions) -> Result<ExportReport> {
        let started = std::time::Instant::now();
        if opts.encrypt.is_some() && !opts.compress {
            return Err(Error::invalid_value(
                &["compress"],
                "value_error",
                "an encrypted export is one ZIP file: set compress to true",
                serde_json::Value::Bool(false),
            ));
        }
        let path = match &opts.path {
            Some(p) => self.store.core.config.confine_named(p, "export_path")?,
            None => {
                let stamp = time::OffsetDateTime::now_utc()
                    .format(time::macros::format_description!("[year][month][day]-[hour][minute][second]"))
                    .unwrap_or_default();
                let dir = self.store.core.config.data_dir.join("exports");
                std::fs::create_dir_all(&dir)?;
                let ext = if opts.encrypt.is_some() { "zip.age" } else { "zip" };
                dir.join(format!("engram-export-{stamp}-{}.{ext}", &uuid::Uuid::now_v7().simple().to_string()[24..]))
            }
        };
        // Never over the store itself: not the data directory, an ancestor of it, or anything holding the
        // store file.
        if let Ok(db) = self.store.core.config.db_path().canonicalize()
            && db.starts_with(&path)
        {
            return Err(Error::new(
                ErrorKind::Forbidden,
                format!("'{}' holds the store; choose another export path", path.display()),
            )
            .with_code(ErrorCode::PathNotAllowed));
        }
        if path.is_dir() && opts.overwrite && !path.join("manifest.json").is_file() {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("'{}' is a directory that is not an export; it is not replaced", path.display()),
            )
            .with_code(ErrorCode::ExportExists));
        }
        if path.exists() && !opts.overwrite {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("'{}' exists; pass overwrite: true to replace it", path.display()),
            )
            .with_code(ErrorCode::ExportExists));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.partial-{}", uuid::Uuid::now_v7().simple()));
        let remove = |p: &Path| {
            let _ = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
        };
        let result = self.write_archive(&tmp, opts);
        let counts = match result {
            Ok(c) => c,
            Err(e) => {
                remove(&tmp);
                return Err(e);
            }
        };
        if path.exists() {
            remove(&path);
        }
        std::fs::rename(&tmp, &path)?;
        // The checksum of a ZIP archive; of a directory export, the manifest's.
        let file = if path.is_dir() { path.join("manifest.json") } else { path.clone() };
        let mut f = std::fs::File::open(&file)?;
        let mut sha = sha2::Sha256::new();
        let mut bytes = std::io::copy(&mut f, &mut sha)?;
        if path.is_dir() {
            bytes = std::fs::read_dir(&path)?.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum();
        }
        Ok(ExportReport {
            export_path: path.display().to_string(),
            counts,
            bytes,
            sha256: hex(&sha.finalize()),
            format_version: EXPORT_VERSION,
            elapsed_ms: started.elapsed().as_secs_f64() * 1000.0,
            encrypted: opts.encrypt.is_some(),
        })
    }

    pub(super) fn write_archive(&self, tmp: &Path, opts: &ExportOptions) -> Result<BTreeMap<String, u64>> {
        let inc = opts.include;
        let sink = if opts.compress {
            let file = std::fs::File::create(tmp)?;
            let options = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated)
                .compression_level(Some(1))
                .large_file(true);
            match &opts.encrypt {
                Some(key) => {
                    let sealed = key.seal(self.store.core.graph_files.side.key(), std::io::BufWriter::new(file))?;
                    Sink::Sealed(Box::new(zip::ZipWriter::new_stream(sealed)), options)
                }
                None => Sink::Zip(Box::new(zip::ZipWriter::new(std::io::BufWriter::new(file))), options),
            }
        } else {
            std::fs::create_dir_all(tmp)?;
            Sink::Dir(tmp.to_path_buf())
        };
        let mut w = ArchiveWriter { sink, files: BTreeMap::new() };
        let rtx = self.store.core.db.read()?;
        let mut counts = BTreeMap::new();
        let spaces: Vec<Space> = {
            let t = space::spaces(&rtx)?;
            let mut v = Vec::new();
            for row in t.iter()? {
                v.push(row?.1);
            }
            v
        };
        counts.insert("spaces".into(), w.file("spaces.jsonl", spaces.into_iter().map(Ok))?);
        if inc.labels {
            let labels: Vec<Label> = label::labels(&rtx)?.all()?;
            counts.insert("labels".into(), w.file("labels.jsonl", labels.into_iter().map(Ok))?);
            let merges: Vec<LabelMerge> = label::label_merges(&rtx)?.all()?;
            counts.insert("label_merges".into(), w.file("label_merges.jsonl", merges.into_iter().map(Ok))?);
        }
        self.export_memories(&rtx, &mut w, inc, &mut counts)?;
        self.export_entities_and_edges(&rtx, &mut w, inc, &mut counts)?;
        self.export_threads(&rtx, &mut w, inc, &mut counts)?;
        if inc.working_memory {
            let wm: Vec<WorkingMemory> = working_memory::days(&rtx)?.all()?;
            counts.insert("working_memory".into(), w.file("working_memory.jsonl", wm.into_iter().map(Ok))?);
        }
        self.export_sources(&rtx, &mut w, inc, &mut counts)?;
        self.export_communities(&rtx, &mut w, inc, &mut counts)?;
        self.finish_archive(w, inc, &counts)?;
        Ok(counts)
    }

    /// Memories with their label and mention edges, and their vectors in an external-vector store.
    fn export_memories(
        &self,
        rtx: &crate::storage::ReadTx,
        w: &mut ArchiveWriter,
        inc: Include,
        counts: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        if inc.memories {
            let mems = memory::memories(&rtx)?;
            let ml = label::memory_labels(&rtx)?;
            let mentions = entity::mentions(&rtx)?;
            let vectors = memory::vectors(&rtx)?;
            let external = self.store.core.config.embedder.external();
            let rows = mems.map_each(|(space, id), sm: StoredMemory| -> Result<MemoryLine> {
                let label_ids = if inc.labels { crate::store::range_prefix3(&ml, space, id)? } else { vec![] };
                let mentions = if inc.entities { crate::store::range_prefix3(&mentions, space, id)? } else { vec![] };
                let embedding = if external { vectors.get((space, sm.docno))?.map(|v| v.0) } else { None };
                Ok(MemoryLine { memory: sm.memory, label_ids, mentions, embedding })
            })?;
            counts.insert("memories".into(), w.file("memories.jsonl", rows)?);
        }
        Ok(())
    }

    /// Entities, their keys, relations and crystal sources.
    fn export_entities_and_edges(
        &self,
        rtx: &crate::storage::ReadTx,
        w: &mut ArchiveWriter,
        inc: Include,
        counts: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        if inc.entities {
            let ents: Vec<Entity> = entity::entities(&rtx)?.all()?;
            counts.insert("entities".into(), w.file("entities.jsonl", ents.into_iter().map(Ok))?);
            let keys = entity::entity_keys(&rtx)?;
            let rows = map_rows(keys.iter()?, |(s, key), v| KeyLine {
                space_id: s.to_string(),
                key: key.to_string(),
                value: v.to_string(),
            });
            counts.insert("entity_keys".into(), w.file("entity_keys.jsonl", rows)?);
        }
        if inc.edges {
            let rels: Vec<MemoryRelation> = relation::relations(&rtx)?.all()?;
            counts.insert("relations".into(), w.file("relations.jsonl", rels.into_iter().map(Ok))?);
            let cs = graph::crystal_sources(&rtx)?;
            let rows = map_rows(cs.iter()?, |(s, c, m), weight| CrystalSourceLine {
                space_id: s.into(),
                crystal_id: c.into(),
                memory_id: m.into(),
                weight,
            });
            counts.insert("crystal_sources".into(), w.file("crystal_sources.jsonl", rows)?);
        }
        Ok(())
    }

    /// Threads, their messages and message keys.
    fn export_threads(
        &self,
        rtx: &crate::storage::ReadTx,
        w: &mut ArchiveWriter,
        inc: Include,
        counts: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        if inc.threads {
            let threads: Vec<Thread> = thread::threads(&rtx)?.all()?;
            counts.insert("threads".into(), w.file("threads.jsonl", threads.into_iter().map(Ok))?);
            if inc.messages {
                let msgs = thread::messages(&rtx)?;
                let rows = msgs.map_each(|(s, t, i), message| {
                    Ok(MessageLine { space_id: s.into(), thread_id: t.into(), index: i, message })
                })?;
                counts.insert("messages".into(), w.file("messages.jsonl", rows)?);
                let keys = thread::message_keys(&rtx)?;
                let rows = map_rows(keys.iter()?, |(s, t, key), index| MessageKeyLine {
                    space_id: s.into(),
                    thread_id: t.into(),
                    key: key.into(),
                    index,
                });
                counts.insert("message_keys".into(), w.file("message_keys.jsonl", rows)?);
            }
        }
        Ok(())
    }

    /// Sources with their text and chunks, and their original bytes.
    fn export_sources(
        &self,
        rtx: &crate::storage::ReadTx,
        w: &mut ArchiveWriter,
        inc: Include,
        counts: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        if inc.sources {
            let sources: Vec<Source> = source::sources(&rtx)?.all()?;
            let text_t = source::source_text(&rtx)?;
            let rows = sources.iter().map(|s| -> Result<SourceLine> {
                let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                let text = value_at(&text_t, s.id.as_str(), lossy)?.unwrap_or_default();
                let chunks = source::chunks_of(&rtx, &s.id)?;
                Ok(SourceLine { source: s.clone(), text, chunks })
            });
            counts.insert("sources".into(), w.file("sources.jsonl", rows)?);
            if inc.source_files {
                let files = source::source_files(&rtx)?;
                let mut n = 0;
                for s in &sources {
                    let name = format!("source_files/{}", s.id);
                    if let Some(written) = value_at(&files, s.id.as_str(), |b| w.blob(&name, b))? {
                        written?;
                        n += 1;
                    }
                }
                counts.insert("source_files".into(), n);
            }
        }
        Ok(())
    }

    /// Communities with their members, and memory PageRank.
    fn export_communities(
        &self,
        rtx: &crate::storage::ReadTx,
        w: &mut ArchiveWriter,
        inc: Include,
        counts: &mut BTreeMap<String, u64>,
    ) -> Result<()> {
        if inc.communities {
            let ct = graph::communities(&rtx)?;
            let members = graph::community_members(&rtx)?;
            let rows = ct
                .map_each(|id, community| Ok(CommunityLine { community, members: graph::members_of(&members, id)? }))?;
            counts.insert("communities".into(), w.file("communities.jsonl", rows)?);
            let pr = graph::memory_pagerank(&rtx)?;
            let rows =
                map_rows(pr.iter()?, |(s, m), score| PagerankLine { space_id: s.into(), memory_id: m.into(), score });
            counts.insert("memory_pagerank".into(), w.file("memory_pagerank.jsonl", rows)?);
        }
        Ok(())
    }

    /// Writes the manifest (format, versions, embedder, switches, counts, per-file SHA-256) and closes the sink.
    fn finish_archive(&self, mut w: ArchiveWriter, inc: Include, counts: &BTreeMap<String, u64>) -> Result<()> {
        let manifest = Manifest {
            format: EXPORT_FORMAT.into(),
            format_version: EXPORT_VERSION,
            engram_version: env!("CARGO_PKG_VERSION").into(),
            store_format_version: crate::store::upgrade::FORMAT_VERSION,
            embedder: format!("{}:{}", self.store.core.config.embedder.name(), self.store.core.config.embedder.dim()),
            created_at: Timestamp::now(),
            include: inc,
            counts: counts.clone(),
            files: std::mem::take(&mut w.files),
        };
        {
            let mut out = w.sink.start("manifest.json")?;
            serde_json::to_writer_pretty(&mut out, &manifest)
                .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
            out.flush()?;
        }
        match w.sink {
            Sink::Zip(z, _) => {
                let mut inner = z.finish().map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
                inner.flush()?;
                inner.into_inner().map_err(|e| Error::from(e.into_error()))?.sync_all()?;
            }
            Sink::Sealed(z, _) => {
                let sealed = z.finish().map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?.into_inner();
                let mut inner = sealed.finish()?;
                inner.flush()?;
                inner.into_inner().map_err(|e| Error::from(e.into_error()))?.sync_all()?;
            }
            Sink::Dir(_) => {}
        }
        Ok(())
    }
}
