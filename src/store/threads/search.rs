//! Searching a space's threads by their messages (`search`).

use super::*;

impl Threads<'_> {
    /// Threads of `space` with messages containing every term of `query` (stemmed, case-insensitive), most
    /// matching messages first. A message also matches through its context: when every term occurs in it or
    /// its neighbours within the store's context window ([`crate::StoreConfig::context`], default 1), such as
    /// a question and its answer; those count as `context_matches` and rank after direct matches. A scan over
    /// the space's messages: O(messages).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a blank query; [`ErrorKind::NotFound`] (`space_not_found`). A query of
    /// stop words and punctuation only finds nothing.
    pub fn search(&self, query: &str, space: &str, source: Option<&str>, limit: usize) -> Result<Vec<ThreadMatch>> {
        if query.trim().is_empty() {
            return Err(Error::invalid_value(&["query"], "string_too_short", "query must not be empty", query.into()));
        }
        self.store.spaces().require(space)?;
        let terms: std::collections::BTreeSet<String> = text::terms(query).into_iter().collect();
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let rtx = self.store.core.db.read()?;
        let window = self.store.core.config.context.window;
        // Thread -> (direct matches, context-only matches).
        let mut counts: std::collections::HashMap<String, (u64, u64)> = Default::default();
        let mut current: Option<String> = None;
        let mut have: Vec<std::collections::HashSet<String>> = Vec::new();
        let mut tally = |tid: &str, have: &[std::collections::HashSet<String>]| {
            let (mut direct, mut near) = (0, 0);
            for i in 0..have.len() {
                if terms.iter().all(|t| have[i].contains(t)) {
                    direct += 1;
                } else if window > 0 {
                    let (lo, hi) = (i.saturating_sub(window), (i + window).min(have.len() - 1));
                    if terms.iter().all(|t| have[lo..=hi].iter().any(|h| h.contains(t))) {
                        near += 1;
                    }
                }
            }
            if direct + near > 0 {
                counts.insert(tid.to_string(), (direct, near));
            }
        };
        thread::each_message_in(&rtx, space, |tid, m| {
            if current.as_deref() != Some(tid) {
                if let Some(c) = current.take() {
                    tally(&c, &have);
                }
                have.clear();
                current = Some(tid.to_string());
            }
            have.push(text::terms(&m.content).into_iter().filter(|t| terms.contains(t)).collect());
            true
        })?;
        if let Some(c) = current.take() {
            tally(&c, &have);
        }
        let threads = thread::threads(&rtx)?;
        let mut out = Vec::new();
        for (tid, (direct, near)) in counts {
            if let Some(thread) = threads.get((space, tid.as_str()))?
                && source.is_none_or(|s| thread.source == s)
            {
                out.push(ThreadMatch { thread, matched_messages: direct, context_matches: near });
            }
        }
        out.sort_by(|a, b| {
            b.matched_messages
                .cmp(&a.matched_messages)
                .then_with(|| b.context_matches.cmp(&a.context_matches))
                .then_with(|| b.thread.updated_at.cmp(&a.thread.updated_at))
        });
        out.truncate(limit);
        Ok(out)
    }
}
