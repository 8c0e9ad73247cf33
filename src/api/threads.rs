//! Thread routes (client contract section 5): create, append, read, list, search, import, metadata merge,
//! favourite, delete. Request and response shapes follow the contract table; choices are in docs/api.md.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::query::{ParamSpec, boolean, int, required, required_bool, string};
use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::ErrorCode;
use crate::error::{Error, Result};
use crate::model::{Message, Metadata, Thread};
use crate::store::{AppendMessages, DEFAULT_SPACE, NewMessage, NewThread};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "POST",
        "/memories/distill",
        "distill_memories",
        "Extract memories from a conversation (deterministic rules, no LLM)",
        &[],
        Some(Dto::of::<DistillRequest>()),
        Shape::Ref(Dto::of::<DistillResponse>()),
        false,
        distill
    ),
    route!(
        "POST",
        "/memories/distill/triage",
        "triage_conversation",
        "Whether a conversation is worth distilling",
        &[],
        Some(Dto::of::<TriageRequest>()),
        Shape::Ref(Dto::of::<TriageResponse>()),
        false,
        triage
    ),
    route!(
        "POST",
        "/threads",
        "create_thread",
        "Create a thread with messages (409 when the id exists in the space)",
        &[],
        Some(Dto::of::<CreateThreadRequest>()),
        Shape::Ref(Dto::of::<CreateThreadResponse>()),
        false,
        create
    ),
    route!(
        "GET",
        "/threads",
        "list_threads",
        "List threads, most recently updated first",
        LIST_PARAMS,
        None,
        Shape::Ref(Dto::of::<ThreadListResponse>()),
        false,
        list
    ),
    route!(
        "GET",
        "/threads/search",
        "search_threads",
        "Threads whose messages contain every query word, with match counts",
        SEARCH_PARAMS,
        None,
        Shape::Ref(Dto::of::<ThreadSearchResponse>()),
        false,
        search
    ),
    route!(
        "POST",
        "/threads/import",
        "import_threads",
        "Create-or-append one thread or a batch",
        &[],
        Some(Dto::of::<ImportRequest>()),
        Shape::Ref(Dto::of::<ThreadImportResponse>()),
        false,
        import
    ),
    route!(
        "GET",
        "/threads/{thread_id}",
        "get_thread",
        "A thread and a page of its messages",
        GET_PARAMS,
        None,
        Shape::Ref(Dto::of::<ThreadMessagesResponse>()),
        false,
        get
    ),
    route!(
        "DELETE",
        "/threads/{thread_id}",
        "delete_thread",
        "Delete a thread, its messages and optionally its memories",
        DELETE_PARAMS,
        None,
        Shape::Ref(Dto::of::<ThreadDeleteResponse>()),
        false,
        delete
    ),
    route!(
        "POST",
        "/threads/{thread_id}/append",
        "append_thread",
        "Append messages (deduplicated; checkpointed with expected_message_count)",
        &[],
        Some(Dto::of::<AppendRequest>()),
        Shape::Ref(Dto::of::<AppendResponse>()),
        false,
        append
    ),
    route!(
        "POST",
        "/threads/{thread_id}/metadata/merge",
        "merge_thread_metadata",
        "Merge keys into the thread's metadata",
        &[],
        Some(Dto::of::<MergeMetadataRequest>()),
        Shape::Ref(Dto::of::<ThreadUpdateResponse>()),
        false,
        merge_metadata
    ),
    route!(
        "POST",
        "/threads/{thread_id}/favorite",
        "favorite_thread",
        "Mark or unmark a thread as favourite",
        FAVORITE_PARAMS,
        None,
        Shape::Ref(Dto::of::<super::dto::MessageResponse>()),
        false,
        favorite
    ),
    route!(
        "GET",
        "/favorites/threads",
        "favorite_threads",
        "Favourite threads",
        FAVORITES_PARAMS,
        None,
        Shape::ArrayOf(Dto::of::<Thread>()),
        false,
        favorites
    ),
];

/// A message in a request.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct MessageIn {
    /// `user`, `assistant`, `system`, `tool`, ... (1..=50 characters).
    pub role: String,
    /// Text, at most 262,144 bytes.
    pub content: String,
    /// When it was said (RFC 3339 or `YYYY-MM-DD`); default: now.
    #[serde(default)]
    pub timestamp: Option<String>,
    /// Caller data; `external_id` is the deduplication key; `exclude_from_distillation` keeps the message out
    /// of memory extraction.
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

impl From<MessageIn> for NewMessage {
    fn from(m: MessageIn) -> Self {
        NewMessage { role: m.role, content: m.content, timestamp: m.timestamp, metadata: m.metadata }
    }
}

/// Body of `POST /threads`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct CreateThreadRequest {
    /// Client-chosen id (1..=200 characters, no `/`); generated (UUIDv7) when omitted.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Title (at most 500 characters; default: the start of the summary).
    #[serde(default)]
    pub title: Option<String>,
    /// Messages in order (up to 10,000).
    pub messages: Vec<MessageIn>,
    /// Origin.
    #[serde(default)]
    pub source: Option<String>,
    /// Project.
    #[serde(default)]
    pub project: Option<String>,
    /// Workspace.
    #[serde(default)]
    pub workspace: Option<String>,
    /// Participants.
    #[serde(default)]
    pub participants: Vec<String>,
    /// Tool version.
    #[serde(default)]
    pub tool_version: Option<String>,
    /// Import date.
    #[serde(default)]
    pub import_date: Option<String>,
    /// Caller data.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Space (default `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

/// Body of `POST /threads/{thread_id}/append`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct AppendRequest {
    /// Messages in order.
    pub messages: Vec<MessageIn>,
    /// Skip messages whose deduplication key was seen (default true).
    #[serde(default)]
    pub deduplicate: Option<bool>,
    /// Derives deduplication keys (`<key>:<position>`) for messages without `metadata.external_id`.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Append only if the thread has exactly this many messages (else 409 `checkpoint_conflict`).
    #[serde(default)]
    pub expected_message_count: Option<u64>,
    /// Space of the thread.
    #[serde(default)]
    pub space_id: Option<String>,
}

/// One thread of `POST /threads/import`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ImportThread {
    /// Id; generated when omitted. An existing id appends (create-or-append).
    #[serde(default, alias = "id")]
    pub thread_id: Option<String>,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Messages.
    #[serde(default)]
    pub messages: Option<Vec<MessageIn>>,
    /// Markdown transcript (`User: ...` / `Assistant: ...` blocks, or `## User` headings) when `messages` is
    /// absent.
    #[serde(default)]
    pub markdown_content: Option<String>,
    /// Origin.
    #[serde(default)]
    pub source: Option<String>,
    /// Space (also read from `metadata.space_id`).
    #[serde(default, alias = "space")]
    pub space_id: Option<String>,
    /// Caller data.
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Checkpoint guard for the append of an existing thread.
    #[serde(default)]
    pub expected_message_count: Option<u64>,
    /// Derives deduplication keys.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Tool version.
    #[serde(default)]
    pub tool_version: Option<String>,
}

/// Body of `POST /threads/import`: one thread, or `threads` for a batch.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ImportRequest {
    /// Batch form.
    #[serde(default)]
    pub threads: Option<Vec<ImportThread>>,
    /// Single form.
    #[serde(flatten)]
    pub single: ImportThread,
}

/// Body of `POST /threads/{thread_id}/metadata/merge`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct MergeMetadataRequest {
    /// Keys to merge.
    pub metadata: Metadata,
    /// Keep keys that are already set (default false).
    #[serde(default)]
    pub only_missing: bool,
    /// Space of the thread.
    #[serde(default)]
    pub space_id: Option<String>,
}

/// Response of `POST /threads`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreateThreadResponse {
    /// The thread (`thread_id` echoes the request, `message_count` is an integer).
    pub thread: Thread,
    /// The stored messages.
    pub messages: Vec<Message>,
    /// MENTIONS and RELATES_TO edges created by the extracted memories.
    pub created_relationships: u64,
    /// Extractive summary (the first sentence of the first user message).
    pub auto_generated_summary: String,
    /// Memories extracted from the messages (full records).
    pub extracted_memories: Vec<super::dto::MemoryOut>,
    /// Whether extraction ran (false when the thread's `metadata.analysis` is
    /// `searchable-now-distill-on-demand`).
    pub auto_extraction_performed: bool,
    /// Extracted units dropped as near-duplicates of stored memories.
    pub merged_duplicates: usize,
    /// Non-fatal problems (extraction that failed after the messages were stored).
    pub warnings: Vec<String>,
}

/// Response of `POST /threads/{thread_id}/append`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AppendResponse {
    /// True.
    pub success: bool,
    /// The thread.
    pub thread_id: String,
    /// Messages stored by this call.
    pub messages_added: u64,
    /// Messages skipped as duplicates.
    pub messages_skipped: u64,
    /// Messages in the thread now.
    pub total_messages: u64,
    /// `checkpointed` when `expected_message_count` was checked, else `append`.
    pub append_mode: String,
    /// Memories extracted from the added messages.
    pub extracted_memories: Vec<super::dto::MemoryOut>,
    /// Whether extraction ran.
    pub auto_extraction_performed: bool,
    /// Extracted units dropped as near-duplicates of stored memories.
    pub merged_duplicates: usize,
    /// Non-fatal problems (extraction that failed after the messages were stored).
    pub warnings: Vec<String>,
}

/// `GET /threads/{thread_id}`: the thread and one page of its messages.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadMessagesResponse {
    /// The thread.
    pub thread: crate::model::Thread,
    /// Messages `offset..offset + limit`, in order.
    pub messages: Vec<crate::model::Message>,
    /// Messages in the thread.
    pub total_messages: u64,
    /// Messages in the thread (same as `total_messages`).
    pub message_count: u64,
    /// Page size asked for.
    pub limit: u64,
    /// Order index of the first message of the page.
    pub offset: u64,
    /// Whether messages follow this page.
    pub has_more: bool,
}

/// Paging of a listing.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Pagination {
    /// Page size.
    pub limit: u64,
    /// Items skipped.
    pub offset: u64,
    /// Items in all.
    pub total: u64,
    /// Whether items follow this page.
    pub has_more: bool,
}

/// `GET /threads`: one page of threads, most recently updated first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadListResponse {
    /// The threads of the page.
    pub threads: Vec<ThreadSummary>,
    /// Paging.
    pub pagination: Pagination,
}

/// One thread found by `GET /threads/search`: the thread's summary and its match counts.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadSearchHit {
    /// The thread.
    #[serde(flatten)]
    pub summary: ThreadSummary,
    /// Messages matching every term.
    pub total_matches: u64,
    /// Messages matching every term (same as `total_matches`).
    pub matched_messages_count: u64,
    /// Messages matching through their neighbours.
    pub context_matches: u64,
}

/// `GET /threads/search`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadSearchResponse {
    /// Threads found.
    pub total_found: u64,
    /// The threads, most matching messages first.
    pub threads: Vec<ThreadSearchHit>,
}

/// `DELETE /threads/{thread_id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadDeleteResponse {
    /// Always true.
    pub success: bool,
    /// The thread deleted.
    pub thread_id: String,
    /// Messages deleted.
    pub deleted_messages: u64,
    /// Memories deleted with it (`cascade_delete_memories`).
    pub deleted_memories: u64,
    /// One line.
    pub message: String,
}

/// A changed thread (`PATCH /threads/{thread_id}` metadata merge).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadUpdateResponse {
    /// Always true.
    pub success: bool,
    /// The thread as stored now.
    pub thread: crate::model::Thread,
}

/// A thread in listings.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadSummary {
    /// Thread id.
    pub id: String,
    /// Thread id.
    pub thread_id: String,
    /// Title.
    pub title: String,
    /// Origin.
    pub source: String,
    /// Message count.
    pub messages: u64,
    /// Message count.
    pub message_count: u64,
    /// Last update (RFC 3339).
    pub date: String,
    /// Creation time.
    pub created_at: String,
    /// Last update.
    pub updated_at: String,
    /// Favourite.
    pub is_favorite: bool,
    /// Space.
    pub space_id: String,
    /// Summary.
    pub summary: String,
}

impl From<&Thread> for ThreadSummary {
    fn from(t: &Thread) -> Self {
        ThreadSummary {
            id: t.thread_id.clone(),
            thread_id: t.thread_id.clone(),
            title: t.title.clone(),
            source: t.source.clone(),
            messages: t.message_count,
            message_count: t.message_count,
            date: t.updated_at.to_rfc3339(),
            created_at: t.created_at.to_rfc3339(),
            updated_at: t.updated_at.to_rfc3339(),
            is_favorite: t.is_favorite,
            space_id: t.space_id.clone(),
            summary: t.summary.clone(),
        }
    }
}

/// One result of `POST /threads/import`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ImportResult {
    /// This thread was stored.
    pub success: bool,
    /// Thread id.
    pub thread_id: String,
    /// Title.
    pub title: String,
    /// Messages in the thread now.
    pub message_count: u64,
    /// Messages stored by this call.
    pub messages_added: u64,
    /// Why it failed.
    pub error: Option<String>,
    /// `checkpoint_conflict`, `thread_not_found`, `validation_error`, ...
    pub error_code: Option<String>,
    /// `checkpointed` when `expected_message_count` was checked, else `append` or `create`.
    pub append_mode: String,
    /// `created` or `appended`.
    pub action: String,
}

pub(super) const LIST_PARAMS: &[ParamSpec] = &[
    int("limit", 1, Some(1000), Some(20), "page size"),
    int("offset", 0, None, Some(0), "threads to skip"),
    string("source", None, "only threads of this source"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
];

pub(super) const GET_PARAMS: &[ParamSpec] = &[
    int("limit", 1, Some(1000), Some(100), "messages per page"),
    int("offset", 0, None, Some(0), "messages to skip"),
    string("space_id", None, "space (default: `default`, else the first space holding the id)"),
    string("space", None, "alias of space_id"),
];

pub(super) const SEARCH_PARAMS: &[ParamSpec] = &[
    required("query", "words every matching message contains"),
    int("limit", 1, Some(100), Some(10), "threads"),
    string("source", None, "only threads of this source"),
    string("space_id", Some(DEFAULT_SPACE), "space"),
    string("mode", None, "accepted and ignored"),
];

pub(super) const DELETE_PARAMS: &[ParamSpec] = &[
    boolean("cascade_delete_memories", Some(false), "also delete memories whose source_thread_id is the thread"),
    string("space_id", None, "space"),
];

pub(super) const FAVORITE_PARAMS: &[ParamSpec] = &[
    required_bool("is_favorite", "true marks, false unmarks"),
    string("space_id", None, "space; disambiguates duplicate thread ids"),
];

pub(super) const FAVORITES_PARAMS: &[ParamSpec] = &[int("limit", 1, Some(100), Some(50), "threads")];

fn ok(value: &impl Serialize) -> Result<ApiResponse> {
    Ok(ApiResponse::json(200, value))
}

fn space_param<'a>(ctx: &'a Ctx<'_>) -> Option<&'a str> {
    ctx.query.str("space_id").or_else(|| ctx.query.str("space"))
}

pub(super) fn create(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: CreateThreadRequest = ctx.json()?;
    let created = api.store().threads().create(NewThread {
        thread_id: req.thread_id,
        title: req.title,
        messages: req.messages.into_iter().map(NewMessage::from).collect(),
        source: req.source,
        project: req.project,
        workspace: req.workspace,
        participants: req.participants,
        tool_version: req.tool_version,
        import_date: req.import_date,
        metadata: req.metadata,
        space_id: req.space_id,
        deduplicate: true,
        idempotency_key: None,
    })?;
    ok(&CreateThreadResponse {
        auto_generated_summary: created.thread.summary.clone(),
        thread: created.thread,
        messages: created.messages,
        created_relationships: created.extraction.memories.iter().map(|m| m.created_relationships).sum(),
        auto_extraction_performed: created.extraction.performed,
        merged_duplicates: created.extraction.merged,
        warnings: created.extraction.warnings.clone(),
        extracted_memories: created
            .extraction
            .memories
            .into_iter()
            .map(|c| super::dto::MemoryOut::from(c.view))
            .collect(),
    })
}

pub(super) fn append(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: AppendRequest = ctx.json()?;
    let id = ctx.param("thread_id");
    let space = req.space_id.clone();
    let r = api.store().threads().append(
        id,
        space.as_deref().or_else(|| space_param(ctx)),
        AppendMessages {
            messages: req.messages.into_iter().map(NewMessage::from).collect(),
            deduplicate: req.deduplicate.unwrap_or(true),
            idempotency_key: req.idempotency_key,
            expected_message_count: req.expected_message_count,
        },
    )?;
    ok(&AppendResponse {
        success: true,
        thread_id: r.thread.thread_id.clone(),
        messages_added: r.added.len() as u64,
        messages_skipped: r.skipped,
        total_messages: r.thread.message_count,
        append_mode: if r.checkpointed { "checkpointed" } else { "append" }.into(),
        auto_extraction_performed: r.extraction.performed,
        merged_duplicates: r.extraction.merged,
        warnings: r.extraction.warnings.clone(),
        extracted_memories: r.extraction.memories.into_iter().map(|c| super::dto::MemoryOut::from(c.view)).collect(),
    })
}

pub(super) fn get(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let offset = ctx.query.int("offset").unwrap_or(0) as u64;
    ok(&thread_messages(api, ctx.param("thread_id"), space_param(ctx), ctx.query.limit(), offset)?)
}

/// `GET /threads/{thread_id}` as a typed call: the thread and `limit` of its messages from `offset`, in order;
/// `space` is the optional guard.
///
/// # Errors
/// As [`crate::store::Threads::messages`] (404 when missing).
pub(crate) fn thread_messages(
    api: &Api,
    id: &str,
    space: Option<&str>,
    limit: usize,
    offset: u64,
) -> Result<ThreadMessagesResponse> {
    let (thread, messages) = api.store().threads().messages(id, space, limit, offset)?;
    let total = thread.message_count;
    let has_more = offset + (messages.len() as u64) < total;
    Ok(ThreadMessagesResponse {
        thread,
        messages,
        total_messages: total,
        message_count: total,
        limit: limit as u64,
        offset,
        has_more,
    })
}

pub(super) fn list(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let space = q.str("space_id").unwrap_or(DEFAULT_SPACE);
    ok(&list_threads(api, space, q.str("source"), q.limit(), q.int("offset").unwrap_or(0) as usize)?)
}

/// `GET /threads` as a typed call: one page of a space's threads (of one `source` app when given), newest first.
///
/// # Errors
/// As [`crate::store::Threads::list`].
pub(crate) fn list_threads(
    api: &Api,
    space: &str,
    source: Option<&str>,
    limit: usize,
    offset: usize,
) -> Result<ThreadListResponse> {
    let page = api.store().threads().list(space, source, limit, offset)?;
    let has_more = page.has_more();
    Ok(ThreadListResponse {
        threads: page.items.iter().map(ThreadSummary::from).collect(),
        pagination: Pagination {
            limit: page.limit as u64,
            offset: page.offset as u64,
            total: page.total as u64,
            has_more,
        },
    })
}

pub(super) fn search(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let q = &ctx.query;
    let space = q.str("space_id").unwrap_or(DEFAULT_SPACE);
    ok(&search_threads(api, q.str("query").unwrap_or(""), space, q.str("source"), q.limit())?)
}

/// `GET /threads/search` as a typed call: the threads whose messages match `query`, best first.
///
/// # Errors
/// As [`crate::store::Threads::search`].
pub(crate) fn search_threads(
    api: &Api,
    query: &str,
    space: &str,
    source: Option<&str>,
    limit: usize,
) -> Result<ThreadSearchResponse> {
    let hits = api.store().threads().search(query, space, source, limit)?;
    let threads: Vec<ThreadSearchHit> = hits
        .iter()
        .map(|h| ThreadSearchHit {
            summary: ThreadSummary::from(&h.thread),
            total_matches: h.matched_messages,
            matched_messages_count: h.matched_messages,
            context_matches: h.context_matches,
        })
        .collect();
    Ok(ThreadSearchResponse { total_found: threads.len() as u64, threads })
}

pub(super) fn delete(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let cascade = ctx.query.bool("cascade_delete_memories").unwrap_or(false);
    ok(&delete_thread(api, ctx.param("thread_id"), space_param(ctx), cascade)?)
}

/// `DELETE /threads/{thread_id}` as a typed call: the thread, its messages and, with `cascade`, the memories
/// extracted from it; `space` is the optional guard.
///
/// # Errors
/// As [`crate::store::Threads::delete`] (404 when missing).
pub(crate) fn delete_thread(api: &Api, id: &str, space: Option<&str>, cascade: bool) -> Result<ThreadDeleteResponse> {
    let r = api.store().threads().delete(id, space, cascade)?;
    Ok(ThreadDeleteResponse {
        success: true,
        thread_id: id.to_string(),
        deleted_messages: r.deleted_messages,
        deleted_memories: r.deleted_memories,
        message: format!("thread '{id}' deleted"),
    })
}

pub(super) fn merge_metadata(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: MergeMetadataRequest = ctx.json()?;
    let space = req.space_id.clone();
    let t = api.store().threads().merge_metadata(
        ctx.param("thread_id"),
        space.as_deref().or_else(|| space_param(ctx)),
        req.metadata,
        req.only_missing,
    )?;
    ok(&ThreadUpdateResponse { success: true, thread: t })
}

pub(super) fn favorite(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let fav = ctx.query.bool("is_favorite").unwrap_or(false);
    let t = api.store().threads().set_favorite(ctx.param("thread_id"), space_param(ctx), fav)?;
    let what = if fav { "marked as favorite" } else { "no longer a favorite" };
    ok(&serde_json::json!({"message": format!("thread '{}' {what}", t.thread_id), "success": true}))
}

pub(super) fn favorites(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let limit = ctx.query.limit();
    ok(&api.store().threads().favorites(limit)?)
}

/// Messages of a markdown transcript: blocks starting with `User:`, `Assistant:`, `System:` (optionally bold),
/// or `## User`-style headings; text before the first marker, or a transcript without markers, is one user
/// message.
fn parse_markdown(md: &str) -> Vec<NewMessage> {
    let marker = |line: &str| -> Option<(String, String)> {
        let l = line.trim_start_matches('#').trim().trim_start_matches("**");
        for role in ["user", "assistant", "system", "tool"] {
            // `get` rather than indexing: the line may have a multi-byte character where the role would end.
            if let Some(rest) =
                l.get(..role.len()).filter(|p| p.eq_ignore_ascii_case(role)).and_then(|_| l.get(role.len()..))
            {
                let rest = rest.trim_start_matches("**").trim_start();
                let heading = line.trim_start().starts_with('#') && rest.is_empty();
                if let Some(r) = rest.strip_prefix(':') {
                    return Some((role.into(), r.trim_start_matches("**").trim().to_string()));
                }
                if heading {
                    return Some((role.into(), String::new()));
                }
            }
        }
        None
    };
    let mut out: Vec<NewMessage> = Vec::new();
    for line in md.lines() {
        match marker(line) {
            Some((role, first)) => out.push(NewMessage { role, content: first, ..Default::default() }),
            None => match out.last_mut() {
                Some(m) => {
                    if !m.content.is_empty() {
                        m.content.push('\n');
                    }
                    m.content.push_str(line);
                }
                None if !line.trim().is_empty() => {
                    out.push(NewMessage { role: "user".into(), content: line.to_string(), ..Default::default() })
                }
                None => {}
            },
        }
    }
    for m in &mut out {
        m.content = m.content.trim().to_string();
    }
    out
}

fn import_one(api: &Api, t: ImportThread) -> ImportResult {
    let space = t
        .space_id
        .clone()
        .or_else(|| t.metadata.as_ref().and_then(|m| m.0.get("space_id")).and_then(|v| v.as_str()).map(str::to_string));
    let messages: Vec<NewMessage> = match (t.messages, &t.markdown_content) {
        (Some(ms), _) => ms.into_iter().map(NewMessage::from).collect(),
        (None, Some(md)) => parse_markdown(md),
        (None, None) => Vec::new(),
    };
    let title = t.title.clone().unwrap_or_default();
    let fail = |id: String, e: &Error| ImportResult {
        success: false,
        thread_id: id,
        title: title.clone(),
        message_count: 0,
        messages_added: 0,
        error: Some(e.message().to_string()),
        error_code: Some(e.code().to_string()),
        append_mode: String::new(),
        action: "failed".into(),
    };
    let existing = t.thread_id.as_deref().and_then(|id| api.store().threads().get(id, space.as_deref()).ok());
    match (existing, t.thread_id.clone()) {
        (Some(found), Some(id)) => {
            let r = api.store().threads().append(
                &id,
                Some(&found.space_id),
                AppendMessages {
                    messages,
                    deduplicate: true,
                    idempotency_key: t.idempotency_key,
                    expected_message_count: t.expected_message_count,
                },
            );
            match r {
                Ok(r) => ImportResult {
                    success: true,
                    thread_id: id,
                    title: r.thread.title.clone(),
                    message_count: r.thread.message_count,
                    messages_added: r.added.len() as u64,
                    error: None,
                    error_code: None,
                    append_mode: if r.checkpointed { "checkpointed" } else { "append" }.into(),
                    action: "appended".into(),
                },
                Err(e) => fail(id, &e),
            }
        }
        (_, id) => {
            if t.expected_message_count.is_some_and(|n| n > 0) {
                let id = id.unwrap_or_default();
                let e = Error::not_found(ErrorCode::ThreadNotFound, format!("thread not found: '{id}'"));
                return fail(id, &e);
            }
            let r = api.store().threads().create(NewThread {
                thread_id: id.clone(),
                title: t.title,
                messages,
                source: t.source,
                tool_version: t.tool_version,
                metadata: t.metadata,
                space_id: space,
                deduplicate: true,
                idempotency_key: t.idempotency_key,
                ..Default::default()
            });
            match r {
                Ok(c) => ImportResult {
                    success: true,
                    thread_id: c.thread.thread_id.clone(),
                    title: c.thread.title.clone(),
                    message_count: c.thread.message_count,
                    messages_added: c.messages.len() as u64,
                    error: None,
                    error_code: None,
                    append_mode: if t.expected_message_count.is_some() { "checkpointed" } else { "create" }.into(),
                    action: "created".into(),
                },
                Err(e) => fail(id.unwrap_or_default(), &e),
            }
        }
    }
}

pub(super) fn import(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: ImportRequest = ctx.json()?;
    let batch = match req.threads {
        Some(ts) if ts.is_empty() => {
            return Err(Error::invalid_field(
                &["body", "threads"],
                "too_short",
                "threads must hold at least one thread",
                serde_json::json!([]),
            ));
        }
        Some(ts) => ts,
        None => {
            if req.single.messages.is_none() && req.single.markdown_content.is_none() {
                return Err(Error::invalid_field(
                    &["body", "messages"],
                    "missing",
                    "Field required: messages, markdown_content or threads",
                    serde_json::Value::Null,
                ));
            }
            vec![req.single]
        }
    };
    let results: Vec<ImportResult> = batch.into_iter().map(|t| import_one(api, t)).collect();
    let failed = results.iter().filter(|r| !r.success).count();
    ok(&ThreadImportResponse {
        success: failed == 0,
        imported_count: (results.len() - failed) as u64,
        failed_count: failed as u64,
        results,
    })
}

/// `POST /threads/import`: one result per thread, in the order sent.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ThreadImportResponse {
    /// True when every thread was imported.
    pub success: bool,
    /// Threads imported.
    pub imported_count: u64,
    /// Threads refused.
    pub failed_count: u64,
    /// Per thread.
    pub results: Vec<ImportResult>,
}

mod distill;
pub use distill::{DistillRequest, DistillResponse, TriageRequest, TriageResponse};
pub(super) use distill::{distill, triage};

#[cfg(test)]
mod tests;
