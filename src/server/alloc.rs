//! The daemon's malloc settings.

/// Caps glibc's malloc at one arena per core (its default is eight per core on 64-bit), unless
/// `MALLOC_ARENA_MAX` is set in the environment, which glibc then follows. Call it first in `main`, before
/// threads start. No effect off Linux with glibc, or with feature `mimalloc`.
///
/// Why: each thread that meets a locked arena gets an arena of its own, and memory freed into an arena stays
/// there for that arena's threads. A daemon runs requests on a pool of blocking threads that come and go, so a
/// batch's transient buffers were spread over many arenas. With one arena per core, a daemon loading 20,000
/// MiniLM memories (`benches/compare --n 20000`, 2 cores) peaked at 148-149 MiB instead of 159 MiB, with the
/// same insert rate and search latency (docs/deploy.md, "Memory").
pub fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a malloc parameter; M_ARENA_MAX takes any positive count.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}
