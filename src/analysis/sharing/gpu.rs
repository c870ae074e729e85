//! XLA:GPU's own answer to "may this output take over that operand's buffer?"
//! (`GpuAliasInfo::MayAlias`, `buffer_sharing.cc`), asked after the in-place
//! pairs and before the generic rules. It differs from the generic rule in
//! that a fusion output may reuse an operand of another shape with as many
//! elements of the same width (a bitcast away), and in that a reduction
//! fusion's reduced operand does not block sharing: the reduction is emitted
//! first.

use rustc_hash::FxHashMap as HashMap;

use super::{is_elementwise, is_elementwise_on_operand};
use crate::hlo::{CompId, InstrId, Module, Opcode, Shape};

/// `Some(answer)` when the GPU rules decide, `None` to fall through to the
/// generic ones.
pub fn may_alias(module: &Module, operand: InstrId, user: InstrId, output: &[u64]) -> Option<bool> {
    let user_instr = module.instr(user);
    match &user_instr.opcode {
        // NCCL reduces in place.
        Opcode::AllReduce => Some(all_reduce_in_place(module, operand, user, output)),
        Opcode::CustomCall => {
            let target = module.custom_call_target(user).unwrap_or_default();
            Some(if target.starts_with("__cublas$lt$matmul") {
                // The bias (operand 2) may be overwritten when beta is not 0.
                user_instr.operands.get(2) == Some(&operand)
                    && module
                        .attribute(user, "backend_config")
                        .is_some_and(has_nonzero_beta)
            } else if target == "__cusolver$cholesky" {
                output.len() == 1 && output[0] == 0
            } else {
                false
            })
        }
        Opcode::Fusion => Some(fusion_may_alias(module, operand, user, output)),
        _ => None,
    }
}

/// An all-reduce may write each result over the operand it reduces: the
/// one operand, or operand `i` for result `{i}`. libtpu's dumps show the same.
pub fn all_reduce_in_place(
    module: &Module,
    operand: InstrId,
    user: InstrId,
    output: &[u64],
) -> bool {
    let user_instr = module.instr(user);
    user_instr.operands.len() == 1
        || (output.len() == 1 && user_instr.operands.get(output[0] as usize) == Some(&operand))
}

fn has_nonzero_beta(config: &str) -> bool {
    // `"beta":0` when absent or zero; any other number means the bias is read.
    match config.find("\"beta\":") {
        Some(at) => {
            let rest = &config[at + 7..];
            let number: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | 'e' | 'E' | '+'))
                .collect();
            number.parse::<f64>().is_ok_and(|b| b != 0.0)
        }
        None => false,
    }
}

/// `FusionCanShareBufferHint`: the fused parameter reaches the output only
/// through elementwise ops and bitcasts (or an in-place dynamic-update-slice,
/// scatter or sort root), so every element is read before it is overwritten.
fn fusion_may_alias(module: &Module, operand: InstrId, user: InstrId, output: &[u64]) -> bool {
    let user_instr = module.instr(user);
    let (Some(operand_shape), Some(user_shape)) = (
        Some(&*module.instr(operand).shape),
        user_instr.shape.subshape(output),
    ) else {
        return false;
    };
    if operand_shape != user_shape && !same_footprint(operand_shape, user_shape) {
        return false;
    }
    let Some(&(_, comp)) = user_instr.called.first() else {
        return false;
    };
    let Some(k) = user_instr.operands.iter().position(|&o| o == operand) else {
        return false;
    };
    let Some(&param) = module.comp(comp).parameters.get(k) else {
        return false;
    };
    let root = module.comp(comp).root;
    let multi_output = module.instr(root).opcode == Opcode::Tuple;
    let out = if multi_output {
        match output
            .first()
            .and_then(|&i| module.instr(root).operands.get(i as usize))
        {
            Some(&o) => o,
            None => return false,
        }
    } else {
        root
    };
    let non_bitcast_root = if module.instr(out).opcode == Opcode::Bitcast {
        module.instr(out).operands.first().copied().unwrap_or(out)
    } else {
        out
    };
    let hero = reduction_hero(module, comp, module.fusion_kind(user));
    let users = users_in(module, comp);

    let mut queue = std::collections::VecDeque::from([param]);
    let mut visited = vec![param];
    let mut found = false;
    while let Some(current) = queue.pop_front() {
        if current == out {
            found = true;
        }
        if Some(current) == hero {
            continue;
        }
        for &u in users.get(&current).map_or(&[][..], Vec::as_slice) {
            if !visited.contains(&u) {
                visited.push(u);
                queue.push_back(u);
            }
            let u_instr = module.instr(u);
            let slot = u_instr
                .operands
                .iter()
                .position(|&o| o == current)
                .unwrap_or(0);
            if u == non_bitcast_root
                && u_instr.opcode == Opcode::Scatter
                && slot < scatter_inputs(module, u)
                && u_instr.operands.iter().filter(|&&o| o == current).count() == 1
            {
                continue;
            }
            // A sort root sorts in place: the output of the operand's own
            // index may take its buffer (when the operand is read once).
            if u == non_bitcast_root
                && u_instr.opcode == Opcode::Sort
                && u_instr.operands.iter().filter(|&&o| o == current).count() == 1
            {
                if output != [slot as u64] {
                    return false;
                }
                continue;
            }
            let root_instr = module.instr(non_bitcast_root);
            if root_instr.opcode == Opcode::DynamicUpdateSlice
                && u_instr.opcode == Opcode::DynamicSlice
                && root_instr.operands.first() == u_instr.operands.first()
                && root_instr
                    .operands
                    .get(1)
                    .is_some_and(|&update| *module.instr(update).shape == *u_instr.shape)
            {
                // The same slice read and written is safe; a different one may overlap.
                let scalar =
                    |s: &Shape| matches!(s, Shape::Array(a) if a.element_count() == Some(1));
                let update_scalar = root_instr
                    .operands
                    .get(1)
                    .is_some_and(|&up| scalar(&module.instr(up).shape));
                if !(scalar(&u_instr.shape) && update_scalar)
                    && u_instr.operands[1..]
                        .iter()
                        .zip(root_instr.operands.iter().skip(2))
                        .any(|(a, b)| a != b)
                {
                    return false;
                }
            } else if (!is_elementwise_on_operand(module, u, slot)
                || u_instr.opcode == Opcode::Copy)
                && u_instr.opcode != Opcode::Bitcast
                && u_instr.opcode != Opcode::Tuple
                && Some(u) != hero
                && !(u == non_bitcast_root
                    && u_instr.opcode == Opcode::DynamicUpdateSlice
                    && slot == 1)
            {
                return false;
            }
        }
    }
    if multi_output && !is_elementwise(module, non_bitcast_root) {
        // Another output reached from the parameter may be written in another order.
        if module
            .instr(root)
            .operands
            .iter()
            .any(|&o| o != out && visited.contains(&o))
        {
            return false;
        }
    }
    found
}

/// Two arrays of as many elements of the same byte width: one buffer fits both.
fn same_footprint(a: &Shape, b: &Shape) -> bool {
    match (a, b) {
        (Shape::Array(x), Shape::Array(y)) => {
            x.element_count() == y.element_count()
                && x.element.byte_width() == y.element.byte_width()
        }
        _ => false,
    }
}

fn scatter_inputs(module: &Module, scatter: InstrId) -> usize {
    match &*module.instr(scatter).shape {
        Shape::Tuple(elements) => elements.len(),
        _ => 1,
    }
}

/// Each fused instruction's users, in computation order.
fn users_in(module: &Module, comp: CompId) -> HashMap<InstrId, Vec<InstrId>> {
    let mut users: HashMap<InstrId, Vec<InstrId>> = HashMap::default();
    for &id in &module.comp(comp).instructions {
        for &op in &module.instr(id).operands {
            let list = users.entry(op).or_default();
            if !list.contains(&id) {
                list.push(id);
            }
        }
    }
    users
}

/// The reduction a reduction-emitter fusion (`kInput` with a reduce at the
/// root, possibly behind elementwise ops and bitcasts) computes first.
fn reduction_hero(module: &Module, comp: CompId, kind: Option<&str>) -> Option<InstrId> {
    if kind != Some("kInput") {
        return None;
    }
    let root = module.comp(comp).root;
    let roots: &[InstrId] = if module.instr(root).opcode == Opcode::Tuple {
        &module.instr(root).operands
    } else {
        std::slice::from_ref(&root)
    };
    roots.iter().find_map(|&r| {
        let mut r = r;
        for _ in 0..module.comp(comp).instructions.len() {
            let instr = module.instr(r);
            match instr.opcode {
                Opcode::Reduce => return Some(r),
                Opcode::Bitcast | Opcode::Reshape | Opcode::Convert => {
                    r = *instr.operands.first()?
                }
                _ if instr.operands.len() == 1 && is_elementwise_on_operand(module, r, 0) => {
                    r = instr.operands[0]
                }
                _ => return None,
            }
        }
        None
    })
}
