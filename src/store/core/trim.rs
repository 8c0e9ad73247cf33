//! Gives the heap's free memory back to the system.

/// Returns the free pages of every malloc arena to the system (glibc's `malloc_trim(0)`), at most once per
/// second in the process; a no-op elsewhere. Called by the HNSW builder between pieces of work and while it waits.
///
/// Why: glibc keeps memory freed inside an arena for later use, and trims only the top of the main heap. A
/// bulk load frees a batch's transient buffers (texts, postings, vectors, B-tree pages) all over several
/// arenas, and the pending vectors' chunks as the graph takes them, so a store of 200,000 memories held
/// 878 MiB from the system with 492 MiB of it in use (benches/synthetic.rs, 2026-12-06). Trimming returns the
/// free pages (`madvise`) without moving anything; a later allocation takes them back with a page fault.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::time::{Duration, Instant};
        /// Shortest time between two trims.
        const EVERY: Duration = Duration::from_secs(1);
        static LAST: AtomicU64 = AtomicU64::new(0);
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let now = EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + EVERY.as_millis() as u64;
        let last = LAST.load(Ordering::Relaxed);
        if now < last + EVERY.as_millis() as u64
            || LAST.compare_exchange(last, now, Ordering::AcqRel, Ordering::Relaxed).is_err()
        {
            return;
        }
        // SAFETY: malloc_trim only returns free pages; no pointer the program holds is affected.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}
