//! Live ranges on the flattened schedule (`HloLiveRange`, notes §4.4).
//! Intervals are inclusive: `[start, end]`.

use super::dataflow::{Dataflow, ValueId};
use super::schedule::Schedule;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::chip::Target;
use crate::hlo::{InstrId, IoAlias, Module, Opcode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRange {
    pub start: u32,
    pub end: u32,
}

impl LiveRange {
    pub fn overlaps(&self, other: &LiveRange) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// `ranges[value]`, `None` for values of computations outside the schedule
/// (fusion bodies, reducers).
pub fn live_ranges(
    module: &Module,
    aliases: &[IoAlias],
    dataflow: &Dataflow,
    schedule: &Schedule,
    target: &Target,
) -> Vec<Option<LiveRange>> {
    // Newer libtpu starts an async computation's result at the async-start.
    let mut async_start_of: HashMap<InstrId, InstrId> = HashMap::default();
    if target.async_result_starts_at_start() {
        for (i, instr) in module.instrs() {
            if instr.opcode == Opcode::AsyncStart {
                for &(_, callee) in instr.called.iter() {
                    async_start_of.insert(module.comp(callee).root, i);
                }
            }
        }
    }
    let n = schedule.len();
    // A set: a training step donates thousands of parameters.
    let aliased_params: HashSet<u64> = aliases.iter().map(|a| a.parameter).collect();
    let is_root = |id: crate::hlo::InstrId| module.comp(module.instr(id).computation).root == id;
    let span_end =
        |id: crate::hlo::InstrId| schedule.span[module.instr(id).computation.index()].map(|s| s.1);
    let span_start =
        |id: crate::hlo::InstrId| schedule.span[module.instr(id).computation.index()].map(|s| s.0);

    let mut ranges: Vec<Option<LiveRange>> = dataflow
        .values
        .iter()
        .enumerate()
        .map(|(v, value)| {
            let v = ValueId(v as u32);
            let def = module.instr(value.instr);
            let t_def = schedule.time(value.instr)?;
            // Parameters start when their computation starts; a phi starts at the
            // earliest of its positions (the loop condition's parameter).
            let mut start = if def.opcode == Opcode::Parameter {
                span_start(value.instr)?
            } else {
                t_def
            };
            let mut end = definition_end(module, schedule, value.instr)?;
            for &(pos, _) in dataflow.positions(v) {
                let Some(t) = schedule.time(pos) else {
                    continue;
                };
                let (pos_start, pos_end) = if module.instr(pos).opcode == Opcode::Parameter {
                    (span_start(pos).unwrap_or(t), t)
                } else {
                    (t, t)
                };
                start = start.min(pos_start);
                end = end.max(if is_root(pos) {
                    span_end(pos).unwrap_or(pos_end)
                } else {
                    pos_end
                });
            }
            if let Some(t) = async_start_of
                .get(&value.instr)
                .and_then(|&s| schedule.time(s))
            {
                start = t;
            }
            let entry_param = def.opcode == Opcode::Parameter && def.computation == module.entry;
            let donated = entry_param
                && def
                    .parameter_number
                    .is_some_and(|p| aliased_params.contains(&p));
            if entry_param && !donated {
                end = n;
            } else {
                for &(user, _) in dataflow.uses(v) {
                    let user_instr = module.instr(user);
                    let t = match user_instr.opcode {
                        // The callee's own uses count instead.
                        Opcode::Call => continue,
                        // The loop state hands over to the body's parameter.
                        Opcode::While => user_instr
                            .called
                            .iter()
                            .find(|(r, _)| *r == crate::hlo::CallRole::Body)
                            .and_then(|&(_, body)| module.comp(body).parameters.first().copied())
                            .and_then(|p| schedule.time(p))
                            .or_else(|| schedule.time(user)),
                        _ => schedule.time(user),
                    };
                    if let Some(t) = t {
                        end = end.max(t);
                    }
                }
            }
            Some(LiveRange {
                start,
                end: end.max(start),
            })
        })
        .collect();

    normalize_aliased(dataflow, &mut ranges);
    ranges
}

/// Where a value defined by `instr` ends before its other positions and uses
/// count: at its definition, at its computation's end for a root, and no
/// earlier than the `async-done` of the async operation it runs inside.
fn definition_end(module: &Module, schedule: &Schedule, instr: InstrId) -> Option<u32> {
    let comp = module.instr(instr).computation;
    let end = if module.comp(comp).root == instr {
        schedule.span[comp.index()].map(|s| s.1)?
    } else {
        schedule.time(instr)?
    };
    Some(end.max(schedule.held_until[comp.index()].unwrap_or(0)))
}

/// Values of one buffer are made to hand over rather than overlap
/// (`NormalizeAliasedBuffers`): sorted by (start, end, id), each value ends
/// where the next starts, and the next ends no earlier than it did.
fn normalize_aliased(dataflow: &Dataflow, ranges: &mut [Option<LiveRange>]) {
    for buffer in &dataflow.buffers {
        if buffer.values.len() < 2 {
            continue;
        }
        let mut members: Vec<(LiveRange, ValueId)> = buffer
            .values
            .iter()
            .filter_map(|&v| ranges[v.index()].map(|r| (r, v)))
            .collect();
        members.sort_by_key(|(r, v)| (r.start, r.end, *v));
        for i in 1..members.len() {
            let (prev, _) = members[i - 1];
            let (mut next, _) = members[i];
            next.end = next.end.max(prev.end);
            members[i].0 = next;
            members[i - 1].0.end = prev.end.min(next.start);
        }
        for (range, v) in members {
            ranges[v.index()] = Some(range);
        }
    }
}

/// Where `v`'s live range ends among its positions (`HloLiveRange`'s
/// `end_position`): its defining position, unless another position comes
/// later in the flattened schedule (a position at a computation's root
/// counting at the computation's end; on a tie the earlier one listed
/// stays). Uses do not move it: a value passed to a `call` ends at the
/// callee's parameter when that comes after every other position, whoever
/// reads it last. The buffer assignment lets a value take over the memory of
/// one ending where it starts only if it reads this position.
pub fn end_position(
    module: &Module,
    dataflow: &Dataflow,
    schedule: &Schedule,
    v: ValueId,
) -> (InstrId, u32) {
    let value = &dataflow.values[v.index()];
    let defining = (value.instr, value.node);
    let time = |id: InstrId| {
        let comp = module.instr(id).computation;
        if module.comp(comp).root == id {
            schedule.span[comp.index()].map(|s| s.1)
        } else {
            schedule.time(id)
        }
    };
    let mut end = (defining, definition_end(module, schedule, value.instr));
    for &position in dataflow.positions(v) {
        if position == defining {
            continue;
        }
        let Some(t) = time(position.0) else {
            continue;
        };
        if end.1.is_none_or(|e| t > e) {
            end = (position, Some(t));
        }
    }
    end.0
}
