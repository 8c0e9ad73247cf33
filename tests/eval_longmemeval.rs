//! `engram eval longmemeval` on a small file in the official LongMemEval format (tests/fixtures/longmemeval),
//! against a real redb store: questions streamed one at a time, one space per question (deleted afterwards
//! unless kept), abstention questions skipped, the paper's metrics per question type, and bad files refused.

use std::path::{Path, PathBuf};

use engram::eval::longmemeval::{LongMemEvalOptions, LongMemEvalReport, run};
use engram::{ErrorKind, KnowledgeStore, StoreConfig};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/longmemeval/mini.json")
}

fn open(dir: &Path) -> KnowledgeStore {
    KnowledgeStore::open(StoreConfig::new(dir)).expect("open")
}

fn metric(r: &LongMemEvalReport, method: &str, level: &str, name: &str, qtype: &str) -> f64 {
    r.methods[method][level][name][qtype]
}

#[test]
fn the_fixture_is_evaluated_question_by_question() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let r = run(&store, &fixture(), &LongMemEvalOptions::default(), false).expect("run");
    // Five questions in the file; the `_abs` one is skipped.
    assert_eq!(r.questions, 4);
    assert_eq!(r.abstention_skipped, 1);
    assert_eq!(r.without_answer_turns, 0);
    for t in ["single-session-user", "multi-session", "knowledge-update", "single-session-assistant"] {
        assert_eq!(r.questions_by_type.get(t), Some(&1), "{t}");
    }
    // 4 + 5 + 4 + 3 sessions, 16 + 18 + 13 + 9 messages, one memory each in turns mode.
    assert_eq!((r.sessions, r.turns, r.memories), (16, 56, 56));
    assert_eq!(r.mode, "turns");
    // Every method is scored at both levels, at both default cut-offs.
    for m in ["hybrid", "lexical", "vector"] {
        for level in ["session", "turn"] {
            for k in [5, 10] {
                for name in ["recall_any", "recall_all", "ndcg_any"] {
                    let v = metric(&r, m, level, &format!("{name}@{k}"), "all");
                    assert!((0.0..=1.0).contains(&v), "{m} {level} {name}@{k} = {v}");
                }
            }
        }
    }
    // The evidence of each question shares its words, so hybrid finds every answer session in the top 5.
    assert_eq!(metric(&r, "hybrid", "session", "recall_any@5", "all"), 1.0);
    assert_eq!(metric(&r, "hybrid", "session", "recall_all@5", "multi-session"), 1.0);
    // The assistant's turn holds the single-session-assistant evidence and is stored, so it is found.
    assert_eq!(metric(&r, "hybrid", "turn", "recall_any@5", "single-session-assistant"), 1.0);
    // Two evidence turns can't both sit at rank 1: turn-level nDCG of the two-turn questions is below 1, and
    // `all` is the mean over the four questions.
    let ku = metric(&r, "hybrid", "turn", "ndcg_any@10", "knowledge-update");
    let ms = metric(&r, "hybrid", "turn", "ndcg_any@10", "multi-session");
    let ssu = metric(&r, "hybrid", "turn", "ndcg_any@10", "single-session-user");
    let ssa = metric(&r, "hybrid", "turn", "ndcg_any@10", "single-session-assistant");
    let all = metric(&r, "hybrid", "turn", "ndcg_any@10", "all");
    assert!((all - (ku + ms + ssu + ssa) / 4.0).abs() < 1e-3, "{all} vs {ku} {ms} {ssu} {ssa}");
    assert!(r.search_ms["p50"] > 0.0 && r.ingest_per_s > 0.0);
    // Each question's space is gone afterwards.
    let spaces: Vec<String> = store.spaces().list().expect("spaces").into_iter().map(|s| s.id).collect();
    assert!(spaces.iter().all(|s| !s.starts_with("lme-")), "{spaces:?}");
}

#[test]
fn a_limit_stops_the_reading_and_kept_spaces_hold_the_haystack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let opts = LongMemEvalOptions { limit: Some(2), keep_spaces: true, ks: vec![1, 3], ..Default::default() };
    let r = run(&store, &fixture(), &opts, false).expect("run");
    assert_eq!(r.questions, 2);
    assert_eq!((r.sessions, r.turns), (9, 34));
    assert!(r.methods["hybrid"]["session"].contains_key("recall_any@3"));
    assert!(!r.methods["hybrid"]["session"].contains_key("recall_any@5"));
    let mut spaces: Vec<String> = store.spaces().list().expect("spaces").into_iter().map(|s| s.id).collect();
    spaces.retain(|s| s.starts_with("lme-"));
    spaces.sort();
    assert_eq!(spaces, ["lme-0", "lme-1"]);
    let count = |space: &str| {
        store
            .memories()
            .list(&engram::store::ListQuery {
                space_id: space.into(),
                filter: Default::default(),
                limit: 1000,
                offset: 0,
            })
            .expect("list")
            .items
            .len()
    };
    assert_eq!((count("lme-0"), count("lme-1")), (16, 18));
    // The threads are the sessions, with the session id and the session date.
    let threads = store.threads().list("lme-1", None, 100, 0).expect("threads");
    assert_eq!(threads.total, 5);
}

#[test]
fn threads_mode_scores_memories_by_the_turns_they_came_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let opts = LongMemEvalOptions { threads: true, ..Default::default() };
    let r = run(&store, &fixture(), &opts, false).expect("run");
    assert_eq!(r.mode, "threads");
    assert_eq!((r.questions, r.turns), (4, 56));
    // Extraction keeps fewer memories than messages (greetings and questions of the user are not facts).
    assert!(r.memories > 0 && r.memories < r.turns, "{}", r.memories);
    assert_eq!(metric(&r, "hybrid", "session", "recall_any@10", "all"), 1.0);
}

#[test]
fn bad_files_are_input_errors_and_leave_the_store_usable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path());
    let text = std::fs::read_to_string(fixture()).expect("fixture");
    let cases = [
        ("truncated", text[..text.len() / 2].to_string()),
        ("an object", "{\"question_id\": \"x\"}".to_string()),
        ("not json", "LongMemEval".to_string()),
        (
            "ids and sessions differ",
            r#"[{"question_id":"q","question_type":"multi-session","question":"?","haystack_session_ids":["a","b"],
                "haystack_dates":[],"haystack_sessions":[[{"role":"user","content":"x"}]]}]"#
                .to_string(),
        ),
    ];
    for (name, body) in cases {
        let path = dir.path().join(format!("{}.json", name.replace(' ', "-")));
        std::fs::write(&path, body).expect("write");
        let e = run(&store, &path, &LongMemEvalOptions::default(), false).err().map(|e| e.kind());
        assert_eq!(e, Some(ErrorKind::InvalidInput), "{name}");
    }
    let missing = run(&store, &dir.path().join("absent.json"), &LongMemEvalOptions::default(), false);
    assert_eq!(missing.err().map(|e| e.kind()), Some(ErrorKind::Io));
    // The store still evaluates a good file afterwards.
    let r = run(&store, &fixture(), &LongMemEvalOptions::default(), false).expect("run");
    assert_eq!(r.questions, 4);
}
