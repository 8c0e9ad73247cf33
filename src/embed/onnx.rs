//! Sentence-embedding models run by ONNX Runtime through fastembed (cargo feature `fastembed`).
//!
//! ONNX Runtime is loaded at run time (`ort` feature `load-dynamic`): nothing is downloaded at build time, and
//! a build with this feature still starts where the library is absent (the caller falls back or reports a
//! clear error). The library comes from `ORT_DYLIB_PATH` (any ONNX Runtime 1.24–1.31 shared library, for
//! example `onnxruntime/capi/libonnxruntime.so.*` from the PyPI `onnxruntime` wheel) or, when that is unset,
//! `libonnxruntime.so` on the system's library path.
//!
//! A model is a folder in the sentence-transformers layout (`model.onnx` or `onnx/model.onnx`, `tokenizer.json`,
//! `config.json`, `special_tokens_map.json`, `tokenizer_config.json`, optionally `1_Pooling/config.json` and
//! `config_sentence_transformers.json` with query/document prompts), or, with the feature `fastembed-hub`, a
//! name from fastembed's model list downloaded into a cache.
//!
//! Vectors are mean- or CLS-pooled as the model's pooling config says and L2-normalised (the
//! sentence-transformers pipeline of the same model: Reimers and Gurevych, "Sentence-BERT", EMNLP 2019).

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};
use parking_lot::Mutex;

use super::{Embedder, InputType};
use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};

/// Options of an ONNX embedder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnnxOptions {
    /// Longest input in model tokens, special tokens included (default 256, the window all-MiniLM-L6-v2 was
    /// trained with); longer documents are truncated when indexed, and `/v1/embeddings` rejects them.
    pub max_tokens: usize,
    /// Texts per ONNX Runtime call (default 32).
    pub batch_size: usize,
    /// ONNX Runtime intra-op threads (None: one per core).
    pub intra_threads: Option<usize>,
}

impl Default for OnnxOptions {
    fn default() -> Self {
        OnnxOptions { max_tokens: 256, batch_size: 32, intra_threads: None }
    }
}

/// An [`Embedder`] backed by an ONNX sentence-embedding model. Runs are serialised (one ONNX session, handed
/// over fairly between batches of [`OnnxOptions::batch_size`] texts); each uses every core.
pub struct OnnxEmbedder {
    name: String,
    model_id: String,
    dim: usize,
    opts: OnnxOptions,
    model: Mutex<TextEmbedding>,
    counter: tokenizers::Tokenizer,
    query_prompt: String,
    document_prompt: String,
}

impl std::fmt::Debug for OnnxEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEmbedder").field("name", &self.name).field("dim", &self.dim).finish()
    }
}

fn unavailable(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Unavailable, msg).with_code(ErrorCode::EmbeddingModelUnavailable)
}

/// How to get ONNX Runtime, for error messages.
pub const ORT_HINT: &str = "set ORT_DYLIB_PATH to an ONNX Runtime 1.24-1.31 shared library, for example \
    onnxruntime/capi/libonnxruntime.so.<version> from the PyPI wheel (`pip download onnxruntime`, then unzip)";

/// Loads ONNX Runtime once per process: `ORT_DYLIB_PATH`, else `libonnxruntime.so` from the library path.
///
/// # Errors
/// [`ErrorKind::Unavailable`] naming the path tried and how to fix it: the file is missing, cannot be loaded,
/// or is an unsupported version. The same error is returned on every later call.
pub fn load_runtime() -> Result<()> {
    static LOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    let r = LOADED.get_or_init(|| {
        let (path, from_env) = match std::env::var_os("ORT_DYLIB_PATH") {
            Some(p) if !p.is_empty() => (PathBuf::from(p), true),
            _ => (
                PathBuf::from(format!("{}onnxruntime{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX)),
                false,
            ),
        };
        if from_env && !path.is_file() {
            return Err(format!("ONNX Runtime not found: ORT_DYLIB_PATH={} is not a file; {ORT_HINT}", path.display()));
        }
        match std::panic::catch_unwind(|| ort::init_from(&path)) {
            Ok(Ok(_builder)) => Ok(()),
            Ok(Err(e)) if from_env => Err(format!("ONNX Runtime could not be loaded: {e}; {ORT_HINT}")),
            Ok(Err(_)) => Err(format!("ONNX Runtime not found: ORT_DYLIB_PATH is not set; {ORT_HINT}")),
            Err(_) => Err(format!("ONNX Runtime could not be loaded from {}; {ORT_HINT}", path.display())),
        }
    });
    r.clone().map_err(unavailable)
}

fn read(dir: &Path, name: &str) -> Result<Vec<u8>> {
    std::fs::read(dir.join(name)).map_err(|e| {
        unavailable(format!(
            "embedding model folder {} has no readable {name} ({e}); it needs model.onnx (or onnx/model.onnx), \
             tokenizer.json, config.json, special_tokens_map.json and tokenizer_config.json",
            dir.display()
        ))
    })
}

fn catch<T>(what: &str, f: impl FnOnce() -> std::result::Result<T, fastembed::Error>) -> Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Error::new(ErrorKind::Internal, format!("{what} failed: {e}"))),
        Err(_) => Err(Error::new(ErrorKind::Internal, format!("{what} failed: ONNX Runtime panicked"))),
    }
}

impl OnnxEmbedder {
    /// Loads the model in `dir` (layout in the module docs).
    ///
    /// The recorded name is `onnx:<folder name>@<FNV-1a 64 of model.onnx, hex>`, so replacing the model file
    /// (an fp32 export by an int8 one, say) re-embeds the store instead of mixing vectors.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] when ONNX Runtime cannot be loaded ([`load_runtime`]) or a model file is
    /// missing (the message names it); [`ErrorKind::Internal`] when the files do not make a working model.
    pub fn from_dir(dir: impl AsRef<Path>, opts: OnnxOptions) -> Result<Self> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(unavailable(format!(
                "embedding model folder {} does not exist; point --embedding-model-dir (ENGRAM_EMBEDDING_MODEL_DIR) \
                 at a sentence-transformers ONNX export",
                dir.display()
            )));
        }
        let onnx_name = if dir.join("model.onnx").is_file() { "model.onnx" } else { "onnx/model.onnx" };
        let onnx = read(dir, onnx_name)?;
        let files = TokenizerFiles {
            tokenizer_file: read(dir, "tokenizer.json")?,
            config_file: read(dir, "config.json")?,
            special_tokens_map_file: read(dir, "special_tokens_map.json")?,
            tokenizer_config_file: read(dir, "tokenizer_config.json")?,
        };
        let pooling = match std::fs::read(dir.join("1_Pooling/config.json")) {
            Ok(b) => {
                let v: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
                if v["pooling_mode_cls_token"].as_bool() == Some(true) { Pooling::Cls } else { Pooling::Mean }
            }
            Err(_) => Pooling::Mean,
        };
        let (query_prompt, document_prompt) = match std::fs::read(dir.join("config_sentence_transformers.json")) {
            Ok(b) => {
                let v: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
                let p = &v["prompts"];
                let s = |k: &str| p[k].as_str().unwrap_or("").to_string();
                (s("query"), if p["document"].is_string() { s("document") } else { s("passage") })
            }
            Err(_) => (String::new(), String::new()),
        };
        let folder = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "model".into());
        let hash = super::fnv1a(&onnx);
        load_runtime()?;
        let user = UserDefinedEmbeddingModel::new(onnx, files).with_pooling(pooling);
        let mut init = InitOptionsUserDefined::new().with_max_length(opts.max_tokens);
        if let Some(n) = opts.intra_threads {
            init = init.with_intra_threads(n);
        }
        let model = catch("loading the embedding model", || TextEmbedding::try_new_from_user_defined(user, init))?;
        // The model id drops an `-onnx` suffix of the folder: `all-MiniLM-L6-v2-onnx` serves `all-MiniLM-L6-v2`.
        let id = folder.strip_suffix("-onnx").or_else(|| folder.strip_suffix("_onnx")).unwrap_or(&folder).to_string();
        Self::finish(format!("onnx:{folder}@{hash:016x}"), id, model, opts, query_prompt, document_prompt)
    }

    /// Loads a model from fastembed's list by name (its model code such as `BAAI/bge-small-en-v1.5`, the last
    /// part of it, or the enum name such as `BGESmallENV15`, case-insensitive), downloading it into
    /// `cache_dir` on first use. Needs the feature `fastembed-hub` and a reachable model hub.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`]: unknown name (the message lists the known ones), no runtime, or the
    /// download failed.
    #[cfg(feature = "fastembed-hub")]
    pub fn from_name(name: &str, cache_dir: impl AsRef<Path>, opts: OnnxOptions) -> Result<Self> {
        let info = find_named(name)?;
        load_runtime()?;
        let (query_prompt, document_prompt) = named_prompts(&info.model_code);
        let init = fastembed::TextInitOptions::new(info.model.clone())
            .with_max_length(opts.max_tokens)
            .with_cache_dir(cache_dir.as_ref().to_path_buf())
            .with_show_download_progress(std::io::IsTerminal::is_terminal(&std::io::stderr()));
        let init = match opts.intra_threads {
            Some(n) => init.with_intra_threads(n),
            None => init,
        };
        let model = catch("loading the embedding model", || TextEmbedding::try_new(init)).map_err(|e| {
            unavailable(format!("{} (model {}): {}", "embedding model unavailable", info.model_code, e))
        })?;
        let id = info.model_code.rsplit('/').next().unwrap_or(&info.model_code).to_string();
        Self::finish(
            format!("fastembed:{}", info.model_code),
            id,
            model,
            opts,
            query_prompt.into(),
            document_prompt.into(),
        )
    }

    fn finish(
        name: String,
        model_id: String,
        model: TextEmbedding,
        opts: OnnxOptions,
        query_prompt: String,
        document_prompt: String,
    ) -> Result<Self> {
        let mut counter = model.tokenizer.clone();
        counter.with_truncation(None).map_err(|e| Error::new(ErrorKind::Internal, format!("tokenizer: {e}")))?;
        counter.with_padding(None);
        let mut e = OnnxEmbedder {
            name,
            model_id,
            dim: 0,
            opts,
            model: Mutex::new(model),
            counter,
            query_prompt,
            document_prompt,
        };
        e.dim = e.run(&["dimension probe"])?.first().map_or(0, Vec::len);
        if e.dim == 0 {
            return Err(Error::new(ErrorKind::Internal, "the embedding model returned an empty vector"));
        }
        Ok(e)
    }

    /// Embeds in batches of texts of similar length (sorted by length, as sentence-transformers does): less
    /// padding is faster, and an int8 model that quantises activations per batch loses less precision on
    /// short texts batched with long ones.
    fn run(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let batch = self.opts.batch_size.max(1);
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        let sorted: Vec<&str> = order.iter().map(|&i| texts[i]).collect();
        let mut out = vec![Vec::new(); texts.len()];
        for (chunk, idx) in sorted.chunks(batch).zip(order.chunks(batch)) {
            let mut model = self.model.lock();
            let embedded = catch("embedding", || model.embed(chunk, Some(batch)))?;
            // Hand the session to a waiting caller (a search's query) between batches, so that a long
            // re-embedding run delays a query by one batch at most.
            parking_lot::MutexGuard::unlock_fair(model);
            for (&i, v) in idx.iter().zip(embedded) {
                out[i] = v;
            }
        }
        for v in &mut out {
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if n > 0.0 {
                v.iter_mut().for_each(|x| *x /= n);
            }
        }
        Ok(out)
    }
}

impl Embedder for OnnxEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn default_lexical_weight(&self) -> f32 {
        DEFAULT_MODEL_LEXICAL_WEIGHT
    }

    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn mode(&self) -> &'static str {
        "local-onnx"
    }

    fn max_input_tokens(&self) -> Option<usize> {
        Some(self.opts.max_tokens)
    }

    fn count_tokens(&self, texts: &[&str], input_type: InputType) -> Result<Vec<usize>> {
        let prompt = self.prompt(input_type);
        texts
            .iter()
            .map(|t| {
                let text = if prompt.is_empty() { (*t).to_string() } else { format!("{prompt}{t}") };
                self.counter
                    .encode(text, true)
                    .map(|enc| enc.get_ids().len())
                    .map_err(|e| Error::new(ErrorKind::Internal, format!("tokenizer: {e}")))
            })
            .collect()
    }

    fn embed(&self, texts: &[&str], input_type: InputType) -> Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let prompt = self.prompt(input_type);
        if prompt.is_empty() {
            return self.run(texts);
        }
        let prefixed: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
        let refs: Vec<&str> = prefixed.iter().map(String::as_str).collect();
        self.run(&refs)
    }
}

impl OnnxEmbedder {
    fn prompt(&self, input_type: InputType) -> &str {
        match input_type {
            InputType::Query => &self.query_prompt,
            InputType::Document => &self.document_prompt,
        }
    }
}

/// The lexical weight of convex fusion with a sentence-embedding model, chosen on LoCoMo (README).
pub const DEFAULT_MODEL_LEXICAL_WEIGHT: f32 = 0.5;

#[cfg(feature = "fastembed-hub")]
fn find_named(name: &str) -> Result<fastembed::ModelInfo<fastembed::EmbeddingModel>> {
    let models = TextEmbedding::list_supported_models();
    let want = name.to_ascii_lowercase();
    models
        .iter()
        .find(|m| {
            let code = m.model_code.to_ascii_lowercase();
            code == want
                || code.rsplit('/').next() == Some(want.as_str())
                || format!("{:?}", m.model).to_ascii_lowercase() == want
        })
        .cloned()
        .ok_or_else(|| {
            let known: Vec<String> = models.iter().map(|m| m.model_code.clone()).collect();
            unavailable(format!("unknown embedding model {name:?}; fastembed knows: {}", known.join(", ")))
        })
}

/// Query and document prompts of the instruction-tuned models in fastembed's list (from their model cards).
#[cfg(feature = "fastembed-hub")]
fn named_prompts(code: &str) -> (&'static str, &'static str) {
    let c = code.to_ascii_lowercase();
    if c.contains("e5-") {
        ("query: ", "passage: ")
    } else if c.contains("nomic-embed") {
        ("search_query: ", "search_document: ")
    } else if c.contains("bge-") && c.contains("-en") {
        ("Represent this sentence for searching relevant passages: ", "")
    } else {
        ("", "")
    }
}
