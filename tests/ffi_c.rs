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
    let lib = lib_dir();
    let so = lib.join("libengram.so");
    let exe = out_dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(cc);
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
