//! The engine behind an open store, shared by the `Store` and the iterators it hands out, so that both see a
//! `close()`.

use std::sync::Arc;

use engram::ErrorKind;
use engram::api::Api;
use parking_lot::RwLock;
use pyo3::prelude::*;

use crate::errors::typed_error;

/// The store's engine; `None` once the store is closed.
pub(crate) type ApiSlot = Arc<RwLock<Option<Arc<Api>>>>;

/// The engine in `slot`, or `InvalidInput` (`store_closed`) after `close()`.
pub(crate) fn open_api(slot: &ApiSlot, py: Python<'_>) -> PyResult<Arc<Api>> {
    slot.read()
        .clone()
        .ok_or_else(|| typed_error(py, ErrorKind::InvalidInput, "store_closed", "the store is closed", &[]))
}
