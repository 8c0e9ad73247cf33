//! Main-content extraction of web pages, measured on saved real pages: how much of the page's own content the
//! text keeps (recall) and how much of the text is that content rather than navigation and boilerplate
//! (precision).
//!
//! `cargo bench --bench html -- PAGE.html=SELECTOR [PAGE.html=SELECTOR ...]`
//!
//! The gold text of a page is the text of the element that `SELECTOR` (CSS) picks, the page's own content
//! container (`main` for mdBook, `#main-content` for rustdoc, `#apicontent` for the Node.js API docs, ...),
//! converted by `html2text` as Engram converts HTML. Two texts are scored against it: the whole page converted
//! (Engram before main-content extraction) and Engram's `parse` of the page (main content, `dom_smoothie`).
//! Scores are over word tokens (lowercased alphanumeric runs) as multisets: precision = shared / tokens of the
//! text, recall = shared / tokens of the gold, F1 their harmonic mean. Time is the best of 3 parses.
//! `ENGRAM_HTML_DUMP=1` writes the gold and main-content texts beside each page (`PAGE.html.gold.txt`,
//! `PAGE.html.main.txt`) to see what was kept or lost.

use std::collections::HashMap;
use std::time::Instant;

use engram::extract::document::{Format, parse};

fn tokens(s: &str) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for t in s.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()) {
        *out.entry(t.to_lowercase()).or_insert(0) += 1;
    }
    out
}

/// (precision, recall, F1) of `got` against `gold`, over token multisets.
fn prf(got: &str, gold: &str) -> (f64, f64, f64) {
    let (g, w) = (tokens(got), tokens(gold));
    let shared: usize = g.iter().map(|(t, n)| (*n).min(w.get(t).copied().unwrap_or(0))).sum();
    let (ng, nw) = (g.values().sum::<usize>().max(1), w.values().sum::<usize>().max(1));
    let (p, r) = (shared as f64 / ng as f64, shared as f64 / nw as f64);
    (p, r, if p + r > 0.0 { 2.0 * p * r / (p + r) } else { 0.0 })
}

fn text(html: &str) -> String {
    html2text::config::plain().string_from_read(html.as_bytes(), 100_000).unwrap_or_default()
}

fn main() {
    let pages: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    if pages.is_empty() {
        eprintln!("usage: cargo bench --bench html -- PAGE.html=SELECTOR [PAGE.html=SELECTOR ...]");
        return;
    }
    println!("page | KiB | whole page P / R / F1 | main content P / R / F1 | main-content ms");
    let (mut sum_whole, mut sum_main, mut n) = (0.0, 0.0, 0);
    for arg in pages {
        let Some((path, selector)) = arg.rsplit_once('=') else {
            println!("{arg}: expected PAGE.html=SELECTOR");
            continue;
        };
        let html = match std::fs::read_to_string(path) {
            Ok(h) => h,
            Err(e) => {
                println!("{path}: {e}");
                continue;
            }
        };
        let doc = dom_query::Document::from(html.as_str());
        let sel = doc.select(selector);
        if !sel.exists() {
            println!("{path}: nothing matches {selector}");
            continue;
        }
        let gold = text(&sel.html());
        let whole = text(&html);
        let mut best = f64::INFINITY;
        let mut main = String::new();
        for _ in 0..3 {
            let t = Instant::now();
            main = parse(Format::Html, html.as_bytes(), "page.html").map(|p| p.text).unwrap_or_default();
            best = best.min(t.elapsed().as_secs_f64());
        }
        let (a, b) = (prf(&whole, &gold), prf(&main, &gold));
        if std::env::var_os("ENGRAM_HTML_DUMP").is_some() {
            let _ = std::fs::write(format!("{path}.gold.txt"), &gold);
            let _ = std::fs::write(format!("{path}.main.txt"), &main);
        }
        sum_whole += a.2;
        sum_main += b.2;
        n += 1;
        let name = path.rsplit('/').take(2).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("/");
        println!(
            "{name} | {:.0} | {:.3} / {:.3} / {:.3} | {:.3} / {:.3} / {:.3} | {:.1}",
            html.len() as f64 / 1024.0,
            a.0,
            a.1,
            a.2,
            b.0,
            b.1,
            b.2,
            best * 1000.0
        );
    }
    if n > 0 {
        println!(
            "mean F1 over {n} pages: whole page {:.3}, main content {:.3}",
            sum_whole / n as f64,
            sum_main / n as f64
        );
    }
}
