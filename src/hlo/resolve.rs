//! Name resolution: turns the names a lowered module uses into indices, once.
//!
//! Also recreates the `get-tuple-element`s that compact dumps (XLA 2026-07+)
//! leave out, the way XLA's own parser does: right before their first user,
//! named after the operand with `#` turned into `_` (notes §1.9).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::ir::*;
use super::lower::{placeholder, RawComputation, Reference, Unresolved};
use super::opcode::Opcode;
use crate::error::Error;
use crate::source::SourceFile;

/// A module's names resolved: its computations (a deferred one as a shell),
/// and the bodies left unread, for `deferred::Deferred`.
pub(super) struct Resolved {
    pub(super) computations: Vec<Computation>,
    pub(super) entry: CompId,
    pub(super) bodies: Vec<UnreadBody>,
    /// Every computation by name, for the names a body read later calls.
    pub(super) comp_ids: FxHashMap<Box<str>, CompId>,
}

/// A deferred body as loading leaves it: where its lines are, what they call
/// (from the structural check), and the fusion that calls it.
pub(super) struct UnreadBody {
    pub(super) comp: CompId,
    /// Its first line's number among every deferred line of the module.
    pub(super) first: BodyInstr,
    /// `(offset, length)` of each instruction line.
    pub(super) lines: Vec<(u32, u32)>,
    pub(super) calls: Vec<(CallRole, CompId)>,
    /// The fusion that calls it, when one read at load does.
    pub(super) caller: Option<InstrId>,
}

/// Fills in the operands, called computations and control predecessors of the
/// lowered `instructions` (in place), appends the recreated get-tuple-elements,
/// and builds the computations.
pub(super) fn resolve(
    file: &SourceFile,
    raw: Vec<RawComputation>,
    instructions: &mut Vec<Instruction>,
    unresolved: Vec<Unresolved>,
) -> Result<Resolved, Error> {
    let error_at = |r: &Reference, title: String, label: &str| {
        Error::at(file, r.offset..r.offset + r.name.len() + 1, title, label)
    };

    let mut comp_ids: FxHashMap<&str, CompId> =
        FxHashMap::with_capacity_and_hasher(raw.len(), Default::default());
    for (i, c) in raw.iter().enumerate() {
        if comp_ids.insert(c.name.name, CompId(i as u32)).is_some() {
            return Err(error_at(
                &c.name,
                format!("computation `%{}` is defined twice", c.name),
                "second definition",
            ));
        }
    }
    let entries: Vec<usize> = raw
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_entry)
        .map(|(i, _)| i)
        .collect();
    if entries.len() > 1 {
        let c = &raw[entries[1]];
        return Err(error_at(
            &c.name,
            "a module has one ENTRY computation".into(),
            "second ENTRY",
        ));
    }
    // Without an ENTRY marker XLA takes the last computation.
    let entry = CompId(
        entries
            .first()
            .copied()
            .unwrap_or(raw.len().saturating_sub(1)) as u32,
    );
    if raw.is_empty() {
        return Err(Error::at(
            file,
            file.text.len()..file.text.len(),
            "the module has no computation",
            "expected a computation",
        )
        .with_note("the file may be truncated"));
    }

    // The fusion bodies (kept as lines) and the computations lowered at load
    // are resolved side by side: neither reads what the other makes. Each
    // half stops at its first error; the earlier of the two is the module's.
    let count = raw.len();
    let (deferred_raw, eager_raw): (Vec<_>, Vec<_>) = raw
        .into_iter()
        .enumerate()
        .partition(|(_, c)| c.deferred.is_some());
    let (deferred_half, eager_half) = rayon::join(
        || shells(file, &comp_ids, deferred_raw),
        || eager(file, &comp_ids, entry, eager_raw, unresolved, instructions),
    );
    let (shells, mut bodies, eager) = match (deferred_half, eager_half) {
        (Ok((shells, bodies)), Ok(eager)) => (shells, bodies, eager),
        (Err((a, e)), Err((b, f))) => return Err(if a < b { e } else { f }),
        (Err((_, e)), _) | (_, Err((_, e))) => return Err(e),
    };
    let mut slots: Vec<Option<Computation>> = (0..count).map(|_| None).collect();
    for (ci, comp) in shells.into_iter().chain(eager) {
        slots[ci] = Some(comp);
    }
    let computations: Vec<Computation> = slots
        .into_iter()
        .map(|c| c.expect("every computation is resolved by one half"))
        .collect();
    // Each deferred body learns the fusion that calls it, whose operands its
    // parameters must match when it is parsed.
    for (i, instr) in instructions.iter().enumerate() {
        if instr.opcode != Opcode::Fusion {
            continue;
        }
        for &(role, callee) in instr.called.iter() {
            if let (CallRole::Calls, Some(k)) = (role, computations[callee.index()].deferred) {
                bodies[k.0 as usize].caller = Some(InstrId::arena(i));
            }
        }
    }
    let comp_ids = comp_ids
        .into_iter()
        .map(|(name, id)| (Box::from(name), id))
        .collect();
    Ok(Resolved {
        computations,
        entry,
        bodies,
        comp_ids,
    })
}

/// "computation `%x` has no instructions".
fn empty(file: &SourceFile, name: &Reference) -> Error {
    Error::at(
        file,
        name.offset..name.offset + name.name.len() + 1,
        format!("computation `%{name}` has no instructions"),
        "empty",
    )
}

/// The computations lowered at load, resolved in file order in the arena.
/// `Err` carries the failing computation's index.
fn eager(
    file: &SourceFile,
    comp_ids: &FxHashMap<&str, CompId>,
    entry: CompId,
    computations: Vec<(usize, RawComputation)>,
    unresolved: Vec<Unresolved>,
    instructions: &mut Vec<Instruction>,
) -> Result<Vec<(usize, Computation)>, (usize, Error)> {
    let comp_id_of = |name: &str| comp_ids.get(name).copied();
    // Room for the get-tuple-elements compact operands recreate (at most one
    // per step of each path): the arena is sized exactly, and one push past
    // its capacity would double it.
    let recreated = unresolved
        .iter()
        .flat_map(|u| &u.operands)
        .map(|o| o.tuple_path.len())
        .sum();
    instructions.reserve_exact(recreated);
    let mut unresolved = unresolved.into_iter();
    let mut done = Vec::with_capacity(computations.len());
    for (ci, comp) in computations {
        let comp_id = CompId(ci as u32);
        if comp.instructions.is_empty() {
            return Err((ci, empty(file, &comp.name)));
        }
        let names: Vec<Unresolved> = unresolved.by_ref().take(comp.instructions.len()).collect();
        let mut arena = Arena {
            instructions: &mut *instructions,
            body: None,
            start: comp.instructions.start,
        };
        let resolved = resolve_computation(
            file,
            &comp_id_of,
            (comp_id, comp_id == entry),
            comp,
            names,
            &mut arena,
        )
        .map_err(|e| (ci, e))?;
        done.push((ci, resolved));
    }
    Ok(done)
}

/// The deferred computations' shells (no instructions; the root's id) and
/// bodies (lines, the computations they call), with ids numbered in order.
/// `Err` carries the failing computation's index.
#[allow(clippy::type_complexity)]
fn shells(
    file: &SourceFile,
    comp_ids: &FxHashMap<&str, CompId>,
    deferred: Vec<(usize, RawComputation)>,
) -> Result<(Vec<(usize, Computation)>, Vec<UnreadBody>), (usize, Error)> {
    let mut shells = Vec::with_capacity(deferred.len());
    let mut bodies = Vec::with_capacity(deferred.len());
    let mut next_deferred_id = 0u32;
    for (ci, comp) in deferred {
        let d = comp.deferred.expect("only deferred computations");
        if d.lines.is_empty() {
            return Err((ci, empty(file, &comp.name)));
        }
        let base = next_deferred_id;
        next_deferred_id = u32::try_from(d.lines.len())
            .ok()
            .and_then(|n| base.checked_add(n))
            .filter(|&end| end < InstrId::LIMIT)
            .ok_or_else(|| {
                let r = &comp.name;
                (
                    ci,
                    Error::at(
                        file,
                        r.offset..r.offset + r.name.len() + 1,
                        "too many instructions in one module",
                        "here",
                    ),
                )
            })?;
        // Without a ROOT marker XLA takes the last instruction.
        let root = d.structure.root.unwrap_or(d.lines.len() - 1);
        let mut calls = Vec::with_capacity(d.structure.calls.len());
        for &(role, name, offset) in &d.structure.calls {
            let Some(&callee) = comp_ids.get(name) else {
                return Err((
                    ci,
                    Error::at(
                        file,
                        offset..offset + name.len() + 1,
                        format!("unknown computation `%{name}`"),
                        "no computation of this name in the module",
                    ),
                ));
            };
            if callee.0 as usize >= ci {
                return Err((ci, called_before_defined(file, offset, name)));
            }
            calls.push((role, callee));
        }
        shells.push((
            ci,
            Computation {
                name: comp.name.name.to_string(),
                is_entry: false,
                instructions: Vec::new(),
                root: InstrId::body(BodyInstr(base + root as u32)),
                parameters: Vec::new(),
                execution_thread: comp.execution_thread,
                span: comp.span,
                deferred: Some(BodyId(bodies.len() as u32)),
            },
        ));
        bodies.push(UnreadBody {
            comp: CompId(ci as u32),
            first: BodyInstr(base),
            lines: d.lines,
            calls,
            caller: None,
        });
    }
    Ok((shells, bodies))
}

/// Where one computation's instructions live: the module's arena, or a
/// deferred body's own list (its ids are [`Place::Body`] ids).
pub(super) struct Arena<'v> {
    pub(super) instructions: &'v mut Vec<Instruction>,
    /// For a body's list: the body line of `instructions[0]`.
    pub(super) body: Option<BodyInstr>,
    /// The computation's first instruction in `instructions`.
    pub(super) start: usize,
}

impl Arena<'_> {
    /// The id of the computation's instruction `i`.
    fn id(&self, i: usize) -> InstrId {
        self.id_at(self.start + i)
    }
    /// The id of `instructions[slot]`.
    fn id_at(&self, slot: usize) -> InstrId {
        match self.body {
            None => InstrId::arena(slot),
            Some(first) => InstrId::body(BodyInstr(first.0 + slot as u32)),
        }
    }
    fn slot(&self, id: InstrId) -> usize {
        match (id.place(), self.body) {
            (Place::Arena(n), None) => n,
            (Place::Body(line), Some(first)) => (line.0 - first.0) as usize,
            _ => unreachable!("a computation's ids are of its own list"),
        }
    }
    fn get(&self, id: InstrId) -> &Instruction {
        &self.instructions[self.slot(id)]
    }
    fn get_mut(&mut self, id: InstrId) -> &mut Instruction {
        let slot = self.slot(id);
        &mut self.instructions[slot]
    }
}

/// XLA reads a module top to bottom and knows only the computations above
/// the line it reads (its printer puts callees first), so a computation named
/// before its definition is refused, which also rules out call cycles.
fn called_before_defined(file: &SourceFile, offset: usize, name: &str) -> Error {
    Error::at(
        file,
        offset..offset + name.len() + 1,
        format!("computation `%{name}` is called before it is defined"),
        "defined further down, or by this computation itself",
    )
    .with_note(
        "XLA reads a module top to bottom: a computation must come before the ones that call it",
    )
}

/// Resolves the names of one computation's lowered instructions (`names`, in
/// line order) in place in `arena`, recreating compact get-tuple-elements.
pub(super) fn resolve_computation(
    file: &SourceFile,
    comp_id_of: &dyn Fn(&str) -> Option<CompId>,
    (comp_id, is_entry): (CompId, bool),
    comp: RawComputation,
    names: Vec<Unresolved>,
    arena: &mut Arena,
) -> Result<Computation, Error> {
    let error_at = |r: &Reference, title: String, label: &str| {
        Error::at(file, r.offset..r.offset + r.name.len() + 1, title, label)
    };
    let count = names.len();
    // Names are looked up per computation; register them all first so that
    // control-predecessors may point forward.
    let mut local: rustc_hash::FxHashMap<&str, usize> =
        HashMap::with_capacity_and_hasher(names.len(), Default::default());
    for (i, instr) in names.iter().enumerate() {
        if local.insert(instr.name.name, i).is_some() {
            return Err(error_at(
                &instr.name,
                format!("instruction `%{}` is defined twice", instr.name),
                "second definition",
            ));
        }
    }
    // Written instructions have ids in file order; recreated ones come after all of them.
    let mut order: Vec<InstrId> = Vec::with_capacity(names.len());
    let mut synthetic_ids: HashMap<(usize, Vec<u64>), InstrId> = HashMap::new();
    let mut root = None;
    let mut params: Vec<(u64, InstrId, Reference)> = Vec::new();
    let mut pending_preds: Vec<(InstrId, Vec<Reference>)> = Vec::new();

    for (i, refs) in names.into_iter().enumerate() {
        let id = arena.id(i);
        let Unresolved {
            name,
            is_root,
            operands: raw_operands,
            called: raw_called,
            control_predecessors,
        } = refs;
        let line = arena.get(id).span;
        let mut operands = Vec::with_capacity(raw_operands.len());
        for operand in raw_operands {
            let r = operand.reference;
            let Some(&target) = local.get(r.name) else {
                return Err(error_at(
                    &r,
                    format!(
                        "unknown instruction `%{}` in computation `%{}`",
                        r.name, comp.name
                    ),
                    "not defined in this computation",
                ));
            };
            // XLA's parser knows only the lines above (control predecessors
            // may point forward; operands may not).
            if target >= i {
                return Err(error_at(
                    &r,
                    format!(
                        "`%{}` is used before the line that defines it, in computation `%{}`",
                        r.name, comp.name
                    ),
                    "defined further down",
                ));
            }
            // `%t#0#1`: one get-tuple-element per step, shared by later users.
            let mut current = arena.id(target);
            let mut current_shape = arena.get(current).shape.clone();
            for depth in 1..=operand.tuple_path.len() {
                let path = operand.tuple_path[..depth].to_vec();
                let index = path[depth - 1];
                let Some(element) = current_shape.subshape(&[index]).cloned().map(Arc::new) else {
                    return Err(error_at(
                        &r,
                        format!("`%{}` has no tuple element {:?}", r.name, path),
                        "no such tuple element",
                    ));
                };
                current = match synthetic_ids.entry((target, path.clone())) {
                    Entry::Occupied(e) => *e.get(),
                    Entry::Vacant(e) => {
                        let gte = arena.id_at(arena.instructions.len());
                        let suffix: Vec<String> = path.iter().map(u64::to_string).collect();
                        arena.instructions.push(Instruction {
                            name: Name::Own(format!("{}_{}", r.name, suffix.join("_")).into()),
                            opcode: Opcode::GetTupleElement,
                            shape: element.clone(),
                            operands: Box::new([current]),
                            tuple_index: Some(index),
                            span: line,
                            synthetic: true,
                            ..placeholder(comp_id)
                        });
                        order.push(gte);
                        *e.insert(gte)
                    }
                };
                current_shape = element;
            }
            operands.push(current);
        }
        let mut called = Vec::with_capacity(raw_called.len());
        for (role, r) in raw_called {
            let Some(target) = comp_id_of(r.name) else {
                return Err(error_at(
                    &r,
                    format!("unknown computation `%{}`", r.name),
                    "no computation of this name in the module",
                ));
            };
            if target.0 >= comp_id.0 {
                return Err(called_before_defined(file, r.offset, r.name));
            }
            called.push((role, target));
        }
        if is_root {
            if root.is_some() {
                return Err(error_at(
                    &name,
                    format!("computation `%{}` has two ROOTs", comp.name),
                    "second ROOT",
                ));
            }
            root = Some(id);
        }
        if let Some(n) = arena.get(id).parameter_number {
            params.push((n, id, name));
        }
        if !control_predecessors.is_empty() {
            pending_preds.push((id, control_predecessors));
        }
        order.push(id);
        let instruction = arena.get_mut(id);
        instruction.operands = operands.into_boxed_slice();
        instruction.called = called.into_boxed_slice();
    }
    for (id, preds) in pending_preds {
        let mut resolved = Vec::with_capacity(preds.len());
        for r in preds {
            let Some(&target) = local.get(r.name) else {
                return Err(error_at(
                    &r,
                    format!("unknown instruction `%{}` in control-predecessors", r.name),
                    "not defined in this computation",
                ));
            };
            resolved.push(arena.id(target));
        }
        arena.get_mut(id).control_predecessors = resolved.into_boxed_slice();
    }
    params.sort_by_key(|(n, _, _)| *n);
    let numbers: Vec<u64> = params.iter().map(|(n, ..)| *n).collect();
    if let Some((k, problem)) = super::counts::parameter_numbers_problem(&numbers) {
        return Err(error_at(
            &params[k].2,
            format!("parameter({}) of `%{}` {problem}", numbers[k], comp.name),
            "parameter numbers must be 0, 1, 2, ...",
        ));
    }
    // Without a ROOT marker XLA takes the last instruction.
    let root = root.unwrap_or(arena.id(count - 1));
    Ok(Computation {
        name: comp.name.name.to_string(),
        is_entry,
        instructions: order,
        root,
        parameters: params.into_iter().map(|(_, id, _)| id).collect(),
        execution_thread: comp.execution_thread,
        span: comp.span,
        deferred: None,
    })
}
