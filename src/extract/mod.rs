//! Deterministic extraction, no LLM: knowledge units from conversations ([`units_from_messages`]) with their
//! unit type, importance, confidence and resolved time ([`temporal`]).
//!
//! A unit is one message, or a question together with the next message of another speaker (its answer).
//! Chatter (greetings, thanks, acknowledgements: see [`is_chatter`]) is skipped, as are messages with
//! `metadata.exclude_from_distillation: true` and `system` messages. The unit type comes from cue phrases
//! ([`classify`]); importance from the type plus numbers, dates and names in the text; confidence from how
//! explicit the cue was. The rules, cue lists and weights are this module's own.

pub mod document;
pub mod docx;
pub mod entities;
mod gazetteer;
pub mod pdf;
pub mod table;
pub mod temporal;

use crate::model::{Message, TemporalContext, Timestamp, UnitType};
use crate::text;

/// Abbreviations whose period does not end a sentence (lowercase, without the period).
const ABBREVIATIONS: &[&str] = &["dr", "e.g", "etc", "i.e", "jr", "mr", "mrs", "ms", "no", "prof", "sr", "st", "vs"];

/// The first sentence of `text`: up to the first `.`, `!`, `?` followed by whitespace (or a line break), where
/// the word before a period is not an abbreviation or a single letter (an initial).
pub fn first_sentence(text: &str) -> &str {
    let bytes = text.as_bytes();
    for (i, c) in text.char_indices() {
        if c == '\n' {
            return text[..i].trim();
        }
        if !matches!(c, '.' | '!' | '?') || !bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace()) {
            continue;
        }
        if c == '.' {
            let word = text[..i].rsplit(|ch: char| ch.is_whitespace()).next().unwrap_or("");
            let w = word.trim_start_matches(|ch: char| !ch.is_alphanumeric()).to_lowercase();
            if w.chars().count() == 1 || ABBREVIATIONS.contains(&w.as_str()) {
                continue;
            }
        }
        return text[..i + 1].trim();
    }
    text.trim()
}

/// A memory to create from a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// `Speaker: text` lines.
    pub content: String,
    /// Short title (the first sentence of the statement, at most 80 characters).
    pub title: String,
    /// Classified type.
    pub unit_type: UnitType,
    /// 0..=1.
    pub importance: f64,
    /// 0..=1.
    pub confidence: f64,
    /// Resolved time, or the day the first message was said.
    pub event_start: Option<String>,
    /// End of a resolved range.
    pub event_end: Option<String>,
    /// Past, present, future or timeless.
    pub temporal_context: TemporalContext,
    /// `order_index` of every message the unit came from.
    pub message_indices: Vec<u64>,
    /// The temporal expression resolved, if any.
    pub temporal_expression: Option<String>,
}

/// Cue phrases per unit type, matched on lowercased text at word boundaries; the first type (in this order)
/// with a match wins.
const CUES: &[(UnitType, &[&str])] = &[
    (
        UnitType::Decision,
        &[
            "decided",
            "we'll go with",
            "i chose",
            "we chose",
            "settled on",
            "agreed to",
            "made the decision",
            "going with",
        ],
    ),
    (
        UnitType::Preference,
        &[
            "prefer",
            "love",
            "loves",
            "enjoy",
            "enjoys",
            "hate",
            "dislike",
            "favorite",
            "favourite",
            "i like",
            "i'd rather",
            "fan of",
            "i'm into",
            "really into",
            "passionate about",
            "adore",
        ],
    ),
    (
        UnitType::Plan,
        &[
            "going to",
            "gonna",
            "plan to",
            "planning",
            "i will",
            "we will",
            "i'll",
            "we'll",
            "intend to",
            "hoping to",
            "want to",
            "thinking about",
            "next week",
            "next month",
            "next year",
            "tomorrow",
            "soon",
        ],
    ),
    (
        UnitType::Procedure,
        &["how to", "step by step", "first,", "the steps", "you need to", "make sure to", "install", "run the"],
    ),
    (
        UnitType::Learning,
        &["learned", "learnt", "realized", "realised", "found out", "turns out", "discovered", "taught me", "lesson"],
    ),
    (
        UnitType::Event,
        &[
            "went to",
            "visited",
            "attended",
            "yesterday",
            "last week",
            "last weekend",
            "last month",
            "last year",
            "ago",
            "took part",
            "met",
            "got married",
            "graduated",
            "started",
            "finished",
            "celebrated",
            "won",
            "just got",
            "happened",
        ],
    ),
];

/// Words of greetings, thanks and acknowledgements.
const CHATTER: &[&str] = &[
    "hi",
    "hey",
    "hello",
    "thanks",
    "thank",
    "bye",
    "goodbye",
    "ok",
    "okay",
    "cool",
    "wow",
    "haha",
    "lol",
    "yes",
    "yeah",
    "yep",
    "nope",
    "sure",
    "great",
    "awesome",
    "nice",
    "good",
    "glad",
    "welcome",
    "amazing",
    "congrats",
    "congratulations",
    "see",
    "talk",
    "later",
    "care",
    "night",
    "morning",
    "totally",
    "agree",
    "true",
    "right",
];

fn has_cue(lower: &str, cue: &str) -> bool {
    let mut start = 0;
    while let Some(pos) = lower[start..].find(cue) {
        let i = start + pos;
        let before_ok = !lower[..i].chars().next_back().is_some_and(char::is_alphanumeric);
        let end = i + cue.len();
        let after_ok = cue.ends_with(',') || !lower[end..].chars().next().is_some_and(char::is_alphanumeric);
        if before_ok && after_ok {
            return true;
        }
        start = end;
    }
    false
}

/// Unit type of a statement and the confidence of the classification (0.8 with a cue, 0.7 for a plain
/// statement, 0.5 for a question).
pub fn classify(statement: &str) -> (UnitType, f64) {
    let lower = statement.to_lowercase();
    for (ty, cues) in CUES {
        if cues.iter().any(|c| has_cue(&lower, c)) {
            return (*ty, 0.8);
        }
    }
    if statement.trim_end().ends_with('?') {
        return (UnitType::Context, 0.5);
    }
    (UnitType::Fact, 0.7)
}

/// True for greetings, thanks and acknowledgements: no number, at most one content word that is not a chatter
/// word (a name, say) and at least one chatter word; or no content word at all.
pub fn is_chatter(content: &str) -> bool {
    let words = text::words(content);
    let content_words: Vec<&String> = words.iter().filter(|w| !text::is_stop(w)).collect();
    if content_words.is_empty() {
        return true;
    }
    if content_words.iter().any(|w| w.chars().any(|c| c.is_ascii_digit())) {
        return false;
    }
    let substantive = content_words.iter().filter(|w| !CHATTER.contains(&w.as_str())).count();
    substantive <= 1 && content_words.len() > substantive
}

pub(crate) fn importance(ty: UnitType, content: &str, has_time: bool) -> f64 {
    let base = match ty {
        UnitType::Decision => 0.7,
        UnitType::Preference | UnitType::Plan | UnitType::Procedure | UnitType::Learning => 0.6,
        UnitType::Event | UnitType::Fact => 0.5,
        UnitType::Context => 0.35,
    };
    let names = content
        .split_whitespace()
        .skip(1)
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase) && w.len() > 1)
        .count();
    let numbers = content.split_whitespace().any(|w| w.chars().any(|c| c.is_ascii_digit()));
    let mut v =
        base + if has_time { 0.1 } else { 0.0 } + if numbers { 0.05 } else { 0.0 } + (names.min(3) as f64) * 0.03;
    if content.len() < 40 {
        v -= 0.1;
    }
    (v.clamp(0.1, 0.95) * 100.0).round() / 100.0
}

/// The speaker of a message: `metadata.speaker`, `metadata.name` or `metadata.author`, else its role
/// capitalised.
pub fn speaker(m: &Message) -> String {
    for key in ["speaker", "name", "author"] {
        if let Some(s) = m.metadata.0.get(key).and_then(|v| v.as_str()).filter(|s| !s.trim().is_empty()) {
            return s.trim().to_string();
        }
    }
    let mut c = m.role.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => "Someone".into(),
    }
}

/// True when the message asks to be left out of extraction (`metadata.exclude_from_distillation`).
pub fn excluded(m: &Message) -> bool {
    m.metadata.0.get("exclude_from_distillation").and_then(|v| v.as_bool()).unwrap_or(false)
}

fn date_of(ts: Timestamp) -> Option<time::Date> {
    time::OffsetDateTime::from_unix_timestamp(ts.0.div_euclid(1000)).ok().map(|t| t.date())
}

/// Knowledge units of `messages` (in order), following the module rules.
pub fn units_from_messages(messages: &[Message]) -> Vec<Unit> {
    units_with(messages, false)
}

/// One unit per message (thread `metadata.analysis` `per-message`): every message that is not excluded, empty or
/// a `system` message becomes a unit, chatter included, without pairing questions with answers and without a
/// title (the message is the unit). Types, times and importance as [`units_from_messages`].
pub fn units_per_message(messages: &[Message]) -> Vec<Unit> {
    units_with(messages, true)
}

fn units_with(messages: &[Message], per_message: bool) -> Vec<Unit> {
    let usable: Vec<&Message> =
        messages.iter().filter(|m| !excluded(m) && !m.content.trim().is_empty() && m.role != "system").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < usable.len() {
        let m = usable[i];
        let question = m.content.trim_end().ends_with('?');
        let answer = usable.get(i + 1).filter(|n| !per_message && speaker(n) != speaker(m) && !is_chatter(&n.content));
        let group: Vec<&Message> = match answer {
            Some(n) if question => {
                i += 2;
                vec![m, n]
            }
            _ => {
                i += 1;
                if !per_message && is_chatter(&m.content) {
                    continue;
                }
                vec![m]
            }
        };
        let content: String =
            group.iter().map(|g| format!("{}: {}", speaker(g), g.content.trim())).collect::<Vec<_>>().join("\n");
        // Type and time come from the statement: the answer of a pair, else the message.
        let statement = group[group.len() - 1].content.trim();
        let (mut unit_type, confidence) = classify(statement);
        let reference = date_of(group[0].timestamp);
        let resolved = reference.and_then(|d| group.iter().find_map(|g| temporal::resolve(&g.content, d)));
        if resolved.is_some() && unit_type == UnitType::Fact {
            unit_type = UnitType::Event;
        }
        let (event_start, event_end, temporal_context, expr) = match (&resolved, reference) {
            (Some(r), _) => (Some(r.start.clone()), r.end.clone(), r.context, Some(r.matched.clone())),
            (None, Some(d)) => (
                Some(format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())),
                None,
                if unit_type == UnitType::Plan { TemporalContext::Future } else { TemporalContext::Present },
                None,
            ),
            (None, None) => (None, None, TemporalContext::Timeless, None),
        };
        out.push(Unit {
            importance: importance(unit_type, &content, resolved.is_some()),
            confidence: if group.len() > 1 { confidence.min(0.7) } else { confidence },
            title: if per_message { String::new() } else { first_sentence(statement).chars().take(80).collect() },
            content,
            unit_type,
            event_start,
            event_end,
            temporal_context,
            message_indices: group.iter().map(|g| g.order_index).collect(),
            temporal_expression: expr,
        });
    }
    out
}

/// Whether a conversation is worth distilling, and why (`POST /memories/distill/triage`).
pub fn triage(content: &str) -> (bool, String) {
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    let substantive = lines.iter().filter(|l| !is_chatter(l)).count();
    let typed = lines.iter().filter(|l| !is_chatter(l) && classify(l).0 != UnitType::Fact).count();
    if substantive == 0 {
        (false, "only greetings, thanks or acknowledgements".into())
    } else if substantive == 1 && typed == 0 && content.split_whitespace().count() < 8 {
        (false, "too short to hold lasting knowledge".into())
    } else {
        (true, format!("{substantive} substantive lines, {typed} with decision, preference, plan or event cues"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Metadata;

    fn msg(i: u64, role: &str, who: &str, content: &str) -> Message {
        let mut md = serde_json::Map::new();
        md.insert("speaker".into(), who.into());
        Message {
            id: format!("t#{i}"),
            node_type: "message".into(),
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            metadata: Metadata(md),
            content: content.into(),
            role: role.into(),
            order_index: i,
            timestamp: Timestamp::parse("2023-05-08T13:56:00Z").unwrap_or_default(),
            token_count: 0,
        }
    }

    #[test]
    fn chatter_is_skipped_questions_pair_with_answers_and_time_resolves() {
        let ms = vec![
            msg(0, "user", "Caroline", "Hey Mel! Good to see you!"),
            msg(1, "assistant", "Melanie", "Hi Caroline, how have you been?"),
            msg(2, "user", "Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
            msg(3, "assistant", "Melanie", "Wow, that's cool!"),
            msg(4, "assistant", "Melanie", "I'm planning to go camping with the kids next month."),
            msg(5, "user", "Caroline", "I really love painting sunsets."),
        ];
        let units = units_from_messages(&ms);
        let got: Vec<(Vec<u64>, UnitType)> = units.iter().map(|u| (u.message_indices.clone(), u.unit_type)).collect();
        assert_eq!(
            got,
            vec![(vec![1, 2], UnitType::Event), (vec![4], UnitType::Plan), (vec![5], UnitType::Preference)]
        );
        assert_eq!(units[0].event_start.as_deref(), Some("2023-05-07"));
        assert!(units[0].content.starts_with("Melanie: Hi Caroline"));
        assert_eq!(units[1].event_start.as_deref(), Some("2023-06"));
        assert_eq!(units[1].temporal_context, TemporalContext::Future);
        assert_eq!(units[2].event_start.as_deref(), Some("2023-05-08"), "without an expression: the day it was said");
    }

    #[test]
    fn chatter_and_triage() {
        assert!(is_chatter("Thanks so much!"));
        assert!(is_chatter("Haha, yeah."));
        assert!(is_chatter("Wow, that's cool!"));
        assert!(!is_chatter("I adopted 2 cats."));
        assert!(!is_chatter("We moved to Denver for my new job."));
        assert!(!triage("Hi!\nThanks, bye!").0);
        assert!(triage("We decided to use PostgreSQL for the billing service.").0);
    }

    #[test]
    fn first_sentence_skips_abbreviations_and_initials() {
        assert_eq!(first_sentence("My dentist is Dr. Silva. She is great."), "My dentist is Dr. Silva.");
        assert_eq!(first_sentence("J. R. R. Tolkien wrote it! Really."), "J. R. R. Tolkien wrote it!");
        assert_eq!(first_sentence("Version 1.5 is out. Yes"), "Version 1.5 is out.");
        assert_eq!(first_sentence("line one\nline two"), "line one");
        assert_eq!(first_sentence("no end"), "no end");
    }
}
