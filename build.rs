//! Build script: configuration only; never writes outside OUT_DIR.
fn main() {
    // hnsw_rs exports about 60 unprefixed C symbols (`insert_f32`, ...); keep them out of our shared library's
    // dynamic symbol table so that only the `engram_` API is visible.
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    println!("cargo:rerun-if-changed=build.rs");
}
