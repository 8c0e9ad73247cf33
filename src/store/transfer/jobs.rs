//! Background import jobs of the HTTP route: start, status.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, Result};
use crate::model::Timestamp;
use crate::store::KnowledgeStore;

use super::*;

/// Shared job state of the import route.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ImportJob {
    /// Job id.
    pub job_id: String,
    /// `processing`, `completed` or `error`.
    pub status: String,
    /// The archive.
    pub import_path: String,
    /// The mode.
    pub mode: ImportMode,
    /// Records written.
    pub processed: u64,
    /// Records in the archive.
    pub total: u64,
    /// Per kind, once completed.
    pub counts: Option<BTreeMap<String, KindCounts>>,
    /// Why it failed (status `error`).
    pub error: Option<String>,
    /// Start.
    pub started_at: Timestamp,
    /// End.
    pub finished_at: Option<Timestamp>,
    /// Milliseconds taken, once finished.
    pub elapsed_ms: Option<f64>,
}

/// Import jobs of a store: at most one runs at a time.
#[derive(Default)]
pub(crate) struct Jobs {
    jobs: parking_lot::Mutex<HashMap<String, (ImportJob, Arc<ImportProgress>)>>,
}

impl Transfer<'_> {
    /// Starts importing `path` into `store` on a background thread and returns the job (status `processing`).
    /// Poll it with [`Transfer::job`](crate::store::Transfer::job). An associated function, not a method: the
    /// job's thread holds the store (`Arc`) until it ends.
    ///
    /// # Errors
    /// [`ErrorKind::Conflict`] (`import_running`) while another import runs; [`ErrorKind::Forbidden`]
    /// (`path_not_allowed`); [`ErrorKind::NotFound`] (`file_not_found`) when there is no file there.
    pub fn start_import(
        store: &Arc<KnowledgeStore>,
        path: &Path,
        mode: ImportMode,
        passphrase: Option<secrecy::SecretString>,
    ) -> Result<ImportJob> {
        let real = store.core.config.confine_named(path, "import_path")?;
        if !real.exists() {
            return Err(Error::not_found(ErrorCode::FileNotFound, format!("no archive at '{}'", path.display())));
        }
        // An encrypted archive's key is checked before the job starts: a wrong one is the request's error.
        if real.is_file() && crate::storage::crypt::is_age_file(&real) {
            let file = std::io::BufReader::new(std::fs::File::open(&real)?);
            crate::storage::crypt::sealed::open_archive(file, passphrase.as_ref(), store.core.graph_files.side.key())?;
        }
        let progress = Arc::new(ImportProgress::default());
        let job = ImportJob {
            job_id: format!("import_{}", uuid::Uuid::now_v7().simple()),
            status: "processing".into(),
            import_path: real.display().to_string(),
            mode,
            processed: 0,
            total: 0,
            counts: None,
            error: None,
            started_at: Timestamp::now(),
            finished_at: None,
            elapsed_ms: None,
        };
        {
            let mut jobs = store.jobs.jobs.lock();
            if jobs.values().any(|(j, _)| j.status == "processing") {
                return Err(Error::new(ErrorKind::Conflict, "an import is already running; wait for it to finish")
                    .with_code(ErrorCode::ImportRunning));
            }
            jobs.insert(job.job_id.clone(), (job.clone(), progress.clone()));
        }
        let held = store.clone();
        let id = job.job_id.clone();
        let spawned = std::thread::Builder::new().name("engram-import".into()).spawn(move || {
            let out = held.transfer().import_with(&real, mode, &progress, passphrase.as_ref());
            let mut jobs = held.jobs.jobs.lock();
            if let Some((j, _)) = jobs.get_mut(&id) {
                j.finished_at = Some(Timestamp::now());
                j.elapsed_ms = Some((Timestamp::now().0 - j.started_at.0) as f64);
                match out {
                    Ok(r) => {
                        j.status = "completed".into();
                        j.counts = Some(r.counts);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e.chain(), "import failed; the store is unchanged");
                        j.status = "error".into();
                        let detail =
                            e.fields().first().map(|f| f.msg.clone()).unwrap_or_else(|| e.message().to_string());
                        j.error = Some(detail);
                    }
                }
            }
        });
        if let Err(e) = spawned {
            store.jobs.jobs.lock().remove(&job.job_id);
            return Err(Error::new(ErrorKind::Internal, format!("could not start the import thread: {e}")));
        }
        Ok(job)
    }

    /// The state of import job `id`, with live progress while it runs.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`job_not_found`).
    pub fn job(&self, id: &str) -> Result<ImportJob> {
        let jobs = self.store.jobs.jobs.lock();
        let (j, p) =
            jobs.get(id).ok_or_else(|| Error::not_found(ErrorCode::JobNotFound, format!("no import job '{id}'")))?;
        let mut j = j.clone();
        j.processed = p.processed.load(Ordering::Relaxed);
        j.total = p.total.load(Ordering::Relaxed);
        Ok(j)
    }
}
