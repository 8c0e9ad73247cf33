//! # Engram
//!
//! A local-first knowledge-memory engine: memories, labels and spaces in one redb file, hybrid search
//! (BM25 + vectors from a local embedder, HNSW above a size threshold), a transport-neutral API that an HTTP
//! daemon (feature `server`) and a C ABI (feature `ffi`) both serve.
//!
//! ```
//! use engram::{KnowledgeStore, StoreConfig, NewMemory, SearchQuery, SearchMode};
//! let dir = tempfile::tempdir()?;
//! let store = KnowledgeStore::open(StoreConfig::new(dir.path()))?;
//! store.create_memory(NewMemory { content: "Caroline went to the LGBTQ support group".into(), ..Default::default() })?;
//! let found = store.search(&SearchQuery::new("support group").limit(5).mode(SearchMode::Hybrid))?;
//! assert_eq!(found.hits.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | feature | what it adds |
//! |---|---|
//! | `server` | `engram serve`: the HTTP daemon (axum on hyper, tokio) |
//! | `ffi` | the C API of `include/engram.h` (cdylib and staticlib) |

pub mod api;
pub mod config;
pub mod embed;
pub mod error;
pub mod eval;
pub mod extract;
pub mod graph;
pub mod index;
pub mod model;
pub mod store;
pub mod text;

#[cfg(feature = "ffi")]
pub mod ffi;
#[cfg(feature = "server")]
pub mod server;

pub use config::{Durability, StorageFactory, StoreConfig};
pub use error::{Error, ErrorCode, ErrorKind, FieldError, Result};
pub use index::catalog::MemoryFilter;
pub use model::*;
pub use store::*;
