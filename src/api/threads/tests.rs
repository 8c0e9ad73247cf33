//! Tests of `threads` (beside it: `api/threads.rs`).

#[test]
fn markdown_transcripts_become_messages() {
    let m = super::parse_markdown("Intro line\n**User:** hello\nthere\n## Assistant\nHi!\nAssistant: bye");
    let got: Vec<(&str, &str)> = m.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
    assert_eq!(got, vec![("user", "Intro line"), ("user", "hello\nthere"), ("assistant", "Hi!"), ("assistant", "bye")]);
}

/// Found by schemathesis: a line with a multi-byte character where a role name would end panicked.
#[test]
fn multi_byte_characters_at_the_role_boundary_are_text() {
    let m = super::parse_markdown("\u{1f}\u{ba}\u{c1}*\u{eb}x\nUse\u{e9}: caf\u{e9}\nsyst\u{e8}m\nUSER: hi");
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].role, "user");
    assert!(m[0].content.contains("Use\u{e9}: caf\u{e9}"));
    assert_eq!((m[1].role.as_str(), m[1].content.as_str()), ("user", "hi"));
}
