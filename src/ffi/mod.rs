//! C API (feature `ffi`): open a store, run any route of the API in-process, read status and JSON, free.
//!
//! Conventions (after `rure.h` and rustls-ffi): every function returns an `engram_result` (0 = OK) and writes
//! results through out-parameters that are left untouched on error; strings in are pointer + length and
//! UTF-8 checked; owned outputs have their own `_free`, which accepts NULL; every body runs behind a panic
//! boundary; the text of the last error of the calling thread is copied out by `engram_last_error`.
//!
//! Thread safety: an `engram_store` may be used from several threads at once; an `engram_response` belongs to
//! one thread at a time. Only one process can open a store: a second open returns `ENGRAM_LOCKED`.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

use std::cell::RefCell;
use std::ffi::c_char;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::api::{Api, ApiRequest, ServiceInfo};
use crate::config::StoreConfig;
use crate::error::Error;
#[cfg(test)]
use crate::error::ErrorKind;
use crate::store::KnowledgeStore;

/// Result code of every C function: 0 on success.
pub type engram_result = i32;

/// Success.
pub const ENGRAM_OK: engram_result = 0;
/// A required pointer argument was NULL.
pub const ENGRAM_NULL_PARAMETER: engram_result = 1;
/// Input failed validation.
pub const ENGRAM_INVALID_INPUT: engram_result = 2;
/// No such record.
pub const ENGRAM_NOT_FOUND: engram_result = 4;
/// The write conflicts with stored state.
pub const ENGRAM_CONFLICT: engram_result = 7;
/// Another process has the store open.
pub const ENGRAM_LOCKED: engram_result = 11;
/// An I/O error; nothing was changed; retrying may succeed.
pub const ENGRAM_IO: engram_result = 12;
/// The disk is full; nothing was changed.
pub const ENGRAM_STORAGE_FULL: engram_result = 13;
/// The store file is damaged or of an unknown format.
pub const ENGRAM_CORRUPT: engram_result = 14;
/// An unexpected internal error.
pub const ENGRAM_INTERNAL: engram_result = 15;
/// A string argument was not valid UTF-8.
pub const ENGRAM_INVALID_UTF8: engram_result = 16;
/// Engram panicked; the call had no effect. Please report it.
pub const ENGRAM_PANIC: engram_result = 17;
/// A component is not available (an embedding model, the ONNX Runtime library); the message says which.
pub const ENGRAM_UNAVAILABLE: engram_result = 18;
/// The feature is designed but not built in this release.
pub const ENGRAM_NOT_IMPLEMENTED: engram_result = 19;
/// Too many failed attempts; retry later (HTTP only; listed for completeness).
pub const ENGRAM_TOO_MANY_REQUESTS: engram_result = 20;
/// The request did not arrive in time (HTTP only; listed for completeness).
pub const ENGRAM_TIMEOUT: engram_result = 21;
/// The database server (PostgreSQL backend) cannot be reached or was lost; nothing was changed; retry.
pub const ENGRAM_UNREACHABLE: engram_result = 22;
/// A URL to fetch cannot be reached or answered an error status; nothing was stored.
pub const ENGRAM_UPSTREAM_UNREACHABLE: engram_result = 23;
/// Fetching a URL timed out; nothing was stored.
pub const ENGRAM_UPSTREAM_TIMEOUT: engram_result = 24;
/// The passphrase, key file or keychain key does not open the encrypted store, or none was given; nothing
/// was changed.
pub const ENGRAM_WRONG_KEY: engram_result = 25;

/// `engram_store_open_encrypted`'s `key_kind`: `key` is a passphrase (UTF-8), stretched with Argon2id.
pub const ENGRAM_KEY_PASSPHRASE: i32 = 1;
/// `engram_store_open_encrypted`'s `key_kind`: `key` is the path of a key file (UTF-8).
pub const ENGRAM_KEY_FILE: i32 = 2;
/// `engram_store_open_encrypted`'s `key_kind`: the key is in the OS keychain; `key` is NULL and `key_len` 0.
pub const ENGRAM_KEY_KEYCHAIN: i32 = 3;

/// An open store (opaque). Close with `engram_store_close`.
pub struct engram_store {
    api: Api,
}

/// A response (opaque): HTTP-style status and a NUL-terminated JSON body. Free with `engram_response_free`.
pub struct engram_response {
    status: u16,
    body: Vec<u8>,
}

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_error(msg: impl Into<String>) {
    LAST_ERROR.with(|e| *e.borrow_mut() = msg.into());
}

fn fail(e: &Error) -> engram_result {
    set_error(e.chain());
    e.kind().row().c_code
}

fn guard(f: impl FnOnce() -> engram_result) -> engram_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            set_error("internal panic; the call had no effect");
            ENGRAM_PANIC
        }
    }
}

unsafe fn str_arg<'a>(ptr: *const c_char, len: usize, what: &str) -> Result<&'a str, engram_result> {
    if ptr.is_null() {
        set_error(format!("{what} is NULL"));
        return Err(ENGRAM_NULL_PARAMETER);
    }
    // SAFETY: the caller guarantees `ptr` points to `len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    std::str::from_utf8(bytes).map_err(|_| {
        set_error(format!("{what} is not valid UTF-8"));
        ENGRAM_INVALID_UTF8
    })
}

/// Opens (or creates) the store in directory `data_dir` (UTF-8, `data_dir_len` bytes) with the built-in
/// static model (256 dimensions, compiled into the library), and writes the handle to `*out`.
///
/// Returns `ENGRAM_OK`, `ENGRAM_NULL_PARAMETER`, `ENGRAM_INVALID_UTF8`, `ENGRAM_LOCKED` (open elsewhere),
/// `ENGRAM_IO` or `ENGRAM_CORRUPT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_store_open(
    data_dir: *const c_char,
    data_dir_len: usize,
    out: *mut *mut engram_store,
) -> engram_result {
    // SAFETY: forwarded under this function's contract; a NULL model directory selects the built-in static model.
    unsafe { engram_store_open_with_model(data_dir, data_dir_len, std::ptr::null(), 0, out) }
}

/// Like `engram_store_open`, with the sentence-embedding model in directory `model_dir` (UTF-8,
/// `model_dir_len` bytes; NULL for the built-in static model). The library must be built with the `fastembed`
/// feature and `ORT_DYLIB_PATH` must name ONNX Runtime. A store whose vectors came from another embedder is
/// re-embedded in the background (lexical search meanwhile; progress in `GET /health`).
///
/// Returns the codes of `engram_store_open`, and `ENGRAM_UNAVAILABLE` when the model or ONNX Runtime cannot be
/// loaded (or the build has no model support); `engram_last_error` says what is missing.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_store_open_with_model(
    data_dir: *const c_char,
    data_dir_len: usize,
    model_dir: *const c_char,
    model_dir_len: usize,
    out: *mut *mut engram_store,
) -> engram_result {
    let choice = || {
        if model_dir.is_null() {
            return Ok(crate::embed::EmbedderChoice::Builtin);
        }
        // SAFETY: pointer and length come from the caller, per this function's contract.
        unsafe { str_arg(model_dir, model_dir_len, "model_dir") }
            .map(|m| crate::embed::EmbedderChoice::ModelDir(m.into()))
    };
    // SAFETY: forwarded under this function's contract.
    unsafe { open_with(data_dir, data_dir_len, out, choice, || Ok(None), || Ok(None)) }
}

/// Like `engram_store_open`, for a store encrypted at rest (docs/security.md), or to create one encrypted: the
/// key is `key_kind` with `key` (`key_len` bytes):
///
/// * `ENGRAM_KEY_PASSPHRASE`: `key` is the passphrase, UTF-8, 1 to 1,024 bytes (Argon2id, about 0.15 s);
/// * `ENGRAM_KEY_FILE`: `key` is the path of a key file, UTF-8 (32 bytes to 64 KiB of random data);
/// * `ENGRAM_KEY_KEYCHAIN`: the key is in the OS keychain; `key` is NULL and `key_len` 0.
///
/// The caller owns `key`: Engram reads it during the call only, keeps no pointer to it, and wipes its own copy
/// of the passphrase when done; the caller should wipe its buffer after the call returns. A store file that
/// does not exist yet is created encrypted with this key.
///
/// Returns the codes of `engram_store_open`, and `ENGRAM_WRONG_KEY` when the key does not open the store (the
/// file is unchanged), `ENGRAM_CONFLICT` when the store is not encrypted, `ENGRAM_INVALID_INPUT` for an
/// unknown `key_kind`, an empty passphrase or a key file too short.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_store_open_encrypted(
    data_dir: *const c_char,
    data_dir_len: usize,
    key_kind: i32,
    key: *const u8,
    key_len: usize,
    out: *mut *mut engram_store,
) -> engram_result {
    let encryption = || {
        use crate::storage::crypt::{Encryption, KeySource};
        let text = |what: &str| -> std::result::Result<String, engram_result> {
            // SAFETY: pointer and length come from the caller, per this function's contract.
            unsafe { str_arg(key.cast::<c_char>(), key_len, what) }.map(str::to_string)
        };
        let source = match key_kind {
            ENGRAM_KEY_PASSPHRASE => {
                if key_len > 1024 {
                    set_error("the passphrase is longer than 1,024 bytes");
                    return Err(ENGRAM_INVALID_INPUT);
                }
                KeySource::Passphrase(secrecy::SecretString::from(text("key")?))
            }
            ENGRAM_KEY_FILE => KeySource::KeyFile(text("key")?.into()),
            ENGRAM_KEY_KEYCHAIN => KeySource::Keychain,
            other => {
                set_error(format!("key_kind {other} is none of ENGRAM_KEY_PASSPHRASE, _FILE, _KEYCHAIN"));
                return Err(ENGRAM_INVALID_INPUT);
            }
        };
        Ok(Some(Encryption::new(source)))
    };
    let builtin = || Ok(crate::embed::EmbedderChoice::Builtin);
    // SAFETY: forwarded under this function's contract.
    unsafe { open_with(data_dir, data_dir_len, out, builtin, || Ok(None), encryption) }
}

/// Like `engram_store_open`, with the store's records in the PostgreSQL database at `database_url` (UTF-8,
/// `database_url_len` bytes: `postgres://user:password@host/db` or `host=/run/postgresql user=engram
/// dbname=engram`) instead of `<data_dir>/engram.redb`; `data_dir` still holds local files (saved graphs,
/// exports). The built-in static model embeds. The library must be built with the `postgres` feature.
///
/// Returns the codes of `engram_store_open`; `ENGRAM_INVALID_INPUT` for a URL that does not parse;
/// `ENGRAM_UNREACHABLE` when the server cannot be reached or refuses the login (`engram_last_error` names
/// what failed); `ENGRAM_UNAVAILABLE` in a build without the `postgres` feature; `ENGRAM_LOCKED` when another
/// process has the store open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_store_open_database(
    data_dir: *const c_char,
    data_dir_len: usize,
    database_url: *const c_char,
    database_url_len: usize,
    out: *mut *mut engram_store,
) -> engram_result {
    let url = || {
        // SAFETY: pointer and length come from the caller, per this function's contract.
        unsafe { str_arg(database_url, database_url_len, "database_url") }.map(|u| Some(u.to_string()))
    };
    // SAFETY: forwarded under this function's contract.
    unsafe { open_with(data_dir, data_dir_len, out, || Ok(crate::embed::EmbedderChoice::Builtin), url, || Ok(None)) }
}

/// Opens the store in `data_dir` with the embedder `choice` gives, and writes the handle to `*out`.
///
/// # Safety
/// `data_dir` points to `data_dir_len` readable bytes (or is NULL); `out` is NULL or writable.
unsafe fn open_with(
    data_dir: *const c_char,
    data_dir_len: usize,
    out: *mut *mut engram_store,
    choice: impl FnOnce() -> std::result::Result<crate::embed::EmbedderChoice, engram_result>,
    database_url: impl FnOnce() -> std::result::Result<Option<String>, engram_result>,
    encryption: impl FnOnce() -> std::result::Result<Option<crate::storage::crypt::Encryption>, engram_result>,
) -> engram_result {
    guard(|| {
        if out.is_null() {
            set_error("out is NULL");
            return ENGRAM_NULL_PARAMETER;
        }
        // SAFETY: pointer and length come from the caller, per the calling function's contract.
        let dir = match unsafe { str_arg(data_dir, data_dir_len, "data_dir") } {
            Ok(d) => d,
            Err(code) => return code,
        };
        let choice = match choice() {
            Ok(c) => c,
            Err(code) => return code,
        };
        let database_url = match database_url() {
            Ok(u) => u,
            Err(code) => return code,
        };
        let encryption = match encryption() {
            Ok(e) => e,
            Err(code) => return code,
        };
        let selected = match crate::embed::select(&choice) {
            Ok(s) => s,
            Err(e) => return fail(&e),
        };
        let mut config = StoreConfig::new(dir).embedder(selected.embedder);
        config.database_url = database_url;
        config.encryption = encryption;
        match KnowledgeStore::open(config) {
            Ok(store) => {
                let info = ServiceInfo { embedding_fallback: selected.fallback, ..ServiceInfo::default() };
                let handle = Box::new(engram_store { api: Api::new(Arc::new(store), info) });
                // SAFETY: `out` is non-NULL and writable per the contract.
                unsafe { *out = Box::into_raw(handle) };
                ENGRAM_OK
            }
            Err(e) => fail(&e),
        }
    })
}

/// Like `engram_store_open`, for a store whose vectors come from the caller: `dim` floats per vector
/// (1..=4096), given as `embedding` on `POST /memories` and `PATCH /memories/{id}` and as `query_embedding` on
/// `POST /memories/search` through `engram_request`. A bad vector is a 422 response naming the field, and
/// nothing is stored.
///
/// Returns the codes of `engram_store_open`, and `ENGRAM_INVALID_INPUT` when `dim` is out of range.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_store_open_external(
    data_dir: *const c_char,
    data_dir_len: usize,
    dim: usize,
    out: *mut *mut engram_store,
) -> engram_result {
    // SAFETY: forwarded under this function's contract.
    let external = || Ok(crate::embed::EmbedderChoice::External(dim));
    // SAFETY: forwarded under this function's contract.
    unsafe { open_with(data_dir, data_dir_len, out, external, || Ok(None), || Ok(None)) }
}

/// Closes a store and frees the handle. NULL is accepted and ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_store_close(store: *mut engram_store) {
    if store.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `store` came from `engram_store_open` and is not used after this call.
        drop(unsafe { Box::from_raw(store) });
    }));
}

/// Runs one API request in-process, exactly as the HTTP server would (without its key and host checks):
/// `method` (`GET`, `POST`, `PATCH`, `PUT`, `DELETE`), `target` (path with optional `?query`, percent-encoded),
/// `body` (JSON bytes, may be NULL when `body_len` is 0). Writes a response to `*out`; API errors (404, 422...)
/// are responses with that status, not failures of this call.
///
/// Returns `ENGRAM_OK`, `ENGRAM_NULL_PARAMETER`, `ENGRAM_INVALID_UTF8` (method or target) or `ENGRAM_PANIC`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_request(
    store: *const engram_store,
    method: *const c_char,
    method_len: usize,
    target: *const c_char,
    target_len: usize,
    body: *const u8,
    body_len: usize,
    out: *mut *mut engram_response,
) -> engram_result {
    guard(|| {
        if store.is_null() || out.is_null() || (body.is_null() && body_len > 0) {
            set_error("store, out, or body (with a non-zero length) is NULL");
            return ENGRAM_NULL_PARAMETER;
        }
        // SAFETY: arguments follow this function's contract.
        let (method, target) =
            match unsafe { (str_arg(method, method_len, "method"), str_arg(target, target_len, "target")) } {
                (Ok(m), Ok(t)) => (m, t),
                (Err(c), _) | (_, Err(c)) => return c,
            };
        let body: &[u8] = if body_len == 0 {
            &[]
        } else {
            // SAFETY: non-NULL with `body_len` readable bytes per the contract.
            unsafe { std::slice::from_raw_parts(body, body_len) }
        };
        // SAFETY: `store` came from `engram_store_open` and is still open.
        let s = unsafe { &*store };
        let resp = s.api.handle(ApiRequest::from_target(method, target, body));
        let status = resp.status;
        let mut bytes = match resp.into_bytes() {
            Ok(b) => b,
            Err(e) => return fail(&e),
        };
        bytes.push(0);
        // SAFETY: `out` is non-NULL and writable.
        unsafe { *out = Box::into_raw(Box::new(engram_response { status, body: bytes })) };
        ENGRAM_OK
    })
}

/// The HTTP-style status of a response (200, 404, 422...); 0 for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_response_status(resp: *const engram_response) -> u16 {
    if resp.is_null() {
        return 0;
    }
    // SAFETY: a live response from `engram_request`.
    unsafe { (*resp).status }
}

/// The JSON body of a response, NUL-terminated, valid until `engram_response_free`. Writes its length without
/// the NUL to `*len` when `len` is not NULL. Returns NULL for a NULL response.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_response_body(resp: *const engram_response, len: *mut usize) -> *const c_char {
    if resp.is_null() {
        return std::ptr::null();
    }
    // SAFETY: a live response from `engram_request`.
    let r = unsafe { &*resp };
    if !len.is_null() {
        // SAFETY: non-NULL and writable per the contract.
        unsafe { *len = r.body.len().saturating_sub(1) };
    }
    r.body.as_ptr().cast()
}

/// Frees a response. NULL is accepted and ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_response_free(resp: *mut engram_response) {
    if !resp.is_null() {
        // SAFETY: `resp` came from `engram_request` and is not used after this call.
        drop(unsafe { Box::from_raw(resp) });
    }
}

/// Copies the message of the calling thread's last failed call into `buf` (`buf_len` bytes, NUL-terminated,
/// truncated if needed). Returns the full message length in bytes without the NUL, so a caller can size a
/// buffer; 0 when there was no error. `buf` may be NULL to ask only for the length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn engram_last_error(buf: *mut c_char, buf_len: usize) -> usize {
    LAST_ERROR.with(|e| {
        let msg = e.borrow();
        if !buf.is_null() && buf_len > 0 {
            let n = msg.len().min(buf_len - 1);
            // SAFETY: `buf` has `buf_len` writable bytes per the contract; n < buf_len.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        msg.len()
    })
}

/// The version string `engram_version` returns.
const VERSION: &std::ffi::CStr =
    match std::ffi::CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };

/// The library version, a static NUL-terminated string (never NULL).
#[unsafe(no_mangle)]
pub extern "C" fn engram_version() -> &'static c_char {
    // A reference has the ABI of a pointer that is never NULL: cbindgen writes `const char *_Nonnull` for Swift.
    // SAFETY: `VERSION` is a 'static C string of at least its NUL byte; its first character lives as long.
    unsafe { &*VERSION.as_ptr() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_codes_match_the_error_table() {
        for (code, kind) in [
            (ENGRAM_INVALID_INPUT, ErrorKind::InvalidInput),
            (ENGRAM_NOT_FOUND, ErrorKind::NotFound),
            (ENGRAM_CONFLICT, ErrorKind::Conflict),
            (ENGRAM_LOCKED, ErrorKind::Locked),
            (ENGRAM_IO, ErrorKind::Io),
            (ENGRAM_STORAGE_FULL, ErrorKind::StorageFull),
            (ENGRAM_CORRUPT, ErrorKind::Corrupt),
            (ENGRAM_INTERNAL, ErrorKind::Internal),
            (ENGRAM_UNAVAILABLE, ErrorKind::Unavailable),
            (ENGRAM_NOT_IMPLEMENTED, ErrorKind::NotImplemented),
            (ENGRAM_TOO_MANY_REQUESTS, ErrorKind::TooManyRequests),
            (ENGRAM_TIMEOUT, ErrorKind::Timeout),
            (ENGRAM_UNREACHABLE, ErrorKind::Unreachable),
            (ENGRAM_UPSTREAM_UNREACHABLE, ErrorKind::UpstreamUnreachable),
            (ENGRAM_UPSTREAM_TIMEOUT, ErrorKind::UpstreamTimeout),
        ] {
            assert_eq!(code, kind.row().c_code, "{kind:?}");
        }
    }
}
