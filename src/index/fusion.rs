//! Fusion of the lexical and the vector ranking into one.
//!
//! * Reciprocal rank fusion (Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and
//!   individual Rank Learning Methods", SIGIR 2009): `Σ 1 / (k + rank)`, default `k` 60.
//! * Convex combination of normalised scores (Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid
//!   Retrieval", ACM TOIS 2023): `α · lex' + (1 - α) · vec'`, a missing score counting 0. Normalisation is their
//!   theoretical min-max (TM2C2): each score is divided by the list's maximum, with the theoretical minimum 0 of
//!   BM25 and of cosine clamped at 0. Unlike plain min-max, the weakest candidate of a list keeps a score that
//!   reflects how well it matched, instead of 0.
//!
//! On LoCoMo (README, "Evaluation") the convex combination beats RRF by about 10 points of recall@10, so it is the
//! default, with the lexical weight each embedder suggests.

use rustc_hash::FxHashMap;

/// How two rankings are fused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion with constant `k`.
    Rrf {
        /// The rank offset, usually 60.
        k: f32,
    },
    /// Convex combination of min-max-normalised scores; `alpha` is the lexical weight, 0..=1.
    Convex {
        /// Weight of the lexical score.
        alpha: f32,
    },
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::Convex { alpha: 0.5 }
    }
}

/// One fused hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fused {
    /// Document number.
    pub docno: u64,
    /// Fused score: 0..=1 for the convex combination, `Σ 1/(k+rank)` for RRF.
    pub score: f32,
    /// Raw BM25 score, when the document was in the lexical list.
    pub lexical: Option<f32>,
    /// Cosine similarity (context-blended when that stage is on), when the document was in the vector list.
    pub vector: Option<f32>,
    /// Share of its neighbours' scores added by neighbour expansion ([`crate::index::context::expand`]).
    pub expansion: Option<f32>,
}

/// Fuses two rankings (each best first) into one, best first; ties broken by docno.
pub fn fuse(lexical: &[(u64, f32)], vector: &[(u64, f32)], fusion: Fusion) -> Vec<Fused> {
    let mut out: FxHashMap<u64, Fused> = FxHashMap::default();
    let mut add = |d: u64, s: f32, is_lex: bool, raw: f32| {
        let f = out.entry(d).or_insert(Fused { docno: d, score: 0.0, lexical: None, vector: None, expansion: None });
        f.score += s;
        if is_lex {
            f.lexical = Some(raw);
        } else {
            f.vector = Some(raw);
        }
    };
    match fusion {
        Fusion::Rrf { k } => {
            for (rank, (d, s)) in lexical.iter().enumerate() {
                add(*d, 1.0 / (k + rank as f32 + 1.0), true, *s);
            }
            for (rank, (d, s)) in vector.iter().enumerate() {
                add(*d, 1.0 / (k + rank as f32 + 1.0), false, *s);
            }
        }
        Fusion::Convex { alpha } => {
            let alpha = alpha.clamp(0.0, 1.0);
            for (d, s, n) in normalise(lexical) {
                add(d, alpha * n, true, s);
            }
            for (d, s, n) in normalise(vector) {
                add(d, (1.0 - alpha) * n, false, s);
            }
        }
    }
    let mut v: Vec<Fused> = out.into_values().collect();
    v.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.docno.cmp(&b.docno)));
    v
}

/// Theoretical min-max normalisation to 0..=1: `max(s, 0) / max`; a list without positive scores adds nothing.
fn normalise(list: &[(u64, f32)]) -> Vec<(u64, f32, f32)> {
    let max = list.iter().map(|x| x.1).fold(0.0f32, f32::max);
    list.iter().map(|(d, s)| (*d, *s, if max > f32::EPSILON { s.max(0.0) / max } else { 0.0 })).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_fusions_reward_agreement() {
        let lex = [(1, 9.0), (2, 5.0), (3, 1.0)];
        let vec = [(2, 0.9), (4, 0.8), (1, 0.1)];
        let c = fuse(&lex, &vec, Fusion::Convex { alpha: 0.5 });
        assert_eq!(c[0].docno, 2);
        assert_eq!(c[0].lexical, Some(5.0));
        assert_eq!(c[0].vector, Some(0.9));
        assert!(c.iter().all(|f| (0.0..=1.0).contains(&f.score)));
        let r = fuse(&lex, &vec, Fusion::Rrf { k: 60.0 });
        assert_eq!(r.len(), 4);
        assert!(r[0].docno == 1 || r[0].docno == 2);
        assert_eq!(fuse(&[], &[], Fusion::default()).len(), 0);
        let lone = fuse(&[(7, 0.0)], &[(7, 0.3)], Fusion::Convex { alpha: 0.85 });
        assert!((lone[0].score - 0.15).abs() < 1e-6, "no lexical signal adds nothing: {lone:?}");
    }
}
