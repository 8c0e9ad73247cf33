//! Temporal expressions resolved against a reference date (the message's timestamp), in the spirit of TimeML's
//! TIMEX3 normalisation (Pustejovsky et al., 2003) but limited to the common English forms:
//!
//! * deictic days: `today`, `tonight`, `this morning`, `yesterday`, `tomorrow`;
//! * `last|next|this week|weekend|month|year`, `last|this|on <weekday>`;
//! * `N days|weeks|months|years ago`, `in N days|weeks|months|years`;
//! * explicit dates: `2023-05-07`, `7 May 2023`, `May 7, 2023`, `May 7`, `May 2023`, `in May`, `in 2022`.
//!
//! The result is an `event_start` (and `event_end` for ranges) in the store's date forms (`YYYY`, `YYYY-MM`,
//! `YYYY-MM-DD`) with the precision they imply, and whether the expression points to the past or the future.

use time::{Date, Duration, Month, Weekday};

use crate::model::{MONTH_NAMES, TemporalContext};

/// A resolved expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Start, `YYYY`, `YYYY-MM` or `YYYY-MM-DD`.
    pub start: String,
    /// End of a range (weeks, weekends), same forms.
    pub end: Option<String>,
    /// Past, present or future relative to the reference date.
    pub context: TemporalContext,
    /// The words matched.
    pub matched: String,
}

fn day(d: Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

fn month_of(year: i32, month: u8) -> String {
    format!("{year:04}-{month:02}")
}

fn month_index(word: &str) -> Option<u8> {
    let w = word.trim_end_matches('.').to_ascii_lowercase();
    if w.len() < 3 {
        return None;
    }
    MONTH_NAMES
        .iter()
        .position(|m| {
            let m = m.to_ascii_lowercase();
            m == w || (w.len() >= 3 && m.starts_with(&w) && (w.len() == 3 || w == "sept"))
        })
        .map(|i| i as u8 + 1)
}

fn weekday(word: &str) -> Option<Weekday> {
    Some(match word {
        "monday" => Weekday::Monday,
        "tuesday" => Weekday::Tuesday,
        "wednesday" => Weekday::Wednesday,
        "thursday" => Weekday::Thursday,
        "friday" => Weekday::Friday,
        "saturday" => Weekday::Saturday,
        "sunday" => Weekday::Sunday,
        _ => return None,
    })
}

fn number(word: &str) -> Option<i64> {
    if let Ok(n) = word.parse::<i64>() {
        return Some(n);
    }
    let words =
        ["a", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    words.iter().position(|w| *w == word).map(|i| i.max(1) as i64)
}

fn add_months(d: Date, months: i64) -> Date {
    let total = d.year() as i64 * 12 + (u8::from(d.month()) as i64 - 1) + months;
    let (y, m) = (total.div_euclid(12) as i32, (total.rem_euclid(12) + 1) as u8);
    let month = Month::try_from(m).unwrap_or(Month::January);
    let last = time::util::days_in_month(month, y);
    Date::from_calendar_date(y, month, d.day().min(last)).unwrap_or(d)
}

fn ctx(target: Date, reference: Date) -> TemporalContext {
    match target.cmp(&reference) {
        std::cmp::Ordering::Less => TemporalContext::Past,
        std::cmp::Ordering::Equal => TemporalContext::Present,
        std::cmp::Ordering::Greater => TemporalContext::Future,
    }
}

/// Lowercased words of `text` (letters, digits and `-` kept together); ordinal suffixes are dropped from
/// numbers (`7th` -> `7`).
fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_ascii_lowercase();
            if w.starts_with(|c: char| c.is_ascii_digit()) {
                for suffix in ["st", "nd", "rd", "th"] {
                    if let Some(n) = w.strip_suffix(suffix) {
                        return n.to_string();
                    }
                }
            }
            w
        })
        .collect()
}

/// What one rule made of the word at a position: a resolved expression, a definite "no date" (an impossible
/// calendar date), or nothing (the next rule, or the next word, is tried).
enum Step {
    Found(Resolved),
    Stop,
    Next,
}

fn found(start: String, end: Option<String>, context: TemporalContext, matched: &[&str]) -> Step {
    Step::Found(Resolved { start, end, context, matched: matched.join(" ") })
}

/// The words of a text (lowercased, hyphens kept) and its tokens, with the reference date.
struct Scan {
    raw: Vec<String>,
    toks: Vec<String>,
    reference: Date,
}

impl Scan {
    fn at(&self, i: usize) -> &str {
        self.raw.get(i).map(String::as_str).unwrap_or("")
    }

    fn num_at(&self, i: usize) -> Option<i64> {
        self.toks.get(i).and_then(|w| w.parse::<i64>().ok())
    }

    /// An ISO date (`2023-05-07`).
    fn iso_date(&self, i: usize) -> Step {
        let w = self.at(i);
        if w.len() == 10
            && w.as_bytes()[4] == b'-'
            && w.as_bytes()[7] == b'-'
            && let Ok(d) = Date::parse(w, &time::macros::format_description!("[year]-[month]-[day]"))
        {
            return found(day(d), None, ctx(d, self.reference), &[w]);
        }
        Step::Next
    }

    /// `today`, `yesterday`, `tomorrow`, `this morning`; `last`/`next`/`this`/`past`/`coming` + week, weekend, month, year or a weekday.
    fn relative_word(&self, i: usize) -> Step {
        let w = self.at(i);
        match w {
            "today" | "tonight" => return found(day(self.reference), None, TemporalContext::Present, &[w]),
            "yesterday" => {
                let d = self.reference - Duration::days(1);
                return found(day(d), None, TemporalContext::Past, &[w]);
            }
            "tomorrow" => {
                let d = self.reference + Duration::days(1);
                return found(day(d), None, TemporalContext::Future, &[w]);
            }
            "this" if matches!(self.at(i + 1), "morning" | "afternoon" | "evening") => {
                return found(day(self.reference), None, TemporalContext::Present, &[w, self.at(i + 1)]);
            }
            "last" | "next" | "this" | "past" | "coming" => {
                let sign: i64 = match w {
                    "last" | "past" => -1,
                    "next" | "coming" => 1,
                    _ => 0,
                };
                let unit = self.at(i + 1);
                match unit {
                    "week" => {
                        let start = self.reference + Duration::weeks(sign)
                            - Duration::days(self.reference.weekday().number_days_from_monday() as i64);
                        let end = start + Duration::days(6);
                        let c = if sign < 0 {
                            TemporalContext::Past
                        } else if sign > 0 {
                            TemporalContext::Future
                        } else {
                            TemporalContext::Present
                        };
                        return found(day(start), Some(day(end)), c, &[w, unit]);
                    }
                    "weekend" => {
                        let to_sat = (Weekday::Saturday.number_days_from_monday() as i64)
                            - (self.reference.weekday().number_days_from_monday() as i64);
                        let sat = self.reference + Duration::days(to_sat) + Duration::weeks(sign);
                        let c = ctx(sat, self.reference);
                        return found(day(sat), Some(day(sat + Duration::days(1))), c, &[w, unit]);
                    }
                    "month" => {
                        let d = add_months(self.reference, sign);
                        return found(month_of(d.year(), u8::from(d.month())), None, ctx_sign(sign), &[w, unit]);
                    }
                    "year" => {
                        let y = self.reference.year() + sign as i32;
                        return found(format!("{y:04}"), None, ctx_sign(sign), &[w, unit]);
                    }
                    other => {
                        if let Some(wd) = weekday(other) {
                            let back = (self.reference.weekday().number_days_from_monday() as i64
                                - wd.number_days_from_monday() as i64)
                                .rem_euclid(7);
                            let d = if sign > 0 {
                                self.reference + Duration::days((7 - back) % 7 + if back == 0 { 7 } else { 0 })
                            } else {
                                self.reference - Duration::days(if back == 0 { 7 } else { back })
                            };
                            return found(day(d), None, ctx(d, self.reference), &[w, other]);
                        }
                    }
                }
            }
            _ => {}
        }
        Step::Next
    }

    /// `N units ago` and `in N units` (days, weeks, months, years).
    fn units_ago(&self, i: usize) -> Step {
        let w = self.at(i);
        if let Some(n) = number(w)
            && let Some(unit) = self.raw.get(i + 1).map(|u| u.trim_end_matches('s'))
            && matches!(unit, "day" | "week" | "month" | "year")
        {
            let ago = self.at(i + 2) == "ago";
            let ahead = i > 0 && self.at(i - 1) == "in";
            if ago || ahead {
                let sign = if ago { -1 } else { 1 };
                let (start, prec_day) = match unit {
                    "day" => (self.reference + Duration::days(sign * n), true),
                    "week" => (self.reference + Duration::weeks(sign * n), true),
                    "month" => (add_months(self.reference, sign * n), false),
                    _ => (add_months(self.reference, sign * 12 * n), false),
                };
                let s = match unit {
                    "year" => format!("{:04}", start.year()),
                    "month" => month_of(start.year(), u8::from(start.month())),
                    _ if prec_day => day(start),
                    _ => day(start),
                };
                return found(s, None, ctx_sign(sign), &[w, unit, if ago { "ago" } else { "" }]);
            }
        }
        Step::Next
    }

    /// A date with a month name (`7 May 2023`, `May 7`, `in May`); without a year the nearest occurrence in the direction the text suggests.
    fn month_name(&self, i: usize) -> Step {
        let w = self.at(i);
        if let Some(m) = month_index(w) {
            let Ok(month) = Month::try_from(m) else { return Step::Stop };
            // "7 May 2023" / "7 May".
            let before = i.checked_sub(1).and_then(|j| self.num_at(j)).filter(|d| (1..=31).contains(d));
            let after = self.num_at(i + 1).filter(|d| (1..=31).contains(d));
            let year_after = |j: usize| self.num_at(j).filter(|y| (1900..=2200).contains(y)).map(|y| y as i32);
            let (dom, year) = match (before, after) {
                (Some(d), _) => (Some(d), year_after(i + 1)),
                (None, Some(d)) => (Some(d), year_after(i + 2)),
                (None, None) => (None, year_after(i + 1)),
            };
            // A bare month word that is also a common word needs a cue ("in May", "May 7").
            if dom.is_none()
                && year.is_none()
                && !(i > 0 && matches!(self.at(i - 1), "in" | "during" | "since" | "until" | "by"))
            {
                return Step::Next;
            }
            if matches!(w, "may" | "march") && dom.is_none() && year.is_none() && self.at(i - 1) != "in" {
                return Step::Next;
            }
            let y = year.unwrap_or_else(|| {
                // Without a year: the nearest occurrence in the direction the text suggests (past by default).
                let (y, now) = (self.reference.year(), u8::from(self.reference.month()));
                match future_cue(&self.raw) {
                    true if m < now => y + 1,
                    false if m > now => y - 1,
                    _ => y,
                }
            });
            return match dom {
                Some(d) => {
                    let Ok(date) = Date::from_calendar_date(y, month, d as u8) else { return Step::Stop };
                    found(day(date), None, ctx(date, self.reference), &[w])
                }
                None => {
                    let Ok(first) = Date::from_calendar_date(y, month, 1) else { return Step::Stop };
                    let c = if y == self.reference.year() && m == u8::from(self.reference.month()) {
                        TemporalContext::Present
                    } else {
                        ctx(first, self.reference)
                    };
                    found(month_of(y, m), None, c, &[w])
                }
            };
        }
        Step::Next
    }

    /// `in 2022`, `since 2022`, `during 2022`.
    fn in_year(&self, i: usize) -> Step {
        let w = self.at(i);
        if i > 0
            && matches!(self.at(i - 1), "in" | "since" | "during")
            && let Some(y) = self.num_at(i).filter(|y| (1900..=2200).contains(y))
        {
            let c = match (y as i32).cmp(&self.reference.year()) {
                std::cmp::Ordering::Less => TemporalContext::Past,
                std::cmp::Ordering::Equal => TemporalContext::Present,
                std::cmp::Ordering::Greater => TemporalContext::Future,
            };
            return found(format!("{y:04}"), None, c, &[self.at(i - 1), w]);
        }
        Step::Next
    }
}

/// The first temporal expression of `text`, resolved against `reference`; None when there is none.
pub fn resolve(text: &str, reference: Date) -> Option<Resolved> {
    let raw: Vec<String> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '-'))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let scan = Scan { raw, toks: tokens(text), reference };
    let rules: [fn(&Scan, usize) -> Step; 5] =
        [Scan::iso_date, Scan::relative_word, Scan::units_ago, Scan::month_name, Scan::in_year];
    for i in 0..scan.raw.len() {
        for rule in rules {
            match rule(&scan, i) {
                Step::Found(r) => return Some(r),
                Step::Stop => return None,
                Step::Next => {}
            }
        }
    }
    None
}

fn ctx_sign(sign: i64) -> TemporalContext {
    match sign.signum() {
        -1 => TemporalContext::Past,
        1 => TemporalContext::Future,
        _ => TemporalContext::Present,
    }
}

fn future_cue(words: &[String]) -> bool {
    words.iter().any(|w| matches!(w.as_str(), "will" | "going" | "plan" | "planning" | "next" | "upcoming" | "gonna"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::date;

    fn at(text: &str) -> Option<(String, Option<String>, TemporalContext)> {
        resolve(text, date!(2023 - 05 - 08)).map(|r| (r.start, r.end, r.context))
    }

    #[test]
    fn relative_and_explicit_expressions_resolve() {
        let past = TemporalContext::Past;
        let future = TemporalContext::Future;
        assert_eq!(at("I went to the group yesterday."), Some(("2023-05-07".into(), None, past)));
        assert_eq!(at("see you tomorrow"), Some(("2023-05-09".into(), None, future)));
        // 2023-05-08 is a Monday.
        assert_eq!(at("We met last week"), Some(("2023-05-01".into(), Some("2023-05-07".into()), past)));
        assert_eq!(at("last weekend was fun"), Some(("2023-05-06".into(), Some("2023-05-07".into()), past)));
        assert_eq!(at("last Friday I ran"), Some(("2023-05-05".into(), None, past)));
        assert_eq!(at("next month we move"), Some(("2023-06".into(), None, future)));
        assert_eq!(at("two weeks ago I painted"), Some(("2023-04-24".into(), None, past)));
        assert_eq!(at("in 3 days"), Some(("2023-05-11".into(), None, future)));
        assert_eq!(at("on 7 May 2023 we"), Some(("2023-05-07".into(), None, past)));
        assert_eq!(at("on June 20, 2022"), Some(("2022-06-20".into(), None, past)));
        assert_eq!(at("back in 2021"), Some(("2021".into(), None, past)));
        assert_eq!(at("in July I went"), Some(("2022-07".into(), None, past)));
        assert_eq!(at("I'm going to Paris in July"), Some(("2023-07".into(), None, future)));
        assert_eq!(at("We plan to visit in April"), Some(("2024-04".into(), None, future)));
        assert_eq!(at("since 2020-01-15"), Some(("2020-01-15".into(), None, past)));
        assert_eq!(at("You may like it"), None);
        assert_eq!(at("nothing temporal here"), None);
    }
}
