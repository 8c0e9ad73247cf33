//! Helpers shared by the bench binaries: command-line numbers, the seeded generator, memory figures.
#![allow(dead_code)]

#[path = "../../tests/common/splitmix.rs"]
mod splitmix;
#[allow(unused_imports)]
pub use splitmix::SplitMix;

/// The number after `name` in `args`, or `default`.
pub fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A `/proc/self/status` figure in MiB (`VmRSS` now, `VmHWM` the peak); 0 where there is none.
fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Resident memory now, MiB.
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

/// Peak resident memory, MiB.
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}
