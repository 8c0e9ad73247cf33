//! PDF: the text of each page, with [`pdf-extract`](https://crates.io/crates/pdf-extract) (its content-stream
//! interpreter, fonts and encodings; `lopdf` underneath for the file structure), under bounds that make a hostile
//! or broken file a clear refusal rather than a panic, a hang or an allocation storm.
//!
//! The pages become one markdown document with a `# Page N` heading per page (1-based, as printed by viewers),
//! so the section tree and the chunks follow the pages: a chunk never spans two pages, its section names the
//! page, and the memories made from it carry `page` in `source_range`. Lines of the page text that markdown
//! would read as a heading or a code fence are escaped with a backslash.
//!
//! Bounds per document ([`PdfLimits`], defaults in [`PdfLimits::default`]):
//! - at most 10,000 pages;
//! - every Flate-compressed stream that is not an image is inflated once, through a counter, before the
//!   extraction reads it: a stream over 256 MiB, or 1 GiB in all, is refused (a PDF "bomb");
//! - at most 64 Mi characters of text;
//! - 60 s of extraction: the interpreter checks the clock at every character, and the caller stops waiting a
//!   second after the deadline (a thread stuck inside the parser is then left to finish on its own).
//!
//! References to objects the file does not hold are read as the null object (ISO 32000-1, 7.3.10) before the
//! extraction, which would otherwise panic on them.
//!
//! Refused with a reason (the caller answers 422 `unparsable_document`): not a PDF, a PDF that cannot be read,
//! encrypted with a password (an empty user password, common for "no printing" files, is opened), no text
//! layer (scanned or image-only: OCR is not built in), a bound exceeded.
//!
//! Comparison with `pdf_oxide` and the figures against `pdftotext`: `docs/formats.md`.

use std::io::Read;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pdf_extract::{Document, MediaBox, Object, OutputDev, OutputError, PlainTextOutput, Transform};

/// Bounds applied to one PDF.
#[derive(Debug, Clone)]
pub struct PdfLimits {
    /// Most pages read (default 10,000).
    pub max_pages: usize,
    /// Most bytes one inflated stream may reach (default 256 MiB).
    pub max_stream_bytes: u64,
    /// Most bytes all inflated streams may reach together (default 1 GiB).
    pub max_total_bytes: u64,
    /// Most characters of text (default 64 Mi).
    pub max_chars: usize,
    /// Wall-clock budget of the extraction (default 60 s).
    pub time: Duration,
}

impl Default for PdfLimits {
    fn default() -> Self {
        PdfLimits {
            max_pages: 10_000,
            max_stream_bytes: 256 << 20,
            max_total_bytes: 1 << 30,
            max_chars: 64 << 20,
            time: Duration::from_secs(60),
        }
    }
}

/// The text of a PDF.
#[derive(Debug, Clone, PartialEq)]
pub struct PdfText {
    /// One string per page, in page order (an unreadable page is empty).
    pub pages: Vec<String>,
    /// The document information dictionary's `Title`, when set and not blank.
    pub title: Option<String>,
    /// Pages whose content could not be interpreted (1-based); their text is empty.
    pub failed_pages: Vec<u32>,
}

/// Whether `bytes` look like a PDF: `%PDF-` within the first 1,024 bytes (viewers accept leading junk).
pub fn is_pdf(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(1024)].windows(5).any(|w| w == b"%PDF-")
}

/// The text of each page of the PDF in `bytes`, within `limits`.
///
/// # Errors
/// A reason, for a file that is not a PDF, cannot be read, is encrypted with a password, has no text on any
/// page, or exceeds a bound.
pub fn extract(bytes: &[u8], limits: &PdfLimits) -> Result<PdfText, String> {
    if !is_pdf(bytes) {
        return Err("the file is not a PDF (no %PDF- header)".into());
    }
    let (tx, rx) = mpsc::channel();
    let data = bytes.to_vec();
    let lim = limits.clone();
    let deadline = Instant::now() + limits.time;
    let spawned = std::thread::Builder::new().name("engram-pdf".into()).spawn(move || {
        // pdf-extract and lopdf panic on some malformed files (unwrap on a missing dictionary entry): a panic
        // is a refusal, not a crash.
        let out = std::panic::catch_unwind(|| extract_inner(&data, &lim, deadline))
            .unwrap_or_else(|_| Err("the PDF is malformed (the parser gave up)".into()));
        let _ = tx.send(out);
    });
    if let Err(e) = spawned {
        return Err(format!("the PDF reader could not start: {e}"));
    }
    match rx.recv_timeout(limits.time + Duration::from_secs(1)) {
        Ok(out) => out,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(time_error(limits)),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("the PDF is malformed (the parser gave up)".into()),
    }
}

fn time_error(limits: &PdfLimits) -> String {
    format!("reading the PDF took longer than {} s", limits.time.as_secs_f64())
}

fn extract_inner(bytes: &[u8], limits: &PdfLimits, deadline: Instant) -> Result<PdfText, String> {
    let mut doc = match Document::load_mem(bytes) {
        Ok(d) => d,
        Err(pdf_extract::Error::Decryption(_)) => return Err(encrypted()),
        Err(e) => return Err(format!("the PDF cannot be read: {e}")),
    };
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(encrypted());
    }
    if doc.is_encrypted() {
        return Err(encrypted());
    }
    check_streams(&doc, limits)?;
    null_dangling_references(&mut doc);
    let pages = doc.get_pages();
    if pages.len() > limits.max_pages {
        return Err(format!("the PDF has {} pages; at most {} are read", pages.len(), limits.max_pages));
    }
    let mut out = PdfText { pages: Vec::with_capacity(pages.len()), title: title(&doc), failed_pages: Vec::new() };
    let mut chars = 0usize;
    for &number in pages.keys() {
        let mut text = String::new();
        let mut stop = None;
        let result = {
            let mut guard = Guarded {
                inner: PlainTextOutput::new(&mut text),
                deadline,
                chars_left: limits.max_chars.saturating_sub(chars),
                stop: &mut stop,
            };
            pdf_extract::output_doc_page(&doc, &mut guard, number)
        };
        match stop {
            Some(Stop::Time) => return Err(time_error(limits)),
            Some(Stop::Chars) => {
                return Err(format!("the PDF holds more than {} characters of text", limits.max_chars));
            }
            None => {}
        }
        if result.is_err() {
            out.failed_pages.push(number);
            text.clear();
        }
        chars += text.chars().count();
        out.pages.push(text);
    }
    if out.pages.iter().all(|p| p.trim().is_empty()) {
        return Err(if out.pages.is_empty() {
            "the PDF has no pages".into()
        } else {
            "the PDF has no text layer (scanned or image-only; OCR is not built in)".into()
        });
    }
    Ok(out)
}

/// Replaces every reference to an object the file does not hold with the null object, which is what such a
/// reference means (ISO 32000-1:2008, 7.3.10: "An indirect reference to an undefined object shall not be
/// considered an error by a conforming reader; it shall be treated as a reference to the null object").
/// pdf-extract panics on one instead. Iterative, so deeply nested arrays cannot overflow the stack.
fn null_dangling_references(doc: &mut Document) {
    let ids: std::collections::HashSet<pdf_extract::ObjectId> = doc.objects.keys().copied().collect();
    let mut stack: Vec<&mut Object> = doc.objects.values_mut().collect();
    stack.extend(doc.trailer.iter_mut().map(|(_, v)| v));
    while let Some(o) = stack.pop() {
        match o {
            Object::Reference(r) if !ids.contains(r) => *o = Object::Null,
            Object::Array(a) => stack.extend(a.iter_mut()),
            Object::Dictionary(d) => stack.extend(d.iter_mut().map(|(_, v)| v)),
            Object::Stream(s) => stack.extend(s.dict.iter_mut().map(|(_, v)| v)),
            _ => {}
        }
    }
}

fn encrypted() -> String {
    "the PDF is encrypted with a password".into()
}

/// Inflates every Flate-compressed stream that is not an image through a counter ([`PdfLimits`]).
fn check_streams(doc: &Document, limits: &PdfLimits) -> Result<(), String> {
    let mut total = 0u64;
    for obj in doc.objects.values() {
        let Object::Stream(s) = obj else { continue };
        if s.dict.get(b"Subtype").and_then(Object::as_name).is_ok_and(|n| n == b"Image") {
            continue;
        }
        if !s.filters().is_ok_and(|f| f.first().is_some_and(|f| *f == b"FlateDecode")) {
            continue;
        }
        let mut inflated = flate2::read::ZlibDecoder::new(s.content.as_slice()).take(limits.max_stream_bytes + 1);
        let n = std::io::copy(&mut inflated, &mut std::io::sink()).unwrap_or(0);
        if n > limits.max_stream_bytes {
            return Err(format!("a stream of the PDF expands beyond {}", size(limits.max_stream_bytes)));
        }
        total += n;
        if total > limits.max_total_bytes {
            return Err(format!("the PDF's streams expand beyond {} in all", size(limits.max_total_bytes)));
        }
    }
    Ok(())
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// The information dictionary's `Title` (PDFDocEncoding or UTF-16 with a byte-order mark).
fn title(doc: &Document) -> Option<String> {
    let info = doc.trailer.get(b"Info").ok()?;
    let (_, info) = doc.dereference(info).ok()?;
    let t = info.as_dict().ok()?.get(b"Title").ok()?;
    let (_, t) = doc.dereference(t).ok()?;
    let raw = t.as_str().ok()?;
    let s = if raw.starts_with(&[0xFE, 0xFF]) {
        let units: Vec<u16> = raw[2..].chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
        String::from_utf16_lossy(&units)
    } else if raw.starts_with(&[0xEF, 0xBB, 0xBF]) {
        String::from_utf8_lossy(&raw[3..]).into_owned()
    } else {
        // PDFDocEncoding agrees with Latin-1 on the printable range.
        raw.iter().map(|&b| b as char).collect()
    };
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    (!s.is_empty()).then_some(s)
}

/// Why the guard stopped the interpreter.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Time,
    Chars,
}

/// pdf-extract's plain-text layout, with the clock and the character budget checked at every character.
struct Guarded<'a, O: OutputDev> {
    inner: O,
    deadline: Instant,
    chars_left: usize,
    stop: &'a mut Option<Stop>,
}

impl<O: OutputDev> Guarded<'_, O> {
    fn halt(&mut self, why: Stop) -> Result<(), OutputError> {
        *self.stop = Some(why);
        Err(OutputError::FormatError(std::fmt::Error))
    }
}

impl<O: OutputDev> OutputDev for Guarded<'_, O> {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.inner.begin_page(page_num, media_box, art_box)
    }
    fn end_page(&mut self) -> Result<(), OutputError> {
        self.inner.end_page()
    }
    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        if Instant::now() > self.deadline {
            return self.halt(Stop::Time);
        }
        let n = char.chars().count() + 1;
        if n > self.chars_left {
            return self.halt(Stop::Chars);
        }
        self.chars_left -= n;
        self.inner.output_character(trm, width, spacing, font_size, char)
    }
    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.inner.begin_word()
    }
    fn end_word(&mut self) -> Result<(), OutputError> {
        self.inner.end_word()
    }
    fn end_line(&mut self) -> Result<(), OutputError> {
        self.inner.end_line()
    }
}

/// The pages as one markdown document: `# Page N` before each page's text (blank pages keep their heading so
/// the numbering stays visible), lines escaped where markdown would read a heading or a fence.
pub fn to_markdown(pdf: &PdfText) -> String {
    let mut out = String::new();
    for (i, page) in pdf.pages.iter().enumerate() {
        out.push_str(&format!("# Page {}\n\n", i + 1));
        for line in page.lines() {
            let t = line.trim_start();
            if t.starts_with('#') || t.starts_with("```") || t.starts_with("~~~") {
                out.push_str(&line[..line.len() - t.len()]);
                out.push('\\');
                out.push_str(t);
            } else {
                out.push_str(line.trim_end());
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// The page a chunk's section names (`Page 7` → 7), for PDF sources.
pub fn page_of_section(section: &str) -> Option<u32> {
    section.split(" > ").next()?.strip_prefix("Page ")?.parse().ok()
}

/// A PDF of `pages` (each line of a page's text drawn as a line in Helvetica, 11 pt), with `title` in the
/// information dictionary and, with `password`, encrypted (RC4, 128-bit) with that user password. Pages that
/// are `None` carry a filled rectangle and no text (as a scan would). For tests, fuzz seeds and benchmarks.
///
/// # Panics
/// When lopdf cannot write the document (not on any input this is called with).
#[doc(hidden)]
pub fn build(pages: &[Option<&str>], title: Option<&str>, password: Option<&str>) -> Vec<u8> {
    use pdf_extract::content::{Content, Operation};
    use pdf_extract::{Dictionary, Stream, StringFormat};
    let dict = |pairs: Vec<(&str, Object)>| {
        let mut d = Dictionary::new();
        for (k, v) in pairs {
            d.set(k, v);
        }
        d
    };
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font = doc.add_object(dict(vec![
        ("Type", Object::Name(b"Font".to_vec())),
        ("Subtype", Object::Name(b"Type1".to_vec())),
        ("BaseFont", Object::Name(b"Helvetica".to_vec())),
    ]));
    let resources = doc.add_object(dict(vec![("Font", Object::Dictionary(dict(vec![("F1", font.into())])))]));
    let mut kids = Vec::new();
    for page in pages {
        let mut ops = Vec::new();
        match page {
            Some(text) => {
                for (i, line) in text.lines().enumerate() {
                    ops.push(Operation::new("BT", vec![]));
                    ops.push(Operation::new("Tf", vec![Object::Name(b"F1".to_vec()), 11.into()]));
                    ops.push(Operation::new("Td", vec![72.into(), (770 - 14 * i as i64).into()]));
                    ops.push(Operation::new(
                        "Tj",
                        vec![Object::String(line.as_bytes().to_vec(), StringFormat::Literal)],
                    ));
                    ops.push(Operation::new("ET", vec![]));
                }
            }
            None => {
                ops.push(Operation::new("re", vec![72.into(), 72.into(), 400.into(), 600.into()]));
                ops.push(Operation::new("f", vec![]));
            }
        }
        let content = Content { operations: ops }.encode().expect("encode a content stream");
        let content = doc.add_object(Stream::new(Dictionary::new(), content));
        let page = doc.add_object(dict(vec![
            ("Type", Object::Name(b"Page".to_vec())),
            ("Parent", pages_id.into()),
            ("Contents", content.into()),
        ]));
        kids.push(page.into());
    }
    let count = kids.len() as i64;
    let media = vec![0.into(), 0.into(), 595.into(), 842.into()];
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dict(vec![
            ("Type", Object::Name(b"Pages".to_vec())),
            ("Kids", Object::Array(kids)),
            ("Count", count.into()),
            ("Resources", resources.into()),
            ("MediaBox", Object::Array(media)),
        ])),
    );
    let catalog = doc.add_object(dict(vec![("Type", Object::Name(b"Catalog".to_vec())), ("Pages", pages_id.into())]));
    doc.trailer.set("Root", catalog);
    if let Some(t) = title {
        let info = doc.add_object(dict(vec![("Title", Object::String(t.as_bytes().to_vec(), StringFormat::Literal))]));
        doc.trailer.set("Info", info);
    }
    let id = Object::String(b"engram-test-0001".to_vec(), StringFormat::Hexadecimal);
    doc.trailer.set("ID", Object::Array(vec![id.clone(), id]));
    doc.compress();
    if let Some(pw) = password {
        let version = pdf_extract::EncryptionVersion::V2 {
            document: &doc,
            owner_password: "owner",
            user_password: pw,
            key_length: 128,
            permissions: pdf_extract::Permissions::all(),
        };
        let state = pdf_extract::EncryptionState::try_from(version).expect("encryption state");
        doc.encrypt(&state).expect("encrypt");
    }
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("write the PDF");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_escapes_headings_and_fences_and_numbers_pages() {
        let pdf = PdfText {
            pages: vec!["Intro\n# include <x.h>\n```\n".into(), String::new(), "End".into()],
            title: None,
            failed_pages: vec![],
        };
        let md = to_markdown(&pdf);
        assert_eq!(md, "# Page 1\n\nIntro\n\\# include <x.h>\n\\```\n\n# Page 2\n\n\n# Page 3\n\nEnd\n\n");
        assert_eq!(page_of_section("Page 12"), Some(12));
        assert_eq!(page_of_section("Intro"), None);
    }

    #[test]
    fn refusals_name_the_reason() {
        let l = PdfLimits::default();
        assert!(extract(b"hello", &l).unwrap_err().contains("not a PDF"));
        assert!(extract(b"%PDF-1.4\ngarbage", &l).unwrap_err().contains("cannot be read"));
        let scan = build(&[None, None], None, None);
        assert!(extract(&scan, &l).unwrap_err().contains("no text layer"), "{:?}", extract(&scan, &l));
        let locked = build(&[Some("Secret plans")], None, Some("hunter2"));
        assert!(extract(&locked, &l).unwrap_err().contains("encrypted"), "{:?}", extract(&locked, &l));
        let full = build(&[Some("x")], None, None);
        assert!(extract(&full[..full.len() / 2], &l).is_err());
    }

    #[test]
    fn pages_title_and_an_empty_user_password() {
        let l = PdfLimits::default();
        let bytes = build(&[Some("First page line one\nline two"), None, Some("Third page")], Some("A Report"), None);
        let pdf = extract(&bytes, &l).unwrap();
        assert_eq!(pdf.pages.len(), 3);
        assert!(pdf.pages[0].contains("First page line one"), "{:?}", pdf.pages);
        assert!(pdf.pages[0].contains("line two"));
        assert!(pdf.pages[1].trim().is_empty());
        assert!(pdf.pages[2].contains("Third page"));
        assert_eq!(pdf.title.as_deref(), Some("A Report"));
        // "No printing" files: encrypted with an empty user password, opened without asking.
        let open = build(&[Some("Readable anyway")], None, Some(""));
        assert!(extract(&open, &l).unwrap().pages[0].contains("Readable anyway"));
    }

    #[test]
    fn a_reference_to_a_missing_object_is_null() {
        // pdf-extract panicked on this (found by the fuzz target): a page whose MediaBox and Resources point at
        // objects the file does not hold. Read as nulls (ISO 32000-1, 7.3.10), the page inherits both.
        let mut doc = Document::load_mem(&build(&[Some("Dangling but readable")], None, None)).unwrap();
        let page = *doc.get_pages().values().next().unwrap();
        let dict = doc.get_object_mut(page).unwrap().as_dict_mut().unwrap();
        dict.set("MediaBox", Object::Reference((999, 0)));
        dict.set("Resources", Object::Reference((998, 0)));
        let mut bytes = Vec::new();
        doc.save_to(&mut bytes).unwrap();
        let pdf = extract(&bytes, &PdfLimits::default()).unwrap();
        assert!(pdf.pages[0].contains("Dangling but readable"), "{:?}", pdf.pages);
    }

    #[test]
    fn bounds_refuse_instead_of_running_away() {
        let bytes = build(&[Some("one two three four five six seven")], None, None);
        let few_chars = PdfLimits { max_chars: 10, ..PdfLimits::default() };
        assert!(extract(&bytes, &few_chars).unwrap_err().contains("more than 10 characters"));
        let few_pages = PdfLimits { max_pages: 0, ..PdfLimits::default() };
        assert!(extract(&bytes, &few_pages).unwrap_err().contains("at most 0"));
        // A content stream that inflates 5,000 lines (about 150 KB) from a few KB: refused by the stream bound
        // before the interpreter reads it, and by the total bound.
        let long: String = (0..5000).map(|i| format!("line {i} of a long page\n")).collect();
        let bomb = build(&[Some(&long)], None, None);
        assert!(bomb.len() < 40_000, "{}", bomb.len());
        let small_streams = PdfLimits { max_stream_bytes: 100_000, ..PdfLimits::default() };
        assert!(
            extract(&bomb, &small_streams).unwrap_err().contains("a stream of the PDF expands beyond 100000 bytes")
        );
        let small_total = PdfLimits { max_total_bytes: 100_000, ..PdfLimits::default() };
        assert!(extract(&bomb, &small_total).unwrap_err().contains("streams expand beyond 100000 bytes"));
        assert_eq!(extract(&bomb, &PdfLimits::default()).unwrap().pages.len(), 1);
        let no_time = PdfLimits { time: Duration::ZERO, ..PdfLimits::default() };
        assert!(extract(&bytes, &no_time).unwrap_err().contains("longer than"));
    }
}
