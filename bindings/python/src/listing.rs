//! Listing a store's memories from Python: `Store.memories(...)` (an iterator that reads a page at a time) and
//! `Store.count(...)`, with the filters of `GET /memories`.

use std::collections::VecDeque;

use engram::{ListOrder, ListQuery, MemoryView};
use pyo3::prelude::*;

use crate::errors::*;
use crate::memory::*;
use crate::slot::{ApiSlot, open_api};

/// Pages of 1 to this many memories.
pub(crate) const MAX_PAGE: usize = 1000;

/// `recent` (newest first), `importance` (highest first) or `pagerank` (highest PageRank in the memory graph
/// first); ties newest first, then by id.
pub(crate) fn parse_order(py: Python<'_>, order: &str) -> PyResult<ListOrder> {
    match order {
        "recent" => Ok(ListOrder::Recent),
        "importance" => Ok(ListOrder::Importance),
        "pagerank" => Ok(ListOrder::PageRank),
        _ => Err(invalid(py, "order", format!("expected recent, importance or pagerank, got '{order}'"))),
    }
}

/// The memories of one listing (`Store.memories`), read `page_size` at a time as the iteration goes. Pages
/// are read by offset: a memory written or deleted while the iteration runs may be skipped or seen twice (read
/// `count` after, or list again, when that matters). Iterating after the store is closed raises
/// `InvalidInput` (`store_closed`).
#[pyclass(module = "engram._engram")]
pub(crate) struct MemoryIterator {
    store: ApiSlot,
    query: ListQuery,
    order: ListOrder,
    buffered: VecDeque<MemoryView>,
    /// The last page was short: nothing more to read.
    done: bool,
}

impl MemoryIterator {
    pub(crate) fn new(store: ApiSlot, query: ListQuery, order: ListOrder) -> Self {
        MemoryIterator { store, query, order, buffered: VecDeque::new(), done: false }
    }
}

#[pymethods]
impl MemoryIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<Memory>>> {
        if self.buffered.is_empty() && !self.done {
            let api = open_api(&self.store, py)?;
            let (q, order) = (&self.query, self.order);
            let page = py.detach(|| api.store().memories().list_ordered(q, order)).map_err(to_py)?;
            self.done = page.items.len() < self.query.limit;
            self.query.offset += page.items.len();
            self.buffered.extend(page.items);
        }
        self.buffered.pop_front().map(|v| view(py, v)).transpose()
    }
}
