//! When may an instruction write its output into an operand's memory?
//!
//! Two questions XLA asks (notes §4.3 rule 4 and §5.7):
//! - [`in_place_pairs`]: outputs that *must* share an operand's buffer
//!   (`dynamic-update-slice`, `scatter`, aliasing custom calls and fusions, ...).
//! - [`can_share_operand_buffer`]: whether an output *may* take over an operand
//!   buffer that dies at this instruction (`CanShareOperandBufferWithUser`).

mod gpu;
mod tpu;

use crate::analysis::dataflow::{Dataflow, ValueId};
use crate::analysis::liveness::LiveRange;
use crate::hlo::{CompId, InstrId, Module, Opcode, OperandAlias};
use crate::target::{Backend, Target};

/// `(output index, (operand number, operand index))` pairs that must alias
/// (`AliasInfo::GetInPlaceInputOutputPairs`).
pub fn in_place_pairs(module: &Module, id: InstrId) -> Vec<OperandAlias> {
    let instr = module.instr(id);
    let mut pairs: Vec<OperandAlias> = instr.output_to_operand_aliasing.to_vec();
    let pair = |output_index: Vec<u64>, operand: u64| OperandAlias {
        output_index,
        operand,
        operand_index: vec![],
    };
    match &instr.opcode {
        Opcode::DynamicUpdateSlice | Opcode::AllReduceStart | Opcode::SetDimensionSize => {
            pairs.push(pair(vec![], 0))
        }
        Opcode::RaggedAllToAll => pairs.push(pair(vec![], 1)),
        Opcode::Scatter => {
            // Operands are (inputs..., indices, updates...): n inputs and n updates.
            let n = (instr.operands.len().saturating_sub(1) / 2) as u64;
            if n == 1 {
                pairs.push(pair(vec![], 0));
            } else {
                pairs.extend((0..n).map(|i| pair(vec![i], i)));
            }
        }
        Opcode::Fusion if instr.output_to_operand_aliasing.is_empty() => {
            if let Some(comp) = fused_computation(module, id) {
                pairs.extend(fusion_in_place_pairs(module, comp));
            }
        }
        _ => {}
    }
    pairs
}

/// The deferred fusion bodies [`in_place_pairs`] will read: those of fusions
/// called from parsed computations whose ROOT line is a tuple, a bitcast or an
/// in-place op. Asked before the dataflow, so that they are parsed in parallel
/// rather than one at a time as the dataflow reaches them.
pub fn bodies_in_place_pairs_read(module: &Module) -> Vec<CompId> {
    use rayon::prelude::*;
    let fusions: Vec<InstrId> = parsed_fusions(module).collect();
    fusions
        .par_iter()
        .filter_map(|&id| {
            let comp = fused_computation(module, id)?;
            let k = module.computations.get(comp.index())?.deferred?;
            let in_place_root = matches!(
                module.deferred.root_opcode(module, k),
                Opcode::Tuple | Opcode::Bitcast | Opcode::DynamicUpdateSlice | Opcode::Scatter
            );
            (module.instr(id).output_to_operand_aliasing.is_empty() && in_place_root)
                .then_some(comp)
        })
        .collect()
}

/// The deferred fusion bodies [`can_share_operand_buffer`] will read, as far
/// as the live ranges tell: those of fusions with an operand of the output's
/// shape whose value dies where the output starts (a takeover the heap
/// simulation and the interference check ask about). A guess that is wrong
/// costs time only: any other body is still parsed when read.
pub fn bodies_sharing_reads(
    module: &Module,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
) -> Vec<CompId> {
    use rayon::prelude::*;
    let fusions: Vec<InstrId> = parsed_fusions(module).collect();
    let mut comps: Vec<CompId> = fusions
        .par_iter()
        .filter_map(|&id| {
            let comp = fused_computation(module, id)?;
            module.computations.get(comp.index())?.deferred?;
            let instr = module.instr(id);
            let outputs = &dataflow.value_of[id.index()];
            // As the heap simulation asks: a value alone in its buffer taking
            // over the top-level value of an operand, alone in its own.
            let alone = |v: ValueId| {
                dataflow.buffers[dataflow.values[v.index()].buffer.index()]
                    .values
                    .len()
                    == 1
            };
            let takes_over = outputs.iter().any(|&v| {
                let value = &dataflow.values[v.index()];
                let (Some(start), Some(shape), true) = (
                    ranges[v.index()].map(|r| r.start),
                    instr.shape.subshape(&value.index),
                    alone(v),
                ) else {
                    return false;
                };
                instr.operands.iter().any(|&op| {
                    dataflow.value_of[op.index()].first().is_some_and(|&ov| {
                        let operand = &dataflow.values[ov.index()];
                        alone(ov)
                            && ranges[ov.index()].is_some_and(|r| r.end == start)
                            && module.instr(operand.instr).shape.subshape(&operand.index)
                                == Some(shape)
                    })
                })
            });
            takes_over.then_some(comp)
        })
        .collect();
    comps.sort_unstable();
    comps.dedup();
    comps
}

/// Fusion instructions of the computations parsed at load.
fn parsed_fusions(module: &Module) -> impl Iterator<Item = InstrId> + '_ {
    module
        .computations
        .iter()
        .filter(|c| c.deferred.is_none())
        .flat_map(|c| c.instructions.iter().copied())
        .filter(|&id| module.instr(id).opcode == Opcode::Fusion)
}

fn fused_computation(module: &Module, id: InstrId) -> Option<CompId> {
    module.instr(id).called.first().map(|&(_, c)| c)
}

/// From each output leaf of a fused computation, follow tuples and bitcasts to
/// its source; an in-place source whose in-place operand is a fused parameter
/// makes that fusion operand alias the output (`GetFusionInstructionInPlaceInputOutputPairs`).
fn fusion_in_place_pairs(module: &Module, comp: CompId) -> Vec<OperandAlias> {
    // Only these roots lead to an in-place op; others need no body.
    if let Some(k) = module.computations[comp.index()].deferred {
        let root = module.deferred.root_opcode(module, k);
        if !matches!(
            root,
            Opcode::Tuple | Opcode::Bitcast | Opcode::DynamicUpdateSlice | Opcode::Scatter
        ) {
            return Vec::new();
        }
    }
    let root = module.comp(comp).root;
    let mut outputs: Vec<(Vec<u64>, InstrId)> = Vec::new();
    let root_instr = module.instr(root);
    if root_instr.opcode == Opcode::Tuple {
        for (i, &op) in root_instr.operands.iter().enumerate() {
            outputs.push((vec![i as u64], op));
        }
    } else {
        outputs.push((vec![], root));
    }
    let mut pairs = Vec::new();
    for (index, mut source) in outputs {
        while module.instr(source).opcode == Opcode::Bitcast {
            match module.instr(source).operands.first() {
                Some(&op) => source = op,
                None => break,
            }
        }
        let in_place_operand = match module.instr(source).opcode {
            Opcode::DynamicUpdateSlice | Opcode::Scatter => {
                module.instr(source).operands.first().copied()
            }
            _ => None,
        };
        let Some(mut operand) = in_place_operand else {
            continue;
        };
        while module.instr(operand).opcode == Opcode::Bitcast {
            match module.instr(operand).operands.first() {
                Some(&op) => operand = op,
                None => break,
            }
        }
        if let Some(n) = module.instr(operand).parameter_number {
            if module.instr(operand).opcode == Opcode::Parameter {
                pairs.push(OperandAlias {
                    output_index: index,
                    operand: n,
                    operand_index: vec![],
                });
            }
        }
    }
    pairs
}

/// `HloInstruction::IsElementwiseOnOperand` for single instructions.
pub fn is_elementwise(module: &Module, id: InstrId) -> bool {
    use Opcode::*;
    let instr = module.instr(id);
    match &instr.opcode {
        Abs | Add | And | Atan2 | Cbrt | Ceil | Clamp | Clz | Compare | Complex | Convert
        | Copy | Cos | Cosh | Divide | Erf | Exp | Expm1 | Floor | Imag | IsFinite | Log
        | Log1p | Logistic | Map | Maximum | Minimum | Multiply | Negate | Not | Or
        | PopulationCount | Power | Real | ReducePrecision | Remainder | RoundNearestAfz
        | RoundNearestEven | Rsqrt | Select | ShiftLeft | ShiftRightArithmetic
        | ShiftRightLogical | Sign | Sin | Sinh | Sqrt | StochasticConvert | Subtract | Tan
        | Tanh | Xor => true,
        BitcastConvert => instr.operands.first().is_some_and(|&op| {
            let from = &module.instr(op).shape;
            match (&**from, &*instr.shape) {
                (crate::hlo::Shape::Array(a), crate::hlo::Shape::Array(b)) => {
                    a.element.bit_width() == b.element.bit_width()
                }
                _ => false,
            }
        }),
        _ => false,
    }
}

/// `HloInstruction::IsElementwiseOnOperand`: elementwise, or a
/// `dynamic-update-slice` seen from the array it updates (operand 0), which it
/// reads and writes at the same positions.
pub fn is_elementwise_on_operand(module: &Module, id: InstrId, operand: usize) -> bool {
    is_elementwise(module, id)
        || (module.instr(id).opcode == Opcode::DynamicUpdateSlice && operand == 0)
}

/// Every transitive use of a fused parameter is elementwise on it or a tuple
/// (`AreTransitiveUsesElementwiseOrTuple`).
fn transitive_uses_elementwise(module: &Module, comp: CompId, param: InstrId) -> bool {
    let instrs = &module.comp(comp).instructions;
    let mut frontier = vec![param];
    let mut seen = vec![param];
    while let Some(current) = frontier.pop() {
        for &user in instrs {
            if !module.instr(user).operands.contains(&current) || seen.contains(&user) {
                continue;
            }
            let op = &module.instr(user).opcode;
            let slot = module
                .instr(user)
                .operands
                .iter()
                .position(|&o| o == current);
            if *op != Opcode::Tuple
                && !slot.is_some_and(|k| is_elementwise_on_operand(module, user, k))
            {
                return false;
            }
            seen.push(user);
            frontier.push(user);
        }
    }
    true
}

/// May `user`'s output at `output` reuse the buffer of its operand `operand`
/// (at `operand_index`) when that buffer dies at `user`?
/// (`HloDataflowAnalysis::CanShareOperandBufferWithUser`, notes §5.7, CPU rules.)
pub fn can_share_operand_buffer(
    target: &Target,
    module: &Module,
    operand: InstrId,
    operand_index: &[u64],
    user: InstrId,
    output: &[u64],
) -> bool {
    let operand_instr = module.instr(operand);
    let user_instr = module.instr(user);
    if operand_instr.opcode == Opcode::Constant {
        return false;
    }
    let (Some(operand_shape), Some(user_shape)) = (
        operand_instr.shape.subshape(operand_index),
        user_instr.shape.subshape(output),
    ) else {
        return false;
    };
    let operand_numbers: Vec<u64> = user_instr
        .operands
        .iter()
        .enumerate()
        .filter(|&(_, &o)| o == operand)
        .map(|(k, _)| k as u64)
        .collect();
    let shapes_equal = operand_shape == user_shape;
    let must_alias = shapes_equal
        && in_place_pairs(module, user).iter().any(|p| {
            p.output_index == output
                && operand_numbers.contains(&p.operand)
                && p.operand_index == operand_index
        });
    if must_alias {
        return true;
    }
    // The backend's own rule comes before the generic ones (`AliasInfo::MayAlias`).
    let hint = match target.backend {
        Backend::Gpu => gpu::may_alias(module, operand, user, output),
        Backend::Tpu => tpu::may_alias(module, operand, user, output),
        _ => None,
    };
    if let Some(answer) = hint {
        return answer;
    }
    if !shapes_equal {
        return false;
    }
    match &user_instr.opcode {
        Opcode::Fusion => {
            let Some(comp) = fused_computation(module, user) else {
                return false;
            };
            match user_instr.fusion_kind.as_deref() {
                Some("kOutput") => {
                    // add(dot|convolution, X): only through the X slot, used once.
                    let root = module.instr(module.comp(comp).root);
                    if root.opcode != Opcode::Add || operand_numbers.len() != 1 {
                        return false;
                    }
                    let k = operand_numbers[0];
                    root.operands.iter().any(|&op| {
                        module.instr(op).opcode == Opcode::Parameter
                            && module.instr(op).parameter_number == Some(k)
                    }) && root.operands.iter().any(|&op| {
                        matches!(module.instr(op).opcode, Opcode::Dot | Opcode::Convolution)
                    })
                }
                _ => {
                    operand_numbers.iter().all(|&k| {
                        module
                            .comp(comp)
                            .parameters
                            .get(k as usize)
                            .is_some_and(|&p| transitive_uses_elementwise(module, comp, p))
                    }) && !operand_numbers.is_empty()
                }
            }
        }
        Opcode::While | Opcode::Conditional => true,
        Opcode::DynamicUpdateSlice | Opcode::Scatter | Opcode::SetDimensionSize => {
            operand_numbers == [0]
        }
        Opcode::TriangularSolve => operand_numbers == [1],
        Opcode::Sort => false,
        Opcode::Call => false,
        _ => is_elementwise(module, user),
    }
}
