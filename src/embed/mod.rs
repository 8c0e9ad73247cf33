//! Text embedders. [`Embedder`] is the seam; [`HashEmbedder`] is the built-in one that needs no files and no
//! network. A store records the [`Embedder::name`] and [`Embedder::dim`] that built its vectors and re-embeds
//! when opened with a different one.

mod hashing;

pub use hashing::HashEmbedder;

use crate::error::Result;

/// What a text is embedded for. Models trained with instructions embed queries and documents differently;
/// the built-in embedder treats both alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    /// A search query.
    Query,
    /// Content to be indexed.
    Document,
}

/// Turns texts into L2-normalised vectors of a fixed dimension. Implementations must be deterministic for a
/// given name: the same text gives the same vector across runs and machines.
pub trait Embedder: Send + Sync {
    /// Stable name recorded in the store (a change of name means the vectors are rebuilt).
    fn name(&self) -> &str;
    /// Vector dimension (number of `f32`s).
    fn dim(&self) -> usize;
    /// The lexical weight `alpha` of the convex fusion that suits this embedder (0..=1; default 0.5). A weak,
    /// lexical-like embedder leans on BM25; a strong semantic model can take an even share.
    fn default_lexical_weight(&self) -> f32 {
        0.5
    }

    /// Embeds a batch. Returns one vector of [`Embedder::dim`] floats, L2 norm 1 (or all zeros for text
    /// without any feature), per input, in order.
    ///
    /// # Errors
    /// Model failures ([`crate::ErrorKind::Internal`]); the built-in embedder never fails.
    fn embed(&self, texts: &[&str], input_type: InputType) -> Result<Vec<Vec<f32>>>;
}

/// Cosine similarity of two L2-normalised vectors (their dot product), clamped to -1..=1.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let mut s = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        s += x * y;
    }
    s.clamp(-1.0, 1.0)
}
