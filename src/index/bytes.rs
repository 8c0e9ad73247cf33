//! A bounds-checked little-endian reader for the files Engram writes beside its store (saved HNSW graphs,
//! index snapshots). Every read checks its length: a truncated or damaged file is an error, never a panic.

/// Reads `b` from the start.
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reader { b, at: 0 }
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or("truncated file")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| "truncated file")?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| "truncated file")?))
    }

    /// `n` items of `size` bytes each, as one slice (`n * size` must not overflow).
    pub(crate) fn items(&mut self, n: usize, size: usize) -> Result<&'a [u8], String> {
        self.take(n.checked_mul(size).ok_or("size overflow")?)
    }

    /// True when every byte was read.
    pub(crate) fn done(&self) -> bool {
        self.at == self.b.len()
    }

    /// Bytes not read yet.
    pub(crate) fn left(&self) -> usize {
        self.b.len() - self.at
    }
}

/// Two little-endian halves of a 16-byte item: `(u64, u64)`.
pub(crate) fn pair(c: &[u8]) -> (u64, u64) {
    let mut a = [0u8; 8];
    let mut b = [0u8; 8];
    a.copy_from_slice(&c[..8]);
    b.copy_from_slice(&c[8..16]);
    (u64::from_le_bytes(a), u64::from_le_bytes(b))
}
