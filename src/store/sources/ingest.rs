//! Ingesting a source: from bytes, a URL or a file, deduplicated by SHA-256, parsed, stored with its chunks,
//! and the memories it gives.

use super::*;

/// An HTML page's `<title>`, entities decoded and whitespace collapsed; None when absent or empty.
#[cfg(feature = "url")]
fn html_title(bytes: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 20)]);
    let re = regex::Regex::new(r"(?is)<title[^>]*>(.*?)</title>").ok()?;
    let raw = re.captures(&head)?.get(1)?.as_str();
    // Every HTML5 named and numeric character reference, each decoded once (`&amp;lt;` stays `&lt;`).
    let decoded = html_escape::decode_html_entities(raw);
    let t = decoded.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then(|| t.chars().take(300).collect())
}

impl Sources<'_> {
    /// Ingests a document: stores its bytes, parses it, indexes its chunks and (unless turned off) extracts one
    /// memory per chunk of at least 8 words that is not chatter, with the source's labels and
    /// `metadata.source_id`. The same bytes in the same space return the existing source (`deduplicated`).
    ///
    /// A PDF's pages become sections `Page N`; its memories carry `page` in `source_range` and metadata, and
    /// its information dictionary's title (else its first line) becomes `metadata.title` unless one is given.
    ///
    /// # Errors
    /// * [`crate::ErrorKind::InvalidInput`]: empty or too long a name, more than 64 MiB, an unsupported format
    ///   (images, office files other than DOCX: `loc ["file"]`, type `unsupported_format`), a DOCX or PDF that
    ///   cannot be read (encrypted, broken, a ZIP or stream bomb, a PDF without a text layer, over the PDF
    ///   bounds of [`crate::extract::pdf::PdfLimits`]: type `unparsable_document`, with the reason; nothing
    ///   stored), a bad label name.
    /// * [`crate::ErrorKind::NotFound`] (`space_not_found`).
    pub fn ingest(&self, new: NewSource) -> Result<IngestReport> {
        let space = new.space_id.clone().unwrap_or_else(|| crate::store::DEFAULT_SPACE.to_string());
        let (name, format, labels) = check_new_source(&new)?;
        self.store.spaces().require(&space)?;
        let sha = sha256_hex(&new.bytes);
        if let Some(existing) = self.by_sha(&space, &sha)? {
            return Ok(IngestReport { source: existing, deduplicated: true, memory_ids: vec![] });
        }
        let now = Timestamp::now();
        let mut source = source_record(&new, &space, &name, format, &sha, &labels, now);
        let parsed = document::parse(format, &new.bytes, &name);
        if let (Err(why), true) = (&parsed, format.refuses_unparsable()) {
            return Err(Error::invalid(vec![FieldError::field(
                &["file"],
                "unparsable_document",
                format!("{name} cannot be read: {why}"),
                serde_json::json!({"file_name": name, "mime_type": format.mime()}),
            )]));
        }
        let parsed = apply_parse(&mut source, format, parsed);
        if let Some(existing) = self.put(&source, &new.bytes, parsed.as_ref(), &labels, now)? {
            let source = self.get(&existing, Some(&space))?;
            return Ok(IngestReport { source, deduplicated: true, memory_ids: vec![] });
        }
        self.store.core.chunk_index.write().remove(&space);
        let memory_ids = match (&parsed, new.extract_memories) {
            (Some(p), true) => self.extract_memories(&mut source, p, &labels)?,
            _ => Vec::new(),
        };
        Ok(IngestReport { source, deduplicated: false, memory_ids })
    }

    /// Writes a new source, its bytes, text and chunks, and the labels it names, in one write transaction.
    /// Returns the id of the source that won instead when a concurrent ingestion stored the same bytes first
    /// (checked again under the writer lock).
    fn put(
        &self,
        source: &Source,
        bytes: &[u8],
        parsed: Option<&document::Parsed>,
        labels: &BTreeSet<String>,
        now: Timestamp,
    ) -> Result<Option<String>> {
        let (space, id) = (source.space_id.as_str(), source.id.as_str());
        self.store.core.write(|txn, _| {
            if let Some(id) = source::id_by_sha(txn, space, &source.sha256)? {
                return Ok(Some(id));
            }
            let mut t = MemoryWrite::open(txn)?;
            for n in labels {
                let lid = Label::id_for(n);
                if t.labels.get(space, lid.as_str())?.is_none() {
                    let l = crate::store::memories::new_label(space, n, None, None, now);
                    t.labels.put(space, lid.as_str(), &l)?;
                }
            }
            drop(t);
            source::sources(txn)?.put((space, id), source)?;
            source::source_space(txn)?.put(id, space)?;
            source::source_sha(txn)?.put((space, source.sha256.as_str()), id)?;
            source::source_files(txn)?.put(id, bytes)?;
            if let Some(p) = parsed {
                source::source_text(txn)?.put(id, p.text.as_bytes())?;
                let mut chunks = source::source_chunks(txn)?;
                for (i, c) in p.chunks.iter().enumerate() {
                    chunks.put((id, i as u64), c)?;
                }
            }
            self.store.core.feed.publish(txn, crate::store::core::feed::ChangeOut::Sources(space))?;
            Ok(None)
        })
    }

    /// Extracts memories from a parsed source, and records the outcome on the source (`indexed` with its
    /// memory count, or `error` with the reason). Returns the memories' ids (none when extraction failed).
    fn extract_memories(
        &self,
        source: &mut Source,
        parsed: &document::Parsed,
        labels: &BTreeSet<String>,
    ) -> Result<Vec<String>> {
        let batch = memories_of(source, parsed, labels);
        let mut memory_ids: Vec<String> = batch.iter().filter_map(|m| m.id.clone()).collect();
        let outcome = if batch.is_empty() { Ok(()) } else { self.store.memories().create_many(batch).map(|_| ()) };
        match outcome {
            Ok(()) => {
                source.lifecycle_state = "indexed".into();
                source.memory_count = memory_ids.len() as u64;
            }
            Err(e) => {
                memory_ids.clear();
                source.lifecycle_state = "error".into();
                source.error_message = format!("memory extraction failed: {}", e.message());
            }
        }
        source.updated_at = Timestamp::now();
        self.store.core.write(|txn, _| {
            source::sources(txn)?.put((source.space_id.as_str(), source.id.as_str()), &*source)?;
            Ok(())
        })?;
        Ok(memory_ids)
    }

    /// Fetches `url` (`fetch::fetch` under the store's [`crate::net::UrlPolicy`]) and ingests the
    /// document like an upload ([`Sources::ingest`](crate::store::Sources::ingest)), with `source_type: "url"`, `source_url` the
    /// URL asked for, and `metadata.title` (an HTML page's `<title>`, else the first heading, else the URL),
    /// `metadata.fetched_at` (RFC 3339), `metadata.final_url` (after redirects) and `metadata.content_type`
    /// added to `template`'s metadata. The `Content-Type` header decides the parser (HTML, markdown, text,
    /// CSV, TSV, DOCX, PDF), then the URL's extension. Nothing is stored on any error.
    ///
    /// # Errors
    /// Those of `fetch::fetch`; [`crate::ErrorKind::InvalidInput`] at `["url"]` (`unsupported_format`) for a
    /// content type Engram cannot parse (images, other office files); those of
    /// [`Sources::ingest`](crate::store::Sources::ingest).
    #[cfg(feature = "url")]
    pub fn ingest_url(&self, url: &str, mut template: NewSource) -> Result<IngestReport> {
        if let Some(space) = &template.space_id {
            self.store.spaces().require(space)?;
        }
        let got = crate::fetch::fetch(url, &self.store.core.config.url_policy)?;
        tracing::info!(
            url = %got.final_url,
            bytes = got.bytes.len(),
            ms = got.elapsed.as_millis() as u64,
            "fetched a URL for ingestion"
        );
        let path_name = got
            .final_url
            .split(['?', '#'])
            .next()
            .and_then(|u| u.split_once("://").map(|(_, rest)| rest))
            .map(|rest| {
                let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
                let last = path.rsplit('/').find(|s| !s.is_empty()).unwrap_or("");
                if last.is_empty() { host.to_string() } else { last.to_string() }
            })
            .unwrap_or_else(|| "page".into());
        let by_type = Format::detect("", &got.content_type).filter(|_| !got.content_type.is_empty());
        let by_name = Format::detect(&path_name, "").filter(|_| path_name.contains('.'));
        let Some(format) = by_type.or(by_name) else {
            return Err(Error::invalid(vec![FieldError::field(
                &["url"],
                "unsupported_format",
                format!(
                    "the URL serves '{}', which Engram cannot parse in this release (markdown, text, HTML, CSV, TSV, DOCX, PDF)",
                    got.content_type
                ),
                serde_json::json!({"url": url, "content_type": got.content_type}),
            )]));
        };
        let mut name: String = path_name.chars().filter(|c| !c.is_control() && *c != '\\').take(200).collect();
        if by_name != Some(format) {
            let ext = match format {
                Format::Markdown => "md",
                Format::Text => "txt",
                Format::Html => "html",
                Format::Csv => "csv",
                Format::Tsv => "tsv",
                Format::Docx => "docx",
                Format::Pdf => "pdf",
            };
            name = format!("{name}.{ext}");
        }
        let title = if format == Format::Html { html_title(&got.bytes) } else { None }.unwrap_or_default();
        let mut md = template.metadata.0.clone();
        md.entry("title".to_string()).or_insert_with(|| title.clone().into());
        md.insert("fetched_at".into(), Timestamp::now().to_rfc3339().into());
        md.insert("final_url".into(), got.final_url.clone().into());
        md.insert("content_type".into(), got.content_type.clone().into());
        template.metadata = Metadata(md);
        template.bytes = got.bytes;
        template.original_name = name;
        template.mime_type = format.mime().into();
        template.source_type = "url".into();
        template.source_url = got.url.clone();
        let mut report = self.ingest(template)?;
        // A page without a <title> (and a document without a title of its own): the first heading, else the URL.
        if title.is_empty() && !has_title(&report.source.metadata) && !report.deduplicated {
            let tree: serde_json::Value = serde_json::from_str(&report.source.section_tree).unwrap_or_default();
            let fallback = tree[0]["title"].as_str().map(str::to_string).unwrap_or_else(|| got.url.clone());
            report.source.metadata.0.insert("title".into(), fallback.into());
            let s = report.source.clone();
            self.store.core.write(|txn, _| {
                source::sources(txn)?.put((s.space_id.as_str(), s.id.as_str()), &s)?;
                Ok(())
            })?;
        }
        Ok(report)
    }

    /// Reads the file at `path` (confined to the data directory and the allowed directories, see
    /// [`crate::config::StoreConfig::confine`]) and ingests it with `file_path` set.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Forbidden`] (`path_not_allowed`) outside the allowed directories; [`crate::ErrorKind::NotFound`]
    /// (`file_not_found`) when there is no regular file there; those of [`Sources::ingest`](crate::store::Sources::ingest).
    pub fn ingest_path(&self, path: &std::path::Path, mut new: NewSource) -> Result<IngestReport> {
        let real = self.store.core.config.confine(path)?;
        let meta = std::fs::metadata(&real)
            .ok()
            .filter(|m| m.is_file())
            .ok_or_else(|| Error::not_found(ErrorCode::FileNotFound, format!("no file at '{}'", path.display())))?;
        if meta.len() > MAX_SOURCE_BYTES as u64 {
            return Err(Error::invalid_value(
                &["path"],
                "value_error",
                format!("the file has {} bytes; at most {MAX_SOURCE_BYTES} are accepted", meta.len()),
                serde_json::Value::Null,
            ));
        }
        new.bytes = std::fs::read(&real)?;
        if new.original_name.is_empty() {
            new.original_name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        }
        new.file_path = real.to_string_lossy().into_owned();
        self.ingest(new)
    }

    fn by_sha(&self, space: &str, sha: &str) -> Result<Option<Source>> {
        let rtx = self.store.core.db.read()?;
        let Some(id) = source::id_by_sha(&rtx, space, sha)? else {
            return Ok(None);
        };
        source::sources(&rtx)?.get((space, id.as_str()))
    }
}

#[cfg(all(test, feature = "url"))]
mod tests {
    use super::html_title;

    #[test]
    fn a_page_title_has_its_character_references_decoded_once() {
        let page = b"<html><head><title>\n  Tom &amp; Jerry&nbsp;&ndash; &#8220;Pilot&#x201D; &amp;lt;1940&gt;\n</title></head></html>";
        assert_eq!(html_title(page).as_deref(), Some("Tom & Jerry \u{2013} \u{201C}Pilot\u{201D} &lt;1940>"));
        assert_eq!(html_title(b"<title> \t </title>"), None);
        assert_eq!(html_title(b"<p>no title</p>"), None);
    }
}
