//! The one public error type and the table that maps each kind to its HTTP status, C code and `error_code`.
//!
//! [`ErrorKind`] is the single stable table: the HTTP server, the C API and the Rust API all read their
//! status, code and retryability from [`ErrorKind::row`], so the three surfaces cannot drift apart.

use std::fmt;

/// A result with Engram's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One field-level validation failure, in the spec's 422 `detail` shape (`loc`, `msg`, `type`, `input`, `ctx`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// Where the bad value was: e.g. `["body", "importance"]` or `["query", "limit"]`.
    #[schema(value_type = Vec<Object>)]
    pub loc: Vec<serde_json::Value>,
    /// Human-readable message.
    pub msg: String,
    /// Machine-readable type, pydantic style: `missing`, `less_than_equal`, `string_too_long`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// The offending input (null when missing).
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    /// Bounds or other context, e.g. `{"le": 1}`.
    #[schema(value_type = Object)]
    pub ctx: serde_json::Value,
}

impl FieldError {
    /// A new field error at `loc` (strings become keys, numbers array indices).
    pub fn new(loc: &[&str], kind: &str, msg: impl Into<String>, input: serde_json::Value) -> Self {
        FieldError {
            loc: loc.iter().map(|s| loc_part(s)).collect(),
            msg: msg.into(),
            kind: kind.to_string(),
            input,
            ctx: serde_json::json!({}),
        }
    }

    /// Adds context such as `{"le": 1}`.
    pub fn with_ctx(mut self, ctx: serde_json::Value) -> Self {
        self.ctx = ctx;
        self
    }
}

fn loc_part(s: &str) -> serde_json::Value {
    match s.parse::<u64>() {
        Ok(n) => serde_json::Value::from(n),
        Err(_) => serde_json::Value::from(s),
    }
}

/// What went wrong, independent of transport. Each kind has one row in [`ErrorKind::row`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Input failed validation (HTTP 422 with a `detail` list).
    InvalidInput,
    /// The request is malformed at the protocol level (HTTP 400).
    BadRequest,
    /// No record with that id (HTTP 404).
    NotFound,
    /// No route for that path (HTTP 404).
    RouteNotFound,
    /// The path exists but not for that method (HTTP 405).
    MethodNotAllowed,
    /// The write conflicts with stored state (HTTP 409).
    Conflict,
    /// Missing or wrong API key (HTTP 401).
    Unauthorized,
    /// Host header or origin not allowed (HTTP 403).
    Forbidden,
    /// Body larger than the configured limit (HTTP 413).
    PayloadTooLarge,
    /// Another process holds the store file (HTTP 503 when it happens behind the server).
    Locked,
    /// Reading or writing the store failed; nothing was changed; retrying may succeed (HTTP 500).
    Io,
    /// The disk is full; nothing was changed (HTTP 507).
    StorageFull,
    /// The store file is damaged or from an unknown format version (HTTP 500).
    Corrupt,
    /// A bug or an unexpected state (HTTP 500).
    Internal,
    /// A component the request or the configuration needs is not available: an embedding model or the ONNX
    /// Runtime library (HTTP 503). The message names what is missing and how to fix it.
    Unavailable,
    /// The request names a feature that is designed but not built in this release (HTTP 501; the tree API's
    /// `ENOTSUP`).
    NotImplemented,
    /// Too many failed API keys from one address: blocked for a while (HTTP 429 with `Retry-After`).
    TooManyRequests,
    /// The request body did not arrive within the server's read timeout (HTTP 408); the connection is closed.
    Timeout,
}

/// One row of the error table.
#[derive(Debug, Clone, Copy)]
pub struct ErrorRow {
    /// HTTP status code.
    pub http_status: u16,
    /// The `error_code` string of HTTP bodies.
    pub code: &'static str,
    /// The C API result code (`engram_result`); 0 is success.
    pub c_code: i32,
    /// Whether the same request may succeed if retried.
    pub retryable: bool,
}

impl ErrorKind {
    /// The row of the error table for this kind.
    pub const fn row(self) -> ErrorRow {
        use ErrorKind::*;
        let (http_status, code, c_code, retryable) = match self {
            InvalidInput => (422, "validation_error", 2, false),
            BadRequest => (400, "bad_request", 3, false),
            NotFound => (404, "not_found", 4, false),
            RouteNotFound => (404, "route_not_found", 5, false),
            MethodNotAllowed => (405, "method_not_allowed", 6, false),
            Conflict => (409, "conflict", 7, false),
            Unauthorized => (401, "unauthorized", 8, false),
            Forbidden => (403, "forbidden", 9, false),
            PayloadTooLarge => (413, "payload_too_large", 10, false),
            Locked => (503, "store_locked", 11, true),
            Io => (500, "io_error", 12, true),
            StorageFull => (507, "storage_full", 13, true),
            Corrupt => (500, "store_corrupt", 14, false),
            Internal => (500, "internal_error", 15, false),
            Unavailable => (503, "unavailable", 18, false),
            NotImplemented => (501, "not_implemented", 19, false),
            TooManyRequests => (429, "too_many_requests", 20, true),
            Timeout => (408, "request_timeout", 21, true),
        };
        ErrorRow { http_status, code, c_code, retryable }
    }
}

/// Engram's error: a kind, a message safe to show to the caller, an optional specific `error_code`
/// (for example `memory_not_found`), field errors for validation, and the foreign source.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub struct Error {
    kind: ErrorKind,
    message: String,
    code: Option<&'static str>,
    fields: Vec<FieldError>,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("message", &self.message)
            .field("code", &self.code)
            .field("fields", &self.fields)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(first) = self.fields.first() {
            write!(f, ": {} ({})", first.msg, display_loc(&first.loc))?;
        }
        Ok(())
    }
}

fn display_loc(loc: &[serde_json::Value]) -> String {
    loc.iter()
        .map(|p| match p {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

impl Error {
    /// A new error of `kind` with a caller-safe message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), code: None, fields: Vec::new(), source: None }
    }

    /// A validation error carrying field errors (HTTP 422).
    pub fn invalid(fields: Vec<FieldError>) -> Self {
        let mut e = Error::new(ErrorKind::InvalidInput, "validation failed");
        e.fields = fields;
        e
    }

    /// A validation error for one field.
    pub fn invalid_field(loc: &[&str], kind: &str, msg: impl Into<String>, input: serde_json::Value) -> Self {
        Error::invalid(vec![FieldError::new(loc, kind, msg, input)])
    }

    /// A not-found error with a specific `error_code` such as `memory_not_found`.
    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Error::new(ErrorKind::NotFound, message).with_code(code)
    }

    /// Sets the specific `error_code` (defaults to the kind's code).
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    /// Attaches the foreign error that caused this one.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The kind, which fixes HTTP status, C code and retryability.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The caller-safe message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `error_code` string: the specific one if set, else the kind's.
    pub fn code(&self) -> &'static str {
        self.code.unwrap_or(self.kind.row().code)
    }

    /// Field errors of a validation failure (empty otherwise).
    pub fn fields(&self) -> &[FieldError] {
        &self.fields
    }

    /// The message followed by the whole source chain, for logs (never for clients on a 500).
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(self);
        while let Some(e) = cur {
            out.push_str(": ");
            out.push_str(&e.to_string());
            cur = e.source();
        }
        out
    }
}

fn storage_kind(e: &redb::StorageError) -> ErrorKind {
    match e {
        redb::StorageError::Io(io) if io.kind() == std::io::ErrorKind::StorageFull => ErrorKind::StorageFull,
        // PreviousIo: an earlier I/O error made redb refuse writes until the store is reopened.
        redb::StorageError::Io(_) | redb::StorageError::PreviousIo => ErrorKind::Io,
        redb::StorageError::Corrupted(_) => ErrorKind::Corrupt,
        _ => ErrorKind::Internal,
    }
}

impl From<redb::StorageError> for Error {
    fn from(e: redb::StorageError) -> Self {
        let kind = storage_kind(&e);
        Error::new(kind, "storage operation failed").with_source(e)
    }
}

impl From<redb::DatabaseError> for Error {
    fn from(e: redb::DatabaseError) -> Self {
        match e {
            redb::DatabaseError::DatabaseAlreadyOpen => Error::new(
                ErrorKind::Locked,
                "the store is open in another process (the daemon or another program); close it first",
            )
            .with_source(e),
            redb::DatabaseError::Storage(s) => s.into(),
            redb::DatabaseError::UpgradeRequired(_) => {
                Error::new(ErrorKind::Corrupt, "the store file needs a newer or older redb format").with_source(e)
            }
            other => Error::new(ErrorKind::Internal, "opening the store failed").with_source(other),
        }
    }
}

impl From<redb::TransactionError> for Error {
    fn from(e: redb::TransactionError) -> Self {
        match e {
            redb::TransactionError::Storage(s) => s.into(),
            other => Error::new(ErrorKind::Internal, "starting a transaction failed").with_source(other),
        }
    }
}

impl From<redb::TableError> for Error {
    fn from(e: redb::TableError) -> Self {
        match e {
            redb::TableError::Storage(s) => s.into(),
            other => Error::new(ErrorKind::Corrupt, "opening a table failed").with_source(other),
        }
    }
}

impl From<redb::CommitError> for Error {
    fn from(e: redb::CommitError) -> Self {
        match e {
            redb::CommitError::Storage(s) => s.into(),
            other => Error::new(ErrorKind::Internal, "commit failed").with_source(other),
        }
    }
}

impl From<redb::Error> for Error {
    fn from(e: redb::Error) -> Self {
        match e {
            redb::Error::DatabaseAlreadyOpen => Error::new(ErrorKind::Locked, "the store is open in another process"),
            redb::Error::Io(io) => {
                let kind =
                    if io.kind() == std::io::ErrorKind::StorageFull { ErrorKind::StorageFull } else { ErrorKind::Io };
                Error::new(kind, "storage operation failed").with_source(io)
            }
            other => Error::new(ErrorKind::Internal, "storage operation failed").with_source(other),
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        let kind = if e.kind() == std::io::ErrorKind::StorageFull { ErrorKind::StorageFull } else { ErrorKind::Io };
        Error::new(kind, "I/O failed").with_source(e)
    }
}
