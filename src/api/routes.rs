//! The one route table: the route list each resource module declares next to its handlers
//! (`super::memories::ROUTES`, `super::labels::ROUTES`, ...), gathered here in one order. The HTTP server, the C
//! API's `engram_request`, the OpenAPI document and the fuzzers all read [`ROUTES`]; `tests/route_table.rs` pins
//! it. A row's type is [`Route`] (`route.rs`).

use std::sync::LazyLock;

use super::route::Route;

/// Every route of the API, in one order: the resource modules' lists, concatenated.
pub static ROUTES: LazyLock<Vec<Route>> = LazyLock::new(|| {
    [
        super::system::ROUTES,
        super::memories::ROUTES,
        super::search::ROUTES,
        super::labels::ROUTES,
        super::spaces::ROUTES,
        super::lifecycle::ROUTES,
        super::working::ROUTES,
        super::reviews::ROUTES,
        super::catchup::ROUTES,
        super::tools::ROUTES,
        super::threads::ROUTES,
        super::relations::ROUTES,
        super::sources::ROUTES,
        super::communities::ROUTES,
        super::library::ROUTES,
        super::fs::ROUTES,
        super::data::ROUTES,
        super::embeddings::ROUTES,
        super::admin::ROUTES,
    ]
    .concat()
});
