//! Scheduled online backups (`engram serve --backup-every 24h --backup-keep 7`): every interval, a backup into
//! `<data_dir>/backups/engram-<UTC time>.redb` ([`crate::store::Admin::backup`]), then the oldest backups of
//! that folder beyond `keep` are deleted. A failed backup is logged and counted
//! (`engram_backup_failures_total`); the next one runs at the next interval.

use std::sync::Arc;

use super::ScheduledBackups;
use crate::store::KnowledgeStore;

/// Runs the schedule until the runtime ends.
pub(super) async fn run(store: Arc<KnowledgeStore>, schedule: ScheduledBackups) {
    let mut tick = tokio::time::interval(schedule.every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate: the first backup runs one interval after the start
    loop {
        tick.tick().await;
        let s = store.clone();
        let keep = schedule.keep.max(1);
        let out = tokio::task::spawn_blocking(move || {
            let dir = s.config().data_dir.join("backups");
            let rep = s.admin().backup(&dir.join(crate::store::scheduled_name()))?;
            let all = crate::store::scheduled_backups(&dir);
            for old in all.iter().take(all.len().saturating_sub(keep)) {
                if let Err(e) = std::fs::remove_file(old) {
                    tracing::warn!(file = %old.display(), error = %e, "an old backup could not be deleted");
                }
            }
            Ok::<_, crate::Error>(rep)
        })
        .await;
        match out {
            Ok(Ok(rep)) => tracing::info!(
                file = %rep.backup_path,
                bytes = rep.bytes,
                generation = rep.generation,
                ms = rep.elapsed_ms,
                writes_paused_ms = rep.writes_paused_ms,
                "scheduled backup written"
            ),
            Ok(Err(e)) => tracing::warn!(error = %e, "the scheduled backup failed; the next runs at the next interval"),
            Err(e) => tracing::warn!(error = %e, "the scheduled backup stopped"),
        }
    }
}
