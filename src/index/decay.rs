//! Memory decay: how much a memory's recency of use should count in ranking.
//!
//! A half-life (exponential forgetting) model in the spirit of ACT-R's base-level activation (Anderson and
//! Lebiere, *The Atomic Components of Thought*, 1998) and of the spacing effect: every read by id makes the
//! memory fade more slowly, and importance sets a floor it never falls below.
//!
//! ```text
//! age_days  = (now - max(created_at, last_accessed_at)) / 86,400,000 ms
//! half_life = 30 days x (1 + ln(1 + access_count))
//! retention = 2^(-age_days / half_life)                      in (0, 1]
//! floor     = 0.5 x importance                               in [0, 0.5]
//! decay     = floor + (1 - floor) x retention                in [floor, 1]
//! ```
//!
//! A fresh memory scores 1. Unread for 30 days with importance 0.5 it scores 0.625; after 10 reads its
//! half-life is 102 days and it scores 0.86 at the same age. Search multiplies the fused score by
//! `1 - w + w x decay` with `w` = [`crate::StoreConfig::decay_weight`] (default 0.1), so decay reorders
//! near-ties and never hides a memory.

use crate::model::Timestamp;

/// Half-life of a memory never read by id, in days.
pub const BASE_HALF_LIFE_DAYS: f64 = 30.0;
/// The floor is this share of the importance.
pub const IMPORTANCE_FLOOR: f64 = 0.5;
const DAY_MS: f64 = 86_400_000.0;

/// The decay score in `[0.5 x importance, 1]` of a memory last used (created or read) at `last_used`, read
/// `access_count` times, with `importance` in 0..=1, at time `now`. Times in the future count as now.
pub fn decay_score(importance: f64, access_count: i64, last_used: Timestamp, now: Timestamp) -> f64 {
    let age_days = ((now.millis() - last_used.millis()).max(0) as f64) / DAY_MS;
    let half_life = BASE_HALF_LIFE_DAYS * (1.0 + (1.0 + access_count.max(0) as f64).ln());
    let retention = (-age_days / half_life).exp2();
    let floor = IMPORTANCE_FLOOR * importance.clamp(0.0, 1.0);
    floor + (1.0 - floor) * retention
}

/// The ranking multiplier `1 - weight + weight x decay`, in `[1 - weight, 1]`.
pub fn ranking_factor(weight: f32, decay: f64) -> f32 {
    let w = weight.clamp(0.0, 1.0);
    1.0 - w + w * decay as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_values_hold() {
        let t0 = Timestamp(0);
        let day = 86_400_000;
        assert!((decay_score(0.5, 0, t0, t0) - 1.0).abs() < 1e-12);
        assert!((decay_score(0.5, 0, t0, Timestamp(30 * day)) - 0.625).abs() < 1e-9);
        let read10 = decay_score(0.5, 10, t0, Timestamp(30 * day));
        assert!((read10 - 0.8616).abs() < 1e-3, "{read10}");
        // The floor holds however old the memory is.
        let ancient = decay_score(1.0, 0, t0, Timestamp(100_000 * day));
        assert!((ancient - 0.5).abs() < 1e-9);
        assert_eq!(decay_score(0.0, 0, t0, Timestamp(100_000 * day)), 0.0);
        // A last use in the future counts as now.
        assert_eq!(decay_score(0.3, 0, Timestamp(day), t0), 1.0);
        assert!((ranking_factor(0.1, 0.5) - 0.95).abs() < 1e-6);
    }
}
