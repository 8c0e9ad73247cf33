//! Property test: random sequences of create, update, label, archive, forget, deprecate, supersede, move and
//! reopen against a plain in-memory model. After every step, list, get, lexical search and label usage
//! counts must agree with the model, including after the store is reopened from its redb file.

mod backend;
use std::collections::{BTreeMap, BTreeSet};

use engram::{
    KnowledgeStore, LabelOrder, ListQuery, MemoryFilter, MemoryPatch, MemoryState, NewMemory, NewSpace, SearchMode,
    SearchQuery, Transition,
};
use proptest::prelude::*;

const IDS: [&str; 5] = ["m0", "m1", "m2", "m3", "m4"];
const WORDS: [&str; 4] = ["apple", "birch", "cobalt", "dune"];
const LABELS: [&str; 3] = ["red", "blue", "green"];
const SPACES: [&str; 2] = ["default", "other"];

#[derive(Debug, Clone)]
enum Op {
    Create { id: usize, word: usize, labels: Vec<usize>, space: usize },
    Update { id: usize, word: usize },
    Label { id: usize, labels: Vec<usize> },
    Archive(usize),
    Forget(usize),
    Deprecate(usize),
    Supersede { id: usize, newer: usize },
    Move { id: usize, space: usize },
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let labels = proptest::collection::vec(0..LABELS.len(), 0..3);
    prop_oneof![
        4 => (0..IDS.len(), 0..WORDS.len(), labels.clone(), 0..SPACES.len())
            .prop_map(|(id, word, labels, space)| Op::Create { id, word, labels, space }),
        2 => (0..IDS.len(), 0..WORDS.len()).prop_map(|(id, word)| Op::Update { id, word }),
        2 => (0..IDS.len(), labels).prop_map(|(id, labels)| Op::Label { id, labels }),
        1 => (0..IDS.len()).prop_map(Op::Archive),
        1 => (0..IDS.len()).prop_map(Op::Forget),
        1 => (0..IDS.len()).prop_map(Op::Deprecate),
        1 => (0..IDS.len(), 0..IDS.len()).prop_map(|(id, newer)| Op::Supersede { id, newer }),
        1 => (0..IDS.len(), 0..SPACES.len()).prop_map(|(id, space)| Op::Move { id, space }),
        1 => Just(Op::Reopen),
    ]
}

#[derive(Debug, Clone)]
struct M {
    space: usize,
    word: usize,
    labels: BTreeSet<usize>,
    state: MemoryState,
    superseded_by: Option<usize>,
}

type Model = BTreeMap<usize, M>;

fn names(l: &[usize]) -> BTreeSet<String> {
    l.iter().map(|i| LABELS[*i].to_string()).collect()
}

/// Applies `op` to the model; returns whether the store must accept it.
fn step(model: &mut Model, op: &Op) -> bool {
    use MemoryState::*;
    let live = |m: &Model, id: usize| m.get(&id).is_some_and(|x| x.state != Forgotten);
    match op {
        Op::Create { id, word, labels, space } => match model.get_mut(id) {
            Some(m) if m.space != *space => false,
            Some(m) => {
                m.word = *word;
                m.labels = labels.iter().copied().collect();
                true
            }
            None => {
                let m = M {
                    space: *space,
                    word: *word,
                    labels: labels.iter().copied().collect(),
                    state: Active,
                    superseded_by: None,
                };
                model.insert(*id, m);
                true
            }
        },
        Op::Update { id, word } => {
            live(model, *id) && {
                if let Some(m) = model.get_mut(id) {
                    m.word = *word;
                }
                true
            }
        }
        Op::Label { id, labels } => {
            live(model, *id) && {
                if let Some(m) = model.get_mut(id) {
                    m.labels = labels.iter().copied().collect();
                }
                true
            }
        }
        Op::Move { id, space } => {
            live(model, *id) && {
                if let Some(m) = model.get_mut(id) {
                    m.space = *space;
                }
                true
            }
        }
        Op::Forget(id) => {
            live(model, *id) && {
                if let Some(m) = model.get_mut(id) {
                    m.state = Forgotten;
                }
                true
            }
        }
        Op::Archive(id) | Op::Deprecate(id) => {
            if !live(model, *id) {
                return false;
            }
            let m = model.get_mut(id).expect("live");
            if m.state == Superseded {
                return false;
            }
            m.state = if matches!(op, Op::Archive(_)) { Archived } else { Deprecated };
            true
        }
        Op::Supersede { id, newer } => {
            if !live(model, *id) || id == newer || !live(model, *newer) || model[id].space != model[newer].space {
                return false;
            }
            let m = model.get_mut(id).expect("live");
            if m.state == Superseded {
                return m.superseded_by == Some(*newer);
            }
            m.state = Superseded;
            m.superseded_by = Some(*newer);
            true
        }
        Op::Reopen => true,
    }
}

fn apply(store: &KnowledgeStore, op: &Op) -> bool {
    let t = |id: usize, tr: Transition| store.memories().change_state(IDS[id], None, tr, None).is_ok();
    match op {
        Op::Create { id, word, labels, space } => store
            .memories()
            .create(NewMemory {
                id: Some(IDS[*id].into()),
                content: format!("note about {}", WORDS[*word]),
                labels: Some(names(labels).into_iter().collect()),
                space_id: Some(SPACES[*space].into()),
                ..Default::default()
            })
            .is_ok(),
        Op::Update { id, word } => {
            let p = MemoryPatch { content: Some(format!("note about {}", WORDS[*word])), ..Default::default() };
            store.memories().update(IDS[*id], p, None).is_ok()
        }
        Op::Label { id, labels } => {
            let p = MemoryPatch { labels: Some(names(labels).into_iter().collect()), ..Default::default() };
            store.memories().update(IDS[*id], p, None).is_ok()
        }
        Op::Move { id, space } => {
            let p = MemoryPatch { space_id: Some(SPACES[*space].into()), ..Default::default() };
            store.memories().update(IDS[*id], p, None).is_ok()
        }
        Op::Archive(id) => t(*id, Transition::Archive),
        Op::Forget(id) => t(*id, Transition::Forget),
        Op::Deprecate(id) => t(*id, Transition::Deprecate { replacement: None }),
        Op::Supersede { id, newer } => t(*id, Transition::Supersede { newer: IDS[*newer].into() }),
        Op::Reopen => true,
    }
}

fn check(store: &KnowledgeStore, model: &Model) -> Result<(), TestCaseError> {
    for (s, space) in SPACES.iter().enumerate() {
        let q = ListQuery { space_id: (*space).into(), filter: MemoryFilter::default(), limit: 100, offset: 0 };
        let listed: BTreeSet<String> =
            store.memories().list(&q).unwrap().items.into_iter().map(|v| v.memory.id).collect();
        let want: BTreeSet<String> = model
            .iter()
            .filter(|(_, m)| m.space == s && m.state == MemoryState::Active)
            .map(|(i, _)| IDS[*i].to_string())
            .collect();
        prop_assert_eq!(&listed, &want, "list of {}", space);
        for (w, word) in WORDS.iter().enumerate() {
            let found: BTreeSet<String> = store
                .search()
                .run(&SearchQuery {
                    query: (*word).into(),
                    space_id: (*space).into(),
                    limit: 100,
                    filter: MemoryFilter::default(),
                    mode: SearchMode::Lexical,
                    fusion: None,
                    query_embedding: None,
                    options: Default::default(),
                })
                .unwrap()
                .hits
                .into_iter()
                .map(|h| h.view.memory.id)
                .collect();
            let want: BTreeSet<String> = model
                .iter()
                .filter(|(_, m)| m.space == s && m.state == MemoryState::Active && m.word == w)
                .map(|(i, _)| IDS[*i].to_string())
                .collect();
            prop_assert_eq!(&found, &want, "search {} in {}", word, space);
        }
        for l in store.labels().list(space, LabelOrder::Name, false, 100, 0).unwrap() {
            let n = model.values().filter(|m| m.space == s && m.labels.iter().any(|i| LABELS[*i] == l.name)).count();
            prop_assert_eq!(l.usage_count, n as u64, "usage of {} in {}", l.name, space);
        }
    }
    for (i, id) in IDS.iter().enumerate() {
        let got = store.memories().get(id, None);
        match model.get(&i) {
            None => prop_assert!(got.is_err(), "{} should not exist", id),
            Some(m) if m.state == MemoryState::Forgotten => prop_assert!(got.is_err(), "{} is forgotten", id),
            Some(m) => {
                let v = got.map_err(|e| TestCaseError::fail(format!("{id}: {e}")))?;
                prop_assert_eq!(v.memory.state, m.state);
                prop_assert_eq!(&v.memory.space_id, SPACES[m.space]);
                prop_assert_eq!(v.memory.content, format!("note about {}", WORDS[m.word]));
                prop_assert_eq!(v.memory.is_latest, m.state != MemoryState::Superseded);
                let labels: BTreeSet<String> = m.labels.iter().map(|l| format!("label_{}", LABELS[*l])).collect();
                prop_assert_eq!(v.label_ids.into_iter().collect::<BTreeSet<_>>(), labels);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 200, ..ProptestConfig::default() })]
    #[test]
    fn store_agrees_with_the_model(ops in proptest::collection::vec(op(), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let open = || backend::open(dir.path());
        let mut store = open();
        store.spaces().create(NewSpace { name: "Other".into(), ..Default::default() }).unwrap();
        let mut model = Model::new();
        for op in &ops {
            let want = step(&mut model, op);
            if let Op::Reopen = op {
                drop(store);
                store = open();
            }
            let got = apply(&store, op);
            prop_assert_eq!(got, want, "outcome of {:?}", op);
            check(&store, &model)?;
        }
    }
}
