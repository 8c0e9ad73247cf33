//! redb's errors as Engram's: the kind decides the HTTP status, C code and retryability (`crate::error`).

use crate::error::{Error, ErrorKind};

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
        // A block of an encrypted store that failed authentication: corruption, named.
        if let redb::StorageError::Io(io) = &e
            && let Some(damage) = crate::storage::crypt::Damage::of(io)
        {
            return Error::new(ErrorKind::Corrupt, damage.to_string()).with_source(e);
        }
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
            redb::Error::Io(io) if crate::storage::crypt::Damage::of(&io).is_some() => {
                Error::new(ErrorKind::Corrupt, "a block of the encrypted store failed authentication").with_source(io)
            }
            redb::Error::Io(io) => {
                let kind =
                    if io.kind() == std::io::ErrorKind::StorageFull { ErrorKind::StorageFull } else { ErrorKind::Io };
                Error::new(kind, "storage operation failed").with_source(io)
            }
            other => Error::new(ErrorKind::Internal, "storage operation failed").with_source(other),
        }
    }
}
