//! `POST /v1/embeddings`: the OpenAI embeddings request and response shapes (interface spec, "Embeddings"),
//! served by the store's embedder, plus the spec's `input_type`.
//!
//! Choices where the spec is silent (docs/api.md): `model` may be omitted; when given it must name the served
//! model (its id, with or without an organisation prefix such as `sentence-transformers/`, its recorded name, or `default`), otherwise 422 lists the served id. `dimensions` is accepted
//! only when equal to the model's dimension (the models served are not trained for truncation). `input_type`
//! defaults to `document`. `usage` counts the tokens the model reads, by its own tokenizer, special tokens
//! included (the built-in static model counts its WordPiece tokens, the hashing embedder words). Limits:
//! 1..=2,048 inputs, each non-blank, at most 32,768 bytes and at most the model's token window; 300,000 tokens
//! per request.

use base64::Engine;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::embed::{Embedder, InputType};
use crate::error::ErrorCode;
use crate::error::{Error, FieldError, Result};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[route!(
    "POST",
    "/v1/embeddings",
    "create_embeddings",
    "Embed texts with the served model (OpenAI embeddings request and response shapes)",
    &[],
    Some(Dto::of::<EmbeddingsRequest>()),
    Shape::Ref(Dto::of::<EmbeddingsResponse>()),
    false,
    create
)];

/// Most inputs per request (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;
/// Longest input in bytes.
pub const MAX_INPUT_BYTES: usize = 32_768;
/// Most tokens per request, all inputs together (OpenAI's limit).
pub const MAX_REQUEST_TOKENS: usize = 300_000;

/// Body of `POST /v1/embeddings`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct EmbeddingsRequest {
    /// A string or an array of 1..=2,048 strings. Token-id arrays are not accepted.
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    /// The served model's id (see `/health` `embedding.model_id`); optional.
    #[serde(default)]
    pub model: Option<String>,
    /// `float` (default) or `base64` (little-endian f32).
    #[serde(default)]
    pub encoding_format: Option<String>,
    /// Must equal the model's dimension when given.
    #[serde(default)]
    pub dimensions: Option<u64>,
    /// `query` or `document` (default), for models that embed them differently.
    #[serde(default)]
    pub input_type: Option<String>,
    /// Ignored.
    #[serde(default)]
    pub user: Option<String>,
}

/// One vector.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EmbeddingData {
    /// `embedding`.
    pub object: &'static str,
    /// Position of the input.
    pub index: usize,
    /// Array of floats, or a base64 string of little-endian f32 when `encoding_format` is `base64`.
    pub embedding: Vector,
}

/// A vector as floats (each printed as the shortest decimal that reads back as the same f32) or base64.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum Vector {
    /// `encoding_format: float`.
    Floats(Vec<f32>),
    /// `encoding_format: base64`: little-endian f32 bytes.
    Base64(String),
}

/// Token counts.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EmbeddingUsage {
    /// Tokens read by the model.
    pub prompt_tokens: usize,
    /// Same as `prompt_tokens`.
    pub total_tokens: usize,
}

/// Response of `POST /v1/embeddings`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EmbeddingsResponse {
    /// `list`.
    pub object: &'static str,
    /// One entry per input, in input order.
    pub data: Vec<EmbeddingData>,
    /// The served model's id.
    pub model: String,
    /// Token counts.
    pub usage: EmbeddingUsage,
}

fn field(loc: &[&str], kind: &str, msg: impl Into<String>, input: serde_json::Value) -> FieldError {
    FieldError::new(loc, kind, msg, input)
}

/// The handler.
pub(super) fn create(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let req: EmbeddingsRequest = ctx.json()?;
    let emb = api.store().config().embedder.clone();
    if emb.external() {
        return Err(crate::error::Error::new(
            crate::error::ErrorKind::Unavailable,
            format!("this store takes caller-supplied vectors ({}); it has no model to embed with", emb.name()),
        )
        .with_code(ErrorCode::EmbeddingModelUnavailable));
    }
    let mut errs = Vec::new();
    let texts = input_texts(&req, &mut errs);
    let (base64, input_type) = options(&req, &*emb, &mut errs);
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let total = check_tokens(&req, &*emb, &refs, input_type)?;
    let vectors = emb.embed(&refs, input_type)?;
    let data = vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| EmbeddingData {
            object: "embedding",
            index,
            embedding: if base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Vector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                Vector::Floats(v)
            },
        })
        .collect();
    Ok(ApiResponse::json(
        200,
        &EmbeddingsResponse {
            object: "list",
            data,
            model: emb.model_id().to_string(),
            usage: EmbeddingUsage { prompt_tokens: total, total_tokens: total },
        },
    ))
}

/// Where input `i` is reported: `["body", "input", i]` for a list, `["body", "input"]` for one string.
fn input_loc(req: &EmbeddingsRequest, i: usize) -> Vec<String> {
    if matches!(req.input, serde_json::Value::Array(_)) {
        vec!["body".into(), "input".into(), i.to_string()]
    } else {
        vec!["body".into(), "input".into()]
    }
}

/// The input texts (a string or a list of 1..=MAX_INPUTS strings, none blank, each at most MAX_INPUT_BYTES).
fn input_texts(req: &EmbeddingsRequest, errs: &mut Vec<FieldError>) -> Vec<String> {
    let texts: Vec<String> = match &req.input {
        serde_json::Value::String(s) => vec![s.clone()],
        serde_json::Value::Array(items) => {
            if items.is_empty() {
                errs.push(field(
                    &["body", "input"],
                    "too_short",
                    "input must hold at least one string",
                    req.input.clone(),
                ));
            } else if items.len() > MAX_INPUTS {
                errs.push(
                    field(
                        &["body", "input"],
                        "too_long",
                        format!("at most {MAX_INPUTS} inputs per request"),
                        items.len().into(),
                    )
                    .with_ctx(serde_json::json!({"max_length": MAX_INPUTS})),
                );
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                match it {
                    serde_json::Value::String(s) => out.push(s.clone()),
                    other => errs.push(field(
                        &["body", "input", &i.to_string()],
                        "string_type",
                        "Input should be a valid string (token-id input is not supported: send text)",
                        other.clone(),
                    )),
                }
            }
            out
        }
        other => {
            errs.push(field(
                &["body", "input"],
                "string_type",
                "input must be a string or an array of strings",
                other.clone(),
            ));
            Vec::new()
        }
    };
    for (i, t) in texts.iter().enumerate() {
        let loc = input_loc(req, i);
        let loc: Vec<&str> = loc.iter().map(String::as_str).collect();
        if t.trim().is_empty() {
            errs.push(field(&loc, "string_too_short", "input must not be empty or blank", t.clone().into()));
        } else if t.len() > MAX_INPUT_BYTES {
            errs.push(
                field(&loc, "string_too_long", format!("input is at most {MAX_INPUT_BYTES} bytes"), t.len().into())
                    .with_ctx(serde_json::json!({"max_length": MAX_INPUT_BYTES})),
            );
        }
    }
    texts
}

/// `encoding_format` (float or base64), `input_type`, and the `model` and `dimensions` the request names,
/// which must be the served model's.
fn options(req: &EmbeddingsRequest, emb: &dyn Embedder, errs: &mut Vec<FieldError>) -> (bool, InputType) {
    let base64 = match req.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            errs.push(
                field(&["body", "encoding_format"], "enum", "Input should be 'float' or 'base64'", other.into())
                    .with_ctx(serde_json::json!({"expected": "'float' or 'base64'"})),
            );
            false
        }
    };
    let input_type = match req.input_type.as_deref() {
        None | Some("document") => InputType::Document,
        Some("query") => InputType::Query,
        Some(other) => {
            errs.push(
                field(&["body", "input_type"], "enum", "Input should be 'query' or 'document'", other.into())
                    .with_ctx(serde_json::json!({"expected": "'query' or 'document'"})),
            );
            InputType::Document
        }
    };
    if let Some(m) = &req.model {
        // `sentence-transformers/all-MiniLM-L6-v2` names the same model as `all-MiniLM-L6-v2`.
        let last = m.rsplit('/').next().unwrap_or(m);
        let served = [emb.model_id(), emb.name(), "default"];
        if !served.iter().any(|s| s.eq_ignore_ascii_case(m) || s.eq_ignore_ascii_case(last)) {
            errs.push(field(
                &["body", "model"],
                "model_not_found",
                format!("this server embeds with '{}' only", emb.model_id()),
                m.clone().into(),
            ));
        }
    }
    if let Some(d) = req.dimensions
        && d != emb.dim() as u64
    {
        errs.push(
            field(
                &["body", "dimensions"],
                "dimensions_unsupported",
                format!("'{}' returns {} dimensions; other sizes are not supported", emb.model_id(), emb.dim()),
                d.into(),
            )
            .with_ctx(serde_json::json!({"dimensions": emb.dim()})),
        );
    }
    (base64, input_type)
}

/// Token counts: each input within the model's window, the request within MAX_REQUEST_TOKENS. Returns the total.
fn check_tokens(req: &EmbeddingsRequest, emb: &dyn Embedder, refs: &[&str], input_type: InputType) -> Result<usize> {
    let mut errs = Vec::new();
    let counts = emb.count_tokens(refs, input_type)?;
    if let Some(max) = emb.max_input_tokens() {
        for (i, n) in counts.iter().enumerate() {
            if *n > max {
                let loc = input_loc(req, i);
                let loc: Vec<&str> = loc.iter().map(String::as_str).collect();
                errs.push(
                    field(
                        &loc,
                        "too_many_tokens",
                        format!("input has {n} tokens; '{}' reads at most {max}", emb.model_id()),
                        (*n).into(),
                    )
                    .with_ctx(serde_json::json!({"max_tokens": max})),
                );
            }
        }
    }
    let total: usize = counts.iter().sum();
    if total > MAX_REQUEST_TOKENS {
        errs.push(
            field(
                &["body", "input"],
                "too_many_tokens",
                format!("at most {MAX_REQUEST_TOKENS} tokens per request"),
                total.into(),
            )
            .with_ctx(serde_json::json!({"max_tokens": MAX_REQUEST_TOKENS})),
        );
    }
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    Ok(total)
}
