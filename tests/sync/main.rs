//! Sync between devices (docs/sync.md), one test binary: the merge on real stores (`merge`), the shared folder
//! (`folder`), a device killed while it syncs (`crash`), and two real daemons on one folder (`daemons`, feature
//! `server`).

mod crash;
mod daemons;
mod folder;
mod groups;
mod merge;
