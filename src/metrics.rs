//! Process-wide Prometheus metrics: the instruments the library and the daemon record into (atomics; a few
//! nanoseconds each), and the encoder `GET /metrics` answers with, in the OpenMetrics 1.0 text format
//! (<https://prometheus.io/docs/specs/om/open_metrics_spec/>), which Prometheus scrapes natively.
//!
//! Label values are fixed sets only: route templates (`/memories/{memory_id}`, never the raw path), methods,
//! status classes (`2xx`), search modes, fallback names. No memory text, query text or id ever becomes a label,
//! so the series count is bounded (about 130 routes × 5 methods × 5 classes at most).
//!
//! Gauges that describe a store (memories, HNSW backlog, file size) and the process (RSS, descriptors) are read
//! when a scrape arrives ([`Gauges`]), not kept up to date by every write.
//!
//! Units follow Prometheus' conventions: seconds and bytes, counters end in `_total`. The names are in
//! `docs/operations.md`.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Labels of an HTTP request: the route template, the method and the status class.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The route template of the route table (`/memories/{memory_id}`), or a fixed name for the paths outside
    /// it (`/mcp`, `/ui/*`, `/sync/peer/*`, `unmatched`).
    pub route: &'static str,
    /// The method, upper case; `OTHER` for methods outside the standard ones.
    pub method: &'static str,
    /// `1xx` to `5xx`.
    pub status: &'static str,
}

/// Labels of a search: its mode.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModeLabels {
    /// `hybrid`, `lexical` or `vector`: the mode that ran (after any fallback).
    pub mode: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The instruments of the process. One per process ([`global`]); every store of the process records into it.
pub struct Metrics {
    registry: Registry,
    /// HTTP requests answered, by route template, method and status class.
    pub http_requests: Family<HttpLabels, Counter>,
    /// Time from the request's arrival to its response's headers, seconds; same labels.
    pub http_duration: Histograms<HttpLabels>,
    /// Searches run, by mode (seconds from the call to its hits).
    pub search_duration: Histograms<ModeLabels>,
    /// Candidates scored per search, by mode.
    pub search_candidates: Histograms<ModeLabels>,
    /// Searches that ran in another mode than asked (a store without vectors for its embedder searches
    /// lexically), by the mode that ran.
    pub search_fallbacks: Family<ModeLabels, Counter>,
    /// Write transactions committed.
    pub writes: Counter,
    /// Time a write transaction held the writer lock (its body and its commit), seconds.
    pub write_duration: Histogram,
    /// Time a write waited for the writer lock, seconds.
    pub writer_lock_wait: Histogram,
    /// Time the memory graph's recomputation (entities, communities, PageRank) took, seconds.
    pub graph_recompute: Histogram,
    /// Memories forgotten by expiry sweeps.
    pub expiry_forgotten: Counter,
    /// Time a PostgreSQL connection took to come out of the pool, seconds.
    pub pg_pool_wait: Histogram,
    /// Online backups written, and the time each took (seconds).
    pub backup_duration: Histogram,
    /// Online backups that failed.
    pub backup_failures: Counter,
}

fn latency() -> Histogram {
    // 100 µs to about 6.5 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

fn counts() -> Histogram {
    // 1 to 65,536.
    Histogram::new(exponential_buckets(1.0, 2.0, 17))
}

fn slow() -> Histogram {
    // 10 ms to about 11 minutes.
    Histogram::new(exponential_buckets(0.01, 2.0, 17))
}

impl Metrics {
    fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("engram"),
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            search_duration: Family::new_with_constructor(latency as fn() -> Histogram),
            search_candidates: Family::new_with_constructor(counts as fn() -> Histogram),
            search_fallbacks: Family::default(),
            writes: Counter::default(),
            write_duration: latency(),
            writer_lock_wait: latency(),
            graph_recompute: slow(),
            expiry_forgotten: Counter::default(),
            pg_pool_wait: latency(),
            backup_duration: slow(),
            backup_failures: Counter::default(),
        };
        let r = &mut m.registry;
        r.register("http_requests", "HTTP requests answered", m.http_requests.clone());
        r.register_with_unit(
            "http_request_duration",
            "Time to answer an HTTP request",
            Unit::Seconds,
            m.http_duration.clone(),
        );
        r.register_with_unit("search_duration", "Time a search took", Unit::Seconds, m.search_duration.clone());
        r.register("search_candidates", "Candidates scored per search", m.search_candidates.clone());
        r.register("search_fallbacks", "Searches that ran in another mode than asked", m.search_fallbacks.clone());
        r.register("write_transactions", "Write transactions committed", m.writes.clone());
        r.register_with_unit(
            "write_transaction_duration",
            "Time a write transaction held the writer lock",
            Unit::Seconds,
            m.write_duration.clone(),
        );
        r.register_with_unit(
            "writer_lock_wait",
            "Time a write waited for the writer lock",
            Unit::Seconds,
            m.writer_lock_wait.clone(),
        );
        r.register_with_unit(
            "graph_recompute_duration",
            "Time a recomputation of the memory graph took",
            Unit::Seconds,
            m.graph_recompute.clone(),
        );
        r.register("expiry_forgotten_memories", "Memories forgotten by expiry sweeps", m.expiry_forgotten.clone());
        r.register_with_unit(
            "postgres_pool_wait",
            "Time a PostgreSQL connection took to come out of the pool",
            Unit::Seconds,
            m.pg_pool_wait.clone(),
        );
        r.register_with_unit("backup_duration", "Time an online backup took", Unit::Seconds, m.backup_duration.clone());
        r.register("backup_failures", "Online backups that failed", m.backup_failures.clone());
        m
    }

    /// The OpenMetrics text of every instrument and of `gauges`, ending in `# EOF`.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::with_capacity(16 << 10);
        let mut g = Registry::with_prefix("engram");
        gauges.register(&mut g);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry);
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &g);
        let mut process = Registry::with_prefix("process");
        gauges.register_process(&mut process);
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &process);
        let _ = prometheus_client::encoding::text::encode_eof(&mut out);
        out
    }
}

/// The process's instruments.
pub fn global() -> &'static Metrics {
    static M: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &M
}

/// Seconds of `d`, as histograms take them.
pub fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The status class of an HTTP status: `2xx`, ...
pub fn status_class(status: u16) -> &'static str {
    match status / 100 {
        1 => "1xx",
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    }
}

/// A method as a label: the standard ones by name, anything else `OTHER`.
pub fn method_label(method: &str) -> &'static str {
    const KNOWN: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
    KNOWN.into_iter().find(|m| m.eq_ignore_ascii_case(method)).unwrap_or("OTHER")
}

/// Values read when a scrape arrives: the store's state and the process's. A value that cannot be read here
/// (no `/proc` outside Linux, a PostgreSQL store without a feed lag) is `None` and left out.
#[derive(Debug, Clone, Default)]
pub struct Gauges {
    /// Live memories.
    pub memories: Option<u64>,
    /// Spaces.
    pub spaces: Option<u64>,
    /// The store's generation (bumped by every change of knowledge).
    pub generation: Option<u64>,
    /// Vectors held, all spaces.
    pub vectors: Option<u64>,
    /// Vectors written but not yet in an HNSW graph (searched exactly meanwhile).
    pub hnsw_pending: Option<u64>,
    /// Deleted vectors still in the HNSW graphs.
    pub hnsw_tombstones: Option<u64>,
    /// Memories still to re-embed with the configured embedder.
    pub reembed_backlog: Option<u64>,
    /// Memories whose expiry has passed and which a sweep has not forgotten yet.
    pub expired_pending: Option<u64>,
    /// Generations the memory graph (entities, communities, PageRank) trails the store by.
    pub graph_lag_generations: Option<u64>,
    /// Bytes of the store file (a redb store).
    pub store_file_bytes: Option<u64>,
    /// Change-feed entries this daemon has not applied yet (a PostgreSQL store).
    pub feed_lag_entries: Option<u64>,
    /// Local changes not yet written to the sync folder (a store in a sync group).
    pub sync_pending_changes: Option<u64>,
    /// Seconds since the store opened.
    pub uptime_seconds: Option<f64>,
}

impl Gauges {
    fn register(&self, r: &mut Registry) {
        let items: [(&str, &str, Option<u64>); 12] = [
            ("memories", "Live memories", self.memories),
            ("spaces", "Spaces", self.spaces),
            ("store_generation", "The store's generation", self.generation),
            ("vectors", "Vectors held in the vector indexes", self.vectors),
            ("hnsw_pending_vectors", "Vectors not yet in an HNSW graph", self.hnsw_pending),
            ("hnsw_tombstones", "Deleted vectors still in the HNSW graphs", self.hnsw_tombstones),
            ("reembed_backlog", "Memories still to re-embed", self.reembed_backlog),
            ("expired_pending_memories", "Expired memories not yet forgotten", self.expired_pending),
            ("graph_lag_generations", "Generations the memory graph trails the store by", self.graph_lag_generations),
            ("store_file_bytes", "Bytes of the store file", self.store_file_bytes),
            ("postgres_feed_lag_entries", "Change-feed entries not yet applied here", self.feed_lag_entries),
            ("sync_pending_changes", "Local changes not yet written for sync", self.sync_pending_changes),
        ];
        for (name, help, v) in items {
            if let Some(v) = v {
                let g: Gauge<i64> = Gauge::default();
                g.set(i64::try_from(v).unwrap_or(i64::MAX));
                r.register(name, help, g);
            }
        }
        if let Some(s) = self.uptime_seconds {
            let g: Gauge<f64, std::sync::atomic::AtomicU64> = Gauge::default();
            g.set(s);
            r.register_with_unit("uptime", "Seconds since the store opened", Unit::Seconds, g);
        }
    }

    /// The standard process metrics (`process_resident_memory_bytes`, `process_open_fds`,
    /// `process_start_time_seconds`), from `/proc/self` on Linux.
    fn register_process(&self, r: &mut Registry) {
        let p = process();
        if let Some(rss) = p.rss_bytes {
            let g: Gauge<i64> = Gauge::default();
            g.set(i64::try_from(rss).unwrap_or(i64::MAX));
            r.register_with_unit("resident_memory", "Resident memory", Unit::Bytes, g);
        }
        if let Some(fds) = p.open_fds {
            let g: Gauge<i64> = Gauge::default();
            g.set(i64::try_from(fds).unwrap_or(i64::MAX));
            r.register("open_fds", "Open file descriptors", g);
        }
        let g: Gauge<f64, std::sync::atomic::AtomicU64> = Gauge::default();
        g.set(*START_TIME);
        r.register_with_unit("start_time", "Start of the process, Unix time", Unit::Seconds, g);
    }
}

static START_TIME: LazyLock<f64> =
    LazyLock::new(|| std::time::SystemTime::UNIX_EPOCH.elapsed().map(|d| d.as_secs_f64()).unwrap_or(0.0));

/// Marks the process start for `process_start_time_seconds` (call early in `main`; otherwise the first
/// scrape's time is used).
pub fn mark_start() {
    LazyLock::force(&START_TIME);
}

struct Process {
    rss_bytes: Option<u64>,
    open_fds: Option<u64>,
}

#[cfg(target_os = "linux")]
fn process() -> Process {
    // `VmRSS:  12345 kB` (kibibytes whatever the page size).
    let rss_bytes = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib * 1024)
    });
    let open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64);
    Process { rss_bytes, open_fds }
}

#[cfg(not(target_os = "linux"))]
fn process() -> Process {
    Process { rss_bytes: None, open_fds: None }
}
