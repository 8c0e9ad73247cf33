//! Background re-embedding: gives a vector from the active embedder to every memory that lacks one.
//!
//! A memory lacks a vector after the store was opened with another embedder or dimension (the old vectors are
//! dropped in the same transaction that records the new embedder, so one index never mixes two models), or
//! after a crash in the middle of such a run (the work list is rebuilt from the file at every open). Writes
//! made meanwhile are embedded by the new model at once. Until a space's vectors are complete, its vector and
//! hybrid searches are served by BM25 alone (`SearchResults::fallback` says so).
//!
//! Batches of [`BATCH`] memories: read the texts, embed them with no lock held, then one write transaction
//! stores the vectors and clears `reindex_needed` on each record whose document number did not change
//! meanwhile (a memory edited or deleted in between already has its new vector, or needs none).

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use super::indexes::IndexState;
use super::worker::Worker;
use crate::embed::{Embedder, InputType};
use crate::error::Result;
use crate::model::Timestamp;
use crate::store::records::StoredMemory;
use crate::store::records::Vector;
use crate::store::records::memory;

/// Memories per batch (one embedding call and one write transaction).
pub const BATCH: usize = 64;

/// Progress of the re-embedding run, shared with `/health`.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub total: AtomicU64,
    pub done: AtomicU64,
    pub running: AtomicBool,
    pub error: Mutex<Option<String>>,
    pub from: Mutex<Option<String>>,
}

/// A snapshot of the re-embedding run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReembedStatus {
    /// True while memories are being re-embedded.
    pub running: bool,
    /// Memories handled so far in this run.
    pub done: u64,
    /// Memories that lacked a vector when the run started.
    pub total: u64,
    /// The embedder (`name:dim`) whose vectors were dropped, when the run follows an embedder change.
    pub from: Option<String>,
    /// Why the run stopped early (for example an embedding model failure); it resumes at the next open.
    pub error: Option<String>,
}

impl Progress {
    pub fn status(&self) -> ReembedStatus {
        ReembedStatus {
            running: self.running.load(Ordering::Acquire),
            done: self.done.load(Ordering::Acquire),
            total: self.total.load(Ordering::Acquire),
            from: self.from.lock().clone(),
            error: self.error.lock().clone(),
        }
    }
}

/// What the worker needs from the store.
pub(crate) struct Ctx {
    pub db: Arc<crate::storage::Db>,
    /// The store's write path.
    pub writes: Arc<super::write::Writes>,
    pub index: Arc<RwLock<IndexState>>,
    pub embedder: Arc<dyn Embedder>,
    pub wake_graphs: Arc<dyn Fn() + Send + Sync>,
    /// The change feed (publishes the new vectors; claims the work).
    pub feed: Arc<super::feed::Feed>,
}

/// `(space, docno, memory id)` of every memory without a vector, in file order.
pub(crate) fn missing(index: &IndexState) -> Vec<(String, u64, String)> {
    let mut out = Vec::new();
    for (space, si) in &index.spaces {
        if si.vectors.len() >= si.catalog.len() {
            continue;
        }
        for (docno, meta) in si.catalog.iter() {
            if !si.vectors.contains(docno) {
                out.push((space.clone(), docno, meta.id.clone()));
            }
        }
    }
    out.sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    out
}

/// Starts re-embedding `work` in the background.
pub(crate) fn start(ctx: Ctx, work: Vec<(String, u64, String)>, progress: Arc<Progress>) -> Worker {
    progress.total.store(work.len() as u64, Ordering::Release);
    progress.done.store(0, Ordering::Release);
    progress.running.store(true, Ordering::Release);
    let prog = progress.clone();
    let worker = Worker::spawn("engram-reembed", move |c| {
        // One process re-embeds a shared database; the others receive the vectors through the change feed.
        let claim = match ctx.db.claim("reembed") {
            Ok(Some(claim)) => claim,
            Ok(None) => {
                tracing::info!(
                    "another process is re-embedding this store; its vectors arrive through the change feed"
                );
                prog.running.store(false, Ordering::Release);
                return;
            }
            Err(e) => {
                *prog.error.lock() = Some(e.to_string());
                prog.running.store(false, Ordering::Release);
                return;
            }
        };
        let result = {
            let _claim = claim;
            run(&ctx, &work, &prog, &|| c.stopped())
        };
        if let Err(e) = result {
            tracing::error!(error = %e.chain(), "re-embedding stopped; it resumes at the next open");
            *prog.error.lock() = Some(e.to_string());
        }
        prog.running.store(false, Ordering::Release);
    });
    if worker.not_started() {
        *progress.error.lock() = Some("could not start the re-embedding thread".into());
        progress.running.store(false, Ordering::Release);
    }
    worker
}

fn run(ctx: &Ctx, work: &[(String, u64, String)], prog: &Progress, stopped: &dyn Fn() -> bool) -> Result<()> {
    let total = work.len() as u64;
    let started = Instant::now();
    tracing::info!(
        memories = total,
        embedder = ctx.embedder.name(),
        "re-embedding in the background; vector and hybrid search answer from BM25 until it finishes"
    );
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(total);
        if let Ok(style) =
            indicatif::ProgressStyle::with_template("re-embedding {bar:40} {pos}/{len} memories, {per_sec}, ETA {eta}")
        {
            b.set_style(style);
        }
        b
    });
    let mut last_log = Instant::now();
    for chunk in work.chunks(BATCH) {
        if stopped() {
            if let Some(b) = &bar {
                b.abandon();
            }
            return Ok(());
        }
        // Read the current texts; skip memories that changed or vanished since the work list was made.
        let mut items: Vec<(&str, u64, &str, String)> = Vec::with_capacity(chunk.len());
        {
            let rtx = ctx.db.read()?;
            let mems = memory::memories(&rtx)?;
            for (space, docno, id) in chunk {
                if let Some(v) = mems.get((space.as_str(), id.as_str()))? {
                    let sm: StoredMemory = v;
                    if sm.docno == *docno {
                        items.push((space, *docno, id, sm.memory.index_text()));
                    }
                }
            }
        }
        let texts: Vec<&str> = items.iter().map(|i| i.3.as_str()).collect();
        let vectors = ctx.embedder.embed(&texts, InputType::Document)?;
        let now = Timestamp::now();
        let stored = {
            ctx.writes.write(super::write::Commit::KNOWLEDGE, |txn, _| {
                let mut mems = memory::memories(txn)?;
                let mut vecs = memory::vectors(txn)?;
                let mut stored = Vec::with_capacity(items.len());
                for ((space, docno, id, _), v) in items.iter().zip(vectors) {
                    let current: Option<StoredMemory> = mems.get((*space, *id))?;
                    let Some(mut sm) = current.filter(|sm| sm.docno == *docno) else { continue };
                    let stored_v = Vector::as_stored(&v);
                    vecs.put((*space, *docno), &Vector(v))?;
                    sm.memory.reindex_needed = false;
                    sm.memory.last_reindexed_at = Some(now);
                    mems.put((*space, *id), &sm)?;
                    stored.push((space.to_string(), *docno, stored_v));
                }
                ctx.feed.publish(txn, super::feed::ChangeOut::Vectors(&stored))?;
                Ok(stored)
            })?
        };
        {
            let mut by_space: std::collections::HashMap<String, Vec<(u64, Vec<f32>)>> = Default::default();
            for (space, docno, v) in stored {
                by_space.entry(space).or_default().push((docno, v));
            }
            let mut state = ctx.index.write();
            for (space, mut batch) in by_space {
                if let Some(si) = state.spaces.get_mut(&space) {
                    // A delete applied after our read removed the document: its vector must not come back.
                    batch.retain(|(d, _)| si.catalog.get(*d).is_some() && !si.vectors.contains(*d));
                    si.vectors.insert_batch(&batch);
                }
            }
        }
        (ctx.wake_graphs)();
        let done = prog.done.fetch_add(chunk.len() as u64, Ordering::AcqRel) + chunk.len() as u64;
        if let Some(b) = &bar {
            b.set_position(done);
        } else if last_log.elapsed() >= Duration::from_secs(5) {
            last_log = Instant::now();
            let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
            tracing::info!(done, total, per_sec = rate.round(), "re-embedding");
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    tracing::info!(memories = total, secs = started.elapsed().as_secs_f64(), "re-embedding finished");
    Ok(())
}
