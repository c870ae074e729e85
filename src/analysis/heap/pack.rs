//! Best-fit packing of the heap simulator's groups, as
//! `GlobalDecreasingSizeBestFitHeap` places them: in a given order, each group
//! goes into the smallest free gap among the chunks alive at the same time
//! (the lowest such gap on a tie), or above them all.
//!
//! The work is quadratic by nature: in a training step most activations live
//! from the forward pass into the backward pass, so a group is alive with
//! about half of the groups placed before it, and each of them bounds a gap.
//! What makes the scan cheap is that it has no unpredictable branch: whether
//! a placed chunk is alive at the same time is a coin toss from one chunk to
//! the next (chunks at neighbouring offsets come from all over the program),
//! so it selects, without a branch, whether a chunk moves the running end of the
//! occupied space; a free gap, the one rare event (a few per group among
//! thousands of chunks on a 192-layer training step), is the only branch
//! taken. Stopping at an exact fit also pays. A placement in blocks of 512,
//! bit masks of the alive spans 64 at a time and a binary search over a
//! group's intervals were each measured and were no faster (BENCHMARKS.md).

use super::Group;

/// A group already placed: where it is. Its time span is kept apart, in
/// [`Placement::spans`], in the same order.
struct Placed {
    offset: u64,
    /// Where the next chunk may start: the end, aligned.
    end: u64,
    size: u64,
    /// The group's intervals in [`Placement::intervals`], when it has several;
    /// a group of one interval (`count == 1`) is its span.
    first: u32,
    count: u32,
}

/// The groups placed so far, sorted by (offset, size) so that the free gaps
/// can be read off in one pass. The time spans (inclusive, in event time) are
/// a separate array, read in step with the places.
struct Placement {
    spans: Vec<(u64, u64)>,
    placed: Vec<Placed>,
    /// The intervals of the groups of several, side by side (a group's own
    /// vector would cost a cache miss per test).
    intervals: Vec<(u64, u64)>,
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
    // Once per group placed: the scan reads the aligned ends it stored.
    let align = |x: u64| match alignment {
        0 | 1 => x,
        a => x.div_ceil(a).saturating_mul(a),
    };
    let mut offsets = vec![0u64; groups.len()];
    let mut placement = Placement {
        spans: Vec::with_capacity(groups.len()),
        placed: Vec::with_capacity(groups.len()),
        intervals: Vec::new(),
    };
    let mut heap_size = 0u64;
    for g in sorted {
        let group = &groups[g];
        if group.size == 0 {
            offsets[g] = 0;
            continue;
        }
        // The chunks alive at any moment this group is alive, in offset
        // order: their spans first, then, where either side is several
        // intervals, interval by interval (rare: a few percent of groups).
        let (start, end, single) = (group.start, group.end, group.intervals.len() == 1);
        let intervals = &placement.intervals;
        let overlaps_exactly = |p: &Placed, span: (u64, u64)| {
            let theirs = match p.count {
                1 => std::slice::from_ref(&span),
                n => &intervals[p.first as usize..][..n as usize],
            };
            group
                .intervals
                .iter()
                .any(|a| theirs.iter().any(|b| a.0 <= b.1 && b.0 <= a.1))
        };
        // The best gap so far: (offset, free size).
        let mut best: Option<(u64, u64)> = None;
        // The end of the occupied space so far, aligned: only a chunk
        // reaching past it moves it.
        let mut offset = 0u64;
        for (&(p_start, p_end), p) in placement.spans.iter().zip(&placement.placed) {
            let alive = (p_start <= end) & (start <= p_end);
            // The rare cases, each predictable: a gap (a few per group), or
            // a side of several intervals, whose spans may meet while their
            // intervals do not.
            let both_single = single & (p.count == 1);
            if (p.offset > offset) | !both_single {
                if !(alive && (both_single || overlaps_exactly(p, (p_start, p_end)))) {
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
                offset = offset.max(p.end);
                continue;
            }
            // A select, not a branch: `alive` is a coin toss from one chunk to
            // the next (a plain `if` or mask here was compiled into a branch,
            // mispredicted on every other chunk).
            offset = offset.max(std::hint::select_unpredictable(alive, p.end, 0));
        }
        // The space above the highest chunk is unbounded: the last resort.
        let chosen = best.map_or(offset, |(o, _)| o);
        offsets[g] = chosen;
        heap_size = heap_size.max(chosen.saturating_add(group.size));
        let at = placement
            .placed
            .partition_point(|p| (p.offset, p.size) <= (chosen, group.size));
        let first = placement.intervals.len() as u32;
        if !single {
            placement.intervals.extend_from_slice(&group.intervals);
        }
        placement.spans.insert(at, (group.start, group.end));
        placement.placed.insert(
            at,
            Placed {
                offset: chosen,
                end: align(chosen.saturating_add(group.size)),
                size: group.size,
                first,
                count: group.intervals.len() as u32,
            },
        );
    }
    (heap_size, offsets)
}

#[cfg(test)]
mod tests {
    use super::super::merged;
    use super::*;
    use crate::analysis::dataflow::ValueId;

    /// The packing as first written: every placed chunk tested with branches,
    /// which the branch-free scan above must agree with, offset for offset.
    fn pack_reference(groups: &[Group], alignment: u64, order: Order) -> (u64, Vec<u64>) {
        let align = |x: u64| {
            if alignment <= 1 {
                x
            } else {
                x.div_ceil(alignment).saturating_mul(alignment)
            }
        };
        let mut sorted: Vec<usize> = (0..groups.len()).collect();
        let key = |g: usize| {
            let x = &groups[g];
            match order {
                Order::Spatial => (u64::MAX - x.leader_size, u64::MAX - (x.own.1 - x.own.0), 0),
                Order::Temporal => (
                    u64::MAX - (x.end.max(x.own.1) - x.own.0),
                    u64::MAX - x.leader_size,
                    0,
                ),
                Order::Start => (x.own.0, 0, 0),
            }
        };
        sorted.sort_by_key(|&g| (key(g), groups[g].leader.0));
        let mut placed: Vec<(u64, u64, usize)> = Vec::new(); // (offset, size, group)
        let mut offsets = vec![0; groups.len()];
        let mut heap = 0;
        for g in sorted {
            let group = &groups[g];
            if group.size == 0 {
                continue;
            }
            let meets = |other: &Group| {
                group
                    .intervals
                    .iter()
                    .any(|a| other.intervals.iter().any(|b| a.0 <= b.1 && b.0 <= a.1))
            };
            let (mut best, mut offset): (Option<(u64, u64)>, u64) = (None, 0);
            for &(p_offset, p_size, p) in &placed {
                if !meets(&groups[p]) {
                    continue;
                }
                if p_offset > offset {
                    let free = p_offset - offset;
                    if free >= group.size && best.is_none_or(|(_, s)| free < s) {
                        best = Some((offset, free));
                    }
                }
                offset = offset.max(align(p_offset.saturating_add(p_size)));
            }
            let chosen = best.map_or(offset, |(o, _)| o);
            offsets[g] = chosen;
            heap = heap.max(chosen + group.size);
            let at = placed.partition_point(|&(o, s, _)| (o, s) <= (chosen, group.size));
            placed.insert(at, (chosen, group.size, g));
        }
        (heap, offsets)
    }

    /// A small deterministic generator (xorshift), so a failure reproduces.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn random_groups(rng: &mut Rng, count: usize, horizon: u64) -> Vec<Group> {
        // Few distinct sizes, as in real programs: exact fits and ties happen.
        let sizes = [0, 8, 16, 24, 64, 100, 128, 256, 1000, 4096];
        (0..count)
            .map(|i| {
                let pieces = if rng.below(8) == 0 {
                    2 + rng.below(3)
                } else {
                    1
                };
                let intervals: Vec<(u64, u64)> = (0..pieces)
                    .map(|_| {
                        let a = rng.below(horizon);
                        (a, a + rng.below(horizon / 3 + 1))
                    })
                    .collect();
                let intervals = merged(intervals);
                let size = sizes[rng.below(sizes.len() as u64) as usize];
                Group {
                    leader: ValueId(i as u32),
                    leader_size: size,
                    size,
                    own: intervals[0],
                    start: intervals.iter().map(|x| x.0).min().unwrap(),
                    end: intervals.iter().map(|x| x.1).max().unwrap(),
                    intervals,
                    members: vec![ValueId(i as u32)],
                }
            })
            .collect()
    }

    #[test]
    fn masked_scan_places_every_group_where_the_plain_scan_does() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let count = 1 + rng.below(120) as usize;
            let horizon = 1 + rng.below(400);
            let groups = random_groups(&mut rng, count, horizon);
            for alignment in [1, 8, 64, 48] {
                for order in [Order::Spatial, Order::Temporal, Order::Start] {
                    let (heap, offsets) = pack(&groups, alignment, order);
                    let (want_heap, want) = pack_reference(&groups, alignment, order);
                    assert_eq!(heap, want_heap, "round {round}, alignment {alignment}");
                    for (g, group) in groups.iter().enumerate() {
                        if group.size > 0 {
                            assert_eq!(offsets[g], want[g], "round {round}, group {g}");
                        }
                    }
                }
            }
        }
    }
}
