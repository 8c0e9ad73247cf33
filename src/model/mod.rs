//! Plain data types. Nothing here knows storage or transport.

mod changes;
mod clock;
mod common;
mod community;
mod entity;
mod label;
mod memory;
mod relation;
mod review;
mod source;
mod space;
mod thread;
mod working;

pub use changes::{Change, Item, ItemClock, Loser, Op, Tag};
pub use clock::{DeviceId, Hlc, Stamp};
pub use common::{Metadata, Timestamp};
pub use community::{Community, CommunityEntity, CommunityMemory, GraphReport};
pub use entity::Entity;
pub use label::{Label, LabelMerge};
pub use memory::{MONTH_NAMES, Memory, MemoryState, TemporalContext, UnitType, date_precision, spell_date};
pub use relation::MemoryRelation;
pub use review::{Resolution, ReviewEvent};
pub use source::{Chunk, MAX_SOURCE_BYTES, SOURCE_STATES, Source};
pub use space::{Space, SpaceUsage};
pub use thread::{Message, Thread};
pub use working::WorkingMemory;
