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

    /// An unsigned LEB128 varint of at most 10 bytes ([`put_varint`]).
    pub(crate) fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at).ok_or("truncated file")?;
            self.at += 1;
            v |= u64::from(byte & 0x7f)
                .checked_shl(shift)
                .filter(|_| shift < 63 || byte <= 1)
                .ok_or("varint overflow")?;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint overflow".into())
    }

    /// The next value of a strictly increasing sequence coded as varint gaps from `prev` (the first value,
    /// `first`, as its gap from 0, which may be 0).
    pub(crate) fn gap_from(&mut self, prev: u64, first: bool) -> Result<u64, String> {
        match self.varint()? {
            0 if !first => Err("values out of order".into()),
            gap => prev.checked_add(gap).ok_or_else(|| "value out of range".into()),
        }
    }

    /// A varint that must fit a `u32`.
    pub(crate) fn varint32(&mut self) -> Result<u32, String> {
        u32::try_from(self.varint()?).map_err(|_| "value out of range".into())
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

/// Appends `v` as an unsigned LEB128 varint (7 bits a byte, low bits first, high bit set on all but the last
/// byte; the DWARF and protobuf encoding): 1 byte below 128, at most 10.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_bad_ones_are_errors() {
        let values = [0u64, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX - 1, u64::MAX];
        let mut b = Vec::new();
        for v in values {
            put_varint(&mut b, v);
        }
        assert_eq!(b.len(), 1 + 1 + 1 + 2 + 2 + 2 + 3 + 5 + 10 + 10);
        let mut r = Reader::new(&b);
        for v in values {
            assert_eq!(r.varint(), Ok(v));
        }
        assert!(r.done());
        assert!(Reader::new(&[0x80]).varint().is_err(), "truncated");
        assert!(Reader::new(&[0xff; 11]).varint().is_err(), "too long");
        assert!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).varint().is_err(),
            "over 64 bits"
        );
        assert!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x10]).varint32().is_err(), "over 32 bits");
        assert_eq!(Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]).varint32(), Ok(u32::MAX));
        // Gaps of a strictly increasing sequence: 0 only first, no overflow.
        let mut r = Reader::new(&[0, 3, 0]);
        assert_eq!(r.gap_from(0, true), Ok(0));
        assert_eq!(r.gap_from(0, false), Ok(3));
        assert!(r.gap_from(3, false).is_err(), "a repeated value");
        assert!(Reader::new(&[2]).gap_from(u64::MAX - 1, false).is_err(), "past u64::MAX");
    }
}
