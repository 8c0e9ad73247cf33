//! Spaces: create, list, read, resolve by name or alias, update, delete (refused while non-empty unless
//! cascading), and bulk moves of memories between spaces. The `default` space always exists and cannot be
//! deleted. Isolation lives in the storage keys: every record's key starts with its space id, and reads go
//! through one space's key range; a space's `sharedSpaceIds` only widen its searches. The service is
//! [`Spaces`] (`store.spaces()`).

use crate::storage::Readable;
use std::collections::BTreeSet;

use crate::error::ErrorCode;
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Space, SpaceUsage, Timestamp};
use crate::store::memories::MemoryWrite;
use crate::store::types::{MoveFailure, MoveReport, MoveSelection, NewSpace, SpacePatch};
use crate::store::{DEFAULT_SPACE, KnowledgeStore, StoredMemory};
use crate::store::{memory, space, thread, working_memory};

/// The id of a space named `name`: lowercase alphanumerics with single `-` between words.
pub fn space_slug(name: &str) -> String {
    let mut out = String::new();
    for ch in name.trim().chars() {
        if ch.is_alphanumeric() {
            out.extend(ch.to_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// Most memories one bulk move takes.
pub const MAX_BULK_MOVE: usize = 10_000;
/// Most aliases of a space.
pub const MAX_ALIASES: usize = 32;

fn invalid(field: &str, msg: &str, input: serde_json::Value) -> FieldError {
    FieldError::field(&[field], "value_error", msg, input)
}

fn clean_aliases(a: Vec<String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    a.into_iter().map(|x| x.trim().to_string()).filter(|x| !x.is_empty() && seen.insert(x.to_lowercase())).collect()
}

fn space_not_found(r: &str) -> Error {
    Error::not_found(ErrorCode::SpaceNotFound, format!("space '{r}' does not exist"))
}

/// Checks shared ids, aliases and retrieval mode of `s` against the other spaces `others`.
fn check_space(s: &Space, others: &[Space]) -> Result<()> {
    let mut errs = Vec::new();
    if s.aliases.len() > MAX_ALIASES || s.aliases.iter().any(|a| a.chars().count() > 100) {
        errs.push(invalid("aliases", "at most 32 aliases of at most 100 characters", serde_json::Value::Null));
    }
    for id in &s.shared_space_ids {
        if id == &s.id || !others.iter().any(|o| &o.id == id) {
            errs.push(invalid("sharedSpaceIds", "shared spaces must be other existing spaces", id.clone().into()));
        }
    }
    let m = &s.default_retrieval_mode;
    if m.is_empty() || m.len() > 32 || !m.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == '-') {
        errs.push(invalid("defaultRetrievalMode", "a lowercase word such as `strict`", m.clone().into()));
    }
    for f in [&s.description, &s.instructions] {
        if f.chars().count() > 10_000 {
            errs.push(invalid(
                "description",
                "description and instructions are at most 10,000 characters",
                serde_json::Value::Null,
            ));
        }
    }
    if !errs.is_empty() {
        return Err(Error::invalid(errs));
    }
    // Names and aliases resolve to one space only.
    let mine: Vec<String> =
        std::iter::once(s.name.to_lowercase()).chain(s.aliases.iter().map(|a| a.to_lowercase())).collect();
    for o in others.iter().filter(|o| o.id != s.id) {
        let theirs: Vec<String> = [o.id.clone(), o.name.to_lowercase()]
            .into_iter()
            .chain(o.aliases.iter().map(|a| a.to_lowercase()))
            .collect();
        if let Some(clash) = mine.iter().find(|m| theirs.contains(m)) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("'{clash}' already names or aliases space '{}'", o.id),
            )
            .with_code(ErrorCode::SpaceNameTaken));
        }
    }
    Ok(())
}

/// The spaces of a store, borrowed from the store (`store.spaces()`).
///
/// Owns: the `space` records (one per space: name, aliases, shared space ids, dates) and the moves of memories
/// between spaces.
#[derive(Clone, Copy)]
pub struct Spaces<'s> {
    pub(crate) store: &'s KnowledgeStore,
}

impl Spaces<'_> {
    /// Creates a space. Its id is `new.id` or the slug of its name (`"Work Notes"` -> `work-notes`).
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: name empty, over 100 characters, or without any letter or digit; an id
    ///   that is not its own slug; unknown shared spaces; over 32 aliases; a bad retrieval mode.
    /// * [`ErrorKind::Conflict`]: `space_exists` (the id is taken), `space_name_taken` (the name or an alias
    ///   names another space).
    pub fn create(&self, new: NewSpace) -> Result<Space> {
        let name = new.name.trim().to_string();
        let id = new.id.clone().filter(|i| !i.trim().is_empty()).unwrap_or_else(|| space_slug(&name));
        if name.is_empty() || name.chars().count() > 100 || id.is_empty() {
            return Err(Error::invalid(vec![FieldError::field(
                &["name"],
                "name_invalid",
                "space names are 1..=100 characters with at least one letter or digit",
                name.into(),
            )]));
        }
        if space_slug(&id) != id || id.len() > 100 {
            return Err(Error::invalid_value(
                &["id"],
                "id_invalid",
                "space ids are lowercase letters and digits with single `-` between words, at most 100 bytes",
                id.into(),
            ));
        }
        let space = Space {
            id: id.clone(),
            key: id.clone(),
            name,
            aliases: clean_aliases(new.aliases),
            description: new.description.unwrap_or_default(),
            icon: new.icon.unwrap_or_default(),
            instructions: new.instructions.unwrap_or_default(),
            shared_space_ids: new.shared_space_ids.into_iter().collect::<BTreeSet<_>>().into_iter().collect(),
            default_retrieval_mode: new.default_retrieval_mode.unwrap_or_else(|| "strict".into()),
            is_default: false,
            usage: SpaceUsage::default(),
            observed: false,
            has_profile: false,
            created_at: Timestamp::now(),
        };
        self.store.core.write(|txn, _| {
            let mut t = space::spaces(txn)?;
            if t.get(id.as_str())?.is_some() {
                return Err(Error::new(ErrorKind::Conflict, format!("space '{id}' already exists"))
                    .with_code(ErrorCode::SpaceExists));
            }
            check_space(&space, &stored_spaces(&t)?)?;
            t.put(id.as_str(), &space)?;
            Ok(())
        })?;
        self.store.core.apply(vec![]);
        self.store.core.index.write().spaces.entry(id).or_insert_with(|| self.store.core.new_space_index());
        Ok(space)
    }

    /// Every space with its usage counts, `default` first, then by name.
    ///
    /// # Errors
    /// Storage errors.
    pub fn list(&self) -> Result<Vec<Space>> {
        let rtx = self.store.core.db.read()?;
        let mut out = stored_spaces(&space::spaces(&rtx)?)?;
        for s in &mut out {
            self.fill_usage(&rtx, s)?;
        }
        out.sort_by(|a, b| b.is_default.cmp(&a.is_default).then_with(|| a.name.cmp(&b.name)));
        Ok(out)
    }

    fn fill_usage(&self, rtx: &crate::storage::ReadTx, s: &mut Space) -> Result<()> {
        s.usage.memories = self.store.core.live_memories(rtx, &s.id)?;
        let threads = thread::threads(&rtx)?;
        s.usage.threads = threads.count_in_space(&s.id)? as u64;
        let wm = working_memory::days(&rtx)?;
        s.usage.has_working_memory = wm.count_in_space(&s.id)? > 0;
        Ok(())
    }

    /// One space by exact id, with usage counts.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn get(&self, id: &str) -> Result<Space> {
        let rtx = self.store.core.db.read()?;
        let mut s: Space = space::spaces(&rtx)?.get(id)?.ok_or_else(|| space_not_found(id))?;
        self.fill_usage(&rtx, &mut s)?;
        Ok(s)
    }

    /// The space a reference names: an exact id first, then a name or alias compared without case, then the
    /// slug of the reference as an id.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn resolve(&self, reference: &str) -> Result<Space> {
        let r = reference.trim();
        let spaces = self.list()?;
        let lower = r.to_lowercase();
        let slug = space_slug(r);
        spaces
            .iter()
            .find(|s| s.id == r)
            .or_else(|| spaces.iter().find(|s| s.name.to_lowercase() == lower))
            .or_else(|| spaces.iter().find(|s| s.aliases.iter().any(|a| a.to_lowercase() == lower)))
            .or_else(|| spaces.iter().find(|s| s.id == slug))
            .cloned()
            .ok_or_else(|| space_not_found(r))
    }

    /// Changes a space's profile (never its id).
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`); [`ErrorKind::InvalidInput`] and [`ErrorKind::Conflict`] as
    /// for [`Spaces::create`](crate::store::Spaces::create).
    pub fn update(&self, id: &str, patch: SpacePatch) -> Result<Space> {
        if let Some(n) = &patch.name
            && (n.trim().is_empty() || n.trim().chars().count() > 100)
        {
            return Err(Error::invalid_value(
                &["name"],
                "name_invalid",
                "space names are 1..=100 characters",
                n.clone().into(),
            ));
        }
        self.store.core.write(|txn, _| {
            let mut t = space::spaces(txn)?;
            let mut s: Space = t.get(id)?.ok_or_else(|| space_not_found(id))?;
            if let Some(n) = patch.name {
                s.name = n.trim().to_string();
            }
            if let Some(x) = patch.description {
                s.description = x;
            }
            if let Some(x) = patch.icon {
                s.icon = x;
            }
            if let Some(x) = patch.instructions {
                s.instructions = x;
            }
            if let Some(x) = patch.aliases {
                s.aliases = clean_aliases(x);
            }
            if let Some(x) = patch.shared_space_ids {
                s.shared_space_ids = x.into_iter().collect::<BTreeSet<_>>().into_iter().collect();
            }
            if let Some(x) = patch.default_retrieval_mode {
                s.default_retrieval_mode = x;
            }
            check_space(&s, &stored_spaces(&t)?)?;
            t.put(id, &s)?;
            Ok(())
        })?;
        self.get(id)
    }

    /// Deletes a space. Refused while it holds memories, threads or working memory unless `cascade`, which
    /// deletes every record of the space (memories, vectors, postings, labels, threads, messages, entities,
    /// relations, working memory) in one transaction. Other spaces that share it stop sharing it.
    ///
    /// # Errors
    /// * [`ErrorKind::NotFound`] (`space_not_found`).
    /// * [`ErrorKind::Conflict`]: `space_not_empty` (with the counts), `default_space` (the default space).
    pub fn delete(&self, id: &str, cascade: bool) -> Result<Space> {
        if id == DEFAULT_SPACE {
            return Err(Error::new(ErrorKind::Conflict, "the default space cannot be deleted")
                .with_code(ErrorCode::DefaultSpace));
        }
        let space = self.get(id)?;
        self.store.core.write(|txn, _| {
            // Checked inside the deleting transaction, so nothing written meanwhile can be lost.
            let memories = memory::memories(txn)?.count_in_space(id)?;
            let threads = thread::threads(txn)?.count_in_space(id)?;
            let wm = working_memory::days(txn)?.count_in_space(id)? > 0;
            if !cascade && (memories > 0 || threads > 0 || wm) {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "space '{id}' is not empty ({memories} memories, {threads} threads, working memory: {wm}); \
                         move them out or delete with cascade"
                    ),
                )
                .with_code(ErrorCode::SpaceNotEmpty));
            }
            space::drop_space_records(txn, id)?;
            let mut t = space::spaces(txn)?;
            t.remove(id)?;
            for mut other in stored_spaces(&t)? {
                if other.shared_space_ids.iter().any(|s| s == id) {
                    other.shared_space_ids.retain(|s| s != id);
                    t.put(other.id.as_str(), &other)?;
                }
            }
            Ok(())
        })?;
        self.store.core.index.write().spaces.remove(id);
        Ok(space)
    }

    /// Moves memories to `target` (one write transaction), or with `dry_run` only counts them. Vectors move
    /// with their memories (no re-embedding); labels are re-created by name in the target; entity mentions are
    /// re-extracted there; relations of a moved memory are dropped (relations never cross spaces).
    /// Selections over [`MAX_BULK_MOVE`] memories move nothing and report `limit_exceeded`.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`) for the target or a source space.
    pub fn move_memories(&self, selection: &MoveSelection, target: &str, dry_run: bool) -> Result<MoveReport> {
        self.require(target)?;
        let (ids, guard): (Vec<String>, Option<String>) = match selection {
            MoveSelection::Ids { memory_ids, source_space_id } => {
                if let Some(s) = source_space_id {
                    self.require(s)?;
                }
                let mut seen = BTreeSet::new();
                (memory_ids.iter().filter(|i| seen.insert(i.as_str())).cloned().collect(), source_space_id.clone())
            }
            MoveSelection::Space { source_space_id, exclude_memory_ids } => {
                self.require(source_space_id)?;
                let rtx = self.store.core.db.read()?;
                let mems = memory::memories(&rtx)?;
                let mut ids = Vec::new();
                for (id, v) in mems.in_space(source_space_id)? {
                    let sm: StoredMemory = v;
                    if sm.memory.state != crate::model::MemoryState::Forgotten && !exclude_memory_ids.contains(&id) {
                        ids.push(id);
                    }
                }
                (ids, Some(source_space_id.clone()))
            }
        };
        let mut report = MoveReport {
            count: ids.len() as u64,
            source_space_id: guard.clone(),
            target_space_id: target.to_string(),
            ..Default::default()
        };
        if ids.len() > MAX_BULK_MOVE {
            report.limit_exceeded = true;
            report.message = format!("{} memories selected; at most {MAX_BULK_MOVE} move per call", ids.len());
            return Ok(report);
        }
        if dry_run {
            report.message = format!("{} memories would move to '{target}'", ids.len());
            return Ok(report);
        }
        let now = Timestamp::now();
        let (moved, failures) = self.store.core.write(|txn, ops| {
            let base = super::meta::alloc_docnos(txn, ids.len() as u64)?;
            let mut t = MemoryWrite::open(txn)?;
            let mut moved = 0u64;
            let mut failures = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                let (space, sm) = match t.locate(id, guard.as_deref()) {
                    Ok(x) => x,
                    Err(e) => {
                        failures.push(MoveFailure { memory_id: id.clone(), error: e.message().to_string() });
                        continue;
                    }
                };
                if space == target {
                    continue;
                }
                let vector = t.memories.vector(&space, sm.docno)?;
                self.store.memories().move_one(&mut t, space, sm, target, base + i as u64, vector, now, ops)?;
                moved += 1;
            }
            Ok((moved, failures))
        })?;
        report.moved_count = moved;
        report.failed_count = failures.len() as u64;
        report.failures = failures.into_iter().take(100).collect();
        report.message = format!("moved {moved} memories to '{target}'");
        Ok(report)
    }

    /// [`ErrorKind::NotFound`] (`space_not_found`) unless `space` exists.
    ///
    /// # Errors
    /// As described, and storage errors.
    pub fn require(&self, space: &str) -> Result<()> {
        let rtx = self.store.core.db.read()?;
        if space::spaces(&rtx)?.get(space)?.is_none() {
            return Err(Error::not_found(ErrorCode::SpaceNotFound, format!("space '{space}' does not exist")));
        }
        Ok(())
    }
}

fn stored_spaces<T: Readable<&'static str, crate::store::records::Bytes>>(
    t: &super::records::Records<T, &'static str, Space>,
) -> Result<Vec<Space>> {
    t.all()
}
