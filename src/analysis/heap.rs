//! The heap simulator: packs temporary buffers into one block, as XLA's
//! `HeapSimulator` with `GlobalDecreasingSizeBestFitHeap` does (notes §4.5).
//!
//! 1. Replay the schedule: at each logical time, values that start are
//!    allocated (or share a dying operand's chunk, or their buffer's chunk),
//!    then values that end are freed. Every event advances a counter; the
//!    counter, not the logical time, is the time axis of the packing.
//! 2. Pack the groups (a value plus the values that shared its chunk) best-fit,
//!    once biggest-first ("spatial") and once longest-first ("temporal"), and
//!    keep the smaller heap.

use super::dataflow::{BufferId, Dataflow, ValueId};
use super::liveness::LiveRange;
use super::sharing;
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
}

/// One allocation unit: a value and the values that shared its chunk.
struct Group {
    leader: ValueId,
    size: u64,
    /// Event-time intervals of every member, inclusive.
    intervals: Vec<(u64, u64)>,
    members: Vec<ValueId>,
    start: u64,
    end: u64,
}

pub fn simulate(
    module: &Module,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    buffers: &[BufferId],
    alignment: u64,
) -> HeapResult {
    let simulated: std::collections::HashSet<BufferId> = buffers.iter().copied().collect();
    let mut values: Vec<ValueId> = buffers
        .iter()
        .flat_map(|b| dataflow.buffers[b.index()].values.iter().copied())
        .filter(|v| ranges[v.index()].is_some())
        .collect();
    if values.is_empty() {
        return HeapResult::default();
    }
    values.sort_by_key(|v| {
        let r = ranges[v.index()].expect("filtered");
        (r.start, r.end, *v)
    });
    let last_time = values
        .iter()
        .map(|v| ranges[v.index()].expect("filtered").end)
        .max()
        .unwrap_or(0);

    // Replay: group_of[value] is the group whose chunk the value uses.
    let mut group_of: std::collections::HashMap<ValueId, usize> = Default::default();
    let mut groups: Vec<Group> = Vec::new();
    let mut event_start: std::collections::HashMap<ValueId, u64> = Default::default();
    let mut counter = 0u64;
    let mut next_start = 0usize;
    let mut ends_at: std::collections::BTreeMap<u32, Vec<ValueId>> = Default::default();
    for &v in &values {
        ends_at
            .entry(ranges[v.index()].expect("filtered").end)
            .or_default()
            .push(v);
    }
    // Values that end at the same time are freed in id order.
    for ending in ends_at.values_mut() {
        ending.sort();
    }
    let mut live_bytes = 0u64;
    let mut peak_live = 0u64;
    // Operands whose chunk was taken over at this step: not freed again.
    let mut handed_over: std::collections::HashSet<ValueId> = Default::default();
    for t in 0..=last_time {
        while next_start < values.len()
            && ranges[values[next_start].index()].expect("filtered").start == t
        {
            let v = values[next_start];
            next_start += 1;
            let value = &dataflow.values[v.index()];
            let buffer = &dataflow.buffers[value.buffer.index()];
            // A buffer's later values share the chunk of its first one.
            let same_buffer = buffer
                .values
                .iter()
                .find(|other| **other != v && group_of.contains_key(other))
                .copied();
            let reused = if same_buffer.is_none() && buffer.values.len() == 1 {
                reusable_operand(
                    module,
                    dataflow,
                    ranges,
                    &simulated,
                    &group_of,
                    &handed_over,
                    v,
                    t,
                )
            } else {
                None
            };
            event_start.insert(v, counter);
            counter += 1;
            match same_buffer.or(reused) {
                Some(other) => {
                    let g = group_of[&other];
                    group_of.insert(v, g);
                    groups[g].members.push(v);
                    groups[g].size = groups[g].size.max(value.size);
                    if let Some(op) = reused {
                        handed_over.insert(op);
                    }
                }
                None => {
                    group_of.insert(v, groups.len());
                    groups.push(Group {
                        leader: v,
                        size: value.size,
                        intervals: Vec::new(),
                        members: vec![v],
                        start: 0,
                        end: 0,
                    });
                }
            }
            live_bytes = live_bytes.saturating_add(value.size);
            peak_live = peak_live.max(live_bytes);
        }
        if let Some(ending) = ends_at.get(&t) {
            for &v in ending {
                let start = event_start[&v];
                let g = group_of[&v];
                groups[g].intervals.push((start, counter));
                counter += 1;
                live_bytes = live_bytes.saturating_sub(dataflow.values[v.index()].size);
            }
        }
    }
    for g in &mut groups {
        g.start = g.intervals.iter().map(|i| i.0).min().unwrap_or(0);
        g.end = g.intervals.iter().map(|i| i.1).max().unwrap_or(0);
    }

    // XLA tries both orders and keeps the smaller heap; they are independent.
    let (spatial, temporal) = rayon::join(
        || pack(&groups, alignment, Order::Spatial),
        || pack(&groups, alignment, Order::Temporal),
    );
    let (heap_size, offsets) = if temporal.0 < spatial.0 {
        temporal
    } else {
        spatial
    };
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
    chunks.sort_by_key(|(v, _)| *v);
    HeapResult {
        heap_size,
        chunks,
        peak_live,
    }
}

/// An operand value that dies exactly now and whose chunk this value may take.
#[allow(clippy::too_many_arguments)]
fn reusable_operand(
    module: &Module,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    simulated: &std::collections::HashSet<BufferId>,
    group_of: &std::collections::HashMap<ValueId, usize>,
    handed_over: &std::collections::HashSet<ValueId>,
    v: ValueId,
    t: u32,
) -> Option<ValueId> {
    let value = &dataflow.values[v.index()];
    let user = value.instr;
    if module.instr(user).opcode == Opcode::Copy {
        return None;
    }
    for &operand in &module.instr(user).operands {
        for &ov in &dataflow.value_of[operand.index()] {
            let o = &dataflow.values[ov.index()];
            if !simulated.contains(&o.buffer)
                || dataflow.buffers[o.buffer.index()].values.len() != 1
                || !group_of.contains_key(&ov)
                || handed_over.contains(&ov)
                || ranges[ov.index()].map(|r| r.end) != Some(t)
            {
                continue;
            }
            let operand_index = &o.index;
            let position = o
                .positions
                .iter()
                .find(|(i, _)| *i == operand)
                .map(|&(_, n)| n);
            let index = match position {
                Some(node) => module
                    .instr(operand)
                    .shape
                    .nodes()
                    .get(node as usize)
                    .map(|(idx, _)| idx.clone())
                    .unwrap_or_else(|| operand_index.clone()),
                None => continue,
            };
            if sharing::can_share_operand_buffer(module, operand, &index, user, &value.index) {
                return Some(ov);
            }
        }
    }
    None
}

#[derive(Clone, Copy)]
enum Order {
    Spatial,
    Temporal,
}

/// Best-fit packing in the given order; returns the heap size and each group's offset.
fn pack(groups: &[Group], alignment: u64, order: Order) -> (u64, Vec<u64>) {
    let id = |g: &Group| g.leader.0;
    let mut sorted: Vec<usize> = (0..groups.len()).collect();
    match order {
        Order::Spatial => sorted.sort_by_key(|&g| {
            let x = &groups[g];
            (
                std::cmp::Reverse(x.size),
                std::cmp::Reverse(x.end - x.start),
                id(x),
            )
        }),
        Order::Temporal => sorted.sort_by_key(|&g| {
            let x = &groups[g];
            (
                std::cmp::Reverse(x.end - x.start),
                std::cmp::Reverse(x.size),
                id(x),
            )
        }),
    }
    let align = |x: u64| {
        if alignment <= 1 {
            x
        } else {
            x.div_ceil(alignment).saturating_mul(alignment)
        }
    };
    let mut offsets = vec![0u64; groups.len()];
    // Placed groups as (offset, size, group), kept sorted so that the free gaps
    // can be read off in one pass without sorting per group.
    let mut placed: Vec<(u64, u64, usize)> = Vec::with_capacity(groups.len());
    let mut heap_size = 0u64;
    for g in sorted {
        let group = &groups[g];
        if group.size == 0 {
            offsets[g] = 0;
            continue;
        }
        let overlaps = |other: &Group| {
            other.start <= group.end
                && group.start <= other.end
                && group
                    .intervals
                    .iter()
                    .any(|a| other.intervals.iter().any(|b| a.0 <= b.1 && b.0 <= a.1))
        };
        let mut best: Option<(u64, u64)> = None; // (offset, free size)
        let mut offset = 0u64;
        let consider = |free_offset: u64, free_size: u64, best: &mut Option<(u64, u64)>| {
            if free_size >= group.size && best.is_none_or(|(_, s)| free_size < s) {
                *best = Some((free_offset, free_size));
            }
        };
        // Chunks alive at any moment this group is alive, by offset.
        for &(chunk_offset, chunk_size, p) in &placed {
            if !overlaps(&groups[p]) {
                continue;
            }
            if chunk_offset > offset {
                consider(offset, chunk_offset - offset, &mut best);
            }
            offset = offset.max(align(chunk_offset.saturating_add(chunk_size)));
        }
        if heap_size > offset {
            consider(offset, heap_size - offset, &mut best);
        }
        let chosen = best.map_or(offset, |(o, _)| o);
        offsets[g] = chosen;
        heap_size = heap_size.max(chosen.saturating_add(group.size));
        let entry = (chosen, group.size, g);
        let at = placed.partition_point(|&(o, s, _)| (o, s) <= (chosen, group.size));
        placed.insert(at, entry);
    }
    (heap_size, offsets)
}
