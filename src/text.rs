//! Text analysis shared by the lexical index and the hashing embedder: Unicode word splitting, lowercasing,
//! a small English stop list and the Snowball English stemmer (Porter 2, via `rust-stemmers`).
//!
//! The analysis is part of the on-disk format of the lexical index: changing it requires a schema version bump
//! (the store then rebuilds the index).

use rust_stemmers::{Algorithm, Stemmer};
use std::sync::OnceLock;

/// Longest token kept, in bytes; longer runs (hashes, base64) are cut to this.
pub const MAX_TOKEN_BYTES: usize = 64;

/// A small English stop list: function words, question words (every question has them) and the fragments
/// contractions leave ("s", "t", "ll", ...). Sorted: looked up by binary search.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "being", "but",
    "by", "can", "could", "d", "did", "do", "does", "doing", "for", "from", "had", "has", "have", "having", "he",
    "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "ll", "m", "me",
    "my", "of", "on", "or", "our", "ours", "re", "s", "she", "so", "some", "t", "than", "that", "the", "their",
    "theirs", "them", "then", "there", "these", "they", "this", "those", "to", "too", "us", "ve", "was", "we", "were",
    "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// Words that negate a statement (lowercase; the fragments contractions leave, such as `doesn` of "doesn't",
/// included). Used by timeline reviews and claim checking; not part of the index format.
const NEGATIONS: &[&str] = &[
    "anymore", "aren", "cannot", "couldn", "didn", "doesn", "don", "hadn", "hasn", "haven", "isn", "longer", "neither",
    "never", "no", "nobody", "none", "nor", "not", "nothing", "quit", "shouldn", "stopped", "wasn", "weren", "without",
    "won", "wouldn",
];

/// True for a word that negates a statement (lowercase input), e.g. `not`, `never`, `doesn`.
pub fn is_negation(w: &str) -> bool {
    NEGATIONS.contains(&w)
}

/// True when `content` is a question: it ends with `?` (after trailing white space). A memory made of one
/// message asking something holds no fact of its own (see the question penalty of `docs/retrieval.md`).
pub fn is_question(content: &str) -> bool {
    content.trim_end().ends_with('?')
}

/// True when a question asks for a time or names one: `when`, `what year` (month, day, date, time), `how long
/// ago`, `since when`, a month name or a year (1900..=2099). Input in any case.
pub fn asks_time(query: &str) -> bool {
    let w = words(query);
    let month = |x: &str| crate::model::MONTH_NAMES.iter().any(|m| m.eq_ignore_ascii_case(x));
    let year =
        |x: &str| x.len() == 4 && (x.starts_with("19") || x.starts_with("20")) && x.bytes().all(|b| b.is_ascii_digit());
    w.iter().any(|x| x == "when" || month(x) || year(x))
        || w.windows(2).any(|p| {
            (p[0] == "what" || p[0] == "which") && matches!(p[1].as_str(), "year" | "month" | "day" | "date" | "time")
                || (p[0] == "long" && p[1] == "ago")
        })
}

fn stemmer() -> &'static Stemmer {
    static S: OnceLock<Stemmer> = OnceLock::new();
    S.get_or_init(|| Stemmer::create(Algorithm::English))
}

/// True for words of the stop list (lowercase input).
pub fn is_stop(w: &str) -> bool {
    STOP_WORDS.binary_search(&w).is_ok()
}

/// Splits `text` into lowercase words (maximal runs of alphanumeric characters), in order, stop words included.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            for l in ch.to_lowercase() {
                cur.push(l);
            }
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    for w in &mut out {
        if w.len() > MAX_TOKEN_BYTES {
            let mut end = MAX_TOKEN_BYTES;
            while !w.is_char_boundary(end) {
                end -= 1;
            }
            w.truncate(end);
        }
    }
    out
}

/// The index terms of `text`: words without stop words, stemmed. Order kept, duplicates kept.
pub fn terms(text: &str) -> Vec<String> {
    words(text).into_iter().filter(|w| !is_stop(w)).map(|w| stem(&w)).collect()
}

/// The Snowball English stem of a lowercase word.
pub fn stem(word: &str) -> String {
    stemmer().stem(word).into_owned()
}

/// Percent-encodes everything but RFC 3986 unreserved characters, so ids with `#`, `?`, `/` or spaces stay
/// one path segment.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_list_is_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn time_questions_are_recognised() {
        assert!(asks_time("When did Caroline go to the LGBTQ support group?"));
        assert!(asks_time("What year did Melanie start painting?"));
        assert!(asks_time("What did Jon do in March?"));
        assert!(asks_time("Where was Gina in 2022?"));
        assert!(!asks_time("What is Caroline's identity?"));
        assert!(!asks_time("Who whenever said 20234?"));
    }

    #[test]
    fn terms_are_stemmed_lowercase_without_stop_words() {
        assert_eq!(terms("The Painters were painting in Zürich!"), vec!["painter", "paint", "zürich"]);
        assert_eq!(terms("Caroline's LGBTQ group"), vec!["carolin", "lgbtq", "group"]);
        assert!(terms("").is_empty());
        let long = "x".repeat(500);
        assert_eq!(terms(&long)[0].len(), MAX_TOKEN_BYTES);
    }
}
