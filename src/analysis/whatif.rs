//! What donating parameters would do to a module, before XLA is asked: the
//! copies XLA's copy insertion would keep, added to the module, so that the
//! accounting can be re-run on it (HM001's saving).
//!
//! Copy insertion gives a donated parameter a copy at the start of the program
//! and lets every reader use the copy, unless it can prove that all of them run
//! before the output overwrites the parameter's buffer. It decides this before
//! the schedule exists (notes §5.5-5.6), so "run before" means "is an ancestor
//! of the instruction that writes the output": an ancestor runs first in every
//! schedule. The corpus's donated MLP shows it: the backward `dot` that reads
//! `params[1]['w']` runs before the update in the schedule XLA picked, yet it is
//! not an ancestor of the update, so the donated build copies the weight first.

use crate::hlo::{CompId, InstrId, Module, Opcode};

/// Why donating `param` to the output written by `writer` needs a copy: the
/// first instruction (in schedule order) other than `writer` that reads the
/// parameter and is not an ancestor of `writer` (through operands and control
/// predecessors). `None`: no copy is needed.
pub fn copy_needed_by(module: &Module, param: InstrId, writer: InstrId) -> Option<InstrId> {
    let comp = module.instr(param).computation;
    let readers: Vec<InstrId> = module
        .comp(comp)
        .instructions
        .iter()
        .copied()
        .filter(|&i| module.instr(i).operands.contains(&param))
        .collect();
    if readers.is_empty() {
        return None;
    }
    not_ordered_before(module, &readers, writer)
        .first()
        .copied()
}

/// Of `readers`, those that are not ancestors of `writer`: the reads that
/// copy insertion cannot prove to happen before the write.
pub fn not_ordered_before(module: &Module, readers: &[InstrId], writer: InstrId) -> Vec<InstrId> {
    let ancestors = ancestors(module, writer);
    readers
        .iter()
        .copied()
        .filter(|&r| r != writer && !ancestors[r.index()])
        .collect()
}

/// Every instruction `id` depends on, as a flag per instruction id.
fn ancestors(module: &Module, id: InstrId) -> Vec<bool> {
    let mut seen = vec![false; module.instructions.len()];
    let mut stack = vec![id];
    while let Some(x) = stack.pop() {
        let instr = module.instr(x);
        for &next in instr.operands.iter().chain(&instr.control_predecessors) {
            if !seen[next.index()] {
                seen[next.index()] = true;
                stack.push(next);
            }
        }
    }
    seen
}

/// The module with a copy of each of `params` (entry parameters) scheduled
/// right after the parameters, every reader in the entry reading the copy, as
/// XLA's donated build has it (`%copy.3 = f32[4096,4096] copy(%params_1_w)`).
pub fn with_parameter_copies(module: &Module, params: &[InstrId]) -> Module {
    let mut m = module.clone();
    if params.is_empty() {
        return m;
    }
    let entry: CompId = m.entry;
    let mut copy_of: Vec<Option<InstrId>> = vec![None; m.instructions.len()];
    let mut copies = Vec::with_capacity(params.len());
    for &p in params {
        let id = InstrId(m.instructions.len() as u32);
        let mut copy = m.instr(p).clone();
        copy.name = format!("{}.donation_copy", copy.name);
        copy.opcode = Opcode::Copy;
        copy.operands = vec![p];
        copy.parameter_number = None;
        copy.called = Box::default();
        copy.control_predecessors = Box::default();
        copy.output_to_operand_aliasing = Box::default();
        copy.attributes = Box::default();
        copy.synthetic = true;
        m.instructions.push(copy);
        copy_of[p.index()] = Some(id);
        copies.push(id);
    }
    let order = m.computations[entry.index()].instructions.clone();
    for &i in &order {
        for op in &mut m.instructions[i.index()].operands {
            if let Some(Some(c)) = copy_of.get(op.index()) {
                *op = *c;
            }
        }
    }
    // After the last parameter, before anything that could read one.
    let after = order
        .iter()
        .rposition(|&i| m.instr(i).opcode == Opcode::Parameter)
        .map_or(0, |p| p + 1);
    m.computations[entry.index()]
        .instructions
        .splice(after..after, copies);
    m
}
