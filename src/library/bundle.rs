//! ZIP exports of the library: the markdown wiki and the Open Knowledge Format (OKF v0.2) bundle. Pages are
//! rendered one at a time into a ZIP written to a temporary file in the data directory, which the HTTP server
//! streams and deletes: the bundle is never held in memory whole. Every link is relative to the page, and
//! only to pages inside the bundle (anything else is plain text). See docs/api.md "Exports".

use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use zip::write::SimpleFileOptions;

use super::links::{Linker, link};
use super::markdown::yaml_str;
use crate::embed::fnv1a;
use crate::error::{Error, ErrorKind, Result};
use crate::model::{Entity, Label, MemoryState};
use crate::store::{Graph, KnowledgeStore, LibrarySelection, MemoryView, memory_line};

/// Which bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    /// Markdown wiki: topics, entities, crystals.
    Wiki,
    /// Open Knowledge Format v0.2: also memories by unit type, labels, and `log.md`.
    Okf,
}

/// Export bounds (spec Limits table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportParams {
    /// Entities exported (most mentioned first), 1..=2000, default 500.
    pub entity_limit: usize,
    /// Entities listed per topic page, 1..=30, default 12.
    pub top_per_community: usize,
    /// Mentions per entity page, 1..=100, default 30.
    pub max_mentions_per_entity: usize,
}

impl Default for ExportParams {
    fn default() -> Self {
        ExportParams { entity_limit: 500, top_per_community: 12, max_mentions_per_entity: 30 }
    }
}

/// What a bundle holds; `/library/wiki-export-summary` reports the same numbers.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct ExportCounts {
    /// Topic pages (communities).
    pub topics: u64,
    /// Entity pages.
    pub entities: u64,
    /// Crystal pages.
    pub crystals: u64,
    /// Memory pages (OKF only).
    pub memories: u64,
    /// Label pages (OKF only).
    pub labels: u64,
    /// Concept pages in all (not counting `index.md` and `log.md`).
    pub pages: u64,
    /// Directories (each with an `index.md`).
    pub directories: u64,
}

/// The selection of one export.
type Plan = LibrarySelection;

fn slug(s: &str) -> String {
    let mut out = String::new();
    for ch in s.chars() {
        if ch.is_alphanumeric() {
            out.extend(ch.to_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.chars().count() >= 60 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "page".into() } else { out }
}

/// A unique file name: the slug of `name`, then 8 hex digits of the FNV-1a hash of `key`.
fn file_name(name: &str, key: &str) -> String {
    format!("{}--{:08x}.md", slug(name), fnv1a(key.as_bytes()) as u32)
}

/// Paths of every page in the bundle, relative to its root.
#[derive(Default)]
struct Paths {
    entities: FxHashMap<(String, String), String>,
    crystals: FxHashMap<(String, String), String>,
    topics: FxHashMap<u64, String>,
    memories: FxHashMap<(String, String), String>,
}

/// Links from a page at `depth` directories below the root.
struct BundleLinker<'a> {
    paths: &'a Paths,
    up: String,
}

impl<'a> BundleLinker<'a> {
    fn at(paths: &'a Paths, page: &str) -> Self {
        BundleLinker { paths, up: "../".repeat(page.matches('/').count()) }
    }
    fn rel(&self, p: Option<&String>) -> Option<String> {
        p.map(|p| format!("{}{}", self.up, p))
    }
}

impl Linker for BundleLinker<'_> {
    fn entity(&self, e: &Entity) -> Option<String> {
        self.rel(self.paths.entities.get(&(e.space_id.clone(), e.id.clone())))
    }
    fn crystal(&self, space: &str, id: &str) -> Option<String> {
        self.rel(self.paths.crystals.get(&(space.to_string(), id.to_string())))
    }
    fn topic(&self, id: u64) -> Option<String> {
        self.rel(self.paths.topics.get(&id))
    }
    fn memory(&self, space: &str, id: &str) -> Option<String> {
        self.rel(self.paths.memories.get(&(space.to_string(), id.to_string())))
    }
}

fn okf_status(s: MemoryState) -> &'static str {
    match s {
        MemoryState::Active => "stable",
        _ => "deprecated",
    }
}

impl Graph<'_> {
    fn export_plan(&self, kind: ExportKind, p: &ExportParams) -> Result<Plan> {
        self.store.graph().library(kind == ExportKind::Okf, p.entity_limit)
    }

    /// The counts of the wiki and the OKF bundles [`Graph::export_library`](crate::store::Graph::export_library) would write, from one
    /// selection (the OKF one holds the wiki's).
    ///
    /// # Errors
    /// Storage errors.
    pub fn export_counts(&self, p: &ExportParams) -> Result<(ExportCounts, ExportCounts)> {
        let plan = self.export_plan(ExportKind::Okf, p)?;
        Ok((counts(ExportKind::Wiki, &plan), counts(ExportKind::Okf, &plan)))
    }

    /// Writes the wiki or OKF bundle as a ZIP into a new file under `<data_dir>/tmp/` and returns its path and
    /// counts. The caller streams and deletes the file.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for bounds outside the Limits table; storage and I/O errors (the partial
    /// file is removed).
    pub fn export_library(&self, kind: ExportKind, p: &ExportParams) -> Result<(PathBuf, ExportCounts)> {
        let mut errs = Vec::new();
        for (name, v, lo, hi) in [
            ("entity_limit", p.entity_limit, 1, 2000),
            ("top_per_community", p.top_per_community, 1, 30),
            ("max_mentions_per_entity", p.max_mentions_per_entity, 1, 100),
        ] {
            if !(lo..=hi).contains(&v) {
                errs.push(crate::error::FieldError::field(
                    &[name],
                    "number_out_of_range",
                    format!("{name} is {lo}..={hi}"),
                    v.into(),
                ));
            }
        }
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        let dir = self.store.config().data_dir.join("tmp");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("export-{}.zip", uuid::Uuid::now_v7()));
        match self.write_bundle(kind, p, &path) {
            Ok(c) => Ok((path, c)),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    fn write_bundle(&self, kind: ExportKind, p: &ExportParams, path: &std::path::Path) -> Result<ExportCounts> {
        let plan = self.export_plan(kind, p)?;
        let counts = counts(kind, &plan);
        let paths = bundle_paths(&plan);
        let mut zip = BundleZip::create(path)?;
        let okf = kind == ExportKind::Okf;
        let generator = format!("engram/{}", env!("CARGO_PKG_VERSION"));
        self.write_wiki_pages(&plan, &paths, p, &mut zip)?;
        if okf {
            self.write_okf_memories(&plan, &paths, &generator, &mut zip)?;
            write_okf_labels(&plan, &paths, &mut zip)?;
            zip.put("log.md", &okf_log(&plan, &paths))?;
        }
        zip.put("index.md", &root_index(okf, &generator, &counts))?;
        zip.finish()?;
        Ok(counts)
    }

    /// Topics, entities and crystals: a page each and an index per section.
    fn write_wiki_pages(&self, plan: &Plan, paths: &Paths, p: &ExportParams, zip: &mut BundleZip) -> Result<()> {
        // Topics.
        let mut idx = String::from("# Topics\n\nCommunities of the entity graph (Louvain), heaviest first.\n\n");
        for c in &plan.topics {
            let page = &paths.topics[&c.id];
            let text = self.topic_page(c.id, p.top_per_community, &BundleLinker::at(paths, page))?;
            zip.put(page, &text)?;
            idx.push_str(&format!(
                "* [{}]({}) - {} entities, {} memories\n",
                super::md_label(&c.title),
                page.trim_start_matches("topics/"),
                c.entity_count,
                c.memory_count
            ));
        }
        zip.put("topics/index.md", &idx)?;
        // Entities.
        let mut idx = String::from("# Entities\n\nThe most mentioned entities, most mentioned first.\n\n");
        for e in &plan.entities {
            let page = &paths.entities[&(e.space_id.clone(), e.id.clone())];
            let text = self.entity_page_of(e, p.max_mentions_per_entity, &BundleLinker::at(paths, page))?;
            zip.put(page, &text)?;
            idx.push_str(&format!(
                "* [{}]({}) - {}, {} mentions\n",
                super::md_label(&e.name),
                page.trim_start_matches("entities/"),
                e.entity_type,
                e.mention_count
            ));
        }
        zip.put("entities/index.md", &idx)?;
        // Crystals.
        let mut idx = String::from("# Crystals\n\nWhat several memories say together, with their sources.\n\n");
        for v in &plan.crystals {
            let page = &paths.crystals[&(v.memory.space_id.clone(), v.memory.id.clone())];
            let text = self.crystal_page(&v.memory.id, &BundleLinker::at(paths, page))?;
            zip.put(page, &text)?;
            idx.push_str(&format!(
                "* [{}]({}) - {} sources\n",
                super::md_label(&v.memory.title),
                page.trim_start_matches("crystals/"),
                v.memory.source_unit_count.unwrap_or(0)
            ));
        }
        zip.put("crystals/index.md", &idx)?;
        Ok(())
    }

    /// OKF: memories by unit type, a page each and an index per type.
    fn write_okf_memories(&self, plan: &Plan, paths: &Paths, generator: &str, zip: &mut BundleZip) -> Result<()> {
        // Memories by unit type.
        let mut by_type: BTreeMap<&str, Vec<&MemoryView>> = BTreeMap::new();
        for v in &plan.memories {
            by_type.entry(v.memory.unit_type.as_str()).or_default().push(v);
        }
        let mut top = String::from("# Memories\n\nMemories by unit type.\n\n");
        for (t, list) in &by_type {
            top.push_str(&format!("* [{t}/]({t}/index.md) - {} memories\n", list.len()));
            let mut idx = format!("# {t}\n\n");
            for v in list {
                let page = &paths.memories[&(v.memory.space_id.clone(), v.memory.id.clone())];
                let text = memory_page(self.store, v, &BundleLinker::at(paths, page), generator)?;
                zip.put(page, &text)?;
                let name = page.rsplit('/').next().unwrap_or(page);
                idx.push_str(&format!(
                    "* [{}]({name}) - {}\n",
                    super::md_label(&memory_line(v, 80)),
                    v.memory.created_at.to_rfc3339().chars().take(10).collect::<String>()
                ));
            }
            zip.put(&format!("memories/{t}/index.md"), &idx)?;
        }
        zip.put("memories/index.md", &top)?;
        Ok(())
    }
}

/// The page path of every topic, entity, crystal and memory of the bundle.
fn bundle_paths(plan: &Plan) -> Paths {
    let mut paths = Paths::default();
    for c in &plan.topics {
        paths.topics.insert(c.id, format!("topics/{}", file_name(&format!("{} {}", c.id, c.title), &c.id.to_string())));
    }
    for e in &plan.entities {
        let key = format!("{}/{}", e.space_id, e.id);
        paths.entities.insert((e.space_id.clone(), e.id.clone()), format!("entities/{}", file_name(&e.name, &key)));
    }
    for v in &plan.crystals {
        let key = format!("{}/{}", v.memory.space_id, v.memory.id);
        paths.crystals.insert(
            (v.memory.space_id.clone(), v.memory.id.clone()),
            format!("crystals/{}", file_name(&v.memory.title, &key)),
        );
    }
    for v in &plan.memories {
        let key = format!("{}/{}", v.memory.space_id, v.memory.id);
        let name = if v.memory.title.is_empty() { memory_line(v, 40) } else { v.memory.title.clone() };
        paths.memories.insert(
            (v.memory.space_id.clone(), v.memory.id.clone()),
            format!("memories/{}/{}", v.memory.unit_type.as_str(), file_name(&name, &key)),
        );
    }
    paths
}

/// The ZIP of a bundle being written.
struct BundleZip {
    zip: zip::ZipWriter<std::io::BufWriter<std::fs::File>>,
    opts: SimpleFileOptions,
}

fn zip_failed(e: zip::result::ZipError) -> Error {
    Error::new(ErrorKind::Io, format!("writing the ZIP failed: {e}"))
}

impl BundleZip {
    fn create(path: &std::path::Path) -> Result<Self> {
        let file = std::fs::File::create(path)?;
        let zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
        Ok(BundleZip { zip, opts: SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated) })
    }

    fn put(&mut self, name: &str, text: &str) -> Result<()> {
        self.zip.start_file(name, self.opts).map_err(zip_failed)?;
        self.zip.write_all(text.as_bytes())?;
        Ok(())
    }

    fn finish(self) -> Result<()> {
        let mut w = self.zip.finish().map_err(zip_failed)?;
        w.flush()?;
        Ok(())
    }
}

/// OKF: a page per label listing its memories, and the labels index.
fn write_okf_labels(plan: &Plan, paths: &Paths, zip: &mut BundleZip) -> Result<()> {
    let label_path = |l: &Label| format!("labels/{}", file_name(&l.name, &format!("{}/{}", l.space_id, l.id)));
    // Labels.
    let mut idx = String::from("# Labels\n\n");
    let mut by_label: FxHashMap<(String, String), Vec<&MemoryView>> = FxHashMap::default();
    for v in &plan.memories {
        for l in &v.label_ids {
            by_label.entry((v.memory.space_id.clone(), l.clone())).or_default().push(v);
        }
    }
    for l in &plan.labels {
        let page = label_path(l);
        let linker = BundleLinker::at(paths, &page);
        let mut text = format!(
            "---\ntype: Label\ntitle: {}\nlabel_id: {}\nspace_id: {}\nusage_count: {}\ndescription: {}\n---\n\n# {}\n\n",
            yaml_str(&l.name),
            yaml_str(&l.id),
            yaml_str(&l.space_id),
            l.usage_count,
            yaml_str(&format!("Label {} on {} memories", l.name, l.usage_count)),
            l.name
        );
        if !l.description.is_empty() {
            text.push_str(&format!("{}\n\n", l.description));
        }
        text.push_str("## Memories\n\n");
        for v in by_label.get(&(l.space_id.clone(), l.id.clone())).into_iter().flatten() {
            text.push_str(&format!(
                "* {}\n",
                link(&memory_line(v, 100), linker.memory(&v.memory.space_id, &v.memory.id))
            ));
        }
        zip.put(&page, &text)?;
        idx.push_str(&format!(
            "* [{}]({}) - {} memories\n",
            super::md_label(&l.name),
            page.trim_start_matches("labels/"),
            l.usage_count
        ));
    }
    zip.put("labels/index.md", &idx)?;
    Ok(())
}

/// OKF `log.md`: creations by day, newest first (at most 200 a day listed).
fn okf_log(plan: &Plan, paths: &Paths) -> String {
    // log.md: creations by day, newest first.
    let mut days: BTreeMap<String, Vec<&MemoryView>> = BTreeMap::new();
    for v in &plan.memories {
        days.entry(v.memory.created_at.to_rfc3339().chars().take(10).collect()).or_default().push(v);
    }
    let mut log = String::from("# Log\n\n");
    for (day, list) in days.iter().rev() {
        log.push_str(&format!("## {day}\n\n"));
        for v in list.iter().take(200) {
            log.push_str(&format!(
                "* **Creation**: {}\n",
                link(&memory_line(v, 80), BundleLinker::at(paths, "log.md").memory(&v.memory.space_id, &v.memory.id))
            ));
        }
        if list.len() > 200 {
            log.push_str(&format!("* **Creation**: and {} more memories\n", list.len() - 200));
        }
        log.push('\n');
    }
    log
}

/// The bundle's `index.md` (with the OKF version marker for OKF).
fn root_index(okf: bool, generator: &str, counts: &ExportCounts) -> String {
    let at = crate::model::Timestamp::now().to_rfc3339();
    // Root index.
    let mut root = String::new();
    if okf {
        root.push_str("---\nokf_version: \"0.2\"\n---\n\n");
    }
    root.push_str(&format!("# Engram library\n\nExported by {generator} at {at}.\n\n## Sections\n\n"));
    root.push_str(&format!("* [topics/](topics/index.md) - {} topics\n", counts.topics));
    root.push_str(&format!("* [entities/](entities/index.md) - {} entities\n", counts.entities));
    root.push_str(&format!("* [crystals/](crystals/index.md) - {} crystals\n", counts.crystals));
    if okf {
        root.push_str(&format!("* [memories/](memories/index.md) - {} memories\n", counts.memories));
        root.push_str(&format!("* [labels/](labels/index.md) - {} labels\n", counts.labels));
        root.push_str("* [Log](log.md) - creations by day\n");
    }
    root
}

fn counts(kind: ExportKind, plan: &Plan) -> ExportCounts {
    let okf = kind == ExportKind::Okf;
    let memories = if okf { plan.memories.len() as u64 } else { 0 };
    let labels = if okf { plan.labels.len() as u64 } else { 0 };
    let unit_types: BTreeSet<&str> = plan.memories.iter().map(|v| v.memory.unit_type.as_str()).collect();
    let directories = 4 + if okf { 2 + unit_types.len() as u64 } else { 0 };
    ExportCounts {
        topics: plan.topics.len() as u64,
        entities: plan.entities.len() as u64,
        crystals: plan.crystals.len() as u64,
        memories,
        labels,
        pages: (plan.topics.len() + plan.entities.len() + plan.crystals.len()) as u64 + memories + labels,
        directories,
    }
}

/// An OKF memory page.
fn memory_page(store: &KnowledgeStore, v: &MemoryView, linker: &BundleLinker<'_>, generator: &str) -> Result<String> {
    let m = &v.memory;
    let title = if m.title.is_empty() { memory_line(v, 80) } else { m.title.clone() };
    let mut s = format!(
        "---\ntype: Memory\ntitle: {}\ndescription: {}\nresource: {}\nunit_type: {}\nspace_id: {}\nimportance: {}\nstatus: {}\n",
        yaml_str(&title),
        yaml_str(&memory_line(v, 160)),
        yaml_str(&format!("engram://memory/{}", m.id)),
        yaml_str(m.unit_type.as_str()),
        yaml_str(&m.space_id),
        m.importance,
        okf_status(m.state),
    );
    s.push_str(&format!("generated:\n  by: {}\n  at: {}\n", yaml_str(generator), yaml_str(&m.updated_at.to_rfc3339())));
    if !v.label_ids.is_empty() {
        let tags: Vec<String> = v.label_ids.iter().map(|l| yaml_str(l.strip_prefix("label_").unwrap_or(l))).collect();
        s.push_str(&format!("tags: [{}]\n", tags.join(", ")));
    }
    if let Some(e) = &m.event_start {
        s.push_str(&format!("event_start: {}\n", yaml_str(e)));
    }
    s.push_str("---\n\n");
    s.push_str(&format!("# {}\n\n{}\n", title.replace('\n', " "), m.content));
    let entities = store.graph().entities_of(&m.space_id, &m.id)?;
    if !entities.is_empty() {
        s.push_str("\n## Entities\n\n");
        for e in &entities {
            s.push_str(&format!("* {} ({})\n", link(&e.name, linker.entity(e)), e.entity_type));
        }
    }
    Ok(s)
}

impl Graph<'_> {
    /// [`Graph::entity_page`](crate::store::Graph::entity_page) for a known entity record.
    pub(crate) fn entity_page_of(&self, e: &Entity, mention_limit: usize, linker: &dyn Linker) -> Result<String> {
        self.entity_page_for(e.clone(), mention_limit, linker)
    }
}
