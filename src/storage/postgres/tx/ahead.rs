//! Read-ahead: keys of several kinds asked for before their reads, fetched in one `UNION ALL` statement.

use super::*;

/// How many value columns of each of [`SLOT_TYPES`] the widest of `asks` has: a read-ahead statement's slots.
pub(super) fn slot_counts(asks: &[Ahead]) -> [usize; SLOT_TYPES.len()] {
    let mut most = [0usize; SLOT_TYPES.len()];
    for a in asks {
        for (s, t) in SLOT_TYPES.iter().enumerate() {
            most[s] = most[s].max(a.values.iter().filter(|v| *v == t).count());
        }
    }
    most
}

/// The first slot column of each of [`SLOT_TYPES`], counted after the statement's two leading columns.
pub(super) fn slot_bases(asks: &[Ahead]) -> [usize; SLOT_TYPES.len()] {
    let counts = slot_counts(asks);
    let mut bases = [0usize; SLOT_TYPES.len()];
    for s in 1..SLOT_TYPES.len() {
        bases[s] = bases[s - 1] + counts[s - 1];
    }
    bases
}

/// The read-ahead statement of `asks` and its parameters: for ask `n`, `SELECT n, q.i, <slots> FROM
/// unnest(<key arrays>) WITH ORDINALITY AS q(p0, .., i) JOIN "<kind>" t ON t.k0 = q.p0 AND ..`, the branches
/// joined by `UNION ALL`. Each row gives the ask, the key's index (from 1) and the value columns in typed
/// slots (`NULL` in the slots the kind does not use), since the branches of a union share their columns.
pub(super) fn ahead_sql(asks: &[Ahead]) -> (String, Vec<Box<dyn ToSql + Sync>>) {
    let counts = slot_counts(asks);
    let mut params: Vec<Box<dyn ToSql + Sync>> = Vec::new();
    let mut branches = Vec::with_capacity(asks.len());
    for (n, a) in asks.iter().enumerate() {
        let parts = a.keys[0].len();
        let mut slots = Vec::new();
        for (s, t) in SLOT_TYPES.iter().enumerate() {
            let cols: Vec<usize> = (0..a.values.len()).filter(|&i| a.values[i] == *t).collect();
            for j in 0..counts[s] {
                slots.push(match cols.get(j) {
                    Some(c) => format!(", t.v{c}"),
                    None => format!(", NULL::{t}"),
                });
            }
        }
        let join = (0..parts).map(|i| format!("t.k{i} = q.p{i}")).collect::<Vec<_>>().join(" AND ");
        branches.push(format!(
            "SELECT {n}::int4, q.i{} FROM unnest({}) WITH ORDINALITY AS q({}, i) JOIN \"{}\" t ON {join}",
            slots.concat(),
            array_params(&a.keys[0], params.len() + 1),
            list("p", parts),
            a.table,
        ));
        params.extend(arrays(a.keys.clone()));
    }
    (branches.join(" UNION ALL "), params)
}

/// Keys of one kind asked for ahead of their reads ([`PgTx::read_ahead`]).
pub(super) struct Ahead {
    pub(super) table: &'static str,
    /// The SQL types of the kind's value columns (`tables::ALL`).
    pub(super) values: &'static [&'static str],
    pub(super) keys: Vec<Vec<SqlValue>>,
}

/// The SQL types of value columns a read-ahead statement has slots for, in slot order.
pub(super) const SLOT_TYPES: [&str; 4] = ["text", "bigint", "double precision", "bytea"];
