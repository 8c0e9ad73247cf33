//! The vectors of a graph's points, in blocks that never move.

/// Points per block: 4 MiB of 256-dimension vectors, 6 MiB of 384.
const BLOCK: usize = 4096;

/// Vectors of `dim` floats for points `0..len`, in blocks of 4,096 points allocated whole and zeroed.
///
/// A full block never moves, so the graph grows without copying what it holds: a flat `Vec` doubled by
/// reallocation can hold the old and the new buffer at once (mimalloc copies large reallocations; at 1M points
/// of 256 dimensions that is 1 GiB twice). A block comes zeroed from the allocator (`calloc`), so the unwritten
/// room of the last block costs no resident memory when the allocator hands out fresh pages.
pub struct VectorBlocks {
    dim: usize,
    blocks: Vec<Box<[f32]>>,
    len: usize,
}

impl VectorBlocks {
    /// No vectors, of `dim` floats each.
    pub fn new(dim: usize) -> Self {
        VectorBlocks { dim, blocks: Vec::new(), len: 0 }
    }

    /// `n` zero vectors (pages untouched until written).
    pub fn zeroed(dim: usize, n: usize) -> Self {
        let mut v = VectorBlocks::new(dim);
        v.grow_to(n);
        v
    }

    /// The vectors of a flat buffer (`dim` floats each; a last partial vector is dropped), copied block by
    /// block.
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

    fn grow_to(&mut self, n: usize) {
        while self.blocks.len() * BLOCK < n {
            self.blocks.push(vec![0.0; BLOCK * self.dim].into_boxed_slice());
        }
        self.len = self.len.max(n);
    }

    /// Appends `v`: its first `dim` floats, zero-padded when shorter.
    pub fn push(&mut self, v: &[f32]) {
        let at = self.len;
        self.grow_to(at + 1);
        if let Some(slot) = self.get_mut(at) {
            let n = v.len().min(slot.len());
            slot[..n].copy_from_slice(&v[..n]);
        }
    }

    /// Vector `i` (`dim` floats); None out of range.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[f32]> {
        if i >= self.len {
            return None;
        }
        let at = (i % BLOCK) * self.dim;
        self.blocks.get(i / BLOCK).map(|b| &b[at..at + self.dim])
    }

    /// Vector `i`, for indices the graph's own lists hold (`i < len`; beyond the last block, a panic, as a
    /// slice index out of range).
    #[inline]
    pub fn at(&self, i: usize) -> &[f32] {
        let at = (i % BLOCK) * self.dim;
        &self.blocks[i / BLOCK][at..at + self.dim]
    }

    /// Vector `i` to write in place; None out of range.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut [f32]> {
        if i >= self.len {
            return None;
        }
        let (at, dim) = ((i % BLOCK) * self.dim, self.dim);
        self.blocks.get_mut(i / BLOCK).map(|b| &mut b[at..at + dim])
    }

    /// Bytes allocated (whole blocks, touched or not).
    pub fn heap_bytes(&self) -> usize {
        self.blocks.len() * BLOCK * self.dim * 4 + self.blocks.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_vectors_across_block_edges() {
        let flat: Vec<f32> = (0..(BLOCK + 3) * 3).map(|i| i as f32).collect();
        let mut v = VectorBlocks::from_flat(3, &flat);
        assert_eq!(v.len(), BLOCK + 3);
        assert_eq!(v.get(BLOCK), Some(&flat[BLOCK * 3..BLOCK * 3 + 3]));
        assert_eq!(v.get(BLOCK + 3), None);
        v.push(&[7.0]);
        assert_eq!(v.get(BLOCK + 3), Some(&[7.0, 0.0, 0.0][..]));
        if let Some(x) = v.get_mut(1) {
            x.copy_from_slice(&[1.0, 2.0, 3.0]);
        }
        assert_eq!(v.get(1), Some(&[1.0, 2.0, 3.0][..]));
        let z = VectorBlocks::zeroed(4, 10);
        assert_eq!((z.len(), z.get(9)), (10, Some(&[0.0; 4][..])));
        assert_eq!(z.heap_bytes(), BLOCK * 16 + z.blocks.capacity() * 16);
    }
}
