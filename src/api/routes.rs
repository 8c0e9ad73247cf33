//! The route table and its handlers. Handlers are thin: parse, convert, call the store, shape the response.

use super::dto::*;
use super::query::{ParamSpec, boolean, choice, int, list, num, required, string};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, FieldError, Result};
use crate::index::catalog::{MemoryFilter, parse_loose_date};
use crate::model::{MemoryState, Metadata, TemporalContext, Timestamp, UnitType};
use crate::store::{
    DEFAULT_SPACE, LabelOrder, ListQuery, MemoryPatch, NewMemory, SearchMode, SearchOptions, SearchQuery,
    SearchResults, WriteAction,
};

/// The response body shape of a route, for the OpenAPI document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A named schema.
    Ref(&'static str),
    /// An array of a named schema.
    ArrayOf(&'static str),
    /// Any JSON object.
    Object,
    /// A ZIP archive (`application/zip`).
    Zip,
}

/// One route: method, path template (`{name}` segments), documentation, declared query parameters, body and
/// response schemas, whether it is public (no API key), and the handler.
pub struct Route {
    /// HTTP method.
    pub method: &'static str,
    /// Path template.
    pub path: &'static str,
    /// OpenAPI operationId.
    pub operation_id: &'static str,
    /// One line.
    pub summary: &'static str,
    /// Declared query parameters (validated before the handler runs).
    pub query: &'static [ParamSpec],
    /// Request body schema name.
    pub body: Option<&'static str>,
    /// Response schema.
    pub response: Shape,
    /// Served without an API key.
    pub public: bool,
    /// The handler.
    pub handler: fn(&Api, &Ctx<'_>) -> Result<ApiResponse>,
}

const UNIT_TYPES: &[&str] = &["fact", "preference", "decision", "plan", "procedure", "learning", "context", "event"];
const STATES: &[&str] = &["active", "archived", "deprecated", "superseded", "forgotten", "all"];

const LIST_PARAMS: &[ParamSpec] = &[
    int("limit", 1, Some(100), Some(20), "page size"),
    int("offset", 0, None, Some(0), "items to skip"),
    choice("state", Some("active"), STATES, "lifecycle state; `all` lists every state but forgotten"),
    num("importance_min", 0.0, 1.0, Some(0.0), "minimum importance"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
    boolean("is_crystal", None, "true: only crystals, false: only non-crystals"),
    choice("unit_type", None, UNIT_TYPES, "only this unit type"),
    list("labels", "label names every memory must carry (repeat for AND)"),
];

const SEARCH_GET_PARAMS: &[ParamSpec] = &[
    required("q", "query text"),
    int("limit", 1, Some(100), Some(10), "hits"),
    choice("mode", Some("fast"), &["fast", "deep", "normal"], "search depth; all run the hybrid search"),
    choice("retrieval", Some("hybrid"), &["hybrid", "lexical", "vector"], "Engram extension: rankings used"),
    list("labels", "label names every hit must carry"),
    list("metadata", "key=value equality on metadata (not supported yet: 422 when given)"),
    choice("unit_type", None, UNIT_TYPES, "only this unit type"),
    num("importance_min", 0.0, 1.0, None, "minimum importance"),
    string("time_range", None, "deprecated: today, week, month, year or an ISO date (recorded at or after)"),
    string("event_date_from", None, "event date lower bound (YYYY, YYYY-MM, YYYY-MM-DD)"),
    string("event_date_to", None, "event date upper bound"),
    string("recorded_date_from", None, "creation date lower bound"),
    string("recorded_date_to", None, "creation date upper bound"),
    boolean("include_history", Some(false), "include superseded versions"),
    boolean("explain", Some(false), "accepted; reasons are always included"),
    boolean("include_entities", Some(false), "add `related_entities` (the entities each memory mentions)"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
    boolean("include_context", Some(false), "Engram extension: add `context` (neighbouring messages or chunks)"),
    int("context_window", 1, Some(10), Some(1), "Engram extension: neighbours on each side for `include_context`"),
    boolean("expand_neighbours", None, "Engram extension: neighbour expansion in ranking (default true)"),
];

const SPACE_GUARD: &[ParamSpec] = &[string("space_id", None, "optional guard: the memory must be in this space")];
const DELETE_PARAMS: &[ParamSpec] = &[
    string("space_id", None, "optional guard: the memory must be in this space"),
    boolean("cascade_delete", Some(true), "accepted; label edges are always removed with the memory"),
];
const LABEL_LIST_PARAMS: &[ParamSpec] = &[
    int("limit", 1, Some(1000), Some(100), "page size"),
    int("offset", 0, None, Some(0), "items to skip"),
    choice("order_by", Some("name"), &["name", "usage_count", "created_at", "updated_at"], "ordering"),
    boolean("order_desc", Some(false), "descending"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];
const LABEL_CREATE_PARAMS: &[ParamSpec] = &[
    required("name", "label name, 1..=100 characters"),
    string("color", Some("#3b82f6"), "hex colour"),
    string("description", Some(""), "description"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

macro_rules! route {
    ($m:literal, $p:literal, $op:literal, $sum:literal, $q:expr, $body:expr, $resp:expr, $public:literal, $h:expr) => {
        Route {
            method: $m,
            path: $p,
            operation_id: $op,
            summary: $sum,
            query: $q,
            body: $body,
            response: $resp,
            public: $public,
            handler: $h,
        }
    };
}

/// Every route of the API.
pub static ROUTES: &[Route] = &[
    route!(
        "GET",
        "/capabilities",
        "get_capabilities",
        "Server version and feature flags",
        &[],
        None,
        Shape::Ref("CapabilitiesResponse"),
        true,
        capabilities
    ),
    route!(
        "GET",
        "/health",
        "get_health",
        "Health, embedder and store counters",
        &[],
        None,
        Shape::Ref("HealthResponse"),
        true,
        health
    ),
    route!("GET", "/livez", "get_livez", "Liveness probe", &[], None, Shape::Object, true, livez),
    route!(
        "GET",
        "/openapi.json",
        "get_openapi",
        "This OpenAPI 3.1 document",
        &[],
        None,
        Shape::Object,
        false,
        openapi
    ),
    route!(
        "POST",
        "/memories",
        "create_memory",
        "Create a memory, or upsert by id",
        &[],
        Some("CreateMemoryRequest"),
        Shape::Ref("CreateMemoryResponse"),
        false,
        create_memory
    ),
    route!(
        "POST",
        "/memories/batch",
        "create_memories",
        "Engram extension: create or upsert up to 1,000 memories in one write transaction (all or none)",
        &[],
        Some("BatchCreateRequest"),
        Shape::Ref("BatchCreateResponse"),
        false,
        create_memories
    ),
    route!(
        "GET",
        "/memories",
        "list_memories",
        "List memories of a space, newest first",
        LIST_PARAMS,
        None,
        Shape::Ref("ListMemoriesResponse"),
        false,
        list_memories
    ),
    route!(
        "GET",
        "/memories/search",
        "search_memories_get",
        "Hybrid search (query string form, used by the CLI)",
        SEARCH_GET_PARAMS,
        None,
        Shape::Ref("SearchGetResponse"),
        false,
        search_get
    ),
    route!(
        "POST",
        "/memories/search",
        "search_memories",
        "Hybrid search (MemorySearchRequest)",
        &[],
        Some("SearchRequest"),
        Shape::ArrayOf("MemorySearchResult"),
        false,
        search_post
    ),
    route!(
        "GET",
        "/memories/{memory_id}",
        "get_memory",
        "Read a memory",
        SPACE_GUARD,
        None,
        Shape::Ref("MemoryOut"),
        false,
        get_memory
    ),
    route!(
        "PATCH",
        "/memories/{memory_id}",
        "update_memory",
        "Update fields; labels replace the set; space_id moves",
        SPACE_GUARD,
        Some("UpdateMemoryRequest"),
        Shape::Ref("MemoryOut"),
        false,
        update_memory
    ),
    route!(
        "DELETE",
        "/memories/{memory_id}",
        "delete_memory",
        "Delete a memory and its edges",
        DELETE_PARAMS,
        None,
        Shape::Ref("DeleteMemoryResponse"),
        false,
        delete_memory
    ),
    route!(
        "GET",
        "/memories/{memory_id}/labels",
        "get_memory_labels",
        "Labels of a memory",
        SPACE_GUARD,
        None,
        Shape::Ref("LabelsResponse"),
        false,
        memory_labels
    ),
    route!(
        "POST",
        "/memories/{memory_id}/labels/{label_id}",
        "add_memory_label",
        "Attach a label",
        SPACE_GUARD,
        None,
        Shape::Ref("MessageResponse"),
        false,
        add_label
    ),
    route!(
        "DELETE",
        "/memories/{memory_id}/labels/{label_id}",
        "remove_memory_label",
        "Detach a label",
        SPACE_GUARD,
        None,
        Shape::Ref("MessageResponse"),
        false,
        remove_label
    ),
    route!(
        "GET",
        "/labels",
        "list_labels",
        "Labels with usage counts",
        LABEL_LIST_PARAMS,
        None,
        Shape::ArrayOf("Label"),
        false,
        list_labels
    ),
    route!(
        "POST",
        "/labels",
        "create_label",
        "Create a label",
        LABEL_CREATE_PARAMS,
        None,
        Shape::Ref("Label"),
        false,
        create_label
    ),
    route!(
        "POST",
        "/spaces",
        "create_space",
        "Create a space",
        &[],
        Some("CreateSpaceRequest"),
        Shape::Ref("SpacesResponse"),
        false,
        super::spaces::create
    ),
    route!(
        "GET",
        "/spaces",
        "list_spaces",
        "List spaces",
        &[],
        None,
        Shape::Ref("SpacesResponse"),
        false,
        super::spaces::list
    ),
    route!(
        "GET",
        "/spaces/resolve",
        "resolve_space",
        "The space a name, alias or id refers to",
        super::spaces::RESOLVE_PARAMS,
        None,
        Shape::Ref("Space"),
        false,
        super::spaces::resolve
    ),
    route!(
        "GET",
        "/spaces/{space_id}",
        "get_space",
        "One space with usage counts",
        &[],
        None,
        Shape::Ref("Space"),
        false,
        super::spaces::get
    ),
    route!(
        "PATCH",
        "/spaces/{space_id}",
        "update_space",
        "Update a space profile (the id never changes)",
        &[],
        Some("UpdateSpaceRequest"),
        Shape::Ref("Space"),
        false,
        super::spaces::update
    ),
    route!(
        "PUT",
        "/spaces/{space_id}",
        "replace_space_profile",
        "Same as PATCH",
        &[],
        Some("UpdateSpaceRequest"),
        Shape::Ref("Space"),
        false,
        super::spaces::update
    ),
    route!(
        "DELETE",
        "/spaces/{space_id}",
        "delete_space",
        "Delete a space; refused while it holds records unless cascade=true",
        super::spaces::DELETE_PARAMS,
        None,
        Shape::Object,
        false,
        super::spaces::delete
    ),
    route!(
        "POST",
        "/memories/bulk/move/preview",
        "preview_bulk_move",
        "Count the memories a bulk move would take",
        &[],
        Some("BulkMoveRequest"),
        Shape::Ref("MoveReport"),
        false,
        super::spaces::move_preview
    ),
    route!(
        "POST",
        "/memories/bulk/move",
        "bulk_move",
        "Move memories to another space in one transaction",
        &[],
        Some("BulkMoveRequest"),
        Shape::Ref("MoveReport"),
        false,
        super::spaces::move_apply
    ),
    route!(
        "POST",
        "/memories/{memory_id}/archive",
        "archive_memory",
        "Archive: hide from everyday recall, keep readable by id",
        super::lifecycle::STATE_PARAMS,
        Some("MemoryStateRequest"),
        Shape::Object,
        false,
        super::lifecycle::archive
    ),
    route!(
        "POST",
        "/memories/{memory_id}/forget",
        "forget_memory",
        "Forget: hide from recall and by-id reads",
        super::lifecycle::STATE_PARAMS,
        Some("MemoryStateRequest"),
        Shape::Object,
        false,
        super::lifecycle::forget
    ),
    route!(
        "POST",
        "/memories/{memory_id}/deprecate",
        "deprecate_memory",
        "Deprecate, optionally naming the replacement",
        super::lifecycle::STATE_PARAMS,
        Some("MemoryStateRequest"),
        Shape::Object,
        false,
        super::lifecycle::deprecate
    ),
    route!(
        "POST",
        "/memories/{memory_id}/supersede",
        "supersede_memory",
        "Supersede by a newer memory (newer_memory_id required)",
        super::lifecycle::STATE_PARAMS,
        Some("MemoryStateRequest"),
        Shape::Object,
        false,
        super::lifecycle::supersede
    ),
    route!(
        "POST",
        "/memories/{memory_id}/favorite",
        "favorite_memory",
        "Mark or unmark a memory as favourite",
        super::lifecycle::FAVORITE_PARAMS,
        None,
        Shape::Ref("MessageResponse"),
        false,
        super::lifecycle::favorite
    ),
    route!(
        "GET",
        "/favorites/memories",
        "favorite_memories",
        "Favourite memories",
        super::lifecycle::FAVORITES_PARAMS,
        None,
        Shape::ArrayOf("MemoryOut"),
        false,
        super::lifecycle::favorites
    ),
    route!(
        "GET",
        "/agent/working-memory",
        "read_working_memory",
        "Working memory of a space (latest day, or `date`)",
        super::working::READ_PARAMS,
        None,
        Shape::Object,
        false,
        super::working::read
    ),
    route!(
        "PUT",
        "/agent/working-memory",
        "write_working_memory",
        "Replace today's working memory",
        super::working::WRITE_PARAMS,
        Some("WorkingMemoryRequest"),
        Shape::Object,
        false,
        super::working::write
    ),
    route!(
        "GET",
        "/agent/working-memory/history",
        "working_memory_history",
        "Days with a working memory, newest first",
        super::working::HISTORY_PARAMS,
        None,
        Shape::Object,
        false,
        super::working::history
    ),
    route!(
        "GET",
        "/agent/feed/events",
        "agent_feed_events",
        "Timeline review events (a new memory that may update or contradict an earlier one), newest first",
        super::reviews::FEED_PARAMS,
        None,
        Shape::Object,
        false,
        super::reviews::list
    ),
    route!(
        "POST",
        "/agent/feed/events/{event_id}/review",
        "agent_feed_event_review",
        "Preview or apply the resolution of a review event",
        super::reviews::REVIEW_PARAMS,
        Some("ReviewRequest"),
        Shape::Object,
        false,
        super::reviews::review
    ),
    route!(
        "POST",
        "/agent/trigger/memory-catchup",
        "agent_memory_catchup",
        "Distil thread messages within a horizon that no memory was distilled from",
        &[],
        Some("CatchupRequest"),
        Shape::Object,
        false,
        super::catchup::trigger
    ),
    route!(
        "POST",
        "/agent/tools/call",
        "agent_tools_call",
        "Call an agent tool by name ({name, arguments}); answers the tool's result object (the MCP tools' REST twin)",
        &[],
        Some("ToolCallRequest"),
        Shape::Object,
        false,
        super::tools::rest_call
    ),
    route!(
        "GET",
        "/context/bundle",
        "context_bundle",
        "Working memory and recent memories as markdown (session start)",
        super::working::BUNDLE_PARAMS,
        None,
        Shape::Object,
        false,
        super::working::bundle
    ),
    route!(
        "GET",
        "/stats",
        "get_stats",
        "Store counters (one space with space_id)",
        super::working::STATS_PARAMS,
        None,
        Shape::Object,
        false,
        super::working::stats
    ),
    route!(
        "POST",
        "/memories/distill",
        "distill_memories",
        "Extract memories from a conversation (deterministic rules, no LLM)",
        &[],
        Some("DistillRequest"),
        Shape::Object,
        false,
        super::threads::distill
    ),
    route!(
        "POST",
        "/memories/distill/triage",
        "triage_conversation",
        "Whether a conversation is worth distilling",
        &[],
        Some("TriageRequest"),
        Shape::Object,
        false,
        super::threads::triage
    ),
    route!(
        "POST",
        "/threads",
        "create_thread",
        "Create a thread with messages (409 when the id exists in the space)",
        &[],
        Some("CreateThreadRequest"),
        Shape::Ref("CreateThreadResponse"),
        false,
        super::threads::create
    ),
    route!(
        "GET",
        "/threads",
        "list_threads",
        "List threads, most recently updated first",
        super::threads::LIST_PARAMS,
        None,
        Shape::Object,
        false,
        super::threads::list
    ),
    route!(
        "GET",
        "/threads/search",
        "search_threads",
        "Threads whose messages contain every query word, with match counts",
        super::threads::SEARCH_PARAMS,
        None,
        Shape::Object,
        false,
        super::threads::search
    ),
    route!(
        "POST",
        "/threads/import",
        "import_threads",
        "Create-or-append one thread or a batch",
        &[],
        Some("ImportRequest"),
        Shape::Object,
        false,
        super::threads::import
    ),
    route!(
        "GET",
        "/threads/{thread_id}",
        "get_thread",
        "A thread and a page of its messages",
        super::threads::GET_PARAMS,
        None,
        Shape::Object,
        false,
        super::threads::get
    ),
    route!(
        "DELETE",
        "/threads/{thread_id}",
        "delete_thread",
        "Delete a thread, its messages and optionally its memories",
        super::threads::DELETE_PARAMS,
        None,
        Shape::Object,
        false,
        super::threads::delete
    ),
    route!(
        "POST",
        "/threads/{thread_id}/append",
        "append_thread",
        "Append messages (deduplicated; checkpointed with expected_message_count)",
        &[],
        Some("AppendRequest"),
        Shape::Ref("AppendResponse"),
        false,
        super::threads::append
    ),
    route!(
        "POST",
        "/threads/{thread_id}/metadata/merge",
        "merge_thread_metadata",
        "Merge keys into the thread's metadata",
        &[],
        Some("MergeMetadataRequest"),
        Shape::Object,
        false,
        super::threads::merge_metadata
    ),
    route!(
        "POST",
        "/threads/{thread_id}/favorite",
        "favorite_thread",
        "Mark or unmark a thread as favourite",
        super::threads::FAVORITE_PARAMS,
        None,
        Shape::Ref("MessageResponse"),
        false,
        super::threads::favorite
    ),
    route!(
        "GET",
        "/favorites/threads",
        "favorite_threads",
        "Favourite threads",
        super::threads::FAVORITES_PARAMS,
        None,
        Shape::ArrayOf("Thread"),
        false,
        super::threads::favorites
    ),
    route!(
        "POST",
        "/memories/{memory_id}/relations",
        "create_memory_relation",
        "Relate a memory to another of its space (an existing source/target/type triple is updated)",
        &[],
        Some("RelationRequest"),
        Shape::Ref("RelationView"),
        false,
        super::relations::create
    ),
    route!(
        "GET",
        "/memories/{memory_id}/relations",
        "list_memory_relations",
        "Relations of a memory by direction, status and type",
        super::relations::LIST_PARAMS,
        None,
        Shape::Object,
        false,
        super::relations::list_for
    ),
    route!(
        "PATCH",
        "/memories/relations/{rel_id}",
        "update_memory_relation",
        "Change a relation's type, reason, strength, confidence or status",
        &[],
        Some("RelationRequest"),
        Shape::Ref("RelationView"),
        false,
        super::relations::update
    ),
    route!(
        "DELETE",
        "/memories/relations/{rel_id}",
        "delete_memory_relation",
        "Mark a relation deleted (listable with status=deleted)",
        &[],
        None,
        Shape::Object,
        false,
        super::relations::delete
    ),
    route!(
        "POST",
        "/sources/ingest/file",
        "ingest_source_file",
        "Ingest a document (multipart `file` part, or JSON with content): markdown, text, HTML",
        super::sources::INGEST_PARAMS,
        Some("IngestRequest"),
        Shape::Ref("Source"),
        false,
        super::sources::ingest_file
    ),
    route!(
        "POST",
        "/sources/ingest/path",
        "ingest_source_path",
        "Ingest a file on the server's machine (inside the data directory or an allowed directory)",
        super::sources::INGEST_PARAMS,
        Some("IngestRequest"),
        Shape::Ref("Source"),
        false,
        super::sources::ingest_path
    ),
    route!(
        "POST",
        "/sources/ingest/url",
        "ingest_source_url",
        "Not available: Engram does not fetch from the network (503)",
        &[],
        None,
        Shape::Object,
        false,
        super::sources::ingest_url
    ),
    route!(
        "GET",
        "/sources",
        "list_sources",
        "Sources of a space with type, state, label and metadata filters, newest first",
        super::sources::LIST_PARAMS,
        None,
        Shape::Object,
        false,
        super::sources::list_sources
    ),
    route!(
        "GET",
        "/sources/search",
        "search_sources",
        "BM25 search over source chunks and file names, grouped by source",
        super::sources::SEARCH_PARAMS,
        None,
        Shape::Object,
        false,
        super::sources::search_sources
    ),
    route!(
        "GET",
        "/sources/{source_id}",
        "get_source",
        "One source",
        super::sources::GUARD_PARAMS,
        None,
        Shape::Ref("Source"),
        false,
        super::sources::get_source
    ),
    route!(
        "GET",
        "/sources/{source_id}/content",
        "get_source_content",
        "A window of a source's parsed text (offset and limit in bytes)",
        super::sources::CONTENT_PARAMS,
        None,
        Shape::Object,
        false,
        super::sources::source_content
    ),
    route!(
        "DELETE",
        "/sources/{source_id}",
        "delete_source",
        "Delete a source with its text, chunks and extracted memories",
        super::sources::GUARD_PARAMS,
        None,
        Shape::Object,
        false,
        super::sources::delete_source
    ),
    route!(
        "GET",
        "/labels/health",
        "label_health",
        "Vocabulary health: size, labels per memory, coverage, singleton rate, canonical fork backlog",
        super::labels::HEALTH_PARAMS,
        None,
        Shape::Ref("LabelHealth"),
        false,
        super::labels::health
    ),
    route!(
        "GET",
        "/labels/merge-candidates",
        "label_merge_candidates",
        "Semantically near label pairs (name embeddings, cosine >= sim_floor); read-only",
        super::labels::CANDIDATE_PARAMS,
        None,
        Shape::Object,
        false,
        super::labels::merge_candidates
    ),
    route!(
        "POST",
        "/labels/merge",
        "merge_labels",
        "Merge source into target: re-point every HAS_LABEL edge, record the merge, delete the source",
        super::labels::MERGE_PARAMS,
        None,
        Shape::Object,
        false,
        super::labels::merge
    ),
    route!(
        "GET",
        "/labels/merges",
        "list_label_merges",
        "Recorded label merges, newest first",
        super::labels::SPACE,
        None,
        Shape::Object,
        false,
        super::labels::merges
    ),
    route!(
        "POST",
        "/labels/merges/{merge_id}/reverse",
        "reverse_label_merge",
        "Undo a recorded merge: the source label and every edge come back",
        super::labels::SPACE,
        None,
        Shape::Object,
        false,
        super::labels::reverse
    ),
    route!(
        "POST",
        "/labels/consolidate",
        "consolidate_labels",
        "Merge exact-canonical duplicates into the highest-usage survivor (dry_run true: plan only)",
        super::labels::CONSOLIDATE_PARAMS,
        None,
        Shape::Ref("ConsolidationReport"),
        false,
        super::labels::consolidate
    ),
    route!(
        "POST",
        "/labels/consolidation-preview",
        "label_consolidation_preview",
        "Full consolidation dry run with semantic pairs judged deterministically; never mutates",
        super::labels::PREVIEW_PARAMS,
        None,
        Shape::Ref("ConsolidationPreview"),
        false,
        super::labels::consolidation_preview
    ),
    route!(
        "GET",
        "/labels/{label_id}",
        "get_label",
        "One label",
        super::labels::SPACE,
        None,
        Shape::Ref("Label"),
        false,
        super::labels::get
    ),
    route!(
        "PUT",
        "/labels/{label_id}",
        "update_label",
        "Rename, recolour or describe a label",
        super::labels::SPACE,
        Some("UpdateLabelRequest"),
        Shape::Ref("Label"),
        false,
        super::labels::update
    ),
    route!(
        "DELETE",
        "/labels/{label_id}",
        "delete_label",
        "Delete a label and all its HAS_LABEL edges",
        super::labels::SPACE,
        None,
        Shape::Object,
        false,
        super::labels::delete
    ),
    route!(
        "POST",
        "/labels/{label_id}/merge/preview",
        "preview_label_merge",
        "Preview merging this label into target_label_id (returns a plan_id)",
        super::labels::SPACE,
        Some("LabelPlanRequest"),
        Shape::Ref("LabelPlan"),
        false,
        super::labels::merge_preview
    ),
    route!(
        "POST",
        "/labels/{label_id}/merge/apply",
        "apply_label_merge",
        "Merge, refusing a stale plan_id",
        super::labels::SPACE,
        Some("LabelPlanRequest"),
        Shape::Object,
        false,
        super::labels::merge_apply
    ),
    route!(
        "POST",
        "/labels/{label_id}/delete/preview",
        "preview_label_delete",
        "Preview deleting this label (returns a plan_id)",
        super::labels::SPACE,
        Some("LabelPlanRequest"),
        Shape::Ref("LabelPlan"),
        false,
        super::labels::delete_preview
    ),
    route!(
        "POST",
        "/labels/{label_id}/delete/apply",
        "apply_label_delete",
        "Delete, refusing a stale plan_id",
        super::labels::SPACE,
        Some("LabelPlanRequest"),
        Shape::Object,
        false,
        super::labels::delete_apply
    ),
    route!(
        "GET",
        "/communities",
        "list_communities",
        "Communities of the global entity graph (Louvain), heaviest first, with extractive summaries",
        super::communities::LIST_PARAMS,
        None,
        Shape::Object,
        false,
        super::communities::list
    ),
    route!(
        "GET",
        "/communities/{community_id}",
        "get_community",
        "A community with its most central entities and representative memories",
        super::communities::GET_PARAMS,
        None,
        Shape::Object,
        false,
        super::communities::get
    ),
    route!(
        "GET",
        "/library/crystal/{crystal_id}/source-memories",
        "crystal_source_memories",
        "Source memories of a crystal by contribution_weight, heaviest first",
        super::communities::CRYSTAL_SOURCE_PARAMS,
        None,
        Shape::Object,
        false,
        super::communities::crystal_sources
    ),
    route!(
        "GET",
        "/library/community/{community_id}/subgraph",
        "community_subgraph",
        "Entities of a community with the RELATES_TO edges between them, and memories touching them",
        super::library::SUBGRAPH_PARAMS,
        None,
        Shape::Object,
        false,
        super::library::subgraph
    ),
    route!(
        "GET",
        "/library/community/{community_id}/recent-memories",
        "community_recent_memories",
        "Most recent memories mentioning any entity of the community",
        super::library::RECENT_PARAMS,
        None,
        Shape::Object,
        false,
        super::library::recent
    ),
    route!(
        "GET",
        "/library/community/{community_id}/related",
        "related_communities",
        "Other communities sharing RELATES_TO edges, with the shared edge count",
        super::library::RELATED_PARAMS,
        None,
        Shape::Object,
        false,
        super::library::related
    ),
    route!(
        "GET",
        "/library/wiki-index",
        "wiki_index",
        "One row per community with its surfaced entities and crystals",
        super::library::INDEX_PARAMS,
        None,
        Shape::Object,
        false,
        super::library::wiki_index
    ),
    route!(
        "GET",
        "/library/wiki-export-summary",
        "wiki_export_summary",
        "Counts of what the wiki exports contain",
        &[],
        None,
        Shape::Object,
        false,
        super::library::export_summary
    ),
    route!(
        "GET",
        "/library/wiki-page/entity/{id_or_name}",
        "wiki_entity_page",
        "Entity page (markdown); id, or canonical name without case",
        super::library::ENTITY_PAGE_PARAMS,
        None,
        Shape::Object,
        false,
        super::library::entity_page
    ),
    route!(
        "GET",
        "/library/wiki-page/crystal/{crystal_id}",
        "wiki_crystal_page",
        "Crystal page (markdown)",
        &[],
        None,
        Shape::Object,
        false,
        super::library::crystal_page
    ),
    route!(
        "GET",
        "/library/wiki-page/topic/{community_id}",
        "wiki_topic_page",
        "Topic (community) page (markdown)",
        super::library::TOPIC_PAGE_PARAMS,
        None,
        Shape::Object,
        false,
        super::library::topic_page
    ),
    route!(
        "GET",
        "/library/wiki-export",
        "wiki_export",
        "Markdown wiki of the global graph as a ZIP (topics, entities, crystals)",
        super::library::EXPORT_PARAMS,
        None,
        Shape::Zip,
        false,
        super::library::wiki_export
    ),
    route!(
        "GET",
        "/library/okf-export",
        "okf_export",
        "Open Knowledge Format v0.2 bundle as a ZIP",
        super::library::EXPORT_PARAMS,
        None,
        Shape::Zip,
        false,
        super::library::okf_export
    ),
    route!(
        "GET",
        "/fs/capabilities",
        "fs_capabilities",
        "Tree API roots, verbs, limits and feature flags",
        super::fs::CAPS_PARAMS,
        None,
        Shape::Object,
        false,
        super::fs::capabilities
    ),
    route!(
        "GET",
        "/fs/ls",
        "fs_ls",
        "List a directory of the tree (cursor paging)",
        super::fs::LS_PARAMS,
        None,
        Shape::Object,
        false,
        super::fs::ls
    ),
    route!(
        "GET",
        "/fs/cat",
        "fs_cat",
        "A file of the tree: frontmatter and body, or a window of lines",
        super::fs::CAT_PARAMS,
        None,
        Shape::Object,
        false,
        super::fs::cat
    ),
    route!(
        "GET",
        "/fs/stat",
        "fs_stat",
        "Metadata of a path without the body",
        super::fs::STAT_PARAMS,
        None,
        Shape::Object,
        false,
        super::fs::stat
    ),
    route!(
        "GET",
        "/fs/find",
        "fs_find",
        "Structural search (type, label, dates, mentions); returns paths",
        super::fs::FIND_PARAMS,
        None,
        Shape::Object,
        false,
        super::fs::find
    ),
    route!(
        "GET",
        "/fs/grep",
        "fs_grep",
        "Literal or regex search over memories, thread messages and sources, with line numbers",
        super::fs::GREP_PARAMS,
        None,
        Shape::Object,
        false,
        super::fs::grep
    ),
    route!(
        "GET",
        "/fs/recall",
        "fs_recall",
        "Semantic (hybrid) search; returns paths",
        super::fs::RECALL_PARAMS,
        None,
        Shape::Object,
        false,
        super::fs::recall
    ),
    route!(
        "POST",
        "/fs/write",
        "fs_write",
        "Write a canonical writable path (a memory, today's working memory)",
        &[],
        Some("FsWriteRequest"),
        Shape::Object,
        false,
        super::fs::write
    ),
    route!(
        "POST",
        "/fs/delete",
        "fs_delete",
        "Delete a canonical writable path (a memory)",
        &[],
        Some("FsDeleteRequest"),
        Shape::Object,
        false,
        super::fs::delete
    ),
    route!(
        "POST",
        "/data/export",
        "data_export",
        "Write a versioned, checksummed ZIP archive of the whole store (include_* switches)",
        &[],
        Some("ExportRequest"),
        Shape::Object,
        false,
        super::data::export
    ),
    route!(
        "POST",
        "/data/import",
        "data_import",
        "Start importing an export archive in the background (mode merge, skip or overwrite); 409 while one runs",
        &[],
        Some("ImportRequest"),
        Shape::Object,
        false,
        super::data::import
    ),
    route!(
        "GET",
        "/data/import/status/{job_id}",
        "data_import_status",
        "Progress of an import job: processing, then completed (counts) or error",
        &[],
        None,
        Shape::Object,
        false,
        super::data::import_status
    ),
    route!(
        "POST",
        "/health/checkpoint",
        "health_checkpoint",
        "Force a durable commit of pending writes and report what it flushed",
        &[],
        None,
        Shape::Object,
        false,
        super::working::checkpoint
    ),
    route!(
        "POST",
        "/v1/embeddings",
        "create_embeddings",
        "Embed texts with the served model (OpenAI embeddings request and response shapes)",
        &[],
        Some("EmbeddingsRequest"),
        Shape::Ref("EmbeddingsResponse"),
        false,
        super::embeddings::create
    ),
];

fn ok(value: &impl serde::Serialize) -> Result<ApiResponse> {
    Ok(ApiResponse::json(200, value))
}

fn capabilities(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    let mut features = serde_json::Map::new();
    for (k, v) in [
        ("memories", true),
        ("search", true),
        ("labels", true),
        ("spaces", true),
        ("threads", true),
        ("entities", false),
        ("communities", true),
        ("library", true),
        ("sources", true),
        ("embeddings_api", true),
        ("data_import", true),
        ("fs", true),
        ("working_memory", true),
    ] {
        features.insert(k.into(), v.into());
    }
    ok(&CapabilitiesResponse {
        version: api.info.version.clone(),
        server: "engram".into(),
        api_version: "0.9.15".into(),
        features,
        embedding: embedding_status(api, &api.store().health()?),
    })
}

/// The `embedding` object of `/health` and `/capabilities`.
fn embedding_status(api: &Api, h: &crate::store::StoreHealth) -> EmbeddingStatus {
    let emb = &api.store().config().embedder;
    let r = &h.reembed;
    let message = match (&api.info.embedding_fallback, r.running) {
        (Some(why), _) => why.clone(),
        (None, true) => format!("re-embedding {} of {} memories; search is lexical until done", r.done, r.total),
        (None, false) => String::new(),
    };
    EmbeddingStatus {
        mode: emb.mode().into(),
        model: emb.name().into(),
        model_id: emb.model_id().into(),
        dimension: emb.dim(),
        max_input_tokens: emb.max_input_tokens(),
        degraded: api.info.embedding_fallback.is_some() || h.reindex_pending > 0,
        message,
    }
}

fn health(api: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    let h = api.store().health()?;
    let r = &h.reembed;
    ok(&HealthResponse {
        status: "ok".into(),
        version: api.info.version.clone(),
        database_connected: true,
        embedding: embedding_status(api, &h),
        reindex_needed: h.reindex_pending > 0,
        reindex: ReindexStatus {
            pending: h.reindex_pending,
            running: r.running,
            done: r.done,
            total: r.total,
            from_model: r.from.clone(),
            error: r.error.clone(),
        },
        memory_count: h.memories,
        generation: h.generation,
        uptime_s: api.store().uptime_s(),
        vector_index: api.store().vector_index_stats().iter().fold(VectorIndexHealth::default(), |mut a, s| {
            a.vectors += s.vectors;
            a.graph_points += s.graph_points;
            a.tombstones += s.tombstones;
            a.pending += s.pending;
            a
        }),
    })
}

fn livez(_: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&serde_json::json!({"status": "alive"}))
}

fn openapi(_: &Api, _: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&Api::openapi())
}

fn parse_unit(s: Option<&str>, loc: &[&str], errs: &mut Vec<FieldError>) -> Option<UnitType> {
    let s = s?;
    let u = UnitType::parse(s);
    if u.is_none() {
        errs.push(
            FieldError::new(loc, "enum", format!("Input should be one of: {}", UNIT_TYPES.join(", ")), s.into())
                .with_ctx(serde_json::json!({"expected": UNIT_TYPES.join(", ")})),
        );
    }
    u
}

fn parse_temporal(s: Option<&str>, loc: &[&str], errs: &mut Vec<FieldError>) -> Option<TemporalContext> {
    let s = s?;
    let t = TemporalContext::parse(s);
    if t.is_none() {
        errs.push(FieldError::new(loc, "enum", "Input should be one of: past, present, future, timeless", s.into()));
    }
    t
}

fn parse_date_bound(s: Option<&str>, loc: &[&str], end_of: bool, errs: &mut Vec<FieldError>) -> Option<Timestamp> {
    let s = s?.trim();
    if s.is_empty() {
        return None;
    }
    match parse_loose_date(s) {
        Some(t) if end_of => Some(Timestamp(end_of_period(s, t.0))),
        Some(t) => Some(t),
        None => {
            errs.push(FieldError::new(
                loc,
                "date_invalid",
                "expected YYYY, YYYY-MM, YYYY-MM-DD or an RFC 3339 date-time",
                s.into(),
            ));
            None
        }
    }
}

/// The last millisecond of the year, month or day that `s` names (upper bounds are inclusive).
fn end_of_period(s: &str, start_ms: i64) -> i64 {
    const DAY: i64 = 86_400_000;
    match s.len() {
        4 => parse_loose_date(&format!("{}", s.parse::<i32>().unwrap_or(0) + 1)).map_or(start_ms, |t| t.0 - 1),
        7 => {
            let (y, m) = (s[..4].parse::<i32>().unwrap_or(0), s[5..].parse::<u32>().unwrap_or(1));
            let next = if m >= 12 { format!("{}-01", y + 1) } else { format!("{y}-{:02}", m + 1) };
            parse_loose_date(&next).map_or(start_ms, |t| t.0 - 1)
        }
        10 => start_ms + DAY - 1,
        _ => start_ms,
    }
}

fn source_range_of(indices: Option<&Vec<i64>>) -> Option<std::collections::BTreeMap<String, f64>> {
    let v = indices.filter(|v| !v.is_empty())?;
    let (lo, hi) = (v.iter().min().copied().unwrap_or(0), v.iter().max().copied().unwrap_or(0));
    Some([("start_index".to_string(), lo as f64), ("end_index".to_string(), hi as f64)].into_iter().collect())
}

/// The store input of one `POST /memories` body; field errors go to `errs` under `loc` (`["body"]`, or
/// `["body", "memories", i]` in a batch).
fn new_memory(r: CreateMemoryRequest, loc: &[serde_json::Value], errs: &mut Vec<FieldError>) -> NewMemory {
    let mut item = Vec::new();
    let unit_type = parse_unit(r.unit_type.as_deref(), &["body", "unit_type"], &mut item);
    let temporal_context = parse_temporal(r.temporal_context.as_deref(), &["body", "temporal_context"], &mut item);
    for mut e in item {
        e.loc.splice(0..1, loc.iter().cloned());
        errs.push(e);
    }
    let mut metadata = r.metadata.clone();
    for (k, v) in [("source_app", &r.source_app), ("import_origin", &r.import_origin)] {
        if let Some(v) = v {
            metadata.get_or_insert_with(Default::default).insert(k.into(), v.clone().into());
        }
    }
    NewMemory {
        id: r.id,
        content: r.content,
        title: r.title,
        importance: r.importance,
        confidence: r.confidence,
        source: r.source,
        labels: r.labels,
        unit_type,
        event_start: r.event_start,
        event_end: r.event_end,
        temporal_context,
        source_thread_id: r.source_thread_id,
        source_message_id: r.source_message_id,
        metadata: metadata.map(Metadata),
        space_id: r.space_id,
        source_range: source_range_of(r.source_message_indices.as_ref()),
        extraction_method: None,
        embedding: r.embedding,
    }
}

fn created_out(c: crate::store::CreatedMemory) -> CreateMemoryResponse {
    let action = match c.action {
        WriteAction::Created => "created",
        WriteAction::Updated => "updated",
        WriteAction::Unchanged => "unchanged",
    };
    CreateMemoryResponse {
        memory: c.view.into(),
        extracted_entities: c.entities,
        assigned_labels: c.assigned_labels,
        created_relationships: c.created_relationships,
        action: action.into(),
        warnings: c.warnings,
    }
}

fn create_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: CreateMemoryRequest = ctx.json()?;
    let mut errs = Vec::new();
    let new = new_memory(r, &["body".into()], &mut errs);
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    ok(&created_out(api.store().create_memory(new)?))
}

/// Engram extension `POST /memories/batch`: up to [`MAX_BATCH`] memories in one write transaction (all or none).
fn create_memories(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: BatchCreateRequest = ctx.json()?;
    if r.memories.is_empty() || r.memories.len() > MAX_BATCH {
        return Err(Error::invalid(vec![
            FieldError::new(
                &["body", "memories"],
                "batch_size",
                format!("memories holds 1..={MAX_BATCH} items, got {}", r.memories.len()),
                r.memories.len().into(),
            )
            .with_ctx(serde_json::json!({"min_items": 1, "max_items": MAX_BATCH})),
        ]));
    }
    let mut errs = Vec::new();
    let batch: Vec<NewMemory> = r
        .memories
        .into_iter()
        .enumerate()
        .map(|(i, m)| new_memory(m, &["body".into(), "memories".into(), i.into()], &mut errs))
        .collect();
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let created = api.store().create_memories(batch).map_err(|e| {
        // The store names items [i, field] (a batch of one: [field]); this route nests them under body.memories.
        if e.kind() != crate::ErrorKind::InvalidInput {
            return e;
        }
        let fields = e
            .fields()
            .iter()
            .cloned()
            .map(|mut f| {
                if f.loc.first().is_some_and(|v| v.is_number()) {
                    f.place(&["body".into(), "memories".into()]);
                } else {
                    f.place(&["body".into(), "memories".into(), 0.into()]);
                }
                f
            })
            .collect();
        Error::invalid(fields)
    })?;
    ok(&BatchCreateResponse { memories: created.into_iter().map(created_out).collect() })
}

/// Most memories in one `POST /memories/batch`.
const MAX_BATCH: usize = 1000;

fn label_ids(names: &[String]) -> Vec<String> {
    names.iter().map(|n| crate::model::Label::id_for(n.trim())).collect()
}

fn list_memories(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let states = match q.str("state").unwrap_or("active") {
        "all" => vec![MemoryState::Active, MemoryState::Archived, MemoryState::Deprecated, MemoryState::Superseded],
        s => MemoryState::parse(s).into_iter().collect(),
    };
    let filter = MemoryFilter {
        states,
        unit_type: q.str("unit_type").and_then(UnitType::parse),
        importance_min: q.num("importance_min"),
        label_ids: label_ids(q.list("labels")),
        is_crystal: q.bool("is_crystal"),
        include_history: true,
        ..Default::default()
    };
    let page = api.store().list_memories(&ListQuery {
        space_id: q.str("space_id").unwrap_or(DEFAULT_SPACE).to_string(),
        filter,
        limit: q.int("limit").unwrap_or(20) as usize,
        offset: q.int("offset").unwrap_or(0) as usize,
    })?;
    let has_more = page.has_more();
    ok(&ListMemoriesResponse {
        pagination: Pagination { limit: page.limit, offset: page.offset, total: page.total, has_more },
        memories: page.items.into_iter().map(MemoryOut::from).collect(),
    })
}

fn time_range_start(s: &str, errs: &mut Vec<FieldError>) -> Option<Timestamp> {
    const DAY: i64 = 86_400_000;
    let now = Timestamp::now().0;
    match s {
        "today" => Some(Timestamp(now - now.rem_euclid(DAY))),
        "week" => Some(Timestamp(now - 7 * DAY)),
        "month" => Some(Timestamp(now - 30 * DAY)),
        "year" => Some(Timestamp(now - 365 * DAY)),
        other => parse_date_bound(Some(other), &["query", "time_range"], false, errs),
    }
}

#[allow(clippy::too_many_arguments)]
fn run_search(
    api: &Api,
    query: String,
    query_embedding: Option<Vec<f32>>,
    space: String,
    limit: i64,
    mode: SearchMode,
    filter: MemoryFilter,
    options: SearchOptions,
) -> Result<SearchResults> {
    api.store().search(&SearchQuery {
        query,
        space_id: space,
        limit: limit.clamp(1, 100) as usize,
        filter,
        mode,
        fusion: None,
        query_embedding,
        options,
    })
}

/// The search options of `include_context`, `context_window` (1..=10, default 1) and `expand_neighbours`.
fn search_options(
    include_context: Option<bool>,
    window: Option<i64>,
    expand: Option<bool>,
    place: &str,
    errs: &mut Vec<FieldError>,
) -> SearchOptions {
    let max = crate::store::MAX_CONTEXT_WINDOW as i64;
    let w = window.unwrap_or(1);
    if !(1..=max).contains(&w) {
        errs.push(
            FieldError::new(&[place, "context_window"], "range", "context_window is 1..=10", w.into())
                .with_ctx(serde_json::json!({"ge": 1, "le": max})),
        );
    }
    SearchOptions {
        include_context: include_context.unwrap_or(false).then_some(w.clamp(1, max) as usize),
        expand_neighbours: expand,
        ..Default::default()
    }
}

fn search_get(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let mut errs = Vec::new();
    if !q.list("metadata").is_empty() {
        errs.push(FieldError::new(
            &["query", "metadata"],
            "unsupported",
            "metadata filters are not supported yet",
            serde_json::Value::Null,
        ));
    }
    let mut filter = MemoryFilter {
        unit_type: q.str("unit_type").and_then(UnitType::parse),
        importance_min: q.num("importance_min"),
        label_ids: label_ids(q.list("labels")),
        include_history: q.bool("include_history").unwrap_or(false),
        event_from: parse_date_bound(q.str("event_date_from"), &["query", "event_date_from"], false, &mut errs),
        event_to: parse_date_bound(q.str("event_date_to"), &["query", "event_date_to"], true, &mut errs),
        recorded_from: parse_date_bound(
            q.str("recorded_date_from"),
            &["query", "recorded_date_from"],
            false,
            &mut errs,
        ),
        recorded_to: parse_date_bound(q.str("recorded_date_to"), &["query", "recorded_date_to"], true, &mut errs),
        ..Default::default()
    };
    if let (None, Some(tr)) = (filter.recorded_from, q.str("time_range")) {
        filter.recorded_from = time_range_start(tr, &mut errs);
    }
    let options = search_options(
        q.bool("include_context"),
        q.int("context_window"),
        q.bool("expand_neighbours"),
        "query",
        &mut errs,
    );
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let mode = retrieval_mode(q.str("retrieval"));
    let query = q.str("q").unwrap_or_default().to_string();
    let space = q.str("space_id").unwrap_or(DEFAULT_SPACE).to_string();
    let with_entities = q.bool("include_entities").unwrap_or(false);
    let res = run_search(api, query, None, space.clone(), q.int("limit").unwrap_or(10), mode, filter, options)
        .map_err(|e| relocate(e, "query", "q"))?;
    let mut entities = Vec::with_capacity(res.hits.len());
    for h in &res.hits {
        entities.push(if with_entities { Some(api.store().memory_entities(&space, &h.view.memory.id)?) } else { None });
    }
    let memories = res
        .hits
        .iter()
        .zip(entities)
        .map(|(h, ents)| {
            let mut v = serde_json::to_value(MemoryOut::from(h.view.clone())).unwrap_or_default();
            let reason = h.reason();
            if let Some(obj) = v.as_object_mut() {
                if let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    meta.insert("similarity_score".into(), f64::from(h.score).into());
                    meta.insert("relevance_reason".into(), reason.clone().into());
                }
                obj.insert("similarity_score".into(), f64::from(h.score).into());
                obj.insert("relevance_score".into(), f64::from(h.score).into());
                obj.insert("relevance_reason".into(), reason.into());
                if let Some(e) = ents {
                    obj.insert("related_entities".into(), serde_json::to_value(e).unwrap_or_default());
                }
                if options.include_context.is_some() {
                    obj.insert("context".into(), serde_json::to_value(&h.context).unwrap_or_default());
                }
            }
            v
        })
        .collect();
    ok(&SearchGetResponse {
        search_metadata: SearchMetadata {
            total_found: res.hits.len(),
            search_mode: res.mode.as_str().into(),
            candidates: res.candidates,
            elapsed_ms: res.elapsed_ms,
            fallback_status: FallbackStatus {
                degraded: res.fallback.is_some(),
                message: res.fallback.clone().unwrap_or_default(),
            },
        },
        memories,
    })
}

/// Puts a store validation error about the search fields where this transport took them (`place`), with the
/// search text under `query_name`.
fn relocate(e: Error, place: &str, query_name: &str) -> Error {
    if e.kind() != crate::ErrorKind::InvalidInput {
        return e;
    }
    let fields: Vec<FieldError> = e
        .fields()
        .iter()
        .cloned()
        .map(|mut f| {
            if !f.in_request && f.loc.first().and_then(|v| v.as_str()) == Some("query") {
                f.loc[0] = query_name.into();
            }
            f.place(&[place.into()]);
            f
        })
        .collect();
    Error::invalid(fields)
}

fn retrieval_mode(s: Option<&str>) -> SearchMode {
    match s {
        Some("lexical") => SearchMode::Lexical,
        Some("vector") => SearchMode::Vector,
        _ => SearchMode::Hybrid,
    }
}

fn search_post(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: SearchRequest = ctx.json()?;
    let mut errs = Vec::new();
    let limit = r.limit.unwrap_or(10);
    if !(1..=100).contains(&limit) {
        errs.push(
            FieldError::new(&["body", "limit"], "limit_invalid", "limit is 1..=100", limit.into())
                .with_ctx(serde_json::json!({"ge": 1, "le": 100})),
        );
    }
    if let Some(x) = r.importance_min
        && !(0.0..=1.0).contains(&x)
    {
        errs.push(FieldError::new(
            &["body", "importance_min"],
            "range",
            "importance_min is 0..=1",
            serde_json::Value::Null,
        ));
    }
    if let Some(m) = r.retrieval.as_deref()
        && !["hybrid", "lexical", "vector"].contains(&m)
    {
        errs.push(FieldError::new(
            &["body", "retrieval"],
            "enum",
            "Input should be one of: hybrid, lexical, vector",
            m.into(),
        ));
    }
    let unit_type = parse_unit(r.unit_type.as_deref(), &["body", "unit_type"], &mut errs);
    let _ = parse_temporal(r.temporal_context.as_deref(), &["body", "temporal_context"], &mut errs);
    let filter = MemoryFilter {
        unit_type,
        importance_min: r.importance_min,
        label_ids: label_ids(r.filter_labels.as_deref().unwrap_or_default()),
        include_history: r.include_history.unwrap_or(false),
        event_from: parse_date_bound(r.event_date_from.as_deref(), &["body", "event_date_from"], false, &mut errs),
        event_to: parse_date_bound(r.event_date_to.as_deref(), &["body", "event_date_to"], true, &mut errs),
        recorded_from: parse_date_bound(
            r.recorded_date_from.as_deref(),
            &["body", "recorded_date_from"],
            false,
            &mut errs,
        ),
        recorded_to: parse_date_bound(r.recorded_date_to.as_deref(), &["body", "recorded_date_to"], true, &mut errs),
        ..Default::default()
    };
    let options = search_options(r.include_context, r.context_window, r.expand_neighbours, "body", &mut errs);
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let space = r.space_id.unwrap_or_else(|| DEFAULT_SPACE.to_string());
    let with_entities = r.include_entities.unwrap_or(false);
    let mode = retrieval_mode(r.retrieval.as_deref());
    let res = run_search(api, r.query, r.query_embedding, space.clone(), limit, mode, filter, options)?;
    let mut out: Vec<MemorySearchResult> = Vec::with_capacity(res.hits.len());
    for h in res.hits {
        let related_entities =
            if with_entities { api.store().memory_entities(&space, &h.view.memory.id)? } else { vec![] };
        out.push(MemorySearchResult {
            similarity_score: f64::from(h.score),
            relevance_reason: h.reason(),
            related_entities,
            evolves_context: serde_json::json!({}),
            context: options.include_context.map(|_| h.context),
            memory: h.view.into(),
        });
    }
    ok(&out)
}

fn guard<'c>(ctx: &'c Ctx<'_>) -> Option<&'c str> {
    ctx.query.str("space_id").filter(|s| !s.is_empty())
}

fn get_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&MemoryOut::from(api.store().read_memory(ctx.param("memory_id"), guard(ctx))?))
}

fn update_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: UpdateMemoryRequest = ctx.json()?;
    let mut errs = Vec::new();
    let unit_type = parse_unit(r.unit_type.as_deref(), &["body", "unit_type"], &mut errs);
    let temporal_context = parse_temporal(r.temporal_context.as_deref(), &["body", "temporal_context"], &mut errs);
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let patch = MemoryPatch {
        title: r.title,
        content: r.content,
        importance: r.importance,
        confidence: r.confidence,
        unit_type,
        space_id: r.space_id,
        labels: r.labels,
        source: r.source,
        event_start: r.event_start,
        event_end: r.event_end,
        temporal_context,
        metadata: r.metadata.map(Metadata),
        embedding: r.embedding,
    };
    ok(&MemoryOut::from(api.store().update_memory(ctx.param("memory_id"), patch, guard(ctx))?))
}

fn delete_memory(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let id = ctx.param("memory_id");
    let r = api.store().delete_memory(id, guard(ctx))?;
    ok(&DeleteMemoryResponse {
        message: format!("memory '{id}' deleted"),
        deleted_relationships: r.deleted_relationships,
        deleted_entities: 0,
    })
}

fn memory_labels(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    ok(&LabelsResponse { labels: api.store().memory_labels(ctx.param("memory_id"), guard(ctx))? })
}

fn add_label(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (m, l) = (ctx.param("memory_id"), ctx.param("label_id"));
    let changed = api.store().set_memory_label(m, l, true, guard(ctx))?;
    let message = if changed {
        format!("label '{l}' added to memory '{m}'")
    } else {
        format!("memory '{m}' already has label '{l}'")
    };
    ok(&MessageResponse { message })
}

fn remove_label(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let (m, l) = (ctx.param("memory_id"), ctx.param("label_id"));
    let changed = api.store().set_memory_label(m, l, false, guard(ctx))?;
    let message = if changed {
        format!("label '{l}' removed from memory '{m}'")
    } else {
        format!("memory '{m}' did not have label '{l}'")
    };
    ok(&MessageResponse { message })
}

fn list_labels(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let order = match q.str("order_by") {
        Some("usage_count") => LabelOrder::UsageCount,
        Some("created_at") => LabelOrder::CreatedAt,
        Some("updated_at") => LabelOrder::UpdatedAt,
        _ => LabelOrder::Name,
    };
    let labels = api.store().list_labels(
        q.str("space_id").unwrap_or(DEFAULT_SPACE),
        order,
        q.bool("order_desc").unwrap_or(false),
        q.int("limit").unwrap_or(100) as usize,
        q.int("offset").unwrap_or(0) as usize,
    )?;
    ok(&labels)
}

fn create_label(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let label = api.store().create_label(
        q.str("space_id").unwrap_or(DEFAULT_SPACE),
        q.str("name").unwrap_or_default(),
        q.str("color").map(str::to_string),
        q.str("description").map(str::to_string),
    )?;
    ok(&label)
}
