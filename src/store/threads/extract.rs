//! Distilling memories from a thread's messages (`extract_memories`, `extract_units`): the units the
//! extractor finds, deduplicated against the space's memories (Jaccard of content terms).

use super::*;

/// `metadata.analysis` of a thread whose every message becomes one memory ([`crate::extract::units_per_message`]).
pub const PER_MESSAGE: &str = "per-message";

/// The id prefix of memories extracted from thread `thread_id` of `space`: the thread id, prefixed with
/// `<space>:` outside `default` (thread ids are unique per space, memory ids across spaces).
pub fn thread_memory_prefix(space: &str, thread_id: &str) -> String {
    if space == DEFAULT_SPACE { thread_id.to_string() } else { format!("{space}:{thread_id}") }
}

fn jaccard(a: &std::collections::BTreeSet<String>, b: &std::collections::BTreeSet<String>) -> f64 {
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    if union == 0 { 0.0 } else { inter as f64 / union as f64 }
}

impl Threads<'_> {
    /// [`Threads::extract_memories`](crate::store::Threads::extract_memories) after the messages are committed: a failure there must not turn a
    /// stored create or append into an error (the client would retry and duplicate), so it becomes a warning.
    pub(super) fn extract_or_warn(&self, thread: &Thread, messages: &[Message]) -> Extraction {
        self.extract_memories(thread, messages).unwrap_or_else(|e| {
            tracing::warn!(thread = %thread.thread_id, error = %e.chain(), "memory extraction failed");
            Extraction { warnings: vec![format!("memory extraction failed: {e}")], ..Extraction::default() }
        })
    }

    /// Extracts memories from `messages` of `thread` ([`crate::extract::units_from_messages`]) and writes them
    /// in one transaction, with provenance: `source_thread_id`, `metadata.source_message_indices`,
    /// `source_range {start_index, end_index}`. Ids are `<thread>#m<first message index>` (prefixed with the
    /// space outside `default`), so extracting the same messages again updates instead of duplicating. A unit
    /// whose stemmed terms overlap a stored memory of the space by Jaccard 0.85 or more is dropped as a
    /// near-duplicate.
    ///
    /// # Errors
    /// Store errors of [`Memories::create_many`](crate::store::Memories::create_many).
    pub fn extract_memories(&self, thread: &Thread, messages: &[Message]) -> Result<Extraction> {
        let analysis = thread.metadata.0.get("analysis").and_then(|v| v.as_str());
        if analysis == Some("searchable-now-distill-on-demand") || messages.is_empty() {
            return Ok(Extraction::default());
        }
        let prefix = thread_memory_prefix(&thread.space_id, &thread.thread_id);
        let per_message = analysis == Some(PER_MESSAGE);
        self.extract_with(&thread.space_id, &prefix, Some(&thread.thread_id), messages, per_message)
    }

    /// Extraction from messages that are not stored as a thread (`POST /memories/distill` with
    /// `thread_content`): as [`Threads::extract_memories`](crate::store::Threads::extract_memories), with ids `<id_prefix>#m<index>` and
    /// `source_thread_id` only when the caller named a thread.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`) and store errors.
    pub fn extract_units(
        &self,
        space: &str,
        id_prefix: &str,
        source_thread: Option<&str>,
        messages: &[Message],
    ) -> Result<Extraction> {
        self.extract_with(space, id_prefix, source_thread, messages, false)
    }

    fn extract_with(
        &self,
        space: &str,
        id_prefix: &str,
        source_thread: Option<&str>,
        messages: &[Message],
        per_message: bool,
    ) -> Result<Extraction> {
        self.store.spaces().require(space)?;
        let units = if per_message {
            crate::extract::units_per_message(messages)
        } else {
            crate::extract::units_from_messages(messages)
        };
        let prefix = id_prefix.to_string();
        let prefix = if prefix.chars().count() > 180 {
            format!("thread-{:016x}", crate::embed::fnv1a(prefix.as_bytes()))
        } else {
            prefix
        };
        let mut batch = Vec::with_capacity(units.len());
        let mut merged = 0;
        let mut seen: Vec<std::collections::BTreeSet<String>> = Vec::new();
        for u in units {
            let terms: std::collections::BTreeSet<String> =
                if per_message { Default::default() } else { text::terms(&u.content).into_iter().collect() };
            if !per_message
                && (self.near_duplicate(space, &u.content, &terms)? || seen.iter().any(|s| jaccard(s, &terms) >= 0.85))
            {
                merged += 1;
                continue;
            }
            let first = u.message_indices.first().copied().unwrap_or(0);
            let last = u.message_indices.last().copied().unwrap_or(first);
            let mut md = serde_json::Map::new();
            md.insert("source_message_indices".into(), u.message_indices.clone().into());
            md.insert("extraction".into(), if per_message { PER_MESSAGE } else { "engram-rules-v1" }.into());
            if let Some(e) = &u.temporal_expression {
                md.insert("temporal_expression".into(), e.clone().into());
            }
            let mut range = std::collections::BTreeMap::new();
            range.insert("start_index".to_string(), first as f64);
            range.insert("end_index".to_string(), last as f64);
            batch.push(crate::store::NewMemory {
                id: Some(format!("{prefix}#m{first}")),
                content: u.content,
                title: Some(u.title).filter(|t| !t.is_empty()),
                importance: Some(u.importance),
                confidence: Some(u.confidence),
                source: Some("thread".into()),
                unit_type: Some(u.unit_type),
                event_start: u.event_start,
                event_end: u.event_end,
                temporal_context: Some(u.temporal_context),
                source_thread_id: source_thread.map(str::to_string),
                metadata: Some(Metadata(md)),
                space_id: Some(space.to_string()),
                source_range: Some(range),
                extraction_method: Some("rules".into()),
                ..Default::default()
            });
            seen.push(terms);
        }
        // A transcript stored turn by turn is conversation, not distilled statements: no timeline reviews.
        let memories =
            if batch.is_empty() { Vec::new() } else { self.store.memories().create_many_with(batch, !per_message)? };
        Ok(Extraction { performed: true, memories, merged, warnings: vec![] })
    }

    /// True when a stored memory of `space` (among the top 3 BM25 hits for `content`) has a term set with
    /// Jaccard similarity at least 0.85 to `terms`.
    fn near_duplicate(&self, space: &str, content: &str, terms: &std::collections::BTreeSet<String>) -> Result<bool> {
        if terms.is_empty() {
            return Ok(false);
        }
        let query: String = content.chars().take(4000).collect();
        let q = crate::store::SearchQuery {
            query,
            space_id: space.to_string(),
            limit: 3,
            filter: Default::default(),
            mode: crate::store::SearchMode::Lexical,
            fusion: None,
            query_embedding: None,
            options: crate::store::SearchOptions::OWN_TEXT,
        };
        let hits = match self.store.search().run(&q) {
            Ok(r) => r.hits,
            Err(e) if e.kind() == ErrorKind::InvalidInput => return Ok(false),
            Err(e) => return Err(e),
        };
        Ok(hits.iter().any(|h| {
            let other: std::collections::BTreeSet<String> = text::terms(&h.view.memory.content).into_iter().collect();
            jaccard(terms, &other) >= 0.85
        }))
    }
}
