//! Detecting review events: the features of a memory's text, their comparison, and raising events after a
//! write (the rules are in the module docs of `store/reviews/`).

use std::collections::BTreeSet;

use super::{CANDIDATES, MAX_REVIEW_BATCH, MAX_VALUE_TERMS, MIN_DICE, MIN_DICE_ATTRIBUTE, Reviews};
use crate::error::Result;
use crate::index::catalog::MemoryFilter;
use crate::model::ReviewEvent;
use crate::model::{MemoryState, Timestamp};
use crate::store::review;
use crate::store::types::{CreatedMemory, WriteAction};
use crate::store::{SearchMode, SearchQuery};
use crate::text;

/// Month names, for date differences written in words.
const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Set phrases whose negation word negates nothing ("no problem", "can't wait"), removed before looking for
/// a negation.
const NEGATION_IDIOMS: &[&str] = &[
    "no problem",
    "no worries",
    "no worry",
    "no doubt",
    "no way",
    "never mind",
    "not bad",
    "can't wait",
    "cannot wait",
    "can not wait",
    "won't be long",
    "no matter",
    "no wonder",
    "not only",
];

/// Stems of small talk: thanks, greetings, encouragement. A memory most of whose terms (names aside) are
/// these is phatic, not a statement that can be updated or contradicted.
const PHATIC: &[&str] = &[
    "amaz",
    "appreci",
    "awesom",
    "bye",
    "care",
    "cheer",
    "congrat",
    "congratul",
    "cool",
    "day",
    "definit",
    "excit",
    "fun",
    "glad",
    "good",
    "great",
    "hear",
    "hello",
    "help",
    "hey",
    "hi",
    "hope",
    "kind",
    "know",
    "let",
    "lot",
    "love",
    "luck",
    "mean",
    "much",
    "nice",
    "okay",
    "problem",
    "proud",
    "realli",
    "see",
    "soon",
    "sound",
    "sure",
    "support",
    "take",
    "talk",
    "thank",
    "thing",
    "time",
    "wait",
    "welcom",
    "well",
    "wish",
    "wonder",
    "word",
    "worri",
    "wow",
    "yeah",
    "yes",
    "yep",
];

/// The features two memories are compared on.
#[derive(Debug, Clone, Default)]
pub struct Features {
    /// Content terms: stemmed, stop words, numbers and month names out.
    terms: BTreeSet<String>,
    /// Terms of capitalised words that do not start a sentence (names, places, products): the values an
    /// attribute can take.
    proper: BTreeSet<String>,
    numbers: BTreeSet<String>,
    years: BTreeSet<String>,
    months: BTreeSet<String>,
    negated: bool,
    /// `Name:` at the start (a transcript line), lowercase.
    speaker: Option<String>,
    /// Share of the terms (proper names aside) that are small talk.
    phatic: f64,
}

/// A transcript speaker prefix: up to three capitalised words and a colon within the first 40 bytes.
fn speaker_of(text: &str) -> Option<String> {
    let (head, _) = text.split_once(':')?;
    let head = head.trim();
    let words: Vec<&str> = head.split_whitespace().collect();
    let ok = !head.is_empty()
        && head.len() <= 40
        && words.len() <= 3
        && words.iter().all(|w| w.chars().next().is_some_and(char::is_uppercase));
    ok.then(|| head.to_lowercase())
}

/// Features of a memory's text.
pub fn features(text_in: &str) -> Features {
    let speaker = speaker_of(text_in);
    // The statement itself, without the speaker prefix.
    let body = match &speaker {
        Some(_) => text_in.split_once(':').map_or(text_in, |(_, b)| b),
        None => text_in,
    };
    let words = text::words(body);
    let mut f = Features { speaker, ..Features::default() };
    for w in &words {
        if w.chars().all(|c| c.is_ascii_digit()) {
            if w.len() == 4 && (w.starts_with("19") || w.starts_with("20")) {
                f.years.insert(w.clone());
            } else {
                f.numbers.insert(w.clone());
            }
        } else if MONTHS.contains(&w.as_str()) {
            f.months.insert(w.clone());
        }
    }
    let mut lowered = body.to_lowercase().replace('\u{2019}', "'");
    for idiom in NEGATION_IDIOMS {
        lowered = lowered.replace(idiom, " ");
    }
    let plain = text::words(&lowered);
    f.negated = plain.iter().any(|w| text::is_negation(w)) || lowered.contains("n't");
    f.terms = text::terms(body)
        .into_iter()
        .filter(|t| !t.chars().all(|c| c.is_ascii_digit()))
        .filter(|t| !MONTHS.iter().any(|m| m.starts_with(t.as_str()) && t.len() >= 3))
        .collect();
    // Capitalised words not at a sentence start.
    let mut sentence_start = true;
    for token in body.split_whitespace() {
        let word: String = token.chars().filter(|c| c.is_alphanumeric()).collect();
        if !word.is_empty() && !sentence_start && word.chars().next().is_some_and(char::is_uppercase) {
            f.proper.extend(text::terms(&word));
        }
        sentence_start = token.ends_with(['.', '!', '?']);
    }
    let plain_terms: Vec<&String> = f.terms.iter().filter(|t| !f.proper.contains(*t)).collect();
    let small_talk = plain_terms.iter().filter(|t| PHATIC.contains(&t.as_str())).count();
    f.phatic = if plain_terms.is_empty() { 1.0 } else { small_talk as f64 / plain_terms.len() as f64 };
    f
}

/// Dice coefficient of two term sets, 0..=1.
pub fn dice(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    2.0 * a.intersection(b).count() as f64 / (a.len() + b.len()) as f64
}

fn differ(label: &str, old: &BTreeSet<String>, new: &BTreeSet<String>) -> Option<String> {
    (!old.is_empty() && !new.is_empty() && old != new).then(|| {
        let j = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        format!("{label}: {} -> {}", j(old), j(new))
    })
}

/// Most small talk a memory may be (share of its terms) and still be reviewed.
pub const MAX_PHATIC: f64 = 0.5;

/// Compares an older and a newer memory: `(similarity, kind, signals)`, or None when the pair is no review.
///
/// Beyond the similarity floor: lines of two different speakers never review each other, small talk is not
/// reviewed, a one-sided negation counts only when the two statements are otherwise alike (each keeps at
/// most [`MAX_VALUE_TERMS`] + 1 terms the other lacks, similarity at least [`MIN_DICE_ATTRIBUTE`]), and an
/// attribute-value difference needs a proper name or number on both sides of the difference.
pub fn compare(old: &Features, new: &Features) -> Option<(f64, &'static str, Vec<String>)> {
    if old.speaker.is_some() && new.speaker.is_some() && old.speaker != new.speaker {
        return None;
    }
    if old.phatic > MAX_PHATIC || new.phatic > MAX_PHATIC {
        return None;
    }
    let sim = dice(&old.terms, &new.terms);
    if sim < MIN_DICE {
        return None;
    }
    let only_old: Vec<&String> = old.terms.difference(&new.terms).collect();
    let only_new: Vec<&String> = new.terms.difference(&old.terms).collect();
    let aligned =
        sim >= MIN_DICE_ATTRIBUTE && only_old.len() <= MAX_VALUE_TERMS + 1 && only_new.len() <= MAX_VALUE_TERMS + 1;
    let mut signals = Vec::new();
    let negation = old.negated != new.negated && aligned;
    if negation {
        signals.push("negation".to_string());
    }
    signals.extend(differ("number", &old.numbers, &new.numbers));
    signals.extend(differ("year", &old.years, &new.years));
    signals.extend(differ("month", &old.months, &new.months));
    let valued = |only: &[&String], f: &Features| only.iter().any(|t| f.proper.contains(*t));
    if signals.is_empty()
        && sim >= MIN_DICE_ATTRIBUTE
        && (1..=MAX_VALUE_TERMS).contains(&only_old.len())
        && (1..=MAX_VALUE_TERMS).contains(&only_new.len())
        && valued(&only_old, old)
        && valued(&only_new, new)
    {
        let j = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ");
        signals.push(format!("value: {} -> {}", j(&only_old), j(&only_new)));
    }
    if signals.is_empty() {
        return None;
    }
    let kind = if negation { "contradiction" } else { "update" };
    Some((sim, kind, signals))
}

impl Reviews<'_> {
    /// Raises review events for the memories a write created (called after the write committed). Errors are
    /// logged, never returned: the write has happened.
    pub(crate) fn raise(&self, created: &[CreatedMemory]) {
        if created.len() > MAX_REVIEW_BATCH {
            return;
        }
        let mut events = Vec::new();
        let position: std::collections::HashMap<&str, usize> =
            created.iter().enumerate().map(|(i, c)| (c.view.memory.id.as_str(), i)).collect();
        // One read transaction for every memory of the write: its candidates' records and entities.
        let rtx = match self.store.core.db.read() {
            Ok(rtx) => rtx,
            Err(e) => {
                tracing::warn!(error = %e.chain(), "review detection failed");
                return;
            }
        };
        for (i, c) in created.iter().enumerate().filter(|(_, c)| c.action == WriteAction::Created) {
            // Within one batch, only an earlier memory can be the older side (one event per pair).
            let later = |id: &str| position.get(id).is_some_and(|&j| j >= i);
            match self.candidates(&rtx, c, later) {
                Ok(mut e) => events.append(&mut e),
                Err(e) => tracing::warn!(error = %e.chain(), memory = %c.view.memory.id, "review detection failed"),
            }
        }
        if events.is_empty() {
            return;
        }
        drop(rtx);
        // Review events are bookkeeping: the graph and other derived results do not read them. They are
        // detected where a memory is written, so they replicate (docs/sync.md).
        let r = self.store.core.writes.write(crate::store::core::write::Commit::REPLICATED_BOOKKEEPING, |txn, _| {
            let mut t = review::reviews(txn)?;
            for e in &events {
                t.put((e.space_id.as_str(), e.id.as_str()), e)?;
            }
            Ok(())
        });
        if let Err(e) = r {
            tracing::warn!(error = %e.chain(), "review events not stored");
        }
    }

    fn candidates(
        &self,
        rtx: &crate::storage::ReadTx,
        c: &CreatedMemory,
        later: impl Fn(&str) -> bool,
    ) -> Result<Vec<ReviewEvent>> {
        let m = &c.view.memory;
        if m.state != MemoryState::Active || m.is_crystal || m.metadata.0.contains_key("source_id") {
            return Ok(Vec::new());
        }
        let mut q: String = m.content.chars().take(1000).collect();
        if q.trim().is_empty() || text::terms(&q).is_empty() {
            return Ok(Vec::new());
        }
        q.truncate(q.len().min(crate::store::search::MAX_QUERY_BYTES));
        // A query of at most 4,096 bytes with a term, and a limit in 1..=100: the checks of `search` hold. The
        // memory's own space only: an older side in a space it shares is not a review of this space.
        let query = SearchQuery {
            query: q,
            space_id: m.space_id.clone(),
            limit: CANDIDATES + 1,
            filter: MemoryFilter::default(),
            mode: SearchMode::Lexical,
            fusion: None,
            query_embedding: None,
            options: crate::store::SearchOptions::OWN_TEXT,
        };
        let res = self.store.search().search_space(rtx, &query, false, std::time::Instant::now())?;
        let new_f = features(&m.content);
        // The candidates that pass the cheap checks, then the entities of all of them in one batched read.
        let mut passed = Vec::new();
        for h in &res.hits {
            let o = &h.view.memory;
            if o.id == m.id
                || o.space_id != m.space_id
                || o.state != MemoryState::Active
                || !o.is_latest
                || o.is_crystal
            {
                continue;
            }
            if o.metadata.0.contains_key("source_id") || later(&o.id) {
                continue;
            }
            // Two memories distilled from the same turns are one statement, not an update.
            if o.source_thread_id.is_some()
                && o.source_thread_id == m.source_thread_id
                && o.source_range == m.source_range
            {
                continue;
            }
            let of = features(&o.content);
            let Some(found) = compare(&of, &new_f) else { continue };
            passed.push((o, found));
        }
        if passed.is_empty() {
            return Ok(Vec::new());
        }
        // The new memory's entities are those its write resolved; the candidates' are read.
        let ids: Vec<&str> = passed.iter().map(|(o, _)| o.id.as_str()).collect();
        let lists = crate::store::graph::entities::memories_entities_in(rtx, &m.space_id, &ids)?.into_iter();
        let new_entities: BTreeSet<(String, String)> =
            c.entities.iter().map(|e| (e.id.clone(), e.name.clone())).collect();
        let mut out = Vec::new();
        for ((o, (similarity, kind, signals)), theirs) in passed.into_iter().zip(lists) {
            let shared: Vec<String> = theirs
                .into_iter()
                .filter(|e| new_entities.contains(&(e.id.clone(), e.name.clone())))
                .map(|e| e.name)
                .collect();
            if shared.is_empty() {
                continue;
            }
            out.push(ReviewEvent {
                id: format!("rev_{}", uuid::Uuid::now_v7().simple()),
                space_id: m.space_id.clone(),
                kind: kind.into(),
                newer_memory_id: m.id.clone(),
                older_memory_id: o.id.clone(),
                signals,
                similarity: (similarity * 1000.0).round() / 1000.0,
                shared_entities: shared,
                created_at: Timestamp::now(),
                resolution: None,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(old: &str, new: &str) -> Option<(f64, &'static str, Vec<String>)> {
        compare(&features(old), &features(new))
    }

    #[test]
    fn numbers_negations_dates_and_values_make_reviews() {
        let r = pair("Caroline has 2 kids and a dog", "Caroline has 3 kids and a dog").expect("number");
        assert_eq!(r.1, "update");
        assert_eq!(r.2, vec!["number: 2 -> 3".to_string()]);
        let r = pair("Melanie likes running in the park", "Melanie does not like running in the park").expect("neg");
        assert_eq!(r.1, "contradiction");
        let r = pair("Jon moved to Berlin in 2021 for work", "Jon moved to Berlin in 2023 for work").expect("year");
        assert!(r.2[0].starts_with("year"));
        let r = pair("The team's favourite editor is Vim", "The team's favourite editor is Emacs").expect("value");
        assert!(r.2[0].starts_with("value"), "{:?}", r.2);
    }

    #[test]
    fn paraphrases_small_talk_and_other_speakers_are_not_reviews() {
        assert!(pair("Caroline has 2 kids and a dog", "Caroline has 2 kids and a dog").is_none());
        assert!(pair("Caroline went hiking last weekend", "Melanie painted a sunset").is_none());
        assert!(pair("We use PostgreSQL for the team server", "The team server stores data in PostgreSQL").is_none());
        // Small talk, idioms and paraphrases from LoCoMo that the first version flagged.
        assert!(pair("Gina: Glad to cheer you on. Keep going and never give up!", "Gina: Keep it up!").is_none());
        assert!(
            pair(
                "Maria: No problem, John. Let me know if you need any help. We work well together!",
                "Maria: Sure thing, John. Let me know if you need any help."
            )
            .is_none()
        );
        assert!(
            pair(
                "Melanie: Thanks, Caroline! Appreciate your friendship. It's great to have a supporter!",
                "Melanie: Thanks, Caroline. They're a real support. Appreciate them a lot."
            )
            .is_none()
        );
        assert!(pair("Jon: I have 2 dogs at home", "Gina: I have 3 dogs at home").is_none(), "different speakers");
        assert!(pair("Jon: I have 2 dogs at home", "Jon: I have 3 dogs at home").is_some(), "same speaker");
    }
}
