//! Named-entity extraction by rules and gazetteers, no model: people, organisations, places, products and
//! technologies, dates, times, quantities, emails and URLs, each with a canonical name.
//!
//! 1. Patterns (the `regex` crate): emails, URLs, ISO dates, month-name dates, weekdays, relative dates
//!    (`yesterday`, `last week`, `three months ago`), clock times, money, percentages and numbers with a unit.
//! 2. Names: maximal runs of capitalised words (joined by `of`, `for`, `the`, `de`, `&` inside a run), plus
//!    lowercase technology names from the gazetteer. A run that starts a sentence counts only when the
//!    gazetteer or a title (`Dr.`, `Mrs.`) knows it.
//! 3. Types, in order: technology gazetteer; organisation suffixes (`Inc`, `University`, `Bank`, ...) or
//!    gazetteer; place suffixes (`Street`, `Lake`, `Mount`, ...) or gazetteer (countries, states, cities);
//!    known first names or a title; the word before the run (`in`, `at`, `from`, `to` suggest a place, `by`
//!    a person); otherwise a multi-word run is a product (works and brands), a single word a person.
//!
//! Canonical names fold case with `unicase` and map known aliases (`postgres` -> `PostgreSQL`, `k8s` ->
//! `Kubernetes`, `NYC` -> `New York City`). Measured on `tests/fixtures/entities.jsonl` (README).

use std::sync::OnceLock;

use regex::Regex;
use unicase::UniCase;

use super::gazetteer::*;

/// Kinds of entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityType {
    /// A person (or a named pet).
    Person,
    /// A company, institution, team or event organiser.
    Organization,
    /// A place: city, country, region, street, landmark.
    Location,
    /// A product, technology, brand or creative work.
    Product,
    /// A date, weekday or relative date.
    Date,
    /// A clock time or part of the day.
    Time,
    /// Money, percentage, or a number with a unit.
    Quantity,
    /// An email address.
    Email,
    /// A URL.
    Url,
}

impl EntityType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityType::Person => "person",
            EntityType::Organization => "organization",
            EntityType::Location => "location",
            EntityType::Product => "product",
            EntityType::Date => "date",
            EntityType::Time => "time",
            EntityType::Quantity => "quantity",
            EntityType::Email => "email",
            EntityType::Url => "url",
        }
    }
}

/// One mention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset after the last character.
    pub end: usize,
    /// The text as written.
    pub text: String,
    /// Kind.
    pub entity_type: EntityType,
    /// Canonical name (alias table applied; names keep their written case).
    pub canonical: String,
}

fn in_list(list: &[&str], s: &str) -> bool {
    let u = UniCase::new(s);
    list.iter().any(|x| UniCase::new(*x) == u)
}

fn exact_in(list: &[&str], s: &str) -> bool {
    list.contains(&s)
}

/// The canonical name of `text` of kind `t`: the alias table (case-insensitive), else the gazetteer's
/// spelling, else the text.
pub fn canonical(text: &str, t: EntityType) -> String {
    let u = UniCase::new(text);
    if let Some((_, c)) = ALIASES.iter().find(|(a, _)| UniCase::new(*a) == u) {
        return (*c).to_string();
    }
    let list: &[&str] = match t {
        EntityType::Product => TECH,
        EntityType::Organization => ORGS,
        EntityType::Location => PLACES,
        _ => &[],
    };
    list.iter().find(|x| UniCase::new(**x) == u).map_or_else(|| text.to_string(), |x| (*x).to_string())
}

struct Patterns {
    email: Regex,
    url: Regex,
    date: Regex,
    time: Regex,
    quantity: Regex,
    lower_tech: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        let month = r"(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)";
        let weekday = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?|(?:Mon|Tues|Tue|Wed|Thurs|Thu|Fri|Sat|Sun)\b";
        let num = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|several)";
        let date = format!(
            r"(?i:\b(?:last|next|this|past|coming)\s+(?:{weekday}|week|weekend|month|year|summer|winter|spring|fall|autumn|{month})\b|\b{num}\s+(?:days?|weeks?|months?|years?)\s+ago\b|\byesterday\b|\btomorrow\b|\btoday\b)|\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{month}(?:,?\s+\d{{4}})?\b|\b{month}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b|\b{month}(?:\s+\d{{4}})?\b|\b{weekday}\b|\bChristmas(?:\s+Eve)?\b|\bThanksgiving\b|\bNew Year's(?:\s+Eve|\s+Day)?\b|\b(?:19|20)\d{{2}}\b"
        );
        let quantity = format!(
            r"(?i:[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|million|billion))?|\b\d[\d,]*(?:\.\d+)?\s?%|\b(?:\d[\d,]*(?:\.\d+)?|{num})\s+(?:dollars|euros|pounds|percent|km|kilometers|kilometres|miles?|meters?|metres?|kg|kilograms?|pounds|lbs|hours?|minutes?|seconds?|ms|milliseconds|days|weeks|months|years|GB|MB|KB|TB|GiB|MiB|KiB)\b|\b\d[\d,]*(?:\.\d+)?(?:GB|MB|KB|TB|GiB|MiB|ms|km|kg)\b)"
        );
        let lower_tech = {
            let names: Vec<String> = TECH
                .iter()
                .chain(ALIASES.iter().map(|(a, _)| a).filter(|a| a.len() > 3))
                .filter(|t| {
                    // Three-letter names only where their spelling is distinctive (`npm`, `iOS`), not words.
                    t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && (t.len() > 3 || (t.len() == 3 && t.chars().skip(1).any(char::is_uppercase)) || **t == "npm")
                })
                .map(|t| regex::escape(t))
                .collect();
            format!(r"(?i)\b(?:{})\b", names.join("|"))
        };
        Patterns {
            email: Regex::new(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b").expect("email pattern"),
            url: Regex::new(r"\b(?:https?://|www\.)[^\s<>()\[\]]+").expect("url pattern"),
            date: Regex::new(&date).expect("date pattern"),
            time: Regex::new(r"(?i)\b\d{1,2}(?::\d{2})?\s?(?:am|pm|a\.m\.|p\.m\.)|\b(?:this|tomorrow|yesterday)\s+(?:morning|afternoon|evening)\b|\b(?:noon|midnight|tonight)\b").expect("time pattern"),
            quantity: Regex::new(&quantity).expect("quantity pattern"),
            lower_tech: Regex::new(&lower_tech).expect("tech pattern"),
        }
    })
}

fn overlaps(taken: &[(usize, usize)], s: usize, e: usize) -> bool {
    taken.iter().any(|(a, b)| s < *b && *a < e)
}

fn sentence_start(text: &str, at: usize) -> bool {
    let before = text[..at].trim_end();
    before.is_empty() || before.ends_with(['.', '!', '?', '\n', ':', '"'])
}

/// Entity mentions of `text`, in text order, without overlaps.
pub fn extract(text: &str) -> Vec<Mention> {
    let p = patterns();
    let mut out: Vec<Mention> = Vec::new();
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let push = |out: &mut Vec<Mention>, taken: &mut Vec<(usize, usize)>, s: usize, e: usize, t: EntityType| {
        let raw = &text[s..e];
        let trimmed = raw.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '\'', '"']);
        let e = s + trimmed.len();
        if trimmed.is_empty() || overlaps(taken, s, e) {
            return;
        }
        taken.push((s, e));
        out.push(Mention {
            start: s,
            end: e,
            text: trimmed.to_string(),
            entity_type: t,
            canonical: canonical(trimmed, t),
        });
    };
    for m in p.email.find_iter(text) {
        push(&mut out, &mut taken, m.start(), m.end(), EntityType::Email);
    }
    for m in p.url.find_iter(text) {
        push(&mut out, &mut taken, m.start(), m.end(), EntityType::Url);
    }
    for m in p.time.find_iter(text) {
        push(&mut out, &mut taken, m.start(), m.end(), EntityType::Time);
    }

    for m in p.date.find_iter(text) {
        // A bare "May" needs a cue: "in May", "May 7" is matched by the longer alternatives.
        let w = m.as_str();
        if w == "May" && !text[..m.start()].trim_end().to_ascii_lowercase().ends_with(" in") {
            continue;
        }
        // A four-digit year needs a preposition before it.
        if w.len() == 4 && w.chars().all(|c| c.is_ascii_digit()) {
            let before = text[..m.start()].trim_end().to_ascii_lowercase();
            if !["in", "since", "of", "until", "by", "from", "during", "to"]
                .iter()
                .any(|p| before.ends_with(&format!(" {p}")) || before == *p)
            {
                continue;
            }
        }
        push(&mut out, &mut taken, m.start(), m.end(), EntityType::Date);
    }
    for m in p.quantity.find_iter(text) {
        push(&mut out, &mut taken, m.start(), m.end(), EntityType::Quantity);
    }
    names(text, &mut out, &mut taken);
    for m in p.lower_tech.find_iter(text) {
        if m.as_str().chars().next().is_some_and(char::is_lowercase) {
            push(&mut out, &mut taken, m.start(), m.end(), EntityType::Product);
        }
    }
    out.sort_by_key(|m| m.start);
    out
}

/// Words of `text` with byte offsets (letters, digits and `' - . + # _` inside a word).
fn words(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    let inner = |c: char| c.is_alphanumeric() || matches!(c, '\'' | '\u{2019}' | '-' | '.' | '+' | '#' | '_' | '&');
    for (i, c) in text.char_indices() {
        match (start, inner(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                out.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    // A trailing period belongs to the sentence, not the word (except in titles such as `Dr.` before a name);
    // a possessive `'s` is not part of the name.
    out.into_iter()
        .map(|(s, e)| {
            let w = &text[s..e];
            let w = if w.ends_with('.') && !TITLES.contains(&w) && !PLACE_PREFIX.contains(&w) {
                w.trim_end_matches('.')
            } else {
                w
            };
            let w = w.strip_suffix("'s").or_else(|| w.strip_suffix("\u{2019}s")).unwrap_or(w);
            (s, s + w.len())
        })
        .filter(|(s, e)| e > s)
        .collect()
}

/// True when the word ending at `end` is followed by a possessive `'s`.
fn possessive(text: &str, end: usize) -> bool {
    text[end..].starts_with("'s") || text[end..].starts_with("\u{2019}s")
}

/// Capitalised words that are not names: [`NOT_NAMES`] and the month names (the date patterns take those).
fn not_name(w: &str) -> bool {
    NOT_NAMES.contains(&w) || crate::model::MONTH_NAMES.contains(&w)
}

fn is_cap(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_uppercase)
}

fn names(text: &str, out: &mut Vec<Mention>, taken: &mut Vec<(usize, usize)>) {
    let ws = words(text);
    let mut i = 0;
    while i < ws.len() {
        let (s, e) = ws[i];
        let w = &text[s..e];
        if !is_cap(w)
            || overlaps(taken, s, e)
            || TITLES.contains(&w) && i + 1 < ws.len() && is_cap(&text[ws[i + 1].0..ws[i + 1].1])
        {
            i += 1;
            continue;
        }
        // Grow the run: capitalised words, and connectors between capitalised words.
        let mut j = i + 1;
        while j < ws.len() {
            let (ns, ne) = ws[j];
            let nw = &text[ns..ne];
            let gap = &text[ws[j - 1].1..ns];
            if !gap.chars().all(|c| c == ' ') || gap.is_empty() {
                break;
            }
            if is_cap(nw) && !overlaps(taken, ns, ne) && !not_name(nw) {
                j += 1;
                continue;
            }
            // Connectors inside a name: "University of Oxford", "The Name of the Wind".
            let is_connector = |x: &str| matches!(x, "of" | "for" | "the" | "de" | "&");
            let mut k = j;
            while k < ws.len() && is_connector(&text[ws[k].0..ws[k].1]) {
                k += 1;
            }
            if k > j && k < ws.len() && is_cap(&text[ws[k].0..ws[k].1]) && !not_name(&text[ws[k].0..ws[k].1]) {
                j = k + 1;
                continue;
            }
            break;
        }
        let (rs, re) = (s, ws[j - 1].1);
        let run = &text[rs..re];
        let title_before = i > 0 && TITLES.contains(&&text[ws[i - 1].0..ws[i - 1].1]);
        let starts_sentence = sentence_start(text, rs);
        let run_words: Vec<&str> = run.split(' ').collect();
        let gazetteer = |x: &str| {
            in_list(TECH, x)
                || in_list(ORGS, x)
                || in_list(PLACES, x)
                || ALIASES.iter().any(|(a, _)| UniCase::new(*a) == UniCase::new(x))
        };
        let (run, rs, run_words) = match run_words.as_slice() {
            ["The", rest @ ..] if !rest.is_empty() && gazetteer(&run[4..]) => (&run[4..], rs + 4, rest.to_vec()),
            // A greeting or filler in front of a name: "Yeah Mel", "Congrats Caroline".
            [w, rest @ ..] if !rest.is_empty() && *w != "The" && not_name(w) => {
                (&run[w.len() + 1..], rs + w.len() + 1, rest.to_vec())
            }
            _ => (run, rs, run_words),
        };
        let first = run_words[0];
        let known = gazetteer(run) || exact_in(FIRST_NAMES, first);
        if not_name(run) || (run_words.len() == 1 && not_name(first)) {
            i = j;
            continue;
        }
        // "The Alchemist" at a sentence start is a title; a lone sentence-initial word needs the gazetteer.
        let mut run_start = rs;
        let mut run_text = run.to_string();
        if starts_sentence && !known && !title_before {
            if run_words.len() > 1 && not_name(run_words[0]) && run_words[0] != "The" {
                // Drop the sentence-initial word ("Yesterday Lena" -> "Lena").
                let off = run_words[0].len() + 1;
                run_start = rs + off;
                run_text = run[off..].to_string();
            } else if run_words.len() == 1
                && !possessive(text, re)
                && !(text[re..].starts_with(" and ") && text[re + 5..].starts_with(char::is_uppercase))
            {
                // A lone sentence-initial word is a name only when its form says so: "Diego's band",
                // "Marcus and Leila".
                i = j;
                continue;
            }
        }
        let t = classify_name(text, run_start, &run_text, title_before);
        if let Some(t) = t {
            taken.push((run_start, re));
            out.push(Mention {
                start: run_start,
                end: re,
                canonical: canonical(&run_text, t),
                text: run_text,
                entity_type: t,
            });
        }
        i = j;
    }
}

fn classify_name(text: &str, start: usize, run: &str, title_before: bool) -> Option<EntityType> {
    let words: Vec<&str> = run.split(' ').collect();
    let first = words[0];
    let last = words[words.len() - 1];
    if let Some((_, c)) = ALIASES.iter().find(|(a, _)| UniCase::new(*a) == UniCase::new(run)) {
        return Some(if in_list(TECH, c) {
            EntityType::Product
        } else if in_list(PLACES, c) {
            EntityType::Location
        } else {
            EntityType::Person
        });
    }
    if in_list(TECH, run) {
        return Some(EntityType::Product);
    }
    if in_list(ORGS, run) {
        return Some(EntityType::Organization);
    }
    if in_list(PLACES, run) {
        return Some(EntityType::Location);
    }
    if ORG_SUFFIX.contains(&last) || (words.len() > 1 && matches!(first, "University" | "Bank")) {
        return Some(EntityType::Organization);
    }
    if words.len() > 1 && (PLACE_SUFFIX.contains(&last) || PLACE_PREFIX.contains(&first)) {
        return Some(EntityType::Location);
    }
    if title_before || exact_in(FIRST_NAMES, first) {
        return Some(EntityType::Person);
    }
    let before: String = text[..start].trim_end().rsplit(' ').next().unwrap_or("").to_ascii_lowercase();
    match before.as_str() {
        "in" | "to" | "near" | "from" | "visited" | "visit" | "around" => return Some(EntityType::Location),
        "at" | "for" | "with" | "joined" => {
            return Some(if words.len() > 1 { EntityType::Organization } else { EntityType::Location });
        }
        "by" | "named" | "friend" | "met" | "called" => return Some(EntityType::Person),
        // "the Wolves": a team or group; people's names do not take the article.
        "the" => return Some(EntityType::Organization),
        _ => {}
    }
    if words.len() > 1 {
        // An unknown multi-word name whose first word is not a known first name: a work, brand or event.
        return Some(EntityType::Product);
    }
    if run.chars().all(|c| c.is_uppercase() || c.is_ascii_digit()) && run.len() >= 2 {
        return Some(EntityType::Organization);
    }
    Some(EntityType::Person)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn got(text: &str) -> Vec<(String, EntityType)> {
        extract(text).into_iter().map(|m| (m.text, m.entity_type)).collect()
    }

    #[test]
    fn kinds_and_canonical_names() {
        use EntityType::*;
        assert_eq!(
            got("Caroline went to Lisbon yesterday and emailed bob@example.com at 3 pm."),
            vec![
                ("Caroline".into(), Person),
                ("Lisbon".into(), Location),
                ("yesterday".into(), Date),
                ("bob@example.com".into(), Email),
                ("3 pm".into(), Time)
            ]
        );
        let m = extract("We moved from postgres to Redis; it costs $40 a month.");
        let c: Vec<(&str, &str)> = m.iter().map(|m| (m.text.as_str(), m.canonical.as_str())).collect();
        assert_eq!(c, vec![("postgres", "PostgreSQL"), ("Redis", "Redis"), ("$40", "$40")]);
        assert_eq!(canonical("POSTGRES", Product), "PostgreSQL");
        assert_eq!(canonical("k8s", Product), "Kubernetes");
    }
}
