//! URL ingestion against a real HTTP server on loopback (a thread with a `TcpListener`, counting the requests
//! it sees): an HTML page and a CSV by URL, a redirect chain of 5 followed and a 6th refused, a slow server cut
//! off by the timeout, an over-size body cut off at the cap with nothing stored, and the SSRF guard refusing
//! loopback hosts (literal, `localhost`, IPv6) without a connection when the host is not allowed. Over HTTP the
//! route answers 422, 502 and 504 with the spec's shapes. No traffic leaves loopback.
#![cfg(feature = "server")]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use engram::{ErrorKind, KnowledgeStore, NewSource, StoreConfig};

const PAGE: &str = "<html><head><title>Harbour &amp; Pier Notes</title></head><body>\
<h1>Harbour renovation</h1><p>We decided to replace the wooden pier with concrete before the autumn storms.</p>\
<h2>Budget</h2><p>The council approved forty thousand euros for the pier work this year.</p></body></html>";

/// A news article inside a site's header, navigation and footer.
fn article() -> String {
    let para = "The harbour pilots of Rotterdam guide about thirty thousand ships a year through the Maas estuary, \
                boarding them far out at sea by launch or by helicopter in rough weather. ";
    let links: String = (0..30).map(|i| format!("<li><a href=\"/topic/{i}\">Topic number {i}</a></li>")).collect();
    format!(
        "<html><head><title>Harbour pilots - Portside News</title></head><body>\
         <header class=\"site-header\"><a href=\"/\">Portside News</a> <a href=\"/login\">Sign in</a></header>\
         <nav class=\"menu\"><ul>{links}</ul></nav>\
         <article><h1>Harbour pilots</h1><p>{p}</p><h2>Helicopters</h2><p>{p}</p></article>\
         <footer class=\"footer\">Copyright Portside Media. <a href=\"/privacy\">Privacy policy</a></footer>\
         </body></html>",
        p = para.repeat(3)
    )
}

/// A two-page PDF report with a title in its information dictionary.
fn report_pdf() -> Vec<u8> {
    engram::extract::pdf::build(
        &[
            Some("Quarterly harbour report\nThe pier repairs finished in March after six weeks of work."),
            Some("Costs\nThe dredging of the north basin cost twelve thousand euros in total this spring."),
        ],
        Some("Harbour Report Q1"),
        None,
    )
}

/// A tiny HTTP/1.1 server: `/page.html`, `/data.csv`, `/r/N` (redirects to `/r/N-1`, `/r/0` to the page),
/// `/slow` (answers after 3 s), `/big` (2 MiB), `/missing` (404). Returns its port and the request counter.
fn origin() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counter.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    return;
                }
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, ctype, body, location): (&str, &str, Vec<u8>, Option<String>) = match path.as_str() {
                    "/page.html" => ("200 OK", "text/html; charset=utf-8", PAGE.as_bytes().to_vec(), None),
                    "/article.html" => ("200 OK", "text/html", article().into_bytes(), None),
                    "/data.csv" => {
                        ("200 OK", "text/csv", b"city,population\nOslo,709000\nBergen,291000\n".to_vec(), None)
                    }
                    "/report.pdf" => ("200 OK", "application/pdf", report_pdf(), None),
                    "/scan.pdf" => {
                        ("200 OK", "application/pdf", engram::extract::pdf::build(&[None], None, None), None)
                    }
                    "/photo.png" => ("200 OK", "image/png", b"\x89PNG\r\n\x1a\n".to_vec(), None),
                    "/big" => ("200 OK", "text/plain", vec![b'a'; 2 << 20], None),
                    "/missing" => ("404 Not Found", "text/plain", b"no".to_vec(), None),
                    "/slow" => {
                        std::thread::sleep(Duration::from_secs(3));
                        ("200 OK", "text/plain", b"late words for the slow page".to_vec(), None)
                    }
                    p if p.starts_with("/r/") => {
                        let n: u32 = p[3..].parse().unwrap_or(0);
                        let to = if n == 0 { "/page.html".to_string() } else { format!("/r/{}", n - 1) };
                        ("302 Found", "text/plain", Vec::new(), Some(to))
                    }
                    _ => ("404 Not Found", "text/plain", Vec::new(), None),
                };
                let mut head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
                    body.len()
                );
                if let Some(l) = location {
                    head.push_str(&format!("Location: {l}\r\n"));
                }
                head.push_str("\r\n");
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            });
        }
    });
    (port, seen)
}

fn store(dir: &std::path::Path, allow: &[&str]) -> KnowledgeStore {
    let mut config = StoreConfig::new(dir);
    config.url_policy.allow_hosts = allow.iter().map(|s| s.to_string()).collect();
    config.url_policy.total_timeout = Duration::from_secs(1);
    config.url_policy.max_bytes = 1 << 20;
    KnowledgeStore::open(config).unwrap()
}

fn template() -> NewSource {
    NewSource { extract_memories: true, labels: vec!["web".into()], ..Default::default() }
}

#[test]
fn pages_redirects_timeouts_and_caps_on_an_allowed_loopback_host() {
    let (port, seen) = origin();
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), &["127.0.0.1"]);
    let base = format!("http://127.0.0.1:{port}");
    // An HTML page: parsed, titled, searchable, with its URL and fetch time.
    let r = s.sources().ingest_url(&format!("{base}/page.html"), template()).unwrap();
    let src = &r.source;
    assert_eq!((src.source_type.as_str(), src.mime_type.as_str()), ("url", "text/html"));
    assert_eq!(src.source_url, format!("{base}/page.html"));
    assert_eq!(src.original_name, "page.html");
    assert_eq!(src.metadata.0["title"], "Harbour & Pier Notes");
    assert!(src.metadata.0["fetched_at"].as_str().unwrap().starts_with("20"));
    assert_eq!(src.lifecycle_state, "indexed");
    assert!(s.sources().text(&src.id).unwrap().contains("forty thousand euros"));
    let tree: serde_json::Value = serde_json::from_str(&src.section_tree).unwrap();
    assert_eq!(tree[0]["title"], "Harbour renovation");
    // An article in a site's chrome: its main content only (navigation, header and footer dropped).
    let a = s.sources().ingest_url(&format!("{base}/article.html"), template()).unwrap().source;
    let text = s.sources().text(&a.id).unwrap();
    assert!(text.contains("boarding them far out at sea"), "{text}");
    for chrome in ["Topic number 7", "Sign in", "Privacy policy"] {
        assert!(!text.contains(chrome), "{chrome} kept: {text}");
    }
    assert_eq!(a.metadata.0["title"], "Harbour pilots - Portside News");
    // A CSV by URL: a data table.
    let csv = s.sources().ingest_url(&format!("{base}/data.csv"), template()).unwrap().source;
    assert_eq!(csv.mime_type, "text/csv");
    assert_eq!(s.sources().analyze(&csv.id, None, &[]).unwrap().sheets[0].row_count, 2);
    // Five redirects are followed (each new host resolved and checked again); the sixth is refused.
    let before = seen.load(Ordering::SeqCst);
    let r = s.sources().ingest_url(&format!("{base}/r/4"), NewSource { space_id: None, ..template() }).unwrap();
    assert!(r.deduplicated, "the redirect chain ends at the same page");
    assert_eq!(seen.load(Ordering::SeqCst) - before, 6, "5 redirects and the page");
    let e = s.sources().ingest_url(&format!("{base}/r/5"), template()).unwrap_err();
    assert_eq!((e.kind(), e.fields()[0].kind.as_str()), (ErrorKind::InvalidInput, "url_too_many_redirects"));
    // A slow server: cut off by the total timeout (1 s here), 504-kind, nothing stored.
    let t = std::time::Instant::now();
    let e = s.sources().ingest_url(&format!("{base}/slow"), template()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::UpstreamTimeout, "{e}");
    assert!(t.elapsed() < Duration::from_millis(2900), "cut off before the server answered");
    // Over the size cap (1 MiB here; the body is 2 MiB): cut off, nothing stored.
    let e = s.sources().ingest_url(&format!("{base}/big"), template()).unwrap_err();
    assert_eq!((e.kind(), e.fields()[0].kind.as_str()), (ErrorKind::InvalidInput, "document_too_large"), "{e}");
    // A PDF by URL: one section per page, the document's title, memories citing their page.
    let pdf = s.sources().ingest_url(&format!("{base}/report.pdf"), template()).unwrap();
    assert_eq!(pdf.source.mime_type, "application/pdf");
    assert_eq!(pdf.source.metadata.0["title"], "Harbour Report Q1");
    let tree: serde_json::Value = serde_json::from_str(&pdf.source.section_tree).unwrap();
    assert_eq!((tree[0]["title"].as_str(), tree[1]["title"].as_str()), (Some("Page 1"), Some("Page 2")));
    let pages: Vec<f64> =
        pdf.memory_ids.iter().map(|id| s.memories().get(id, None).unwrap().memory.source_range["page"]).collect();
    assert_eq!(pages, [1.0, 2.0]);
    assert!(s.sources().text(&pdf.source.id).unwrap().contains("twelve thousand euros"));
    // An image-only PDF, an error status and an unsupported type: refused, nothing stored.
    let e = s.sources().ingest_url(&format!("{base}/scan.pdf"), template()).unwrap_err();
    assert_eq!(e.fields()[0].kind, "unparsable_document");
    assert!(e.fields()[0].msg.contains("no text layer"), "{e}");
    assert_eq!(
        s.sources().ingest_url(&format!("{base}/missing"), template()).unwrap_err().kind(),
        ErrorKind::UpstreamUnreachable
    );
    let e = s.sources().ingest_url(&format!("{base}/photo.png"), template()).unwrap_err();
    assert_eq!(e.fields()[0].kind, "unsupported_format");
    let all = s
        .sources()
        .list(&engram::SourceQuery {
            space_id: "default".into(),
            source_type: None,
            lifecycle_state: None,
            labels: vec![],
            metadata: vec![],
            limit: 50,
            offset: 0,
        })
        .unwrap();
    assert_eq!(all.total, 4, "only the page, the article, the CSV and the PDF were stored");
}

#[test]
fn loopback_hosts_are_refused_without_a_connection_unless_allowed() {
    let (port, seen) = origin();
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), &[]);
    for host in ["127.0.0.1", "127.1.2.3", "localhost", "[::1]", "LOCALHOST", "0.0.0.0"] {
        let url = format!("http://{host}:{port}/page.html");
        let e = s.sources().ingest_url(&url, template()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{url}: {e}");
        assert_eq!(e.code(), "url_refused", "{url}");
        assert_eq!(e.fields()[0].kind, "url_refused", "{url}");
        assert!(e.fields()[0].msg.contains("loopback") || e.fields()[0].msg.contains("unspecified"), "{e:?}");
    }
    assert_eq!(seen.load(Ordering::SeqCst), 0, "no request reached the server");
    // Bad URLs.
    for (url, why) in [
        ("ftp://example.com/x", "only http and https"),
        ("http://user:pw@example.com/", "credentials"),
        ("not a url", "not a valid URL"),
        ("file:///etc/passwd", "only http and https"),
    ] {
        let e = s.sources().ingest_url(url, template()).unwrap_err();
        assert_eq!(e.fields()[0].kind, "url_invalid", "{url}");
        assert!(e.fields()[0].msg.contains(why), "{url}: {}", e.fields()[0].msg);
    }
}

#[test]
fn a_redirect_to_a_refused_host_is_checked_again() {
    let (port, seen) = origin();
    let dir = tempfile::tempdir().unwrap();
    // 127.0.0.1 is allowed, `localhost` is not: the chain starts on the first and is sent to the second.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let hop = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Some(Ok(mut stream)) = listener.incoming().next() {
            let mut buf = [0u8; 1024];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            let _ = write!(
                stream,
                "HTTP/1.1 302 Found\r\nLocation: http://localhost:{port}/page.html\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    let s = store(dir.path(), &["127.0.0.1"]);
    let e = s.sources().ingest_url(&format!("http://127.0.0.1:{hop}/start"), template()).unwrap_err();
    assert_eq!(e.code(), "url_refused", "{e}");
    assert!(e.fields()[0].msg.contains("'localhost'"), "{}", e.fields()[0].msg);
    assert_eq!(seen.load(Ordering::SeqCst), 0, "the redirect target saw no request");
}

#[test]
fn the_route_answers_the_spec_shapes() {
    use common::{call, server_on};
    let (port, _) = origin();
    let dir = tempfile::tempdir().unwrap();
    let srv = server_on(dir.path(), Arc::new(store(dir.path(), &["127.0.0.1"])), 1 << 20);
    let ok = call(
        &srv,
        "POST",
        "/sources/ingest/url",
        Some(&format!(r#"{{"url":"http://127.0.0.1:{port}/page.html","labels":["web"]}}"#)),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let v = ok.json();
    assert_eq!((v["source_type"].as_str(), v["label_ids"][0].as_str()), (Some("url"), Some("label_web")));
    assert_eq!(v["metadata"]["title"], "Harbour & Pier Notes");
    let refused = call(&srv, "POST", "/sources/ingest/url", Some(&format!(r#"{{"url":"http://localhost:{port}/"}}"#)));
    assert_eq!(refused.status, 422);
    assert_eq!(refused.json()["detail"][0]["loc"], serde_json::json!(["body", "url"]));
    assert_eq!(refused.json()["detail"][0]["type"], "url_refused");
    let missing =
        call(&srv, "POST", "/sources/ingest/url", Some(&format!(r#"{{"url":"http://127.0.0.1:{port}/missing"}}"#)));
    assert_eq!(
        (missing.status, missing.json()["error_code"].as_str()),
        (502, Some("url_unreachable")),
        "{}",
        missing.body
    );
    let slow = call(&srv, "POST", "/sources/ingest/url", Some(&format!(r#"{{"url":"http://127.0.0.1:{port}/slow"}}"#)));
    assert_eq!((slow.status, slow.json()["error_code"].as_str()), (504, Some("url_timeout")), "{}", slow.body);
    // A closed port: unreachable.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let gone = call(&srv, "POST", "/sources/ingest/url", Some(&format!(r#"{{"url":"http://127.0.0.1:{closed}/"}}"#)));
    assert_eq!(gone.status, 502, "{}", gone.body);
    assert_eq!(call(&srv, "POST", "/sources/ingest/url", Some("{}")).status, 422);
}
