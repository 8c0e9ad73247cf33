//! PDF text extraction on real files: pages, characters, time and pages/s, and the fidelity of the text against
//! poppler's `pdftotext` as the reference.
//!
//! `cargo bench --bench pdf -- FILE.pdf [FILE.pdf ...] [--score PAGES.txt]`
//!
//! For each file: Engram's extraction (`engram::extract::pdf`, pdf-extract under the default bounds) is timed
//! (best of 3), then, when `pdftotext` is on the PATH (Debian: poppler-utils), each page is compared with
//! `pdftotext`'s page. The figure is a character-level similarity: 1 − Σ Levenshtein distance / Σ max(length)
//! over the pages, whitespace runs collapsed to one space first (layout spacing is not content), so 1.0 is the
//! same text and 0.0 nothing in common. With `--score PAGES.txt` (one file, pages separated by form feeds, as
//! `pdftotext` writes them) another extractor's output is scored the same way instead: `docs/formats.md` compares
//! pdf-extract and pdf_oxide so.

use std::process::Command;
use std::time::Instant;

use engram::extract::pdf::{PdfLimits, extract};

fn collapse(s: &str) -> Vec<char> {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    joined.chars().collect()
}

/// 1 − Σ distance / Σ max(length) over the pages of `got` and `want` (a missing page counts as empty).
fn similarity(got: &[String], want: &[String]) -> f64 {
    let (mut dist, mut len) = (0usize, 0usize);
    for i in 0..got.len().max(want.len()) {
        let a = collapse(got.get(i).map_or("", String::as_str));
        let b = collapse(want.get(i).map_or("", String::as_str));
        dist += strsim::generic_levenshtein(&a, &b);
        len += a.len().max(b.len());
    }
    if len == 0 { 1.0 } else { 1.0 - dist as f64 / len as f64 }
}

fn pdftotext(path: &str) -> Option<Vec<String>> {
    let out = Command::new("pdftotext").args(["-enc", "UTF-8", path, "-"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut pages: Vec<String> = text.split('\x0c').map(str::to_string).collect();
    if pages.last().is_some_and(|p| p.trim().is_empty()) {
        pages.pop();
    }
    Some(pages)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let score = args.iter().position(|a| a == "--score").and_then(|i| args.get(i + 1)).cloned();
    let files: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--score"))
        .map(|(_, a)| a)
        .collect();
    if files.is_empty() {
        eprintln!("usage: cargo bench --bench pdf -- FILE.pdf [FILE.pdf ...] [--score PAGES.txt]");
        return;
    }
    println!("file | pages | chars | ms | pages/s | similarity to pdftotext");
    let (mut all_pages, mut all_secs) = (0usize, 0f64);
    for path in files {
        let name = std::path::Path::new(path).file_name().and_then(|n| n.to_str()).unwrap_or(path).to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                println!("{name} | cannot read: {e}");
                continue;
            }
        };
        let (pages, secs) = if let Some(s) = &score {
            let text = std::fs::read_to_string(s).expect("read --score");
            let mut pages: Vec<String> = text.split('\x0c').map(str::to_string).collect();
            if pages.last().is_some_and(|p| p.trim().is_empty()) {
                pages.pop();
            }
            (pages, f64::NAN)
        } else {
            let mut best = f64::INFINITY;
            let mut pages = Vec::new();
            for _ in 0..3 {
                let t = Instant::now();
                match extract(&bytes, &PdfLimits::default()) {
                    Ok(text) => pages = text.pages,
                    Err(e) => {
                        println!("{name} | refused: {e}");
                        break;
                    }
                }
                best = best.min(t.elapsed().as_secs_f64());
            }
            if pages.is_empty() {
                continue;
            }
            (pages, best)
        };
        let chars: usize = pages.iter().map(|p| p.chars().count()).sum();
        let sim =
            pdftotext(path).map_or("(pdftotext not found)".to_string(), |r| format!("{:.4}", similarity(&pages, &r)));
        if secs.is_finite() {
            all_pages += pages.len();
            all_secs += secs;
        }
        println!(
            "{name} | {} | {chars} | {:.0} | {:.0} | {sim}",
            pages.len(),
            secs * 1000.0,
            pages.len() as f64 / secs
        );
    }
    if all_secs > 0.0 {
        println!("all | {all_pages} pages in {:.2} s: {:.0} pages/s", all_secs, all_pages as f64 / all_secs);
    }
}
