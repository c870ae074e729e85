//! XLA's allocations against hlomem's, value by value: which values share an
//! allocation, each value's size and offset, each allocation's size and kind,
//! and the parameter (number and shape index) each parameter allocation holds.
//! Only memory spaces hlomem computes exactly are compared here.

use std::collections::HashMap;

use super::{Compared, Found, Kind, Note, ParameterPart, Role, ValueName, Verification};
use crate::analysis::assign::{Allocation, AllocationKind};
use crate::analysis::dataflow::ValueId;
use crate::analysis::MemoryModel;
use crate::hlo::{Module, Opcode};
use crate::xla_report::{XlaAllocation, XlaReports, XlaValue};

type Ours = HashMap<(String, Vec<u64>), ValueId>;

pub(super) fn compare(
    module: &Module,
    model: &MemoryModel,
    xla: &XlaReports,
    ours: &Ours,
    v: &mut Verification,
) {
    let offsets = offsets(model);
    let exact: Vec<&XlaAllocation> = xla
        .allocations
        .iter()
        .filter(|a| model.target.space_is_exact(a.color))
        .collect();
    // XLA's allocation → ours, to find two of XLA's that are one of ours.
    let mut matched: HashMap<usize, u64> = HashMap::new();
    let mut misplaced = Vec::new();
    let mut repacked = 0;
    // Spaces hlomem estimates (TPU's on-chip memory): XLA's placement is its
    // own, but each value still has its size and a place no other value
    // live with it takes.
    for allocation in xla
        .allocations
        .iter()
        .filter(|a| !model.target.space_is_exact(a.color))
    {
        compare_values(allocation, model, ours, v);
        let placed: Vec<(ValueId, &XlaValue)> = allocation
            .values
            .iter()
            .filter_map(|w| Some((*ours.get(&(w.name.clone(), w.index.clone()))?, w)))
            .collect();
        check_packing(allocation, model, ours, &placed, v, false);
    }
    for allocation in exact.iter().copied() {
        // Values of the temp block at another offset than hlomem's.
        let mut moved = Vec::new();
        compare_values(allocation, model, ours, v);
        let Some(mine) = matching(allocation, model, ours) else {
            if allocation.parameter.is_none() {
                v.disagree(
                    Compared::AllocationWithoutValues {
                        allocation: allocation.index,
                    },
                    Found::NoSuchAllocation,
                    Found::Bytes(allocation.size),
                );
            }
            continue;
        };
        if let Some(other) = matched.insert(mine, allocation.index) {
            v.disagree(
                Compared::SplitAllocation {
                    first: other,
                    second: allocation.index,
                },
                Found::OneAllocation,
                Found::TwoAllocations,
            );
        }
        let theirs = &model.assignment.allocations[mine];
        v.compare(
            Compared::AllocationSize {
                allocation: allocation.index,
            },
            Found::Number(theirs.size),
            Found::Number(allocation.size),
        );
        v.compare(
            Compared::AllocationKind {
                allocation: allocation.index,
            },
            Found::Kind(kind(module, model, theirs)),
            Found::Kind(xla_kind(allocation)),
        );
        for value in &allocation.values {
            match place(model, ours, value) {
                Some(place) if place == mine => {
                    let id = ours[&(value.name.clone(), value.index.clone())];
                    let offset = offsets.get(&id).copied().unwrap_or(0);
                    if theirs.kind != AllocationKind::Temp || offset == value.offset {
                        v.compare(
                            Compared::Offset {
                                value: ValueName::new(&value.name, &value.index),
                                allocation: allocation.index,
                            },
                            Found::Number(offset),
                            Found::Number(value.offset),
                        );
                    } else {
                        moved.push((id, value));
                    }
                }
                _ => misplaced.push((ValueName::new(&value.name, &value.index), allocation.index)),
            }
        }
        repacked += check_packing(allocation, model, ours, &moved, v, true);
    }
    for allocation in exact.iter().filter(|a| a.parameter.is_some()) {
        compare_parameter(module, model, ours, allocation, v);
    }
    if repacked > 0 {
        v.notes.push(Note::Repacked { values: repacked });
    }
    if !misplaced.is_empty() {
        // XLA never splits what hlomem keeps together by a tie: the
        // allocations of the corpus agree value for value, so any difference
        // is a different rule (or a report that does not belong to the module).
        v.disagree(
            Compared::Misplaced {
                values: misplaced.len(),
            },
            Found::Elsewhere,
            Found::Misplaced(misplaced),
        );
    }
}

/// Each value of one of XLA's allocations is a value of the module, of the
/// size hlomem gives it, and fits in the allocation.
fn compare_values(
    allocation: &XlaAllocation,
    model: &MemoryModel,
    ours: &Ours,
    v: &mut Verification,
) {
    for value in &allocation.values {
        let name = ValueName::new(&value.name, &value.index);
        let Some(id) = ours.get(&(value.name.clone(), value.index.clone())) else {
            v.disagree(
                Compared::Value {
                    value: name,
                    allocation: allocation.index,
                },
                Found::NoSuchValue,
                Found::Bytes(value.size),
            );
            continue;
        };
        v.compare(
            Compared::ValueSize {
                value: name.clone(),
            },
            Found::Number(model.dataflow.values[id.index()].size),
            Found::Number(value.size),
        );
        if let Some(color) = value.color.filter(|&c| c != allocation.color) {
            v.disagree(
                Compared::ValueSpace {
                    value: name.clone(),
                    allocation: allocation.index,
                },
                Found::ValueSpace(color),
                Found::Space(allocation.color),
            );
        }
        let end = value.offset.saturating_add(value.size);
        if end > allocation.size {
            v.disagree(
                Compared::ValueEnd {
                    value: name,
                    allocation: allocation.index,
                    size: allocation.size,
                },
                Found::FitsIn(allocation.size),
                Found::EndsAt(end),
            );
        }
    }
}

/// The allocation of ours that holds most of this one's values.
fn matching(allocation: &XlaAllocation, model: &MemoryModel, ours: &Ours) -> Option<usize> {
    let mut votes: HashMap<usize, usize> = HashMap::new();
    for value in &allocation.values {
        if let Some(a) = place(model, ours, value) {
            *votes.entry(a).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(a, n)| (n, std::cmp::Reverse(a)))
        .map(|(a, _)| a)
}

/// Our allocation of XLA's value, if we have the value and place it.
fn place(model: &MemoryModel, ours: &Ours, value: &XlaValue) -> Option<usize> {
    let id = ours.get(&(value.name.clone(), value.index.clone()))?;
    model.assignment.allocation_of[model.dataflow.values[id.index()].buffer.index()]
}

/// A parameter allocation holds that parameter's value at that shape index,
/// in an allocation hlomem gives that parameter, of the same size.
fn compare_parameter(
    module: &Module,
    model: &MemoryModel,
    ours: &Ours,
    allocation: &XlaAllocation,
    v: &mut Verification,
) {
    let (Some(number), index) = (allocation.parameter, &allocation.parameter_index) else {
        return;
    };
    let what = |part| Compared::Parameter {
        allocation: allocation.index,
        number,
        index: index.clone(),
        part,
    };
    let parameter = module.entry().parameters.get(number as usize).copied();
    let value =
        parameter.and_then(|p| ours.get(&(module.instr_name(p).to_string(), index.clone())));
    let Some(&id) = value else {
        v.disagree(
            what(ParameterPart::Holder),
            Found::NoSuchParameterValue,
            Found::AParameterAllocation,
        );
        return;
    };
    let mine = model.assignment.allocation_of[model.dataflow.values[id.index()].buffer.index()];
    let Some(mine) = mine else {
        v.disagree(
            what(ParameterPart::Holder),
            Found::NoAllocation,
            Found::Bytes(allocation.size),
        );
        return;
    };
    let theirs = &model.assignment.allocations[mine];
    v.compare(
        what(ParameterPart::Kind),
        Found::Kind(kind(module, model, theirs)),
        Found::Kind(xla_kind(allocation)),
    );
    v.compare(
        what(ParameterPart::Size),
        Found::Number(theirs.size),
        Found::Number(allocation.size),
    );
    // The parameter's own value, when XLA lists values, is among them.
    let name = module.instr_name(parameter.unwrap_or(model.dataflow.values[id.index()].instr));
    let listed = allocation
        .values
        .iter()
        .any(|w| w.name == name && &w.index == index);
    if !allocation.values.is_empty() && !listed {
        v.disagree(
            what(ParameterPart::Values),
            Found::Holds(ValueName::new(name, index)),
            Found::DoesNotList,
        );
    }
}

/// An allocation's kind and flags as XLA's report spells them.
fn kind(module: &Module, model: &MemoryModel, allocation: &Allocation) -> Kind {
    // A constant of a reducer or comparator: XLA calls its allocation constant.
    let constant = allocation.buffers.iter().any(|b| {
        model.dataflow.buffers[b.index()].values.iter().any(|v| {
            module.instr(model.dataflow.values[v.index()].instr).opcode == Opcode::Constant
        })
    });
    let role = match allocation.kind {
        AllocationKind::ThreadLocal if constant => Role::Constant,
        AllocationKind::Parameter { number, .. } => Role::Parameter(number),
        AllocationKind::Constant => Role::Constant,
        AllocationKind::ThreadLocal => Role::ThreadLocal,
        AllocationKind::Temp => Role::PreallocatedTemp,
        AllocationKind::Output => Role::Other,
    };
    Kind {
        role,
        maybe_live_out: allocation.maybe_live_out,
    }
}

/// [`kind`] for one of XLA's allocations.
fn xla_kind(allocation: &XlaAllocation) -> Kind {
    let role = if let Some(number) = allocation.parameter {
        Role::Parameter(number)
    } else if allocation.constant {
        Role::Constant
    } else if allocation.thread_local {
        Role::ThreadLocal
    } else if allocation.preallocated_temp {
        Role::PreallocatedTemp
    } else {
        Role::Other
    };
    Kind {
        role,
        maybe_live_out: allocation.maybe_live_out,
    }
}

/// Each value's offset in its allocation: 0 but in a combined temp block,
/// where the heap-packed values keep their chunk's offset after the pieces
/// before theirs, each piece at the next aligned offset
/// (`CombineTempAllocations`, which `assign` replays in the same order).
fn offsets(model: &MemoryModel) -> HashMap<ValueId, u64> {
    let chunks: HashMap<ValueId, u64> = model
        .assignment
        .heap
        .chunks
        .iter()
        .map(|(v, c)| (*v, c.offset))
        .collect();
    let dataflow = &model.dataflow;
    let mut out = HashMap::new();
    for allocation in model
        .assignment
        .allocations
        .iter()
        .filter(|a| a.kind == AllocationKind::Temp)
    {
        let alignment = model.target.heap_alignment(allocation.color).max(1);
        // `size`: the block so far; `heap_base`: where the current run of
        // heap-packed buffers (one piece) starts.
        let (mut size, mut heap_base) = (0u64, None);
        for &b in &allocation.buffers {
            let buffer = &dataflow.buffers[b.index()];
            let packed = buffer.values.iter().any(|v| chunks.contains_key(v));
            let next_piece = size.div_ceil(alignment).saturating_mul(alignment);
            let base = match (packed, heap_base) {
                (true, Some(base)) => base,
                (true, None) => *heap_base.insert(next_piece),
                (false, _) => {
                    heap_base = None;
                    next_piece
                }
            };
            for &value in &buffer.values {
                let offset = base.saturating_add(chunks.get(&value).copied().unwrap_or(0));
                size = size.max(offset.saturating_add(dataflow.values[value.index()].size));
                out.insert(value, offset);
            }
        }
    }
    out
}

/// Values of a temp block that XLA put at other offsets than hlomem (`moved`):
/// each must be aligned, at the start of a gap (0 or the end of another
/// value), and must not share a byte with a value of another buffer live at
/// the same time, or XLA's report is no heap packing at all. The number that
/// passed, which differ from hlomem's packing by ties only. `heap_packed`:
/// the gap rule holds (XLA's memory-space assignment places on-chip values
/// by rules of its own).
fn check_packing(
    allocation: &XlaAllocation,
    model: &MemoryModel,
    ours: &Ours,
    moved: &[(ValueId, &XlaValue)],
    v: &mut Verification,
    heap_packed: bool,
) -> usize {
    let alignment = model.target.heap_alignment(allocation.color).max(1);
    let dataflow = &model.dataflow;
    let mut passed = 0;
    for &(id, value) in moved {
        v.checked += 1;
        let name = ValueName::new(&value.name, &value.index);
        let offset_of = |value: ValueName| Compared::Offset {
            value,
            allocation: allocation.index,
        };
        if value.offset % alignment != 0 {
            v.disagree(
                offset_of(name),
                Found::MultipleOf(alignment),
                Found::Number(value.offset),
            );
            continue;
        }
        // A heap simulator places a chunk at the start of a free gap: the
        // block's start or (aligned) where another chunk ends.
        let at_a_gap = !heap_packed
            || value.offset == 0
            || allocation.values.iter().any(|w| {
                let end = w.offset.saturating_add(w.size);
                end == value.offset
                    || end.div_ceil(alignment).saturating_mul(alignment) == value.offset
            });
        if !at_a_gap {
            v.disagree(offset_of(name), Found::AtAGap, Found::Number(value.offset));
            continue;
        }
        let collides = allocation.values.iter().find(|other| {
            let Some(&other_id) = ours.get(&(other.name.clone(), other.index.clone())) else {
                return false;
            };
            let same_buffer =
                dataflow.values[other_id.index()].buffer == dataflow.values[id.index()].buffer;
            let bytes = value.offset < other.offset.saturating_add(other.size)
                && other.offset < value.offset.saturating_add(value.size);
            !same_buffer && bytes && live_together(model, id, other_id)
        });
        match collides {
            Some(other) => {
                let other = ValueName::new(&other.name, &other.index);
                v.disagree(
                    offset_of(name),
                    Found::ClearOf(other.clone()),
                    Found::Over {
                        bytes: value.size,
                        offset: value.offset,
                        other,
                    },
                )
            }
            None => passed += 1,
        }
    }
    passed
}

/// Whether two values are live at one moment (a value may take the memory of
/// one that dies where it starts).
fn live_together(model: &MemoryModel, a: ValueId, b: ValueId) -> bool {
    match (model.ranges[a.index()], model.ranges[b.index()]) {
        (Some(a), Some(b)) => a.start < b.end && b.start < a.end,
        _ => false,
    }
}
