//! Searching sources: BM25 over each space's source chunks (an index per space, built on first use).

use super::*;

impl Sources<'_> {
    fn chunk_index_of(&self, space: &str) -> Result<Arc<ChunkIndex>> {
        if let Some(ix) = self.store.core.chunk_index.read().get(space) {
            return Ok(ix.clone());
        }
        let mut lex = Lexicon::default();
        let mut docs = Vec::new();
        for s in self.all(space)? {
            let text = self.text(&s.id)?;
            let mut add = |docs: &mut Vec<(String, u64, String)>, chunk: u64, body: &str| {
                let (tf, len) = lexicon::analyse(body);
                lex.add(docs.len() as u64, &tf, len);
                docs.push((s.id.clone(), chunk, body.chars().take(300).collect()));
            };
            add(&mut docs, u64::MAX, &s.original_name.replace(['.', '_', '-'], " "));
            for (i, c) in self.chunks(&s.id)?.iter().enumerate() {
                let a = document::floor_boundary(&text, c.offset as usize);
                let b = document::floor_boundary(&text, (c.offset + c.length) as usize);
                add(&mut docs, i as u64, &text[a..b]);
            }
        }
        let ix = Arc::new(ChunkIndex { lex, docs });
        self.store.core.chunk_index.write().insert(space.to_string(), ix.clone());
        Ok(ix)
    }

    /// BM25 search over the chunks and file names of a space's sources, grouped by source (best chunk first).
    /// The chunk index of a space is built on its first search and rebuilt after its sources change.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a blank query; [`crate::ErrorKind::NotFound`] (`space_not_found`). A query of
    /// stop words and punctuation only finds nothing.
    pub fn search(&self, space: &str, query: &str, limit: usize) -> Result<Vec<SourceHit>> {
        self.rank(space, query, limit, 3, None)
    }

    /// BM25 search within one source's chunks (`search_source_chunks`): the source, its best `limit` chunks
    /// with their full text (UTF-8, cut at character boundaries), and its number of chunks.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] (`source_not_found`): no such source, or not in `space_guard`; as
    /// [`Sources::search`](crate::store::Sources::search) for the query.
    pub fn search_chunks(
        &self,
        id: &str,
        space_guard: Option<&str>,
        query: &str,
        limit: usize,
    ) -> Result<SourceChunks> {
        let source = self.get(id, space_guard)?;
        let all = self.chunks(&source.id)?;
        let hits = self.rank(&source.space_id, query, 1, limit, Some(&source.id))?;
        let text = if hits.is_empty() { String::new() } else { self.text(&source.id)? };
        let out = hits
            .into_iter()
            .flat_map(|h| h.chunks)
            .map(|c| {
                let body = all
                    .get(c.chunk_index as usize)
                    .and_then(|k| {
                        let (from, to) = (k.offset as usize, (k.offset + k.length) as usize);
                        let from = (0..=from.min(text.len())).rev().find(|i| text.is_char_boundary(*i))?;
                        let to = (to.min(text.len())..=text.len()).find(|i| text.is_char_boundary(*i))?;
                        text.get(from..to).map(str::to_string)
                    })
                    .unwrap_or_else(|| c.snippet.clone());
                (c, body)
            })
            .collect();
        Ok(SourceChunks { source, chunks: out, total_chunks: all.len() })
    }

    /// Sources of `space` ranked by BM25 over chunks and names, `per_source` best chunks each; `only` keeps
    /// one source.
    fn rank(
        &self,
        space: &str,
        query: &str,
        limit: usize,
        per_source: usize,
        only: Option<&str>,
    ) -> Result<Vec<SourceHit>> {
        if query.trim().is_empty() {
            return Err(Error::invalid_value(
                &["q"],
                "string_too_short",
                "query must not be empty",
                serde_json::Value::String(query.to_string()),
            ));
        }
        self.store.spaces().require(space)?;
        let (qtf, _) = lexicon::analyse(query);
        if qtf.is_empty() {
            return Ok(Vec::new());
        }
        let ix = self.chunk_index_of(space)?;
        let lists: Vec<(u32, &[bm25::Posting])> = qtf.iter().map(|(t, n)| (*n, ix.lex.postings(t))).collect();
        let mut scored = bm25::score(self.store.core.config.bm25, ix.lex.docs, ix.lex.avg_len(), &lists, &|_| true);
        // Neighbour expansion along each source's chunks (the store's [`crate::StoreConfig::expansion`]): a
        // chunk next to a matching one gains `a · score / distance` (the largest share), so the passage around
        // a match ranks with it. Chunks are numbered in order within a source, the file name (chunk
        // `u64::MAX`) takes no part.
        let exp = self.store.core.config.expansion;
        if exp.is_on() {
            // Chunks of one source are consecutive documents of the chunk index.
            let neighbours = |docno: u64, nb: &mut Vec<(u64, u32)>| {
                let Some((sid, chunk, _)) = ix.docs.get(docno as usize) else { return };
                if *chunk == u64::MAX {
                    return;
                }
                for dist in 1..=exp.window as u64 {
                    for (n, nd) in [
                        (chunk.checked_sub(dist), docno.checked_sub(dist)),
                        (chunk.checked_add(dist), docno.checked_add(dist)),
                    ] {
                        let (Some(n), Some(nd)) = (n, nd) else { continue };
                        if ix.docs.get(nd as usize).is_some_and(|x| x.1 == n && x.0 == *sid) {
                            nb.push((nd, dist as u32));
                        }
                    }
                }
            };
            let mut bonus = crate::index::context::shares(scored.iter().copied(), exp, neighbours);
            for (docno, score) in scored.iter_mut() {
                if let Some(b) = bonus.remove(docno) {
                    *score += b;
                }
            }
            scored.extend(bonus);
        }
        let mut by_source: HashMap<&str, (f32, Vec<Scored<'_>>)> = HashMap::new();
        for (docno, score) in scored {
            let Some((sid, chunk, snippet)) = ix.docs.get(docno as usize) else { continue };
            if only.is_some_and(|o| o != sid) {
                continue;
            }
            let e = by_source.entry(sid.as_str()).or_insert((0.0, Vec::new()));
            if *chunk == u64::MAX {
                e.0 += score;
            } else {
                e.1.push((*chunk, score, snippet.as_str()));
            }
        }
        let mut ranked: Vec<(&str, f32, Vec<Scored<'_>>)> = by_source
            .into_iter()
            .map(|(sid, (name_score, mut chunks))| {
                chunks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let best = chunks.first().map_or(0.0, |c| c.1);
                (sid, best + name_score, chunks)
            })
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let mut out = Vec::new();
        for (sid, score, chunks) in ranked.into_iter().take(limit) {
            let Ok(source) = self.get(sid, Some(space)) else { continue };
            let all = self.chunks(sid)?;
            let hits = chunks
                .into_iter()
                .take(per_source)
                .map(|(i, s, snip)| {
                    let c = all.get(i as usize);
                    ChunkHit {
                        chunk_index: i,
                        section: c.map(|c| c.section.clone()).unwrap_or_default(),
                        offset: c.map_or(0, |c| c.offset),
                        score: s,
                        snippet: snip.to_string(),
                    }
                })
                .collect();
            out.push(SourceHit { source, score, chunks: hits });
        }
        Ok(out)
    }
}
