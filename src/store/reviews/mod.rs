//! Timeline reviews: when a write stores a memory that looks like an update or a contradiction of an active
//! memory of the same space, a review event is raised, deterministically, for a person or an agent to resolve.
//!
//! "Looks like" (all of them):
//! 1. the older memory is active and the latest of its chain, in the same space, not from the same thread turn
//!    range, and not a document chunk;
//! 2. the two share at least one extracted entity;
//! 3. they are highly similar: the Dice coefficient of their content terms (stemmed, stop words out, numbers
//!    out) is at least [`MIN_DICE`];
//! 4. they differ in a way that matters: numbers on both sides that differ, a negation on one side only, a
//!    different year or month name, or a different value for the same attribute (each side keeps at most
//!    [`MAX_VALUE_TERMS`] terms the other lacks, and the memories are at least [`MIN_DICE_ATTRIBUTE`] alike).
//!
//! A negation on one side only makes a `contradiction`; every other difference an `update`. Candidates come
//! from BM25 over the new memory's text (top [`CANDIDATES`]). Writes of more than [`MAX_REVIEW_BATCH`]
//! memories at once (bulk loads) are not checked. Raising events never fails the write that caused it: an
//! error is logged and the memory stays stored. Review events are not part of the export archive (they are
//! derived from memories and can be raised again by writing).
//!
//! The service is [`Reviews`] (`store.reviews()`): it owns the `review` records. Detection is in `detect.rs`.
//! Resolving (`resolve_review` in the API) previews and then applies one of [`ACTIONS`].

mod detect;

use super::KnowledgeStore;
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};
use crate::model::Timestamp;
pub use crate::model::{Resolution, ReviewEvent};
use crate::store::review;

/// Least Dice similarity of content terms for a review.
pub const MIN_DICE: f64 = 0.5;
/// Least Dice similarity when the only difference is the value of an attribute.
pub const MIN_DICE_ATTRIBUTE: f64 = 0.6;
/// Most terms each side may have that the other lacks for an attribute-value difference.
pub const MAX_VALUE_TERMS: usize = 2;
/// BM25 candidates compared with a new memory.
pub const CANDIDATES: usize = 8;
/// Largest write batch that is checked for reviews: a bulk load (an ingest of thousands of memories in one
/// call) is history, not a change to review, and one search per memory would dominate its cost.
pub const MAX_REVIEW_BATCH: usize = 256;
/// Resolution actions.
pub const ACTIONS: [&str; 6] = [
    "keep_newer_as_latest",
    "keep_older_as_latest",
    "keep_both_linked",
    "no_change_needed",
    "dismiss",
    "custom_note_only",
];

/// The timeline reviews of a store's spaces, borrowed from the store (`store.reviews()`).
///
/// Owns: the `review` records (one per raised event, keyed by space and `rev_` id, UUIDv7 so key order is
/// time order), and raising them after a write.
#[derive(Clone, Copy)]
pub struct Reviews<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

impl Reviews<'_> {
    /// Review events of `space`, newest first: `(page, total)`. `unresolved_only` hides resolved ones;
    /// `since` keeps events raised at or after it.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`); storage errors.
    pub fn list(
        &self,
        space: &str,
        unresolved_only: bool,
        since: Option<Timestamp>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<ReviewEvent>, usize)> {
        self.store.spaces().require(space)?;
        let rtx = self.store.core.db.read()?;
        let mut all = Vec::new();
        review::reviews(&rtx)?.each_in_space(space, |_, e: ReviewEvent| {
            let wanted = !(unresolved_only && e.resolution.is_some());
            if wanted && since.is_none_or(|s| e.created_at >= s) {
                all.push(e);
            }
            true
        })?;
        // Ids are UUIDv7: reverse key order is newest first.
        all.reverse();
        let total = all.len();
        Ok((all.into_iter().skip(offset).take(limit).collect(), total))
    }

    /// One review event.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`review_not_found`).
    pub fn get(&self, space: &str, id: &str) -> Result<ReviewEvent> {
        let rtx = self.store.core.db.read()?;
        let t = review::reviews(&rtx)?;
        match t.get((space, id))? {
            Some(v) => Ok(v),
            None => Err(Error::not_found(
                ErrorCode::ReviewNotFound,
                format!("review event '{id}' not found in space '{space}'"),
            )),
        }
    }

    /// Records the resolution of review `id` (the memory changes an action implies are made by the caller
    /// first, through the lifecycle and relation calls).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`review_not_found`); [`ErrorKind::Conflict`] (`review_resolved`) when it is
    /// resolved already; [`ErrorKind::InvalidInput`] for an unknown action.
    pub fn record_resolution(&self, space: &str, id: &str, resolution: Resolution) -> Result<ReviewEvent> {
        if !ACTIONS.contains(&resolution.action.as_str()) {
            return Err(Error::invalid_value(
                &["action"],
                "enum",
                format!("action is one of {}", ACTIONS.join(", ")),
                resolution.action.clone().into(),
            ));
        }
        self.store.core.write(|txn, _| {
            let mut t = review::reviews(txn)?;
            let mut e: ReviewEvent = match t.get((space, id))? {
                Some(v) => v,
                None => {
                    return Err(Error::not_found(
                        ErrorCode::ReviewNotFound,
                        format!("review event '{id}' not found in space '{space}'"),
                    ));
                }
            };
            if e.resolution.is_some() {
                return Err(Error::new(ErrorKind::Conflict, format!("review event '{id}' is resolved already"))
                    .with_code(ErrorCode::ReviewResolved));
            }
            e.resolution = Some(resolution.clone());
            t.put((space, id), &e)?;
            Ok(e)
        })
    }
}
