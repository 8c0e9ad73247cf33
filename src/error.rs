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
    /// Where the bad value was. The library names the field (`["importance"]`, `["memories", 3, "embedding"]`);
    /// the HTTP layer puts the transport first (`["body", "importance"]`, `["query", "limit"]`), from where the
    /// route takes that field.
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
    /// Whether `loc` starts with its transport (`body`, `query`, `path`): true for errors made by the HTTP
    /// layer, false for the library's field paths until the HTTP layer places them.
    #[serde(skip)]
    pub in_request: bool,
}

impl FieldError {
    /// A new field error at the request location `loc`, transport first (`["body", "importance"]`; strings
    /// become keys, numbers array indices). The library uses [`FieldError::field`].
    pub fn new(loc: &[&str], kind: &str, msg: impl Into<String>, input: serde_json::Value) -> Self {
        FieldError {
            loc: loc.iter().map(|s| loc_part(s)).collect(),
            msg: msg.into(),
            kind: kind.to_string(),
            input,
            ctx: serde_json::json!({}),
            in_request: true,
        }
    }

    /// A new field error at the field path `path` of a library input (`["importance"]`,
    /// `["messages", "3", "role"]`), without a transport; the HTTP layer puts `body` or `query` in front.
    pub fn field(path: &[&str], kind: &str, msg: impl Into<String>, input: serde_json::Value) -> Self {
        FieldError { in_request: false, ..FieldError::new(path, kind, msg, input) }
    }

    /// Puts `prefix` (the transport and any nesting, such as `["body", "memories", 0]`) in front of a field
    /// path; a location that has its transport already is left alone.
    pub fn place(&mut self, prefix: &[serde_json::Value]) {
        if !self.in_request {
            self.loc.splice(0..0, prefix.iter().cloned());
            self.in_request = true;
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
    /// The database server (PostgreSQL backend) cannot be reached, refused the login, or was lost mid-call;
    /// nothing was changed; retrying after it is back succeeds (HTTP 503).
    Unreachable,
    /// A URL to fetch could not be reached: no such host, a refused connection, TLS failure, or an error status
    /// from its server (HTTP 502). Nothing was stored.
    UpstreamUnreachable,
    /// Fetching a URL took longer than its timeout (HTTP 504). Nothing was stored.
    UpstreamTimeout,
    /// The passphrase, key file or keychain key does not open the encrypted store or archive, or none was given
    /// (`key_required`); nothing was changed (HTTP 403).
    WrongKey,
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
    /// Every kind, in table order.
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::InvalidInput,
        ErrorKind::BadRequest,
        ErrorKind::NotFound,
        ErrorKind::RouteNotFound,
        ErrorKind::MethodNotAllowed,
        ErrorKind::Conflict,
        ErrorKind::Unauthorized,
        ErrorKind::Forbidden,
        ErrorKind::PayloadTooLarge,
        ErrorKind::Locked,
        ErrorKind::Io,
        ErrorKind::StorageFull,
        ErrorKind::Corrupt,
        ErrorKind::Internal,
        ErrorKind::Unavailable,
        ErrorKind::NotImplemented,
        ErrorKind::TooManyRequests,
        ErrorKind::Timeout,
        ErrorKind::Unreachable,
        ErrorKind::UpstreamUnreachable,
        ErrorKind::UpstreamTimeout,
        ErrorKind::WrongKey,
    ];

    /// When the kind's own code is returned (the error table's documentation).
    pub const fn when(self) -> &'static str {
        use ErrorKind::*;
        match self {
            InvalidInput => "Input failed validation: `detail` is a list of field errors (`loc`, `msg`, `type`).",
            BadRequest => "A protocol-level problem.",
            NotFound => "No record with that id, where no specific code applies.",
            RouteNotFound => "No route for that path.",
            MethodNotAllowed => "The path exists, not for that method.",
            Conflict => "The write contradicts stored state, where no specific code applies.",
            Unauthorized => "Missing or wrong API key (`detail`: `missing api key` or `invalid api key`).",
            Forbidden => "The Host header or origin is not allowed.",
            PayloadTooLarge => "The body is over the size limit.",
            Locked => "Another process holds the store file.",
            Io => "Reading or writing the store failed; nothing was changed (details in the log only).",
            StorageFull => "The disk is full; nothing was written.",
            Corrupt => "The store file is damaged or of an unknown format version (details in the log only).",
            Internal => "A bug or an unexpected state (details in the log only).",
            Unavailable => "A component the request needs is not available; the message names it.",
            NotImplemented => "A feature that is designed but not built in this release.",
            TooManyRequests => "The address is locked out after repeated wrong keys (`Retry-After` in seconds).",
            Timeout => "The body did not arrive within the read timeout; the connection is closed.",
            Unreachable => "The database server cannot be reached or was lost; nothing was changed; retry.",
            UpstreamUnreachable => "A URL to fetch cannot be reached or answered an error status; nothing was stored.",
            UpstreamTimeout => "Fetching a URL timed out; nothing was stored.",
            WrongKey => {
                "The key, passphrase or key file does not open the encrypted store or archive; nothing was changed."
            }
        }
    }

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
            Unreachable => (503, "database_unavailable", 22, true),
            UpstreamUnreachable => (502, "upstream_unreachable", 23, true),
            UpstreamTimeout => (504, "upstream_timeout", 24, true),
            WrongKey => (403, "wrong_key", 25, false),
        };
        ErrorRow { http_status, code, c_code, retryable }
    }
}

/// Declares [`ErrorCode`]: one row per specific `error_code`, with the [`ErrorKind`] that fixes its HTTP status,
/// C code and retryability.
macro_rules! error_codes {
    ($($variant:ident => $code:literal, $kind:ident, $doc:literal;)*) => {
        /// The specific `error_code` strings (beside each kind's own code in [`ErrorKind::row`]): one table, so
        /// that HTTP, C and Rust report the same code with the same status. `docs/api.md`'s error table is
        /// checked against it by a test.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $(#[doc = $doc] $variant,)*
        }

        impl ErrorCode {
            /// Every specific code, in table order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The `error_code` string of HTTP bodies.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// The kind this code belongs to (its HTTP status and C code are the kind's).
            pub const fn kind(self) -> ErrorKind {
                match self {
                    $(ErrorCode::$variant => ErrorKind::$kind,)*
                }
            }

            /// When the code is returned (the table's documentation).
            pub const fn when(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $doc,)*
                }
            }
        }
    };
}

error_codes! {
    MemoryNotFound => "memory_not_found", NotFound, "No memory with that id (in the spaces the caller sees).";
    SpaceNotFound => "space_not_found", NotFound, "No space with that id or name.";
    LabelNotFound => "label_not_found", NotFound, "No label with that id or name.";
    ThreadNotFound => "thread_not_found", NotFound, "No thread with that id.";
    SourceNotFound => "source_not_found", NotFound, "No source with that id.";
    EntityNotFound => "entity_not_found", NotFound, "No entity with that id or name.";
    RelationNotFound => "relation_not_found", NotFound, "No relation with that id.";
    CommunityNotFound => "community_not_found", NotFound, "No community with that id.";
    CrystalNotFound => "crystal_not_found", NotFound, "No crystal with that id.";
    ReviewNotFound => "review_not_found", NotFound, "No review event with that id.";
    SkillNotFound => "skill_not_found", NotFound, "A skill id that is no procedure memory.";
    MergeNotFound => "merge_not_found", NotFound, "No label merge with that id (to reverse).";
    JobNotFound => "job_not_found", NotFound, "No export or import job with that id.";
    FileNotFound => "file_not_found", NotFound, "A server-side file or archive that does not exist.";
    UnknownTool => "unknown_tool", NotFound, "An agent tool name no tool has.";
    Enoent => "ENOENT", NotFound, "Tree API: no such path.";
    PathNotAllowed => "path_not_allowed", Forbidden, "A server-side path outside the allowed directories.";
    Erofs => "EROFS", Forbidden, "Tree API: the path is derived and read-only (threads, sources, wiki).";
    LabelExists => "label_exists", Conflict, "A label with that name exists already.";
    SpaceExists => "space_exists", Conflict, "A space with that id exists already.";
    SpaceNameTaken => "space_name_taken", Conflict, "Another space has that name.";
    SpaceNotEmpty => "space_not_empty", Conflict, "Deleting a space that still holds memories, threads or working memory, without `cascade`.";
    DefaultSpace => "default_space", Conflict, "The default space cannot be deleted.";
    ThreadExists => "thread_exists", Conflict, "A thread with that id exists already.";
    CheckpointConflict => "checkpoint_conflict", Conflict, "A thread write whose `expected_message_count` differs from the thread's message count.";
    MemoryInOtherSpace => "memory_in_other_space", Conflict, "The memory id exists in another space.";
    InvalidStateTransition => "invalid_state_transition", Conflict, "A lifecycle change the memory's state does not allow.";
    ReviewResolved => "review_resolved", Conflict, "The review event was resolved already.";
    MergeReversed => "merge_reversed", Conflict, "The label merge was reversed already.";
    PlanStale => "plan_stale", Conflict, "A label-maintenance plan whose labels changed since it was previewed.";
    ExportExists => "export_exists", Conflict, "The export target exists (without `overwrite`), or is a directory that is no export.";
    ImportRunning => "import_running", Conflict, "Another import is running.";
    VersionConflict => "version_conflict", Conflict, "Tree API: the record changed since the version the write names.";
    Exdev => "EXDEV", Conflict, "Tree API: a write to an alias path (the message names the canonical one).";
    EmbeddingModelUnavailable => "embedding_model_unavailable", Unavailable, "The embedding model or the ONNX Runtime library is missing, or the store takes caller-supplied vectors only.";
    UrlRefused => "url_refused", InvalidInput, "`POST /sources/ingest/url`: the host resolves to a loopback, private, link-local, unique-local, multicast, reserved or unspecified address and is not allowed (`--allow-url-host`); no connection was made.";
    UrlUnreachable => "url_unreachable", UpstreamUnreachable, "`POST /sources/ingest/url`: the host cannot be resolved or reached, TLS failed, or it answered an error status.";
    UrlTimeout => "url_timeout", UpstreamTimeout, "`POST /sources/ingest/url`: the connect or total timeout passed.";
    KeyRequired => "key_required", WrongKey, "The store or archive is encrypted and no key was given (or the key file or keychain entry is missing).";
    StoreNotEncrypted => "store_not_encrypted", Conflict, "A key was given for a store that is not encrypted (`engram encrypt` encrypts it).";
    Enotsup => "ENOTSUP", NotImplemented, "Tree API: a planned feature (`/context`, `/feed`, `fragment`, `raw`, ...).";
}

/// Engram's error: a kind, a message safe to show to the caller, an optional specific `error_code`
/// (for example `memory_not_found`), field errors for validation, and the foreign source.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub struct Error {
    kind: ErrorKind,
    message: String,
    code: Option<ErrorCode>,
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

    /// A validation error for one field at the request location `loc` ([`FieldError::new`]).
    pub fn invalid_field(loc: &[&str], kind: &str, msg: impl Into<String>, input: serde_json::Value) -> Self {
        Error::invalid(vec![FieldError::new(loc, kind, msg, input)])
    }

    /// A validation error for one field of a library input, at its field path ([`FieldError::field`]).
    pub fn invalid_value(path: &[&str], kind: &str, msg: impl Into<String>, input: serde_json::Value) -> Self {
        Error::invalid(vec![FieldError::field(path, kind, msg, input)])
    }

    /// An error with a specific `error_code`; its kind (HTTP status, C code) is the code's ([`ErrorCode::kind`]).
    pub fn coded(code: ErrorCode, message: impl Into<String>) -> Self {
        Error::new(code.kind(), message).with_code(code)
    }

    /// A not-found error with a specific code such as [`ErrorCode::MemoryNotFound`].
    pub fn not_found(code: ErrorCode, message: impl Into<String>) -> Self {
        Error::coded(code, message)
    }

    /// Sets the specific `error_code`, and the kind to the code's kind.
    pub fn with_code(mut self, code: ErrorCode) -> Self {
        self.kind = code.kind();
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
        self.code.map_or(self.kind.row().code, ErrorCode::as_str)
    }

    /// A validation error with `f` applied to each field error (the HTTP layer placing library fields under
    /// their transport, a route nesting them); any other error unchanged.
    pub fn map_fields(self, f: impl FnMut(FieldError) -> FieldError) -> Self {
        if self.kind != ErrorKind::InvalidInput {
            return self;
        }
        Error::invalid(self.fields.into_iter().map(f).collect())
    }

    /// The specific code, when one was set.
    pub fn specific_code(&self) -> Option<ErrorCode> {
        self.code
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

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if let Some(damage) = Damage::of(&e) {
            return Error::new(ErrorKind::Corrupt, damage.to_string()).with_source(e);
        }
        let kind = if e.kind() == std::io::ErrorKind::StorageFull { ErrorKind::StorageFull } else { ErrorKind::Io };
        Error::new(kind, "I/O failed").with_source(e)
    }
}

/// The error of a damaged encrypted block or header: carried inside an [`std::io::Error`] through redb and
/// turned into [`ErrorKind::Corrupt`] with its message (the storage layer's `crypt` device raises it).
#[derive(Debug, Clone)]
pub struct Damage(pub String);

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Damage {}

impl Damage {
    pub(crate) fn io(msg: impl Into<String>) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, Damage(msg.into()))
    }

    /// The damage an I/O error carries, if any.
    pub fn of(e: &std::io::Error) -> Option<&Damage> {
        e.get_ref().and_then(|inner| inner.downcast_ref::<Damage>())
    }
}
