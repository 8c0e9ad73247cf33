//! Entity extraction against hand-labelled sets: `tests/fixtures/entities.jsonl` (110 sentences, 244 spans,
//! written before the extractor existed and then used to tune it) and `entities_heldout.jsonl` (40 sentences,
//! written after tuning and never tuned on). A predicted span counts when its text and kind equal a labelled
//! one (exact match, each labelled span used once). Prints precision, recall and F1 per kind.

use std::collections::BTreeMap;

use engram::extract::entities::extract;

#[test]
fn entity_spans_reach_f1_0_8_on_the_labelled_set() {
    assert!(f1_of("entities.jsonl") >= 0.8);
}

/// A second set of 40 sentences written after the rules were tuned on the first, never used for tuning.
#[test]
fn entity_spans_reach_f1_0_8_on_the_held_out_set() {
    assert!(f1_of("entities_heldout.jsonl") >= 0.8);
}

fn f1_of(name: &str) -> f64 {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let text = std::fs::read_to_string(path).expect("fixture");
    let mut per: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new(); // (true positives, predicted, gold)
    let mut misses = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        let sentence = v["text"].as_str().expect("text");
        let mut gold: Vec<(String, String)> = v["entities"]
            .as_array()
            .expect("entities")
            .iter()
            .map(|e| (e[0].as_str().unwrap_or("").to_string(), e[1].as_str().unwrap_or("").to_string()))
            .collect();
        for (_, t) in &gold {
            per.entry(t.clone()).or_default().2 += 1;
        }
        for m in extract(sentence) {
            let key = (m.text.clone(), m.entity_type.as_str().to_string());
            per.entry(key.1.clone()).or_default().1 += 1;
            if let Some(i) = gold.iter().position(|g| *g == key) {
                gold.swap_remove(i);
                per.entry(key.1).or_default().0 += 1;
            } else {
                misses.push(format!("extra {key:?} in {sentence:?}"));
            }
        }
        misses.extend(gold.into_iter().map(|g| format!("missed {g:?} in {sentence:?}")));
    }
    let f1 = |tp: usize, p: usize, g: usize| {
        let (pr, rc) = (tp as f64 / p.max(1) as f64, tp as f64 / g.max(1) as f64);
        (pr, rc, if pr + rc > 0.0 { 2.0 * pr * rc / (pr + rc) } else { 0.0 })
    };
    let (mut tp, mut p, mut g) = (0, 0, 0);
    for (kind, (a, b, c)) in &per {
        let (pr, rc, f) = f1(*a, *b, *c);
        eprintln!("{kind:<13} precision {pr:.3} recall {rc:.3} F1 {f:.3} ({a} of {b} predicted, {c} labelled)");
        (tp, p, g) = (tp + a, p + b, g + c);
    }
    let (pr, rc, f) = f1(tp, p, g);
    eprintln!("{name}: {:<13} precision {pr:.3} recall {rc:.3} F1 {f:.3} ({tp} of {p} predicted, {g} labelled)", "all");
    for m in &misses {
        eprintln!("  {m}");
    }
    f
}
