//! The search threads: a pool of its own beside the calling thread, for the two halves of large searches.

/// The threads that run part of a large search beside the calling thread: the vector ranking of a hybrid search
/// over a space of [`PARALLEL_MIN_DOCS`] memories or more, and their share of the parts of a BM25 query over long
/// posting lists ([`bm25::SplitQuery`]). One thread fewer than rayon's default (`RAYON_NUM_THREADS`, else
/// the machine's cores), since the calling thread does the other half; named `engram-search-N` and started on
/// first use. `None` on one core, or when the threads could not be started: searches then run on the calling
/// thread alone. It is not rayon's global pool, so that a search never waits behind the parallel work of an
/// ingest batch or an HNSW build.
struct SearchPool {
    pool: rayon::ThreadPool,
    /// Jobs handed to the pool by [`fork`] and not yet finished.
    busy: std::sync::atomic::AtomicUsize,
}

fn search_pool() -> Option<&'static SearchPool> {
    static POOL: std::sync::OnceLock<Option<SearchPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let threads = rayon::current_num_threads().saturating_sub(1);
        if threads == 0 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("engram-search-{i}"))
            .build()
            .map_err(|e| tracing::warn!("search threads not started, searches run on one thread: {e}"))
            .ok()
            .map(|pool| SearchPool { pool, busy: std::sync::atomic::AtomicUsize::new(0) })
    })
    .as_ref()
}

thread_local! {
    /// Whether this thread is running the `here` half of a [`fork`] whose other half holds a pool thread.
    static FORKING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `here` on this thread and `there` beside it on the search pool, and returns both results; `None`, having
/// run neither, when the pool is missing or each of its threads already has a half to run (a daemon under load:
/// another thread would only take turns with a busy one), and the caller then runs its work on this thread alone.
/// A fork inside `here` of another fork is never refused: its `there` waits for the pool thread the outer fork
/// holds (a hybrid search's BM25 parts, taken up by the pool's thread once the vector ranking is done), which this
/// thread waits for anyway. `there` runs here too when no pool thread has taken it up by the time `here` is done
/// (a sleeping thread can take longer to wake than the work takes).
pub(super) fn fork<A, B: Send + Default>(here: impl FnOnce() -> A, there: impl FnOnce() -> B + Send) -> Option<(A, B)> {
    use std::sync::atomic::Ordering;
    let sp = search_pool()?;
    let nested = FORKING.get();
    if sp.busy.fetch_add(1, Ordering::AcqRel) >= sp.pool.current_num_threads() && !nested {
        sp.busy.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    let job = parking_lot::Mutex::new(Some(there));
    let mut theirs = None;
    let (mine, here_too) = sp.pool.in_place_scope(|s| {
        s.spawn(|_| {
            if let Some(f) = job.lock().take() {
                theirs = Some(f());
            }
        });
        FORKING.set(true);
        let mine = here();
        FORKING.set(nested);
        let claimed = job.lock().take();
        (mine, claimed.map(|f| f()))
    });
    sp.busy.fetch_sub(1, Ordering::AcqRel);
    // The job is taken exactly once, here or by the pool, and the scope waited for the pool: one is set.
    Some((mine, here_too.or(theirs).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::{fork, search_pool};
    use std::sync::atomic::Ordering;

    /// Both halves' results come back in place, whether the pool or this thread ran the second half: nested
    /// (a hybrid search's BM25 split inside its rankings' fork) and from many threads at once (a daemon under
    /// load, where most forks find the pool busy and are refused), and the pool's busy count returns to zero.
    #[test]
    fn fork_returns_both_halves_nested_and_under_load() {
        let work = |seed: u64| (0..20_000u64).fold(seed, |a, x| a.wrapping_mul(31).wrapping_add(x));
        let Some(sp) = search_pool() else { return }; // one core: nothing to fork to
        assert_eq!(fork(|| work(1), || work(2)), Some((work(1), work(2))));
        // Nested: the inner fork is not refused, though the outer one holds the pool's only thread on two cores.
        let (outer, inner) = fork(|| fork(|| work(3), || vec![work(4)]), || vec![work(5)]).expect("a free thread");
        assert_eq!(outer, Some((work(3), vec![work(4)])));
        assert_eq!(inner, vec![work(5)]);
        std::thread::scope(|s| {
            let runs: Vec<_> = (0..8u64)
                .map(|t| {
                    s.spawn(move || {
                        let alone = |i: u64| (work(t * 100 + i), work(i));
                        (0..50u64)
                            .map(|i| fork(|| work(t * 100 + i), || work(i)).unwrap_or_else(|| alone(i)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for (t, run) in runs.into_iter().enumerate() {
                let got = run.join().expect("a forking thread");
                let want: Vec<_> = (0..50u64).map(|i| (work(t as u64 * 100 + i), work(i))).collect();
                assert_eq!(got, want);
            }
        });
        assert_eq!(sp.busy.load(Ordering::Acquire), 0);
        assert_eq!(sp.pool.current_num_threads(), rayon::current_num_threads() - 1);
    }
}
