//! `engram sync init | join | now | remove | status`: sync between one person's devices through a shared folder
//! (docs/sync.md). They run without the daemon, on the store in the data directory.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use engram::KnowledgeStore;

use super::keys::KeyArgs;
use super::{DatabaseArgs, default_data_dir};

/// What `engram sync` does.
#[derive(Subcommand)]
pub enum SyncCommand {
    /// Start a sync group through FOLDER (any folder Syncthing, Dropbox, iCloud Drive, a network share or a USB
    /// stick keeps the same on every device) and print the pairing code the other devices join with.
    Init {
        /// The shared folder.
        #[arg(long)]
        folder: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Join the sync group of a pairing code (printed by `engram sync init` on another device), through the
    /// same folder as this device sees it.
    Join {
        /// The shared folder.
        #[arg(long)]
        folder: PathBuf,
        /// The pairing code (`engram-sync-1-...`); keep it as secret as a password: it is the group's key.
        #[arg(long, env = "ENGRAM_SYNC_CODE", hide_env_values = true)]
        code: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Sync once: write this device's new changes to the folder and apply the other devices' new ones.
    Now {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Remove DEVICE (its id, from `engram sync status`) from the group, for good: its later segments are
    /// refused everywhere and the group key rotates, so it cannot read what the others write from now on.
    /// Prints the new pairing code (the old one no longer joins).
    Remove {
        /// The device id (32 hex digits).
        device: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print this device's place in its group: the folder, what is pending, each other device's last segment,
    /// when it was last seen, the changes and conflicts applied, and the last error.
    Status {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// The store a sync command runs on.
#[derive(clap::Args)]
pub struct StoreArgs {
    /// Data directory (default: the platform data dir).
    #[arg(long, env = "ENGRAM_DATA_DIR")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    key: KeyArgs,
}

impl StoreArgs {
    fn open(self) -> engram::Result<KnowledgeStore> {
        let dir = self.data_dir.unwrap_or_else(default_data_dir);
        KnowledgeStore::open(super::transfer::config(&dir, self.database, &self.key)?)
    }
}

/// Runs `engram sync ...`.
pub fn sync_command(which: SyncCommand) -> engram::Result<()> {
    match which {
        SyncCommand::Init { folder, store } => {
            let store = store.open()?;
            let code = store.sync().init_folder(&folder)?;
            println!("sync group started through {}", shown(&folder));
            println!("pairing code (keep it secret, it is the group's key):\n\n  {code}\n");
            println!("on another device: engram sync join --folder <the same folder> --code {code}");
            println!("then `engram sync now` on each device, or `engram serve --sync`");
            Ok(())
        }
        SyncCommand::Join { folder, code, store } => {
            let store = store.open()?;
            store.sync().join_folder(&folder, &code)?;
            println!("joined the sync group through {}; `engram sync now` sends and takes the changes", shown(&folder));
            Ok(())
        }
        SyncCommand::Now { store } => {
            let store = store.open()?;
            // A bar while the other devices' segments are applied (a first sync applies many); hidden when
            // stderr is not a terminal.
            let r = std::thread::scope(|scope| {
                let worker = scope.spawn(|| store.sync().sync_folder());
                let bar = indicatif::ProgressBar::new(0);
                if let Ok(style) =
                    indicatif::ProgressStyle::with_template("applying {bar:40} {pos}/{len} segments, ETA {eta}")
                {
                    bar.set_style(style);
                }
                while !worker.is_finished() {
                    let p = store.sync().progress();
                    if p.running {
                        bar.set_length(p.segments_total);
                        bar.set_position(p.segments_done);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                bar.finish_and_clear();
                worker
                    .join()
                    .map_err(|_| engram::Error::new(engram::ErrorKind::Internal, "the sync thread panicked"))?
            })?;
            println!(
                "wrote {} segment(s) ({} changes); applied {} segment(s): {} changes, {} conflicts resolved, {} already known",
                r.written_segments,
                r.written_changes,
                r.applied_segments,
                r.applied.applied,
                r.applied.conflicts,
                r.applied.stale
            );
            for p in &r.peers {
                print_peer(p);
            }
            Ok(())
        }
        SyncCommand::Remove { device, store } => {
            let store = store.open()?;
            let r = store.sync().remove_device(&device)?;
            println!(
                "removed device {} (its segments up to {} stay accepted, later ones are refused)",
                r.device_id, r.last_accepted_segment
            );
            println!("the group key was rotated (epoch {}) and sealed to {} device(s):", r.epoch, r.kept.len());
            for d in &r.kept {
                println!("  {d}");
            }
            println!("new pairing code for devices that join from now on (keep it secret):\n\n  {}\n", r.pairing_code);
            println!("run `engram sync now` (or keep `engram serve --sync` running) to pass the new key on");
            Ok(())
        }
        SyncCommand::Status { json, store } => {
            let store = store.open()?;
            let s = store.sync().status()?;
            if json {
                let text = serde_json::to_string_pretty(&s)
                    .map_err(|e| engram::Error::new(engram::ErrorKind::Internal, e.to_string()))?;
                println!("{text}");
                return Ok(());
            }
            if !s.enabled {
                println!("this store is in no sync group (engram sync init --folder DIR)");
                return Ok(());
            }
            println!("device {}", s.device_id);
            println!("folder {}", s.folder.as_deref().unwrap_or("(none)"));
            println!("changes not yet written to the folder: {}", s.pending_changes);
            println!("key epoch {}; own segments compacted up to {}", s.key_epoch, s.snapshot);
            if let Some(e) = &s.error {
                println!("error: {e}");
            }
            for (d, n) in &s.removed {
                println!("  device {d}: removed (segments after {n} refused)");
            }
            for p in &s.peers {
                print_peer(p);
            }
            Ok(())
        }
    }
}

fn print_peer(p: &engram::Peer) {
    println!(
        "  device {}: segment {}, last seen {}, {} changes and {} conflicts applied{}{}",
        p.device_id,
        p.cursor,
        p.last_seen.as_deref().unwrap_or("never"),
        p.applied,
        p.conflicts,
        if p.pending { ", next segment still copying" } else { "" },
        p.error.as_ref().map(|e| format!(", refused: {e}")).unwrap_or_default()
    );
}

fn shown(p: &Path) -> String {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()).display().to_string()
}
