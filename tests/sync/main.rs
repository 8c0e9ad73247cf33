//! Sync between devices (docs/sync.md), one test binary: the merge on real stores (`merge`), the shared folder
//! (`folder`), a device killed while it syncs (`crash`), and two real daemons on one folder (`daemons`, feature
//! `server`).

mod crash;
mod daemons;
mod folder;
mod groups;
mod merge;

/// A store in a temporary directory of its own, which lives as long as it.
struct Device {
    _dir: tempfile::TempDir,
    store: engram::KnowledgeStore,
}

impl Device {
    /// A fresh store, in no sync group.
    fn open() -> Device {
        let dir = tempfile::tempdir().unwrap();
        let store = engram::KnowledgeStore::open(engram::StoreConfig::new(dir.path())).unwrap();
        Device { _dir: dir, store }
    }
}
