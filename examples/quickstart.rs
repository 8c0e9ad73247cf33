//! Rust quickstart: open a store, add memories, search, list. `cargo run --example quickstart`
use engram::{KnowledgeStore, ListQuery, MemoryFilter, NewMemory, SearchMode, SearchQuery, StoreConfig};

fn main() -> engram::Result<()> {
    let dir = std::env::temp_dir().join("engram-quickstart");
    let store = KnowledgeStore::open(StoreConfig::new(&dir))?;
    for (id, text) in [
        ("pref-1", "Prefers dark roast coffee, no sugar"),
        ("plan-1", "Plans to visit Lisbon in May 2025"),
        ("fact-1", "The build server runs Debian 12 with 2 cores"),
    ] {
        let c = store.memories().create(NewMemory {
            id: Some(id.into()),
            content: text.into(),
            labels: Some(vec!["quickstart".into()]),
            ..Default::default()
        })?;
        println!("{:?} {}", c.action, c.view.memory.id);
    }
    let found = store.search().run(&SearchQuery {
        query: "coffee preference".into(),
        space_id: "default".into(),
        limit: 3,
        filter: MemoryFilter::default(),
        mode: SearchMode::Hybrid,
        fusion: None,
        query_embedding: None,
        options: Default::default(),
    })?;
    for h in &found.hits {
        println!("{:.3}  {}  ({})", h.score, h.view.memory.content, h.reason());
    }
    let page = store.memories().list(&ListQuery {
        space_id: "default".into(),
        filter: MemoryFilter::default(),
        limit: 10,
        offset: 0,
    })?;
    println!("{} memories in the default space of {}", page.total, dir.display());
    Ok(())
}
