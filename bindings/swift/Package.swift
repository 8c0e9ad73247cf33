// swift-tools-version:5.9
// Engram for Swift: the C API (include/engram.h) as the system library module CEngram, and a small Swift
// wrapper (Engram.Store). Build libengram first (`cargo build --release --features ffi` at the repository root)
// and let the linker find it, e.g. `swift build -Xlinker -L../../target/release`.
// Not compiled in Engram's CI (no Swift toolchain there); CI checks what Swift's importer does with the
// header (tests/ffi_c.rs, `header_imports_as_a_clang_module_with_nullability`).
import PackageDescription

let package = Package(
    name: "Engram",
    products: [
        .library(name: "Engram", targets: ["Engram"]),
    ],
    targets: [
        .systemLibrary(name: "CEngram", path: "Sources/CEngram"),
        .target(name: "Engram", dependencies: ["CEngram"], path: "Sources/Engram"),
    ]
)
