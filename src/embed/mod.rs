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
///
/// Eight independent partial sums let the compiler vectorise the loop (a single running f32 sum cannot be
/// reordered, so it stays scalar); this is the hot loop of HNSW construction, graph search and exact scans.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s.clamp(-1.0, 1.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cosine_matches_the_plain_sum() {
        let a: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.11).cos() * 0.1).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((super::cosine(&a, &b) - plain).abs() < 1e-5);
        assert_eq!(super::cosine(&[2.0], &[3.0]), 1.0);
    }
}
