//! Format version and record codec.
//!
//! Every stored record is `[version] ++ postcard(record)`. postcard is not self-describing, so the leading byte
//! is what lets a later release read old records: each record kind ([`Versioned`]) names the version it writes
//! and upgrades every older one to its current form on read. The store-wide format version in `META`
//! ([`crate::store::upgrade::FORMAT_VERSION`]) names the layout as a whole; opening an older store runs the
//! ordered migrations of [`crate::store::upgrade`], and
//! opening a store written by a newer release is refused with both versions named. The rules for changing a
//! record are in `docs/design.md` ("Changing the format").

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorKind, Result};

/// A record kind's stored value: the version this release writes, and how every older version is read.
///
/// A kind whose layout changes raises `VERSION` by one, keeps a frozen copy of each older layout, and reads
/// them in [`Versioned::upgrade`] (old fields kept, new fields at their defaults). Records are never read
/// at a version newer than `VERSION`.
pub trait Versioned: Serialize + DeserializeOwned {
    /// Version byte written in front of every record of the kind (1..=255).
    const VERSION: u8;

    /// The record stored at an older `version` (1..`VERSION`), as its current form; `body` is the postcard
    /// bytes after the version byte.
    ///
    /// # Errors
    /// [`ErrorKind::Corrupt`] when `version` is unknown or `body` does not decode as that version.
    fn upgrade(version: u8, body: &[u8]) -> Result<Self> {
        let _ = body;
        Err(Error::new(ErrorKind::Corrupt, format!("unknown record version {version}")))
    }
}

/// Record kinds whose layout has not changed since format 1: version 1, nothing to upgrade.
macro_rules! version_one {
    ($($t:ty),* $(,)?) => {
        $(impl Versioned for $t {
            const VERSION: u8 = 1;
        })*
    };
}
pub(crate) use version_one;

/// The postcard body of a record, as `T`.
///
/// # Errors
/// [`ErrorKind::Corrupt`] when the bytes do not decode.
pub fn postcard_body<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    postcard::from_bytes(body)
        .map_err(|e| Error::new(ErrorKind::Corrupt, "a stored record does not decode").with_source(e))
}

/// Encodes a record at its kind's current version.
pub fn encode<T: Versioned>(value: &T) -> Result<Vec<u8>> {
    let mut out = vec![T::VERSION];
    let body = postcard::to_allocvec(value)
        .map_err(|e| Error::new(ErrorKind::Internal, "encoding a record failed").with_source(e))?;
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decodes a record of any version up to its kind's current one (older versions through
/// [`Versioned::upgrade`]).
///
/// # Errors
/// [`ErrorKind::Corrupt`] for a version newer than this release reads, an unknown version, or bytes that do
/// not decode.
pub fn decode<T: Versioned>(bytes: &[u8]) -> Result<T> {
    match bytes.split_first() {
        Some((&v, body)) if v == T::VERSION => postcard_body(body),
        Some((&v, body)) if v >= 1 && v < T::VERSION => T::upgrade(v, body),
        Some((&v, _)) if v > T::VERSION => Err(Error::new(
            ErrorKind::Corrupt,
            format!("a record at version {v} is newer than this release reads ({})", T::VERSION),
        )),
        Some((v, _)) => Err(Error::new(ErrorKind::Corrupt, format!("unknown record version {v}"))),
        None => Err(Error::new(ErrorKind::Corrupt, "empty record")),
    }
}

/// The version byte of a stored record, when it is older than its kind's current version (the record needs
/// rewriting by a migration).
pub fn older_version<T: Versioned>(bytes: &[u8]) -> Option<u8> {
    bytes.first().copied().filter(|v| *v < T::VERSION)
}

/// A change-feed entry's body (PostgreSQL's shared feed): postcard, without a version byte. Entries live for
/// minutes, and a reader that cannot decode one (written by a newer build) rebuilds its indexes from the
/// tables instead, so the layout may change between releases without a migration.
///
/// # Errors
/// [`ErrorKind::Internal`] when the value does not encode.
pub fn feed_entry<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    postcard::to_allocvec(value).map_err(|e| Error::new(ErrorKind::Internal, format!("encoding a change failed: {e}")))
}

/// A change-feed entry read back; None when the body does not decode as `T`.
pub fn from_feed_entry<T: DeserializeOwned>(body: &[u8]) -> Option<T> {
    postcard::from_bytes(body).ok()
}

/// A section of an index snapshot file (the store's `snapshot` module): postcard, like a feed entry. A snapshot
/// is read only by the build that wrote it (its header names the crate version), so no version byte.
///
/// # Errors
/// [`ErrorKind::Internal`] when the value does not encode.
pub fn snapshot_section<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    postcard::to_allocvec(value)
        .map_err(|e| Error::new(ErrorKind::Internal, format!("encoding an index snapshot failed: {e}")))
}

/// A snapshot section read back.
///
/// # Errors
/// A message when the bytes do not decode as `T`.
pub fn from_snapshot_section<T: DeserializeOwned>(body: &[u8]) -> std::result::Result<T, String> {
    postcard::from_bytes(body).map_err(|e| e.to_string())
}

/// First byte of a vector stored at half precision.
const F16_TAG: u8 = 0xF1;

/// A vector as stored: the tag byte `0xF1`, then each component as an IEEE 754 half-precision float,
/// little-endian (`1 + 2 x dim` bytes). Half precision halves the largest table of the file; for the unit
/// vectors Engram stores the rounding error per component is at most 2^-11 relative (about 5e-4), which moves
/// cosine similarities by well under 1e-3 and recall@10 not measurably (`docs/retrieval.md`).
pub fn vector_to_bytes(v: &[f32]) -> Vec<u8> {
    use half::slice::HalfFloatSliceExt;
    let mut out = Vec::with_capacity(1 + v.len() * 2);
    out.push(F16_TAG);
    let mut halves = [half::f16::ZERO; HALF_CHUNK];
    for chunk in v.chunks(HALF_CHUNK) {
        let halves = &mut halves[..chunk.len()];
        halves.convert_from_f32_slice(chunk);
        out.extend(halves.iter().flat_map(|h| h.to_le_bytes()));
    }
    out
}

/// Components converted at a time between `f32` and half precision: the slice conversions of the `half` crate
/// use the CPU's F16C instructions (8 lanes) where it has them, about 4x faster than a component at a time
/// (measured on a 256-dimension vector: 192 against 830 ns), which is most of reading a store's vectors at open.
const HALF_CHUNK: usize = 64;

/// A stored vector back to `f32`s: the half-precision form of [`vector_to_bytes`], or the `f32` form of
/// format 1 stores (`4 x dim` bytes, always a multiple of 4, never starting a `1 + 2 x dim` record). A trailing
/// partial component is dropped.
pub fn vector_from_bytes(b: &[u8]) -> Vec<f32> {
    let mut out = vec![0.0f32; vector_len(b)];
    vector_decode_into(b, &mut out);
    out
}

/// The number of components [`vector_from_bytes`] gives for `b`.
pub fn vector_len(b: &[u8]) -> usize {
    match b.split_first() {
        Some((&F16_TAG, rest)) if !b.len().is_multiple_of(4) => rest.len() / 2,
        _ => b.len() / 4,
    }
}

/// Decodes `b` as [`vector_from_bytes`] does, straight into `out` (no allocation: at open, into the slot of a
/// staged HNSW graph). Returns false, writing nothing, when `b` holds other than `out.len()` components.
pub fn vector_decode_into(b: &[u8], out: &mut [f32]) -> bool {
    use half::slice::HalfFloatSliceExt;
    if vector_len(b) != out.len() {
        return false;
    }
    match b.split_first() {
        Some((&F16_TAG, rest)) if !b.len().is_multiple_of(4) => {
            let mut halves = [half::f16::ZERO; HALF_CHUNK];
            for (bytes, dst) in rest.chunks(2 * HALF_CHUNK).zip(out.chunks_mut(HALF_CHUNK)) {
                let halves = &mut halves[..dst.len()];
                for (h, c) in halves.iter_mut().zip(bytes.chunks_exact(2)) {
                    *h = half::f16::from_le_bytes([c[0], c[1]]);
                }
                halves.convert_to_f32_slice(dst);
            }
        }
        _ => {
            for (dst, c) in out.iter_mut().zip(b.chunks_exact(4)) {
                *dst = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
    }
    true
}

/// Decodes `b` as [`vector_decode_into`] does, into half-precision components: a half-precision record is
/// copied as it is (no rounding), a format-1 `f32` record is rounded to half precision. Returns false, writing
/// nothing, when `b` holds other than `out.len()` components.
pub fn vector_decode_into_half(b: &[u8], out: &mut [half::f16]) -> bool {
    use half::slice::HalfFloatSliceExt;
    if vector_len(b) != out.len() {
        return false;
    }
    match b.split_first() {
        Some((&F16_TAG, rest)) if !b.len().is_multiple_of(4) => {
            for (h, c) in out.iter_mut().zip(rest.chunks_exact(2)) {
                *h = half::f16::from_le_bytes([c[0], c[1]]);
            }
        }
        _ => {
            let mut floats = [0.0f32; HALF_CHUNK];
            for (bytes, dst) in b.chunks(4 * HALF_CHUNK).zip(out.chunks_mut(HALF_CHUNK)) {
                let floats = &mut floats[..dst.len()];
                for (f, c) in floats.iter_mut().zip(bytes.chunks_exact(4)) {
                    *f = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
                dst.convert_from_f32_slice(floats);
            }
        }
    }
    true
}

/// Property tests of the stored codecs (proptest): every record survives encode/decode exactly, any bytes
/// decode to a record or a `Corrupt` error (never a panic), vectors keep every bit.
#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::{Memory, MemoryState, Metadata, TemporalContext, Timestamp, UnitType};
    use crate::store::StoredMemory;

    /// JSON values up to 3 levels deep: what clients put in `metadata`.
    fn json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            (-1e12f64..1e12).prop_map(serde_json::Value::from),
            ".{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(".{0,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    prop_compose! {
        pub(crate) fn memory()(
            id in ".{1,40}",
            content in ".{0,200}",
            title in ".{0,40}",
            importance in 0.0f64..=1.0,
            created in 0i64..253_402_300_799_999,
            accessed in proptest::option::of(0i64..253_402_300_799_999),
            count in any::<i64>(),
            meta in proptest::collection::btree_map("[a-z_]{1,8}", json(), 0..4),
            state in proptest::sample::select(MemoryState::ALL.to_vec()),
            unit in proptest::sample::select(vec![UnitType::Fact, UnitType::Event, UnitType::Plan]),
            temporal in proptest::sample::select(vec![TemporalContext::Past, TemporalContext::Timeless]),
            event_start in proptest::option::of("[0-9]{4}(-[0-9]{2}){0,2}"),
            range in proptest::collection::btree_map(".{0,5}", -1e9f64..1e9, 0..3),
            expires in proptest::option::of(0i64..253_402_300_799_999),
        ) -> Memory {
            let mut m = Memory::with_defaults(id, "default".into(), content, Timestamp(created));
            m.title = title;
            m.importance = importance;
            m.last_accessed_at = accessed.map(Timestamp);
            m.access_count = count;
            m.metadata = Metadata(meta.into_iter().collect());
            m.state = state;
            m.unit_type = unit;
            m.temporal_context = temporal;
            m.event_start = event_start;
            m.source_range = range;
            m.expires_at = expires.map(Timestamp);
            m
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn memories_round_trip(m in memory(), docno in any::<u64>()) {
            let m = StoredMemory { docno, memory: m };
            let bytes = encode(&m).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(bytes[0], 2);
            let back: StoredMemory = decode(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back, m);
        }

        #[test]
        fn any_bytes_decode_or_are_corrupt(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Err(e) = decode::<StoredMemory>(&bytes) {
                prop_assert_eq!(e.kind(), ErrorKind::Corrupt);
            }
        }

        #[test]
        fn truncated_records_are_corrupt_not_panics(m in memory(), cut in 0usize..1000) {
            let bytes = encode(&StoredMemory { docno: 1, memory: m }).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let cut = cut % bytes.len();
            if let Err(e) = decode::<StoredMemory>(&bytes[..cut]) {
                prop_assert_eq!(e.kind(), ErrorKind::Corrupt);
            }
        }

        #[test]
        fn vectors_round_trip_at_half_precision(v in proptest::collection::vec(-1.0f32..=1.0, 0..64)) {
            let bytes = vector_to_bytes(&v);
            prop_assert_eq!(bytes.len(), 1 + v.len() * 2);
            let back = vector_from_bytes(&bytes);
            prop_assert_eq!(back.len(), v.len());
            for (a, b) in v.iter().zip(&back) {
                // Half precision: 11 significant bits; below 2^-14 the absolute step is 2^-24.
                prop_assert!((a - b).abs() <= a.abs() * 4.9e-4 + 6.0e-8, "{} -> {}", a, b);
            }
            // Stored values are exact half-precision numbers: a second round trip changes no bit.
            let again: Vec<u32> = vector_from_bytes(&vector_to_bytes(&back)).iter().map(|f| f.to_bits()).collect();
            prop_assert_eq!(again, back.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
        }

        #[test]
        fn vector_codec_converts_each_component_as_half_does(v in proptest::collection::vec(any::<u32>(), 0..300)) {
            // The chunked slice conversions (F16C where the CPU has it) give the bits of the component-wise
            // ones, across chunk boundaries; NaNs stay NaNs.
            let floats: Vec<f32> = v.iter().map(|b| f32::from_bits(*b)).collect();
            let bytes = vector_to_bytes(&floats);
            let one_by_one: Vec<u8> =
                std::iter::once(F16_TAG).chain(floats.iter().flat_map(|x| half::f16::from_f32(*x).to_le_bytes())).collect();
            prop_assert_eq!(bytes.len(), one_by_one.len());
            prop_assert_eq!(bytes[0], F16_TAG);
            for (i, (a, b)) in bytes[1..].chunks(2).zip(one_by_one[1..].chunks(2)).enumerate() {
                let nan = |c: &[u8]| half::f16::from_le_bytes([c[0], c[1]]).is_nan();
                prop_assert!(a == b || (nan(a) && nan(b)), "component {}", i);
            }
            let back = vector_from_bytes(&one_by_one);
            let expected: Vec<f32> =
                one_by_one[1..].chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect();
            prop_assert_eq!(back.len(), expected.len());
            for (a, b) in back.iter().zip(&expected) {
                prop_assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            }
        }

        #[test]
        fn format_1_vectors_of_f32_still_read(v in proptest::collection::vec(any::<u32>(), 0..64)) {
            let floats: Vec<f32> = v.iter().map(|b| f32::from_bits(*b)).collect();
            let legacy: Vec<u8> = floats.iter().flat_map(|x| x.to_le_bytes()).collect();
            let back: Vec<u32> = vector_from_bytes(&legacy).iter().map(|f| f.to_bits()).collect();
            prop_assert_eq!(back, v);
        }

        #[test]
        fn decoding_into_a_slot_matches_and_refuses_other_lengths(
            v in proptest::collection::vec(-2.0f32..=2.0, 0..300),
            legacy in any::<bool>(),
            other in 0usize..300,
        ) {
            let bytes = if legacy { v.iter().flat_map(|x| x.to_le_bytes()).collect() } else { vector_to_bytes(&v) };
            let whole = vector_from_bytes(&bytes);
            prop_assert_eq!(vector_len(&bytes), v.len());
            let mut slot = vec![7.0f32; v.len()];
            prop_assert!(vector_decode_into(&bytes, &mut slot));
            prop_assert_eq!(slot.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), whole.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
            // At half precision: the stored halves as they are, a format-1 vector rounded.
            let mut halves = vec![half::f16::from_f32(7.0); v.len()];
            prop_assert!(vector_decode_into_half(&bytes, &mut halves));
            let rounded: Vec<half::f16> = whole.iter().map(|f| half::f16::from_f32(*f)).collect();
            prop_assert_eq!(halves.iter().map(|h| h.to_bits()).collect::<Vec<_>>(), rounded.iter().map(|h| h.to_bits()).collect::<Vec<_>>());
            // Another length: refused, and nothing written.
            if other != v.len() {
                let mut wrong = vec![7.0f32; other];
                prop_assert!(!vector_decode_into(&bytes, &mut wrong));
                prop_assert!(wrong.iter().all(|x| *x == 7.0));
                let mut wrong = vec![half::f16::from_f32(7.0); other];
                prop_assert!(!vector_decode_into_half(&bytes, &mut wrong));
                prop_assert!(wrong.iter().all(|x| x.to_f32() == 7.0));
            }
        }

        #[test]
        fn timestamps_round_trip_through_rfc3339(ms in 0i64..253_402_300_799_999) {
            let t = Timestamp(ms);
            prop_assert_eq!(Timestamp::parse(&t.to_rfc3339()), Some(t));
        }
    }
}
