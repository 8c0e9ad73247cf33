//! cargo fuzz target `pdf_text`: see `bodies::pdf_text`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bodies::pdf_text(data);
});
