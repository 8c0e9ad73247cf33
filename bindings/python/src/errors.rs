//! Errors: an [`engram::Error`] as the typed exception of `engram.errors` (one class per error kind group).

use engram::ErrorKind;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};

use crate::convert::*;

/// The Python class of each error kind (classes defined in `engram/errors.py`).
pub(crate) fn class_name(kind: ErrorKind) -> &'static str {
    use ErrorKind::*;
    match kind {
        InvalidInput | BadRequest | PayloadTooLarge | MethodNotAllowed => "InvalidInput",
        NotFound | RouteNotFound => "NotFound",
        Conflict => "Conflict",
        Unauthorized | Forbidden => "Forbidden",
        Locked => "Locked",
        Io => "StorageError",
        StorageFull => "StorageFull",
        Corrupt => "Corrupt",
        WrongKey => "WrongKey",
        Unavailable => "Unavailable",
        NotImplemented => "Unsupported",
        Timeout | UpstreamTimeout => "Timeout",
        Unreachable | UpstreamUnreachable => "Unreachable",
        TooManyRequests | Internal => "InternalError",
        _ => "Error",
    }
}

pub(crate) static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The typed exception for an error of `kind` with `code` (the `error_code` string), `message` and the
/// validation errors `fields` (each `{"loc", "msg", "type", "input", "ctx"}`).
pub(crate) fn typed_error(
    py: Python<'_>,
    kind: ErrorKind,
    code: &str,
    message: &str,
    fields: &[serde_json::Value],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS.get_or_try_init(py, || py.import("engram.errors").map(Bound::unbind))?.bind(py);
        let class = module.getattr(class_name(kind))?;
        let errors = PyList::empty(py);
        for f in fields {
            errors.append(json_to_py(py, f)?)?;
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item("code", code)?;
        kwargs.set_item("status", kind.row().http_status)?;
        kwargs.set_item("retryable", kind.row().retryable)?;
        kwargs.set_item("errors", errors)?;
        let exc = class.call((message,), Some(&kwargs))?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// An [`engram::Error`] as its typed exception.
pub(crate) fn to_py(e: engram::Error) -> PyErr {
    Python::attach(|py| {
        let fields: Vec<serde_json::Value> =
            e.fields().iter().map(|f| serde_json::to_value(f).unwrap_or(serde_json::Value::Null)).collect();
        typed_error(py, e.kind(), e.code(), &e.chain(), &fields)
    })
}

/// `ValueError` for a bad argument the binding checks itself (shape, type), as an `InvalidInput` naming it.
pub(crate) fn invalid(py: Python<'_>, field: &str, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    let detail = serde_json::json!({"loc": [field], "msg": msg, "type": "value_error", "input": null, "ctx": null});
    typed_error(py, ErrorKind::InvalidInput, "validation_error", &format!("{field}: {msg}"), &[detail])
}
