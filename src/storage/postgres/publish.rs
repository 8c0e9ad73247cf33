//! The published index snapshot: files that one daemon puts into the database so that a daemon starting with an
//! empty data directory (or one whose own snapshot the change feed no longer covers) downloads them instead of
//! reading every table and building its HNSW graphs (`src/store/core/publish.rs` decides what and when).
//!
//! * `engram_published` (one row): the change-feed `seq` the files reflect (`position`), when they were written
//!   and their total size.
//! * `engram_published_parts (file, part, data)`: each file in parts of at most [`PART_BYTES`], `file` a path
//!   relative to the data directory. A publication replaces every row in one transaction, so a reader (one
//!   statement) sees one whole publication or the one before.
//! * The change feed keeps the entries after `position` for up to [`super::feed::RETAIN_PUBLISHED_SECS`]
//!   (`feed::prune`), so that the publication stays usable until the next one.

use std::io::{Read, Write};
use std::path::PathBuf;

use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;

use super::pg_error;
use crate::error::Result;
use crate::storage::Publication;

/// Largest part of a published file, in bytes (8 MiB: one bind parameter each, well below bytea's 1 GiB).
pub(super) const PART_BYTES: usize = 8 << 20;

/// The tables, created by `migrate` in its transaction.
pub(super) const CREATE: &str = "
    CREATE TABLE IF NOT EXISTS engram_published (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        position bigint NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        bytes bigint NOT NULL
    );
    CREATE TABLE IF NOT EXISTS engram_published_parts (
        file text NOT NULL,
        part integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (file, part)
    );";

/// Replaces the publication with the files `files` (`(name relative to the data directory, path to read)`) at
/// feed position `position`, in one transaction, streaming each file in parts. Returns the bytes written.
///
/// # Errors
/// I/O errors reading a file; database errors (nothing is replaced then).
pub(super) fn publish(client: &mut Client, position: u64, files: &[(String, PathBuf)]) -> Result<u64> {
    let mut tx = client.transaction().map_err(|e| pg_error("starting the publication failed", e))?;
    tx.execute("DELETE FROM engram_published_parts", &[]).map_err(|e| pg_error("replacing the publication", e))?;
    let insert = tx
        .prepare("INSERT INTO engram_published_parts (file, part, data) VALUES ($1, $2, $3)")
        .map_err(|e| pg_error("publishing the index snapshot", e))?;
    let mut total = 0u64;
    let mut buf = vec![0u8; PART_BYTES];
    for (name, path) in files {
        let mut f = std::fs::File::open(path)?;
        let mut part = 0i32;
        loop {
            let n = read_full(&mut f, &mut buf)?;
            if n == 0 && part > 0 {
                break;
            }
            tx.execute(&insert, &[name, &part, &&buf[..n]])
                .map_err(|e| pg_error("publishing the index snapshot", e))?;
            total += n as u64;
            part += 1;
            if n < PART_BYTES {
                break;
            }
        }
    }
    let position = i64::try_from(position).unwrap_or(i64::MAX);
    let bytes = i64::try_from(total).unwrap_or(i64::MAX);
    tx.execute(
        "INSERT INTO engram_published (position, at, bytes) VALUES ($1, now(), $2)
         ON CONFLICT (one) DO UPDATE SET position = excluded.position, at = excluded.at, bytes = excluded.bytes",
        &[&position, &bytes],
    )
    .map_err(|e| pg_error("publishing the index snapshot", e))?;
    tx.commit().map_err(|e| pg_error("committing the publication failed", e))?;
    Ok(total)
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The publication in the database, if any.
///
/// # Errors
/// Database errors.
pub(super) fn publication(client: &mut Client) -> Result<Option<Publication>> {
    let row = client
        .query_opt("SELECT position, extract(epoch FROM now() - at)::float8, bytes FROM engram_published", &[])
        .map_err(|e| pg_error("reading the publication failed", e))?;
    Ok(row.map(|r| Publication {
        position: r.get::<_, i64>(0).max(0) as u64,
        age_secs: r.get::<_, f64>(1).max(0.0),
        bytes: r.get::<_, i64>(2).max(0) as u64,
    }))
}

/// Downloads the publication: each file whose name `place` maps to a path (others are skipped) is
/// written to a temporary file beside it and renamed over it when complete. One statement reads the whole
/// publication, streamed row by row (one part in memory at a time). Returns the publication's position and the
/// paths written, or `None` when there is none.
///
/// # Errors
/// Database and I/O errors; a file whose download did not complete is not left behind.
pub(super) fn fetch(
    client: &mut Client,
    place: &dyn Fn(&str) -> Option<PathBuf>,
) -> Result<Option<(u64, Vec<PathBuf>)>> {
    let mut rows = client
        .query_raw(
            "SELECT p.position, f.file, f.part, f.data FROM engram_published p
             JOIN engram_published_parts f ON true ORDER BY f.file, f.part",
            std::iter::empty::<i32>(),
        )
        .map_err(|e| pg_error("reading the publication failed", e))?;
    let mut position = None;
    let mut written = Vec::new();
    // The file being written: (name, final path, temporary path, writer, next part).
    let mut current: Option<(String, PathBuf, PathBuf, std::io::BufWriter<std::fs::File>, i32)> = None;
    let finish = |c: Option<(String, PathBuf, PathBuf, std::io::BufWriter<std::fs::File>, i32)>,
                  written: &mut Vec<PathBuf>|
     -> std::io::Result<()> {
        if let Some((_, path, tmp, w, _)) = c {
            w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            written.push(path);
        }
        Ok(())
    };
    let result = (|| -> Result<()> {
        while let Some(row) = rows.next().map_err(|e| pg_error("reading the publication failed", e))? {
            position = Some(row.get::<_, i64>(0).max(0) as u64);
            let (file, part): (String, i32) = (row.get(1), row.get(2));
            if current.as_ref().is_none_or(|c| c.0 != file) {
                finish(current.take(), &mut written)?;
                let Some(path) = place(&file) else { continue };
                if part != 0 {
                    continue;
                }
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let tmp = path.with_extension("download.tmp");
                let w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
                current = Some((file.clone(), path, tmp, w, 0));
            }
            let Some(c) = current.as_mut() else { continue };
            if part != c.4 {
                // A part missing: the rows are one publication, so this is damage; the file is dropped.
                let _ = std::fs::remove_file(&c.2);
                current = None;
                continue;
            }
            c.3.write_all(row.get::<_, &[u8]>(3))?;
            c.4 += 1;
        }
        finish(current.take(), &mut written)?;
        Ok(())
    })();
    if let Err(e) = result {
        if let Some(c) = current {
            let _ = std::fs::remove_file(&c.2);
        }
        return Err(e);
    }
    Ok(position.map(|p| (p, written)))
}
