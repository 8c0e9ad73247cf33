//! The built-in embedder: signed feature hashing (Weinberger et al., "Feature Hashing for Large Scale Multitask
//! Learning", ICML 2009) of three feature families into a fixed-size vector:
//!
//! * stemmed content words (weight 1.0),
//! * adjacent stemmed word pairs (weight 0.5), which keep a little word order,
//! * character trigrams of each word with boundary marks (weight 0.25 spread over the word's trigrams), which
//!   match morphological variants and misspellings that stemming misses ("Sweden"/"Swedish").
//!
//! Each feature is hashed with 64-bit FNV-1a; the low bits pick the dimension, the top bit the sign. Counts are
//! dampened with `1 + ln(tf)` and the vector is L2-normalised. Deterministic across platforms and releases of the
//! same name. It captures lexical and sub-word overlap, not meaning: a real model (the `fastembed` feature)
//! does better on paraphrases.

use std::collections::HashMap;

use super::{Embedder, InputType};
use crate::error::Result;
use crate::index::text;

/// The built-in embedder. Default dimension 256.
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    dim: usize,
    name: String,
}

impl Default for HashEmbedder {
    fn default() -> Self {
        HashEmbedder::new(256)
    }
}

impl HashEmbedder {
    /// A hashing embedder of `dim` dimensions (clamped to 16..=4096).
    pub fn new(dim: usize) -> Self {
        let dim = dim.clamp(16, 4096);
        HashEmbedder { dim, name: format!("engram-hash-v1-{dim}") }
    }

    fn embed_one(&self, text: &str) -> Vec<f32> {
        let words = text::words(text);
        let mut feats: HashMap<u64, f32> = HashMap::new();
        let mut prev: Option<String> = None;
        for w in &words {
            let stemmed = text::stem(w);
            let stop = text::is_stop(w);
            if !stop {
                *feats.entry(fnv1a(&[b"w:", stemmed.as_bytes()])).or_default() += 1.0;
                if let Some(p) = &prev {
                    *feats.entry(fnv1a(&[b"b:", p.as_bytes(), b" ", stemmed.as_bytes()])).or_default() += 0.5;
                }
                let marked: Vec<char> = std::iter::once('#').chain(w.chars()).chain(std::iter::once('#')).collect();
                if marked.len() >= 3 {
                    let n = (marked.len() - 2) as f32;
                    let mut buf = [0u8; 16];
                    for tri in marked.windows(3) {
                        let mut len = 0;
                        for c in tri {
                            len += c.encode_utf8(&mut buf[len..]).len();
                        }
                        *feats.entry(fnv1a(&[b"c:", &buf[..len]])).or_default() += 0.25 / n.sqrt();
                    }
                }
                prev = Some(stemmed);
            } else {
                prev = None;
            }
        }
        let mut v = vec![0.0f32; self.dim];
        for (h, tf) in feats {
            let weight = if tf > 1.0 { 1.0 + tf.ln() } else { tf };
            let idx = (h % self.dim as u64) as usize;
            let sign = if h >> 63 == 1 { -1.0 } else { 1.0 };
            v[idx] += sign * weight;
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            for x in &mut v {
                *x /= norm;
            }
        }
        v
    }
}

/// 64-bit FNV-1a over the concatenation of `parts`.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

impl Embedder for HashEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str], _input_type: InputType) -> Result<Vec<Vec<f32>>> {
        use rayon::prelude::*;
        if texts.len() >= 64 {
            Ok(texts.par_iter().map(|t| self.embed_one(t)).collect())
        } else {
            Ok(texts.iter().map(|t| self.embed_one(t)).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    #[test]
    fn vectors_are_normalised_deterministic_and_lexically_meaningful() {
        let e = HashEmbedder::default();
        let v = e
            .embed(&["I went hiking in Sweden", "hiking trip to Swedish mountains", "tax forms are due"], InputType::Document)
            .unwrap_or_default();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].len(), 256);
        let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.2);
        let again = e.embed(&["I went hiking in Sweden"], InputType::Query).unwrap_or_default();
        assert_eq!(again[0], v[0]);
        let empty = e.embed(&["the of and"], InputType::Query).unwrap_or_default();
        assert!(empty[0].iter().all(|x| *x == 0.0));
    }
}
