//! The library: what Engram renders from the store for people and other tools. Wiki pages (`wiki.rs`: entity,
//! crystal and topic pages), the ZIP bundles ([`bundle`]: the markdown wiki and the Open Knowledge Format
//! bundle), the links between pages ([`links`]) and the markdown pieces they share ([`markdown`]). It reads the
//! store through its queries and never opens a record kind itself.

pub mod bundle;
pub mod links;
pub mod markdown;
mod wiki;

pub use bundle::{ExportCounts, ExportKind, ExportParams};
pub use links::{Linker, RouteLinker};
pub use markdown::{md_label, yaml_str};
