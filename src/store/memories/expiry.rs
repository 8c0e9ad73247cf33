//! Memory expiry: the sweep that forgets memories whose `expires_at` passed more than the grace period ago
//! ([`crate::StoreConfig::expiry_grace`]).
//!
//! An expired memory leaves searches, listings and the context bundle at once (the catalog filter,
//! [`crate::index::catalog::MemoryFilter::include_expired`]) and stays readable by id. After the grace period
//! the sweep moves it to `forgotten` through the ordinary lifecycle move (so the move is logged in its
//! `metadata.lifecycle` like any other). The sweep runs at open and hourly in the daemon; on PostgreSQL one
//! daemon sweeps at a time (a claim).

use std::sync::atomic::Ordering;

use super::Memories;
use super::lifecycle::Transition;
use crate::error::{ErrorKind, Result};
use crate::model::{MemoryState, Timestamp};

/// Expired memories in `store.memories().expiry_status()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ExpiryStatus {
    /// Memories whose `expires_at` has passed and that are not forgotten yet.
    pub expired: u64,
    /// Memories the sweep forgot since the store was opened.
    pub forgotten_by_sweep: u64,
    /// The grace period, in seconds.
    pub grace_s: u64,
}

impl Memories<'_> {
    /// Forgets every memory whose `expires_at` is older than the grace period (one lifecycle move each).
    /// Returns how many it forgot. Memories changed meanwhile (a new expiry, deleted) are skipped.
    ///
    /// # Errors
    /// Storage errors; the memories forgotten before the error stay forgotten.
    pub fn forget_expired(&self) -> Result<u64> {
        let Some(_claim) = self.store.core.db.claim("expiry")? else { return Ok(0) };
        let grace = i64::try_from(self.store.core.config.expiry_grace.as_millis()).unwrap_or(i64::MAX);
        let before = Timestamp(Timestamp::now().0.saturating_sub(grace));
        let mut due: Vec<(String, String, Timestamp)> = Vec::new();
        for space in self.store.core.catalog_spaces()? {
            self.store.core.with_expiring(&space, |catalog| {
                let Some(c) = catalog else { return };
                due.extend(c.expired(before).filter_map(|(at, docno)| {
                    let m = c.get(docno)?;
                    (m.state != MemoryState::Forgotten).then(|| (space.clone(), m.id.clone(), at))
                }));
            })?;
        }
        let mut n = 0;
        for (space, id, at) in due {
            let why = format!("expired at {}; forgotten after the grace period", at.to_rfc3339());
            match self.change_state(&id, Some(&space), Transition::Forget, Some(why)) {
                Ok(c) if c.changed => n += 1,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Conflict) => {}
                Err(e) => return Err(e),
            }
        }
        if n > 0 {
            self.store.expired_forgotten.fetch_add(n, Ordering::AcqRel);
            crate::metrics::global().expiry_forgotten.inc_by(n);
            tracing::info!(forgotten = n, "expired memories forgotten after the grace period");
        }
        Ok(n)
    }

    /// Expired memories not yet forgotten, and what the sweep did since open.
    pub fn expiry_status(&self) -> ExpiryStatus {
        let now = Timestamp::now();
        let count = |c: &crate::index::catalog::SpaceCatalog| {
            c.expired(now).filter(|(_, d)| c.get(*d).is_some_and(|m| m.state != MemoryState::Forgotten)).count() as u64
        };
        let expired = self.store.core.sum_over_expiring(count);
        ExpiryStatus {
            expired,
            forgotten_by_sweep: self.store.expired_forgotten.load(Ordering::Acquire),
            grace_s: self.store.core.config.expiry_grace.as_secs(),
        }
    }
}
