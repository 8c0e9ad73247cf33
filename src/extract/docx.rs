//! Word documents (DOCX, Office Open XML, ECMA-376 Part 1 §17) for the library: the ZIP container read with
//! the `zip` crate under bomb guards, `word/document.xml` parsed with `roxmltree`, and its paragraphs turned into
//! markdown (headings from the `Heading1`..`Heading6` and `Title` paragraph styles as `#` lines, table cells as
//! paragraphs, tabs and line breaks kept), which the markdown path then splits into sections and chunks.
//!
//! Guards (ZIP bombs and hostile files): at most [`MAX_ENTRIES`] entries; `word/document.xml` at most
//! [`MAX_XML_BYTES`] declared, at most [`MAX_RATIO`] times its compressed size, and read through a cap so a
//! header that lies about the size cannot expand further.

use std::io::Read;

/// Most entries in the ZIP container (a real document has tens).
pub const MAX_ENTRIES: usize = 10_000;
/// Largest `word/document.xml` accepted, bytes (256 MiB).
pub const MAX_XML_BYTES: u64 = 256 << 20;
/// Largest expansion of `word/document.xml` over its compressed size (XML compresses about 10:1).
pub const MAX_RATIO: u64 = 200;

const W: &str = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";

/// The markdown text of a DOCX file.
///
/// # Errors
/// A message saying why: not a ZIP archive (an encrypted document is an OLE container, not a ZIP; so is a
/// legacy `.doc`), over a guard, no `word/document.xml`, or XML that does not parse.
pub fn to_markdown(bytes: &[u8]) -> Result<String, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| {
        if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
            "the file is an OLE container, not a ZIP: an encrypted (password-protected) document or a legacy .doc"
                .to_string()
        } else {
            format!("the file is not a readable DOCX (ZIP) archive: {e}")
        }
    })?;
    if zip.len() > MAX_ENTRIES {
        return Err(format!("the archive has {} entries; at most {MAX_ENTRIES} are accepted", zip.len()));
    }
    let entry = zip.by_name("word/document.xml").map_err(|e| match e {
        zip::result::ZipError::FileNotFound => "the archive has no word/document.xml: not a Word document".into(),
        e => format!("word/document.xml cannot be read: {e}"),
    })?;
    let (size, packed) = (entry.size(), entry.compressed_size().max(1));
    if size > MAX_XML_BYTES {
        return Err(format!("word/document.xml expands to {size} bytes; at most {MAX_XML_BYTES} are accepted"));
    }
    if size / packed > MAX_RATIO {
        return Err(format!(
            "word/document.xml expands {}-fold; at most {MAX_RATIO}-fold is accepted (a ZIP bomb?)",
            size / packed
        ));
    }
    let mut xml = Vec::with_capacity(size as usize);
    entry.take(size + 1).read_to_end(&mut xml).map_err(|e| format!("word/document.xml cannot be decompressed: {e}"))?;
    if xml.len() as u64 > size {
        return Err("word/document.xml expands past the size its header declares (a ZIP bomb?)".into());
    }
    let text = String::from_utf8(xml).map_err(|_| "word/document.xml is not UTF-8".to_string())?;
    let doc = roxmltree::Document::parse_with_options(
        &text,
        roxmltree::ParsingOptions { allow_dtd: false, ..Default::default() },
    )
    .map_err(|e| format!("word/document.xml is not well-formed XML: {e}"))?;
    let mut out = String::new();
    for p in doc.descendants().filter(|n| n.has_tag_name((W, "p"))) {
        let line = paragraph_text(p);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match heading_level(p) {
            Some(level) => {
                out.push_str(&"#".repeat(level));
                out.push(' ');
                out.push_str(&line.replace('\n', " "));
            }
            None => out.push_str(line),
        }
        out.push_str("\n\n");
    }
    Ok(out)
}

/// The text of one paragraph: its runs' `w:t`, tabs and breaks, in order (nested paragraphs, as in text boxes,
/// are their own paragraphs).
fn paragraph_text(p: roxmltree::Node<'_, '_>) -> String {
    let mut s = String::new();
    let mut stack: Vec<roxmltree::Node<'_, '_>> = p.children().collect();
    stack.reverse();
    while let Some(n) = stack.pop() {
        if n.has_tag_name((W, "p")) {
            continue;
        }
        if n.has_tag_name((W, "t")) {
            s.push_str(n.text().unwrap_or(""));
        } else if n.has_tag_name((W, "tab")) {
            s.push('\t');
        } else if n.has_tag_name((W, "br")) || n.has_tag_name((W, "cr")) {
            s.push('\n');
        } else {
            let mut kids: Vec<_> = n.children().collect();
            kids.reverse();
            stack.extend(kids);
        }
    }
    s
}

/// `Heading1`..`Heading6` (also `heading 1` as some producers write it) give levels 1..6; `Title` is 1.
fn heading_level(p: roxmltree::Node<'_, '_>) -> Option<usize> {
    let style = p
        .children()
        .find(|n| n.has_tag_name((W, "pPr")))?
        .children()
        .find(|n| n.has_tag_name((W, "pStyle")))?
        .attribute((W, "val"))?
        .to_ascii_lowercase()
        .replace(' ', "");
    if style == "title" {
        return Some(1);
    }
    let level: usize = style.strip_prefix("heading")?.parse().ok()?;
    (1..=6).contains(&level).then_some(level)
}

#[doc(hidden)]
/// A minimal DOCX with `paragraphs` as (style, text) pairs (`""` for body text): for tests, benchmarks and the
/// fuzz seeds.
pub fn build(paragraphs: &[(&str, &str)]) -> Vec<u8> {
    use std::io::Write;
    let mut body = String::new();
    for (style, text) in paragraphs {
        body.push_str("<w:p>");
        if !style.is_empty() {
            body.push_str(&format!("<w:pPr><w:pStyle w:val=\"{style}\"/></w:pPr>"));
        }
        let esc = html_escape::encode_text(text);
        body.push_str(&format!("<w:r><w:t xml:space=\"preserve\">{esc}</w:t></w:r></w:p>"));
    }
    let doc = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document xmlns:w=\"{W}\"><w:body>{body}</w:body></w:document>"
    );
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    let files = [
        ("[Content_Types].xml", "<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>".to_string()),
        ("word/document.xml", doc),
    ];
    for (name, content) in files {
        // Writing to memory cannot fail.
        let _ = zip.start_file(name, opts);
        let _ = zip.write_all(content.as_bytes());
    }
    zip.finish().map(|c| c.into_inner()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_paragraphs_tabs_and_entities() {
        let bytes = build(&[
            ("Title", "Quarterly plan"),
            ("Heading1", "Goals"),
            ("", "Ship the <harbour> & pier project"),
            ("heading 2", "Budget"),
            ("", ""),
            ("Normal", "Spend at most 40k"),
        ]);
        let md = to_markdown(&bytes).unwrap();
        assert_eq!(
            md,
            "# Quarterly plan\n\n# Goals\n\nShip the <harbour> & pier project\n\n## Budget\n\nSpend at most 40k\n\n"
        );
    }

    #[test]
    fn refusals_say_why() {
        assert!(to_markdown(b"not a zip").unwrap_err().contains("not a readable DOCX"));
        let mut ole = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
        ole.resize(600, 0);
        assert!(to_markdown(&ole).unwrap_err().contains("encrypted"));
        // A ZIP without the document part.
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file("a.txt", zip::write::SimpleFileOptions::default()).unwrap();
        let other = zip.finish().unwrap().into_inner();
        assert!(to_markdown(&other).unwrap_err().contains("no word/document.xml"));
        // A bomb: 50 MiB of one byte deflates about 1000-fold.
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("word/document.xml", opts).unwrap();
        std::io::Write::write_all(&mut zip, &vec![b' '; 50 << 20]).unwrap();
        let bomb = zip.finish().unwrap().into_inner();
        assert!(to_markdown(&bomb).unwrap_err().contains("fold"), "{bomb:?}");
        // Not XML.
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file("word/document.xml", zip::write::SimpleFileOptions::default()).unwrap();
        std::io::Write::write_all(&mut zip, b"<w:document><unclosed>").unwrap();
        let bad = zip.finish().unwrap().into_inner();
        assert!(to_markdown(&bad).unwrap_err().contains("not well-formed"));
    }
}
