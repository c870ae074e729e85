//! Buffer assignment: which buffer goes into which allocation (notes §4.6).
//!
//! Parameters, constants, tuple index tables and reducer buffers get
//! allocations of their own. Other buffers, biggest first, move into a
//! reusable allocation (a donated parameter's or an output's) when their live
//! ranges allow; live-out buffers left over get an output allocation each; the
//! rest are temporaries, packed by the heap simulator into one block, to which
//! the temporary tuple tables are appended.

use std::collections::BTreeSet;

use rustc_hash::FxHashSet as HashSet;

mod reusable;

use self::reusable::Reusable;
use super::dataflow::{BufferId, Dataflow, ValueId};
use super::graph::{CompKind, ModuleGraph};
use super::heap::{self, HeapResult};
use super::interference::{Buckets, Interference, Mask, Occupancy, Screen};
use super::liveness::LiveRange;
use super::schedule::Schedule;
use crate::chip::{FallbackLimit, Target};
use crate::hlo::{IoAlias, Module, Opcode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationKind {
    /// An entry parameter (`number`), possibly donated (aliased with an output).
    Parameter {
        number: u64,
        aliased: bool,
    },
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
    /// The memory space (XLA's "color"): 0 is device memory; TPU has others.
    pub color: u64,
    pub size: u64,
    pub maybe_live_out: bool,
    pub buffers: Vec<BufferId>,
    /// A tuple table that is not live out: combined into the temp block.
    pub temp_tuple: bool,
    /// Other buffers may move in (a donated parameter's or an output array's).
    pub reusable: bool,
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
    /// Which packing the heap kept.
    pub packing: Packing,
    /// Per memory space whose temporary block joins pieces that end in
    /// different padding: the block's size with each piece last.
    pub piece_orders: Vec<PieceOrder>,
}

/// The sizes a memory space's temporary block may take, its pieces (the heap
/// and the temporary tuple tables) joined in any order: each piece starts at
/// the next aligned offset, so the block's size is the sum of the aligned
/// pieces less the padding of the one that comes last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PieceOrder {
    pub color: u64,
    /// Where each piece starts: a multiple of this.
    pub alignment: u64,
    /// With the piece of most padding last.
    pub smallest: u64,
    /// With the piece of least padding last.
    pub largest: u64,
}

pub fn assign(
    module: &Module,
    aliases: &[IoAlias],
    graph: &ModuleGraph,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    schedule: &Schedule,
    target: &Target,
) -> Assignment {
    let entry_root = module.entry_root();
    let live_out: Vec<bool> = dataflow
        .buffers
        .iter()
        .map(|b| {
            b.values
                .iter()
                .any(|&v| dataflow.positions(v).iter().any(|(i, _)| *i == entry_root))
        })
        .collect();
    let comp_kind =
        |v: ValueId| graph.kind(module.instr(dataflow.values[v.index()].instr).computation);

    // A buffer lives in the memory space its layout names (`S(1)`: TPU VMEM),
    // or where its defining instruction's thread keeps such values.
    let color_of: Vec<u64> = dataflow
        .buffers
        .iter()
        .map(|b| {
            b.values.first().map_or(0, |v| {
                let value = &dataflow.values[v.index()];
                let instr = module.instr(value.instr);
                let thread = module.comp(instr.computation).execution_thread.as_deref();
                instr
                    .shape
                    .subshape(&value.index)
                    .map_or(0, |s| target.value_placement(s, thread).0)
            })
        })
        .collect();
    let mut allocations: Vec<Allocation> = Vec::new();
    // Spaces placed before the buffer assignment (TPU VMEM, by memory-space
    // assignment) get their block first, even when empty (`AssignPresetBuffers`);
    // its place decides how XLA's unstable partition orders the temp blocks.
    for &color in target.preset_colors() {
        allocations.push(Allocation {
            kind: AllocationKind::Temp,
            color,
            size: 0,
            maybe_live_out: false,
            buffers: Vec::new(),
            temp_tuple: false,
            reusable: false,
        });
    }
    let mut allocation_of: Vec<Option<usize>> = vec![None; dataflow.buffers.len()];

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
    // Ties go to the buffer whose earliest value comes first in XLA's
    // post-order (callers before callees), then to the lower buffer id.
    let position = super::post_order::positions(module, |c| graph.kind(c) == CompKind::Global);
    let thread_local_position =
        super::post_order::positions(module, |c| graph.kind(c) == CompKind::ThreadLocal);
    order.sort_by_key(|b| {
        let buffer = &dataflow.buffers[b.index()];
        let first = buffer
            .values
            .iter()
            .map(|v| {
                let i = dataflow.values[v.index()].instr.index();
                position[i].min(thread_local_position[i])
            })
            .min();
        (
            std::cmp::Reverse(buffer.size),
            !live_out[b.index()],
            first,
            *b,
        )
    });

    // A set: a training step donates thousands of parameters.
    let aliased_params: HashSet<u64> = aliases.iter().map(|a| a.parameter).collect();
    // Live ranges of what each allocation holds, for the interference check.
    let mut occupancy: Vec<Occupancy> = Vec::new();
    // Reusable allocations a buffer living to the program's end may still
    // join: the others hold such a buffer already (thousands of outputs would
    // otherwise each test thousands of output allocations).
    let program_end = ranges.iter().flatten().map(|r| r.end).max().unwrap_or(0);
    let buckets = Buckets::new(program_end);
    let check = Interference {
        target,
        module,
        dataflow,
        ranges,
        schedule,
        buckets,
    };
    let mut open_to_outputs: BTreeSet<usize> = BTreeSet::new();
    // The allocations a buffer may join at all, oldest first: a training step
    // makes thousands of parameter allocations no buffer may join.
    let mut reusable = Reusable::default();
    let mut delayed: Vec<BufferId> = Vec::new();
    let mut thread_local: Vec<BufferId> = Vec::new();
    for b in order {
        let buffer = &dataflow.buffers[b.index()];
        let lo = live_out[b.index()];
        let defs = || {
            buffer
                .values
                .iter()
                .map(|v| module.instr(dataflow.values[v.index()].instr))
        };
        if buffer
            .values
            .iter()
            .all(|&v| comp_kind(v) == CompKind::ThreadLocal)
        {
            // Reducers' buffers are assigned after the global computations'.
            thread_local.push(b);
            continue;
        }
        if defs().any(|i| i.opcode == Opcode::Constant) {
            add_allocation(
                &mut allocations,
                &mut allocation_of,
                (b, buffer.size, color_of[b.index()]),
                AllocationKind::Constant,
                lo,
                false,
            );
            continue;
        }
        if let Some(param) =
            defs().find(|i| i.opcode == Opcode::Parameter && i.computation == module.entry)
        {
            let number = param.parameter_number.unwrap_or(0);
            let aliased = aliased_params.contains(&number);
            add_allocation(
                &mut allocations,
                &mut allocation_of,
                (b, buffer.size, color_of[b.index()]),
                AllocationKind::Parameter { number, aliased },
                lo,
                false,
            );
            continue;
        }
        let is_tuple = buffer.values.iter().any(|&v| dataflow.is_tuple(module, v));
        if is_tuple {
            add_allocation(
                &mut allocations,
                &mut allocation_of,
                (b, buffer.size, color_of[b.index()]),
                AllocationKind::Output,
                lo,
                true,
            );
            continue;
        }
        // Allocations made since the last buffer start with their first buffer.
        let new = allocations.iter().skip(occupancy.len());
        let held: Vec<Occupancy> = new
            .map(|allocation| {
                let mut held = Occupancy::new(buckets);
                if allocation.reusable {
                    for &first in &allocation.buffers {
                        held.add(dataflow, ranges, first);
                    }
                }
                held
            })
            .collect();
        for held in held {
            let a = occupancy.len();
            if allocations[a].reusable {
                reusable.push(a, allocations[a].color, held.screen());
                if !held.closed_to_outputs(program_end) {
                    open_to_outputs.insert(a);
                }
            }
            occupancy.push(held);
        }
        let reaches_end = buffer.values.iter().any(|v| {
            ranges[v.index()].is_some_and(|r| r.end == program_end && r.start < program_end)
        });
        if let Some(a) = find_reusable(
            &check,
            &allocations,
            &occupancy,
            match reaches_end {
                true => Candidates::OpenToOutputs(&open_to_outputs),
                false => Candidates::Reusable(&reusable),
            },
            &allocation_of,
            (b, color_of[b.index()]),
            lo,
        ) {
            allocations[a].buffers.push(b);
            allocation_of[b.index()] = Some(a);
            occupancy[a].add(dataflow, ranges, b);
            reusable.refresh(a, occupancy[a].screen());
            if occupancy[a].closed_to_outputs(program_end) {
                open_to_outputs.remove(&a);
            }
            continue;
        }
        if !lo {
            delayed.push(b);
            continue;
        }
        add_allocation(
            &mut allocations,
            &mut allocation_of,
            (b, buffer.size, color_of[b.index()]),
            AllocationKind::Output,
            true,
            false,
        );
    }

    // Each memory space is packed on its own, into a temporary block of its own.
    let mut colors: Vec<u64> = delayed.iter().map(|b| color_of[b.index()]).collect();
    colors.sort_unstable();
    colors.dedup();
    let mut packed_by_color: Vec<(u64, HeapResult)> = Vec::with_capacity(colors.len());
    for color in colors {
        let in_color: Vec<BufferId> = delayed
            .iter()
            .copied()
            .filter(|b| color_of[b.index()] == color)
            .collect();
        let packed = heap::simulate(module, dataflow, ranges, &in_color, target, color);
        // The memory-space assignment packs within its limit, more tightly
        // than this replay where the replay would pass it.
        let size = target
            .preset_space_limit(color)
            .map_or(packed.heap_size, |limit| packed.heap_size.min(limit));
        let block = Allocation {
            kind: AllocationKind::Temp,
            color,
            size,
            maybe_live_out: false,
            buffers: in_color,
            temp_tuple: false,
            reusable: false,
        };
        match allocations
            .iter_mut()
            .find(|a| a.kind == AllocationKind::Temp && a.color == color)
        {
            Some(preset) => *preset = block,
            None => allocations.push(block),
        }
        packed_by_color.push((color, packed));
    }
    for b in thread_local {
        let size = dataflow.buffers[b.index()].size;
        add_allocation(
            &mut allocations,
            &mut allocation_of,
            (b, size, color_of[b.index()]),
            AllocationKind::ThreadLocal,
            false,
            false,
        );
    }
    let (allocations, packing, piece_orders) =
        choose_packing(allocations, &mut packed_by_color, target);
    let mut heap = HeapResult::default();
    for (_, packed) in packed_by_color {
        heap.absorb(packed);
    }
    let mut allocation_of = vec![None; dataflow.buffers.len()];
    for (i, a) in allocations.iter().enumerate() {
        for b in &a.buffers {
            allocation_of[b.index()] = Some(i);
        }
    }
    Assignment {
        allocations,
        allocation_of,
        live_out,
        heap,
        heap_buffers: delayed,
        packing,
        piece_orders,
    }
}

/// Which packing a memory space's temporary block got (`Packing::Primary`
/// off TPU HBM, where there is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    /// The target's first packing.
    Primary,
    /// The fallback, because the space's total passed the target's limit.
    Fallback,
    /// The two differ and the limit is not known (the chip is not named and
    /// the total lies between the chips' limits): the primary is shown.
    Undecided,
}

/// Combines the temporary blocks (`CombineTempAllocations`), then does what
/// `BufferAssigner::RunAssignBuffersWithFallback` does: where a memory space's
/// total passes the target's limit, its heap is packed again with XLA's
/// default algorithm and the temporaries combined again.
fn choose_packing(
    allocations: Vec<Allocation>,
    packed_by_color: &mut [(u64, HeapResult)],
    target: &Target,
) -> (Vec<Allocation>, Packing, Vec<PieceOrder>) {
    if packed_by_color.iter().all(|(_, p)| p.fallback.is_none()) {
        let mut allocations = allocations;
        let orders = combine_temp_allocations(&mut allocations, target);
        return (allocations, Packing::Primary, orders);
    }
    let mut combined = allocations.clone();
    let mut orders = combine_temp_allocations(&mut combined, target);
    let mut packing = Packing::Primary;
    for (color, packed) in packed_by_color.iter_mut() {
        let color = *color;
        let Some(fallback) = packed.fallback.take() else {
            continue;
        };
        let total = space_total(&combined, color, target.heap_alignment(color));
        let use_fallback = match target.fallback_limit(color) {
            FallbackLimit::None => false,
            FallbackLimit::Between(low, high) => {
                if total <= low {
                    false
                } else if total > high {
                    true
                } else {
                    packing = Packing::Undecided;
                    false
                }
            }
        };
        if use_fallback {
            packing = Packing::Fallback;
            let mut again = allocations.clone();
            for a in again
                .iter_mut()
                .filter(|a| a.kind == AllocationKind::Temp && a.color == color)
            {
                a.size = fallback.heap_size;
            }
            orders = combine_temp_allocations(&mut again, target);
            combined = again;
            *packed = HeapResult {
                order_sizes: None,
                ..*fallback
            };
        }
    }
    (combined, packing, orders)
}

/// A memory space's total as the fallback check adds it: each allocation's
/// size, the temporary block at the next aligned offset.
fn space_total(allocations: &[Allocation], color: u64, alignment: u64) -> u64 {
    let mut total = 0u64;
    for a in allocations.iter().filter(|a| a.color == color) {
        if a.kind == AllocationKind::Temp && alignment > 1 {
            total = total.div_ceil(alignment).saturating_mul(alignment);
        }
        total = total.saturating_add(a.size);
    }
    total
}

/// A new allocation holding buffer `b`; tuple tables never take other buffers,
/// and a tuple table that is not live out joins the temp block at the end.
fn add_allocation(
    allocations: &mut Vec<Allocation>,
    allocation_of: &mut [Option<usize>],
    (b, size, color): (BufferId, u64, u64),
    kind: AllocationKind,
    maybe_live_out: bool,
    is_tuple_table: bool,
) {
    let reusable = match kind {
        AllocationKind::Parameter { aliased, .. } => aliased,
        AllocationKind::Output => !is_tuple_table,
        _ => false,
    };
    allocations.push(Allocation {
        kind,
        color,
        size,
        maybe_live_out,
        buffers: vec![b],
        temp_tuple: is_tuple_table && !maybe_live_out,
        reusable,
    });
    allocation_of[b.index()] = Some(allocations.len() - 1);
}

/// Moves the temporary allocations (the heap block and temporary tuple tables)
/// to the end and concatenates them, each at the next aligned offset
/// (`CombineTempAllocations`). XLA moves them with `std::partition`, which is
/// not stable; its libstdc++ swaps decide the order, and so the padding.
/// Returns, where the target's order is not known ([`Target::temp_piece_order_known`])
/// and the pieces' paddings differ, the sizes the block may take.
fn combine_temp_allocations(allocations: &mut Vec<Allocation>, target: &Target) -> Vec<PieceOrder> {
    let is_temp = |a: &Allocation| a.temp_tuple || a.kind == AllocationKind::Temp;
    let (mut first, mut last) = (0usize, allocations.len());
    'partition: loop {
        loop {
            if first == last {
                break 'partition;
            }
            if !is_temp(&allocations[first]) {
                first += 1;
            } else {
                break;
            }
        }
        last -= 1;
        loop {
            if first == last {
                break 'partition;
            }
            if is_temp(&allocations[last]) {
                last -= 1;
            } else {
                break;
            }
        }
        allocations.swap(first, last);
        first += 1;
    }
    let temps: Vec<Allocation> = allocations.drain(first..).collect();
    let orders = if target.temp_piece_order_known() {
        Vec::new()
    } else {
        piece_orders(&temps, target)
    };
    // One combined block per memory space, in the order each space first appears.
    let mut combined: Vec<Allocation> = Vec::new();
    for temp in temps {
        match combined.iter_mut().find(|c| c.color == temp.color) {
            None => {
                combined.push(Allocation {
                    kind: AllocationKind::Temp,
                    temp_tuple: false,
                    reusable: false,
                    ..temp
                });
            }
            Some(c) => {
                let alignment = target.heap_alignment(c.color);
                let base = if alignment > 1 {
                    c.size.div_ceil(alignment).saturating_mul(alignment)
                } else {
                    c.size
                };
                c.size = base.saturating_add(temp.size);
                c.buffers.extend(temp.buffers);
            }
        }
    }
    allocations.extend(combined);
    orders
}

/// For each memory space whose block XLA's order ends with a temporary tuple
/// table, where the tables end in different padding to its alignment: the
/// smallest and largest size of the joined block with any table last. Where
/// XLA's order ends with the heap, or every table has the same padding, the
/// size is taken as known: in libtpu 0.0.52's 52 holdout modules (v4, v5e,
/// v5p, v6e) XLA's order put the heap last where libtpu did, and only which
/// of two tables of different size came last differed.
fn piece_orders(temps: &[Allocation], target: &Target) -> Vec<PieceOrder> {
    let mut colors: Vec<u64> = temps.iter().map(|t| t.color).collect();
    colors.sort_unstable();
    colors.dedup();
    colors
        .into_iter()
        .filter_map(|color| {
            let pieces = || temps.iter().filter(move |t| t.color == color);
            if !pieces().next_back()?.temp_tuple {
                return None;
            }
            let alignment = target.heap_alignment(color).max(1);
            let rounded = |t: &Allocation| t.size.div_ceil(alignment).saturating_mul(alignment);
            let aligned = pieces().map(rounded).fold(0u64, u64::saturating_add);
            let pads = pieces()
                .filter(|t| t.temp_tuple)
                .map(|t| rounded(t) - t.size);
            let (least, most) = pads.fold((u64::MAX, 0), |(l, m), p| (l.min(p), m.max(p)));
            (least != most).then(|| PieceOrder {
                color,
                alignment,
                smallest: aligned - most,
                largest: aligned - least,
            })
        })
        .collect()
}

/// A donated parameter's or an output's allocation that `b` fits in without
/// overlapping anything already there (`MaybeAssignBuffer`). XLA tries the
/// allocation of an operand that `b` may overwrite first, then the others from
/// the most recently created (the smallest, as buffers come biggest first).
fn find_reusable(
    check: &Interference,
    allocations: &[Allocation],
    occupancy: &[Occupancy],
    candidates: Candidates,
    allocation_of: &[Option<usize>],
    (b, color): (BufferId, u64),
    live_out: bool,
) -> Option<usize> {
    let (module, dataflow) = (check.module, check.dataflow);
    let buffer = &dataflow.buffers[b.index()];
    // Newer libtpu keeps every other buffer out of an allocation that may be
    // returned, and a returned buffer out of every other allocation
    // (`Target::may_join_live_out`).
    let may_join_live_out = check.target.may_join_live_out();
    let fits = |a: usize| {
        let allocation = &allocations[a];
        allocation.reusable
            && (may_join_live_out || !(allocation.maybe_live_out || live_out))
            && allocation.color == color
            && if live_out {
                allocation.size == buffer.size
            } else {
                buffer.size <= allocation.size
            }
            && !check.overlaps(b, &occupancy[a])
            && !check.copies_from(b, |other| allocation_of[other.index()] == Some(a))
    };
    // First the allocation of an operand of a top-level array value (whatever
    // the operand's shape: the interference check decides), then the others.
    for &v in &buffer.values {
        let value = &dataflow.values[v.index()];
        if !value.index.is_empty() || module.instr(value.instr).shape.is_tuple() {
            continue;
        }
        for &operand in &module.instr(value.instr).operands {
            let Some(&ov) = dataflow.value_of(operand).first() else {
                continue;
            };
            if let Some(a) = allocation_of[dataflow.values[ov.index()].buffer.index()] {
                if fits(a) {
                    return Some(a);
                }
            }
        }
    }
    // A training step has thousands of reusable allocations and most hold a
    // value that overlaps `b` outright: that cheap test runs first.
    let ranges: Vec<(LiveRange, Mask)> = buffer
        .values
        .iter()
        .filter_map(|v| check.ranges[v.index()])
        .map(|r| (r, check.buckets.touched(r)))
        .collect();
    let mut touched = Mask::default();
    for &(_, t) in &ranges {
        touched.add(t);
    }
    let may_fit = |a_color: u64, screen: &Screen| {
        a_color == color
            && !ranges
                .iter()
                .any(|&(r, touched)| screen.surely_overlaps(r, touched))
    };
    // Newest first.
    match candidates {
        Candidates::OpenToOutputs(open) => open.iter().rev().copied().find(|&a| {
            let allocation = &allocations[a];
            allocation.reusable && may_fit(allocation.color, &occupancy[a].screen()) && fits(a)
        }),
        // Those whose values live through none of the buckets `b` touches
        // (the rest fail `may_fit`), tested in full.
        Candidates::Reusable(reusable) => reusable.find_newest(touched, |a, a_color, screen| {
            may_fit(a_color, screen) && fits(a)
        }),
    }
}

/// The allocations [`find_reusable`] tries after an operand's: every one a
/// buffer may join, or, for a buffer living to the program's end, those still
/// open to one (the others would fail the interference check).
#[derive(Clone, Copy)]
enum Candidates<'a> {
    Reusable(&'a Reusable),
    OpenToOutputs(&'a BTreeSet<usize>),
}
