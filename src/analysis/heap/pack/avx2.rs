//! [`super::clear_run`] four chunks at a time, with AVX2.
//!
//! For four chunks in offset order, with `running` the end of the occupied
//! space before them: a chunk that is alive opens a gap if it starts above
//! both `running` and the ends of the alive chunks before it among the four.
//! Those ends are an exclusive prefix maximum, two shifts and two maxima
//! within the register, independent of `running`: the only value carried
//! from one four to the next is `running`, one scalar maximum.
//!
//! The compares are signed (AVX2 has no unsigned 64-bit compare), which
//! `Kernel::pick` makes exact: it chooses this kernel only when every offset,
//! end and time of the packing stays below 2^63.

use std::arch::x86_64::{
    __m256i, _mm256_andnot_si256, _mm256_blend_epi32, _mm256_blendv_epi8, _mm256_castsi256_pd,
    _mm256_cmpgt_epi64, _mm256_extract_epi64, _mm256_loadu_si256, _mm256_movemask_pd,
    _mm256_or_si256, _mm256_permute4x64_epi64, _mm256_set1_epi64x, _mm256_setzero_si256,
};

use super::Placement;

/// As [`super::clear_run_scalar`], four entries at a time; stops at the first
/// four that hold a gap's opening (the exact step takes those four), or where
/// fewer than four remain.
#[target_feature(enable = "avx2")]
pub(super) fn clear_run(
    placement: &Placement,
    mut i: usize,
    span: (u64, u64),
    offset: &mut u64,
) -> usize {
    let (n, columns, (start, end)) = (placement.len(), placement.columns(), span);
    let (start, end) = (
        _mm256_set1_epi64x(start as i64),
        _mm256_set1_epi64x(end as i64),
    );
    let zero = _mm256_setzero_si256();
    let mut running = *offset;
    while i + 4 <= n {
        // SAFETY: `i + 4 <= n` and every column has `n` elements; unaligned loads.
        let [starts, ends, offsets, aligned_ends] =
            columns.map(|c| unsafe { _mm256_loadu_si256(c.as_ptr().add(i).cast::<__m256i>()) });
        // Not alive: starts after the group ends, or ends before it starts.
        let dead = _mm256_or_si256(
            _mm256_cmpgt_epi64(starts, end),
            _mm256_cmpgt_epi64(start, ends),
        );
        let alive_ends = _mm256_andnot_si256(dead, aligned_ends);
        // [e0, max(e0,e1), max(e0..e2), max(e0..e3)], then shifted by one lane.
        let pairs = max(alive_ends, shift_one(alive_ends, zero));
        let through = max(
            pairs,
            _mm256_blend_epi32::<0b0000_1111>(
                _mm256_permute4x64_epi64::<0b01_00_00_00>(pairs),
                zero,
            ),
        );
        let before = max(shift_one(through, zero), _mm256_set1_epi64x(running as i64));
        let stop = _mm256_andnot_si256(dead, _mm256_cmpgt_epi64(offsets, before));
        if _mm256_movemask_pd(_mm256_castsi256_pd(stop)) != 0 {
            break;
        }
        running = running.max(_mm256_extract_epi64::<3>(through) as u64);
        i += 4;
    }
    *offset = running;
    i
}

/// `[0, x0, x1, x2]`.
#[target_feature(enable = "avx2")]
fn shift_one(x: __m256i, zero: __m256i) -> __m256i {
    _mm256_blend_epi32::<0b0000_0011>(_mm256_permute4x64_epi64::<0b10_01_00_00>(x), zero)
}

/// Lane by lane, signed.
#[target_feature(enable = "avx2")]
fn max(a: __m256i, b: __m256i) -> __m256i {
    _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b))
}
