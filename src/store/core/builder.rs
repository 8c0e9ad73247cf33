//! The HNSW builder: a background thread that builds and catches up the vector graphs of every space, off the
//! write and search paths, and saves them ([`super::graph_files`]).

use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;

use super::indexes::IndexState;
use super::{graph_files, trim, worker};
use crate::index::vector::{Graph, GraphWork};

/// Starts the background thread that builds and catches up HNSW graphs, off the write and search paths.
///
/// Between chunks of 1,024 points the builder waits while a batch of memories is being written (`batches`, see
/// [`super::indexes::Running`]), at most [`BUILD_YIELD`] per chunk: a bulk ingest then has every core, and the graph catches
/// up in the pauses between batches and after the last one (searches meanwhile scan the vectors not yet in the
/// graph exactly). Under constant writes the build still goes on, a chunk per [`BUILD_YIELD`] at least. During
/// a bulk load ([`Admin::bulk_load`](crate::store::Admin::bulk_load), `bulk_loads`) it waits until the load ends, as pgvector's index
/// is built after the load: the load has the cores, and the graph is built once over all its vectors.
pub(crate) fn start_graph_builder(
    index: Arc<RwLock<IndexState>>,
    vector: crate::index::vector::VectorParams,
    db: Arc<crate::storage::Db>,
    files: graph_files::GraphFiles,
    batches: Arc<std::sync::atomic::AtomicUsize>,
    bulk_loads: Arc<std::sync::atomic::AtomicUsize>,
) -> worker::Worker {
    worker::Worker::spawn("engram-graph", move |c| {
        let loading = || bulk_loads.load(std::sync::atomic::Ordering::Acquire) > 0;
        // Checked between chunks: waits while a batch is written or a bulk load runs, and says whether to stop.
        let between_chunks = || {
            let since = Instant::now();
            while (loading() || batches.load(std::sync::atomic::Ordering::Acquire) > 0 && since.elapsed() < BUILD_YIELD)
                && !c.stopped()
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
                trim::release_free_memory();
            }
            trim::release_free_memory();
            c.stopped()
        };
        while !c.stopped() {
            trim::release_free_memory();
            // Before planning: a plan marks its graphs as being built.
            if loading() {
                c.wait(std::time::Duration::from_millis(500));
                continue;
            }
            let work: Vec<(String, GraphWork)> = {
                let state = index.read();
                state.spaces.iter().filter_map(|(n, si)| si.vectors.plan().map(|w| (n.clone(), w))).collect()
            };
            if work.is_empty() {
                c.wait(std::time::Duration::from_millis(500));
                continue;
            }
            for (space, w) in work {
                match w {
                    GraphWork::Build(snapshot) => {
                        let started = Instant::now();
                        let ids = snapshot.docnos.clone();
                        let built = Graph::build(vector, snapshot, &between_chunks);
                        let mut state = index.write();
                        let Some(si) = state.spaces.get_mut(&space) else { continue };
                        match built {
                            Some(g) => {
                                si.vectors.install(g, &ids);
                                tracing::info!(
                                    space,
                                    points = ids.len(),
                                    secs = started.elapsed().as_secs_f64(),
                                    "HNSW graph built"
                                );
                            }
                            None => {
                                si.vectors.abandon();
                                continue;
                            }
                        }
                        // Saved after every full build, under a read lock (searches go on).
                        let state = parking_lot::RwLockWriteGuard::downgrade(state);
                        if let Some(si) = state.spaces.get(&space) {
                            files.save(&db, &space, si);
                        }
                    }
                    GraphWork::Insert(g, items) => {
                        // Never inside the insert: it holds the graph's write lock, which searches wait for.
                        if between_chunks() {
                            break;
                        }
                        // Linked beside searches; between chunks of 1,024 points it yields to batch writes as a
                        // build does.
                        let points = g.insert(&items, &|| {
                            between_chunks();
                        });
                        let ids: Vec<(u64, u32)> = items.docnos.iter().copied().zip(points).collect();
                        if let Some(si) = index.write().spaces.get_mut(&space) {
                            si.vectors.mark_inserted(&g, &ids);
                        }
                    }
                }
            }
        }
    })
}

/// Longest wait of the HNSW builder for batch writes, per chunk of points ([`start_graph_builder`]).
pub(crate) const BUILD_YIELD: std::time::Duration = std::time::Duration::from_secs(1);
