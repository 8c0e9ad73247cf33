//! Documents for the library: format detection, text extraction (markdown and plain text as they are; HTML
//! reduced to its main content ([`main_content`]) and converted through `html2text`, headings kept as `#`
//! lines), the section tree from headings, and chunking.
//!
//! Chunks follow the sections: a chunk never spans two sections, holds whole paragraphs (blocks separated by a
//! blank line) up to [`CHUNK_CHARS`] characters, and a longer paragraph is cut at a sentence end or a space.

use serde::Serialize;

/// Target chunk size in characters.
pub const CHUNK_CHARS: usize = 1_200;

/// The MIME type of DOCX files.
pub const DOCX_MIME: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

/// A format Engram can parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// CommonMark-style markdown (ATX `#` headings).
    Markdown,
    /// Plain text (no headings).
    Text,
    /// HTML, converted to text.
    Html,
    /// Comma-separated values (or semicolons, sniffed), RFC 4180 quoting: rendered row by row
    /// ([`super::table`]).
    Csv,
    /// Tab-separated values.
    Tsv,
    /// A Word document (DOCX), turned into markdown ([`super::docx`]).
    Docx,
    /// A PDF: the text of each page under a `# Page N` heading ([`super::pdf`]).
    Pdf,
}

impl Format {
    /// The MIME type recorded for this format.
    pub fn mime(self) -> &'static str {
        match self {
            Format::Markdown => "text/markdown",
            Format::Text => "text/plain",
            Format::Html => "text/html",
            Format::Csv => "text/csv",
            Format::Tsv => "text/tab-separated-values",
            Format::Docx => DOCX_MIME,
            Format::Pdf => "application/pdf",
        }
    }

    /// Whether a file of this format that cannot be parsed is refused (422, nothing stored) rather than kept in
    /// state `error`: binary formats, whose bytes say nothing to a reader.
    pub fn refuses_unparsable(self) -> bool {
        matches!(self, Format::Docx | Format::Pdf)
    }

    /// Whether the format is a data table (CSV, TSV): analysed by column ([`super::table::analyze`]).
    pub fn is_table(self) -> bool {
        matches!(self, Format::Csv | Format::Tsv)
    }

    /// The format of a file named `name` with declared MIME type `mime` (may be empty): the extension decides
    /// (`.md`, `.markdown`, `.txt`, `.text`, `.html`, `.htm`, `.csv`, `.tsv`, `.tab`, `.docx`, `.pdf`, and common
    /// plain-text extensions such as `.json`, `.log`), then the MIME type; None for anything else (images, other
    /// office files).
    pub fn detect(name: &str, mime: &str) -> Option<Format> {
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
        match ext.as_str() {
            "md" | "markdown" | "mdown" | "mkd" => return Some(Format::Markdown),
            "html" | "htm" | "xhtml" => return Some(Format::Html),
            "csv" => return Some(Format::Csv),
            "docx" => return Some(Format::Docx),
            "pdf" => return Some(Format::Pdf),
            "tsv" | "tab" => return Some(Format::Tsv),
            "txt" | "text" | "log" | "json" | "yaml" | "yml" | "toml" | "rst" | "org" => {
                return Some(Format::Text);
            }
            _ => {}
        }
        let m = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match m.as_str() {
            "text/markdown" | "text/x-markdown" => Some(Format::Markdown),
            "text/html" | "application/xhtml+xml" => Some(Format::Html),
            "text/csv" | "application/csv" => Some(Format::Csv),
            "text/tab-separated-values" => Some(Format::Tsv),
            DOCX_MIME => Some(Format::Docx),
            "application/pdf" | "application/x-pdf" => Some(Format::Pdf),
            m if m.starts_with("text/") => Some(Format::Text),
            _ if ext.is_empty() && m.is_empty() => Some(Format::Text),
            _ => None,
        }
    }
}

/// One heading and what follows it up to the next heading of the same or a higher level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SectionNode {
    /// Heading text.
    pub title: String,
    /// 1..=6.
    pub level: u8,
    /// Byte offset of the heading line in the parsed text.
    pub offset: usize,
    /// Bytes up to the next heading of the same or a higher level (or the end).
    pub length: usize,
    /// Sub-sections.
    pub children: Vec<SectionNode>,
}

/// A chunk of the parsed text (a record of the store, so defined with the source record in [`crate::model`]).
pub use crate::model::Chunk;

/// A parsed document.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The text (markdown for markdown and HTML input).
    pub text: String,
    /// Top-level sections.
    pub sections: Vec<SectionNode>,
    /// Chunks in text order.
    pub chunks: Vec<Chunk>,
    /// The first heading, if any.
    pub title: Option<String>,
}

/// Parses `bytes` as `format`; `name` (the file name) names a data table in its rendering. Invalid UTF-8 is
/// replaced (U+FFFD); a byte-order mark and `\r` are dropped.
///
/// # Errors
/// A message when HTML cannot be converted or a data table cannot be read.
pub fn parse(format: Format, bytes: &[u8], name: &str) -> Result<Parsed, String> {
    if format.is_table() {
        let table = super::table::parse(bytes, format == Format::Tsv)?;
        return Ok(super::table::render(&table, name));
    }
    if format == Format::Docx {
        return parse(Format::Markdown, super::docx::to_markdown(bytes)?.as_bytes(), name);
    }
    if format == Format::Pdf {
        let pdf = super::pdf::extract(bytes, &super::pdf::PdfLimits::default())?;
        let mut parsed = parse(Format::Markdown, super::pdf::to_markdown(&pdf).as_bytes(), name)?;
        // The title: the document's own, else its first line of text (not the synthetic `Page 1`).
        parsed.title = pdf.title.clone().or_else(|| {
            pdf.pages
                .iter()
                .flat_map(|p| p.lines())
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(|l| l.chars().take(120).collect())
        });
        return Ok(parsed);
    }
    let raw = String::from_utf8_lossy(bytes);
    let raw = raw.strip_prefix('\u{feff}').unwrap_or(&raw).replace("\r\n", "\n").replace('\r', "\n");
    let text = match format {
        Format::Markdown | Format::Text | Format::Csv | Format::Tsv | Format::Docx | Format::Pdf => raw,
        // A converter panic on odd markup must not take the request down: it becomes a parse error.
        Format::Html => {
            let main = main_content(&raw);
            let html = main.as_deref().unwrap_or(&raw);
            std::panic::catch_unwind(|| html2text::config::plain().string_from_read(html.as_bytes(), 100_000))
                .map_err(|_| "the HTML could not be converted".to_string())?
                .map_err(|e| format!("the HTML could not be converted: {e}"))?
        }
    };
    let headings = if format == Format::Text { Vec::new() } else { headings(&text) };
    let sections = tree(&headings, text.len());
    let chunks = chunk(&text, &headings);
    let title = headings.first().map(|h| h.2.clone());
    Ok(Parsed { text, sections, chunks, title })
}

/// Most elements of a page that main-content extraction reads; a larger page is converted whole.
pub const MAIN_CONTENT_MAX_ELEMENTS: usize = 100_000;

/// The main content of an HTML page, as HTML: Mozilla's Readability algorithm (the one behind Firefox's Reader
/// View, <https://github.com/mozilla/readability>), ported by `dom_smoothie`. Navigation, headers, footers,
/// sidebars, comment and share blocks are dropped by their link density, class and id names, and the text
/// score of the candidate blocks. The page's title (Readability's, from `<title>` without the site name, or
/// the page's metadata) leads as a `<h1>` when the content does not start with it.
///
/// `None`, and the page is then converted whole, when the page is not "probably readerable" (Readability's
/// `isProbablyReaderable`: less than about 140 characters in paragraph-like blocks with a score of 20, such as
/// a short note, a form or a list of links), when it has more than [`MAIN_CONTENT_MAX_ELEMENTS`] elements,
/// when the extraction fails or finds no text, or when the extractor panics. Figures on real pages:
/// `docs/formats.md`.
pub fn main_content(html: &str) -> Option<String> {
    let html = html.to_string();
    std::panic::catch_unwind(move || {
        let cfg = dom_smoothie::Config { max_elements_to_parse: MAIN_CONTENT_MAX_ELEMENTS, ..Default::default() };
        let mut readability = dom_smoothie::Readability::new(html, None, Some(cfg)).ok()?;
        if !readability.is_probably_readable() {
            return None;
        }
        let article = readability.parse().ok()?;
        if article.text_content.trim().is_empty() {
            return None;
        }
        // Readability drops the heading that repeats the page's title; it comes back as the top heading, so the
        // section tree keeps the document's name.
        let title = article.title.trim();
        let head: String = article.text_content.trim_start().chars().take(title.chars().count() + 40).collect();
        if title.is_empty() || head.contains(title) {
            return Some(article.content.to_string());
        }
        Some(format!("<h1>{}</h1>{}", html_escape::encode_text(title), article.content))
    })
    .ok()
    .flatten()
}

/// ATX headings outside fenced code blocks: (byte offset, level, title).
fn headings(text: &str) -> Vec<(usize, u8, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced || line.len() - t.len() > 3 {
            continue;
        }
        let level = t.bytes().take_while(|b| *b == b'#').count();
        if !(1..=6).contains(&level) {
            continue;
        }
        let rest = &t[level..];
        if !(rest.starts_with(' ') || rest.starts_with('\t') || rest.trim().is_empty()) {
            continue;
        }
        let title = rest.trim().trim_end_matches('#').trim().to_string();
        if !title.is_empty() {
            out.push((start, level as u8, title));
        }
    }
    out
}

fn tree(headings: &[(usize, u8, String)], total: usize) -> Vec<SectionNode> {
    fn build(h: &[(usize, u8, String)], i: &mut usize, level: u8, total: usize) -> Vec<SectionNode> {
        let mut out = Vec::new();
        while *i < h.len() && h[*i].1 > level {
            let (offset, lv, title) = h[*i].clone();
            *i += 1;
            let children = build(h, i, lv, total);
            let end = h[*i..].iter().find(|x| x.1 <= lv).map_or(total, |x| x.0);
            out.push(SectionNode { title, level: lv, offset, length: end - offset, children });
        }
        out
    }
    let mut i = 0;
    build(headings, &mut i, 0, total)
}

/// The largest char boundary of `s` at or below `i`.
pub fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn chunk(text: &str, headings: &[(usize, u8, String)]) -> Vec<Chunk> {
    // Section spans: [start, end) with their heading path.
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    let mut path: Vec<(u8, String)> = Vec::new();
    let first = headings.first().map_or(text.len(), |h| h.0);
    if first > 0 {
        spans.push((0, first, String::new()));
    }
    for (k, (off, lv, title)) in headings.iter().enumerate() {
        path.retain(|(l, _)| l < lv);
        path.push((*lv, title.clone()));
        let end = headings.get(k + 1).map_or(text.len(), |h| h.0);
        spans.push((*off, end, path.iter().map(|p| p.1.as_str()).collect::<Vec<_>>().join(" > ")));
    }
    let mut out = Vec::new();
    for (start, end, section) in spans {
        let mut cur: Option<(usize, usize)> = None;
        let push = |s: usize, e: usize, out: &mut Vec<Chunk>| {
            if text[s..e].trim().is_empty() {
                return;
            }
            out.push(Chunk { offset: s as u64, length: (e - s) as u64, section: section.clone() });
        };
        for (bs, be) in blocks(text, start, end) {
            if let Some((cs, ce)) = cur {
                if text[cs..be].chars().count() <= CHUNK_CHARS {
                    cur = Some((cs, be));
                    continue;
                }
                push(cs, ce, &mut out);
            }
            // A block longer than a chunk is cut.
            let mut s = bs;
            while text[s..be].chars().count() > CHUNK_CHARS {
                let limit = text[s..].char_indices().nth(CHUNK_CHARS).map_or(be, |(i, _)| s + i);
                let window = &text[s..limit];
                let cut = window
                    .rfind(". ")
                    .map(|i| s + i + 2)
                    .or_else(|| {
                        window
                            .rfind(char::is_whitespace)
                            .map(|i| s + i + window[i..].chars().next().map_or(1, char::len_utf8))
                    })
                    .filter(|c| *c > s + CHUNK_CHARS / 4)
                    .unwrap_or(limit);
                push(s, cut, &mut out);
                s = cut;
            }
            cur = Some((s, be));
        }
        if let Some((cs, ce)) = cur {
            push(cs, ce, &mut out);
        }
    }
    out
}

/// Paragraph blocks of `text[start..end]`: runs of non-blank lines (byte ranges).
fn blocks(text: &str, start: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = start;
    let mut cur: Option<usize> = None;
    for line in text[start..end].split_inclusive('\n') {
        let ls = pos;
        pos += line.len();
        if line.trim().is_empty() {
            if let Some(s) = cur.take() {
                out.push((s, ls));
            }
        } else if cur.is_none() {
            cur = Some(ls);
        }
    }
    if let Some(s) = cur {
        out.push((s, end));
    }
    out
}

/// The first sentences of `text` outside headings, up to `max` characters.
pub fn summary(text: &str, max: usize) -> String {
    let body: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("```"))
        .take(12)
        .collect();
    let joined = body.join(" ");
    if joined.chars().count() <= max {
        return joined;
    }
    let cut: String = joined.chars().take(max).collect();
    match cut.rfind(". ") {
        Some(i) if i > max / 3 => cut[..=i].to_string(),
        _ => cut.rsplit_once(' ').map_or(cut.clone(), |(a, _)| a.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_sections_and_chunks() {
        let md = "# Guide\n\nIntro text.\n\n## Install\n\nRun it.\n\n```\n# not a heading\n```\n\n## Use\n\nCall it.\n";
        let p = parse(Format::Markdown, md.as_bytes(), "t").unwrap();
        assert_eq!(p.title.as_deref(), Some("Guide"));
        assert_eq!(p.sections.len(), 1);
        let g = &p.sections[0];
        assert_eq!(g.length, md.len());
        let kids: Vec<&str> = g.children.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(kids, ["Install", "Use"]);
        assert_eq!(&md[g.children[1].offset..g.children[1].offset + g.children[1].length], "## Use\n\nCall it.\n");
        let secs: Vec<&str> = p.chunks.iter().map(|c| c.section.as_str()).collect();
        assert_eq!(secs, ["Guide", "Guide > Install", "Guide > Use"]);
        let c = &p.chunks[1];
        assert!(md[c.offset as usize..(c.offset + c.length) as usize].contains("# not a heading"));
    }

    #[test]
    fn long_paragraphs_are_cut_within_the_limit() {
        let para = "This sentence has some words in it. ".repeat(200);
        let p = parse(Format::Text, para.as_bytes(), "t").unwrap();
        assert!(p.chunks.len() >= 6);
        let covered: u64 = p.chunks.iter().map(|c| c.length).sum();
        assert_eq!(covered as usize, para.len());
        for c in &p.chunks {
            assert!(para[c.offset as usize..(c.offset + c.length) as usize].chars().count() <= CHUNK_CHARS);
        }
    }

    #[test]
    fn html_headings_become_sections() {
        let html = "<html><body><h1>Title</h1><p>First para.</p><h2>Part</h2><p>More <b>text</b>.</p></body></html>";
        let p = parse(Format::Html, html.as_bytes(), "t").unwrap();
        assert_eq!(p.sections[0].title, "Title");
        assert_eq!(p.sections[0].children[0].title, "Part");
        assert!(p.text.contains("More"), "{}", p.text);
        assert!(!p.text.contains("<b>"));
    }

    #[test]
    fn pages_lose_their_navigation_and_boilerplate() {
        let para = "The harbour pilots of Rotterdam guide about thirty thousand ships a year through the \
                    Maas estuary, boarding them far out at sea by launch or by helicopter in rough weather. ";
        let links: String = (0..30).map(|i| format!("<li><a href=\"/topic/{i}\">Topic number {i}</a></li>")).collect();
        let html = format!(
            "<html><head><title>Pilots</title></head><body>\
             <header class=\"site-header\"><a href=\"/\">Portside News</a> <a href=\"/login\">Sign in</a></header>\
             <nav class=\"sidebar\"><ul>{links}</ul></nav>\
             <article><h1>Harbour pilots</h1><p>{p}</p><h2>Helicopters</h2><p>{p}</p><p>{p}</p></article>\
             <footer class=\"footer\">Copyright Portside Media. <a href=\"/privacy\">Privacy policy</a></footer>\
             </body></html>",
            p = para.repeat(2)
        );
        assert!(main_content(&html).is_some());
        let p = parse(Format::Html, html.as_bytes(), "t").unwrap();
        assert!(p.text.contains("harbour pilots of Rotterdam"), "{}", p.text);
        assert!(p.text.contains("Helicopters"), "{}", p.text);
        assert_eq!(p.sections[0].title, "Pilots", "the page title leads: {}", p.text);
        assert_eq!(p.sections[0].children[0].title, "Harbour pilots", "{}", p.text);
        for boilerplate in ["Topic number 7", "Sign in", "Privacy policy", "Copyright Portside"] {
            assert!(!p.text.contains(boilerplate), "{boilerplate} kept: {}", p.text);
        }
        // A short page is not "readerable": converted whole.
        assert_eq!(main_content("<html><body><h1>Title</h1><p>First para.</p></body></html>"), None);
    }

    #[test]
    fn long_runs_without_ascii_spaces_are_cut_on_character_boundaries() {
        // Ideographic spaces (3 bytes) and no ". ": the cut lands after a whole character.
        let text = "語\u{3000}".repeat(900);
        let p = parse(Format::Text, text.as_bytes(), "t").unwrap();
        assert!(p.chunks.len() >= 2);
        let covered: u64 = p.chunks.iter().map(|c| c.length).sum();
        assert_eq!(covered as usize, text.len());
        for c in &p.chunks {
            assert!(text.is_char_boundary(c.offset as usize));
        }
    }

    #[test]
    fn detection() {
        assert_eq!(Format::detect("a.MD", ""), Some(Format::Markdown));
        assert_eq!(Format::detect("a.pdf", "application/pdf"), Some(Format::Pdf));
        assert_eq!(Format::detect("report", "application/x-pdf"), Some(Format::Pdf));
        assert_eq!(Format::detect("a.png", "image/png"), None);
        assert_eq!(Format::detect("notes", "text/plain; charset=utf-8"), Some(Format::Text));
        assert_eq!(Format::detect("page", "text/html"), Some(Format::Html));
        assert_eq!(Format::detect("x.bin", "application/octet-stream"), None);
        assert_eq!(Format::detect("a.CSV", ""), Some(Format::Csv));
        assert_eq!(Format::detect("a.tsv", ""), Some(Format::Tsv));
        assert_eq!(Format::detect("export", "text/csv; charset=utf-8"), Some(Format::Csv));
    }
}
