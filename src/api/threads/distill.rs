//! `POST /memories/distill/triage` and `POST /memories/distill`: whether a conversation holds something worth
//! keeping, and its distillation into memories (deterministic, no LLM; docs/api.md).

use super::*;

/// `POST /memories/distill/triage`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TriageResponse {
    /// Whether the conversation holds something worth distilling.
    pub should_distill: bool,
    /// Why.
    pub reason: String,
}

/// `POST /memories/distill`: the memories extracted from a conversation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DistillResponse {
    /// Always true.
    pub success: bool,
    /// The first memory; null when none.
    pub memory: Option<crate::api::dto::MemoryOut>,
    /// Every memory written or matched.
    pub memories: Vec<crate::api::dto::MemoryOut>,
    /// Entities the memories mention.
    pub extracted_entities: Vec<crate::model::Entity>,
    /// Always empty (labels are not assigned by distillation).
    pub assigned_labels: Vec<String>,
    /// Relations created.
    pub created_relationships: u64,
    /// Units merged into a stored near-duplicate.
    pub merged_duplicates: u64,
    /// What happened to the first memory: `created`, `updated`, `unchanged` or `none`.
    pub action: &'static str,
    /// Notes (nothing to distil).
    pub warnings: Vec<String>,
}

/// Body of `POST /memories/distill/triage`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct TriageRequest {
    /// The conversation as text (`Role: text` lines or free text).
    pub thread_content: String,
}

/// Body of `POST /memories/distill`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct DistillRequest {
    /// A stored thread to distil (its messages are used when `thread_content` is absent), or the id recorded as
    /// `source_thread_id` of the memories.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Title (informational).
    #[serde(default)]
    pub thread_title: Option<String>,
    /// The conversation as text (`User: ...` / `Assistant: ...` blocks, or free text as one user message).
    #[serde(default)]
    pub thread_content: Option<String>,
    /// Accepted; extraction is always the deterministic one.
    #[serde(default)]
    pub distillation_type: Option<String>,
    /// Accepted; extraction is always the deterministic one.
    #[serde(default)]
    pub extraction_level: Option<String>,
    /// Accepted and ignored (extraction is deterministic, so repeating it gives the same memories).
    #[serde(default)]
    pub cache_key: Option<String>,
    /// Only these message indices.
    #[serde(default)]
    pub selected_message_indices: Option<Vec<u64>>,
    /// Space (default `default`).
    #[serde(default)]
    pub space_id: Option<String>,
}

pub(in crate::api) fn triage(_: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: TriageRequest = ctx.json()?;
    let (should, reason) = crate::extract::triage(&req.thread_content);
    ok(&TriageResponse { should_distill: should, reason })
}

pub(in crate::api) fn distill(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: DistillRequest = ctx.json()?;
    let store = api.store();
    let space = req.space_id.clone().unwrap_or_else(|| DEFAULT_SPACE.to_string());
    let (messages, prefix, source) = match (&req.thread_content, &req.thread_id) {
        (Some(content), id) if !content.trim().is_empty() => {
            let now = crate::model::Timestamp::now();
            let msgs: Vec<Message> = parse_markdown(content)
                .into_iter()
                .enumerate()
                .map(|(i, m)| Message {
                    id: format!("distill#{i}"),
                    node_type: "message".into(),
                    created_at: now,
                    updated_at: now,
                    metadata: Metadata::default(),
                    content: m.content,
                    role: m.role,
                    order_index: i as u64,
                    timestamp: now,
                    token_count: 0,
                })
                .collect();
            let prefix = match id {
                Some(t) => format!("{t}-distill"),
                None => format!("distill-{:016x}", crate::embed::fnv1a(content.as_bytes())),
            };
            (msgs, prefix, id.clone())
        }
        (_, Some(id)) => {
            let (thread, msgs) = store.threads().all_messages(id, req.space_id.as_deref())?;
            let prefix = crate::store::thread_memory_prefix(&thread.space_id, &thread.thread_id);
            (msgs, prefix, Some(thread.thread_id))
        }
        _ => {
            return Err(Error::invalid_field(
                &["body", "thread_content"],
                "missing",
                "give thread_content, or thread_id of a stored thread",
                serde_json::Value::Null,
            ));
        }
    };
    let messages: Vec<Message> = match &req.selected_message_indices {
        Some(sel) => messages.into_iter().filter(|m| sel.contains(&m.order_index)).collect(),
        None => messages,
    };
    let ex = store.threads().extract_units(&space, &prefix, source.as_deref(), &messages)?;
    let mut warnings = Vec::new();
    if ex.memories.is_empty() {
        warnings.push("nothing to distil: only chatter, or every unit duplicates a stored memory".to_string());
    }
    let action = match ex.memories.first().map(|m| m.action) {
        Some(crate::store::WriteAction::Created) => "created",
        Some(crate::store::WriteAction::Updated) => "updated",
        Some(crate::store::WriteAction::Unchanged) => "unchanged",
        None => "none",
    };
    let created_relationships: u64 = ex.memories.iter().map(|m| m.created_relationships).sum();
    let mut entities: Vec<crate::model::Entity> = Vec::new();
    for e in ex.memories.iter().flat_map(|m| m.entities.iter()) {
        if !entities.iter().any(|x| x.id == e.id) {
            entities.push(e.clone());
        }
    }
    let memories: Vec<crate::api::dto::MemoryOut> =
        ex.memories.into_iter().map(|c| crate::api::dto::MemoryOut::from(c.view)).collect();
    ok(&DistillResponse {
        success: true,
        memory: memories.first().cloned(),
        memories,
        extracted_entities: entities,
        assigned_labels: vec![],
        created_relationships,
        merged_duplicates: ex.merged as u64,
        action,
        warnings,
    })
}
