//! The archive: writing it (entries hashed while written, SHA-256 and counts for the manifest) and reading
//! it back (verified against the manifest, every entry confined and capped).

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::Digest;

use crate::error::{Error, ErrorKind, Result};
use crate::model::Timestamp;

use super::*;

/// Writes one archive file while hashing it.
pub(super) struct Hashing<W: Write> {
    pub(super) inner: W,
    pub(super) sha: sha2::Sha256,
    pub(super) bytes: u64,
    pub(super) records: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub(super) fn zip_error(e: zip::result::ZipError) -> Error {
    Error::invalid_value(
        &["import_path"],
        "archive_invalid",
        format!("not a readable ZIP archive: {e}"),
        serde_json::Value::Null,
    )
}

pub(super) fn archive_invalid(msg: impl Into<String>) -> Error {
    Error::invalid_value(&["import_path"], "archive_invalid", msg, serde_json::Value::Null)
}

/// The ZIP writer of an encrypted export: streamed (no seek back) into an age file.
pub(super) type SealedZip =
    zip::ZipWriter<zip::write::StreamWriter<age::stream::StreamWriter<std::io::BufWriter<std::fs::File>>>>;

/// Where an export goes: a ZIP file, a ZIP file sealed in an age file (`encrypt`), or a directory
/// (`compress: false`, `nmem export --no-zip`).
pub(super) enum Sink {
    Zip(Box<zip::ZipWriter<std::io::BufWriter<std::fs::File>>>, zip::write::SimpleFileOptions),
    Sealed(Box<SealedZip>, zip::write::SimpleFileOptions),
    Dir(PathBuf),
}

impl Sink {
    pub(super) fn start(&mut self, name: &str) -> Result<Box<dyn Write + '_>> {
        match self {
            Sink::Zip(z, o) => {
                z.start_file(name, *o).map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
                Ok(Box::new(z.as_mut()))
            }
            Sink::Sealed(z, o) => {
                z.start_file(name, *o).map_err(|e| Error::new(ErrorKind::Io, e.to_string()))?;
                Ok(Box::new(z.as_mut()))
            }
            Sink::Dir(d) => {
                let p = d.join(name);
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                Ok(Box::new(std::io::BufWriter::new(std::fs::File::create(p)?)))
            }
        }
    }
}

/// Archive writer: JSON lines per file, checksums into the manifest.
pub(super) struct ArchiveWriter {
    pub(super) sink: Sink,
    pub(super) files: BTreeMap<String, ManifestEntry>,
}

impl ArchiveWriter {
    pub(super) fn file<T: Serialize>(&mut self, name: &str, rows: impl Iterator<Item = Result<T>>) -> Result<u64> {
        let out = self.sink.start(name)?;
        let mut h = Hashing { inner: out, sha: sha2::Sha256::new(), bytes: 0, records: 0 };
        {
            let mut buf = std::io::BufWriter::with_capacity(1 << 16, &mut h);
            let mut n = 0u64;
            for row in rows {
                serde_json::to_writer(&mut buf, &row?).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?;
                buf.write_all(b"\n")?;
                n += 1;
            }
            buf.flush()?;
            drop(buf);
            h.records = n;
        }
        h.inner.flush()?;
        let entry = ManifestEntry { sha256: hex(&h.sha.finalize()), bytes: h.bytes, records: h.records };
        let n = entry.records;
        self.files.insert(name.to_string(), entry);
        Ok(n)
    }

    pub(super) fn blob(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let mut out = self.sink.start(name)?;
        out.write_all(bytes)?;
        out.flush()?;
        drop(out);
        let entry = ManifestEntry { sha256: hex(&sha2::Sha256::digest(bytes)), bytes: bytes.len() as u64, records: 0 };
        self.files.insert(name.to_string(), entry);
        Ok(())
    }
}

/// A seekable reader: a ZIP file, or the plaintext of an encrypted one (age files seek by chunk).
pub(super) trait ReadSeek: Read + std::io::Seek + Send {}
impl<T: Read + std::io::Seek + Send> ReadSeek for T {}

/// Where an import reads from: a ZIP file (plain or encrypted) or an export directory.
pub(super) enum Src {
    Zip(zip::ZipArchive<Box<dyn ReadSeek>>),
    Dir(PathBuf),
}

/// What may open an encrypted archive: a passphrase, and the importing store's own key.
#[derive(Default)]
pub(crate) struct ArchiveKeys<'a> {
    pub passphrase: Option<&'a secrecy::SecretString>,
    pub store: Option<&'a crate::storage::crypt::SideKey>,
}

/// A verified archive: its manifest and a reader that only hands out listed files, within their sizes.
pub(crate) struct Archive {
    pub(super) src: Src,
    pub manifest: Manifest,
}

/// True for a relative path of plain components (no `..`, no root, no backslash).
pub(super) fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains('\\')
        && Path::new(name).components().all(|c| matches!(c, std::path::Component::Normal(_)))
}

impl Archive {
    /// Opens and verifies `path` (a ZIP file, plain or in an age file opened with `keys`, or an export
    /// directory): structure, entry names, no symbolic links, caps, manifest, and the checksum of every listed
    /// file.
    pub(crate) fn open(path: &Path, keys: &ArchiveKeys<'_>) -> Result<Archive> {
        let meta = std::fs::symlink_metadata(path).map_err(|e| {
            Error::invalid_value(
                &["import_path"],
                "value_error",
                format!("cannot open '{}': {e}", path.display()),
                serde_json::Value::Null,
            )
        })?;
        let src = if meta.is_dir() {
            Src::Dir(path.to_path_buf())
        } else {
            let file = std::io::BufReader::new(std::fs::File::open(path)?);
            let input: Box<dyn ReadSeek> = if crate::storage::crypt::is_age_file(path) {
                let plain = crate::storage::crypt::sealed::open_archive(file, keys.passphrase, keys.store)?;
                Box::new(std::io::BufReader::with_capacity(1 << 16, plain))
            } else {
                Box::new(file)
            };
            let mut zip = zip::ZipArchive::new(input).map_err(zip_error)?;
            if zip.len() > MAX_ARCHIVE_ENTRIES {
                return Err(archive_invalid(format!(
                    "the archive has {} entries; at most {MAX_ARCHIVE_ENTRIES} are accepted",
                    zip.len()
                )));
            }
            let mut declared = 0u64;
            for i in 0..zip.len() {
                let e = zip.by_index_raw(i).map_err(zip_error)?;
                let name = e.name().map_err(zip_error)?.to_string();
                let dir_entry = name.ends_with('/') && safe_name(name.trim_end_matches('/'));
                if e.enclosed_name().is_none() || !(dir_entry || safe_name(&name)) {
                    return Err(archive_invalid(format!("entry '{name}' escapes the archive; refused")));
                }
                if e.is_symlink() {
                    return Err(archive_invalid(format!("entry '{name}' is a symbolic link; refused")));
                }
                declared = declared.saturating_add(e.size());
            }
            if declared > MAX_ARCHIVE_BYTES {
                return Err(archive_invalid(format!(
                    "the archive expands to {declared} bytes; at most {MAX_ARCHIVE_BYTES} are accepted"
                )));
            }
            Src::Zip(zip)
        };
        let mut archive = Archive { src, manifest: placeholder_manifest() };
        let raw = archive
            .read_file("manifest.json", MAX_MANIFEST_BYTES)?
            .ok_or_else(|| archive_invalid("the archive has no manifest.json: not an Engram export"))?;
        let manifest: Manifest =
            serde_json::from_slice(&raw).map_err(|e| archive_invalid(format!("manifest.json is not valid: {e}")))?;
        if manifest.format != EXPORT_FORMAT {
            return Err(archive_invalid(format!("format '{}' is not '{EXPORT_FORMAT}'", manifest.format)));
        }
        if manifest.format_version > EXPORT_VERSION {
            return Err(archive_invalid(format!(
                "export format version {} is newer than this release reads ({EXPORT_VERSION})",
                manifest.format_version
            )));
        }
        if manifest.files.len() > MAX_ARCHIVE_ENTRIES {
            return Err(archive_invalid("the manifest lists more files than the entry cap"));
        }
        if let Some(bad) = manifest.files.keys().find(|n| !safe_name(n)) {
            return Err(archive_invalid(format!("the manifest names '{bad}', which escapes the archive; refused")));
        }
        let total: u64 = manifest.files.values().map(|f| f.bytes).fold(0u64, u64::saturating_add);
        if total > MAX_ARCHIVE_BYTES {
            return Err(archive_invalid("the manifest declares more than the archive size cap"));
        }
        archive.manifest = manifest;
        let names: Vec<(String, ManifestEntry)> =
            archive.manifest.files.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (name, entry) in names {
            let mut r = archive.reader(&name)?;
            let mut sha = sha2::Sha256::new();
            let n = std::io::copy(&mut r, &mut sha).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
            drop(r);
            if n != entry.bytes || hex(&sha.finalize()) != entry.sha256 {
                return Err(archive_invalid(format!("{name} does not match its checksum in the manifest")));
            }
        }
        Ok(archive)
    }

    /// An entry read up to `cap` bytes (None when absent).
    pub(super) fn read_file(&mut self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        let Some(r) = self.open_entry(name, cap)? else { return Ok(None) };
        let mut out = Vec::new();
        let mut r = r;
        r.read_to_end(&mut out).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
        Ok(Some(out))
    }

    pub(super) fn open_entry(&mut self, name: &str, cap: u64) -> Result<Option<Box<dyn Read + '_>>> {
        match &mut self.src {
            Src::Zip(zip) => match zip.by_name(name) {
                Ok(f) => Ok(Some(Box::new(Capped { inner: f, left: cap, name: name.to_string() }))),
                Err(zip::result::ZipError::FileNotFound) => Ok(None),
                Err(e) => Err(zip_error(e)),
            },
            Src::Dir(d) => {
                let p = d.join(name);
                match std::fs::symlink_metadata(&p) {
                    Err(_) => Ok(None),
                    Ok(m) if m.file_type().is_symlink() => {
                        Err(archive_invalid(format!("'{name}' is a symbolic link; refused")))
                    }
                    Ok(m) if !m.is_file() => Ok(None),
                    Ok(_) => {
                        let f = std::fs::File::open(&p)?;
                        Ok(Some(Box::new(Capped { inner: f, left: cap, name: name.to_string() })))
                    }
                }
            }
        }
    }

    /// A reader over listed file `name` that fails past the size the manifest gives.
    pub(super) fn reader(&mut self, name: &str) -> Result<Box<dyn Read + '_>> {
        let Some(entry) = self.manifest.files.get(name).cloned() else {
            return Ok(Box::new(std::io::empty()));
        };
        self.open_entry(name, entry.bytes)?.ok_or_else(|| archive_invalid(format!("{name} is listed but missing")))
    }

    /// Calls `f` for every JSON line of `name` (nothing when the archive lacks it).
    pub(super) fn lines<T: DeserializeOwned>(&mut self, name: &str, mut f: impl FnMut(T) -> Result<()>) -> Result<()> {
        let r = self.reader(name)?;
        let mut br = std::io::BufReader::with_capacity(1 << 16, r);
        let mut line = String::new();
        let mut n = 0u64;
        loop {
            line.clear();
            let got = br.read_line(&mut line).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
            if got == 0 {
                break;
            }
            n += 1;
            if line.trim().is_empty() {
                continue;
            }
            let v: T = serde_json::from_str(&line)
                .map_err(|e| archive_invalid(format!("{name} line {n} is not a valid record: {e}")))?;
            f(v)?;
        }
        Ok(())
    }

    pub(super) fn blob(&mut self, name: &str) -> Result<Option<Vec<u8>>> {
        if !self.manifest.files.contains_key(name) {
            return Ok(None);
        }
        let mut out = Vec::new();
        self.reader(name)?.read_to_end(&mut out).map_err(|e| archive_invalid(format!("reading {name}: {e}")))?;
        Ok(Some(out))
    }
}

/// Fails once more than `left` bytes come out: a lying header cannot expand past what the manifest declared.
pub(super) struct Capped<R: Read> {
    pub(super) inner: R,
    pub(super) left: u64,
    pub(super) name: String,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = buf.len().min(self.left.saturating_add(1).min(usize::MAX as u64) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n as u64 > self.left {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} expands past the size its manifest declares (a ZIP bomb?)", self.name),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

pub(super) fn placeholder_manifest() -> Manifest {
    Manifest {
        format: String::new(),
        format_version: 0,
        engram_version: String::new(),
        store_format_version: 0,
        embedder: String::new(),
        created_at: Timestamp(0),
        include: Include::default(),
        counts: BTreeMap::new(),
        files: BTreeMap::new(),
    }
}
