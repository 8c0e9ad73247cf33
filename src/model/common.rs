//! Small value types shared by the records: timestamps and free-form metadata.
//!
//! Both serialize differently for people and for storage: JSON gets an RFC 3339 string and an object, the
//! postcard store encoding gets integer milliseconds and a JSON string (postcard cannot hold a self-describing
//! `serde_json::Value`). The switch is serde's `is_human_readable()`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A point in time as milliseconds since the Unix epoch (UTC). JSON form: RFC 3339, e.g. `2024-05-08T13:56:00.000Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current time.
    pub fn now() -> Self {
        let now = OffsetDateTime::now_utc();
        Timestamp((now.unix_timestamp_nanos() / 1_000_000) as i64)
    }

    /// Milliseconds since the Unix epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// The RFC 3339 form with millisecond precision and a `Z` offset.
    pub fn to_rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
            Ok(t) => {
                let t = t.replace_nanosecond((self.0.rem_euclid(1000) as u32) * 1_000_000).unwrap_or(t);
                t.format(&time::macros::format_description!(
                    "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
                ))
                .unwrap_or_default()
            }
            Err(_) => String::new(),
        }
    }

    /// Parses RFC 3339 (`2024-05-08T13:56:00Z`, any offset) or a plain date `YYYY-MM-DD` (midnight UTC).
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        if let Ok(t) = OffsetDateTime::parse(s, &Rfc3339) {
            return Some(Timestamp((t.unix_timestamp_nanos() / 1_000_000) as i64));
        }
        let d = time::Date::parse(s, &time::macros::format_description!("[year]-[month]-[day]")).ok()?;
        let t = d.midnight().assume_utc();
        Some(Timestamp(t.unix_timestamp() * 1000))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() { s.serialize_str(&self.to_rfc3339()) } else { s.serialize_i64(self.0) }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            Timestamp::parse(&s).ok_or_else(|| serde::de::Error::custom("expected an RFC 3339 date-time"))
        } else {
            Ok(Timestamp(i64::deserialize(d)?))
        }
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
            .into()
    }
}
impl utoipa::ToSchema for Timestamp {}

/// Free-form JSON object attached to records. JSON form: an object; store form: its JSON text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Metadata(pub serde_json::Map<String, serde_json::Value>);

impl Metadata {
    /// An empty object.
    pub fn new() -> Self {
        Metadata(serde_json::Map::new())
    }
}

impl Serialize for Metadata {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            self.0.serialize(s)
        } else {
            let text = serde_json::to_string(&self.0).map_err(serde::ser::Error::custom)?;
            s.serialize_str(&text)
        }
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            Ok(Metadata(serde_json::Map::deserialize(d)?))
        } else {
            let text = String::deserialize(d)?;
            serde_json::from_str(&text).map(Metadata).map_err(serde::de::Error::custom)
        }
    }
}

impl utoipa::PartialSchema for Metadata {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::Object)
            .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::FreeForm(true)))
            .into()
    }
}
impl utoipa::ToSchema for Metadata {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_round_trips_through_rfc3339() {
        let t = Timestamp(1_683_554_160_123);
        let s = t.to_rfc3339();
        assert_eq!(s, "2023-05-08T13:56:00.123Z");
        assert_eq!(Timestamp::parse(&s), Some(t));
        assert_eq!(Timestamp::parse("2023-05-08"), Some(Timestamp(1_683_504_000_000)));
        assert_eq!(Timestamp::parse("yesterday"), None);
    }

    #[test]
    fn metadata_is_an_object_in_json_and_text_in_postcard() {
        let mut m = Metadata::new();
        m.0.insert("k".into(), serde_json::json!([1, 2]));
        assert_eq!(serde_json::to_string(&m).unwrap_or_default(), r#"{"k":[1,2]}"#);
        let bytes = postcard::to_allocvec(&m).unwrap_or_default();
        let back: Metadata = postcard::from_bytes(&bytes).unwrap_or_default();
        assert_eq!(back, m);
    }

    /// Found by the codec property tests: without serde_json's `float_roundtrip`, this number came back one
    /// ULP off (…5665) from storage.
    #[test]
    fn metadata_floats_survive_storage_bit_for_bit() {
        let mut m = Metadata::new();
        m.0.insert("a".into(), serde_json::json!(988_224_866_277.566_4_f64));
        let bytes = postcard::to_allocvec(&m).unwrap_or_default();
        let back: Metadata = postcard::from_bytes(&bytes).unwrap_or_default();
        assert_eq!(back.0["a"].as_f64().map(f64::to_bits), Some(988_224_866_277.566_4_f64.to_bits()));
    }
}
