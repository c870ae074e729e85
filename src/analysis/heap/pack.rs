//! Best-fit packing of the heap simulator's groups, as
//! `GlobalDecreasingSizeBestFitHeap` places them: in a given order, each group
//! goes into the smallest free gap among the chunks alive at the same time
//! (the lowest such gap on a tie), or above them all. In start order
//! (libtpu's HBM) a gap that held chunks before fits a group only below their
//! highest end ([`Scan`]'s `capped`), so that scan runs without AVX2.
//!
//! The work is quadratic by nature: in a training step most activations live
//! from the forward pass into the backward pass, so a group is alive with
//! about half of the groups placed before it, and each of them bounds a gap.
//! So the scan over the chunks placed so far is built for speed:
//!
//! - It reads chunks in offset order and keeps the end of the space occupied
//!   so far by chunks alive with the group; a chunk alive with it that starts
//!   above that end bounds a free gap. Gaps are rare (a few per group among
//!   thousands of chunks on a 192-layer training step), so the scan
//!   ([`clear_run`]) runs over chunks that open none, and stops where one might,
//!   for the exact step ([`Scan::step`]) to decide.
//! - Whether a chunk is alive is a coin toss from one chunk to the next (chunks
//!   at neighbouring offsets come from all over the program), so the scan
//!   selects rather than branches on it.
//! - The chunks are stored column by column, and as 32-bit words where they
//!   fit ([`Word`]): offsets in units of the alignment (every offset is a
//!   multiple of it), times as they are. With AVX2 (`avx2.rs`) the scan
//!   reads eight such chunks at once (four of 64 bits); the running end
//!   within them is a prefix maximum.
//! - A chunk of several time intervals is stored as one entry per interval,
//!   so the scans test one interval per entry, the same way for every chunk.
//!   A group of several intervals (a few percent of them, but each scans the
//!   whole placement) is alive with an entry if one of its intervals is: the
//!   scans OR the tests, vector or not.
//! - Stopping at an exact fit also pays.
//!
//! A placement in blocks of 512, bit masks of the alive spans 64 at a time
//! and a binary search over a group's intervals were each measured and were
//! no faster (BENCHMARKS.md). A unit test holds every scan to the plain one.

use super::Group;

#[cfg(target_arch = "x86_64")]
mod avx2;

/// The element of the scanned columns. A packing is first tried with `u32`
/// (half the bytes to read and twice the chunks per vector); if a time or an
/// offset in units is not below [`Word::LIMIT`], it starts over with `u64`
/// in bytes.
trait Word: Copy + Default + Into<u64> + TryFrom<u64> {
    /// Chunks per step of the vector scan.
    const LANES: usize;

    /// Values stored are below this: where one is not, the packing starts
    /// over with wider columns.
    const LIMIT: u64;

    /// Whether the vector scan is exact on this packing.
    fn vector_exact(groups: &[Group], alignment: u64) -> bool;

    /// The vector scan over columns of this width.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    unsafe fn clear_run_avx2(
        placement: &Placement<Self>,
        i: usize,
        spans: &[(u64, u64)],
        offset: &mut u64,
    ) -> usize;
}

impl Word for u32 {
    const LANES: usize = 8;
    /// The 32-bit vector compares are signed (AVX2 has no unsigned ones).
    const LIMIT: u64 = 1 << 31;

    /// Always: every value stays below [`Word::LIMIT`].
    fn vector_exact(_: &[Group], _: u64) -> bool {
        true
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn clear_run_avx2(
        placement: &Placement<u32>,
        i: usize,
        spans: &[(u64, u64)],
        offset: &mut u64,
    ) -> usize {
        // SAFETY: the caller checked AVX2.
        unsafe { avx2::clear_run_u32(placement, i, spans, offset) }
    }
}

impl Word for u64 {
    const LANES: usize = 4;
    const LIMIT: u64 = u64::MAX;

    /// The 64-bit compares are signed (AVX2 has no unsigned ones): exact when
    /// every offset and time stays below 2^63. Every chunk ends at most its
    /// size plus the alignment above the highest end before it, so the sum
    /// of those bounds every offset.
    fn vector_exact(groups: &[Group], alignment: u64) -> bool {
        let top = groups.iter().try_fold(0u64, |top, g| {
            top.checked_add(g.size)?.checked_add(alignment)
        });
        let latest = groups.iter().map(|g| g.end).max().unwrap_or(0);
        top.is_some_and(|t| t < 1 << 63) && latest < 1 << 63
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn clear_run_avx2(
        placement: &Placement<u64>,
        i: usize,
        spans: &[(u64, u64)],
        offset: &mut u64,
    ) -> usize {
        // SAFETY: the caller checked AVX2.
        unsafe { avx2::clear_run_u64(placement, i, spans, offset) }
    }
}

/// The groups placed so far, sorted by offset so that the free gaps can be
/// read off in one pass; column by column, so that the vector scan loads
/// several chunks' fields at once. Offsets and ends are in units of `unit`
/// bytes.
///
/// Among entries at the same offset the order does not matter: the first of
/// them alive with a group decides the gap below that offset, and moves the
/// occupied end above it, so that none of the others can open one. That is
/// also why a group of several intervals can have one entry per interval,
/// all at its offset: the scans test time intervals only.
struct Placement<W> {
    unit: u64,
    /// Time intervals, inclusive, in event time.
    starts: Vec<W>,
    ends: Vec<W>,
    offsets: Vec<W>,
    /// Where the next chunk may start: the end, aligned.
    aligned_ends: Vec<W>,
    /// Each chunk's end in bytes, not aligned (read by the start-order scan only).
    raw_ends: Vec<u64>,
}

impl<W: Word> Placement<W> {
    fn new(unit: u64) -> Self {
        Placement {
            unit,
            starts: Vec::new(),
            ends: Vec::new(),
            offsets: Vec::new(),
            aligned_ends: Vec::new(),
            raw_ends: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        self.offsets.len()
    }

    /// What the scans read: starts, ends, offsets, aligned ends, each of
    /// [`Placement::len`] entries.
    fn columns(&self) -> [&[W]; 4] {
        let n = self.len();
        [
            &self.starts[..n],
            &self.ends[..n],
            &self.offsets[..n],
            &self.aligned_ends[..n],
        ]
    }

    /// Whether entry `i` is alive at some moment `group` is.
    fn meets(&self, i: usize, group: &Group) -> bool {
        let (start, end) = (self.starts[i].into(), self.ends[i].into());
        group.intervals.iter().any(|a| a.0 <= end && start <= a.1)
    }

    /// Places `group` at `offset` (in units), keeping the offset order;
    /// `None` if a value does not fit in `W`.
    ///
    /// Every column shifts by the group's entries at once: inserting is a
    /// quarter of the packing's time on a 192-layer training step, and
    /// quadratic like the scans.
    fn insert(&mut self, group: &Group, offset: u64, aligned_end: u64, raw_end: u64) -> Option<()> {
        let word = |x: u64| (x < W::LIMIT).then(|| W::try_from(x).ok()).flatten();
        let (offset_w, aligned_end_w) = (word(offset)?, word(aligned_end)?);
        let starts: Vec<W> = group
            .intervals
            .iter()
            .map(|&(s, _)| word(s))
            .collect::<Option<_>>()?;
        let ends: Vec<W> = group
            .intervals
            .iter()
            .map(|&(_, e)| word(e))
            .collect::<Option<_>>()?;
        let at = self.offsets.partition_point(|&o| o.into() <= offset);
        let k = starts.len();
        self.starts.splice(at..at, starts);
        self.ends.splice(at..at, ends);
        self.offsets
            .splice(at..at, std::iter::repeat_n(offset_w, k));
        self.aligned_ends
            .splice(at..at, std::iter::repeat_n(aligned_end_w, k));
        self.raw_ends
            .splice(at..at, std::iter::repeat_n(raw_end, k));
        Some(())
    }
}

/// One group's scan over the placement.
struct Scan<'g> {
    group: &'g Group,
    /// The end of the space occupied so far by chunks alive with the group,
    /// aligned, in units.
    offset: u64,
    /// The best gap so far: (offset in units, free bytes).
    best: Option<(u64, u64)>,
    /// libtpu's start-order packing: a gap that held chunks before (placed
    /// earlier, not alive with the group) takes the group only up to the
    /// last of their unaligned ends, though it is ranked by its whole size.
    capped: bool,
    /// The chunks not alive with the group that start in the current gap (at
    /// or above `offset`): the highest unaligned end, in bytes, of those below
    /// the last offset seen among them, that offset, and the highest end of
    /// those at it (a chunk at the gap's upper bound does not cap it).
    dead: Option<Dead>,
}

#[derive(Clone, Copy)]
struct Dead {
    below: Option<u64>,
    last: u64,
    at_last: u64,
}

impl Dead {
    fn add(dead: Option<Dead>, at: u64, end: u64) -> Dead {
        match dead {
            None => Dead {
                below: None,
                last: at,
                at_last: end,
            },
            Some(d) if d.last == at => Dead {
                at_last: d.at_last.max(end),
                ..d
            },
            Some(d) => Dead {
                below: Some(d.below.map_or(d.at_last, |b| b.max(d.at_last))),
                last: at,
                at_last: end,
            },
        }
    }

    /// The highest end among those that start below `at`.
    fn end_below(dead: Option<Dead>, at: u64) -> Option<u64> {
        let d = dead?;
        if d.last < at {
            Some(d.below.map_or(d.at_last, |b| b.max(d.at_last)))
        } else {
            d.below
        }
    }
}

impl Scan<'_> {
    /// Chunk `i`, exactly; `true` at an exact fit (no gap fits tighter, and
    /// ties go to the lowest offset, so the scan is over).
    fn step<W: Word>(&mut self, placement: &Placement<W>, i: usize) -> bool {
        let at = placement.offsets[i].into();
        if !placement.meets(i, self.group) {
            if self.capped && at >= self.offset {
                self.dead = Some(Dead::add(self.dead, at, placement.raw_ends[i]));
            }
            return false;
        }
        if at > self.offset {
            // Below 2^64: the units times the unit are bytes of a u64 offset.
            let free = (at - self.offset) * placement.unit;
            let usable = Dead::end_below(self.dead, at).map_or(free, |end| {
                (at * placement.unit)
                    .min(end)
                    .saturating_sub(self.offset * placement.unit)
            });
            if usable >= self.group.size && self.best.is_none_or(|(_, s)| free < s) {
                self.best = Some((self.offset, free));
                if free == self.group.size {
                    return true;
                }
            }
        }
        let end = placement.aligned_ends[i].into();
        if end > self.offset {
            self.offset = end;
            self.dead = None;
        }
        false
    }
}

/// Whether the scans may use AVX2: what the CPU has.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Kernel::Avx2;
        }
        Kernel::Scalar
    }
}

/// From entry `i` on, passes the entries that open no gap for a group alive
/// over `spans` (inclusive, in event time), moving `offset` (the end of the
/// occupied space, in units); returns where the exact step must look: the
/// first of `width` entries among which one may open a gap, or the
/// placement's length.
fn clear_run<W: Word>(
    vector: bool,
    placement: &Placement<W>,
    i: usize,
    spans: &[(u64, u64)],
    offset: &mut u64,
    capped: bool,
) -> usize {
    // The capped scan must see every chunk at or above the occupied end, the
    // ones not alive with the group too: only the scalar pass stops there.
    if capped {
        return clear_run_scalar(placement, i, spans, offset, true);
    }
    #[cfg(target_arch = "x86_64")]
    if vector {
        // SAFETY: `vector` is set only where `Kernel::detect` found AVX2.
        return unsafe { W::clear_run_avx2(placement, i, spans, offset) };
    }
    let _ = vector; // read only on x86-64
    clear_run_scalar(placement, i, spans, offset, false)
}

fn clear_run_scalar<W: Word>(
    placement: &Placement<W>,
    mut i: usize,
    spans: &[(u64, u64)],
    offset: &mut u64,
    capped: bool,
) -> usize {
    let [starts, ends, offsets, aligned_ends] = placement.columns();
    let n = placement.len();
    let mut running = *offset;
    while i < n {
        // Stops also at a chunk that is not alive (the exact step passes it):
        // a branch on `alive` here would be mispredicted on every other chunk
        // (LLVM splits `alive & above` into two branches).
        let at = offsets[i].into();
        if at > running || (capped && at == running) {
            break;
        }
        let (s, e) = (starts[i].into(), ends[i].into());
        let alive = spans.iter().fold(false, |alive, &(start, end)| {
            alive | ((s <= end) & (start <= e))
        });
        // A select, not a branch: a plain `if` or mask here is compiled into one.
        running = running.max(std::hint::select_unpredictable(
            alive,
            aligned_ends[i].into(),
            0,
        ));
        i += 1;
    }
    *offset = running;
    i
}

#[derive(Clone, Copy)]
pub(super) enum Order {
    Spatial,
    Temporal,
    /// By the leader's start: in event time no two groups start together.
    /// libtpu's HBM packing, whose gaps are also capped (`Scan::capped`).
    Start,
}

/// Best-fit packing in the given order; returns the heap size and each group's offset.
pub(super) fn pack(groups: &[Group], alignment: u64, order: Order) -> (u64, Vec<u64>) {
    pack_with(groups, alignment, order, Kernel::detect(), Width::Narrow)
}

/// The widest columns a packing starts with (tests pick `Wide` to test it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Width {
    /// `u32` where the values fit, else `u64`.
    Narrow,
    #[cfg(test)]
    Wide,
}

fn pack_with(
    groups: &[Group],
    alignment: u64,
    order: Order,
    kernel: Kernel,
    width: Width,
) -> (u64, Vec<u64>) {
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
    // With a unit below 2^32, an aligned end that saturated at 2^64 bytes
    // (the pipeline refuses such modules) never fits in 32 bits of units, so
    // the packing falls back to bytes and saturates exactly as before.
    let capped = matches!(order, Order::Start);
    let narrow = width == Width::Narrow && alignment < 1 << 32;
    narrow
        .then(|| {
            place::<u32>(
                groups,
                &sorted,
                (alignment.max(1), alignment),
                kernel,
                capped,
            )
        })
        .flatten()
        // In bytes: unit 1, and the alignment saturates as it always did.
        .unwrap_or_else(|| {
            place::<u64>(groups, &sorted, (1, alignment), kernel, capped).expect("every u64 fits")
        })
}

/// Places the groups in `sorted` order with columns of `W`, offsets in units
/// of `unit` bytes (1, or the alignment: every offset is a multiple of it);
/// `None` as soon as a value does not fit in `W`.
fn place<W: Word>(
    groups: &[Group],
    sorted: &[usize],
    (unit, alignment): (u64, u64),
    kernel: Kernel,
    capped: bool,
) -> Option<(u64, Vec<u64>)> {
    let vector = !capped && kernel != Kernel::Scalar && W::vector_exact(groups, alignment);
    let width = if vector { W::LANES } else { 1 };
    let align = |x: u64| match alignment {
        0 | 1 => x,
        a => x.div_ceil(a).saturating_mul(a),
    };
    let mut offsets = vec![0u64; groups.len()];
    let mut placement = Placement::<W>::new(unit);
    let mut heap_size = 0u64;
    for &g in sorted {
        let group = &groups[g];
        if group.size == 0 {
            offsets[g] = 0;
            continue;
        }
        // The vector scan compares the group's spans as `W`s.
        if group.end >= W::LIMIT {
            return None;
        }
        let mut scan = Scan {
            group,
            offset: 0,
            best: None,
            capped,
            dead: None,
        };
        let n = placement.len();
        let mut i = 0;
        'scan: while i < n {
            i = clear_run(
                vector,
                &placement,
                i,
                &group.intervals,
                &mut scan.offset,
                capped,
            );
            let stop = (i + width).min(n);
            while i < stop {
                if scan.step(&placement, i) {
                    break 'scan;
                }
                i += 1;
            }
        }
        // The space above the highest chunk is unbounded: the last resort.
        let chosen = scan.best.map_or(scan.offset, |(o, _)| o) * unit;
        offsets[g] = chosen;
        heap_size = heap_size.max(chosen.saturating_add(group.size));
        let aligned_end = align(chosen.saturating_add(group.size)) / unit;
        placement.insert(
            group,
            chosen / unit,
            aligned_end,
            chosen.saturating_add(group.size),
        )?;
    }
    Some((heap_size, offsets))
}

#[cfg(test)]
mod tests {
    use super::super::merged;
    use super::*;
    use crate::analysis::dataflow::ValueId;

    /// The packing as first written: every placed chunk tested with branches,
    /// which both scans above (scalar and vector) must agree with, offset for offset.
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
            let capped = matches!(order, Order::Start);
            let (mut best, mut offset): (Option<(u64, u64)>, u64) = (None, 0);
            let mut dead: Vec<(u64, u64)> = Vec::new();
            for &(p_offset, p_size, p) in &placed {
                if !meets(&groups[p]) {
                    if capped && p_offset >= offset {
                        dead.push((p_offset, p_offset + p_size));
                    }
                    continue;
                }
                if p_offset > offset {
                    let free = p_offset - offset;
                    let dead_end = dead.iter().filter(|d| d.0 < p_offset).map(|d| d.1).max();
                    let usable = dead_end.map_or(free, |e| p_offset.min(e).saturating_sub(offset));
                    if usable >= group.size && best.is_none_or(|(_, s)| free < s) {
                        best = Some((offset, free));
                    }
                }
                let end = align(p_offset.saturating_add(p_size));
                if end > offset {
                    offset = end;
                    dead.clear();
                }
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
                    end: intervals.iter().map(|x| x.1).max().unwrap(),
                    intervals,
                    members: vec![ValueId(i as u32)],
                }
            })
            .collect()
    }

    /// The kernels this machine can run.
    fn kernels() -> Vec<Kernel> {
        let mut kernels = vec![Kernel::Scalar];
        if Kernel::detect() != Kernel::Scalar {
            kernels.push(Kernel::detect());
        }
        kernels
    }

    #[test]
    fn both_scans_place_every_group_where_the_plain_scan_does() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let count = 1 + rng.below(120) as usize;
            let horizon = 1 + rng.below(400);
            let groups = random_groups(&mut rng, count, horizon);
            for alignment in [1, 8, 64, 48] {
                for order in [Order::Spatial, Order::Temporal, Order::Start] {
                    let (want_heap, want) = pack_reference(&groups, alignment, order);
                    for (kernel, width) in kernels()
                        .into_iter()
                        .flat_map(|k| [(k, Width::Narrow), (k, Width::Wide)])
                    {
                        let (heap, offsets) = pack_with(&groups, alignment, order, kernel, width);
                        let at =
                            format!("round {round}, alignment {alignment}, {kernel:?}, {width:?}");
                        assert_eq!(heap, want_heap, "{at}");
                        for (g, group) in groups.iter().enumerate() {
                            if group.size > 0 {
                                assert_eq!(offsets[g], want[g], "{at}, group {g}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Long placements: the vector scan passes many runs of eight between
    /// two stops, with the occupied end it tests against lagging behind.
    #[test]
    fn long_placements_agree_with_the_plain_scan() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for _ in 0..3 {
            let groups = random_groups(&mut rng, 700, 3000);
            for order in [Order::Spatial, Order::Temporal] {
                let want = pack_reference(&groups, 64, order);
                for kernel in kernels() {
                    assert_eq!(pack_with(&groups, 64, order, kernel, Width::Narrow), want);
                }
            }
        }
    }

    #[test]
    fn values_too_wide_for_a_scan_fall_back_to_one_that_is_exact() {
        let mut rng = Rng(7);
        let mut groups = random_groups(&mut rng, 50, 100);
        assert!(u64::vector_exact(&groups, 64));
        // Offsets past 2^32 units of 64 bytes: the 32-bit columns give up
        // and the packing starts over in 64-bit ones.
        groups[0].size = 1 << 40;
        groups[1].size = 1 << 40;
        groups[2].size = (1 << 39) + 8;
        let (want_heap, want) = pack_reference(&groups, 64, Order::Spatial);
        assert!(want_heap > 64 << 32);
        assert_eq!(pack(&groups, 64, Order::Spatial), (want_heap, want));
        // An alignment of 2^33 bytes: packed in bytes from the start.
        let huge = 1 << 33;
        assert_eq!(
            pack(&groups, huge, Order::Temporal),
            pack_reference(&groups, huge, Order::Temporal)
        );
        // Sizes adding up past 2^63 bytes: the signed 64-bit vector compares
        // could be wrong, so the scalar scan runs.
        groups[0].size = 1 << 62;
        groups[1].size = 1 << 62;
        assert!(!u64::vector_exact(&groups, 64));
        let (heap, offsets) = pack(&groups, 64, Order::Spatial);
        assert_eq!((heap, offsets), pack_reference(&groups, 64, Order::Spatial));
    }
}
