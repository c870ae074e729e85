//! The heap simulator: packs temporary buffers into one block, as XLA's
//! `HeapSimulator` with `GlobalDecreasingSizeBestFitHeap` does (notes §4.5).
//!
//! 1. Replay the schedule: at each logical time, values that start are
//!    allocated (or share a dying operand's chunk, or their buffer's chunk),
//!    then values that end are freed. Every event advances a counter; the
//!    counter, not the logical time, is the time axis of the packing.
//! 2. Pack the groups (a value plus the values that shared its chunk) best-fit,
//!    once biggest-first ("spatial") and once longest-first ("temporal"), and
//!    keep the smaller heap; or, where the target says so (TPU HBM, see
//!    [`Target::heap_order`]), once in the order the groups start, with the
//!    smaller of the other two kept aside as XLA's fallback (the buffer
//!    assignment decides which it keeps, from the whole space's total).

// Fx, not SipHash: keys are ids, and these maps are on the hot path.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

mod pack;

use self::pack::{pack, Order};

use super::dataflow::{BufferId, Dataflow, ValueId};
use super::liveness::LiveRange;
use super::sharing;
use crate::chip::{HeapOrder, Target};
use crate::hlo::{Module, Opcode};

/// Where one value ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug, Default)]
pub struct HeapResult {
    pub heap_size: u64,
    /// The chunk of every simulated value.
    pub chunks: Vec<(ValueId, Chunk)>,
    /// The most bytes live at once without fragmentation (`NoFragmentationStatsHeap`).
    pub peak_live: u64,
    /// When the heap was packed in start order and the other orders XLA knows
    /// give other sizes: each order's heap size.
    pub order_sizes: Option<OrderSizes>,
    /// The same heap packed as XLA's fallback algorithm packs it (best fit
    /// biggest-first and longest-first, the smaller kept), when it was packed
    /// in start order and the fallback differs: libtpu's buffer assignment
    /// keeps it instead when the memory space's total passes its limit
    /// (`BufferAssigner::RunAssignBuffersWithFallback`).
    pub fallback: Option<Box<HeapResult>>,
}

/// The heap size of one memory space packed in each order XLA's heaps use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct OrderSizes {
    /// In the order the values are first defined (what hlomem reports).
    pub definition: u64,
    /// Biggest first.
    pub biggest_first: u64,
    /// Longest-lived first.
    pub longest_first: u64,
}

impl HeapResult {
    /// Adds another memory space's packing: chunks stay sorted by value.
    /// A fallback must have been decided on before (it is dropped).
    pub fn absorb(&mut self, other: HeapResult) {
        self.heap_size = self.heap_size.max(other.heap_size);
        self.order_sizes = self.order_sizes.or(other.order_sizes);
        self.peak_live = self.peak_live.saturating_add(other.peak_live);
        self.chunks.extend(other.chunks);
        self.chunks.sort_by_key(|(v, _)| *v);
    }
}

/// One allocation unit: a value and the values placed with it (its buffer's
/// later values, and values that took over its chunk when it died).
struct Group {
    leader: ValueId,
    /// The leader's buffer size: what the orders sort by.
    leader_size: u64,
    /// The largest member: what must fit (`GetMaxColocationSize`).
    size: u64,
    /// The leader's own event interval.
    own: (u64, u64),
    /// Event-time intervals of every member, inclusive, sorted and merged
    /// where they overlap: two groups meet in time if these meet.
    intervals: Vec<(u64, u64)>,
    members: Vec<ValueId>,
    /// The latest end among the intervals.
    end: u64,
}

impl Group {
    /// The group as libtpu's start-order packing sees it: one interval from
    /// its first start to its last end. A loop-carried buffer's values (the
    /// loop's operand, the body's parameter and result, the loop's output)
    /// leave time holes between them that XLA's own packing lets another
    /// buffer take; libtpu keeps the chunk through them (notes §4.5). Only
    /// what `pack` reads is kept (not the members).
    fn spanned(&self) -> Group {
        let start = self.intervals.first().map_or(self.own.0, |i| i.0);
        Group {
            leader: self.leader,
            leader_size: self.leader_size,
            size: self.size,
            own: self.own,
            intervals: vec![(start, self.end)],
            members: Vec::new(),
            end: self.end,
        }
    }
}

/// A value's interval in event time, as `HeapSimulator::RunComputation`
/// replays it: `start` when it is allocated or shares a chunk, `end` when freed.
struct Interval {
    value: ValueId,
    start: u64,
    end: u64,
    /// Values that share this one's chunk (`ShareWith`), transitively followed.
    colocations: Vec<usize>,
    /// `false` for a value that shares another's chunk.
    leader: bool,
}

pub fn simulate(
    module: &Module,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    buffers: &[BufferId],
    target: &Target,
    color: u64,
) -> HeapResult {
    let alignment = target.heap_alignment(color);
    let simulated: HashSet<BufferId> = buffers.iter().copied().collect();
    let mut values: Vec<ValueId> = buffers
        .iter()
        .flat_map(|b| dataflow.buffers[b.index()].values.iter().copied())
        .filter(|v| ranges[v.index()].is_some())
        .collect();
    if values.is_empty() {
        return HeapResult::default();
    }
    let range = |v: ValueId| ranges[v.index()].expect("filtered");
    // Defines and frees both happen in (start, end, id) order.
    values.sort_by_key(|&v| (range(v).start, range(v).end, v));
    let last_time = values.iter().map(|&v| range(v).end).max().unwrap_or(0) as usize;
    let mut defined: Vec<Vec<ValueId>> = vec![Vec::new(); last_time + 1];
    let mut freed: Vec<Vec<ValueId>> = vec![Vec::new(); last_time + 1];
    for &v in &values {
        defined[range(v).start as usize].push(v);
        freed[range(v).end as usize].push(v);
    }
    // Every value is sized as its buffer (the largest of the buffer's values).
    let size_of = |v: ValueId| dataflow.buffers[dataflow.values[v.index()].buffer.index()].size;

    let mut intervals: Vec<Interval> = Vec::new();
    let mut interval_of: HashMap<ValueId, usize> = HashMap::default();
    let mut first_of_buffer: HashMap<BufferId, ValueId> = HashMap::default();
    let mut counter = 0u64;
    let mut live_bytes = 0u64;
    let mut peak_live = 0u64;
    // Zero-sized values sit at offset 0 and take no event (XLA returns early).
    let mut zero_sized: Vec<ValueId> = Vec::new();
    for t in 0..=last_time {
        for v in std::mem::take(&mut defined[t]) {
            let value = &dataflow.values[v.index()];
            let size = size_of(v);
            live_bytes = live_bytes.saturating_add(value.size);
            peak_live = peak_live.max(live_bytes);
            let shared_with = if let Some(&first) = first_of_buffer.get(&value.buffer) {
                Some(first)
            } else if dataflow.buffers[value.buffer.index()].values.len() == 1 {
                let taken =
                    dying_operand(target, module, dataflow, ranges, &simulated, &freed[t], v);
                if let Some(op) = taken {
                    // The operand is freed right before its chunk is shared.
                    freed[t].retain(|&x| x != op);
                    if let Some(&i) = interval_of.get(&op) {
                        intervals[i].end = counter;
                        counter += 1;
                    }
                }
                taken
            } else {
                None
            };
            if size == 0 {
                zero_sized.push(v);
                first_of_buffer.entry(value.buffer).or_insert(v);
                continue;
            }
            let index = intervals.len();
            intervals.push(Interval {
                value: v,
                start: counter,
                end: counter,
                colocations: Vec::new(),
                leader: true,
            });
            counter += 1;
            interval_of.insert(v, index);
            match shared_with.and_then(|s| interval_of.get(&s).copied()) {
                Some(host) => {
                    intervals[host].colocations.push(index);
                    intervals[index].leader = false;
                }
                None => {
                    first_of_buffer.insert(value.buffer, v);
                }
            }
        }
        for v in std::mem::take(&mut freed[t]) {
            live_bytes = live_bytes.saturating_sub(dataflow.values[v.index()].size);
            if let Some(&i) = interval_of.get(&v) {
                intervals[i].end = counter;
                counter += 1;
            }
        }
    }

    let groups: Vec<Group> = intervals
        .iter()
        .filter(|i| i.leader)
        .map(|leader| {
            let mut members = vec![leader];
            let mut next = 0;
            while next < members.len() {
                let current = members[next];
                members.extend(current.colocations.iter().map(|&c| &intervals[c]));
                next += 1;
            }
            Group {
                leader: leader.value,
                leader_size: size_of(leader.value),
                size: members.iter().map(|m| size_of(m.value)).max().unwrap_or(0),
                own: (leader.start, leader.end),
                intervals: merged(members.iter().map(|m| (m.start, m.end)).collect()),
                members: members.iter().map(|m| m.value).collect(),
                end: members.iter().map(|m| m.end).max().unwrap_or(0),
            }
        })
        .collect();

    let chunks_of = |offsets: &[u64]| {
        let mut chunks = Vec::with_capacity(values.len());
        for (g, group) in groups.iter().enumerate() {
            for &m in &group.members {
                chunks.push((
                    m,
                    Chunk {
                        offset: offsets[g],
                        size: dataflow.values[m.index()].size,
                    },
                ));
            }
        }
        chunks.extend(
            zero_sized
                .iter()
                .map(|&v| (v, Chunk { offset: 0, size: 0 })),
        );
        chunks.sort_by_key(|(v, _)| *v);
        chunks
    };
    // XLA's default (`ChooseBestHeapAlgorithm`): both orders, the smaller heap
    // kept, biggest-first on a tie. They are independent.
    let best_of_size_and_time = || {
        let (spatial, temporal) = rayon::join(
            || pack(&groups, alignment, Order::Spatial),
            || pack(&groups, alignment, Order::Temporal),
        );
        let sizes = (spatial.0, temporal.0);
        let best = if temporal.0 < spatial.0 {
            temporal
        } else {
            spatial
        };
        (best, sizes)
    };
    match target.heap_order(color) {
        HeapOrder::StartTime => {
            // libtpu packs HBM in start order first (`FAST_MERGE`), and again
            // with XLA's default when the space's total passes its limit;
            // both packings are made here, the assignment picks.
            let (start, (best, (spatial, temporal))) = rayon::join(
                || {
                    let spanned: Vec<Group> = groups.iter().map(Group::spanned).collect();
                    pack(&spanned, alignment, Order::Start)
                },
                best_of_size_and_time,
            );
            let differ = spatial != start.0 || temporal != start.0;
            let fallback = differ.then(|| {
                Box::new(HeapResult {
                    heap_size: best.0,
                    chunks: chunks_of(&best.1),
                    peak_live,
                    order_sizes: None,
                    fallback: None,
                })
            });
            HeapResult {
                heap_size: start.0,
                chunks: chunks_of(&start.1),
                peak_live,
                order_sizes: differ.then_some(OrderSizes {
                    definition: start.0,
                    biggest_first: spatial,
                    longest_first: temporal,
                }),
                fallback,
            }
        }
        HeapOrder::BestOfSizeAndTime => {
            let ((heap_size, offsets), _) = best_of_size_and_time();
            HeapResult {
                heap_size,
                chunks: chunks_of(&offsets),
                peak_live,
                order_sizes: None,
                fallback: None,
            }
        }
    }
}

/// Inclusive intervals sorted by start, overlapping ones merged.
fn merged(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// The operand value whose chunk `v` takes over as it is defined: the
/// top-level value of a direct operand, alone in its buffer, dying now and not
/// yet taken, that `v` may overwrite (`HeapSimulator::RunComputation`).
fn dying_operand(
    target: &Target,
    module: &Module,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    simulated: &HashSet<BufferId>,
    freed_now: &[ValueId],
    v: ValueId,
) -> Option<ValueId> {
    let value = &dataflow.values[v.index()];
    let user = value.instr;
    let user_instr = module.instr(user);
    if user_instr.opcode == Opcode::Copy {
        return None;
    }
    for &operand in &user_instr.operands {
        let Some(&ov) = dataflow.value_of(operand).first() else {
            continue;
        };
        let o = &dataflow.values[ov.index()];
        if !simulated.contains(&o.buffer)
            || dataflow.buffers[o.buffer.index()].values.len() != 1
            || ranges[ov.index()].is_none()
            || !freed_now.contains(&ov)
            || !user_instr.operands.contains(&o.instr)
        {
            continue;
        }
        if sharing::can_share_operand_buffer(target, module, o.instr, &o.index, user, &value.index)
        {
            return Some(ov);
        }
    }
    None
}
