//! cargo fuzz target `api_request`: see `bodies::api_request`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::api_request(&bodies::shared().1, data));
