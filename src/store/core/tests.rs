//! Tests of the runtime core through the store that holds it.

use crate::{KnowledgeStore, NewMemory, StoreConfig};

/// The read-ahead of the vector scan runs up to its window ahead of the scan, no further, and ends with
/// it. No timing is asserted: the scan waits (for as long as it takes) until the read-ahead reports that
/// it reached its window.
#[test]
fn the_vector_read_ahead_keeps_to_its_window_and_ends_with_the_scan() {
    use crate::store::records::memory;
    let dir = tempfile::tempdir().unwrap();
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    let items: Vec<NewMemory> = (0..3000)
        .map(|k| NewMemory { content: format!("note {k} about pears and apples"), ..Default::default() })
        .collect();
    store.memories().create_many(items).unwrap();
    let rtx = store.core.db.read().unwrap();
    let scan = memory::VectorScan::default();
    let (rows, farthest) = std::thread::scope(|s| {
        let ahead = s.spawn(|| memory::read_vectors_ahead(&rtx, &scan, 512));
        let mut rows = 0u64;
        memory::each_vector(&rtx, |space, docno, _| {
            scan.passed(space, docno);
            rows += 1;
            // At rows 256 and 1,024, wait until the read-ahead stands 448 or more rows ahead (it checks
            // its lead every 64 rows, so it stops between 448 and 576 ahead).
            if rows == 256 || rows == 1024 {
                while scan.ahead() < rows + 448 {
                    std::thread::yield_now();
                }
            }
        })
        .unwrap();
        scan.finish();
        (rows, ahead.join().unwrap())
    });
    assert_eq!(rows, 3000);
    assert!((448..=512 + 64).contains(&farthest), "ran {farthest} rows ahead");
}

/// A reopened store of threads reads its expanded postings from the index snapshot with the own texts
/// encoded; [`Admin::wait_for_indexes`](crate::store::Admin::wait_for_indexes) returns only once the background thread decoded them.
#[test]
fn waiting_for_the_indexes_waits_for_the_own_texts_an_open_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<NewMemory> = (0..300)
        .map(|k| {
            let at = (k % 10) as f64;
            NewMemory {
                id: Some(format!("m{k}")),
                content: format!("message {k} of thread {} about apples and pears", k / 10),
                source_thread_id: Some(format!("t{}", k / 10)),
                source_range: Some([("start_index".to_string(), at), ("end_index".to_string(), at)].into()),
                ..Default::default()
            }
        })
        .collect();
    {
        let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
        store.memories().create_many(items).unwrap();
    }
    let store = KnowledgeStore::open(StoreConfig::new(dir.path())).unwrap();
    assert!(store.admin().wait_for_indexes(std::time::Duration::from_secs(60)));
    assert!(store.core.own_texts_decode.lock().as_ref().is_some_and(|t| t.is_finished()), "the thread ran");
    let state = store.core.index.read();
    let x = state.spaces["default"].expanded.as_ref().expect("a space of threads has expanded postings");
    assert!(x.encoded_own().is_none(), "decoded");
    assert!(!x.is_damaged());
    assert!(x.postings() > 300);
}
