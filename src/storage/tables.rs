//! Every record kind of the store (a redb table, a PostgreSQL table). Keys start with the space id wherever a
//! record belongs to a space, so that isolation holds in storage and not only in filters. Values marked
//! "record" are a format-version byte followed by postcard (see [`super::codec`]).

use super::{Kind, KindInfo};

/// Store-wide settings and counters: `format_version`, `embedder`, `embedder_dim`, `generation`, `next_docno`.
pub const META: Kind<&str, &[u8]> = Kind::new("meta");

/// space id -> Space record.
pub const SPACES: Kind<&str, &[u8]> = Kind::new("spaces");

/// (space id, memory id) -> StoredMemory record (docno + Memory).
pub const MEMORIES: Kind<(&str, &str), &[u8]> = Kind::new("memories");

/// memory id -> space id: ids are unique across spaces, and a read by id needs no space.
pub const MEMORY_SPACE: Kind<&str, &str> = Kind::new("memory_space");

/// (space id, docno) -> embedding as little-endian f32s.
pub const VECTORS: Kind<(&str, u64), &[u8]> = Kind::new("vectors");

/// (space id, term, docno) -> posting (term frequency << 32 | document length in terms).
pub const POSTINGS: Kind<(&str, &str, u64), u64> = Kind::new("postings");

/// space id -> (documents, total document length in terms), for BM25's N and avgdl.
pub const LEX_STATS: Kind<&str, (u64, u64)> = Kind::new("lex_stats");

/// (space id, label id) -> Label record.
pub const LABELS: Kind<(&str, &str), &[u8]> = Kind::new("labels");

/// HAS_LABEL edges: (space id, memory id, label id).
pub const MEMORY_LABELS: Kind<(&str, &str, &str), ()> = Kind::new("memory_labels");

/// HAS_LABEL edges reversed: (space id, label id, memory id).
pub const LABEL_MEMORIES: Kind<(&str, &str, &str), ()> = Kind::new("label_memories");

/// (space id, thread id) -> Thread record.
pub const THREADS: Kind<(&str, &str), &[u8]> = Kind::new("threads");

/// (thread id, space id): where a thread id lives (ids are unique per space, not across spaces).
pub const THREAD_SPACES: Kind<(&str, &str), ()> = Kind::new("thread_spaces");

/// (space id, thread id, order index) -> Message record.
pub const MESSAGES: Kind<(&str, &str, u64), &[u8]> = Kind::new("messages");

/// (space id, thread id, deduplication key) -> order index: `metadata.external_id`, or `<idempotency_key>:<i>`.
pub const MESSAGE_KEYS: Kind<(&str, &str, &str), u64> = Kind::new("message_keys");

/// (space id, entity id) -> Entity record.
pub const ENTITIES: Kind<(&str, &str), &[u8]> = Kind::new("entities");

/// (space id, `<kind>:<lowercased name or alias>`) -> entity id.
pub const ENTITY_KEYS: Kind<(&str, &str), &str> = Kind::new("entity_keys");

/// MENTIONS edges: (space id, memory id, entity id).
pub const MENTIONS: Kind<(&str, &str, &str), ()> = Kind::new("mentions");

/// MENTIONS edges reversed: (space id, entity id, memory id).
pub const ENTITY_MEMORIES: Kind<(&str, &str, &str), ()> = Kind::new("entity_memories");

/// RELATES_TO edges, both directions: (space id, entity id, other entity id) -> weight (memories mentioning both).
pub const RELATES_TO: Kind<(&str, &str, &str), u64> = Kind::new("relates_to");

/// (space id, day `YYYY-MM-DD`) -> WorkingMemory record.
pub const WORKING_MEMORY: Kind<(&str, &str), &[u8]> = Kind::new("working_memory");

/// (space id, relation id) -> MemoryRelation record.
pub const RELATIONS: Kind<(&str, &str), &[u8]> = Kind::new("relations");

/// Relations by memory, both ends: (space id, memory id, relation id).
pub const MEMORY_RELATIONS: Kind<(&str, &str, &str), ()> = Kind::new("memory_relations");

/// relation id -> space id.
pub const RELATION_SPACE: Kind<&str, &str> = Kind::new("relation_space");

/// (space id, merge id) -> LabelMerge record: what a label merge changed, so it can be reversed.
pub const LABEL_MERGES: Kind<(&str, &str), &[u8]> = Kind::new("label_merges");

/// community id -> Community record (derived; replaced by every recomputation).
pub const COMMUNITIES: Kind<u64, &[u8]> = Kind::new("communities");

/// (community id, space id, entity id) -> the entity's scaled PageRank (derived).
pub const COMMUNITY_MEMBERS: Kind<(u64, &str, &str), f64> = Kind::new("community_members");

/// (space id, entity id) -> community id (derived; the previous assignment keeps ids stable).
pub const ENTITY_COMMUNITY: Kind<(&str, &str), u64> = Kind::new("entity_community");

/// (space id, memory id) -> PageRank scaled to 0..=1 (derived).
pub const MEMORY_PAGERANK: Kind<(&str, &str), f64> = Kind::new("memory_pagerank");

/// CRYSTALLIZED_FROM edges: (space id, crystal memory id, source memory id) -> contribution weight (the
/// weights of one crystal sum to 1).
pub const CRYSTAL_SOURCES: Kind<(&str, &str, &str), f64> = Kind::new("crystal_sources");

/// (space id, source id) -> Source record.
pub const SOURCES: Kind<(&str, &str), &[u8]> = Kind::new("sources");

/// source id -> space id.
pub const SOURCE_SPACE: Kind<&str, &str> = Kind::new("source_space");

/// (space id, sha256 hex) -> source id: the same bytes in a space are one source.
pub const SOURCE_SHA: Kind<(&str, &str), &str> = Kind::new("source_sha");

/// source id -> parsed text (UTF-8).
pub const SOURCE_TEXT: Kind<&str, &[u8]> = Kind::new("source_text");

/// source id -> the original bytes.
pub const SOURCE_FILES: Kind<&str, &[u8]> = Kind::new("source_files");

/// (source id, chunk index) -> Chunk record (offset, length, section path).
pub const SOURCE_CHUNKS: Kind<(&str, u64), &[u8]> = Kind::new("source_chunks");

/// The search catalog of a database store: (space id, docno) -> (flags, sequence group, ordinal, length in
/// terms, `DocMeta` record). Flags: [`CATALOG_FORGOTTEN`], [`CATALOG_PLAIN`], [`CATALOG_EXPIRING`]. The group is `thread:<id>` or `source:<id>` while the memory takes part in its sequence
/// (it has a position, is the latest version and is not forgotten), else empty, with ordinal 0. Kept in the
/// same transaction as every write of a PostgreSQL store, from the write's index operations, for the searches
/// of a daemon that holds no per-memory index; the embedded (redb) store keeps its catalog in memory and in
/// its index snapshot, and leaves this kind empty.
pub const CATALOG: Kind<(&str, u64), CatalogRow> = Kind::new("catalog");

/// A [`CATALOG`] row's value: flags, sequence group (or empty), ordinal, length in terms, `DocMeta` record.
pub type CatalogRow = (u64, &'static str, u64, u64, &'static [u8]);

/// [`CATALOG`] flag: the memory is forgotten.
pub const CATALOG_FORGOTTEN: u64 = 1;
/// [`CATALOG`] flag: every default filter accepts the memory (active, latest, importance at least 0, no expiry
/// time; `SpaceCatalog::plainly_accepted`).
pub const CATALOG_PLAIN: u64 = 2;
/// [`CATALOG`] flag: the memory has an expiry time (`expires_at`).
pub const CATALOG_EXPIRING: u64 = 4;

/// Timeline review events: (space, `rev_<uuidv7>`) -> postcard `ReviewEvent` (`store/reviews/`).
pub const REVIEWS: Kind<(&str, &str), &[u8]> = Kind::new("reviews");

/// Sync (docs/sync.md): (item kind, space id or empty, id) -> ItemClock record: the stamp of the value each
/// replicated item holds, a memory's edit heads and label tags.
pub const SYNC_ITEMS: Kind<(&str, &str, &str), &[u8]> = Kind::new("sync_items");

/// Sync's change log, this device's outbox: sequence number -> Change record, in the order the changes were made
/// or applied.
pub const SYNC_LOG: Kind<u64, &[u8]> = Kind::new("sync_log");

/// The kinds whose writes sync captures (a store in a sync group): the records of the person's own data that
/// replicate. Derived kinds (postings, vectors, entities, communities, ranks) never travel.
pub const REPLICATED: &[&str] = &[
    "spaces",
    "memories",
    "memory_labels",
    "labels",
    "label_merges",
    "working_memory",
    "relations",
    "threads",
    "message_keys",
    "sources",
    "source_text",
    "source_chunks",
    "reviews",
];

/// Every record kind with its columns, in declaration order: what a database backend creates one table for.
pub const ALL: &[KindInfo] = &[
    META.info(),
    SPACES.info(),
    MEMORIES.info(),
    MEMORY_SPACE.info(),
    VECTORS.info(),
    POSTINGS.info(),
    LEX_STATS.info(),
    LABELS.info(),
    MEMORY_LABELS.info(),
    LABEL_MEMORIES.info(),
    THREADS.info(),
    THREAD_SPACES.info(),
    MESSAGES.info(),
    MESSAGE_KEYS.info(),
    ENTITIES.info(),
    ENTITY_KEYS.info(),
    MENTIONS.info(),
    ENTITY_MEMORIES.info(),
    RELATES_TO.info(),
    WORKING_MEMORY.info(),
    RELATIONS.info(),
    MEMORY_RELATIONS.info(),
    RELATION_SPACE.info(),
    LABEL_MERGES.info(),
    COMMUNITIES.info(),
    COMMUNITY_MEMBERS.info(),
    ENTITY_COMMUNITY.info(),
    MEMORY_PAGERANK.info(),
    CRYSTAL_SOURCES.info(),
    SOURCES.info(),
    SOURCE_SPACE.info(),
    SOURCE_SHA.info(),
    SOURCE_TEXT.info(),
    SOURCE_FILES.info(),
    SOURCE_CHUNKS.info(),
    REVIEWS.info(),
    CATALOG.info(),
    SYNC_ITEMS.info(),
    SYNC_LOG.info(),
];
