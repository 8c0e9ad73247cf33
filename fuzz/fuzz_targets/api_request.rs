//! cargo fuzz target `api_request`: see `bodies::api_request`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

use std::sync::OnceLock;

static API: OnceLock<(tempfile::TempDir, engram::api::Api)> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (_, api) = API.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = bodies::open(dir.path());
        (dir, api)
    });
    bodies::api_request(api, data);
});
