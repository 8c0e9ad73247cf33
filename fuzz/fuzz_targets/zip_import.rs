//! cargo fuzz target `zip_import`: see `bodies::zip_import`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

use std::sync::OnceLock;

static API: OnceLock<(tempfile::TempDir, engram::api::Api)> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (dir, api) = API.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = bodies::open(dir.path());
        (dir, api)
    });
    bodies::zip_import(api.store(), dir.path(), data);
});
