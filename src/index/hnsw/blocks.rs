//! Vectors at half precision, in blocks that never move: the vectors of a graph's points and the pending
//! vectors of a space.

use half::f16;
use half::slice::HalfFloatSliceExt;
use half::vec::HalfBitsVecExt;

/// Points per block: 2 MiB of 256-dimension vectors, 3 MiB of 384.
pub(crate) const BLOCK: usize = 4096;

/// Vectors of `dim` IEEE 754 half-precision components (`2 x dim` bytes each) for points `0..len`, in blocks of
/// 4,096 points.
///
/// * **Half precision** because the store keeps its vectors so on disk
///   ([`crate::storage::codec::vector_to_bytes`]) and every vector the index holds is a stored one: holding them
///   as `f32` widened the same values and doubled their memory (1 GiB at 1,000,000 vectors of 256 dimensions,
///   against 0.5 GiB now). Distances widen them to `f32` on the fly ([`crate::index::vector::cosine_half`]).
/// * **Blocks that never move**: a full block is never copied again, so the index grows without holding an old
///   and a new buffer at once (a flat `Vec` doubled by reallocation does, and copies every vector each time).
///   Only the last block grows, by doubling up to its full size, so a small space holds little.
pub struct VectorBlocks {
    dim: usize,
    blocks: Vec<Vec<f16>>,
    len: usize,
}

impl VectorBlocks {
    /// No vectors, of `dim` components each.
    pub fn new(dim: usize) -> Self {
        VectorBlocks { dim, blocks: Vec::new(), len: 0 }
    }

    /// `n` zero vectors. The blocks come zeroed from the allocator (`calloc`): their pages are first touched
    /// when written (at open, by the store's vectors).
    pub fn zeroed(dim: usize, n: usize) -> Self {
        let mut blocks = Vec::with_capacity(n.div_ceil(BLOCK));
        let mut left = n;
        while left > 0 {
            let take = left.min(BLOCK);
            blocks.push(vec![0u16; take * dim].reinterpret_into::<f16>());
            left -= take;
        }
        VectorBlocks { dim, blocks, len: n }
    }

    /// The vectors of a flat buffer (`dim` floats each, rounded to half precision; a last partial vector is
    /// dropped).
    pub fn from_flat(dim: usize, flat: &[f32]) -> Self {
        let mut v = VectorBlocks::new(dim);
        for x in flat.chunks_exact(dim.max(1)) {
            v.push(x);
        }
        v
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True without vectors.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A zero vector appended as slot `len`; returns it to write (`dim` components).
    pub fn push_zero(&mut self) -> &mut [f16] {
        // Invariant: `blocks.len() == len.div_ceil(BLOCK)`, every block but the last holds BLOCK vectors.
        let (bi, dim) = (self.len / BLOCK, self.dim);
        if bi == self.blocks.len() {
            self.blocks.push(Vec::new());
        }
        let last = &mut self.blocks[bi];
        if last.len() == last.capacity() {
            // Doubling up to a whole block, never beyond (a full block keeps no spare room).
            let want = (last.capacity() * 2).max(dim * 16).min(BLOCK * dim);
            last.reserve_exact(want.saturating_sub(last.len()));
        }
        let at = last.len();
        last.resize(at + dim, f16::ZERO);
        self.len += 1;
        &mut last[at..]
    }

    /// Appends `v` rounded to half precision: its first `dim` floats, zero-padded when shorter.
    pub fn push(&mut self, v: &[f32]) {
        let slot = self.push_zero();
        let n = v.len().min(slot.len());
        slot[..n].convert_from_f32_slice(&v[..n]);
    }

    /// Appends `v` as it is: its first `dim` components, zero-padded when shorter.
    pub fn push_half(&mut self, v: &[f16]) {
        let slot = self.push_zero();
        let n = v.len().min(slot.len());
        slot[..n].copy_from_slice(&v[..n]);
    }

    /// Vector `i` (`dim` components); None out of range.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[f16]> {
        if i >= self.len {
            return None;
        }
        let at = (i % BLOCK) * self.dim;
        self.blocks.get(i / BLOCK).and_then(|b| b.get(at..at + self.dim))
    }

    /// Vector `i`, for indices the index's own lists hold (`i < len`; beyond that, a panic, as a slice index
    /// out of range).
    #[inline]
    pub fn at(&self, i: usize) -> &[f16] {
        let at = (i % BLOCK) * self.dim;
        &self.blocks[i / BLOCK][at..at + self.dim]
    }

    /// Vector `i` widened to `f32`; None out of range.
    pub fn to_f32(&self, i: usize) -> Option<Vec<f32>> {
        self.get(i).map(|v| v.to_f32_vec())
    }

    /// Vector `i` to write in place; None out of range.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut [f16]> {
        if i >= self.len {
            return None;
        }
        let (at, dim) = ((i % BLOCK) * self.dim, self.dim);
        self.blocks.get_mut(i / BLOCK).and_then(|b| b.get_mut(at..at + dim))
    }

    /// Moves the last vector into slot `i` and drops the last slot; an emptied block is freed. Out of range:
    /// nothing.
    pub fn swap_remove(&mut self, i: usize) {
        if i >= self.len {
            return;
        }
        let last = self.len - 1;
        if i != last {
            let (from, to) = ((last % BLOCK) * self.dim, (i % BLOCK) * self.dim);
            let dim = self.dim;
            let (bi, bl) = (i / BLOCK, last / BLOCK);
            if bi == bl {
                self.blocks[bi].copy_within(from..from + dim, to);
            } else {
                let (head, tail) = self.blocks.split_at_mut(bl);
                head[bi][to..to + dim].copy_from_slice(&tail[0][from..from + dim]);
            }
        }
        if last.is_multiple_of(BLOCK) {
            self.blocks.truncate(last / BLOCK);
        } else if let Some(b) = self.blocks.last_mut() {
            b.truncate(b.len() - self.dim);
        }
        self.len = last;
    }

    /// Gives back the last block's unused room.
    pub fn shrink_to_fit(&mut self) {
        if let Some(b) = self.blocks.last_mut() {
            b.shrink_to_fit();
        }
        self.blocks.shrink_to_fit();
    }

    /// Vectors the allocated blocks could hold without allocating.
    pub fn capacity(&self) -> usize {
        let full = self.blocks.len().saturating_sub(1) * BLOCK;
        full + self.blocks.last().map_or(0, |b| b.capacity() / self.dim.max(1))
    }

    /// Blocks allocated.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Bytes allocated.
    pub fn heap_bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.capacity() * 2).sum::<usize>() + self.blocks.capacity() * 24
    }
}

#[cfg(test)]
mod tests {
    use half::vec::HalfFloatVecExt;

    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]
        /// The blocks hold what a flat vector of slots holds, through pushes and swap-removes across block
        /// edges (down to empty and up again), for vectors of 0 to 3 components, with no spare block.
        #[test]
        fn blocks_equal_a_flat_vector(
            dim in 0usize..4,
            ops in proptest::collection::vec((proptest::bool::weighted(0.7), 0usize..1 << 20), 0..3 * BLOCK),
        ) {
            let (mut blocks, mut flat) = (VectorBlocks::new(dim), Vec::<Vec<f32>>::new());
            for (i, (push, at)) in ops.into_iter().enumerate() {
                if push || flat.is_empty() {
                    let v: Vec<f32> = (0..dim).map(|j| ((i * 4 + j) % 2048) as f32).collect();
                    blocks.push(&v);
                    flat.push(v);
                } else {
                    let slot = at % flat.len();
                    blocks.swap_remove(slot);
                    flat.swap_remove(slot);
                }
                proptest::prop_assert_eq!(blocks.len(), flat.len());
                proptest::prop_assert_eq!(blocks.blocks(), flat.len().div_ceil(BLOCK));
            }
            for (slot, v) in flat.iter().enumerate() {
                proptest::prop_assert_eq!(blocks.to_f32(slot), Some(v.clone()));
            }
            proptest::prop_assert!(blocks.capacity() >= blocks.len() || dim == 0);
        }
    }

    #[test]
    fn blocks_hold_vectors_across_block_edges() {
        let flat: Vec<f32> = (0..(BLOCK + 3) * 3).map(|i| (i % 1000) as f32).collect();
        let mut v = VectorBlocks::from_flat(3, &flat);
        assert_eq!(v.len(), BLOCK + 3);
        assert_eq!(v.get(BLOCK), Some(&Vec::<f16>::from_f32_slice(&flat[BLOCK * 3..BLOCK * 3 + 3])[..]));
        assert_eq!(v.get(BLOCK + 3), None);
        v.push(&[7.0]);
        assert_eq!(v.to_f32(BLOCK + 3), Some(vec![7.0, 0.0, 0.0]));
        if let Some(x) = v.get_mut(1) {
            x.copy_from_slice(&Vec::<f16>::from_f32_slice(&[1.0, 2.0, 3.0]));
        }
        assert_eq!(v.to_f32(1), Some(vec![1.0, 2.0, 3.0]));
        v.swap_remove(1);
        assert_eq!((v.len(), v.to_f32(1)), (BLOCK + 3, Some(vec![7.0, 0.0, 0.0])));
        let z = VectorBlocks::zeroed(4, BLOCK + 10);
        assert_eq!((z.len(), z.to_f32(BLOCK + 9)), (BLOCK + 10, Some(vec![0.0; 4])));
        assert_eq!((z.blocks(), z.capacity()), (2, BLOCK + 10));
    }
}
