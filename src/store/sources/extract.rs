//! The memories a source gives: one per chunk of prose worth keeping, or one for a table (rules only, no LLM).

use super::*;

/// Whether `metadata` holds a non-empty `title` string.
pub(super) fn has_title(metadata: &Metadata) -> bool {
    metadata.0.get("title").and_then(|t| t.as_str()).is_some_and(|t| !t.is_empty())
}

/// One memory per chunk with at least [`MIN_MEMORY_WORDS`] words that is not chatter (a table source: one
/// memory of the whole table).
pub(super) fn memories_of(
    source: &Source,
    p: &document::Parsed,
    labels: &BTreeSet<String>,
) -> Vec<crate::store::NewMemory> {
    if document::Format::detect("", &source.mime_type).is_some_and(document::Format::is_table) {
        return table_memory(source, p, labels).into_iter().collect();
    }
    let mut out = Vec::new();
    for (i, c) in p.chunks.iter().enumerate() {
        let a = document::floor_boundary(&p.text, c.offset as usize);
        let b = document::floor_boundary(&p.text, (c.offset + c.length) as usize);
        let body = p.text[a..b].trim();
        let body_lines: Vec<&str> = body.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
        let plain = body_lines.join("\n");
        let plain = plain.trim();
        if plain.split_whitespace().count() < MIN_MEMORY_WORDS || crate::extract::is_chatter(plain) {
            continue;
        }
        let first = crate::extract::first_sentence(plain);
        let (unit_type, confidence) = crate::extract::classify(first);
        let title = match c.section.rsplit(" > ").next() {
            Some(s) if !s.is_empty() => s.chars().take(120).collect(),
            _ => first.chars().take(80).collect(),
        };
        let mut md = serde_json::Map::new();
        md.insert("source_id".into(), source.id.clone().into());
        md.insert("source_name".into(), source.original_name.clone().into());
        md.insert("chunk_index".into(), (i as u64).into());
        md.insert("section".into(), c.section.clone().into());
        md.insert("extraction".into(), "engram-rules-v1".into());
        let mut range = std::collections::BTreeMap::new();
        range.insert("start_offset".to_string(), c.offset as f64);
        range.insert("end_offset".to_string(), (c.offset + c.length) as f64);
        if let Some(page) = (source.mime_type == Format::Pdf.mime()).then(|| pdf::page_of_section(&c.section)).flatten()
        {
            range.insert("page".to_string(), f64::from(page));
            md.insert("page".into(), page.into());
        }
        out.push(crate::store::NewMemory {
            id: Some(memory_id(&source.id, i)),
            content: body.to_string(),
            title: Some(title),
            importance: Some(crate::extract::importance(unit_type, plain, false)),
            confidence: Some(confidence),
            source: Some("library".into()),
            labels: Some(labels.iter().cloned().collect()),
            unit_type: Some(unit_type),
            metadata: Some(Metadata(md)),
            space_id: Some(source.space_id.clone()),
            source_range: Some(range),
            extraction_method: Some("rules".into()),
            ..Default::default()
        });
    }
    out
}

/// A data table's one memory: its description (rows, columns and their types; the first paragraph of the
/// rendered text), not one memory per chunk of rows (rows are found through `GET /sources/search` and
/// analysed through `GET /sources/{id}/analysis`).
fn table_memory(source: &Source, p: &document::Parsed, labels: &BTreeSet<String>) -> Option<crate::store::NewMemory> {
    let end = p.text.find("\n\n").unwrap_or(p.text.len());
    let body = p.text[..end].trim();
    if body.is_empty() {
        return None;
    }
    let mut md = serde_json::Map::new();
    md.insert("source_id".into(), source.id.clone().into());
    md.insert("source_name".into(), source.original_name.clone().into());
    md.insert("section".into(), "table".into());
    md.insert("extraction".into(), "engram-rules-v1".into());
    let mut range = std::collections::BTreeMap::new();
    range.insert("start_offset".to_string(), 0.0);
    range.insert("end_offset".to_string(), end as f64);
    Some(crate::store::NewMemory {
        id: Some(memory_id(&source.id, 0)),
        content: body.to_string(),
        title: Some(format!("Data table {}", source.original_name).chars().take(120).collect()),
        importance: Some(0.5),
        confidence: Some(1.0),
        source: Some("library".into()),
        labels: Some(labels.iter().cloned().collect()),
        unit_type: Some(crate::model::UnitType::Fact),
        metadata: Some(Metadata(md)),
        space_id: Some(source.space_id.clone()),
        source_range: Some(range),
        extraction_method: Some("rules".into()),
        ..Default::default()
    })
}
