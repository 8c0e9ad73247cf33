//! The working-memory service ([`Working`], `store.working()`): one markdown document per space and day
//! (today's is the one being edited, earlier days are its history). It owns the `working_memory` records and
//! reads them through `records::working_memory`; store statistics (`/stats`) sit beside it in `stats.rs`.

use super::KnowledgeStore;
use crate::error::{Error, Result};
use crate::model::Timestamp;
pub use crate::model::WorkingMemory;
use crate::store::working_memory;

/// Largest working-memory document in bytes.
pub const MAX_WORKING_MEMORY_BYTES: usize = 262_144;

/// Today's date, `YYYY-MM-DD` (UTC).
pub fn today() -> String {
    Timestamp::now().to_rfc3339()[..10].to_string()
}

/// The working memory of a store's spaces, borrowed from the store (`store.working()`).
///
/// Owns: the `working_memory` records, one per space and day (`YYYY-MM-DD`, UTC), at most
/// 262,144 bytes each.
#[derive(Clone, Copy)]
pub struct Working<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

impl Working<'_> {
    /// The working memory of `space` on `date` (default: the most recent day that has one).
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`); [`crate::ErrorKind::InvalidInput`] for a date that
    /// is not `YYYY-MM-DD`.
    pub fn get(&self, space: &str, date: Option<&str>) -> Result<Option<WorkingMemory>> {
        self.store.spaces().require(space)?;
        let rtx = self.store.core.db.read()?;
        match date {
            Some(d) => {
                if Timestamp::parse(d).is_none() || d.len() != 10 {
                    return Err(Error::invalid_value(&["date"], "date_parsing", "date is YYYY-MM-DD", d.into()));
                }
                working_memory::days(&rtx)?.get((space, d))
            }
            None => working_memory::latest(&rtx, space),
        }
    }

    /// Replaces today's working memory of `space`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`); [`crate::ErrorKind::InvalidInput`] over 262,144 bytes.
    pub fn set(&self, space: &str, content: &str) -> Result<WorkingMemory> {
        if content.len() > MAX_WORKING_MEMORY_BYTES {
            return Err(Error::invalid_value(
                &["content"],
                "string_too_long",
                "working memory is at most 262144 bytes",
                content.len().into(),
            ));
        }
        self.store.spaces().require(space)?;
        let wm = WorkingMemory {
            space_id: space.to_string(),
            date: today(),
            content: content.to_string(),
            updated_at: Timestamp::now(),
        };
        self.store.core.write(|txn, _| {
            working_memory::days(txn)?.put((space, wm.date.as_str()), &wm)?;
            Ok(())
        })?;
        Ok(wm)
    }

    /// Days of `space` with a working memory, newest first.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`space_not_found`).
    pub fn history(&self, space: &str, limit: usize) -> Result<Vec<WorkingMemory>> {
        self.store.spaces().require(space)?;
        working_memory::recent(&self.store.core.db.read()?, space, limit)
    }
}
