//! cargo fuzz target `zip_import`: see `bodies::zip_import`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (dir, api) = bodies::shared();
    bodies::zip_import(api.store(), dir.path(), data);
});
