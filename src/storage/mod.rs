//! Storage: where Engram's records live. Today one backend, [`redb`] (one file per store); the PostgreSQL
//! backend of the scale-out design joins it behind the same port (docs/design.md, "The storage port").

pub mod redb;
