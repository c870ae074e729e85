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

use rustc_hash::FxHashMap as HashMap;

use super::dataflow::{post_order, LocalIndex};
use crate::hlo::{CompId, InstrId, Module, Opcode};

/// Why donating `param` to the output written by `writer` needs a copy: the
/// first instruction (in schedule order) other than `writer` that reads the
/// parameter and is not an ancestor of `writer` (through operands and control
/// predecessors). `None`: no copy is needed.
pub fn copy_needed_by(module: &Module, param: InstrId, writer: InstrId) -> Option<InstrId> {
    copies_needed(module, &[(param, writer)])[0]
}

/// [`copy_needed_by`] for many (parameter, writer) pairs at once: a training
/// step that donates nothing asks it of thousands of parameters, and one
/// search of the whole program per parameter made that quadratic.
pub fn copies_needed(module: &Module, asks: &[(InstrId, InstrId)]) -> Vec<Option<InstrId>> {
    // Each asked parameter's readers, in its computation's order, from one
    // pass over the computations involved.
    let mut readers: HashMap<InstrId, Vec<InstrId>> =
        asks.iter().map(|&(p, _)| (p, Vec::new())).collect();
    let mut comps: Vec<CompId> = asks
        .iter()
        .map(|&(p, _)| module.instr(p).computation)
        .collect();
    comps.sort_unstable();
    comps.dedup();
    for comp in comps {
        for &i in &module.comp(comp).instructions {
            let operands = &module.instr(i).operands;
            for (k, o) in operands.iter().enumerate() {
                if !operands[..k].contains(o) {
                    if let Some(list) = readers.get_mut(o) {
                        list.push(i);
                    }
                }
            }
        }
    }
    let asks: Vec<(&[InstrId], InstrId)> = asks
        .iter()
        .map(|(p, w)| (readers[p].as_slice(), *w))
        .collect();
    unordered(module, &asks)
        .into_iter()
        .map(|blocking| blocking.first().copied())
        .collect()
}

/// Of `readers`, those that are not ancestors of `writer`: the reads that
/// copy insertion cannot prove to happen before the write.
pub fn not_ordered_before(module: &Module, readers: &[InstrId], writer: InstrId) -> Vec<InstrId> {
    unordered(module, &[(readers, writer)]).remove(0)
}

/// [`not_ordered_before`] of each (readers, writer) pair, in order.
///
/// Which readers are ancestors of which writers is found 64 readers at a
/// time: one pass over each writer's computation, operands before users, ORs
/// into each instruction the bits of the readers it depends on (or is). A
/// reader outside the writer's computation is never its ancestor.
fn unordered(module: &Module, asks: &[(&[InstrId], InstrId)]) -> Vec<Vec<InstrId>> {
    // is_ancestor[ask][k]: whether reader k of that ask is an ancestor of its writer.
    let mut is_ancestor: Vec<Vec<bool>> = asks.iter().map(|(r, _)| vec![false; r.len()]).collect();
    let mut comps: Vec<CompId> = asks
        .iter()
        .map(|&(_, w)| module.instr(w).computation)
        .collect();
    comps.sort_unstable();
    comps.dedup();
    for comp in comps {
        let c = module.comp(comp);
        let local = LocalIndex::new(&c.instructions);
        let order: Vec<usize> = post_order(module, &c.instructions, c.root)
            .into_iter()
            .filter_map(|id| local.get(id))
            .collect();
        // Every (ask, reader) of this computation, by the reader's position.
        let mut wanted: Vec<(usize, usize, usize, usize)> = Vec::new(); // (reader, writer, ask, k)
        for (a, &(readers, writer)) in asks.iter().enumerate() {
            if module.instr(writer).computation != comp {
                continue;
            }
            let w = local
                .get(writer)
                .expect("a computation holds its instructions");
            for (k, &r) in readers.iter().enumerate() {
                if let Some(r) = local.get(r) {
                    wanted.push((r, w, a, k));
                }
            }
        }
        let mut distinct: Vec<usize> = wanted.iter().map(|&(r, ..)| r).collect();
        distinct.sort_unstable();
        distinct.dedup();
        wanted.sort_unstable();
        let mut masks = vec![0u64; c.instructions.len()];
        let mut next = 0;
        for batch in distinct.chunks(64) {
            masks.fill(0);
            for (bit, &r) in batch.iter().enumerate() {
                masks[r] |= 1 << bit;
            }
            for &x in &order {
                let instr = module.instr(c.instructions[x]);
                let reached = instr
                    .operands
                    .iter()
                    .chain(&instr.control_predecessors)
                    .filter_map(|&o| local.get(o))
                    .fold(masks[x], |m, o| m | masks[o]);
                masks[x] = reached;
            }
            let last = *batch.last().expect("chunks are not empty");
            while let Some(&(r, w, a, k)) = wanted.get(next).filter(|&&(r, ..)| r <= last) {
                let bit = batch
                    .binary_search(&r)
                    .expect("every wanted reader is in a batch");
                is_ancestor[a][k] = masks[w] >> bit & 1 == 1;
                next += 1;
            }
        }
    }
    asks.iter()
        .zip(is_ancestor)
        .map(|(&(readers, writer), ancestor)| {
            readers
                .iter()
                .zip(ancestor)
                .filter(|&(&r, ancestor)| r != writer && !ancestor)
                .map(|(&r, _)| r)
                .collect()
        })
        .collect()
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
