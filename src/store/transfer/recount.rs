//! The recount after an import or a bulk change: label usage, entity mention counts and RELATES_TO weights of
//! a space, from its edges.

use crate::error::Result;
use crate::store::{entity, label};
use std::collections::HashMap;

/// Recomputes what follows from the edges of `space`: label usage counts, entity mention counts and
/// RELATES_TO weights (memories mentioning both entities).
pub(super) fn recount(txn: &crate::storage::WriteTx, space: &str) -> Result<()> {
    let lm = label::label_memories(txn)?;
    let mut labels = label::labels(txn)?;
    for (id, mut l) in labels.in_space(space)? {
        let n = crate::store::range_prefix2_count(&lm, space, &id)?;
        if l.usage_count != n {
            l.usage_count = n;
            labels.put((space, id.as_str()), &l)?;
        }
    }
    let em = entity::entity_memories(txn)?;
    let mut ents = entity::entities(txn)?;
    for (id, mut e) in ents.in_space(space)? {
        let n = crate::store::range_prefix2_count(&em, space, &id)?;
        if e.mention_count != n {
            e.mention_count = n;
            ents.put((space, id.as_str()), &e)?;
        }
    }
    // RELATES_TO from MENTIONS: every pair of entities a memory mentions, both directions.
    let mentions = entity::mentions(txn)?;
    let mut weights: HashMap<(String, String), u64> = HashMap::new();
    let mut cur_mem: Option<String> = None;
    let mut group: Vec<String> = Vec::new();
    let flush = |group: &mut Vec<String>, weights: &mut HashMap<(String, String), u64>| {
        for a in group.iter() {
            for b in group.iter() {
                if a != b {
                    *weights.entry((a.clone(), b.clone())).or_default() += 1;
                }
            }
        }
        group.clear();
    };
    entity::each_mention_in(&mentions, space, |m, e| {
        if cur_mem.as_deref() != Some(m) {
            flush(&mut group, &mut weights);
            cur_mem = Some(m.to_string());
        }
        group.push(e.to_string());
    })?;
    flush(&mut group, &mut weights);
    let mut rt = entity::relates_to(txn)?;
    rt.retain_in((space, "", "")..(space, "\u{10ffff}", ""), |_, _| false)?;
    for ((a, b), w) in weights {
        rt.put((space, a.as_str(), b.as_str()), w)?;
    }
    Ok(())
}
