//! Buffer assignment: which buffer goes into which allocation (notes §4.6).
//!
//! Parameters, constants, tuple index tables and reducer buffers get
//! allocations of their own. Other buffers, biggest first, move into a
//! reusable allocation (a donated parameter's or an output's) when their live
//! ranges allow; live-out buffers left over get an output allocation each; the
//! rest are temporaries, packed by the heap simulator into one block, to which
//! the temporary tuple tables are appended.

use super::dataflow::{BufferId, Dataflow, ValueId};
use super::heap::{self, HeapResult};
use super::liveness::LiveRange;
use super::schedule::{CallGraph, CompKind};
use super::sharing;
use crate::hlo::{Module, Opcode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationKind {
    /// An entry parameter (`number`), possibly donated (aliased with an output).
    Parameter { number: u64, aliased: bool },
    Constant,
    /// A reducer's or comparator's scratch.
    ThreadLocal,
    /// A tuple index table, or an output.
    Output,
    /// The preallocated temporary block (heap-packed temps and tuple tables).
    Temp,
}

#[derive(Debug, Clone)]
pub struct Allocation {
    pub kind: AllocationKind,
    pub size: u64,
    pub maybe_live_out: bool,
    pub buffers: Vec<BufferId>,
    /// A tuple table that is not live out: combined into the temp block.
    pub temp_tuple: bool,
}

#[derive(Debug)]
pub struct Assignment {
    pub allocations: Vec<Allocation>,
    /// Allocation of each buffer, when it has one.
    pub allocation_of: Vec<Option<usize>>,
    pub live_out: Vec<bool>,
    pub heap: HeapResult,
    /// Buffers packed by the heap simulator.
    pub heap_buffers: Vec<BufferId>,
}

/// XLA:CPU aligns temporaries to 64 bytes (`EIGEN_MAX_ALIGN_BYTES` of jaxlib's build).
pub const CPU_ALIGNMENT: u64 = 64;

pub fn assign(
    module: &Module,
    calls: &CallGraph,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    alignment: u64,
) -> Assignment {
    let entry_root = module.entry_root();
    let live_out: Vec<bool> = dataflow
        .buffers
        .iter()
        .map(|b| {
            b.values.iter().any(|v| dataflow.values[v.index()].positions.iter().any(|(i, _)| *i == entry_root))
        })
        .collect();
    let comp_kind = |v: ValueId| calls.kind(module.instr(dataflow.values[v.index()].instr).computation);

    let mut allocations: Vec<Allocation> = Vec::new();
    let mut allocation_of: Vec<Option<usize>> = vec![None; dataflow.buffers.len()];
    let new_allocation = |kind, size, maybe_live_out, b: BufferId, temp_tuple, allocation_of: &mut Vec<Option<usize>>, allocations: &mut Vec<Allocation>| {
        allocations.push(Allocation { kind, size, maybe_live_out, buffers: vec![b], temp_tuple });
        allocation_of[b.index()] = Some(allocations.len() - 1);
    };

    // Biggest first, live-out first, then earliest in post-order (`kBiggestFirst`).
    let mut order: Vec<BufferId> = (0..dataflow.buffers.len() as u32)
        .map(BufferId)
        .filter(|b| {
            dataflow.buffers[b.index()]
                .values
                .iter()
                .any(|&v| matches!(comp_kind(v), CompKind::Global | CompKind::ThreadLocal))
        })
        .collect();
    order.sort_by_key(|b| {
        let buffer = &dataflow.buffers[b.index()];
        (std::cmp::Reverse(buffer.size), !live_out[b.index()], buffer.values.iter().min().copied())
    });

    let aliased_params: Vec<u64> = module.header.input_output_alias.iter().map(|a| a.parameter).collect();
    let mut delayed: Vec<BufferId> = Vec::new();
    for b in order {
        let buffer = &dataflow.buffers[b.index()];
        let lo = live_out[b.index()];
        let defs = || buffer.values.iter().map(|v| module.instr(dataflow.values[v.index()].instr));
        if buffer.values.iter().all(|&v| comp_kind(v) == CompKind::ThreadLocal) {
            new_allocation(AllocationKind::ThreadLocal, buffer.size, false, b, false, &mut allocation_of, &mut allocations);
            continue;
        }
        if defs().any(|i| i.opcode == Opcode::Constant) {
            new_allocation(AllocationKind::Constant, buffer.size, lo, b, false, &mut allocation_of, &mut allocations);
            continue;
        }
        if let Some(param) = defs().find(|i| i.opcode == Opcode::Parameter && i.computation == module.entry) {
            let number = param.parameter_number.unwrap_or(0);
            let aliased = aliased_params.contains(&number);
            new_allocation(
                AllocationKind::Parameter { number, aliased },
                buffer.size,
                lo,
                b,
                false,
                &mut allocation_of,
                &mut allocations,
            );
            continue;
        }
        let is_tuple = buffer.values.iter().any(|v| {
            let value = &dataflow.values[v.index()];
            module.instr(value.instr).shape.subshape(&value.index).is_some_and(|s| s.is_tuple())
        });
        if is_tuple {
            new_allocation(AllocationKind::Output, buffer.size, lo, b, !lo, &mut allocation_of, &mut allocations);
            continue;
        }
        if let Some(a) = find_reusable(module, dataflow, ranges, &allocations, b, lo) {
            allocations[a].buffers.push(b);
            allocation_of[b.index()] = Some(a);
            continue;
        }
        if !lo {
            delayed.push(b);
            continue;
        }
        new_allocation(AllocationKind::Output, buffer.size, true, b, false, &mut allocation_of, &mut allocations);
    }

    let heap = heap::simulate(module, dataflow, ranges, &delayed, alignment);
    // The temp block: temporary tuple tables in creation order, then the heap,
    // each at the next aligned offset (`CombineTempAllocations`).
    let mut temp_size: Option<u64> = None;
    let mut temp_buffers = Vec::new();
    let append = |size: u64, temp_size: &mut Option<u64>| {
        *temp_size = Some(match *temp_size {
            None => size,
            Some(current) => current.div_ceil(alignment.max(1)) * alignment.max(1) + size,
        });
    };
    for a in allocations.iter().filter(|a| a.temp_tuple) {
        append(a.size, &mut temp_size);
        temp_buffers.extend(a.buffers.iter().copied());
    }
    if !delayed.is_empty() {
        append(heap.heap_size, &mut temp_size);
    }
    allocations.retain(|a| !a.temp_tuple);
    if let Some(size) = temp_size {
        temp_buffers.extend(delayed.iter().copied());
        allocations.push(Allocation {
            kind: AllocationKind::Temp,
            size,
            maybe_live_out: false,
            buffers: temp_buffers,
            temp_tuple: false,
        });
    }
    let mut allocation_of = vec![None; dataflow.buffers.len()];
    for (i, a) in allocations.iter().enumerate() {
        for b in &a.buffers {
            allocation_of[b.index()] = Some(i);
        }
    }
    Assignment { allocations, allocation_of, live_out, heap, heap_buffers: delayed }
}

/// A donated parameter's or an output's allocation that `b` fits in without
/// overlapping anything already there (`MaybeAssignBuffer`).
fn find_reusable(
    module: &Module,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    allocations: &[Allocation],
    b: BufferId,
    live_out: bool,
) -> Option<usize> {
    let buffer = &dataflow.buffers[b.index()];
    allocations.iter().position(|a| {
        let reusable = match a.kind {
            AllocationKind::Parameter { aliased, .. } => aliased,
            AllocationKind::Output => !a.temp_tuple && a.maybe_live_out,
            _ => false,
        };
        reusable
            && if live_out { a.size == buffer.size } else { buffer.size <= a.size }
            && !a.buffers.iter().any(|&other| interferes(module, dataflow, ranges, b, other))
    })
}

/// Do two buffers' values overlap in time? Values that only touch may share
/// when the later one may write over the earlier one (`LiveRangeInterferes`).
fn interferes(module: &Module, dataflow: &Dataflow, ranges: &[Option<LiveRange>], a: BufferId, b: BufferId) -> bool {
    for &va in &dataflow.buffers[a.index()].values {
        for &vb in &dataflow.buffers[b.index()].values {
            let (Some(ra), Some(rb)) = (ranges[va.index()], ranges[vb.index()]) else { continue };
            if !ra.overlaps(&rb) {
                continue;
            }
            let touching_handover = |earlier: ValueId, later: ValueId| {
                let e = &dataflow.values[earlier.index()];
                let l = &dataflow.values[later.index()];
                let user = l.instr;
                module.instr(user).opcode != Opcode::Copy
                    && e.uses.iter().any(|(u, _)| *u == user)
                    && e.positions.iter().any(|&(pos, node)| {
                        module.instr(user).operands.contains(&pos)
                            && super::dataflow::shape_nodes(&module.instr(pos).shape)
                                .get(node as usize)
                                .is_some_and(|(idx, _)| sharing::can_share_operand_buffer(module, pos, idx, user, &l.index))
                    })
            };
            if ra.end == rb.start && touching_handover(va, vb) {
                continue;
            }
            if rb.end == ra.start && touching_handover(vb, va) {
                continue;
            }
            return true;
        }
    }
    false
}
