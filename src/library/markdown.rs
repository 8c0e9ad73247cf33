//! Markdown and YAML pieces of the pages: quoted YAML strings, link labels, and the sentence of a text that
//! names an entity.

/// The sentence of `text` that names `name` (without case), else its first sentence; at most `max` characters.
pub fn sentence_with(text: &str, name: &str, max: usize) -> String {
    let lower = name.to_lowercase();
    let flat = text.replace('\n', " ");
    let mut sentences = Vec::new();
    let mut start = 0;
    for (i, c) in flat.char_indices() {
        if matches!(c, '.' | '!' | '?') {
            let end = i + c.len_utf8();
            sentences.push(flat[start..end].trim().to_string());
            start = end;
        }
    }
    if start < flat.len() {
        sentences.push(flat[start..].trim().to_string());
    }
    let pick = sentences
        .iter()
        .find(|s| s.to_lowercase().contains(&lower))
        .or_else(|| sentences.iter().find(|s| !s.is_empty()))
        .cloned()
        .unwrap_or_default();
    let mut out: String = pick.chars().take(max).collect();
    if pick.chars().count() > max {
        out.push('…');
    }
    out
}

/// A YAML scalar: JSON string syntax is valid YAML, so every value is written as a JSON string or number.
pub fn yaml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Escapes text for a markdown link label.
pub fn md_label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('[', "\\[").replace(']', "\\]").replace('\n', " ")
}
