//! cargo fuzz target `query_params`: see `bodies::query_params`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::query_params(data));
