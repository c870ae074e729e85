//! May a buffer move into an allocation that already holds others? XLA's
//! `MaybeAssignBuffer` / `LiveRangeInterferes` (notes §4.6).
//!
//! XLA compares the new buffer with every buffer already in the allocation,
//! which is quadratic when a long chain of values shares one allocation. Each
//! allocation here keeps its values' live ranges in an interval tree, so only
//! the values that overlap the new one in time are compared.

use iset::IntervalMap;

use super::dataflow::{BufferId, Dataflow, ValueId};
use super::liveness::{self, LiveRange};
use super::schedule::Schedule;
use super::sharing;
use crate::chip::Target;
use crate::hlo::{Module, Opcode};

/// The live ranges of the values in one allocation.
pub struct Occupancy {
    /// `start..end + 1` (live ranges are inclusive) → values with that range.
    ranges: IntervalMap<u64, Vec<ValueId>>,
    screen: Screen,
    buckets: Buckets,
}

/// What settles most candidate allocations without the interval tree
/// ([`Screen::surely_overlaps`]). Small and `Copy`, so that the assignment
/// can keep its reusable allocations' screens side by side: each buffer of a
/// training step scans thousands of them.
#[derive(Clone, Copy, Default)]
pub struct Screen {
    /// The range of a value that lives longest (the latest end). Buffers that
    /// live to the end of the program (outputs) overlap it strictly; testing
    /// it first saves the tree query when thousands of outputs each try
    /// thousands of output allocations.
    tail: Option<LiveRange>,
    /// The range of a value that starts first (the longest of those). A
    /// donated parameter's allocation holds the parameter from the start, so
    /// testing it too settles most candidates of a training step without the
    /// tree query.
    head: Option<LiveRange>,
    /// The buckets (see [`Buckets`]) one value here lives through, from
    /// before the bucket's first step to after its last. A temporary of a
    /// training step is refused by hundreds of allocations whose values
    /// cover it outright in the middle of their time, not at either end:
    /// these bits answer those without the tree.
    covered: Mask,
}

/// How many [`Buckets`] the program's time is cut into.
pub const BUCKETS: usize = 256;

/// The program's time cut into [`BUCKETS`] buckets of equal width.
#[derive(Clone, Copy)]
pub struct Buckets {
    width: u32,
}

/// A set of [`Buckets`].
#[derive(Clone, Copy, Default)]
pub struct Mask([u64; 4]);

impl Buckets {
    pub fn new(program_end: u32) -> Buckets {
        Buckets {
            width: program_end / BUCKETS as u32 + 1,
        }
    }

    /// The buckets `r` has a step in.
    pub fn touched(self, r: LiveRange) -> Mask {
        Mask::between(r.start / self.width, r.end / self.width)
    }

    /// The buckets `r` lives through, from before their first step to after their last.
    fn covered(self, r: LiveRange) -> Mask {
        match (r.end / self.width).checked_sub(1) {
            Some(last) => Mask::between(r.start / self.width + 1, last),
            None => Mask::default(),
        }
    }
}

impl Mask {
    /// Buckets `first..=last` (none when `first > last`).
    fn between(first: u32, last: u32) -> Mask {
        let mut words = [0u64; 4];
        for (w, word) in (0u32..).zip(words.iter_mut()) {
            let (lo, hi) = (64 * w, 64 * w + 63);
            let (a, b) = (first.max(lo), last.min(hi));
            if a <= b {
                let ones = u64::MAX >> (63 - (b - a));
                *word = ones << (a - lo);
            }
        }
        Mask(words)
    }

    fn meets(self, other: Mask) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }

    pub fn add(&mut self, other: Mask) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a |= b;
        }
    }

    /// The buckets in the set, in order.
    pub fn buckets(self) -> impl Iterator<Item = usize> {
        (0..self.0.len()).flat_map(move |w| {
            let mut word = self.0[w];
            std::iter::from_fn(move || {
                let bit = (word != 0).then(|| word.trailing_zeros() as usize)?;
                word &= word - 1;
                Some(64 * w + bit)
            })
        })
    }
}

impl Occupancy {
    /// An empty allocation, its time cut into `buckets`.
    pub fn new(buckets: Buckets) -> Occupancy {
        Occupancy {
            ranges: IntervalMap::new(),
            screen: Screen::default(),
            buckets,
        }
    }

    /// Whether a value here lives from before `end` to `end`, the last step
    /// of the program: then every other buffer that lives to `end` from
    /// before it overlaps it strictly and can never move in.
    pub fn closed_to_outputs(&self, end: u32) -> bool {
        self.screen
            .tail
            .is_some_and(|t| t.end == end && t.start < end)
    }

    pub fn screen(&self) -> Screen {
        self.screen
    }

    /// Records a buffer's values as living in this allocation.
    pub fn add(&mut self, dataflow: &Dataflow, ranges: &[Option<LiveRange>], b: BufferId) {
        for &v in &dataflow.buffers[b.index()].values {
            let Some(r) = ranges[v.index()] else {
                continue;
            };
            self.screen.record(self.buckets, r);
            let key = u64::from(r.start)..u64::from(r.end) + 1;
            match self.ranges.get_mut(key.clone()) {
                Some(values) => values.push(v),
                None => {
                    self.ranges.insert(key, vec![v]);
                }
            }
        }
    }
}

impl Screen {
    /// The buckets one value here lives through.
    pub fn covered(&self) -> Mask {
        self.covered
    }

    /// Takes in the range of a value added to the allocation.
    pub fn record(&mut self, buckets: Buckets, r: LiveRange) {
        if self.tail.is_none_or(|t| r.end > t.end) {
            self.tail = Some(r);
        }
        if self
            .head
            .is_none_or(|h| r.start < h.start || (r.start == h.start && r.end > h.end))
        {
            self.head = Some(r);
        }
        self.covered.add(buckets.covered(r));
    }

    /// Whether `r` (which has a step in the buckets `touched`) overlaps a
    /// value here without either ending where the other starts, as far as
    /// the first and last values and the covered buckets tell: then it
    /// interferes, whatever the values (the cheap part of
    /// [`Interference::overlaps`]). `false` does not mean it fits.
    pub fn surely_overlaps(&self, r: LiveRange, touched: Mask) -> bool {
        let strictly = |a: LiveRange| a.overlaps(&r) && a.end != r.start && r.end != a.start;
        // A value living through a bucket that `r` has a step in lives from
        // before that step to after it: a strict overlap.
        self.covered.meets(touched)
            || self.tail.is_some_and(strictly)
            || self.head.is_some_and(strictly)
    }
}

/// The questions one buffer asks of each candidate allocation.
pub struct Interference<'a> {
    pub target: &'a Target,
    pub module: &'a Module,
    pub dataflow: &'a Dataflow,
    pub ranges: &'a [Option<LiveRange>],
    pub schedule: &'a Schedule,
    /// The program's time in buckets, as every [`Occupancy`] cuts it.
    pub buckets: Buckets,
}

impl Interference<'_> {
    /// Does buffer `b` overlap in time with anything in `occupancy`? Values
    /// that only touch may share when the later one may write over the earlier
    /// one.
    pub fn overlaps(&self, b: BufferId, occupancy: &Occupancy) -> bool {
        self.dataflow.buffers[b.index()].values.iter().any(|&vb| {
            let Some(rb) = self.ranges[vb.index()] else {
                return false;
            };
            if occupancy
                .screen
                .surely_overlaps(rb, self.buckets.touched(rb))
            {
                return true;
            }
            let query = u64::from(rb.start)..u64::from(rb.end) + 1;
            occupancy
                .ranges
                .iter(query)
                .flat_map(|(_, values)| values)
                .any(|&va| self.values_interfere(va, vb))
        })
    }

    fn values_interfere(&self, va: ValueId, vb: ValueId) -> bool {
        let (Some(ra), Some(rb)) = (self.ranges[va.index()], self.ranges[vb.index()]) else {
            return false;
        };
        if !ra.overlaps(&rb) {
            return false;
        }
        let handover = (ra.end == rb.start && self.hands_over(va, vb))
            || (rb.end == ra.start && self.hands_over(vb, va));
        !handover
    }

    /// May `later` take over `earlier`'s memory where one ends and the other
    /// starts (`LiveRangeInterferes`)? Only if `later`'s defining
    /// instruction is not a copy, reads the position where `earlier`'s live
    /// range ends ([`liveness::end_position`]), and may write its output
    /// over that operand. A value also passed into a `call` ends at the
    /// callee's parameter, which no instruction of the caller reads.
    fn hands_over(&self, earlier: ValueId, later: ValueId) -> bool {
        let (module, dataflow) = (self.module, self.dataflow);
        let l = &dataflow.values[later.index()];
        let user = module.instr(l.instr);
        if user.opcode == Opcode::Copy {
            return false;
        }
        let (pos, node) = liveness::end_position(module, dataflow, self.schedule, earlier);
        user.operands.contains(&pos)
            && module
                .instr(pos)
                .shape
                .nodes()
                .get(node as usize)
                .is_some_and(|(idx, _)| {
                    sharing::can_share_operand_buffer(
                        self.target,
                        module,
                        pos,
                        idx,
                        l.instr,
                        &l.index,
                    )
                })
    }

    /// A copy never writes into the buffer it copies from, even when the
    /// source is dead by then: does `b` copy from a buffer for which
    /// `in_allocation` is true?
    pub fn copies_from(&self, b: BufferId, in_allocation: impl Fn(BufferId) -> bool) -> bool {
        let (module, dataflow) = (self.module, self.dataflow);
        dataflow.buffers[b.index()].values.iter().any(|&nv| {
            let copy = module.instr(dataflow.values[nv.index()].instr);
            copy.opcode == Opcode::Copy
                && copy.operands.iter().any(|op| {
                    dataflow
                        .value_of(*op)
                        .iter()
                        .any(|&av| in_allocation(dataflow.values[av.index()].buffer))
                })
        })
    }
}
