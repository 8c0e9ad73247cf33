//! The tree API's engine (spec "Tree API (preview)", client contract section 7): memories, threads, sources,
//! wiki entity pages and working memory projected as a file tree. `path` is the grammar of paths, `project`
//! the files they name, `grep` the search over their text; `api/fs.rs` has the HTTP handlers.

pub mod find;
pub mod grep;
pub mod ls;
pub(crate) mod path;
pub(crate) mod project;
pub mod read;
pub mod write;

pub use find::{FindArgs, Hit, RecallHit, find, recall};
pub use grep::{GrepArgs, GrepMatch, MAX_PATTERN, grep};
pub use ls::{Entry, ls};
pub use read::{FileContent, Stat, cat, stat};
pub use write::{WriteArgs, WriteReport, delete, write};
