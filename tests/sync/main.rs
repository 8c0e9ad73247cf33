//! Sync between devices (docs/sync.md), one test binary: the merge on real stores (`merge`), the shared folder
//! (`folder`), and two real daemons on one folder (`daemons`, feature `server`).

mod daemons;
mod folder;
mod merge;
