//! Reading communities, PageRank and crystals, and recomputing them on demand.

use std::time::{Duration, Instant};

use super::Graph;
use super::compute::{Ctx, generations, recompute};
use crate::error::{Error, ErrorCode, Result};
use crate::model::{Community, CommunityEntity, GraphReport};
use crate::store::entity;
use crate::store::records::graph;

impl Graph<'_> {
    pub(crate) fn graph_ctx(&self) -> Ctx {
        Ctx::of(&self.store.core)
    }

    /// Recomputes communities and PageRank now (the background worker does it once writes pause).
    ///
    /// # Errors
    /// Storage errors; [`crate::ErrorKind::Locked`] while another process sharing the database recomputes it.
    pub fn recompute(&self) -> Result<GraphReport> {
        let Some(_claim) = self.store.core.db.claim("graph")? else {
            return Err(Error::new(
                crate::ErrorKind::Locked,
                "another process is recomputing the graph of this store now; its result is shared when it finishes",
            ));
        };
        recompute(&self.graph_ctx(), &|| false)
    }

    /// PageRank of a memory scaled so the top memory of the graph is 1 (0 until the graph was computed or when it mentions no entity).
    pub fn memory_pagerank(&self, space: &str, id: &str) -> f64 {
        self.store.core.memory_pagerank(space, id)
    }

    /// Communities, heaviest first (sum of members' PageRank), at most `limit`.
    ///
    /// # Errors
    /// Storage errors.
    pub fn communities(&self, limit: usize) -> Result<(Vec<Community>, u64)> {
        self.communities_where(|_| true, limit)
    }

    /// The communities `keep` accepts, heaviest first (ties by id), at most `limit`, and how many it accepts.
    fn communities_where(&self, keep: impl Fn(&Community) -> bool, limit: usize) -> Result<(Vec<Community>, u64)> {
        let rtx = self.store.core.db.read()?;
        let t = graph::communities(&rtx)?;
        let mut all: Vec<Community> = Vec::new();
        for row in t.iter()? {
            let c: Community = row?.1;
            if keep(&c) {
                all.push(c);
            }
        }
        let total = all.len() as u64;
        all.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(a.id.cmp(&b.id)));
        all.truncate(limit);
        Ok((all, total))
    }

    /// The communities with entities in `space`, heaviest first, at most `limit`, and how many there are. The
    /// filter runs in the scan, so only the page is kept.
    ///
    /// # Errors
    /// Storage errors.
    pub fn communities_of_space(&self, space: &str, limit: usize) -> Result<(Vec<Community>, u64)> {
        self.communities_where(|c| c.spaces.iter().any(|s| s == space), limit)
    }

    /// One community with up to `entity_limit` of its entities, most central first.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`community_not_found`).
    pub fn community(&self, id: u64, entity_limit: usize) -> Result<(Community, Vec<CommunityEntity>)> {
        let rtx = self.store.core.db.read()?;
        let c: Community = graph::communities(&rtx)?
            .get(id)?
            .ok_or_else(|| Error::not_found(ErrorCode::CommunityNotFound, format!("community {id} does not exist")))?;
        let entities = c.top_entities.iter().take(entity_limit).cloned().collect();
        Ok((c, entities))
    }

    /// The community of an entity, if it belongs to one.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entity_community(&self, space: &str, entity_id: &str) -> Result<Option<u64>> {
        let rtx = self.store.core.db.read()?;
        graph::community_of(&rtx, space, entity_id)
    }

    /// The last computation's report, if any ran since the store was opened.
    pub fn report(&self) -> Option<GraphReport> {
        self.store.core.graph.read().last.clone()
    }

    /// Blocks until the stored graph results reflect every write so far, or `timeout` passes.
    pub fn wait(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if let Ok((g, Some(done))) = generations(&self.store.core.db)
                && g == done
            {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            self.store.core.graph.read().demanded.store(true, std::sync::atomic::Ordering::Release);
            self.store.core.wake_graph();
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Graph<'_> {
    /// Every member of community `id`: `(space, entity id, scaled PageRank)`, most central first.
    ///
    /// # Errors
    /// Storage errors (an unknown id gives an empty list).
    pub fn community_members(&self, id: u64) -> Result<Vec<(String, String, f64)>> {
        let mut out = graph::members_of(&graph::community_members(&self.store.core.db.read()?)?, id)?;
        out.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.1.cmp(&b.1)));
        Ok(out)
    }

    /// Ids of the memories mentioning entity `entity_id` of `space` (MENTIONS edges), in id order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn entity_memory_ids(&self, space: &str, entity_id: &str) -> Result<Vec<String>> {
        let rtx = self.store.core.db.read()?;
        crate::store::range_prefix3(&entity::entity_memories(&rtx)?, space, entity_id)
    }
}
