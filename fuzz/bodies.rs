//! The bodies of Engram's fuzz targets, shared by `fuzz/fuzz_targets/*.rs` (cargo fuzz, libFuzzer) and by
//! `tests/fuzz_regressions.rs`, which replays every saved input under `fuzz/regressions/<target>/` and
//! `fuzz/seeds/<target>/` in the normal test run. A body panics only on a finding: a panic inside Engram, a
//! server error other than the designed 501 (ENOTSUP) and 503 (no URL fetching), a response that is not JSON,
//! or a broken invariant.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use engram::api::{Api, ApiRequest, ParamKind, Query, ROUTES, ServiceInfo};
use engram::{Durability, ErrorKind, ImportMode, ImportProgress, KnowledgeStore, StoreConfig};

/// A store in `dir` behind the request layer, with a memory, a label and a thread to find. Commits are not
/// fsynced (fuzzing speed; durability is the crash tests' subject).
pub fn open(dir: &Path) -> Api {
    let config = StoreConfig::new(dir).durability(Durability::Eventual);
    let store = Arc::new(KnowledgeStore::open(config).expect("open store"));
    let api = Api::new(store, ServiceInfo::default());
    for (method, path, body) in [
        ("POST", "/memories", r#"{"id": "m1", "content": "Alice moved to Lisbon in May.", "labels": ["travel"]}"#),
        ("POST", "/threads", r#"{"thread_id": "t1", "messages": [{"role": "user", "content": "Hello Lisbon"}]}"#),
    ] {
        let r = api.handle(ApiRequest {
            method,
            path,
            query: "",
            body: body.as_bytes(),
            content_type: "application/json",
            headers: &[],
        });
        assert!(r.status < 300, "seeding {path}: {}", String::from_utf8_lossy(&r.body));
    }
    api
}

/// The store of a fuzzing process (libFuzzer runs every input in one process), in a temporary directory.
pub fn shared() -> &'static (tempfile::TempDir, Api) {
    static ENV: OnceLock<(tempfile::TempDir, Api)> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let api = open(dir.path());
        (dir, api)
    })
}

const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const CONTENT_TYPES: [&str; 4] = ["application/json", "multipart/form-data; boundary=XyZ", "", "text/plain"];

/// Runs `req` and checks the answer.
fn run(api: &Api, req: ApiRequest<'_>) {
    let resp = api.handle(req);
    let (status, content_type) = (resp.status, resp.content_type);
    let body = resp.into_bytes().unwrap_or_default();
    check(&req, status, &body, content_type);
}

fn check(api_req: &ApiRequest<'_>, status: u16, body: &[u8], content_type: &str) {
    let what = || format!("{} {}?{}", api_req.method, api_req.path, api_req.query);
    assert!(
        status < 500 || status == 501 || status == 503,
        "{}: server error {status}: {}",
        what(),
        String::from_utf8_lossy(body)
    );
    if content_type == "application/json" {
        assert!(serde_json::from_slice::<serde_json::Value>(body).is_ok(), "{}: the response is not JSON", what());
    }
}

/// Target `api_request`: one request through [`Api::handle`]. Input: byte 0 picks the method (below 128: the
/// route's own), byte 1 the route (past the table: the path is taken as given), byte 2 the content type; the
/// rest is `segment \0 query \0 body`, the segment filling every `{param}` of the route's path.
pub fn api_request(api: &Api, data: &[u8]) {
    if data.len() < 3 {
        return;
    }
    let mut parts = data[3..].splitn(3, |b| *b == 0);
    let segment = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
    let query = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
    let body = parts.next().unwrap_or(&[]);
    let (method, path) = match ROUTES.get(data[1] as usize) {
        Some(route) => {
            let (m, template) = (route.method, route.path);
            let path: Vec<&str> =
                template.split('/').map(|s| if s.starts_with('{') { segment.as_str() } else { s }).collect();
            (if data[0] < 128 { m } else { METHODS[data[0] as usize % METHODS.len()] }, path.join("/"))
        }
        None => (METHODS[data[0] as usize % METHODS.len()], segment.clone()),
    };
    let content_type = CONTENT_TYPES[data[2] as usize % CONTENT_TYPES.len()];
    run(api, ApiRequest { method, path: &path, query: &query, body, content_type, headers: &[] });
}

/// Percent-encodes every byte but unreserved ASCII (RFC 3986 section 2.3).
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Target `fs_path`: the input, as a tree path, through `stat`, `ls`, `cat`, `find`, `write` and `delete`.
pub fn fs_path(api: &Api, data: &[u8]) {
    let path = String::from_utf8_lossy(data);
    let q = format!("path={}", encode(&path));
    for verb in ["/fs/stat", "/fs/ls", "/fs/cat", "/fs/find", "/fs/grep"] {
        let query = if verb == "/fs/grep" { format!("{q}&q=Lisbon") } else { q.clone() };
        run(api, ApiRequest { method: "GET", path: verb, query: &query, body: b"", content_type: "", headers: &[] });
    }
    let body = serde_json::json!({"path": path, "body": "Fuzzed note."}).to_string();
    for verb in ["/fs/write", "/fs/delete"] {
        // Only the seeded memory's own path would be deleted; keep it.
        if verb == "/fs/delete" && path.contains("m1") {
            continue;
        }
        run(
            api,
            ApiRequest {
                method: "POST",
                path: verb,
                query: "",
                body: body.as_bytes(),
                content_type: "application/json",
                headers: &[],
            },
        );
    }
}

/// Target `query_params`: byte 0 picks a route, the rest is its query string. A parse either fails with field
/// errors located in `query`, or yields values inside every declared bound.
pub fn query_params(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    let route = &ROUTES[pick as usize % ROUTES.len()];
    let (path, specs) = (route.path, route.query);
    let raw = String::from_utf8_lossy(rest);
    match Query::parse(&raw, specs) {
        Ok(q) => {
            for spec in specs {
                match spec.kind {
                    ParamKind::Int { min, max, .. } => {
                        if let Some(v) = q.int(spec.name) {
                            assert!(v >= min && max.is_none_or(|m| v <= m), "{path} {}={v} out of bounds", spec.name);
                        }
                    }
                    ParamKind::Num { min, max, .. } => {
                        if let Some(v) = q.num(spec.name) {
                            assert!(v.is_finite() && v >= min && v <= max, "{path} {}={v} out of bounds", spec.name);
                        }
                    }
                    ParamKind::Str { choices, .. } if !choices.is_empty() => {
                        if let Some(v) = q.str(spec.name) {
                            assert!(choices.contains(&v), "{path} {}={v:?} not a choice", spec.name);
                        }
                    }
                    _ => {}
                }
                if spec.required {
                    assert!(
                        q.int(spec.name).is_some()
                            || q.num(spec.name).is_some()
                            || q.bool(spec.name).is_some()
                            || q.str(spec.name).is_some(),
                        "{path}: required {} missing from a successful parse",
                        spec.name
                    );
                }
            }
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{path}: {e}");
            assert!(!e.fields().is_empty(), "{path}: a validation error without fields");
            for f in e.fields() {
                assert_eq!(f.loc.first().and_then(|v| v.as_str()), Some("query"), "{path}: {:?}", f.loc);
            }
        }
    }
}

/// Target `zip_import`: the input as an archive for `POST /data/import` (byte 0 picks the mode). The import
/// succeeds, or fails with a validation, not-found, conflict or storage error and changes nothing.
pub fn zip_import(store: &KnowledgeStore, dir: &Path, data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else { return };
    let mode = [ImportMode::Merge, ImportMode::Skip, ImportMode::Overwrite][pick as usize % 3];
    let path = dir.join("fuzz-import.zip");
    std::fs::write(&path, bytes).expect("write the archive");
    let before = store.admin().stats(None).expect("stats").memory_count;
    match store.transfer().import(&path, mode, &ImportProgress::default()) {
        Ok(_) => {}
        Err(e) => {
            assert!(
                matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::NotFound | ErrorKind::Conflict),
                "import failed with {:?}: {e}",
                e.kind()
            );
            assert_eq!(
                store.admin().stats(None).expect("stats").memory_count,
                before,
                "a failed import changed the store"
            );
        }
    }
}

/// Target `pdf_text`: the input as a PDF ([`engram::extract::pdf::extract`] under a 10 s budget, then the
/// markdown and the document parse a source goes through). A refusal is fine; a panic escaping, a hang past
/// the budget, more pages than the bound, or a page heading count that differs from the pages is a finding.
pub fn pdf_text(data: &[u8]) {
    use engram::extract::document::{Format, parse};
    use engram::extract::pdf::{PdfLimits, extract, to_markdown};
    let limits = PdfLimits { time: std::time::Duration::from_secs(10), max_pages: 2_000, ..PdfLimits::default() };
    let Ok(pdf) = extract(data, &limits) else { return };
    assert!(pdf.pages.len() <= limits.max_pages);
    let md = to_markdown(&pdf);
    let parsed = parse(Format::Markdown, md.as_bytes(), "fuzz.pdf").expect("markdown always parses");
    assert_eq!(parsed.sections.len(), pdf.pages.len(), "one section per page");
}
