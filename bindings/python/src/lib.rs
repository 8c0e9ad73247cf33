//! `engram._engram`: the native half of the `engram` Python package (pyo3, abi3 for CPython 3.9 and later).
//!
//! The hot calls (`add`, `add_many`, `get`, `update`, `delete`, `search`, `memories`, `count`, `embedding`,
//! `export`, `import_archive`) go straight to [`engram::KnowledgeStore`]; everything else reaches the same routes as the
//! HTTP daemon through `request`, which runs [`engram::api::Api`] in-process like the C API's `engram_request`.
//! Every call that touches storage, embedding or search releases the GIL (`Python::detach`), so several Python
//! threads can use one store; the store itself is `Send + Sync`.
//!
//! Errors become the exception classes of `engram.errors` (one per [`engram::ErrorKind`] group, see
//! `docs/bindings.md`); vectors come in as numpy `float32` arrays (1-D per item, 2-D for batches) or lists.

mod convert;
mod errors;
mod listing;
mod memory;
mod slot;
mod store;

use pyo3::prelude::*;

use listing::MemoryIterator;
use memory::{ContextItem, ExportReport, Hit, ImportReport, Memory, Response, SearchResults};
use store::Store;

/// The library version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _engram(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Store>()?;
    m.add_class::<Memory>()?;
    m.add_class::<MemoryIterator>()?;
    m.add_class::<Hit>()?;
    m.add_class::<SearchResults>()?;
    m.add_class::<ContextItem>()?;
    m.add_class::<Response>()?;
    m.add_class::<ExportReport>()?;
    m.add_class::<ImportReport>()?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
