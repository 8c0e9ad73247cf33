//! Label hygiene: the health report, merge candidates (trigram Jaccard of names, cosine of name vectors) and the
//! consolidation of labels whose canonical forms are equal, with its preview.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use utoipa::ToSchema;

use crate::embed::{InputType, cosine};
use crate::error::{Error, ErrorKind, FieldError, Result};
use crate::model::{Label, Timestamp};
use crate::store::label;
use crate::store::range_prefix3;

use super::Labels;

use super::canonical_label;

/// Vocabulary health of one space or of all (GET /labels/health).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct LabelHealth {
    /// The space reported, or None for all spaces.
    pub space_id: Option<String>,
    /// Labels in the vocabulary.
    pub vocabulary_size: u64,
    /// Labels used by no memory.
    pub unused_labels: u64,
    /// Labels used by exactly one memory.
    pub singleton_labels: u64,
    /// `singleton_labels / vocabulary_size` (0 for an empty vocabulary).
    pub singleton_rate: f64,
    /// Memories (any state but forgotten).
    pub memories: u64,
    /// Memories carrying at least one label.
    pub labelled_memories: u64,
    /// `labelled_memories / memories`.
    pub coverage: f64,
    /// HAS_LABEL edges per memory, over all memories.
    pub labels_per_memory: f64,
    /// HAS_LABEL edges per labelled memory.
    pub labels_per_labelled_memory: f64,
    /// Groups of two or more labels with one canonical form (what consolidate would merge).
    pub canonical_fork_groups: u64,
    /// Labels consolidate would merge away (the backlog).
    pub canonical_fork_backlog: u64,
}

/// A semantically near label pair.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct MergeCandidate {
    /// Suggested to merge away (the lower usage of the two).
    pub source_id: String,
    /// Its name.
    pub source_name: String,
    /// Suggested survivor.
    pub target_id: String,
    /// Its name.
    pub target_name: String,
    /// Cosine similarity of the two names' embeddings, in `[sim_floor, 1]`.
    pub similarity: f64,
    /// Usage of the source.
    pub source_usage: u64,
    /// Usage of the target.
    pub target_usage: u64,
}

/// One group of exact-canonical duplicates.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ConsolidationGroup {
    /// The shared canonical form.
    pub canonical: String,
    /// The survivor: highest usage, then oldest, then smallest name.
    pub survivor_id: String,
    /// Labels merged into the survivor.
    pub merged_ids: Vec<String>,
    /// HAS_LABEL edges that move (or are dropped as duplicates).
    pub edges: u64,
}

/// Result of `store.labels().consolidate()`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ConsolidationReport {
    /// True: the plan only, nothing changed.
    pub dry_run: bool,
    /// The groups (at most `max_groups`, largest usage first).
    pub groups: Vec<ConsolidationGroup>,
    /// Groups beyond `max_groups` left for a later call.
    pub remaining_groups: u64,
    /// Labels merged away (0 on a dry run).
    pub merged_labels: u64,
    /// The recorded merges (each reversible); empty on a dry run.
    pub merge_ids: Vec<String>,
}

/// A semantic pair with the deterministic judge's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct JudgedPair {
    /// The pair.
    #[serde(flatten)]
    pub pair: MergeCandidate,
    /// Character-trigram Jaccard similarity of the canonical forms, 0..=1.
    pub string_similarity: f64,
    /// Jaccard similarity of the sets of memories carrying each label, 0..=1.
    pub co_usage: f64,
    /// `0.5 x similarity + 0.3 x string_similarity + 0.2 x co_usage`.
    pub judge_score: f64,
    /// `merge` (score >= 0.8), `review` (>= 0.65) or `keep`.
    pub verdict: String,
}

/// Result of `store.labels().consolidation_preview()`: never mutates.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ConsolidationPreview {
    /// What consolidate would do with exact-canonical duplicates.
    pub exact: ConsolidationReport,
    /// Semantic pairs judged (at most `max_pairs`).
    pub semantic: Vec<JudgedPair>,
    /// Always `deterministic:embedding+trigram+co-usage`: no language model is consulted.
    pub judge: String,
}

/// Most labels whose name vectors the store caches.
pub(super) const LABEL_VECTOR_CACHE: usize = 20_000;

pub(super) fn trigrams(s: &str) -> BTreeSet<String> {
    let padded: Vec<char> = format!("  {s} ").chars().collect();
    padded.windows(3).map(|w| w.iter().collect()).collect()
}

pub(super) fn jaccard<T: Ord>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 0.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

impl Labels<'_> {
    /// Vocabulary health of `space`, or of every space when None.
    ///
    /// # Errors
    /// [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn health(&self, space: Option<&str>) -> Result<LabelHealth> {
        let spaces: Vec<String> = match space {
            Some(s) => {
                self.store.spaces().require(s)?;
                vec![s.to_string()]
            }
            None => self.store.spaces().list()?.into_iter().map(|s| s.id).collect(),
        };
        let (mut vocab, mut unused, mut single, mut forks, mut backlog) = (0u64, 0u64, 0u64, 0u64, 0u64);
        let (mut memories, mut labelled, mut edges) = (0u64, 0u64, 0u64);
        for s in &spaces {
            let labels = self.all(s)?;
            vocab += labels.len() as u64;
            unused += labels.iter().filter(|l| l.usage_count == 0).count() as u64;
            single += labels.iter().filter(|l| l.usage_count == 1).count() as u64;
            let mut groups: BTreeMap<String, u64> = BTreeMap::new();
            for l in &labels {
                *groups.entry(canonical_label(&l.name)).or_default() += 1;
            }
            for n in groups.values().filter(|n| **n > 1) {
                forks += 1;
                backlog += n - 1;
            }
            self.store.core.with_catalog(s, |catalog| {
                for (_, m) in catalog.into_iter().flat_map(|c| c.iter()) {
                    if m.state == crate::model::MemoryState::Forgotten {
                        continue;
                    }
                    memories += 1;
                    if !m.labels.is_empty() {
                        labelled += 1;
                        edges += m.labels.len() as u64;
                    }
                }
            })?;
        }
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        Ok(LabelHealth {
            space_id: space.map(str::to_string),
            vocabulary_size: vocab,
            unused_labels: unused,
            singleton_labels: single,
            singleton_rate: ratio(single, vocab),
            memories,
            labelled_memories: labelled,
            coverage: ratio(labelled, memories),
            labels_per_memory: ratio(edges, memories),
            labels_per_labelled_memory: ratio(edges, labelled),
            canonical_fork_groups: forks,
            canonical_fork_backlog: backlog,
        })
    }

    /// Embeddings of label names, cached per store (the embedder is fixed for a store's life).
    pub(super) fn label_vectors(&self, names: &[&str]) -> Result<Vec<Vec<f32>>> {
        let missing: Vec<&str> = {
            let cache = self.store.label_vector_cache.lock();
            names.iter().copied().filter(|n| !cache.contains_key(*n)).collect()
        };
        if !missing.is_empty() {
            let vecs = self.store.core.config.embedder.embed(&missing, InputType::Document)?;
            let mut cache = self.store.label_vector_cache.lock();
            if cache.len() + missing.len() > LABEL_VECTOR_CACHE {
                cache.clear();
            }
            for (n, v) in missing.iter().zip(vecs) {
                cache.insert((*n).to_string(), v);
            }
        }
        let cache = self.store.label_vector_cache.lock();
        names
            .iter()
            .map(|n| match cache.get(*n) {
                Some(v) => Ok(v.clone()),
                None => self
                    .store
                    .core
                    .config
                    .embedder
                    .embed(&[n], InputType::Document)?
                    .pop()
                    .ok_or_else(|| Error::new(ErrorKind::Internal, "embedder returned no vector")),
            })
            .collect()
    }

    /// Semantically near label pairs: cosine similarity of the name embeddings at or above `sim_floor`, among
    /// the `max_labels` most used labels of `space`, best `max_pairs` first. Pairs with one canonical form are
    /// excluded (consolidate handles them). Read-only. O(max_labels^2) cosine computations.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`]: `sim_floor` outside 0..=1, `max_labels` outside 2..=5000, `max_pairs`
    /// outside 1..=1000. [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn merge_candidates(
        &self,
        space: &str,
        sim_floor: f64,
        max_labels: usize,
        max_pairs: usize,
    ) -> Result<Vec<MergeCandidate>> {
        let mut errs = Vec::new();
        if !(0.0..=1.0).contains(&sim_floor) {
            errs.push(FieldError::field(&["sim_floor"], "number_out_of_range", "sim_floor is 0..=1", sim_floor.into()));
        }
        if !(2..=5000).contains(&max_labels) {
            errs.push(FieldError::field(
                &["max_labels"],
                "number_out_of_range",
                "max_labels is 2..=5000",
                max_labels.into(),
            ));
        }
        if !(1..=1000).contains(&max_pairs) {
            errs.push(FieldError::field(
                &["max_pairs"],
                "number_out_of_range",
                "max_pairs is 1..=1000",
                max_pairs.into(),
            ));
        }
        if !errs.is_empty() {
            return Err(Error::invalid(errs));
        }
        self.store.spaces().require(space)?;
        let mut labels = self.all(space)?;
        labels.sort_by(|a, b| b.usage_count.cmp(&a.usage_count).then_with(|| a.name.cmp(&b.name)));
        labels.truncate(max_labels);
        let names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
        let vecs = self.label_vectors(&names)?;
        let canon: Vec<String> = labels.iter().map(|l| canonical_label(&l.name)).collect();
        let floor = sim_floor as f32;
        let mut pairs: Vec<(f32, usize, usize)> = Vec::new();
        for i in 0..labels.len() {
            for j in i + 1..labels.len() {
                let sim = cosine(&vecs[i], &vecs[j]);
                if sim >= floor && canon[i] != canon[j] {
                    pairs.push((sim, i, j));
                }
            }
        }
        pairs.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        pairs.truncate(max_pairs);
        Ok(pairs
            .into_iter()
            .map(|(sim, i, j)| {
                // Labels are sorted by usage (desc): i is the survivor.
                let (t, s) = (&labels[i], &labels[j]);
                MergeCandidate {
                    source_id: s.id.clone(),
                    source_name: s.name.clone(),
                    target_id: t.id.clone(),
                    target_name: t.name.clone(),
                    similarity: f64::from(sim.min(1.0)),
                    source_usage: s.usage_count,
                    target_usage: t.usage_count,
                }
            })
            .collect())
    }

    pub(super) fn consolidation_groups(&self, space: &str) -> Result<Vec<(ConsolidationGroup, u64)>> {
        let labels = self.all(space)?;
        let mut groups: BTreeMap<String, Vec<Label>> = BTreeMap::new();
        for l in labels {
            groups.entry(canonical_label(&l.name)).or_default().push(l);
        }
        let mut out = Vec::new();
        for (canonical, mut ls) in groups {
            if ls.len() < 2 {
                continue;
            }
            ls.sort_by(|a, b| {
                b.usage_count
                    .cmp(&a.usage_count)
                    .then(a.created_at.cmp(&b.created_at))
                    .then_with(|| a.name.cmp(&b.name))
            });
            let usage: u64 = ls.iter().map(|l| l.usage_count).sum();
            let edges = ls[1..].iter().map(|l| l.usage_count).sum();
            out.push((
                ConsolidationGroup {
                    canonical,
                    survivor_id: ls[0].id.clone(),
                    merged_ids: ls[1..].iter().map(|l| l.id.clone()).collect(),
                    edges,
                },
                usage,
            ));
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.canonical.cmp(&b.0.canonical)));
        Ok(out)
    }

    /// Merges exact-canonical duplicates (module docs) into the highest-usage survivor of each group (ties:
    /// oldest, then smallest name), at most `max_groups` groups per call. With `dry_run` only the plan is
    /// returned and nothing is written. Every merge is recorded and reversible.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`]: `max_groups` outside 1..=5000. [`ErrorKind::NotFound`] (`space_not_found`).
    pub fn consolidate(&self, space: &str, dry_run: bool, max_groups: usize) -> Result<ConsolidationReport> {
        if !(1..=5000).contains(&max_groups) {
            return Err(Error::invalid_value(
                &["max_groups"],
                "number_out_of_range",
                "max_groups is 1..=5000",
                max_groups.into(),
            ));
        }
        self.store.spaces().require(space)?;
        let all = self.consolidation_groups(space)?;
        let remaining = all.len().saturating_sub(max_groups) as u64;
        let groups: Vec<ConsolidationGroup> = all.into_iter().take(max_groups).map(|(g, _)| g).collect();
        if dry_run {
            return Ok(ConsolidationReport {
                dry_run,
                groups,
                remaining_groups: remaining,
                merged_labels: 0,
                merge_ids: vec![],
            });
        }
        let now = Timestamp::now();
        let merge_ids = self.write(|txn, t, touched| {
            let mut ids = Vec::new();
            for g in &groups {
                for src in &g.merged_ids {
                    let rec = t.merge(txn, space, src, &g.survivor_id, now)?;
                    touched.extend(
                        rec.moved_memory_ids
                            .iter()
                            .chain(&rec.shared_memory_ids)
                            .map(|m| (space.to_string(), m.clone())),
                    );
                    ids.push(rec.merge_id);
                }
            }
            Ok(ids)
        })?;
        Ok(ConsolidationReport {
            dry_run,
            groups,
            remaining_groups: remaining,
            merged_labels: merge_ids.len() as u64,
            merge_ids,
        })
    }

    /// A full consolidation dry run: the exact-canonical plan plus semantic pairs judged by a deterministic
    /// judge in place of a language model: `0.5 x embedding cosine + 0.3 x trigram Jaccard of the canonical
    /// forms + 0.2 x Jaccard of the labels' memory sets`, `merge` at 0.8 or more, `review` at 0.65 or more.
    /// Never writes.
    ///
    /// # Errors
    /// As [`Labels::merge_candidates`](crate::store::Labels::merge_candidates), with `max_pairs` 1..=200.
    pub fn consolidation_preview(
        &self,
        space: &str,
        sim_floor: f64,
        max_labels: usize,
        max_pairs: usize,
    ) -> Result<ConsolidationPreview> {
        if !(1..=200).contains(&max_pairs) {
            return Err(Error::invalid_value(
                &["max_pairs"],
                "number_out_of_range",
                "max_pairs is 1..=200",
                max_pairs.into(),
            ));
        }
        let exact = self.consolidate(space, true, 5000)?;
        let pairs = self.merge_candidates(space, sim_floor, max_labels, max_pairs)?;
        let rtx = self.store.core.db.read()?;
        let lm = label::label_memories(&rtx)?;
        let mut semantic = Vec::with_capacity(pairs.len());
        for p in pairs {
            let a: BTreeSet<String> = range_prefix3(&lm, space, &p.source_id)?.into_iter().collect();
            let b: BTreeSet<String> = range_prefix3(&lm, space, &p.target_id)?.into_iter().collect();
            let string_similarity =
                jaccard(&trigrams(&canonical_label(&p.source_name)), &trigrams(&canonical_label(&p.target_name)));
            let co_usage = jaccard(&a, &b);
            let judge_score = 0.5 * p.similarity + 0.3 * string_similarity + 0.2 * co_usage;
            let verdict = if judge_score >= 0.8 {
                "merge"
            } else if judge_score >= 0.65 {
                "review"
            } else {
                "keep"
            };
            semantic.push(JudgedPair { pair: p, string_similarity, co_usage, judge_score, verdict: verdict.into() });
        }
        Ok(ConsolidationPreview { exact, semantic, judge: "deterministic:embedding+trigram+co-usage".into() })
    }
}
