//! The loaders that fill the derived indexes from the database: the catalog and BM25 lexicon of every space
//! (or the index snapshot), the vectors with their saved HNSW graphs, and beside them the memory PageRank table
//! ([`super::ranks`]).

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

use super::graph_files::GraphFiles;
use super::indexes::{IndexState, SpaceIndex};
use super::ranks::{GraphState, load_graph_state};
use crate::error::Result;
use crate::index::catalog::DocMeta;
use crate::storage::Db;
use crate::store::records::{StoredMemory, label, memory, meta, space};

/// Builds the catalog and BM25 lexicon of every space from the memory records, labels and postings.
fn load_lexical(
    rtx: &crate::storage::ReadTx,
    state: &mut IndexState,
    new_space_index: &dyn Fn() -> SpaceIndex,
) -> Result<()> {
    let started = Instant::now();
    let lap = |phase: &str| tracing::debug!(phase, ms = started.elapsed().as_secs_f64() * 1000.0, "index load");
    let mut labels = label::labels_by_memory(rtx)?;
    memory::memories(rtx)?.each(|space, id, sm: StoredMemory| {
        let l = labels.remove(&(space.to_string(), id.to_string())).unwrap_or_default();
        let si = state.spaces.entry(space.to_string()).or_insert_with(new_space_index);
        si.catalog.insert(sm.docno, DocMeta::of(&sm.memory, l));
        true
    })?;
    lap("catalog");
    memory::each_posting(rtx, |space, term, docno, packed| {
        if let Some(si) = state.spaces.get_mut(space) {
            si.lexicon.load(term, crate::index::bm25::Posting::unpack(docno, packed));
        }
    })?;
    memory::each_lex_stats(rtx, |space, stats| {
        if let Some(si) = state.spaces.get_mut(space) {
            (si.lexicon.docs, si.lexicon.total_len) = stats;
        }
    })?;
    lap("postings");
    for si in state.spaces.values_mut() {
        si.lexicon.finish_load();
    }
    lap("lexicon sorted");
    Ok(())
}

/// Runs `load` with, as its `extra` work ([`load_index_state`]), the read of the memory PageRank table
/// ([`load_graph_state`]), and returns both: the table is read beside the load, or after it when
/// the load did not run it.
///
/// # Errors
/// `load`'s errors; storage errors reading the table.
pub(crate) fn with_graph_state<T>(
    db: &Db,
    load: impl FnOnce(&(dyn Fn() + Sync)) -> Result<T>,
) -> Result<(T, GraphState)> {
    let graph = Mutex::new(None);
    let out = load(&|| *graph.lock() = Some(load_graph_state(db, true)))?;
    let graph = graph.into_inner().unwrap_or_else(|| load_graph_state(db, true))?;
    Ok((out, graph))
}

/// The catalog, BM25 and vector indexes of every space, read in one database snapshot (the catalog and lexicon
/// from the index snapshot file `snapshot` when it matches, [`super::snapshot`]), and the change-feed `seq` of
/// that database snapshot (0 on a redb file).
///
/// The load has two sides that run at once: the graphs and vectors, and the catalog and lexicon. `extra` (the
/// caller's other work: the PageRank table) runs once, on whichever side finishes first, so that on two cores
/// the largest two jobs start at once and the smallest follows the one that ends first (longest processing
/// time first, Graham 1969). Neither fixed order balances every store: at 1,000,000 memories the vectors take
/// about 3 s, the catalog and lexicon 1.3 s for plain memories but about 4 s in threads, whose expanded
/// postings are three times the lexicon. It does not run when the load fails before either side ends.
#[allow(clippy::too_many_arguments)]
pub(crate) fn load_index_state(
    db: &Db,
    dim: usize,
    vector: crate::index::vector::VectorParams,
    context_window: usize,
    graph_files: &GraphFiles,
    snapshot: Option<&std::path::Path>,
    extra: &(dyn Fn() + Sync),
) -> Result<(IndexState, u64)> {
    let new_space_index = || SpaceIndex::empty(dim, vector, context_window);
    let started = Instant::now();
    let lap = |phase: &str| tracing::debug!(phase, ms = started.elapsed().as_secs_f64() * 1000.0, "index load");
    let rtx = db.read()?;
    let head = rtx.change_head()?;
    // A daemon's own snapshot on a shared database is used when the feed still holds every entry after it.
    let pruned = if db.shared() && snapshot.is_some_and(std::path::Path::exists) {
        db.changes_since(head, 0)?.pruned
    } else {
        0
    };
    let names = space::ids(&rtx)?;
    let fresh = || -> HashMap<String, SpaceIndex> { names.iter().map(|n| (n.clone(), new_space_index())).collect() };
    // The catalog and lexicon on one side, the graphs and vectors on the other: independent until the
    // vectors are checked against the catalog below (on PostgreSQL both sides read one snapshot, in turn).
    let started_extra = std::sync::atomic::AtomicBool::new(false);
    let then_extra = || {
        if !started_extra.swap(true, std::sync::atomic::Ordering::AcqRel) {
            extra();
            lap("extra");
        }
    };
    let (vectors, lexical) = rayon::join(
        || {
            let vectors = load_vectors(db, &rtx, fresh(), dim, graph_files, &new_space_index, &lap);
            then_extra();
            vectors
        },
        || -> Result<(HashMap<String, SpaceIndex>, Option<u64>)> {
            let mut state = IndexState { spaces: fresh() };
            let (saved, position) = match snapshot {
                Some(file) if !db.shared() => {
                    let token = meta::meta(&rtx)?.u64(meta::INDEX_SNAPSHOT)?;
                    (super::snapshot::load(file, token, &graph_files.side), None)
                }
                Some(file) => match super::snapshot::load_shared(file, pruned, head) {
                    Some((spaces, position)) => (Some(spaces), Some(position)),
                    None => (None, None),
                },
                None => (None, None),
            };
            if let Some(spaces) = saved {
                for s in spaces {
                    let si = state.spaces.entry(s.name).or_insert_with(new_space_index);
                    (si.catalog, si.lexicon) = (s.catalog, s.lexicon);
                    // Kept only for the window this store is opened with; otherwise built below.
                    si.expanded = s.expanded.filter(|x| x.window() == context_window);
                }
                lap("snapshot");
            } else {
                load_lexical(&rtx, &mut state, &new_space_index)?;
            }
            for si in state.spaces.values_mut() {
                si.refresh_expanded();
            }
            lap("expanded postings");
            then_extra();
            Ok((state.spaces, position))
        },
    );
    let (spaces, position) = lexical?;
    let mut state = IndexState { spaces };
    for (name, (vsi, loaded)) in vectors? {
        let Some(si) = state.spaces.get_mut(&name) else { continue };
        si.vectors = vsi.vectors;
        for docno in loaded.into_iter().filter(|d| si.catalog.get(*d).is_none()) {
            si.vectors.remove(docno);
        }
    }
    lap("joined");
    // From a daemon's snapshot, the catalog and lexicon are at its position: the caller catches up from there
    // (the vectors, read at `head`, take the same entries again: each sets or removes one vector, so applying
    // them to a later state ends in the same one).
    Ok((state, position.unwrap_or(head)))
}

/// The vectors of every space (`spaces`, more if the table holds others), with their saved graphs attached, and
/// the document numbers loaded per space.
fn load_vectors(
    db: &Db,
    rtx: &crate::storage::ReadTx,
    mut spaces: HashMap<String, SpaceIndex>,
    dim: usize,
    graph_files: &GraphFiles,
    new_space_index: &dyn Fn() -> SpaceIndex,
    lap: &dyn Fn(&str),
) -> Result<HashMap<String, (SpaceIndex, Vec<u64>)>> {
    // Saved graphs first, so that each vector is read straight into its graph or the arena: one copy.
    graph_files.stage_all(db, &mut spaces);
    lap("graphs staged");
    let mut loaded: HashMap<String, Vec<u64>> = HashMap::new();
    // On an encrypted store, a read-ahead of the rows the scan reads next (their pages decrypted into the page
    // cache) waits for a free core: the catalog side's, once it is done.
    let scan = memory::VectorScan::default();
    let read_ahead = graph_files.side.sealed().then(|| db.read().ok()).flatten();
    let mut scanned = Ok(());
    rayon::in_place_scope(|s| {
        if let Some(ahead) = &read_ahead {
            let scan = &scan;
            s.spawn(move |_| {
                memory::read_vectors_ahead(ahead, scan, READ_AHEAD_ROWS);
            });
        }
        // The scan reports its position only when a read-ahead follows it.
        let follow = read_ahead.is_some().then_some(&scan);
        scanned = scan_vectors(rtx, follow, dim, new_space_index, &mut spaces, &mut loaded);
        scan.finish();
    });
    scanned?;
    lap("vectors");
    graph_files.finish_all(&mut spaces);
    lap("graphs attached");
    Ok(spaces
        .into_iter()
        .map(|(n, si)| {
            let l = loaded.remove(&n).unwrap_or_default();
            (n, (si, l))
        })
        .collect())
}

/// How far (in vector records, about 770 bytes each at 256 dimensions) the read-ahead of an encrypted store's
/// vectors runs ahead of the scan: 8,192 rows, about 6 MB of pages, well inside the page cache.
const READ_AHEAD_ROWS: u64 = 8192;

/// Reads every stored vector into its space's index (`spaces`, a new one for a space not in it), straight into
/// its graph slot or the arena (no allocation per vector), recording each document number read in `loaded`
/// and each row in `scan` (when a read-ahead follows it).
///
/// # Errors
/// Storage errors.
fn scan_vectors(
    rtx: &crate::storage::ReadTx,
    scan: Option<&memory::VectorScan>,
    dim: usize,
    new_space_index: &dyn Fn() -> SpaceIndex,
    spaces: &mut HashMap<String, SpaceIndex>,
    loaded: &mut HashMap<String, Vec<u64>>,
) -> Result<()> {
    let mut current: Option<(String, SpaceIndex, Vec<u64>)> = None;
    memory::each_vector(rtx, |space, docno, v| {
        if let Some(scan) = scan {
            scan.passed(space, docno);
        }
        if current.as_ref().is_none_or(|(s, _, _)| s != space) {
            if let Some((s, si, l)) = current.take() {
                spaces.insert(s.clone(), si);
                loaded.insert(s, l);
            }
            let si = spaces.remove(space).unwrap_or_else(new_space_index);
            let l = loaded.remove(space).unwrap_or_default();
            current = Some((space.to_string(), si, l));
        }
        let Some((_, si, l)) = current.as_mut() else { return };
        let mut read = false;
        si.vectors.insert_loaded(docno, |slot| {
            read = slot.len() == dim && v.decode_into(slot);
            read
        });
        if read {
            l.push(docno);
        }
    })?;
    if let Some((s, si, l)) = current.take() {
        spaces.insert(s.clone(), si);
        loaded.insert(s, l);
    }
    Ok(())
}
