//! The OpenAPI 3.1 document: paths from the route table (so every route has an operation, with the same
//! parameter bounds that validation enforces), component schemas from the DTOs' `utoipa::ToSchema` derives, gathered from the route table's
//! rows ([`super::route::Dto`]).

use serde_json::{Map, Value, json};

use super::dto::{ErrorBody, ValidationErrorBody};
use super::query::{ParamKind, ParamSpec};
use super::route::{Dto, Shape};
use super::routes::ROUTES;
use crate::error::FieldError;
use crate::model::{TemporalContext, UnitType};

/// The component schemas: every DTO the route table names (request bodies and responses, with the schemas they
/// refer to), and the error bodies every route may send.
fn schemas() -> Map<String, Value> {
    let mut v = Vec::new();
    for r in ROUTES.iter() {
        if let Some(body) = r.body {
            body.add_to(&mut v);
        }
        match r.response {
            Shape::Ref(d) | Shape::ArrayOf(d) => d.add_to(&mut v),
            Shape::ArrayOfAny(dtos) => dtos.iter().for_each(|d| d.add_to(&mut v)),
            Shape::Object | Shape::Zip | Shape::Markdown | Shape::Metrics => {}
        }
    }
    for d in [Dto::of::<ErrorBody>(), Dto::of::<ValidationErrorBody>(), Dto::of::<FieldError>()] {
        d.add_to(&mut v);
    }
    let mut out = Map::new();
    for (name, schema) in v {
        out.insert(name, serde_json::to_value(schema).unwrap_or_default());
    }
    for (schema, prop, rules) in field_rules() {
        if let Some(p) = out.get_mut(schema).and_then(|f| f.get_mut("properties")).and_then(|p| p.get_mut(prop)) {
            merge(p, rules);
        }
    }
    // `loc` mixes keys and array indices; `input` is whatever was sent.
    if let Some(props) = out.get_mut("FieldError").and_then(|f| f.get_mut("properties")) {
        props["loc"] = json!({"type": "array", "items": {"type": ["string", "integer"]}});
        props["input"] = json!({"description": "The offending input (null when missing)."});
    }
    out
}

/// A path outside the tree API's forms is refused before it is looked up: absolute, no control characters
/// (Unicode category Cc), at most 4,096 bytes (1,024 characters always fit).
const FS_PATH: &str = r"^/[^\u0000-\u001f\u007f-\u009f]*$";
/// A date bound: `YYYY`, `YYYY-MM`, `YYYY-MM-DD` or an RFC 3339 timestamp.
fn loose_date() -> Value {
    json!({"anyOf": [
        {"format": "date"},
        {"format": "date-time"},
        {"pattern": "^[0-9]{4}(-(0[1-9]|1[0-2]))?$"},
    ]})
}

/// What the handlers check of a string query parameter beyond its type, as JSON Schema keywords (merged into
/// the parameter's schema), by operation and name. These are the rules of the handlers' 422s, written where
/// clients and API fuzzers (schemathesis in CI) read them.
fn param_refinement(op: &str, name: &str) -> Option<Value> {
    let non_blank = json!({"minLength": 1, "pattern": r"\S"});
    Some(match (op, name) {
        (_, "q" | "query") if op != "fs_grep" => non_blank,
        ("fs_grep", "q") => json!({"minLength": 1, "maxLength": 250}),
        (_, "path") if op.starts_with("fs_") => json!({"pattern": FS_PATH, "maxLength": 1024}),
        (_, "cursor") if op.starts_with("fs_") => json!({"pattern": "^[0-9]{1,15}$"}),
        (_, "color") => json!({"pattern": "^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"}),
        (_, "event_date_from" | "event_date_to" | "recorded_date_from" | "recorded_date_to" | "since" | "until") => {
            loose_date()
        }
        (_, "time_range") => {
            let mut any = loose_date();
            if let Some(a) = any["anyOf"].as_array_mut() {
                a.push(json!({"enum": ["today", "week", "month", "year"]}));
            }
            any
        }
        ("fs_find", "type") => {
            json!({"enum": ["memory", "memories", "thread", "threads", "source", "sources", "entity", "entities", ""]})
        }
        (_, "unit_type") if op.starts_with("fs_") => {
            // An empty value means no filter there.
            let mut units: Vec<&str> = UnitType::ALL.iter().map(|u| u.as_str()).collect();
            units.push("");
            json!({ "enum": units })
        }
        ("read_working_memory", "date") => json!({"format": "date"}),
        ("create_label", "name") => json!({"maxLength": 100, "pattern": NAME}),
        ("list_sources", "metadata") => json!({"items": {"type": "string", "pattern": "^[^=]+="}}),
        ("search_memories_get", "metadata") => json!({"maxItems": 0}),
        _ => return None,
    })
}

/// A name the handlers trim: at least one non-blank character, no control characters (Unicode Cc).
const NAME: &str = r"^[^\u0000-\u001f\u007f-\u009f]*[^\s\u0000-\u001f\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$";
/// An id: as [`NAME`], and no `/`.
const ID: &str = r"^[^/\u0000-\u001f\u007f-\u009f]*[^/\s\u0000-\u001f\u007f-\u009f][^/\u0000-\u001f\u007f-\u009f]*$";

/// What the handlers check of DTO fields beyond their Rust types (enums kept as strings for the spec's error
/// messages, lengths, shapes), merged into the component schemas. A nullable field keeps `null` (patterns and
/// lengths constrain strings only; enums list `null`).
fn field_rules() -> Vec<(&'static str, &'static str, Value)> {
    let one_of = |values: &[&str]| {
        let mut v: Vec<Value> = values.iter().map(|s| json!(s)).collect();
        v.push(Value::Null);
        json!({"enum": v})
    };
    let units: Vec<&str> = UnitType::ALL.iter().map(|u| u.as_str()).collect();
    let temporal: Vec<&str> = TemporalContext::ALL.iter().map(|t| t.as_str()).collect();
    let non_blank = json!({"minLength": 1, "pattern": r"\S"});
    let mut out = Vec::new();
    for schema in ["CreateMemoryRequest", "UpdateMemoryRequest", "SearchRequest"] {
        out.push((schema, "unit_type", one_of(&units)));
        out.push((schema, "temporal_context", one_of(&temporal)));
    }
    for schema in ["CreateMemoryRequest", "UpdateMemoryRequest"] {
        out.push((schema, "content", non_blank.clone()));
        out.push((schema, "event_start", loose_date()));
        out.push((schema, "event_end", loose_date()));
        out.push((schema, "importance", json!({"minimum": 0, "maximum": 1})));
        out.push((schema, "confidence", json!({"minimum": 0, "maximum": 1})));
    }
    out.push(("CreateMemoryRequest", "id", json!({"maxLength": 200, "pattern": ID})));
    for schema in ["CreateMemoryRequest", "UpdateMemoryRequest", "IngestRequest"] {
        out.push((schema, "labels", json!({"items": {"type": "string", "maxLength": 100, "pattern": NAME}})));
    }
    for prop in ["event_date_from", "event_date_to", "recorded_date_from", "recorded_date_to"] {
        out.push(("SearchRequest", prop, loose_date()));
    }
    out.push(("SearchRequest", "query", non_blank.clone()));
    out.push(("SearchRequest", "limit", json!({"minimum": 1, "maximum": super::search::MAX_HITS})));
    out.push(("SearchRequest", "retrieval", one_of(&["hybrid", "lexical", "vector"])));
    out.push(("SearchRequest", "result_format", one_of(&["full", "compact"])));
    // Whole float32 values: 4 bytes each, 16 base64 characters per 3 floats.
    out.push((
        "SearchRequest",
        "query_embedding_base64",
        json!({"pattern": "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"}),
    ));
    out.push(("SearchRequest", "importance_min", json!({"minimum": 0, "maximum": 1})));
    out.push(("SearchRequest", "context_window", json!({"minimum": 1, "maximum": 10})));
    out.push(("BatchCreateRequest", "memories", json!({"minItems": 1, "maxItems": 1000})));
    out.push(("RelationRequest", "status", one_of(&["active", "suggested", "dismissed", "deleted"])));
    out.push(("RelationRequest", "relation_type", json!({"maxLength": 64, "pattern": r"\S"})));
    out.push(("RelationRequest", "strength", json!({"minimum": 0, "maximum": 1})));
    out.push(("RelationRequest", "confidence", json!({"minimum": 0, "maximum": 1})));
    out.push(("ImportRequest", "mode", one_of(&["merge", "skip", "overwrite"])));
    out.push(("MoveSelectionRequest", "mode", json!({"enum": ["ids", "space"]})));
    out.push(("EmbeddingsRequest", "encoding_format", one_of(&["float", "base64"])));
    out.push((
        "EmbeddingsRequest",
        "input",
        json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "type": null}),
    ));
    out.push(("CreateSpaceRequest", "name", json!({"maxLength": 100, "pattern": r"[^\W_]"})));
    out.push(("UpdateSpaceRequest", "name", json!({"maxLength": 100, "pattern": r"\S"})));
    for schema in ["CreateSpaceRequest", "UpdateSpaceRequest"] {
        out.push((schema, "defaultRetrievalMode", json!({"pattern": "^[a-z_-]{1,32}$"})));
    }
    out.push(("UpdateLabelRequest", "name", json!({"maxLength": 100, "pattern": NAME})));
    out.push(("UpdateLabelRequest", "color", json!({"pattern": "^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"})));
    out.push(("UpdateLabelRequest", "description", json!({"maxLength": 1000})));
    out.push(("CreateThreadRequest", "thread_id", json!({"maxLength": 200, "pattern": ID})));
    out.push(("CreateThreadRequest", "import_date", json!({"format": "date-time"})));
    out.push(("IngestRequest", "file_name", json!({"maxLength": 255, "pattern": NAME})));
    out.push((
        "ToolCallRequest",
        "name",
        json!({"enum": super::tools::TOOLS.iter().map(|t| t.name).collect::<Vec<_>>()}),
    ));
    out.push(("ToolCallRequest", "arguments", json!({"type": "object"})));
    out.push(("ReviewRequest", "action", json!({"enum": crate::store::REVIEW_ACTIONS})));
    out.push(("ReviewRequest", "phase", json!({"enum": ["preview", "apply"]})));
    for schema in ["FsWriteRequest", "FsDeleteRequest"] {
        out.push((schema, "path", json!({"maxLength": 1024, "pattern": FS_PATH})));
    }
    for prop in ["thread_content", "thread_id"] {
        out.push(("DistillRequest", prop, non_blank.clone()));
    }
    out
}

/// Path parameters that are not strings.
fn path_param_schema(name: &str) -> Value {
    match name {
        "community_id" => json!({"type": "integer", "minimum": 0}),
        _ => json!({"type": "string"}),
    }
}

/// Rules of a request body that its DTO cannot state (one DTO serves several operations, or fields are
/// required together): merged with the DTO's schema through `allOf`.
fn body_refinement(op: &str) -> Option<Value> {
    let required = |fields: &[&str]| json!({"required": fields});
    Some(match op {
        "create_memory_relation" => required(&["target_memory_id", "relation_type"]),
        "supersede_memory" => required(&["newer_memory_id"]),
        "data_import" => required(&["import_path"]),
        "preview_label_merge" | "apply_label_merge" => required(&["target_label_id"]),
        "ingest_source_path" => required(&["path"]),
        "search_memories" => json!({"not": {"required": ["query_embedding", "query_embedding_base64"]}}),
        "ingest_source_file" => json!({"required": ["file_name"], "oneOf": [
            {"required": ["content"], "not": {"required": ["content_base64"]}},
            {"required": ["content_base64"], "not": {"required": ["content"]}},
        ]}),
        "distill_memories" => json!({"anyOf": [{"required": ["thread_content"]}, {"required": ["thread_id"]}]}),
        "import_threads" => json!({"anyOf": [
            {"required": ["messages"]}, {"required": ["markdown_content"]}, {"required": ["threads"]},
        ]}),
        _ => return None,
    })
}

/// Adds the keywords of `extra` to the schema `into`; a keyword set to `null` is removed.
fn merge(into: &mut Value, extra: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), extra) {
        for (k, v) in b {
            if v.is_null() {
                a.remove(&k);
            } else {
                a.insert(k, v);
            }
        }
    }
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn param_schema(p: &ParamSpec) -> Value {
    match p.kind {
        ParamKind::Int { min, max, default } => {
            // Query integers are 64-bit.
            let mut s = json!({"type": "integer", "minimum": min, "maximum": max.unwrap_or(i64::MAX)});
            if let Some(d) = default {
                s["default"] = d.into();
            }
            s
        }
        ParamKind::Num { min, max, default } => {
            let mut s = json!({"type": "number", "minimum": min, "maximum": max});
            if let Some(d) = default {
                s["default"] = d.into();
            }
            s
        }
        ParamKind::Bool { default } => {
            let mut s = json!({"type": "boolean"});
            if let Some(d) = default {
                s["default"] = d.into();
            }
            s
        }
        ParamKind::Str { default, choices } => {
            let mut s = json!({"type": "string", "maxLength": 4096});
            if !choices.is_empty() {
                s["enum"] = choices.to_vec().into();
            }
            if let Some(d) = default {
                s["default"] = d.into();
            }
            s
        }
        ParamKind::List => json!({"type": "array", "items": {"type": "string"}}),
    }
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for r in ROUTES.iter() {
        let mut params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": path_param_schema(name)}))
            .collect();
        for p in r.query {
            let mut schema = param_schema(p);
            if let Some(extra) = param_refinement(r.operation_id, p.name) {
                merge(&mut schema, extra);
            }
            let mut q = json!({"name": p.name, "in": "query", "required": p.required, "description": p.description, "schema": schema});
            if matches!(p.kind, ParamKind::List) {
                q["style"] = "form".into();
                q["explode"] = true.into();
            }
            params.push(q);
        }
        let ok = match r.response {
            Shape::Ref(d) => json!({"application/json": {"schema": reference(&d.name())}}),
            Shape::ArrayOf(d) => {
                json!({"application/json": {"schema": {"type": "array", "items": reference(&d.name())}}})
            }
            Shape::ArrayOfAny(dtos) => json!({"application/json": {"schema": {"type": "array", "items": {
                "anyOf": dtos.iter().map(|d| reference(&d.name())).collect::<Vec<_>>()
            }}}}),
            Shape::Object => json!({"application/json": {"schema": {"type": "object"}}}),
            Shape::Zip => json!({"application/zip": {"schema": {"type": "string", "format": "binary"}}}),
            Shape::Markdown => json!({"text/markdown": {"schema": {"type": "string"}}}),
            Shape::Metrics => json!({"application/openmetrics-text": {"schema": {"type": "string"}}}),
        };
        // Every error of the error table (docs/api.md) has the same body; 422 has the validation shape.
        let mut responses = json!({
            "200": {"description": "OK", "content": ok},
            "default": {"description": "Error (see the error table)", "content": {"application/json": {"schema": reference("ErrorBody")}}},
            "414": {"description": "URI over 65,534 bytes: refused by the HTTP layer, without a body"},
        });
        if !r.public {
            responses["401"] = json!({"description": "Missing or wrong API key", "content": {"application/json": {"schema": reference("ErrorBody")}}});
        }
        if !r.query.is_empty() || r.body.is_some() {
            responses["422"] = json!({"description": "Validation error", "content": {"application/json": {"schema": reference("ValidationErrorBody")}}});
        }
        if r.path.contains('{') {
            responses["404"] = json!({"description": "Not found", "content": {"application/json": {"schema": reference("ErrorBody")}}});
        }
        let mut op = json!({
            "operationId": r.operation_id,
            "summary": r.summary,
            "parameters": params,
            "responses": responses,
        });
        if let Some(body) = r.body {
            let schema = match body_refinement(r.operation_id) {
                Some(extra) => json!({"allOf": [reference(&body.name()), extra]}),
                None => reference(&body.name()),
            };
            op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": schema}}});
        }
        if r.public {
            op["security"] = json!([]);
        }
        let item = paths.entry(r.path.to_string()).or_insert_with(|| json!({}));
        item[r.method.to_ascii_lowercase()] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Engram",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Local knowledge-memory service, compatible with the Nowledge Mem interface 0.9.15.",
        },
        "servers": [{"url": "http://127.0.0.1:14242"}],
        "security": [{"bearer": []}, {"apiKeyHeader": []}],
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-NMEM-API-Key"},
            },
        },
    })
}
