//! cargo fuzz target `fs_path`: see `bodies::fs_path`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| bodies::fs_path(&bodies::shared().1, data));
