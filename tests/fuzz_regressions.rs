//! Replays the fuzz targets' saved inputs (`fuzz/seeds/<target>/*`, `fuzz/regressions/<target>/*`) through the
//! same bodies cargo fuzz runs (`fuzz/bodies.rs`), so every finding stays fixed without a fuzzer in CI. The
//! long runs are by hand: `fuzz/README.md`.

#[path = "../fuzz/bodies.rs"]
mod bodies;

use std::path::PathBuf;

/// Every saved input of `target`, by file name.
fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for kind in ["seeds", "regressions"] {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(kind).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let bytes = std::fs::read(e.path()).expect("read input");
            out.push((format!("{kind}/{target}/{}", e.file_name().to_string_lossy()), bytes));
        }
    }
    out.sort();
    out
}

#[test]
fn api_request_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let api = bodies::open(dir.path());
    let all = inputs("api_request");
    assert!(!all.is_empty());
    for (name, data) in &all {
        eprintln!("{name}");
        bodies::api_request(&api, data);
    }
}

#[test]
fn fs_path_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let api = bodies::open(dir.path());
    for (name, data) in inputs("fs_path") {
        eprintln!("{name}");
        bodies::fs_path(&api, &data);
    }
}

#[test]
fn query_params_inputs() {
    for (name, data) in inputs("query_params") {
        eprintln!("{name}");
        bodies::query_params(&data);
    }
}

#[test]
fn zip_import_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let api = bodies::open(dir.path());
    for (name, data) in inputs("zip_import") {
        eprintln!("{name}");
        bodies::zip_import(api.store(), dir.path(), &data);
    }
}

#[test]
fn pdf_text_inputs() {
    let all = inputs("pdf_text");
    assert!(all.len() >= 4, "the seeds are in fuzz/seeds/pdf_text");
    for (name, data) in all {
        eprintln!("{name}");
        bodies::pdf_text(&data);
    }
}

/// Writes the generated seeds of `pdf_text` (`ENGRAM_WRITE_SEEDS=1 cargo test --test fuzz_regressions`).
#[test]
fn pdf_text_generated_seeds_are_current() {
    use engram::extract::pdf::build;
    let seeds = [
        ("text.pdf", build(&[Some("A page of text\nwith two lines"), Some("Second page")], Some("Seed"), None)),
        ("scan.pdf", build(&[None], None, None)),
        ("locked.pdf", build(&[Some("secret")], None, Some("pw"))),
        ("open-encrypted.pdf", build(&[Some("readable")], None, Some(""))),
    ];
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/pdf_text");
    for (name, bytes) in seeds {
        bodies::pdf_text(&bytes);
        if std::env::var_os("ENGRAM_WRITE_SEEDS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(name), &bytes).unwrap();
        } else if !name.contains("encrypt") && name != "locked.pdf" {
            // (lopdf's encryption draws random bytes: the encrypted seeds differ at every build.)
            let kept = std::fs::read(dir.join(name)).unwrap();
            assert!(kept == bytes, "fuzz/seeds/pdf_text/{name} is stale: ENGRAM_WRITE_SEEDS=1 rewrites it");
        }
    }
}
