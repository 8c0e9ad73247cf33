//! Sources: the records, where each lives, the content hashes, the parsed text, the original bytes and the chunks: the only place these kinds are opened.

use super::{Bytes, K1, K2, KN, Opened, Records, Tx};
use crate::error::Result;
use crate::model::Chunk;
use crate::model::Source;
use crate::storage::tables::{SOURCE_CHUNKS, SOURCE_FILES, SOURCE_SHA, SOURCE_SPACE, SOURCE_TEXT, SOURCES};

/// `(space id, source id)` -> [`Source`].
///
/// # Errors
/// Storage errors.
pub(crate) fn sources<X: Tx>(tx: &X) -> Result<Records<X::Table<'_, K2, Bytes>, K2, Source>> {
    super::records(tx, SOURCES)
}

/// source id -> space id.
///
/// # Errors
/// Storage errors.
pub(crate) fn source_space<X: Tx>(tx: &X) -> Result<X::Table<'_, K1, &'static str>> {
    tx.open(SOURCE_SPACE)
}

/// The space of source `id`, if it exists.
///
/// # Errors
/// Storage errors.
pub(crate) fn space_of<X: Tx>(tx: &X, id: &str) -> Result<Option<String>> {
    super::value_at(&source_space(tx)?, id, str::to_string)
}

/// The id of the source of `space` whose bytes have SHA-256 `sha` (hex), if any.
///
/// # Errors
/// Storage errors.
pub(crate) fn id_by_sha<X: Tx>(tx: &X, space: &str, sha: &str) -> Result<Option<String>> {
    super::value_at(&source_sha(tx)?, (space, sha), str::to_string)
}

/// The parsed text of source `id` (empty when it has none).
///
/// # Errors
/// Storage errors.
pub(crate) fn text_of<X: Tx>(tx: &X, id: &str) -> Result<String> {
    Ok(super::value_at(&source_text(tx)?, id, |b| String::from_utf8_lossy(b).into_owned())?.unwrap_or_default())
}

/// The original bytes of source `id` (empty when none are kept).
///
/// # Errors
/// Storage errors.
pub(crate) fn file_of<X: Tx>(tx: &X, id: &str) -> Result<Vec<u8>> {
    Ok(super::value_at(&source_files(tx)?, id, <[u8]>::to_vec)?.unwrap_or_default())
}

/// `(space id, sha256 hex)` -> source id: the same bytes in a space are one source.
///
/// # Errors
/// Storage errors.
pub(crate) fn source_sha<X: Tx>(tx: &X) -> Result<X::Table<'_, K2, &'static str>> {
    tx.open(SOURCE_SHA)
}

/// source id -> parsed text (UTF-8 bytes).
///
/// # Errors
/// Storage errors.
pub(crate) fn source_text<X: Tx>(tx: &X) -> Result<X::Table<'_, K1, Bytes>> {
    tx.open(SOURCE_TEXT)
}

/// source id -> the original bytes.
///
/// # Errors
/// Storage errors.
pub(crate) fn source_files<X: Tx>(tx: &X) -> Result<X::Table<'_, K1, Bytes>> {
    tx.open(SOURCE_FILES)
}

/// `(source id, chunk index)` -> [`Chunk`].
///
/// # Errors
/// Storage errors.
pub(crate) fn source_chunks<X: Tx>(tx: &X) -> Result<Opened<'_, X, KN, Chunk>> {
    super::records(tx, SOURCE_CHUNKS)
}

/// The chunks `lo..=hi` of source `id`, with their index, in order.
///
/// # Errors
/// Storage errors; [`crate::ErrorKind::Corrupt`] when a chunk does not decode.
pub(crate) fn chunks_between<X: Tx>(tx: &X, id: &str, lo: u64, hi: u64) -> Result<Vec<(u64, Chunk)>> {
    let t = source_chunks(tx)?;
    let mut out = Vec::new();
    for row in t.range((id, lo)..=(id, hi))? {
        let (k, c) = row?;
        out.push((k.value().1, c));
    }
    Ok(out)
}

/// Every chunk of source `id`, in order.
///
/// # Errors
/// As [`chunks_between`].
pub(crate) fn chunks_of<X: Tx>(tx: &X, id: &str) -> Result<Vec<Chunk>> {
    Ok(chunks_between(tx, id, 0, u64::MAX)?.into_iter().map(|(_, c)| c).collect())
}
