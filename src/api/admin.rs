//! Administration routes of the daemon: `POST /admin/backup`, an online backup of the store
//! ([`crate::store::Admin::backup`]; docs/operations.md).

use serde::Deserialize;
use utoipa::ToSchema;

use super::route::{Dto, Shape, route};
use super::{Api, ApiResponse, Ctx};
use crate::error::Result;
use crate::store::BackupReport;

/// The routes of this module, in table order ([`super::routes::ROUTES`] gathers every module's list).
pub(super) const ROUTES: &[super::route::Route] = &[route!(
    "POST",
    "/admin/backup",
    "admin_backup",
    "Write a consistent, verified backup of the store file while the daemon serves (redb stores)",
    &[],
    Some(Dto::of::<BackupRequest>()),
    Shape::Ref(Dto::of::<BackupReport>()),
    false,
    backup
)];

/// Body of `POST /admin/backup` (may be empty).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct BackupRequest {
    /// The backup file to write, on the server, inside the data directory or an `--allow-path` directory
    /// (relative paths are taken from the data directory); default `<data_dir>/backups/engram-<UTC time>.redb`.
    /// An existing file is refused (409).
    #[serde(default)]
    pub backup_path: Option<String>,
}

pub(super) fn backup(api: &Api, ctx: &Ctx<'_>) -> Result<ApiResponse> {
    let r: BackupRequest =
        if ctx.body.iter().all(u8::is_ascii_whitespace) { BackupRequest::default() } else { ctx.json()? };
    let config = api.store().config();
    let dest = match r.backup_path.filter(|p| !p.trim().is_empty()) {
        Some(p) => config.confine_named(std::path::Path::new(&p), "backup_path")?,
        None => config.data_dir.join("backups").join(crate::store::scheduled_name()),
    };
    let rep = api.store().admin().backup(&dest)?;
    Ok(ApiResponse::json(200, &rep))
}
