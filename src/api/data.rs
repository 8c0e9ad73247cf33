//! Data export and import (client contract section 7): `POST /data/export`, `POST /data/import` (a background
//! job), `GET /data/import/status/{job_id}`.

use serde::Deserialize;
use utoipa::ToSchema;

use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::{Error, Result};
use crate::storage::crypt::ArchiveKey;
use crate::store::{ExportOptions, ImportMode, Include};

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[
    route!(
        "POST",
        "/data/export",
        "data_export",
        "Write a versioned, checksummed ZIP archive of the whole store (include_* switches)",
        &[],
        Some(Dto::of::<ExportRequest>()),
        Shape::Ref(Dto::of::<ExportResponse>()),
        false,
        export
    ),
    route!(
        "POST",
        "/data/import",
        "data_import",
        "Start importing an export archive in the background (mode merge, skip or overwrite); 409 while one runs",
        &[],
        Some(Dto::of::<ImportRequest>()),
        Shape::Ref(Dto::of::<ImportStarted>()),
        false,
        import
    ),
    route!(
        "GET",
        "/data/import/status/{job_id}",
        "data_import_status",
        "Progress of an import job: processing, then completed (counts) or error",
        &[],
        None,
        Shape::Ref(Dto::of::<ImportStatus>()),
        false,
        import_status
    ),
];

/// Body of `POST /data/export`. Every `include_*` switch defaults to true. No `Debug`: it may carry a passphrase.
#[derive(Clone, Default, Deserialize, ToSchema)]
pub struct ExportRequest {
    /// Target file on the server (inside the data directory or an `--allow-path` directory); default
    /// `<data_dir>/exports/engram-export-<time>.zip`.
    #[serde(default)]
    pub export_path: Option<String>,
    /// Deflate the entries (default true).
    #[serde(default)]
    pub compress: Option<bool>,
    /// Replace an existing file (default false: 409).
    #[serde(default)]
    pub overwrite: Option<bool>,
    /// Memories with their label and mention edges.
    #[serde(default)]
    pub include_memories: Option<bool>,
    /// Threads.
    #[serde(default)]
    pub include_threads: Option<bool>,
    /// Messages.
    #[serde(default)]
    pub include_messages: Option<bool>,
    /// Entities.
    #[serde(default)]
    pub include_entities: Option<bool>,
    /// Labels and label merges.
    #[serde(default)]
    pub include_labels: Option<bool>,
    /// Sources with text and chunks.
    #[serde(default)]
    pub include_sources: Option<bool>,
    /// Original bytes of sources.
    #[serde(default)]
    pub include_source_files: Option<bool>,
    /// Communities and PageRank.
    #[serde(default)]
    pub include_communities: Option<bool>,
    /// Relations and crystal provenance.
    #[serde(default)]
    pub include_edges: Option<bool>,
    /// Working memory.
    #[serde(default)]
    pub include_working_memory: Option<bool>,
    /// Accepted; Engram keeps no working-memory archive apart from the daily records.
    #[serde(default)]
    pub include_working_memory_archive: Option<bool>,
    /// Accepted; Engram has no skills.
    #[serde(default)]
    pub include_skills: Option<bool>,
    /// Accepted; Engram has no feed events.
    #[serde(default)]
    pub include_feed_events: Option<bool>,
    /// Engram extension: seal the archive in an age file (default false; needs `compress`). With
    /// `encrypt_passphrase` it opens with that passphrase (also with the `age` command), with
    /// `encrypt_recipients` with their identities, with neither with this store's own key (an encrypted store
    /// only). Either of those two alone implies `encrypt`.
    #[serde(default)]
    pub encrypt: Option<bool>,
    /// The passphrase an encrypted archive opens with (age's scrypt recipient).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub encrypt_passphrase: Option<String>,
    /// age X25519 recipients (`age1...`) whose identities open the archive.
    #[serde(default)]
    pub encrypt_recipients: Option<Vec<String>>,
}

/// Body of `POST /data/import`. No `Debug`: it may carry a passphrase.
#[derive(Clone, Default, Deserialize, ToSchema)]
pub struct ImportRequest {
    /// An archive written by `POST /data/export`, on the server, inside the allowed directories.
    #[serde(default)]
    pub import_path: Option<String>,
    /// `merge` (default: fill empty fields of stored records, union edges), `skip` (keep stored records) or
    /// `overwrite` (replace them).
    #[serde(default)]
    pub mode: Option<String>,
    /// Engram extension: the passphrase of an archive encrypted with one (`encrypt_passphrase` on export). An
    /// archive sealed to this store's key needs none. A wrong one is 403 `wrong_key` before any job starts.
    #[serde(default)]
    pub passphrase: Option<String>,
}

pub(super) fn export(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: ExportRequest =
        if ctx.body.iter().all(u8::is_ascii_whitespace) { ExportRequest::default() } else { ctx.json()? };
    let on = |v: Option<bool>| v.unwrap_or(true);
    let include = Include {
        memories: on(r.include_memories),
        threads: on(r.include_threads),
        messages: on(r.include_messages),
        entities: on(r.include_entities),
        labels: on(r.include_labels),
        sources: on(r.include_sources),
        source_files: on(r.include_source_files),
        communities: on(r.include_communities),
        edges: on(r.include_edges),
        working_memory: on(r.include_working_memory),
    };
    let encrypt = match (r.encrypt, r.encrypt_passphrase, r.encrypt_recipients) {
        (Some(false), None, None) | (None, None, None) => None,
        (Some(false), _, _) => {
            return Err(Error::invalid_field(
                &["body", "encrypt"],
                "value_error",
                "encrypt is false, but a passphrase or recipients were given",
                serde_json::Value::Bool(false),
            ));
        }
        (_, Some(_), Some(_)) => {
            return Err(Error::invalid_field(
                &["body", "encrypt_recipients"],
                "value_error",
                "give encrypt_passphrase or encrypt_recipients, not both (age files take one or the other)",
                serde_json::Value::Null,
            ));
        }
        (_, Some(p), None) => Some(ArchiveKey::Passphrase(p.into())),
        (_, None, Some(r)) => Some(ArchiveKey::Recipients(r)),
        (Some(true), None, None) => Some(ArchiveKey::Store),
    };
    let opts = ExportOptions {
        path: r.export_path.filter(|p| !p.trim().is_empty()).map(std::path::PathBuf::from),
        compress: r.compress.unwrap_or(true),
        overwrite: r.overwrite.unwrap_or(false),
        include,
        encrypt,
    };
    let rep = api.store().transfer().export(&opts)?;
    let message = format!("exported to {}", rep.export_path);
    Ok(ApiResponse::json(200, &ExportResponse { report: rep, success: true, message }))
}

pub(super) fn import(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: ImportRequest = ctx.json()?;
    let Some(path) = r.import_path.filter(|p| !p.trim().is_empty()) else {
        return Err(Error::invalid_field(
            &["body", "import_path"],
            "missing",
            "Field required",
            serde_json::Value::Null,
        ));
    };
    let mode = match r.mode.as_deref() {
        None | Some("") => ImportMode::Merge,
        Some(m) => ImportMode::parse(m).ok_or_else(|| {
            Error::invalid_field(
                &["body", "mode"],
                "enum",
                "Input should be 'merge', 'skip' or 'overwrite'",
                serde_json::Value::String(m.to_string()),
            )
        })?,
    };
    let passphrase = r.passphrase.map(secrecy::SecretString::from);
    let job = crate::store::Transfer::start_import(api.store_arc(), std::path::Path::new(&path), mode, passphrase)?;
    Ok(ApiResponse::json(
        200,
        &ImportStarted {
            job_id: job.job_id,
            status: job.status,
            success: true,
            message: "import started; poll GET /data/import/status/{job_id}",
        },
    ))
}

pub(super) fn import_status(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let j = api.store().transfer().job(ctx.param("job_id"))?;
    let pct = if j.total > 0 { (j.processed as f64 / j.total as f64 * 100.0).min(100.0) } else { 0.0 };
    let success = j.status != "error";
    Ok(ApiResponse::json(200, &ImportStatus { job: j, progress: (pct * 10.0).round() / 10.0, success }))
}

/// `POST /data/export`: where the archive went and what it holds.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ExportResponse {
    /// The archive.
    #[serde(flatten)]
    pub report: crate::store::ExportReport,
    /// Always true.
    pub success: bool,
    /// One line.
    pub message: String,
}

/// `POST /data/import`: the job started.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ImportStarted {
    /// Poll `GET /data/import/status/{job_id}`.
    pub job_id: String,
    /// `processing`.
    pub status: String,
    /// Always true.
    pub success: bool,
    /// One line.
    pub message: &'static str,
}

/// `GET /data/import/status/{job_id}`.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct ImportStatus {
    /// The job.
    #[serde(flatten)]
    pub job: crate::store::ImportJob,
    /// Records processed, in percent of the archive's records (0..=100, one decimal).
    pub progress: f64,
    /// False when the job failed.
    pub success: bool,
}
