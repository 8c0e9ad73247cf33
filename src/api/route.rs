//! One route of the table ([`Route`]): its type, the `route!` macro each resource module writes its rows with,
//! the response [`Shape`], and the request helpers several modules share. A leaf: the resource modules import
//! it, and `routes.rs` gathers their lists ([`super::routes::ROUTES`]).

use std::borrow::Cow;

use utoipa::openapi::{RefOr, schema::Schema};
use utoipa::{PartialSchema, ToSchema};

use super::query::ParamSpec;
use super::{Api, ApiResponse, Ctx};
use crate::error::{FieldError, Result};
use crate::model::{TemporalContext, UnitType};

/// Component schemas of the OpenAPI document: (name, schema).
pub(crate) type Schemas = Vec<(String, RefOr<Schema>)>;

/// A typed body a route reads or sends (a DTO deriving `utoipa::ToSchema`): its component name in the OpenAPI
/// document and how to add its schema, with the schemas it refers to. Written `Dto::of::<T>()`; the document's
/// component list is made from the route table's DTOs (`openapi.rs`), so a new route's types need no list.
#[derive(Clone, Copy)]
pub struct Dto {
    name: fn() -> Cow<'static, str>,
    add: fn(&mut Schemas),
}

impl Dto {
    /// The DTO `T`.
    pub const fn of<T: ToSchema>() -> Dto {
        Dto { name: <T as ToSchema>::name, add: add_schema::<T> }
    }

    /// Its component name (`CreateMemoryRequest`, ...).
    pub fn name(&self) -> Cow<'static, str> {
        (self.name)()
    }

    /// Adds its schema and the schemas it refers to to `out`.
    pub(crate) fn add_to(&self, out: &mut Schemas) {
        (self.add)(out)
    }
}

/// Adds `T`'s schema and the schemas it refers to to `out`.
fn add_schema<T: ToSchema>(out: &mut Schemas) {
    out.push((T::name().into_owned(), <T as PartialSchema>::schema()));
    T::schemas(out);
}

impl PartialEq for Dto {
    fn eq(&self, other: &Dto) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Dto {}

impl std::fmt::Debug for Dto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Its name, quoted: as the route table's snapshot (`tests/snapshots/routes.txt`) pins it.
        write!(f, "{:?}", self.name())
    }
}

/// The response body shape of a route, for the OpenAPI document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A DTO.
    Ref(Dto),
    /// An array of a DTO.
    ArrayOf(Dto),
    /// An array whose items are any of the DTOs (a request field chooses which).
    ArrayOfAny(&'static [Dto]),
    /// Any JSON object.
    Object,
    /// A ZIP archive (`application/zip`).
    Zip,
    /// A markdown page (`text/markdown`).
    Markdown,
    /// Prometheus metrics in the OpenMetrics text format (`application/openmetrics-text`).
    Metrics,
}

/// One route: method, path template (`{name}` segments), documentation, declared query parameters, body and
/// response schemas, whether it is public (no API key), and the handler.
#[derive(Clone, Copy)]
pub struct Route {
    /// HTTP method.
    pub method: &'static str,
    /// Path template.
    pub path: &'static str,
    /// OpenAPI operationId.
    pub operation_id: &'static str,
    /// One line.
    pub summary: &'static str,
    /// Declared query parameters (validated before the handler runs).
    pub query: &'static [ParamSpec],
    /// Request body DTO.
    pub body: Option<Dto>,
    /// Response schema.
    pub response: Shape,
    /// Served without an API key.
    pub public: bool,
    /// The handler.
    pub handler: fn(&Api, &Ctx<'_>) -> Result<ApiResponse>,
}

pub(super) const UNIT_TYPES: &[&str] =
    &["fact", "preference", "decision", "plan", "procedure", "learning", "context", "event"];

macro_rules! route {
    ($m:literal, $p:literal, $op:literal, $sum:literal, $q:expr, $body:expr, $resp:expr, $public:literal, $h:expr) => {
        $crate::api::Route {
            method: $m,
            path: $p,
            operation_id: $op,
            summary: $sum,
            query: $q,
            body: $body,
            response: $resp,
            public: $public,
            handler: $h,
        }
    };
}
pub(super) use route;

pub(super) fn ok(value: &impl serde::Serialize) -> Result<ApiResponse> {
    Ok(ApiResponse::json(200, value))
}

pub(super) fn parse_unit(s: Option<&str>, loc: &[&str], errs: &mut Vec<FieldError>) -> Option<UnitType> {
    let s = s?;
    let u = UnitType::parse(s);
    if u.is_none() {
        errs.push(
            FieldError::new(loc, "enum", format!("Input should be one of: {}", UNIT_TYPES.join(", ")), s.into())
                .with_ctx(serde_json::json!({"expected": UNIT_TYPES.join(", ")})),
        );
    }
    u
}

pub(super) fn parse_temporal(s: Option<&str>, loc: &[&str], errs: &mut Vec<FieldError>) -> Option<TemporalContext> {
    let s = s?;
    let t = TemporalContext::parse(s);
    if t.is_none() {
        errs.push(FieldError::new(loc, "enum", "Input should be one of: past, present, future, timeless", s.into()));
    }
    t
}

/// An expiry time: RFC 3339, or `YYYY-MM-DD` for midnight UTC that day. Anything else is a field error at
/// `loc` (`datetime_parsing`, as pydantic names it).
pub(super) fn parse_expiry(
    s: Option<&str>,
    loc: &[&str],
    errs: &mut Vec<FieldError>,
) -> Option<crate::model::Timestamp> {
    let s = s?;
    let t = crate::model::Timestamp::parse(s.trim());
    if t.is_none() {
        errs.push(FieldError::new(
            loc,
            "datetime_parsing",
            "Input should be a valid datetime: RFC 3339 (2026-12-31T23:59:59Z) or a date (2026-12-31)",
            s.into(),
        ));
    }
    t
}

pub(super) fn label_ids(names: &[String]) -> Vec<String> {
    names.iter().map(|n| crate::model::Label::id_for(n.trim())).collect()
}
