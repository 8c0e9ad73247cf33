//! The dot-product kernels of the vector path: `f32` with `f32`, and `f32` or half precision with half
//! precision (the index holds its vectors at half precision, [`crate::index::vector::VectorBlocks`]).
//!
//! On x86-64 CPUs with AVX2, FMA and F16C (checked once per process at run time, so one binary serves every
//! x86-64 machine) they run 32 lanes per step with fused multiply-adds, widening half-precision lanes with
//! `vcvtph2ps`. Elsewhere eight independent partial sums let the compiler vectorise the portable loop (a single
//! running f32 sum cannot be reordered, so it stays scalar), and half-precision slices are widened 64 components
//! at a time by the `half` crate (which uses the CPU's conversion instructions where it has them).
//!
//! Each half-precision kernel sums in exactly the order of its `f32` counterpart, so a distance to a stored
//! vector is bit for bit the distance to that vector widened to `f32` (tested).

use half::f16;
use half::slice::HalfFloatSliceExt;

/// Cosine similarity of two L2-normalised vectors (their dot product), clamped to -1..=1. Slices of different
/// lengths are compared over the shorter one's length.
///
/// At 384 dimensions the AVX2 path is about twice the portable loop's speed. The two paths round differently,
/// in the last bits of the sum only.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        if simd::avx2() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked just above), the only requirement of `dot`.
            return unsafe { simd::dot(a, b) }.clamp(-1.0, 1.0);
        }
    }
    dot_portable(a, b).clamp(-1.0, 1.0)
}

/// [`cosine`] of an `f32` vector (a query) and a half-precision one (a stored vector), equal to
/// `cosine(a, widened b)` bit for bit.
pub fn cosine_half(a: &[f32], b: &[f16]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        if simd::avx2() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked just above), the only requirement of `dot`.
            return unsafe { simd::dot(a, b) }.clamp(-1.0, 1.0);
        }
    }
    dot_half_portable(a, b, |x, out| out.copy_from_slice(x)).clamp(-1.0, 1.0)
}

/// [`cosine`] of two half-precision vectors (two points of a graph), equal to `cosine(widened a, widened b)`
/// bit for bit.
pub fn cosine_halves(a: &[f16], b: &[f16]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        if simd::avx2() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked just above), the only requirement of `dot`.
            return unsafe { simd::dot(a, b) }.clamp(-1.0, 1.0);
        }
    }
    dot_half_portable(a, b, |x, out| x.convert_to_f32_slice(out)).clamp(-1.0, 1.0)
}

pub(super) fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let tail = add_lanes(&mut acc, a, b);
    let mut s: f32 = acc.iter().sum();
    for (x, y) in tail {
        s += x * y;
    }
    s
}

/// Adds the products of `a` and `b` 8 lanes at a time into `acc`; returns the pairs past the last whole 8.
fn add_lanes<'a>(
    acc: &mut [f32; 8],
    a: &'a [f32],
    b: &'a [f32],
) -> std::iter::Zip<std::slice::Iter<'a, f32>, std::slice::Iter<'a, f32>> {
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    ra.iter().zip(rb)
}

/// Components widened at a time by the portable half-precision kernels (a multiple of 8, so the lanes line up
/// with [`dot_portable`]'s).
const WIDEN: usize = 64;

/// [`dot_portable`] of `a` (widened into a buffer by `widen`, 64 components at a time) and half-precision `b`,
/// in the same order of sums.
pub(super) fn dot_half_portable<T>(a: &[T], b: &[f16], widen: impl Fn(&[T], &mut [f32])) -> f32 {
    let (mut wa, mut wb) = ([0.0f32; WIDEN], [0.0f32; WIDEN]);
    let mut acc = [0.0f32; 8];
    let mut s = None;
    for (ca, cb) in a.chunks(WIDEN).zip(b.chunks(WIDEN)) {
        let (wa, wb) = (&mut wa[..ca.len()], &mut wb[..cb.len()]);
        widen(ca, wa);
        cb.convert_to_f32_slice(wb);
        let mut tail = add_lanes(&mut acc, wa, wb).peekable();
        if tail.peek().is_some() {
            // Only the last chunk can end off the 8-lane grid: the sum is then complete.
            let mut t: f32 = acc.iter().sum();
            for (x, y) in tail {
                t += x * y;
            }
            s = Some(t);
        }
    }
    s.unwrap_or_else(|| acc.iter().sum())
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::{
        __m128i, __m256, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_loadu_si128, _mm_movehl_ps, _mm_shuffle_ps,
        _mm256_add_ps, _mm256_castps256_ps128, _mm256_cvtph_ps, _mm256_extractf128_ps, _mm256_fmadd_ps,
        _mm256_loadu_ps, _mm256_setzero_ps,
    };
    use std::sync::OnceLock;

    use half::f16;

    /// True when this CPU has AVX2, FMA and F16C (detected once; later calls read a cached flag). Every x86-64
    /// CPU with AVX2 so far has the other two.
    #[inline]
    pub(super) fn avx2() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
        })
    }

    /// Eight lanes of `p` from index `i`: `f32`s loaded, or half-precision values widened.
    pub(super) trait Lanes: Copy {
        /// # Safety
        /// `i + 8` components must be readable at `p`; the CPU must have AVX2 and F16C.
        unsafe fn load8(p: *const Self, i: usize) -> __m256;
        fn widen(self) -> f32;
    }

    impl Lanes for f32 {
        #[inline]
        #[target_feature(enable = "avx2")]
        unsafe fn load8(p: *const f32, i: usize) -> __m256 {
            // SAFETY: the caller's contract (8 floats readable at `p + i`); an unaligned load.
            unsafe { _mm256_loadu_ps(p.add(i)) }
        }
        #[inline(always)]
        fn widen(self) -> f32 {
            self
        }
    }

    impl Lanes for f16 {
        #[inline]
        #[target_feature(enable = "avx2,f16c")]
        unsafe fn load8(p: *const f16, i: usize) -> __m256 {
            // SAFETY: the caller's contract (8 halves, 16 bytes, readable at `p + i`); `f16` is a transparent
            // `u16`; an unaligned load, widened by `vcvtph2ps`.
            unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.add(i).cast::<__m128i>())) }
        }
        #[inline(always)]
        fn widen(self) -> f32 {
            self.to_f32()
        }
    }

    /// Dot product of `a` and `b` (equal lengths): four 8-lane FMA accumulators over 32-component steps, then
    /// 8-lane and scalar tails.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C ([`avx2`]).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot<A: Lanes, B: Lanes>(a: &[A], b: &[B]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc: [__m256; 4] = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        // SAFETY (every load below): `i + 8 <= n` or `i + 32 <= n` holds before each load of 8 components at
        // `i`, and both slices hold at least `n` components; the CPU's features are the caller's contract.
        while i + 32 <= n {
            for (j, s) in acc.iter_mut().enumerate() {
                let (x, y) = unsafe { (A::load8(pa, i + 8 * j), B::load8(pb, i + 8 * j)) };
                *s = _mm256_fmadd_ps(x, y, *s);
            }
            i += 32;
        }
        while i + 8 <= n {
            let (x, y) = unsafe { (A::load8(pa, i), B::load8(pb, i)) };
            acc[0] = _mm256_fmadd_ps(x, y, acc[0]);
            i += 8;
        }
        let v = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
        let q = _mm_add_ss(q, _mm_shuffle_ps::<0b01>(q, q));
        let mut s = _mm_cvtss_f32(q);
        for k in i..n {
            s += a[k].widen() * b[k].widen();
        }
        s
    }
}
