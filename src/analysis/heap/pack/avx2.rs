//! [`super::clear_run`] with AVX2: eight chunks at a time in 32-bit columns,
//! four in 64-bit ones.
//!
//! For the chunks of one register, in offset order, with `running` the end of
//! the occupied space before them: a chunk that is alive opens a gap if it
//! starts above both `running` and the ends of the alive chunks before it in
//! the register. Those ends are an exclusive prefix maximum, a few shifts and
//! maxima within the register, independent of `running`: the only value
//! carried from one register to the next is `running`, one maximum.
//!
//! The compares are signed (AVX2 has no unsigned ones but equality), which
//! `Word::LIMIT` (32-bit columns hold values below 2^31) and
//! `Word::vector_exact` (64-bit ones take this path only when every offset,
//! end and time stays below 2^63) make exact.

use std::arch::x86_64::{
    __m256i, _mm256_and_si256, _mm256_andnot_si256, _mm256_blend_epi32, _mm256_blendv_epi8,
    _mm256_castsi256_pd, _mm256_cmpgt_epi32, _mm256_cmpgt_epi64, _mm256_extract_epi32,
    _mm256_extract_epi64, _mm256_loadu_si256, _mm256_max_epi32, _mm256_movemask_pd,
    _mm256_or_si256, _mm256_permute4x64_epi64, _mm256_permutevar8x32_epi32, _mm256_set1_epi32,
    _mm256_set1_epi64x, _mm256_setr_epi32, _mm256_setzero_si256, _mm256_slli_si256,
    _mm256_testz_si256,
};

use super::Placement;

/// As [`super::clear_run_scalar`], eight entries at a time; stops at the
/// first eight that hold a gap's opening (the exact step takes those eight),
/// or where fewer than eight remain. Every value and the spans are below
/// 2^31 ([`super::Word::LIMIT`]): the compares are signed.
#[target_feature(enable = "avx2")]
pub(super) fn clear_run_u32(
    placement: &Placement<u32>,
    mut i: usize,
    spans: &[(u64, u64)],
    offset: &mut u64,
) -> usize {
    let (n, columns) = (placement.len(), placement.columns());
    let splat = |x: u64| _mm256_set1_epi32(x as u32 as i32);
    // The first span's bounds stay in registers: nearly every group has one.
    let (start, end) = (splat(spans[0].0), splat(spans[0].1));
    let zero = _mm256_setzero_si256();
    let (third, seventh, back_one) = (
        _mm256_set1_epi32(3),
        _mm256_set1_epi32(7),
        _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6),
    );
    // In every lane: moving it between vector and scalar registers costs more.
    let mut running = splat(*offset);
    while i + 8 <= n {
        // SAFETY: `i + 8 <= n` and every column has `n` elements; unaligned loads.
        let [starts, ends, offsets, aligned_ends] =
            columns.map(|c| unsafe { _mm256_loadu_si256(c.as_ptr().add(i).cast::<__m256i>()) });
        // Not alive: for each of the group's spans, starts after it ends or
        // ends before it starts.
        let mut dead = _mm256_or_si256(
            _mm256_cmpgt_epi32(starts, end),
            _mm256_cmpgt_epi32(start, ends),
        );
        for &(s, e) in &spans[1..] {
            let misses = _mm256_or_si256(
                _mm256_cmpgt_epi32(starts, splat(e)),
                _mm256_cmpgt_epi32(splat(s), ends),
            );
            dead = _mm256_and_si256(dead, misses);
        }
        let alive_ends = _mm256_andnot_si256(dead, aligned_ends);
        // Within each half: [e0, max(e0,e1), max(e0..e2), max(e0..e3)].
        let halves = _mm256_max_epi32(alive_ends, _mm256_slli_si256::<4>(alive_ends));
        let halves = _mm256_max_epi32(halves, _mm256_slli_si256::<8>(halves));
        // The low half's maximum carried into the high half.
        let low =
            _mm256_blend_epi32::<0b0000_1111>(_mm256_permutevar8x32_epi32(halves, third), zero);
        let through = _mm256_max_epi32(halves, low);
        // Shifted by one lane: the ends before each chunk.
        let shifted =
            _mm256_blend_epi32::<0b0000_0001>(_mm256_permutevar8x32_epi32(through, back_one), zero);
        let before = _mm256_max_epi32(shifted, running);
        let stop = _mm256_andnot_si256(dead, _mm256_cmpgt_epi32(offsets, before));
        if _mm256_testz_si256(stop, stop) == 0 {
            break;
        }
        running = _mm256_max_epi32(running, _mm256_permutevar8x32_epi32(through, seventh));
        i += 8;
    }
    *offset = u64::from(_mm256_extract_epi32::<0>(running) as u32);
    i
}

/// As [`super::clear_run_scalar`], four entries at a time; stops at the first
/// four that hold a gap's opening (the exact step takes those four), or where
/// fewer than four remain.
#[target_feature(enable = "avx2")]
pub(super) fn clear_run_u64(
    placement: &Placement<u64>,
    mut i: usize,
    spans: &[(u64, u64)],
    offset: &mut u64,
) -> usize {
    let (n, columns) = (placement.len(), placement.columns());
    let splat = |x: u64| _mm256_set1_epi64x(x as i64);
    let (start, end) = (splat(spans[0].0), splat(spans[0].1));
    let zero = _mm256_setzero_si256();
    let mut running = *offset;
    while i + 4 <= n {
        // SAFETY: `i + 4 <= n` and every column has `n` elements; unaligned loads.
        let [starts, ends, offsets, aligned_ends] =
            columns.map(|c| unsafe { _mm256_loadu_si256(c.as_ptr().add(i).cast::<__m256i>()) });
        // Not alive: for each of the group's spans, starts after it ends or
        // ends before it starts.
        let mut dead = _mm256_or_si256(
            _mm256_cmpgt_epi64(starts, end),
            _mm256_cmpgt_epi64(start, ends),
        );
        for &(s, e) in &spans[1..] {
            let misses = _mm256_or_si256(
                _mm256_cmpgt_epi64(starts, splat(e)),
                _mm256_cmpgt_epi64(splat(s), ends),
            );
            dead = _mm256_and_si256(dead, misses);
        }
        let alive_ends = _mm256_andnot_si256(dead, aligned_ends);
        // [e0, max(e0,e1), max(e0..e2), max(e0..e3)], then shifted by one lane.
        let pairs = max_i64(alive_ends, shift_one(alive_ends, zero));
        let through = max_i64(
            pairs,
            _mm256_blend_epi32::<0b0000_1111>(
                _mm256_permute4x64_epi64::<0b01_00_00_00>(pairs),
                zero,
            ),
        );
        let before = max_i64(shift_one(through, zero), _mm256_set1_epi64x(running as i64));
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
fn max_i64(a: __m256i, b: __m256i) -> __m256i {
    _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b))
}
