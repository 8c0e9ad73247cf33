//! The OpenAPI 3.1 document: paths from the route table (so every route has an operation, with the same
//! parameter bounds that validation enforces), component schemas from the DTOs' `utoipa::ToSchema` derives.

use serde_json::{Map, Value, json};
use utoipa::openapi::{RefOr, schema::Schema};
use utoipa::{PartialSchema, ToSchema};

use super::dto::*;
use super::query::{ParamKind, ParamSpec};
use super::routes::{ROUTES, Shape};
use crate::error::FieldError;
use crate::model::{Label, Memory, Space};

fn add<T: ToSchema>(out: &mut Vec<(String, RefOr<Schema>)>) {
    out.push((T::name().into_owned(), <T as PartialSchema>::schema()));
    T::schemas(out);
}

fn schemas() -> Map<String, Value> {
    let mut v = Vec::new();
    add::<CreateMemoryRequest>(&mut v);
    add::<UpdateMemoryRequest>(&mut v);
    add::<CreateMemoryResponse>(&mut v);
    add::<MemoryOut>(&mut v);
    add::<Memory>(&mut v);
    add::<ListMemoriesResponse>(&mut v);
    add::<DeleteMemoryResponse>(&mut v);
    add::<SearchRequest>(&mut v);
    add::<MemorySearchResult>(&mut v);
    add::<SearchGetResponse>(&mut v);
    add::<LabelsResponse>(&mut v);
    add::<Label>(&mut v);
    add::<MessageResponse>(&mut v);
    add::<CreateSpaceRequest>(&mut v);
    add::<SpacesResponse>(&mut v);
    add::<Space>(&mut v);
    add::<HealthResponse>(&mut v);
    add::<super::embeddings::EmbeddingsRequest>(&mut v);
    add::<super::threads::CreateThreadRequest>(&mut v);
    add::<super::threads::CreateThreadResponse>(&mut v);
    add::<super::threads::AppendRequest>(&mut v);
    add::<super::threads::AppendResponse>(&mut v);
    add::<super::threads::ImportRequest>(&mut v);
    add::<super::threads::MergeMetadataRequest>(&mut v);
    add::<crate::model::Thread>(&mut v);
    add::<crate::model::Entity>(&mut v);
    add::<super::lifecycle::MemoryStateRequest>(&mut v);
    add::<super::relations::RelationRequest>(&mut v);
    add::<super::labels::UpdateLabelRequest>(&mut v);
    add::<super::spaces::UpdateSpaceRequest>(&mut v);
    add::<super::spaces::BulkMoveRequest>(&mut v);
    add::<crate::store::MoveReport>(&mut v);
    add::<super::labels::LabelPlanRequest>(&mut v);
    add::<crate::store::LabelPlan>(&mut v);
    add::<crate::store::LabelHealth>(&mut v);
    add::<crate::store::ConsolidationReport>(&mut v);
    add::<crate::store::ConsolidationPreview>(&mut v);
    add::<crate::store::RelationView>(&mut v);
    add::<super::working::WorkingMemoryRequest>(&mut v);
    add::<super::threads::DistillRequest>(&mut v);
    add::<super::threads::TriageRequest>(&mut v);
    add::<super::embeddings::EmbeddingsResponse>(&mut v);
    add::<super::sources::IngestRequest>(&mut v);
    add::<crate::model::Source>(&mut v);
    add::<super::data::ExportRequest>(&mut v);
    add::<super::data::ImportRequest>(&mut v);
    add::<super::fs::FsWriteRequest>(&mut v);
    add::<super::fs::FsDeleteRequest>(&mut v);
    add::<CapabilitiesResponse>(&mut v);
    add::<ErrorBody>(&mut v);
    add::<ValidationErrorBody>(&mut v);
    add::<FieldError>(&mut v);
    let mut out = Map::new();
    for (name, schema) in v {
        out.insert(name, serde_json::to_value(schema).unwrap_or_default());
    }
    out
}

fn reference(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn param_schema(p: &ParamSpec) -> Value {
    match p.kind {
        ParamKind::Int { min, max, default } => {
            let mut s = json!({"type": "integer", "minimum": min});
            if let Some(m) = max {
                s["maximum"] = m.into();
            }
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
    for r in ROUTES {
        let mut params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        for p in r.query {
            let mut q = json!({"name": p.name, "in": "query", "required": p.required, "description": p.description, "schema": param_schema(p)});
            if matches!(p.kind, ParamKind::List) {
                q["style"] = "form".into();
                q["explode"] = true.into();
            }
            params.push(q);
        }
        let ok_schema = match r.response {
            Shape::Ref(n) => reference(n),
            Shape::ArrayOf(n) => json!({"type": "array", "items": reference(n)}),
            Shape::Object => json!({"type": "object"}),
        };
        let mut responses = json!({
            "200": {"description": "OK", "content": {"application/json": {"schema": ok_schema}}},
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
            op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": reference(body)}}});
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
