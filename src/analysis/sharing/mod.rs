//! When may an instruction write its output into an operand's memory?
//!
//! Two questions XLA asks (notes §4.3 rule 4 and §5.7):
//! - [`in_place_pairs`]: outputs that *must* share an operand's buffer
//!   (`dynamic-update-slice`, `scatter`, aliasing custom calls and fusions, ...).
//! - [`can_share_operand_buffer`]: whether an output *may* take over an operand
//!   buffer that dies at this instruction (`CanShareOperandBufferWithUser`).

mod fused;
mod gpu;
mod tpu;

use self::fused::{Fused, Node};
use crate::analysis::dataflow::{Dataflow, ValueId};
use crate::analysis::liveness::LiveRange;
use crate::chip::{Backend, Target};
use crate::hlo::{CompId, InstrId, Module, Opcode, OperandAlias};
use rustc_hash::FxHashMap as HashMap;
use std::sync::LazyLock;

/// The opcodes that, as the source of a fusion's output (through tuples and
/// bitcasts), write that output into their operand 0's buffer: the fusion
/// operand read there must alias the output
/// (`GetFusionInstructionInPlaceInputOutputPairs`). [`fusion_in_place_pairs`]
/// matches them and probes the text of bodies not yet parsed for them, both
/// from this list.
pub(crate) const FUSED_IN_PLACE: &[Opcode] = &[Opcode::DynamicUpdateSlice, Opcode::Scatter];

/// Each of [`FUSED_IN_PLACE`] as an instruction line spells it
/// (`dynamic-update-slice(`), from the parser's own table: a body whose text
/// holds none of them has no in-place output and need not be parsed. A
/// probe may also match more (`select-and-scatter(`); that costs a parse only.
static FUSED_IN_PLACE_PROBES: LazyLock<Vec<String>> =
    LazyLock::new(|| FUSED_IN_PLACE.iter().map(|op| format!("{op}(")).collect());

/// `(output index, (operand number, operand index))` pairs that must alias
/// (`AliasInfo::GetInPlaceInputOutputPairs`).
pub fn in_place_pairs(module: &Module, id: InstrId) -> Vec<OperandAlias> {
    pairs_with(module, id, |comp| fusion_in_place_pairs(module, comp))
}

/// [`in_place_pairs`] of every instruction of the computations parsed at
/// load, with the fusions' found first on all cores (the dataflow asks about
/// each instruction once, in order; a fusion's answer reads its body's text).
pub struct InPlacePairs {
    fusions: HashMap<CompId, Vec<OperandAlias>>,
}

impl InPlacePairs {
    pub fn find(module: &Module) -> InPlacePairs {
        use rayon::prelude::*;
        let fusions: Vec<InstrId> = parsed_fusions(module).collect();
        let fusions = fusions
            .par_iter()
            .filter(|&&id| module.instr(id).output_to_operand_aliasing.is_empty())
            .filter_map(|&id| fused_computation(module, id))
            .map(|comp| (comp, fusion_in_place_pairs(module, comp)))
            .collect();
        InPlacePairs { fusions }
    }

    /// [`in_place_pairs`] of `id`, an instruction of a computation parsed at load.
    pub fn pairs(&self, module: &Module, id: InstrId) -> Vec<OperandAlias> {
        pairs_with(module, id, |comp| match self.fusions.get(&comp) {
            Some(pairs) => pairs.clone(),
            None => fusion_in_place_pairs(module, comp),
        })
    }
}

fn pairs_with(
    module: &Module,
    id: InstrId,
    fusion_pairs: impl FnOnce(CompId) -> Vec<OperandAlias>,
) -> Vec<OperandAlias> {
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
                pairs.extend(fusion_pairs(comp));
            }
        }
        _ => {}
    }
    pairs
}

/// Asks, on all cores, the questions the heap simulation and the interference
/// check will ask [`can_share_operand_buffer`] about fusions, as far as the
/// live ranges tell: may a fusion's output take over an operand of its shape
/// whose value dies where the output starts. The answers are not kept; the
/// lines of fusion bodies they read are, so the one-at-a-time asking later
/// reads no line. A guess that is wrong costs time only. It runs beside the
/// buffer assignment, which leaves the other cores idle until its heap
/// simulation asks these questions.
pub fn read_sharing_queries(
    target: &Target,
    module: &Module,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
) {
    use rayon::prelude::*;
    let fusions: Vec<InstrId> = parsed_fusions(module).collect();
    fusions.par_iter().for_each(|&id| {
        let Some(comp) = fused_computation(module, id) else {
            return;
        };
        if module.shell(comp).deferred.is_none() {
            return;
        }
        let instr = module.instr(id);
        // As the heap simulation asks: a value alone in its buffer taking
        // over the top-level value of an operand, alone in its own.
        let alone = |v: ValueId| {
            dataflow.buffers[dataflow.values[v.index()].buffer.index()]
                .values
                .len()
                == 1
        };
        for &v in dataflow.value_of(id) {
            let value = &dataflow.values[v.index()];
            let (Some(start), Some(shape), true) = (
                ranges[v.index()].map(|r| r.start),
                instr.shape.subshape(&value.index),
                alone(v),
            ) else {
                continue;
            };
            for &op in &instr.operands {
                let Some(&ov) = dataflow.value_of(op).first() else {
                    continue;
                };
                let operand = &dataflow.values[ov.index()];
                if alone(ov)
                    && ranges[ov.index()].is_some_and(|r| r.end == start)
                    && module.instr(operand.instr).shape.subshape(&operand.index) == Some(shape)
                {
                    can_share_operand_buffer(target, module, op, &operand.index, id, &value.index);
                }
            }
        }
    });
}

/// Fusion instructions of the computations parsed at load.
fn parsed_fusions(module: &Module) -> impl Iterator<Item = InstrId> + '_ {
    module
        .shells()
        .map(|(_, c)| c)
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
    // Only these roots lead to an in-place op; others need no body. And a
    // body whose text spells no in-place opcode has none.
    if let Some(k) = module.shell(comp).deferred {
        let body = module.body(k);
        if !FUSED_IN_PLACE_PROBES
            .iter()
            .any(|probe| body.mentions(probe))
        {
            return Vec::new();
        }
        let root = body.root_opcode();
        if !matches!(root, Opcode::Tuple | Opcode::Bitcast) && !FUSED_IN_PLACE.contains(&root) {
            return Vec::new();
        }
    }
    let body = Fused::body(module, comp);
    let root = body.root();
    let mut outputs: Vec<(Vec<u64>, Node)> = Vec::new();
    if *body.opcode(root) == Opcode::Tuple {
        for (i, op) in body.operands(root).into_iter().enumerate() {
            outputs.push((vec![i as u64], op));
        }
    } else {
        outputs.push((vec![], root));
    }
    let through_bitcasts = |mut n: Node| {
        while *body.opcode(n) == Opcode::Bitcast {
            match body.operands(n).first() {
                Some(&op) => n = op,
                None => break,
            }
        }
        n
    };
    let mut pairs = Vec::new();
    for (index, source) in outputs {
        let source = through_bitcasts(source);
        if !FUSED_IN_PLACE.contains(body.opcode(source)) {
            continue;
        }
        let Some(&operand) = body.operands(source).first() else {
            continue;
        };
        if let Some(n) = body.parameter_number(through_bitcasts(operand)) {
            pairs.push(OperandAlias {
                output_index: index,
                operand: n,
                operand_index: vec![],
            });
        }
    }
    pairs
}

/// `HloInstruction::IsElementwise` by opcode alone; `None` for
/// `bitcast-convert`, which is elementwise between types of one bit width.
fn elementwise_opcode(opcode: &Opcode) -> Option<bool> {
    use Opcode::*;
    match opcode {
        Abs | Add | And | Atan2 | Cbrt | Ceil | Clamp | Clz | Compare | Complex | Convert
        | Copy | Cos | Cosh | Divide | Erf | Exp | Expm1 | Floor | Imag | IsFinite | Log
        | Log1p | Logistic | Map | Maximum | Minimum | Multiply | Negate | Not | Or
        | PopulationCount | Power | Real | ReducePrecision | Remainder | RoundNearestAfz
        | RoundNearestEven | Rsqrt | Select | ShiftLeft | ShiftRightArithmetic
        | ShiftRightLogical | Sign | Sin | Sinh | Sqrt | StochasticConvert | Subtract | Tan
        | Tanh | Xor => Some(true),
        BitcastConvert => None,
        _ => Some(false),
    }
}

/// Both arrays, of elements of one bit width (a `bitcast-convert` between
/// them is elementwise).
fn same_bit_width(from: &crate::hlo::Shape, to: &crate::hlo::Shape) -> bool {
    match (from, to) {
        (crate::hlo::Shape::Array(a), crate::hlo::Shape::Array(b)) => {
            a.element.bit_width() == b.element.bit_width()
        }
        _ => false,
    }
}

/// `HloInstruction::IsElementwiseOnOperand` for single instructions.
pub fn is_elementwise(module: &Module, id: InstrId) -> bool {
    let instr = module.instr(id);
    elementwise_opcode(&instr.opcode).unwrap_or_else(|| {
        let first = instr.operands.first();
        first.is_some_and(|&op| same_bit_width(&module.instr(op).shape, &instr.shape))
    })
}

/// `HloInstruction::IsElementwiseOnOperand`: elementwise, or a
/// `dynamic-update-slice` seen from the array it updates (operand 0), which it
/// reads and writes at the same positions.
pub fn is_elementwise_on_operand(module: &Module, id: InstrId, operand: usize) -> bool {
    is_elementwise(module, id)
        || (module.instr(id).opcode == Opcode::DynamicUpdateSlice && operand == 0)
}

/// [`is_elementwise_on_operand`] inside a fused body.
fn fused_elementwise_on_operand(body: Fused, n: Node, operand: usize) -> bool {
    let opcode = body.opcode(n);
    let elementwise = elementwise_opcode(opcode).unwrap_or_else(|| {
        let first = body.operands(n).first().copied();
        first.is_some_and(|op| same_bit_width(body.shape(op), body.shape(n)))
    });
    elementwise || (*opcode == Opcode::DynamicUpdateSlice && operand == 0)
}

/// Every transitive use of a fused parameter is elementwise on it or a tuple
/// (`AreTransitiveUsesElementwiseOrTuple`).
fn transitive_uses_elementwise(body: Fused, param: Node) -> bool {
    let mut frontier = vec![param];
    let mut seen = vec![param];
    while let Some(current) = frontier.pop() {
        for user in body.users(current) {
            if seen.contains(&user) {
                continue;
            }
            let slot = body.operands(user).iter().position(|&o| o == current);
            if *body.opcode(user) != Opcode::Tuple
                && !slot.is_some_and(|k| fused_elementwise_on_operand(body, user, k))
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
            match module.fusion_kind(user) {
                Some("kOutput") => {
                    // add(dot|convolution, X): only through the X slot, used once.
                    let body = Fused::body(module, comp);
                    let root = body.root();
                    if *body.opcode(root) != Opcode::Add || operand_numbers.len() != 1 {
                        return false;
                    }
                    let k = operand_numbers[0];
                    let operands = body.operands(root);
                    operands
                        .iter()
                        .any(|&op| body.parameter_number(op) == Some(k))
                        && operands
                            .iter()
                            .any(|&op| matches!(body.opcode(op), Opcode::Dot | Opcode::Convolution))
                }
                _ => {
                    let body = Fused::body(module, comp);
                    operand_numbers.iter().all(|&k| {
                        body.parameter(k)
                            .is_some_and(|p| transitive_uses_elementwise(body, p))
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
