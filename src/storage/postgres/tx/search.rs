//! Search reads: BM25 candidates and scores, and the catalog's counts, each in one statement.

use super::*;

/// The BM25 statements' common head (`lexical_candidates`, `bm25_scores`): the query terms `q` from `$2`/`$3`
/// and the space `$1`'s statistics `st` from `lex_stats` (document count `n`, average length `avgdl`).
macro_rules! bm25_head {
    () => {
        "WITH q AS (SELECT t.term, t.qtf FROM unnest($2::text[], $3::int[]) AS t(term, qtf)),
         st AS (SELECT greatest(coalesce(max(v0), 0), 1)::float8 AS n,
                       CASE WHEN coalesce(max(v0), 0) = 0 OR max(v1) = 0 THEN 1.0
                            ELSE max(v1)::float8 / max(v0) END AS avgdl
                FROM lex_stats WHERE k0 = $1),"
    };
}

/// The BM25 statements' common tail: each document's score, the sum over its postings `p` of the terms'
/// weights with the document frequencies `df` (Robertson and Zaragoza 2009; `k1` = `$4`, `b` = `$5`), as in
/// `crate::index::bm25::score`.
macro_rules! bm25_sum {
    () => {
        "SELECT p.docno,
                sum(ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * p.tf * ($4::float8 + 1)
                    / (p.tf + $4::float8 * (1 - $5::float8 + $5::float8 * p.dl / st.avgdl)) * p.qtf) AS score
         FROM p JOIN df USING (term) CROSS JOIN st"
    };
}

impl PgTx {
    /// BM25 candidates in one statement over the `postings` and `lex_stats` tables: the same formula, statistics
    /// and order as the redb backend's scan (`crate::index::bm25::score`; Robertson and Zaragoza 2009), in
    /// double precision (scores agree to about 1e-6 relative). Terms and their query counts come from Engram's
    /// tokeniser (scale-out design §5.1, rule 2).
    ///
    /// # Errors
    /// Database errors.
    pub fn lexical_candidates(
        &self,
        space: &str,
        terms: &[(String, u32)],
        params: crate::index::bm25::Bm25Params,
        k: usize,
    ) -> Result<Vec<(u64, f32)>> {
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let words: Vec<&str> = terms.iter().map(|(t, _)| t.as_str()).collect();
        let counts: Vec<i32> = terms.iter().map(|(_, q)| i32::try_from(*q).unwrap_or(i32::MAX)).collect();
        let (k1, b) = (f64::from(params.k1), f64::from(params.b));
        let limit = i64::try_from(k).unwrap_or(i64::MAX);
        let sql = concat!(
            bm25_head!(),
            "
             p AS (SELECT q.term, q.qtf, po.k2 AS docno, (po.v0 >> 32)::float8 AS tf,
                          (po.v0 & 4294967295)::float8 AS dl
                   FROM q JOIN postings po ON po.k0 = $1 AND po.k1 = q.term),
             df AS (SELECT term, count(*)::float8 AS df FROM p GROUP BY term)
             ",
            bm25_sum!(),
            " GROUP BY p.docno ORDER BY score DESC, p.docno LIMIT $6"
        );
        let mut tx = self.0.lock();
        let client = &mut tx.conn()?.client;
        let rows = client
            .query(sql, &[&space, &words, &counts, &k1, &b, &limit])
            .map_err(|e| pg_error("BM25 candidates failed", e))?;
        rows.iter()
            .map(|r| {
                let docno: i64 = r.try_get(0).map_err(|e| pg_error("reading a candidate failed", e))?;
                let score: f64 = r.try_get(1).map_err(|e| pg_error("reading a candidate failed", e))?;
                Ok((docno as u64, score as f32))
            })
            .collect()
    }
}

impl PgTx {
    /// The counts of `space`'s catalog and the length its sequence neighbours add to the expanded collection
    /// of `window` (see [`crate::storage::ReadTx::catalog_stats`]): each member's length times its neighbours
    /// within `window` on each side, from its rank in its group.
    ///
    /// # Errors
    /// Database errors.
    pub fn catalog_stats(&self, space: &str, window: usize) -> Result<crate::storage::CatalogStats> {
        let w = i64::try_from(window).unwrap_or(i64::MAX);
        let sql = "SELECT e.entries, e.live, s.sequenced, s.neighbour_len
             FROM (SELECT count(*)::bigint AS entries, count(*) FILTER (WHERE v0 & 1 = 0)::bigint AS live
                   FROM catalog WHERE k0 = $1) e,
                  (SELECT count(*)::bigint AS sequenced,
                          coalesce(sum(v3 * (least($2, rn - 1) + least($2, cnt - rn))), 0)::bigint AS neighbour_len
                   FROM (SELECT v3, row_number() OVER (PARTITION BY v1 ORDER BY v2, k1) AS rn,
                                count(*) OVER (PARTITION BY v1) AS cnt
                         FROM catalog WHERE k0 = $1 AND v1 <> '') m) s";
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space, &w])?;
        let get = |i: usize| -> Result<u64> {
            let v: i64 = rows
                .first()
                .map(|r| r.try_get(i))
                .transpose()
                .map_err(|e| pg_error("reading the catalog's counts failed", e))?
                .unwrap_or(0);
            Ok(v.max(0) as u64)
        };
        Ok(crate::storage::CatalogStats { entries: get(0)?, live: get(1)?, sequenced: get(2)?, neighbour_len: get(3)? })
    }

    /// The catalog rows of `space` with an expiry time, as `(docno, length, record)`, by docno.
    ///
    /// # Errors
    /// Database errors.
    pub fn catalog_expiring(&self, space: &str) -> Result<Vec<(u64, u64, Vec<u8>)>> {
        let sql = "SELECT k1, v3, v4 FROM catalog WHERE k0 = $1 AND v0 & 4 <> 0 ORDER BY k1";
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space])?;
        rows.iter()
            .map(|r| {
                let read = |e| pg_error("reading the catalog failed", e);
                let docno: i64 = r.try_get(0).map_err(read)?;
                let len: i64 = r.try_get(1).map_err(read)?;
                let record: Vec<u8> = r.try_get(2).map_err(read)?;
                Ok((docno as u64, len.max(0) as u64, record))
            })
            .collect()
    }

    /// The sequence neighbours of `docnos` in `space` (see [`crate::storage::ReadTx::sequence_neighbours`]) in
    /// one statement: for each docno with a sequence group, two index ranges of the catalog's sequence index,
    /// `window` entries before it and `window` after.
    ///
    /// # Errors
    /// Database errors.
    pub fn sequence_neighbours(&self, space: &str, docnos: &[u64], window: usize) -> Result<Vec<Vec<(u64, u32)>>> {
        let ids: Vec<i64> = docnos.iter().map(|d| *d as i64).collect();
        let w = i64::try_from(window).unwrap_or(i64::MAX);
        let sql = "SELECT d.i, n.side, n.k1 FROM unnest($2::bigint[]) WITH ORDINALITY AS d(docno, i)
             JOIN catalog c ON c.k0 = $1 AND c.k1 = d.docno AND c.v1 <> ''
             CROSS JOIN LATERAL (
               (SELECT 0 AS side, p.v2, p.k1 FROM catalog p
                WHERE p.k0 = $1 AND p.v1 = c.v1 AND (p.v2, p.k1) < (c.v2, c.k1) AND p.v1 <> ''
                ORDER BY p.v2 DESC, p.k1 DESC LIMIT $3)
               UNION ALL
               (SELECT 1 AS side, p.v2, p.k1 FROM catalog p
                WHERE p.k0 = $1 AND p.v1 = c.v1 AND (p.v2, p.k1) > (c.v2, c.k1) AND p.v1 <> ''
                ORDER BY p.v2, p.k1 LIMIT $3)) n
             ORDER BY d.i, n.side, CASE WHEN n.side = 0 THEN -n.v2 ELSE n.v2 END,
                      CASE WHEN n.side = 0 THEN -n.k1 ELSE n.k1 END";
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space, &ids, &w])?;
        let mut out = vec![Vec::new(); docnos.len()];
        let mut last = (usize::MAX, -1i32, 0u32);
        for r in rows {
            let read = |e| pg_error("reading a sequence neighbour failed", e);
            let i: i64 = r.try_get(0).map_err(read)?;
            let side: i32 = r.try_get(1).map_err(read)?;
            let docno: i64 = r.try_get(2).map_err(read)?;
            let i = usize::try_from(i - 1).unwrap_or(usize::MAX);
            let distance = if (last.0, last.1) == (i, side) { last.2 + 1 } else { 1 };
            last = (i, side, distance);
            if let Some(list) = out.get_mut(i) {
                list.push((docno as u64, distance));
            }
        }
        Ok(out)
    }
}

impl PgTx {
    /// BM25 scores of `docnos` for the query `terms` (see [`crate::storage::ReadTx::bm25_scores`]) in one
    /// statement: the documents' postings of the terms, each term's document frequency counted over its whole
    /// list, the space's statistics from `lex_stats`; the formula of [`PgTx::lexical_candidates`]. The counts are
    /// a `MATERIALIZED` CTE: inlined, PostgreSQL 15 ran each count once per posting row and use (24 s instead of
    /// 0.2 s for 100 documents and two terms of 317,000 postings each at 1M memories).
    ///
    /// # Errors
    /// Database errors.
    pub fn bm25_scores(
        &self,
        space: &str,
        terms: &[(String, u32)],
        params: crate::index::bm25::Bm25Params,
        docnos: &[u64],
    ) -> Result<Vec<f32>> {
        if terms.is_empty() || docnos.is_empty() {
            return Ok(vec![0.0; docnos.len()]);
        }
        let words: Vec<&str> = terms.iter().map(|(t, _)| t.as_str()).collect();
        let counts: Vec<i32> = terms.iter().map(|(_, q)| i32::try_from(*q).unwrap_or(i32::MAX)).collect();
        let ids: Vec<i64> = docnos.iter().map(|d| *d as i64).collect();
        let (k1, b) = (f64::from(params.k1), f64::from(params.b));
        let sql = concat!(
            bm25_head!(),
            "
             df AS MATERIALIZED (SELECT q.term,
                    (SELECT count(*) FROM postings po WHERE po.k0 = $1 AND po.k1 = q.term)::float8 AS df FROM q),
             p AS (SELECT q.term, q.qtf, po.k2 AS docno, (po.v0 >> 32)::float8 AS tf, (po.v0 & 4294967295)::float8 AS dl
                   FROM q JOIN postings po ON po.k0 = $1 AND po.k1 = q.term AND po.k2 = ANY($6::bigint[]))
             ",
            bm25_sum!(),
            " GROUP BY p.docno"
        );
        let rows = self.0.lock().conn()?.query_typed(sql, &[&space, &words, &counts, &k1, &b, &ids])?;
        let mut scores: std::collections::HashMap<u64, f32> = std::collections::HashMap::new();
        for r in rows {
            let read = |e| pg_error("reading a BM25 score failed", e);
            let docno: i64 = r.try_get(0).map_err(read)?;
            let score: f64 = r.try_get(1).map_err(read)?;
            scores.insert(docno as u64, score as f32);
        }
        Ok(docnos.iter().map(|d| scores.get(d).copied().unwrap_or(0.0)).collect())
    }
}
