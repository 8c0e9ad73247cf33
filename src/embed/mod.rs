//! Text embedders. [`Embedder`] is the seam; [`StaticEmbedder`] is the built-in one (a static model compiled
//! into the binary: no files, no network, no model runtime); [`HashEmbedder`] hashes character trigrams, for
//! tests and the smallest needs; ONNX models (feature `fastembed`) are the higher tier. A store records the
//! [`Embedder::name`] and [`Embedder::dim`] that built its vectors and re-embeds when opened with a different one.

mod hashing;
#[cfg(feature = "fastembed")]
mod onnx;
mod static_model;

pub use hashing::{HashEmbedder, fnv1a};
#[cfg(feature = "fastembed")]
pub use onnx::{DEFAULT_MODEL_LEXICAL_WEIGHT, ORT_HINT, OnnxEmbedder, OnnxOptions, load_runtime};
pub use static_model::{StaticEmbedder, builtin};

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};

/// What a text is embedded for. Models trained with instructions embed queries and documents differently;
/// the built-in static model and the hashing embedder treat both alike.
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

    /// The weight `γ` of the context-blended cosine that suits this embedder (0..=1; default 0.5; see
    /// [`crate::StoreConfig::vector_context`]). A semantic model gains from a turn's neighbours; a lexical-like
    /// embedder's neighbours are already in the context-expanded BM25.
    fn default_vector_context(&self) -> f32 {
        0.5
    }

    /// The least cosine similarity (-1..=1; default 0, every vector a candidate) at which a memory counts as a
    /// match on the vector side of a search. Below it a memory is not a vector candidate: a query about nothing
    /// stored finds nothing, instead of the least unrelated memories (a lexical candidate is still scored on
    /// both sides).
    fn min_similarity(&self) -> f32 {
        0.0
    }

    /// The model's public id, reported as `model` by `/v1/embeddings` (default: [`Embedder::name`]).
    fn model_id(&self) -> &str {
        self.name()
    }

    /// The `embedding.mode` reported by `/health`: `local-static` for the built-in static model,
    /// `local-hash-fallback` for the hashing embedder, `local-onnx` for an ONNX model.
    fn mode(&self) -> &'static str {
        "local"
    }

    /// The longest input the model reads, in its own tokens including special tokens (None: no limit).
    /// Longer documents are truncated when indexed; `/v1/embeddings` rejects them with 422.
    fn max_input_tokens(&self) -> Option<usize> {
        None
    }

    /// Tokens the model reads for each text, by the model's tokenizer (special tokens and the `input_type`
    /// prompt included, before truncation). The default counts words.
    ///
    /// # Errors
    /// Tokenizer failures ([`crate::ErrorKind::Internal`]).
    fn count_tokens(&self, texts: &[&str], input_type: InputType) -> Result<Vec<usize>> {
        let _ = input_type;
        Ok(texts.iter().map(|t| crate::text::words(t).len()).collect())
    }

    /// True for [`ExternalEmbedder`]: the store computes no vectors; callers supply them (`embedding` on
    /// writes, `query_embedding` on searches) and memories without one are found lexically only.
    fn external(&self) -> bool {
        false
    }

    /// Embeds a batch. Returns one vector of [`Embedder::dim`] floats, L2 norm 1 (or all zeros for text
    /// without any feature), per input, in order.
    ///
    /// # Errors
    /// Model failures ([`crate::ErrorKind::Internal`]); the built-in static model and the hashing embedder never
    /// fail.
    fn embed(&self, texts: &[&str], input_type: InputType) -> Result<Vec<Vec<f32>>>;
}

/// The embedder of a store whose vectors come from the caller (as chromadb, Qdrant and LanceDB take them):
/// `--embedding-model external:DIM`. It computes nothing: [`Embedder::embed`] returns zero vectors, which every
/// vector path treats as "no vector" (internal uses such as label merge candidates then fall back to text).
#[derive(Debug, Clone)]
pub struct ExternalEmbedder {
    dim: usize,
    name: String,
}

impl ExternalEmbedder {
    /// Largest accepted dimension.
    pub const MAX_DIM: usize = 4096;

    /// An external embedder of `dim` floats per vector.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when `dim` is outside 1..=4096.
    pub fn new(dim: usize) -> Result<Self> {
        if !(1..=Self::MAX_DIM).contains(&dim) {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                format!("external embedder dimension {dim} is outside 1..={}", Self::MAX_DIM),
            ));
        }
        Ok(ExternalEmbedder { dim, name: format!("external-{dim}") })
    }
}

impl Embedder for ExternalEmbedder {
    fn name(&self) -> &str {
        &self.name
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn mode(&self) -> &'static str {
        "external"
    }
    fn external(&self) -> bool {
        true
    }
    fn embed(&self, texts: &[&str], _input_type: InputType) -> Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|_| vec![0.0; self.dim]).collect())
    }
}

/// Checks a caller-supplied vector for an embedder and returns it L2-normalised (similarity is cosine).
///
/// None after pushing one [`crate::error::FieldError`] at `loc` to `errs` (type `embedding_not_accepted`,
/// `embedding_dimension`, `embedding_not_finite` or `embedding_zero`) when the embedder computes its own
/// vectors, the length is not [`Embedder::dim`], an element is NaN or infinite, or all elements are zero.
pub fn check_vector(
    v: &[f32],
    embedder: &dyn Embedder,
    loc: &[&str],
    errs: &mut Vec<crate::error::FieldError>,
) -> Option<Vec<f32>> {
    match checked(v, embedder, loc) {
        Ok(v) => Some(v),
        Err(e) => {
            errs.push(*e);
            None
        }
    }
}

fn checked(
    v: &[f32],
    embedder: &dyn Embedder,
    loc: &[&str],
) -> std::result::Result<Vec<f32>, Box<crate::error::FieldError>> {
    use crate::error::FieldError;
    let input = || serde_json::json!(format!("[{} floats]", v.len()));
    if !embedder.external() {
        return Err(Box::new(FieldError::field(
            loc,
            "embedding_not_accepted",
            format!(
                "this store's embedder ({}) computes vectors itself; caller-supplied vectors need a store opened with an external embedder (--embedding-model external:DIM)",
                embedder.name()
            ),
            input(),
        )));
    }
    if v.len() != embedder.dim() {
        return Err(Box::new(
            FieldError::field(
                loc,
                "embedding_dimension",
                format!("expected {} floats, got {}", embedder.dim(), v.len()),
                input(),
            )
            .with_ctx(serde_json::json!({"dim": embedder.dim()})),
        ));
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(Box::new(FieldError::field(
            loc,
            "embedding_not_finite",
            format!("element {i} is not a finite number"),
            input(),
        )));
    }
    let norm = v.iter().map(|x| (*x as f64) * (*x as f64)).sum::<f64>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return Err(Box::new(FieldError::field(loc, "embedding_zero", "the vector has zero length", input())));
    }
    Ok(v.iter().map(|x| (*x as f64 / norm) as f32).collect())
}

/// Which embedder a store or daemon runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EmbedderChoice {
    /// The built-in static model ([`StaticEmbedder`], `builtin` on the command line).
    Builtin,
    /// The character-trigram [`HashEmbedder`] (`hashing` on the command line): no semantic similarity, for
    /// tests and comparisons.
    Hashing,
    /// A sentence-embedding model in this folder (feature `fastembed`).
    ModelDir(PathBuf),
    /// A model from fastembed's list by name, downloaded into `cache_dir` (feature `fastembed-hub`).
    Named {
        /// Model name or code.
        name: String,
        /// Download cache.
        cache_dir: PathBuf,
    },
    /// Vectors of this dimension come from the caller ([`ExternalEmbedder`]).
    External(usize),
    /// No choice made: the built-in static model.
    #[default]
    Auto,
}

/// The embedder chosen by [`select`], and why it is a fallback if it is one.
#[derive(Clone)]
pub struct SelectedEmbedder {
    /// The embedder.
    pub embedder: Arc<dyn Embedder>,
    /// Why a fallback runs in place of what was asked for (None: it runs what was asked for; every choice
    /// today either loads or fails, so this stays None).
    pub fallback: Option<String>,
}

impl std::fmt::Debug for SelectedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectedEmbedder")
            .field("embedder", &self.embedder.name())
            .field("fallback", &self.fallback)
            .finish()
    }
}

/// Builds the embedder for `choice`. An explicit model that cannot be loaded is an error, never a silent
/// fallback; only [`EmbedderChoice::Auto`] falls back.
///
/// # Errors
/// [`ErrorKind::Unavailable`] naming what is missing (model file, ONNX Runtime library, the cargo feature)
/// and how to fix it.
pub fn select(choice: &EmbedderChoice) -> Result<SelectedEmbedder> {
    match choice {
        EmbedderChoice::Builtin | EmbedderChoice::Auto => Ok(SelectedEmbedder { embedder: builtin(), fallback: None }),
        EmbedderChoice::Hashing => Ok(SelectedEmbedder { embedder: Arc::new(HashEmbedder::default()), fallback: None }),
        EmbedderChoice::External(dim) => {
            Ok(SelectedEmbedder { embedder: Arc::new(ExternalEmbedder::new(*dim)?), fallback: None })
        }
        #[cfg(feature = "fastembed")]
        EmbedderChoice::ModelDir(dir) => Ok(SelectedEmbedder {
            embedder: Arc::new(OnnxEmbedder::from_dir(dir, OnnxOptions::default())?),
            fallback: None,
        }),
        #[cfg(feature = "fastembed-hub")]
        EmbedderChoice::Named { name, cache_dir } => Ok(SelectedEmbedder {
            embedder: Arc::new(OnnxEmbedder::from_name(name, cache_dir, OnnxOptions::default())?),
            fallback: None,
        }),
        #[allow(unreachable_patterns)]
        other => Err(Error::new(
            ErrorKind::Unavailable,
            match other {
                EmbedderChoice::Named { name, .. } => format!(
                    "embedding model {name:?} by name needs a build with the `fastembed-hub` feature \
                     (or use --embedding-model-dir with a downloaded model folder)"
                ),
                _ => "an embedding model folder needs a build with the `fastembed` feature \
                      (`cargo build --release --features server,fastembed`)"
                    .to_string(),
            },
        )
        .with_code(ErrorCode::EmbeddingModelUnavailable)),
    }
}

pub use crate::index::vector::cosine;

/// `f` of every text, in order: on the rayon pool for batches of 64 texts or more (a re-embedding run, an
/// import), on the calling thread for fewer.
fn each_text(texts: &[&str], f: impl Fn(&str) -> Vec<f32> + Sync) -> Vec<Vec<f32>> {
    use rayon::prelude::*;
    if texts.len() >= 64 { texts.par_iter().map(|t| f(t)).collect() } else { texts.iter().map(|t| f(t)).collect() }
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
