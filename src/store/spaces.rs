//! Spaces: create and list. The `default` space always exists.

use redb::{ReadableDatabase, ReadableTable};

use super::tables::*;
use super::types::NewSpace;
use super::{KnowledgeStore, schema};
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Space, SpaceUsage, Timestamp};

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

impl KnowledgeStore {
    /// Creates a space. Its id is the slug of its name (`"Work Notes"` -> `work-notes`).
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`]: name empty, over 100 characters, or without any letter or digit.
    /// * [`ErrorKind::Conflict`] (`space_exists`): a space with that id exists.
    pub fn create_space(&self, new: NewSpace) -> Result<Space> {
        let name = new.name.trim().to_string();
        let id = space_slug(&name);
        if name.is_empty() || name.chars().count() > 100 || id.is_empty() {
            return Err(Error::invalid(vec![FieldError::new(
                &["body", "name"],
                "name_invalid",
                "space names are 1..=100 characters with at least one letter or digit",
                name.into(),
            )]));
        }
        let space = Space {
            id: id.clone(),
            key: id.clone(),
            name,
            aliases: new.aliases.into_iter().map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect(),
            description: new.description.unwrap_or_default(),
            icon: new.icon.unwrap_or_default(),
            instructions: new.instructions.unwrap_or_default(),
            shared_space_ids: vec![],
            default_retrieval_mode: "strict".into(),
            is_default: false,
            usage: SpaceUsage::default(),
            observed: false,
            has_profile: false,
            created_at: Timestamp::now(),
        };
        let _w = self.writer.lock();
        self.write_txn(|txn| {
            let mut t = txn.open_table(SPACES)?;
            if t.get(id.as_str())?.is_some() {
                return Err(
                    Error::new(ErrorKind::Conflict, format!("space '{id}' already exists")).with_code("space_exists")
                );
            }
            t.insert(id.as_str(), schema::encode(&space)?.as_slice())?;
            Ok(())
        })?;
        self.apply(vec![]);
        self.index.write().spaces.entry(id).or_insert_with(|| self.new_space_index());
        Ok(space)
    }

    /// Every space with its usage counts, `default` first, then by name.
    pub fn list_spaces(&self) -> Result<Vec<Space>> {
        let rtx = self.db.begin_read()?;
        let t = rtx.open_table(SPACES)?;
        let mut out: Vec<Space> = Vec::new();
        for row in t.iter()? {
            let (_, v) = row?;
            out.push(schema::decode(v.value())?);
        }
        let state = self.index.read();
        for s in &mut out {
            s.usage.memories = state.spaces.get(&s.id).map_or(0, |si| si.catalog.len() as u64);
        }
        out.sort_by(|a, b| b.is_default.cmp(&a.is_default).then_with(|| a.name.cmp(&b.name)));
        Ok(out)
    }
}
