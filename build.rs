//! Build script: configuration only; never writes outside OUT_DIR.
fn main() {
    // Keep symbols of linked static libraries out of our shared library's dynamic symbol table, so that only
    // the `engram_` API is visible (a dependency once exported about 60 unprefixed C symbols).
    println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    println!("cargo:rerun-if-changed=build.rs");
}
