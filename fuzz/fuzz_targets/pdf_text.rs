//! cargo fuzz target `pdf_text`: see `bodies::pdf_text`.
#![no_main]

#[path = "../bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(
    init: {
        // pdf-extract and lopdf panic on some malformed files; `extract` runs them on its own thread named
        // `engram-pdf` and turns such a panic into a refusal, by design. libfuzzer-sys's hook would abort on it,
        // so panics on that thread are let through to the catch; a panic anywhere else still aborts: a finding.
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() != Some("engram-pdf") {
                abort(info);
            }
        }));
    },
    |data: &[u8]| {
        bodies::pdf_text(data);
    }
);
