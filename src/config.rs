//! Store configuration: where the file lives, which embedder builds vectors, index parameters, durability.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::embed::Embedder;
use crate::error::ErrorCode;
use crate::index::bm25::Bm25Params;
use crate::index::context::{ContextParams, Expansion};
use crate::index::fusion::Fusion;
use crate::index::vector::VectorParams;

pub use crate::storage::Durability;

/// Configuration of a [`crate::KnowledgeStore`]. Build with [`StoreConfig::new`] and the setters.
#[derive(Clone)]
pub struct StoreConfig {
    /// Directory holding `engram.redb`; created if missing.
    pub data_dir: PathBuf,
    /// The embedder that builds vectors (default: the built-in static model, [`crate::embed::builtin`], 256
    /// dimensions).
    pub embedder: Arc<dyn Embedder>,
    /// HNSW and exact-scan parameters.
    pub vector: VectorParams,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// How lexical and vector rankings are fused; None: convex with the embedder's
    /// [`Embedder::default_lexical_weight`].
    pub fusion: Option<Fusion>,
    /// Commit durability.
    pub durability: Durability,
    /// redb page cache in bytes (default 64 MiB).
    pub cache_size_bytes: usize,
    /// Hybrid search: largest bonus added to the fused score (0..=1 with convex fusion) of a memory that
    /// mentions every entity named in the query, IDF-weighted per entity (default 0.05; 0 switches it off).
    pub entity_boost: f32,
    /// Weight `w` in 0..=1 of the decay score in ranking: search multiplies each fused score by
    /// `1 - w + w x decay` (see [`crate::index::decay`]; default 0.1; 0 switches it off).
    pub decay_weight: f32,
    /// Hybrid search: weight of a memory's PageRank (scaled 0..=1, see [`crate::graph::pagerank`]) added to
    /// its fused score once the graph has been computed (default 0.02; 0 switches it off).
    pub pagerank_weight: f32,
    /// Context-expanded BM25 over memories with a position in a thread or source
    /// ([`crate::index::context`]; default window 1, blend 1; window 0 switches it off).
    pub context: ContextParams,
    /// Neighbour expansion after fusion ([`crate::index::context::expand`]; default `a` 0.5, window 1, max;
    /// weight 0 switches it off). A search can switch it off with [`crate::store::SearchOptions`].
    pub expansion: Expansion,
    /// Hybrid search: a question that asks for a time (`text::asks_time`) multiplies the score
    /// of memories whose text states a resolved time by `1 + temporal_boost` (default 0.2; 0 switches it off).
    pub temporal_boost: f32,
    /// All modes: a memory that is a question (`text::is_question`) and whose next message is stored as the next
    /// memory of its thread (the reply, in a transcript stored turn by turn) has its score multiplied by
    /// `1 - question_penalty` after neighbour expansion (default 0.15, range 0..=1; 0 switches it off).
    pub question_penalty: f32,
    /// Hybrid and vector search: weight `γ` in 0..=1 of the context-blended cosine, which blends each memory's
    /// cosine with the mean cosine of itself and its previous and next memory in its thread or source
    /// ([`crate::index::context::context_cosines`]; 0 switches it off). None: the embedder's
    /// [`Embedder::default_vector_context`] (0.5 for a model, 0 for the [`crate::embed::HashEmbedder`]).
    pub vector_context: Option<f32>,
    /// Directories besides `data_dir` that server-side paths (export, import, source ingestion by path) may
    /// name: the daemon's repeatable `--allow-path DIR`.
    pub allowed_paths: Vec<PathBuf>,
    /// Opens the device the store file lives on, given the path of `engram.redb`, in place of the file itself:
    /// fault-injection tests wrap [`crate::storage::FileDevice`] to fail chosen I/O operations. None: the file.
    pub storage: Option<StorageFactory>,
    /// A PostgreSQL database in place of the redb file (feature `postgres`): `postgres://user@host/db` or the
    /// key-value form `host=/run/postgresql user=engram dbname=engram`. The data directory still holds local
    /// files (saved HNSW graphs, exports). None: `<data_dir>/engram.redb`.
    pub database_url: Option<String>,
    /// Most connections the store opens to its PostgreSQL database (default 16); each open transaction holds one.
    pub database_pool_size: u32,
    /// Where searches read their indexes from (default [`IndexMode::Memory`]); [`IndexMode::Database`] needs
    /// [`StoreConfig::database_url`].
    pub index_mode: IndexMode,
    /// What URL ingestion may fetch (feature `url`, in `server`): hosts allowed to resolve to non-public
    /// addresses (the daemon's repeatable `--allow-url-host`), timeouts, the size and redirect caps.
    pub url_policy: crate::net::UrlPolicy,
    /// Encryption at rest of the redb file and its side files (docs/security.md): the key source that opens an
    /// encrypted store, or makes a new store encrypted. None: the store must be plaintext (an encrypted one is
    /// refused with `key_required`). Not for PostgreSQL (an error at open).
    pub encryption: Option<crate::storage::crypt::Encryption>,
    /// How long an expired memory ([`crate::model::Memory::expires_at`] passed) stays readable by id before
    /// the expiry sweep forgets it ([`Memories::forget_expired`](crate::store::Memories::forget_expired); default 30 days). The sweep
    /// runs at open, and hourly in the daemon.
    pub expiry_grace: std::time::Duration,
}

/// Where a store's searches read their indexes from (`docs/deploy.md`, "Index modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexMode {
    /// The store's in-memory indexes (catalog, BM25 lexicon, context-expanded postings, HNSW graphs), loaded at
    /// open and kept current by every commit (on PostgreSQL, through the change feed).
    #[default]
    Memory,
    /// The database (PostgreSQL only): each search reads what it needs (the query terms' postings, the search
    /// catalog's entries and sequence neighbours, vectors or pgvector's candidates) in its read transaction and
    /// ranks them with the same code as [`IndexMode::Memory`].
    Database,
}

/// Default [`StoreConfig::expiry_grace`]: 30 days.
pub const DEFAULT_EXPIRY_GRACE: std::time::Duration = std::time::Duration::from_secs(30 * 86_400);

/// See [`StoreConfig::storage`].
pub type StorageFactory = Arc<dyn Fn(&Path) -> std::io::Result<Box<dyn crate::storage::Device>> + Send + Sync>;

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field("data_dir", &self.data_dir)
            .field("embedder", &self.embedder.name())
            .field("vector", &self.vector)
            .field("bm25", &self.bm25)
            .field("fusion", &self.fusion)
            .field("durability", &self.durability)
            .field("database", &self.database_url.as_ref().map(|_| "<url>"))
            .field("encryption", &self.encryption.as_ref().map(|e| e.source.kind()))
            .finish()
    }
}

impl StoreConfig {
    /// Defaults for a store in `data_dir`.
    pub fn new(data_dir: impl AsRef<Path>) -> Self {
        StoreConfig {
            data_dir: data_dir.as_ref().to_path_buf(),
            embedder: crate::embed::builtin(),
            vector: VectorParams::default(),
            bm25: Bm25Params::default(),
            fusion: None,
            durability: Durability::Immediate,
            cache_size_bytes: 64 << 20,
            entity_boost: 0.05,
            decay_weight: 0.1,
            pagerank_weight: 0.02,
            context: ContextParams::default(),
            expansion: Expansion::default(),
            temporal_boost: 0.2,
            question_penalty: 0.15,
            vector_context: None,
            allowed_paths: Vec::new(),
            storage: None,
            database_url: None,
            database_pool_size: 16,
            index_mode: IndexMode::Memory,
            url_policy: crate::net::UrlPolicy::default(),
            encryption: None,
            expiry_grace: DEFAULT_EXPIRY_GRACE,
        }
    }

    /// Opens (or creates) the store encrypted at rest with `encryption` ([`StoreConfig::encryption`]).
    pub fn encrypted(mut self, encryption: crate::storage::crypt::Encryption) -> Self {
        self.encryption = Some(encryption);
        self
    }

    /// Puts the store in the PostgreSQL database at `url` (feature `postgres`; see
    /// [`StoreConfig::database_url`]).
    pub fn database(mut self, url: impl Into<String>) -> Self {
        self.database_url = Some(url.into());
        self
    }

    /// Sets [`StoreConfig::index_mode`].
    pub fn index_mode(mut self, mode: IndexMode) -> Self {
        self.index_mode = mode;
        self
    }

    /// Adds a directory that server-side paths may name (besides the data directory).
    pub fn allow_path(mut self, dir: impl AsRef<Path>) -> Self {
        self.allowed_paths.push(dir.as_ref().to_path_buf());
        self
    }

    /// `path` resolved (symbolic links followed, `..` removed) when it lies inside the data directory or an
    /// allowed directory; a path that does not exist yet is resolved through its nearest existing ancestor.
    /// Relative paths are taken relative to the data directory.
    ///
    /// # Errors
    /// [`crate::error::ErrorKind::Forbidden`] (`path_not_allowed`) outside them, for the store file and the API
    /// key file, and when the path cannot be resolved; [`crate::error::ErrorKind::InvalidInput`] (at
    /// `["path"]`) for a path over 4,096 bytes or with a name over 200 bytes (file systems allow 255; an
    /// export writes a temporary file whose name is 42 bytes longer).
    pub fn confine(&self, path: &Path) -> crate::error::Result<PathBuf> {
        self.confine_named(path, "path")
    }

    /// [`StoreConfig::confine`], naming the request field `field` in a validation error.
    ///
    /// # Errors
    /// As [`StoreConfig::confine`].
    pub fn confine_named(&self, path: &Path, field: &str) -> crate::error::Result<PathBuf> {
        use crate::error::{Error, ErrorKind};
        // Longer names fail in the file system (ENAMETOOLONG) as an I/O error; they are the caller's mistake.
        if path.as_os_str().len() > 4096 || path.components().any(|c| c.as_os_str().len() > 200) {
            return Err(Error::invalid_value(
                &[field],
                "value_error",
                "paths are at most 4,096 bytes with names of at most 200 bytes",
                path.to_string_lossy().into_owned().into(),
            ));
        }
        let refuse = || {
            Error::new(ErrorKind::Forbidden, format!("path '{}' is outside the allowed directories", path.display()))
                .with_code(ErrorCode::PathNotAllowed)
        };
        let abs = if path.is_absolute() { path.to_path_buf() } else { self.data_dir.join(path) };
        // Resolve the longest existing prefix, then append the rest (which must not contain `..`).
        let mut existing = abs.as_path();
        let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
        let resolved = loop {
            match existing.canonicalize() {
                Ok(p) => break p,
                Err(_) => {
                    rest.push(existing.file_name().ok_or_else(refuse)?);
                    existing = existing.parent().ok_or_else(refuse)?;
                }
            }
        };
        let mut full = resolved;
        for part in rest.iter().rev() {
            if *part == ".." || *part == "." {
                return Err(refuse());
            }
            full.push(part);
        }
        // The store file and the API key are never a server-side path's target or source.
        if let Ok(data) = self.data_dir.canonicalize()
            && (full == data.join("engram.redb") || full == data.join("api-key"))
        {
            return Err(Error::new(
                ErrorKind::Forbidden,
                format!("'{}' is the store's own file and cannot be named here", path.display()),
            )
            .with_code(ErrorCode::PathNotAllowed));
        }
        let roots = std::iter::once(&self.data_dir).chain(self.allowed_paths.iter());
        for root in roots {
            if let Ok(r) = root.canonicalize()
                && full.starts_with(&r)
            {
                return Ok(full);
            }
        }
        Err(refuse())
    }

    /// Sets the embedder.
    pub fn embedder(mut self, e: Arc<dyn Embedder>) -> Self {
        self.embedder = e;
        self
    }

    /// Sets vector index parameters.
    pub fn vector_params(mut self, p: VectorParams) -> Self {
        self.vector = p;
        self
    }

    /// Sets the fusion method.
    pub fn fusion(mut self, f: Fusion) -> Self {
        self.fusion = Some(f);
        self
    }

    /// The fusion in effect.
    pub fn effective_fusion(&self) -> Fusion {
        self.fusion.unwrap_or(Fusion::Convex { alpha: self.embedder.default_lexical_weight() })
    }

    /// The context-blended cosine's weight `γ` searches use: [`StoreConfig::vector_context`], else the
    /// embedder's default.
    pub fn effective_vector_context(&self) -> f32 {
        self.vector_context.unwrap_or_else(|| self.embedder.default_vector_context())
    }

    /// Sets durability.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }

    /// The store file path: `<data_dir>/engram.redb`.
    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("engram.redb")
    }
}
