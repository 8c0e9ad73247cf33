//! Links between pages: a [`Linker`] decides where a page links to, so the same pages serve the HTTP routes
//! ([`RouteLinker`]: links to other routes) and the ZIP bundles (links to files inside the bundle).

use super::markdown::md_label;
use crate::model::Entity;
pub use crate::text::encode_segment;

/// Where a page links to; None when the target is not part of the output (the label is then plain text).
pub trait Linker {
    /// The entity page of `e`.
    fn entity(&self, e: &Entity) -> Option<String>;
    /// The page of crystal `id` of `space`.
    fn crystal(&self, space: &str, id: &str) -> Option<String>;
    /// The page of community `id`.
    fn topic(&self, id: u64) -> Option<String>;
    /// Memory `id` of `space` (a page or a route).
    fn memory(&self, space: &str, id: &str) -> Option<String>;
}

/// `[label](target)`, or the label alone without a target.
pub fn link(label: &str, target: Option<String>) -> String {
    match target {
        Some(t) => format!("[{}]({t})", md_label(label)),
        None => md_label(label),
    }
}

/// Links to the HTTP routes (`/library/wiki-page/...`, `/memories/{id}`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RouteLinker;

impl Linker for RouteLinker {
    fn entity(&self, e: &Entity) -> Option<String> {
        Some(format!("/library/wiki-page/entity/{}", encode_segment(&e.id)))
    }
    fn crystal(&self, _: &str, id: &str) -> Option<String> {
        Some(format!("/library/wiki-page/crystal/{}", encode_segment(id)))
    }
    fn topic(&self, id: u64) -> Option<String> {
        Some(format!("/library/wiki-page/topic/{id}"))
    }
    fn memory(&self, space: &str, id: &str) -> Option<String> {
        Some(format!("/memories/{}?space_id={}", encode_segment(id), encode_segment(space)))
    }
}
