//! The built-in embedder: a static embedding model (Model2Vec; Tulkens and van Dongen, MinishLab, 2024,
//! <https://github.com/MinishLab/model2vec>) distilled from sentence-transformers/all-MiniLM-L6-v2 and compiled
//! into the binary (`models/static/`, made by `tools/models/distill.py`; provenance and licence in
//! `models/static/README.md`).
//!
//! A text's vector is the mean of its WordPiece tokens' rows of one table (29,525 tokens × 256 dimensions, int8
//! with one f32 scale per row, 7.7 MB), L2-normalised. The table is the teacher's output for each token alone,
//! reduced with PCA and weighted with SIF under a Zipf estimate of the token's frequency (Arora et al., "A Simple
//! but Tough-to-Beat Baseline for Sentence Embeddings", ICLR 2017). Embedding is a table look-up: no model
//! runtime, no download, deterministic across machines (the sum runs in token order in f32).
//!
//! The tokenizer is BERT's uncased one (Devlin et al. 2019, and Hugging Face `tokenizers`' `BertNormalizer`,
//! `BertPreTokenizer` and `WordPiece`), written here in a few dozen lines rather than taking the `tokenizers`
//! crate (and its regex and serde stack) into the default build; `tests/fixtures/static_tokens.json` holds
//! `tokenizers`' own output for awkward texts (accents, CJK, control characters, punctuation classes), and a
//! unit test checks that this one gives the same tokens. Unknown words are dropped, as Model2Vec drops them.
//! Unlike Model2Vec's default of 512 tokens, texts are not truncated: the cost is linear and a long memory's
//! last words count.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::{Embedder, InputType};
use crate::error::{Error, ErrorKind, Result};

/// The table: `models/static/model.safetensors` (int8 `embeddings` [vocab, dim], f32 `scales` [vocab]).
static MODEL: &[u8] = include_bytes!("../../models/static/model.safetensors");
/// The WordPiece vocabulary, one token per line; line i names row i.
static VOCAB: &str = include_str!("../../models/static/vocab.txt");

/// Longest word WordPiece splits (in chars); a longer one is unknown (BERT's `max_input_chars_per_word`).
const MAX_WORD_CHARS: usize = 100;

/// The built-in static embedding model, shared by every store of the process (parsed once, about 10 ms).
///
/// # Panics
/// Never on user input; only if the model compiled into the binary were malformed, which a unit test rules out.
pub fn builtin() -> Arc<StaticEmbedder> {
    static CELL: OnceLock<Arc<StaticEmbedder>> = OnceLock::new();
    CELL.get_or_init(|| {
        #[allow(clippy::expect_used)]
        Arc::new(StaticEmbedder::from_parts(MODEL, VOCAB).expect("the static model compiled into the binary parses"))
    })
    .clone()
}

/// A Model2Vec-style static embedder over a table borrowed from the binary. See the module documentation.
pub struct StaticEmbedder {
    name: String,
    dim: usize,
    vocab: HashMap<&'static str, u32>,
    /// `vocab.len() * dim` int8 values, row-major.
    rows: &'static [u8],
    scales: Vec<f32>,
    unk: Option<u32>,
}

impl std::fmt::Debug for StaticEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticEmbedder").field("name", &self.name).field("dim", &self.dim).finish()
    }
}

impl StaticEmbedder {
    /// Parses a table in the safetensors layout (<https://github.com/huggingface/safetensors#format>) with an
    /// int8 tensor `embeddings` of shape `[vocab, dim]` and an f32 tensor `scales` of shape `[vocab]`, and the
    /// vocabulary (one token per line, `##` marks a word's continuation).
    ///
    /// # Errors
    /// [`ErrorKind::Internal`] when the header does not parse, a tensor is missing or of another type or
    /// shape, or the vocabulary and the table differ in length.
    pub fn from_parts(model: &'static [u8], vocab: &'static str) -> Result<Self> {
        let bad = |why: &str| Error::new(ErrorKind::Internal, format!("static model: {why}"));
        let header_len = model.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes).ok_or(bad("short"))?;
        let header_end = usize::try_from(header_len).ok().and_then(|n| n.checked_add(8)).ok_or(bad("header"))?;
        let header: serde_json::Value = serde_json::from_slice(model.get(8..header_end).ok_or(bad("header length"))?)
            .map_err(|e| bad(&e.to_string()))?;
        let data = &model[header_end..];
        let tensor = |name: &str, dtype: &str| -> Result<(Vec<usize>, &'static [u8])> {
            let t = &header[name];
            if t["dtype"] != dtype {
                return Err(bad(&format!("tensor {name} is not {dtype}")));
            }
            let shape: Vec<usize> = serde_json::from_value(t["shape"].clone()).map_err(|e| bad(&e.to_string()))?;
            let offs: [usize; 2] =
                serde_json::from_value(t["data_offsets"].clone()).map_err(|e| bad(&e.to_string()))?;
            let bytes = data.get(offs[0]..offs[1]).ok_or(bad("tensor offsets"))?;
            Ok((shape, bytes))
        };
        let (shape, rows) = tensor("embeddings", "I8")?;
        let (sshape, scale_bytes) = tensor("scales", "F32")?;
        let [n, dim] = shape[..] else { return Err(bad("embeddings is not two-dimensional")) };
        if sshape != [n] || rows.len() != n * dim || scale_bytes.len() != n * 4 || dim == 0 {
            return Err(bad("tensor shapes do not agree"));
        }
        let scales = scale_bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let tokens: Vec<&'static str> = vocab.lines().collect();
        if tokens.len() != n {
            return Err(bad(&format!("{} vocabulary lines for {n} rows", tokens.len())));
        }
        let vocab: HashMap<&'static str, u32> = tokens.iter().enumerate().map(|(i, t)| (*t, i as u32)).collect();
        let unk = vocab.get("[UNK]").copied();
        Ok(StaticEmbedder { name: format!("engram-static-minilm-l6-v1-{dim}"), dim, vocab, rows, scales, unk })
    }

    /// The WordPiece tokens of `text`, as ids (unknown words dropped), in order.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut piece = String::new();
        for word in pre_tokenize(&normalize(text)) {
            self.word_pieces(word, &mut piece, &mut ids);
        }
        ids
    }

    /// The tokens of `text` as strings, `[UNK]` kept (for comparison with the reference tokenizer).
    pub fn tokens(&self, text: &str) -> Vec<String> {
        let names: HashMap<u32, &str> = self.vocab.iter().map(|(t, i)| (*i, *t)).collect();
        let mut out = Vec::new();
        let mut piece = String::new();
        for word in pre_tokenize(&normalize(text)) {
            let mut ids = Vec::new();
            if self.word_pieces(word, &mut piece, &mut ids) {
                out.extend(ids.iter().map(|i| names.get(i).copied().unwrap_or("?").to_string()));
            } else {
                out.push("[UNK]".to_string());
            }
        }
        out
    }

    /// Greedy longest-match-first WordPiece (Wu et al. 2016, as in BERT) of one word into `ids`. False (and
    /// nothing pushed) when the word is unknown: too long, or a part matches no token.
    fn word_pieces(&self, word: &str, piece: &mut String, ids: &mut Vec<u32>) -> bool {
        if word.chars().count() > MAX_WORD_CHARS {
            return false;
        }
        let first = ids.len();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while end > start {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[start..end]);
                if let Some(id) = self.vocab.get(piece.as_str()) {
                    found = Some(*id);
                    break;
                }
                end = word[..end].char_indices().next_back().map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(first);
                    return false;
                }
            }
        }
        true
    }

    fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dim];
        for id in self.token_ids(text) {
            if Some(id) == self.unk {
                continue;
            }
            let i = id as usize;
            let scale = self.scales[i];
            let row = &self.rows[i * self.dim..(i + 1) * self.dim];
            for (x, q) in v.iter_mut().zip(row) {
                *x += f32::from(*q as i8) * scale;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

/// BERT's normaliser (uncased): drops NUL, U+FFFD and control and format characters, maps whitespace to a
/// space, puts spaces around CJK ideographs, strips accents (NFD, then no non-spacing marks), lowercases.
fn normalize(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_ascii() {
            match c {
                '\t' | '\n' | '\r' | ' ' => out.push(' '),
                c if c.is_ascii_control() => {}
                c => out.push(c.to_ascii_lowercase()),
            }
            continue;
        }
        if c == '\u{fffd}' || is_other(c) {
            continue;
        }
        if c.is_whitespace() {
            out.push(' ');
        } else if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            for d in std::iter::once(c).nfd() {
                if !is_nonspacing_mark(d) {
                    out.extend(d.to_lowercase());
                }
            }
        }
    }
    out
}

/// BERT's pre-tokeniser: words split on whitespace, and every punctuation character a word of its own.
fn pre_tokenize(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace().flat_map(|w| {
        let mut parts = Vec::new();
        let mut start = 0;
        for (i, c) in w.char_indices() {
            if is_punctuation(c) {
                if start < i {
                    parts.push(&w[start..i]);
                }
                parts.push(&w[i..i + c.len_utf8()]);
                start = i + c.len_utf8();
            }
        }
        if start < w.len() {
            parts.push(&w[start..]);
        }
        parts
    })
}

fn category(c: char, re: &'static OnceLock<regex::Regex>, class: &str) -> bool {
    let mut buf = [0u8; 4];
    #[allow(clippy::expect_used)]
    re.get_or_init(|| regex::Regex::new(&format!(r"\A{class}\z")).expect("a fixed Unicode class"))
        .is_match(c.encode_utf8(&mut buf))
}

/// Unicode categories Cc, Cf, Co, Cn (BERT's "control" test, tab and newlines excepted by the caller).
fn is_other(c: char) -> bool {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    category(c, &RE, r"[\p{Cc}\p{Cf}\p{Co}\p{Cn}]")
}

fn is_nonspacing_mark(c: char) -> bool {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    !c.is_ascii() && category(c, &RE, r"\p{Mn}")
}

/// ASCII punctuation (which includes `$`, `+`, `<`, `^`, `` ` ``, `|`, `~`) or Unicode category P.
fn is_punctuation(c: char) -> bool {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    category(c, &RE, r"\p{P}")
}

/// The CJK Unified Ideographs blocks BERT splits character by character.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

impl Embedder for StaticEmbedder {
    fn name(&self) -> &str {
        &self.name
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn mode(&self) -> &'static str {
        "local-static"
    }

    /// 0.15: on the paraphrase set (`tests/fixtures/paraphrases.jsonl`) every query's own memory scores 0.16 or
    /// more (median 0.46) and unrelated pairs score 0.09 at the median; a query about nothing stored ("Zanzibar
    /// Bluefin" against "Lunch is at noon": 0.0006) then finds nothing, as it does with BM25.
    fn min_similarity(&self) -> f32 {
        0.15
    }

    fn count_tokens(&self, texts: &[&str], _input_type: InputType) -> Result<Vec<usize>> {
        Ok(texts.iter().map(|t| self.token_ids(t).len()).collect())
    }

    fn embed(&self, texts: &[&str], _input_type: InputType) -> Result<Vec<Vec<f32>>> {
        Ok(super::each_text(texts, |t| self.embed_one(t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    #[test]
    fn the_tokenizer_matches_the_reference_bert_tokenizer() {
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(include_str!("../../tests/fixtures/static_tokens.json")).unwrap_or_default();
        assert!(cases.len() >= 15);
        let e = builtin();
        for case in cases {
            let text = case["text"].as_str().unwrap_or_default();
            let want: Vec<String> = serde_json::from_value(case["tokens"].clone()).unwrap_or_default();
            assert_eq!(e.tokens(text), want, "{text:?}");
        }
    }

    #[test]
    fn a_paraphrase_is_closer_than_an_unrelated_sentence() {
        let e = builtin();
        assert_eq!((e.dim(), e.name()), (256, "engram-static-minilm-l6-v1-256"));
        let v = e
            .embed(
                &[
                    "She drinks a double espresso every morning.",
                    "coffee habits",
                    "The roof needs new shingles before winter.",
                ],
                InputType::Document,
            )
            .unwrap_or_default();
        let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        let (close, far) = (cosine(&v[0], &v[1]), cosine(&v[2], &v[1]));
        assert!(close > far + 0.1, "paraphrase {close} against unrelated {far}");
        assert_eq!(
            v,
            e.embed(
                &[
                    "She drinks a double espresso every morning.",
                    "coffee habits",
                    "The roof needs new shingles before winter."
                ],
                InputType::Query
            )
            .unwrap_or_default()
        );
        let empty = e.embed(&["", "😀 ⅻ"], InputType::Query).unwrap_or_default();
        assert!(empty.iter().all(|v| v.iter().all(|x| *x == 0.0)), "no known token: the zero vector");
    }
}
