//! The C API: the checked-in header matches cbindgen's output, and the C quickstart compiles with the system C
//! compiler against it and runs.
#![cfg(feature = "ffi")]

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generated_header() -> String {
    let dir = manifest_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(dir.join("src/ffi/mod.rs"))
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("header is UTF-8")
}

#[test]
fn checked_in_header_is_current() {
    let path = manifest_dir().join("include/engram.h");
    let fresh = generated_header();
    if std::env::var_os("ENGRAM_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write header");
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(current == fresh, "include/engram.h is stale: run ENGRAM_BLESS=1 cargo test --features ffi --test ffi_c");
    for f in ["engram_store_open", "engram_request", "engram_response_free", "engram_last_error", "ENGRAM_INVALID_UTF8"]
    {
        assert!(fresh.contains(f), "{f} missing from the header");
    }
}

/// The directory holding the `libengram` built for this test run: `target/<profile>/deps`, next to this test
/// binary (cargo test builds the cdylib and staticlib there without copying them up to `target/<profile>`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("target/<profile>/deps").to_path_buf();
    let has_lib = |d: &Path| d.join("libengram.so").exists() || d.join("libengram.a").exists();
    if has_lib(&deps) { deps } else { deps.parent().map(Path::to_path_buf).unwrap_or(deps) }
}

#[test]
fn c_quickstart_compiles_and_runs() {
    let lib = lib_dir();
    assert!(lib.join("libengram.so").exists() || lib.join("libengram.a").exists(), "no libengram in {}", lib.display());
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = compile_example("quickstart", tmp.path());
    let store_dir = tmp.path().join("store");
    // cargo's LD_LIBRARY_PATH also lists target/<profile>, whose libengram.so may come from another feature set
    // (without `ffi`); it would win over the rpath.
    let run = Command::new(&exe).arg(&store_dir).env("LD_LIBRARY_PATH", &lib).output().expect("run quickstart");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "quickstart failed:\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("quickstart: ok"), "{stdout}");
    assert!(stdout.contains("GET /memories/no-such-id -> 404"), "{stdout}");
    assert!(stdout.contains("action: created"), "{stdout}");
    assert!(store_dir.join("engram.redb").exists());
    // Reopening the same store from a second run finds the memory already there (action unchanged).
    let again = Command::new(&exe).arg(&store_dir).env("LD_LIBRARY_PATH", &lib).output().expect("rerun quickstart");
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}");
    assert!(stdout.contains("action: unchanged"), "{stdout}");
}

/// Caller-supplied vectors through the C API: stored, searched by query vector, and a bad one refused with
/// 422 and nothing stored (`examples/c/vectors.c` checks each step and prints `vectors: ok`).
#[test]
fn c_vectors_example_stores_searches_and_refuses_bad_vectors() {
    let lib = lib_dir();
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = compile_example("vectors", tmp.path());
    let run = Command::new(&exe).arg(tmp.path().join("store")).env("LD_LIBRARY_PATH", &lib).output().expect("run");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "vectors failed:\n{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("vectors: ok"), "{stdout}");
    assert!(stdout.contains("POST /memories -> 422"), "{stdout}");
}

/// A store in a PostgreSQL database through the C API (`examples/c/database.c`): an unreachable server is
/// `ENGRAM_UNREACHABLE` naming what failed (`ENGRAM_UNAVAILABLE` in a build without the `postgres` feature);
/// with `ENGRAM_TEST_PG` (a `postgres`-feature build), a memory is stored, read and found.
#[test]
fn c_database_example_opens_a_postgres_store_or_names_the_failure() {
    let lib = lib_dir();
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = compile_example("database", tmp.path());
    let nowhere =
        format!("host={} user=engram dbname=engram connect_timeout=2", tmp.path().join("no-server").display());
    let run = Command::new(&exe).arg(tmp.path().join("a")).arg(&nowhere).env("LD_LIBRARY_PATH", &lib).output();
    let run = run.expect("run");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(3), "{stdout}");
    if cfg!(feature = "postgres") {
        assert!(stdout.contains("open: 22 connecting to PostgreSQL failed"), "{stdout}");
    } else {
        assert!(stdout.contains("open: 18 ") && stdout.contains("feature `postgres`"), "{stdout}");
    }
    #[cfg(feature = "postgres")]
    if let Ok(base) = std::env::var("ENGRAM_TEST_PG") {
        let mut client = engram::storage::postgres::connect(&base).expect("connect to ENGRAM_TEST_PG");
        let schema = format!("c_{}", std::process::id());
        client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")).unwrap();
        let url = format!("{base} options='-csearch_path={schema}'");
        let run = Command::new(&exe).arg(tmp.path().join("b")).arg(&url).env("LD_LIBRARY_PATH", &lib).output();
        let run = run.expect("run");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
        assert!(stdout.contains("database: ok"), "{stdout}");
        let n: i64 = client.query_one(&format!("SELECT count(*) FROM {schema}.memories"), &[]).unwrap().get(0);
        assert_eq!(n, 1, "the memory is a row of the database");
    }
}

/// Compiles a C example against the test run's libengram.
fn compile_example(name: &str, out_dir: &Path) -> PathBuf {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    compile_example_with(&cc, name, out_dir, &[])
}

/// Compiles a C example with `cc` and `extra` flags against the test run's libengram.
fn compile_example_with(cc: &str, name: &str, out_dir: &Path, extra: &[&str]) -> PathBuf {
    let lib = lib_dir();
    let so = lib.join("libengram.so");
    let exe = out_dir.join(format!("{name}-{}", cc.replace('/', "_")));
    let mut cmd = Command::new(cc);
    cmd.args(extra);
    cmd.arg(manifest_dir().join(format!("examples/c/{name}.c")))
        .args(["-std=c11", "-Wall", "-Werror", "-g", "-I"])
        .arg(manifest_dir().join("include"))
        .arg("-o")
        .arg(&exe);
    if so.exists() {
        cmd.arg("-L").arg(&lib).arg("-lengram").arg(format!("-Wl,-rpath,{}", lib.display()));
    } else {
        cmd.arg(lib.join("libengram.a")).args(["-lpthread", "-ldl", "-lm"]);
    }
    let out = cmd.output().expect("run the C compiler");
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// An encrypted store through the C API (`examples/c/encrypted.c`), built with gcc and clang under
/// AddressSanitizer and UndefinedBehaviorSanitizer: created with a passphrase, written and searched, no
/// plaintext in the file, a wrong passphrase and no key give `ENGRAM_WRONG_KEY`, the right one reopens it.
#[test]
fn c_encrypted_example_is_clean_under_asan_and_ubsan() {
    let sanitize = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"];
    for cc in compilers(&["gcc", "clang"]) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let exe = compile_example_with(&cc, "encrypted", tmp.path(), &sanitize);
        let run = Command::new(&exe)
            .arg(tmp.path().join("store"))
            .env("LD_LIBRARY_PATH", lib_dir())
            .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
            .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
            .output()
            .expect("run encrypted");
        let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
        assert!(run.status.success(), "{cc}:\n{stdout}\n{stderr}");
        assert!(stdout.contains("encrypted: ok"), "{stdout}");
        assert!(!stderr.contains("Sanitizer"), "{cc}: a sanitizer reported:\n{stderr}");
    }
}

/// Open, requests (writes, search, reads, errors, tree API, source ingestion), free, close, several times under
/// valgrind: no definite leak, no invalid read or write. Needs valgrind (on the CI machine; skipped elsewhere
/// when it is missing, never under `CI`).
#[test]
fn c_api_cycles_are_clean_under_valgrind() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "valgrind is required under CI");
        eprintln!("valgrind not installed: skipped");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let exe = compile_example("leakcheck", tmp.path());
    let store = tmp.path().join("store");
    let out = Command::new("valgrind")
        .args(["--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=99"])
        .arg(&exe)
        .arg(&store)
        .arg("4")
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .expect("run valgrind");
    let report = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "valgrind found errors or a request failed:\n{stdout}\n{report}");
    assert!(stdout.contains("leakcheck: 4 cycles"), "{stdout}");
    assert!(report.contains("definitely lost: 0 bytes"), "{report}");
    assert!(report.contains("ERROR SUMMARY: 0 errors"), "{report}");
}

/// The compilers of this machine among `names` (each answers `--version`). Under `CI` every one is required.
fn compilers(names: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for name in names {
        if Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success()) {
            found.push((*name).to_string());
        } else {
            assert!(std::env::var_os("CI").is_none(), "{name} is required under CI");
            eprintln!("{name} not installed: skipped");
        }
    }
    found
}

/// Builds `examples/cpp/quickstart.cpp` (include/engram.hpp) with `cxx` and the extra flags.
fn compile_cpp(cxx: &str, out: &Path, extra: &[&str]) -> PathBuf {
    let lib = lib_dir();
    assert!(lib.join("libengram.so").exists(), "no libengram.so in {}", lib.display());
    let exe = out.join(format!("quickstart-{cxx}{}", extra.join("").replace(['-', '=', ','], "_")));
    let built = Command::new(cxx)
        .arg(manifest_dir().join("examples/cpp/quickstart.cpp"))
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-g", "-pthread", "-I"])
        .arg(manifest_dir().join("include"))
        .args(extra)
        .arg("-L")
        .arg(&lib)
        .arg("-lengram")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run the C++ compiler");
    assert!(built.status.success(), "{cxx} failed:\n{}", String::from_utf8_lossy(&built.stderr));
    exe
}

fn run_cpp(exe: &Path, store: &Path) -> std::process::Output {
    Command::new(exe)
        .arg(store)
        .env("LD_LIBRARY_PATH", lib_dir())
        .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        .output()
        .expect("run the C++ quickstart")
}

/// include/engram.hpp: the quickstart builds with g++ and clang++ at `-std=c++17 -Wall -Wextra -Werror
/// -pedantic` and passes its checks (RAII, moves, errors as exceptions, four threads on one store).
#[test]
fn cpp_quickstart_builds_with_gxx_and_clangxx_and_runs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for cxx in compilers(&["g++", "clang++"]) {
        let exe = compile_cpp(&cxx, tmp.path(), &[]);
        let run = run_cpp(&exe, &tmp.path().join(format!("store-{cxx}")));
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{cxx}: {stdout}\n{}", String::from_utf8_lossy(&run.stderr));
        assert!(stdout.contains("cpp quickstart: ok"), "{stdout}");
        assert!(stdout.contains("GET /memories/no-such-id -> 404"), "{stdout}");
        assert!(stdout.contains("second open -> code 11"), "{stdout}");
        assert!(stdout.contains("wrong passphrase -> code 25"), "{stdout}");
    }
}

/// The same quickstart under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer, with each
/// compiler: no report. A build that leaks one response on purpose must be reported, so the check can fail.
#[test]
fn cpp_quickstart_is_clean_under_asan_and_ubsan() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let sanitize = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"];
    for cxx in compilers(&["g++", "clang++"]) {
        let exe = compile_cpp(&cxx, tmp.path(), &sanitize);
        let run = run_cpp(&exe, &tmp.path().join(format!("asan-{cxx}")));
        let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
        assert!(run.status.success(), "{cxx} under sanitizers:\n{stdout}\n{stderr}");
        assert!(stdout.contains("cpp quickstart: ok"), "{stdout}");
        assert!(!stderr.contains("Sanitizer"), "{cxx}: a sanitizer reported:\n{stderr}");

        let mut planted = sanitize.to_vec();
        planted.push("-DENGRAM_PLANT_LEAK");
        let leaky = compile_cpp(&cxx, tmp.path(), &planted);
        let run = run_cpp(&leaky, &tmp.path().join(format!("leak-{cxx}")));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{cxx}: the planted leak went unreported");
        // Rust frames have no frame pointers, so the report's stack stops at the allocator; the clean run above
        // shows the planted response is the only difference.
        assert!(stderr.contains("LeakSanitizer: detected memory leaks"), "{cxx}:\n{stderr}");
    }
}

/// What Swift's importer does with the header: Clang imports it as the module `CEngram`
/// (include/module.modulemap) in Objective-C and in C, with every warning on (`-Weverything -Werror`, less
/// `-Wnon-modular-include-in-module`: Debian's libc headers have no module map, Swift brings its own), and the
/// program runs. A planted misuse of a `_Nullable` result must warn, so the annotations are really there.
#[test]
fn header_imports_as_a_clang_module_with_nullability() {
    let Some(clang) = compilers(&["clang"]).pop() else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = manifest_dir().join("tests/fixtures/clang_module/import.m");
    let lib = lib_dir();
    let build = |lang: &str, extra: &[&str], exe: &Path| {
        Command::new(&clang)
            .args(["-fmodules", "-Weverything", "-Wno-non-modular-include-in-module", "-Werror", "-x", lang])
            .arg(format!("-fmodule-map-file={}", manifest_dir().join("include/module.modulemap").display()))
            .arg(format!("-fmodules-cache-path={}", tmp.path().join("modules").display()))
            .args(extra)
            .arg(&src)
            .arg("-L")
            .arg(&lib)
            .arg("-lengram")
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-o")
            .arg(exe)
            .output()
            .expect("run clang")
    };
    for lang in ["objective-c", "c"] {
        let exe = tmp.path().join(format!("import-{lang}"));
        let out = build(lang, &[], &exe);
        assert!(out.status.success(), "{lang}: clang warned or failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let run = Command::new(&exe)
            .arg(tmp.path().join(format!("store-{lang}")))
            .env("LD_LIBRARY_PATH", &lib)
            .output()
            .expect("run the module check");
        assert!(run.status.success(), "{lang}: the imported API did not answer /health");

        let planted = build(lang, &["-DENGRAM_PLANT_NULLABLE_MISUSE"], &tmp.path().join("planted"));
        let stderr = String::from_utf8_lossy(&planted.stderr);
        assert!(!planted.status.success() && stderr.contains("nullable-to-nonnull-conversion"), "{lang}:\n{stderr}");
    }
}
