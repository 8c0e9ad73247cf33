//! Plain data types. Nothing here knows storage or transport.

mod common;
mod entity;
mod label;
mod memory;
mod source;
mod space;
mod thread;

pub use common::{Metadata, Timestamp};
pub use entity::Entity;
pub use label::Label;
pub use memory::{MONTH_NAMES, Memory, MemoryState, TemporalContext, UnitType, date_precision, spell_date};
pub use source::{MAX_SOURCE_BYTES, SOURCE_STATES, Source};
pub use space::{Space, SpaceUsage};
pub use thread::{Message, Thread};
