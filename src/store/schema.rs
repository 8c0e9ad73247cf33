//! Format version and record codec.
//!
//! Every stored record is `[RECORD_VERSION] ++ postcard(record)`. postcard is not self-describing, so the
//! leading byte is what lets a later release migrate old records. The store-wide `FORMAT_VERSION` in `META`
//! names the table layout; opening a store written by a newer layout is refused.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorKind, Result};

/// Table layout version of this release.
pub const FORMAT_VERSION: u32 = 1;

/// Version byte in front of every record.
pub const RECORD_VERSION: u8 = 1;

/// Encodes a record.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let mut out = vec![RECORD_VERSION];
    let body = postcard::to_allocvec(value)
        .map_err(|e| Error::new(ErrorKind::Internal, "encoding a record failed").with_source(e))?;
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decodes a record.
///
/// # Errors
/// [`ErrorKind::Corrupt`] for an unknown version byte or bytes that do not decode.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    match bytes.split_first() {
        Some((&RECORD_VERSION, body)) => postcard::from_bytes(body)
            .map_err(|e| Error::new(ErrorKind::Corrupt, "a stored record does not decode").with_source(e)),
        Some((v, _)) => Err(Error::new(ErrorKind::Corrupt, format!("unknown record version {v}"))),
        None => Err(Error::new(ErrorKind::Corrupt, "empty record")),
    }
}

/// `f32`s as little-endian bytes.
pub fn vector_to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Little-endian bytes to `f32`s (a trailing partial float is dropped).
pub fn vector_from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}
