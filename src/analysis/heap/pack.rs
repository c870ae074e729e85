//! Best-fit packing of the heap simulator's groups, as
//! `GlobalDecreasingSizeBestFitHeap` places them: in a given order, each group
//! goes into the smallest free gap among the chunks alive at the same time
//! (the lowest such gap on a tie), or above them all.
//!
//! The work is quadratic by nature: in a training step most activations live
//! from the forward pass into the backward pass, so a group is alive with
//! about half of the groups placed before it, and each of them bounds a gap.
//! A placement in blocks of 512, bit masks of the alive spans 64 at a time
//! and a binary search over a group's intervals were each measured and were
//! no faster than this flat scan (BENCHMARKS.md); what does pay is stopping
//! at an exact fit.

use super::Group;

/// A group already placed: where it is. Its time span is kept apart, in
/// [`Placement::spans`], in the same order.
struct Placed {
    offset: u64,
    size: u64,
    group: u32,
    /// The group is one interval: its span says everything about its time.
    single: bool,
}

/// The groups placed so far, sorted by (offset, size) so that the free gaps
/// can be read off in one pass. The time spans (inclusive, in event time) are
/// a separate array: the scan, the hot loop of the whole accounting, reads
/// every span and the rest only of the few groups alive at the same time, so
/// it stays within 16 bytes per group.
#[derive(Default)]
struct Placement {
    spans: Vec<(u64, u64)>,
    placed: Vec<Placed>,
}

#[derive(Clone, Copy)]
pub(super) enum Order {
    Spatial,
    Temporal,
    /// By the leader's start: in event time no two groups start together.
    Start,
}

/// Best-fit packing in the given order; returns the heap size and each group's offset.
pub(super) fn pack(groups: &[Group], alignment: u64, order: Order) -> (u64, Vec<u64>) {
    let id = |g: &Group| g.leader.0;
    let mut sorted: Vec<usize> = (0..groups.len()).collect();
    match order {
        // Size first, then the leader's own interval: colocations are not looked at.
        Order::Spatial => sorted.sort_by_key(|&g| {
            let x = &groups[g];
            (
                std::cmp::Reverse(x.leader_size),
                std::cmp::Reverse(x.own.1 - x.own.0),
                id(x),
            )
        }),
        // Time first: from the leader's start to the last colocation's end.
        Order::Temporal => sorted.sort_by_key(|&g| {
            let x = &groups[g];
            (
                std::cmp::Reverse(x.end.max(x.own.1) - x.own.0),
                std::cmp::Reverse(x.leader_size),
                id(x),
            )
        }),
        Order::Start => sorted.sort_by_key(|&g| (groups[g].own.0, id(&groups[g]))),
    }
    // Alignments are powers of two in every backend: a mask, not a division,
    // in the hot loop below.
    let mask = alignment.is_power_of_two().then(|| alignment - 1);
    let align = |x: u64| match mask {
        Some(m) => x.checked_add(m).map_or(u64::MAX, |y| y & !m),
        None if alignment <= 1 => x,
        None => x.div_ceil(alignment).saturating_mul(alignment),
    };
    let mut offsets = vec![0u64; groups.len()];
    let mut placement = Placement {
        spans: Vec::with_capacity(groups.len()),
        placed: Vec::with_capacity(groups.len()),
    };
    let mut heap_size = 0u64;
    for g in sorted {
        let group = &groups[g];
        if group.size == 0 {
            offsets[g] = 0;
            continue;
        }
        // The chunks alive at any moment this group is alive, in offset
        // order: their spans first (about half of them meet this group's, in
        // no predictable pattern), then, for groups of several intervals,
        // interval by interval.
        let (start, end, single) = (group.start, group.end, group.intervals.len() == 1);
        let mut best: Option<(u64, u64)> = None; // (offset, free size)
        let mut offset = 0u64;
        for (&(p_start, p_end), p) in placement.spans.iter().zip(&placement.placed) {
            if p_start > end || start > p_end {
                continue;
            }
            let overlaps = (single && p.single)
                || group.intervals.iter().any(|a| {
                    groups[p.group as usize]
                        .intervals
                        .iter()
                        .any(|b| a.0 <= b.1 && b.0 <= a.1)
                });
            if !overlaps {
                continue;
            }
            if p.offset > offset {
                let free_size = p.offset - offset;
                if free_size >= group.size && best.is_none_or(|(_, s)| free_size < s) {
                    best = Some((offset, free_size));
                    // No gap fits tighter, and ties go to the lowest offset.
                    if free_size == group.size {
                        break;
                    }
                }
            }
            // `offset` is aligned already: only a chunk reaching past it moves it.
            let chunk_end = p.offset.saturating_add(p.size);
            if chunk_end > offset {
                offset = align(chunk_end);
            }
        }
        // The space above the highest chunk is unbounded: the last resort.
        let chosen = best.map_or(offset, |(o, _)| o);
        offsets[g] = chosen;
        heap_size = heap_size.max(chosen.saturating_add(group.size));
        let at = placement
            .placed
            .partition_point(|p| (p.offset, p.size) <= (chosen, group.size));
        placement.spans.insert(at, (group.start, group.end));
        placement.placed.insert(
            at,
            Placed {
                offset: chosen,
                size: group.size,
                group: g as u32,
                single,
            },
        );
    }
    (heap_size, offsets)
}
