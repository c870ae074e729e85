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

use crate::hlo::{CompId, Edits, InstrId, Module, Name, Opcode};

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
            for o in &module.instr(i).operands {
                // Once per reader, however often it reads the parameter.
                match readers.get_mut(o) {
                    Some(list) if list.last() != Some(&i) => list.push(i),
                    _ => {}
                }
            }
        }
    }
    let asks: Vec<(&[InstrId], InstrId)> = asks
        .iter()
        .map(|(p, w)| (readers[p].as_slice(), *w))
        .collect();
    not_ordered_before_each(module, &asks)
        .into_iter()
        .map(|blocking| blocking.first().copied())
        .collect()
}

/// For each (readers, writer) pair, in order: the readers that are not
/// ancestors of the writer (through operands and control predecessors), the
/// reads that copy insertion cannot prove to happen before the write.
///
/// Which readers are ancestors of which writers is found 64 readers at a
/// time: a search from the writers through operands and control
/// predecessors ORs into each instruction it reaches the bits of the readers
/// that instruction depends on (or is), operands first. One search serves
/// every writer of a batch, so thousands of parameters cost a few passes
/// over the program, and a single question no more than the writer's
/// ancestors.
pub fn not_ordered_before_each(
    module: &Module,
    asks: &[(&[InstrId], InstrId)],
) -> Vec<Vec<InstrId>> {
    // (reader, ask, k): reader k of ask `ask`, by reader.
    let mut wanted: Vec<(InstrId, usize, usize)> = asks
        .iter()
        .enumerate()
        .flat_map(|(a, (readers, _))| readers.iter().enumerate().map(move |(k, &r)| (r, a, k)))
        // A fusion body's instruction (parsed on demand) is no ancestor of an
        // instruction outside it, nor has one here: its id indexes no table.
        .filter(|&(r, a, _)| !r.is_deferred() && !asks[a].1.is_deferred())
        .collect();
    wanted.sort_unstable();
    let mut distinct: Vec<InstrId> = wanted.iter().map(|&(r, ..)| r).collect();
    distinct.dedup();
    let mut is_ancestor: Vec<Vec<bool>> = asks.iter().map(|(r, _)| vec![false; r.len()]).collect();
    let mut search = Search {
        module,
        masks: vec![0; module.instr_count()],
        state: vec![State::New; module.instr_count()],
    };
    let mut wanted = wanted.into_iter().peekable();
    for batch in distinct.chunks(64) {
        search.masks.fill(0);
        search.state.fill(State::New);
        for (bit, &r) in batch.iter().enumerate() {
            search.masks[r.index()] |= 1 << bit;
        }
        let last = *batch.last().expect("chunks are not empty");
        while let Some((r, a, k)) = wanted.next_if(|&(r, ..)| r <= last) {
            let writer = asks[a].1;
            let bit = batch.binary_search(&r).expect("every reader is in a batch");
            is_ancestor[a][k] = search.reach(writer) >> bit & 1 == 1;
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

#[derive(Clone, Copy, PartialEq)]
enum State {
    New,
    /// On the search's path (seeing it again would mean a cycle).
    Open,
    Done,
}

/// The search of [`not_ordered_before_each`]: `masks[x]`, once `x` is done, holds the
/// bits of the readers among `x` and its ancestors.
struct Search<'m> {
    module: &'m Module,
    masks: Vec<u64>,
    state: Vec<State>,
}

impl Search<'_> {
    fn reach(&mut self, from: InstrId) -> u64 {
        let preds = |x: InstrId| {
            let instr = self.module.instr(x);
            instr.operands.len() + instr.control_predecessors.len()
        };
        let mut stack: Vec<(InstrId, usize)> = Vec::new();
        if self.state[from.index()] == State::New {
            self.state[from.index()] = State::Open;
            stack.push((from, 0));
        }
        while let Some(&mut (x, ref mut next)) = stack.last_mut() {
            if *next < preds(x) {
                let instr = self.module.instr(x);
                let p = match instr.operands.get(*next) {
                    Some(&p) => p,
                    None => instr.control_predecessors[*next - instr.operands.len()],
                };
                *next += 1;
                if self.state[p.index()] == State::New {
                    self.state[p.index()] = State::Open;
                    stack.push((p, 0));
                }
            } else {
                let instr = self.module.instr(x);
                let mask = instr
                    .operands
                    .iter()
                    .chain(&instr.control_predecessors)
                    .fold(self.masks[x.index()], |m, p| m | self.masks[p.index()]);
                self.masks[x.index()] = mask;
                self.state[x.index()] = State::Done;
                stack.pop();
            }
        }
        self.masks[from.index()]
    }
}

/// The module with a copy of each of `params` (entry parameters) scheduled
/// right after the parameters, every reader in the entry reading the copy, as
/// XLA's donated build has it (`%copy.3 = f32[4096,4096] copy(%params_1_w)`).
///
/// A view, not a copy of the module: the parameter moves to a new id and its
/// old id becomes the copy, so the readers, which name the old id, read the
/// copy without being rewritten. The edits are two instructions per
/// parameter and the entry's order, whatever the size of the program.
pub fn with_parameter_copies(module: &Module, params: &[InstrId]) -> Module {
    if params.is_empty() {
        return module.clone();
    }
    let mut edits = Edits::new(module);
    let mut entry = module.entry().clone();
    // After the last parameter, before anything that could read one.
    let after = entry
        .instructions
        .iter()
        .rposition(|&i| module.instr(i).opcode == Opcode::Parameter)
        .map_or(0, |p| p + 1);
    let mut moved_to: HashMap<InstrId, InstrId> = HashMap::default();
    let mut copies = Vec::with_capacity(params.len());
    for &p in params {
        if moved_to.contains_key(&p) {
            continue; // one copy per parameter, however often it is asked for
        }
        copies.push(p);
        let parameter = module.instr(p);
        let moved = edits.add(parameter.clone());
        moved_to.insert(p, moved);
        let number = parameter
            .parameter_number
            .expect("a donated entry parameter");
        entry.parameters[number as usize] = moved;
        if entry.root == p {
            // The program returns the parameter itself, not a read of it.
            entry.root = moved;
        }
        let mut copy = parameter.clone();
        let name = parameter.name.as_str(module.text());
        copy.name = Name::Own(format!("{name}.donation_copy").into());
        copy.opcode = Opcode::Copy;
        copy.operands = Box::new([moved]);
        copy.parameter_number = None;
        copy.called = Box::default();
        copy.control_predecessors = Box::default();
        copy.output_to_operand_aliasing = Box::default();
        copy.attributes = Box::default();
        copy.synthetic = true;
        edits.replace(p, copy);
    }
    for slot in &mut entry.instructions {
        if let Some(&moved) = moved_to.get(slot) {
            *slot = moved;
        }
    }
    entry.instructions.splice(after..after, copies);
    edits.set_entry(entry);
    module.with_edits(edits)
}
