//! The lockout of addresses that present wrong keys: [`LOCKOUT_FAILURES`] failures within [`LOCKOUT_WINDOW`]
//! block an address for [`LOCKOUT_BLOCK`] (429 with `Retry-After`), as the reference product does.

/// Recent failure times of one address, and the end of its block.
type Failures = (Vec<std::time::Instant>, Option<std::time::Instant>);

/// Failed-key bookkeeping per client address: `failures` (8 by default) within 5 minutes block the address for
/// 10 minutes; 0 failures turns the lockout off.
pub(super) struct Lockout {
    by_addr: parking_lot::Mutex<std::collections::HashMap<std::net::IpAddr, Failures>>,
    failures: usize,
}

impl Default for Lockout {
    fn default() -> Self {
        Lockout::new(LOCKOUT_FAILURES)
    }
}

/// Failures that trigger a block.
pub const LOCKOUT_FAILURES: usize = 8;
/// Window the failures are counted in.
pub const LOCKOUT_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);
/// How long a block lasts.
pub const LOCKOUT_BLOCK: std::time::Duration = std::time::Duration::from_secs(600);

impl Lockout {
    pub(super) fn new(failures: usize) -> Lockout {
        Lockout { by_addr: Default::default(), failures }
    }

    /// Seconds left of a block on `ip`, if blocked.
    pub(super) fn blocked(&self, ip: std::net::IpAddr) -> Option<u64> {
        let now = std::time::Instant::now();
        let map = self.by_addr.lock();
        let until = map.get(&ip)?.1?;
        (until > now).then(|| (until - now).as_secs().max(1))
    }

    /// Records a failure; true when it starts a block.
    pub(super) fn fail(&self, ip: std::net::IpAddr) -> bool {
        if self.failures == 0 {
            return false;
        }
        let now = std::time::Instant::now();
        let mut map = self.by_addr.lock();
        if map.len() > 10_000 {
            // Bounded memory under a flood of addresses: forget entries that block nobody.
            map.retain(|_, (_, until)| until.is_some_and(|u| u > now));
        }
        let e = map.entry(ip).or_default();
        e.0.retain(|t| now.duration_since(*t) < LOCKOUT_WINDOW);
        e.0.push(now);
        if e.0.len() >= self.failures {
            e.0.clear();
            e.1 = Some(now + LOCKOUT_BLOCK);
            return true;
        }
        false
    }

    pub(super) fn succeed(&self, ip: std::net::IpAddr) {
        let mut map = self.by_addr.lock();
        if map.get(&ip).is_some_and(|e| e.1.is_none_or(|u| u <= std::time::Instant::now())) {
            map.remove(&ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_failures_in_the_window_block_the_address() {
        let l = Lockout::default();
        let ip: std::net::IpAddr = [10, 0, 0, 1].into();
        for _ in 0..LOCKOUT_FAILURES - 1 {
            assert!(!l.fail(ip));
        }
        assert!(l.blocked(ip).is_none());
        assert!(l.fail(ip));
        assert!(l.blocked(ip).is_some_and(|s| s > 590 && s <= 600));
        // A success does not lift a block; other addresses are not affected.
        l.succeed(ip);
        assert!(l.blocked(ip).is_some());
        assert!(l.blocked([10, 0, 0, 2].into()).is_none());
    }
}
