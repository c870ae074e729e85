//! The structural rules of XLA's HLO verifier that the memory accounting
//! relies on. XLA never writes a module that breaks them; a file that does was
//! edited or cut, and its numbers would be wrong, so it is refused with the
//! instruction's line.
//!
//! Checked: the call graph has no cycle; instructions in a computation do not
//! use each other in a cycle, and in a scheduled module each is defined before
//! its users; `get-tuple-element` reads an existing element of a tuple and has
//! its shape; `tuple` has its operands' shapes; the opcodes whose operands the
//! analysis reads have as many as XLA allows; `call`, `while`, `conditional`
//! and `fusion` pass their callees as many values as those take, of the shapes
//! they take. Shapes are compared without layouts (as XLA's `Compatible`).
//!
//! A fusion body read on demand ([`super::deferred`]) is checked when it is
//! read; at load, the fusion's shape is checked against the result its
//! header declares (`-> f32[8] {`), one shape parse per distinct result.

use std::cell::RefCell;

use super::counts::{arity, Arity};
use super::ir::*;
use super::lower::ShapeCache;
use super::opcode::Opcode;
use super::parse::Line;
use super::shape::{ArrayShape, Shape};
use crate::error::Error;
use crate::source::SourceFile;

pub(super) fn verify(
    file: &SourceFile,
    header: &ModuleHeader,
    (computations, entry): (&[Computation], CompId),
    instructions: &[Instruction],
) -> Result<(), Error> {
    let lookup = |id: InstrId| &instructions[id.index()];
    let check = Verifier {
        file,
        computations,
        lookup: &lookup,
        declared: RefCell::default(),
    };
    check.call_graph_is_acyclic()?;
    check.aliases_exist(header, &computations[entry.index()])?;
    check.entry_layout_matches(header, &computations[entry.index()])?;
    for comp in computations {
        check.computation(comp, header.is_scheduled)?;
    }
    Ok(())
}

/// What [`verify_body`] reads of the module a body is in.
pub(super) struct Context<'a> {
    pub(super) file: &'a SourceFile,
    /// As listed: a deferred computation as its shell.
    pub(super) computations: &'a [Computation],
    /// `is_scheduled=true` in the header.
    pub(super) scheduled: bool,
}

/// The rules of [`verify`] for a deferred body `comp` (computation `callee`),
/// once it is parsed, and the signature of the fusion that calls it, if known
/// (checked here rather than at load, where the body was not read). `lookup`
/// finds its instructions and the module's.
pub(super) fn verify_body<'a>(
    module: Context<'a>,
    (callee, comp): (CompId, &Computation),
    caller: Option<InstrId>,
    lookup: &'a dyn Fn(InstrId) -> &'a Instruction,
) -> Result<(), Error> {
    let check = Verifier {
        file: module.file,
        computations: module.computations,
        lookup,
        declared: RefCell::default(),
    };
    check.computation(comp, module.scheduled)?;
    match caller {
        Some(caller) => check.signature(caller, (CallRole::Calls, callee), comp),
        None => Ok(()),
    }
}

struct Verifier<'a> {
    file: &'a SourceFile,
    computations: &'a [Computation],
    lookup: &'a dyn Fn(InstrId) -> &'a Instruction,
    /// The results headers declare, by their text: thousands of fusion
    /// bodies return a few hundred shapes.
    declared: RefCell<ShapeCache<'a>>,
}

impl<'a> Verifier<'a> {
    fn name_of(&self, instr: &'a Instruction) -> &'a str {
        instr.name.as_str(&self.file.text)
    }
}

/// Same structure, element types and dimensions; layouts are not compared.
fn compatible(a: &Shape, b: &Shape) -> bool {
    match (a, b) {
        (Shape::Array(x), Shape::Array(y)) => arrays_compatible(x, y),
        (Shape::Tuple(x), Shape::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| compatible(p, q))
        }
        (Shape::Buffer(x), Shape::Buffer(y)) => compatible(x, y),
        _ => false,
    }
}

fn arrays_compatible(a: &ArrayShape, b: &ArrayShape) -> bool {
    a.element == b.element && a.dims == b.dims
}

impl<'a> Verifier<'a> {
    fn instr(&self, id: InstrId) -> &'a Instruction {
        (self.lookup)(id)
    }

    /// The rules that hold within one computation.
    fn computation(&self, comp: &Computation, scheduled: bool) -> Result<(), Error> {
        if scheduled {
            self.defined_before_use(comp)?;
        }
        self.uses_are_acyclic(comp)?;
        for &id in &comp.instructions {
            self.instruction(id)?;
        }
        Ok(())
    }

    fn error(&self, id: InstrId, title: String, label: &str) -> Error {
        let span = self.instr(id).span;
        Error::at(
            self.file,
            span.start as usize..span.end as usize,
            title,
            label,
        )
        .with_note("XLA's HLO verifier rejects this; the file was probably edited or cut")
    }

    /// `entry_computation_layout` declares the entry's parameters and result:
    /// as many parameters, each of the shape its `parameter(N)` line has, and
    /// the ROOT's shape, layouts aside (XLA's verifier,
    /// `VerifyEntryComputationLayout`). The sizes hlomem counts are the lines',
    /// so a header that says otherwise is not a module XLA would run.
    fn entry_layout_matches(
        &self,
        header: &ModuleHeader,
        entry: &Computation,
    ) -> Result<(), Error> {
        let Some(layout) = &header.entry_layout else {
            return Ok(());
        };
        let note = "`entry_computation_layout` in the `HloModule` line says otherwise";
        if layout.parameters.len() != entry.parameters.len() {
            let id = entry.parameters.last().copied().unwrap_or(entry.root);
            return Err(self
                .error(
                    id,
                    format!(
                        "the entry computation has {} parameter(s), but `entry_computation_layout` declares {}",
                        entry.parameters.len(),
                        layout.parameters.len()
                    ),
                    "parameter count differs from the module's header",
                )
                .with_note(note));
        }
        for (number, (declared, &id)) in layout.parameters.iter().zip(&entry.parameters).enumerate()
        {
            let shape = &self.instr(id).shape;
            if !compatible(declared, shape) {
                return Err(self
                    .error(
                        id,
                        format!("parameter {number} is {shape}, but `entry_computation_layout` declares {declared}"),
                        "shape differs from the module's header",
                    )
                    .with_note(note));
            }
        }
        let root = &self.instr(entry.root).shape;
        if !compatible(&layout.result, root) {
            return Err(self
                .error(
                    entry.root,
                    format!(
                        "the entry returns {root}, but `entry_computation_layout` declares {}",
                        layout.result
                    ),
                    "shape differs from the module's header",
                )
                .with_note(note));
        }
        Ok(())
    }

    /// Every `input_output_alias` and `buffer_donor` names an output and a
    /// parameter element that exist (XLA's `HloInputOutputAliasConfig::Verify`).
    fn aliases_exist(&self, header: &ModuleHeader, entry: &Computation) -> Result<(), Error> {
        let result = &self.instr(entry.root).shape;
        let parameter_has = |number: u64, index: &[u64]| {
            usize::try_from(number)
                .ok()
                .and_then(|n| entry.parameters.get(n))
                .is_some_and(|&p| self.instr(p).shape.subshape(index).is_some())
        };
        let bad = header
            .input_output_alias
            .iter()
            .find(|a| {
                result.subshape(&a.output_index).is_none()
                    || !parameter_has(a.parameter, &a.parameter_index)
            })
            .map(|a| {
                (
                    "input_output_alias",
                    format!(
                        "output {:?} in parameter {} at {:?}",
                        a.output_index, a.parameter, a.parameter_index
                    ),
                )
            })
            .or_else(|| {
                header
                    .buffer_donors
                    .iter()
                    .find(|d| !parameter_has(d.parameter, &d.parameter_index))
                    .map(|d| {
                        (
                            "buffer_donor",
                            format!(
                                "parameter {} at {:?} as donated",
                                d.parameter, d.parameter_index
                            ),
                        )
                    })
            });
        let Some((attribute, what)) = bad else {
            return Ok(());
        };
        let text = &self.file.text;
        let header_end = text.find('\n').unwrap_or(text.len());
        let at = text[..header_end].find(attribute).unwrap_or(0);
        Err(Error::at(
            self.file,
            at..at + attribute.len(),
            format!("`{attribute}` names {what}, which the entry computation does not have"),
            "no such output or parameter",
        )
        .with_note("XLA's HLO verifier rejects this; the file was probably edited or cut"))
    }

    /// A computation that calls itself, directly or through others, would
    /// never finish; XLA's call graph must be a DAG.
    fn call_graph_is_acyclic(&self) -> Result<(), Error> {
        // 0: not visited, 1: on the current path, 2: done.
        let mut state = vec![0u8; self.computations.len()];
        for start in 0..self.computations.len() {
            if state[start] != 0 {
                continue;
            }
            // (computation, next instruction, next callee of that instruction)
            let mut stack = vec![(start, 0usize, 0usize)];
            state[start] = 1;
            while let Some(&mut (c, ref mut i, ref mut k)) = stack.last_mut() {
                let instrs = &self.computations[c].instructions;
                let Some(&id) = instrs.get(*i) else {
                    state[c] = 2;
                    stack.pop();
                    continue;
                };
                let Some(&(_, callee)) = self.instr(id).called.get(*k) else {
                    *i += 1;
                    *k = 0;
                    continue;
                };
                *k += 1;
                match state[callee.index()] {
                    0 => {
                        state[callee.index()] = 1;
                        stack.push((callee.index(), 0, 0));
                    }
                    1 => {
                        let name = &self.computations[callee.index()].name;
                        return Err(self.error(
                            id,
                            format!("computation `%{name}` calls itself"),
                            "this call closes a cycle of calls",
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// In a scheduled module the text order is the execution order: every
    /// operand and control predecessor comes before its user.
    fn defined_before_use(&self, comp: &Computation) -> Result<(), Error> {
        let mut defined: rustc_hash::FxHashSet<_> =
            std::collections::HashSet::with_capacity_and_hasher(
                comp.instructions.len(),
                Default::default(),
            );
        for &id in &comp.instructions {
            let instr = self.instr(id);
            let early = instr
                .operands
                .iter()
                .chain(instr.control_predecessors.iter())
                .find(|p| {
                    !defined.contains(*p) && self.instr(**p).computation == instr.computation
                });
            if let Some(&p) = early {
                return Err(self.error(
                    id,
                    format!(
                        "`%{}` uses `%{}`, which the schedule runs later",
                        self.name_of(instr),
                        self.name_of(self.instr(p))
                    ),
                    "used before it is defined in a scheduled module",
                ));
            }
            defined.insert(id);
        }
        Ok(())
    }

    /// Operands and control predecessors form a DAG within a computation.
    fn uses_are_acyclic(&self, comp: &Computation) -> Result<(), Error> {
        let position: rustc_hash::FxHashMap<InstrId, usize> = comp
            .instructions
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i))
            .collect();
        let preds = |id: InstrId| {
            let instr = self.instr(id);
            instr
                .operands
                .iter()
                .chain(instr.control_predecessors.iter())
                .filter_map(|p| position.get(p).copied())
                .collect::<Vec<_>>()
        };
        let mut state = vec![0u8; comp.instructions.len()];
        for start in 0..comp.instructions.len() {
            if state[start] != 0 {
                continue;
            }
            let mut stack = vec![(start, preds(comp.instructions[start]), 0usize)];
            state[start] = 1;
            while let Some((node, node_preds, next)) = stack.last_mut() {
                let Some(&p) = node_preds.get(*next) else {
                    state[*node] = 2;
                    stack.pop();
                    continue;
                };
                *next += 1;
                match state[p] {
                    0 => {
                        state[p] = 1;
                        let p_preds = preds(comp.instructions[p]);
                        stack.push((p, p_preds, 0));
                    }
                    1 => {
                        let id = comp.instructions[*node];
                        let other = &self.name_of(self.instr(comp.instructions[p]));
                        return Err(self.error(
                            id,
                            format!(
                                "`%{}` depends on itself through `%{other}`",
                                self.name_of(self.instr(id))
                            ),
                            "instructions use each other in a cycle",
                        ));
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn instruction(&self, id: InstrId) -> Result<(), Error> {
        let instr = self.instr(id);
        let n = instr.operands.len();
        if let Some(wanted) = arity(&instr.opcode).filter(|a| !a.admits(n)) {
            return Err(self.error(
                id,
                format!(
                    "`{}` takes {wanted} operand(s), `%{}` has {n}",
                    instr.opcode,
                    self.name_of(instr)
                ),
                match wanted {
                    Arity::Exactly(_) => "wrong number of operands",
                    Arity::AtLeast(_) => "too few operands",
                },
            ));
        }
        match instr.opcode {
            Opcode::GetTupleElement => self.get_tuple_element(id),
            Opcode::Tuple => {
                let operand_shapes: Vec<&Shape> = instr
                    .operands
                    .iter()
                    .map(|&o| &*self.instr(o).shape)
                    .collect();
                let matches = instr.shape.is_tuple()
                    && instr.shape.tuple_elements().len() == operand_shapes.len()
                    && instr
                        .shape
                        .tuple_elements()
                        .iter()
                        .zip(operand_shapes)
                        .all(|(e, o)| compatible(e, o));
                if matches {
                    Ok(())
                } else {
                    Err(self.error(
                        id,
                        format!(
                            "the shape of `%{}` is not the tuple of its operands' shapes",
                            self.name_of(instr)
                        ),
                        "shape does not match the operands",
                    ))
                }
            }
            Opcode::Call | Opcode::Fusion | Opcode::While | Opcode::Conditional => {
                self.callee_signatures(id)
            }
            _ => {
                let operands: Vec<&Shape> = instr
                    .operands
                    .iter()
                    .map(|&o| &*self.instr(o).shape)
                    .collect();
                match super::shape_rules::problem(&instr.opcode, &instr.shape, &operands) {
                    Some(problem) => Err(self.error(
                        id,
                        format!("`%{}`: {problem}", self.name_of(instr)),
                        "shape contradicts its operands",
                    )),
                    None => Ok(()),
                }
            }
        }
    }

    fn get_tuple_element(&self, id: InstrId) -> Result<(), Error> {
        let instr = self.instr(id);
        let operand = self.instr(instr.operands[0]);
        let index = instr.tuple_index.unwrap_or(0);
        if !operand.shape.is_tuple() {
            return Err(self.error(
                id,
                format!(
                    "`%{}` reads a tuple element of `%{}`, which is not a tuple",
                    self.name_of(instr),
                    self.name_of(operand)
                ),
                "operand is not a tuple",
            ));
        }
        let elements = operand.shape.tuple_elements();
        let Some(element) = usize::try_from(index).ok().and_then(|i| elements.get(i)) else {
            return Err(self.error(
                id,
                format!(
                    "`%{}` reads element {index} of `%{}`, which has {}",
                    self.name_of(instr),
                    self.name_of(operand),
                    elements.len()
                ),
                "tuple index out of range",
            ));
        };
        if !compatible(element, &instr.shape) {
            return Err(self.error(
                id,
                format!(
                    "`%{}` has shape {}, but element {index} of `%{}` is {element}",
                    self.name_of(instr),
                    instr.shape,
                    self.name_of(operand)
                ),
                "shape is not the tuple element's",
            ));
        }
        Ok(())
    }

    /// The values passed to each called computation have its parameters'
    /// shapes, and what comes back has the caller's.
    fn callee_signatures(&self, id: InstrId) -> Result<(), Error> {
        for &(role, callee) in self.instr(id).called.iter() {
            let comp = &self.computations[callee.index()];
            // A deferred body is checked against its caller when it is read;
            // its header, now.
            if comp.deferred.is_none() {
                self.signature(id, (role, callee), comp)?;
            } else if role == CallRole::Calls {
                self.declared_result(id, comp)?;
            }
        }
        Ok(())
    }

    /// The fusion `id` has the shape that the header of `comp`, a body not
    /// read yet, declares it returns. A header without a signature declares
    /// nothing.
    fn declared_result(&self, id: InstrId, comp: &Computation) -> Result<(), Error> {
        let instr = self.instr(id);
        // The cache keeps slices of the file's text: borrowed for `'a`, not `self`.
        let file: &'a SourceFile = self.file;
        let header = &file.text[comp.span.start as usize..comp.span.end as usize];
        let Some(arrow) = header.rfind("->") else {
            return Ok(());
        };
        let after = &header[arrow + 2..];
        let Some(result) = after.trim_end().strip_suffix('{') else {
            return Ok(());
        };
        let text = result.trim();
        let line = Line {
            offset: comp.span.start as usize + arrow + 2 + (after.len() - after.trim_start().len()),
            text,
        };
        let declared = super::lower::shape_of(file, line, &mut *self.declared.borrow_mut())?;
        if compatible(&declared, &instr.shape) {
            return Ok(());
        }
        Err(self.error(
            id,
            format!(
                "`%{}` has shape {}, but `%{}` returns {declared}",
                self.name_of(instr),
                instr.shape,
                comp.name
            ),
            "shape does not match the called computation's result",
        ))
    }

    /// `id` calls `comp` (computation `callee`) in the role `role`.
    fn signature(
        &self,
        id: InstrId,
        (role, callee): (CallRole, CompId),
        comp: &Computation,
    ) -> Result<(), Error> {
        let instr = self.instr(id);
        {
            // (values passed, result expected; None where the callee's result is not the caller's)
            let (passed, result): (&[InstrId], Option<&Shape>) = match (&instr.opcode, role) {
                (Opcode::Call, CallRole::ToApply | CallRole::Calls)
                | (Opcode::Fusion, CallRole::Calls) => (&instr.operands, Some(&*instr.shape)),
                (Opcode::While, CallRole::Body) => (&instr.operands, Some(&*instr.shape)),
                (Opcode::While, CallRole::Condition) => (&instr.operands, None),
                (Opcode::Conditional, CallRole::Branch) => {
                    let b = instr
                        .called
                        .iter()
                        .filter(|(r, _)| *r == CallRole::Branch)
                        .position(|&(_, c)| c == callee)
                        .unwrap_or(0);
                    let arg = instr.operands.get(b + 1..b + 2).unwrap_or(&[]);
                    (arg, Some(&*instr.shape))
                }
                _ => return Ok(()),
            };
            if comp.parameters.len() != passed.len() {
                return Err(self.error(
                    id,
                    format!(
                        "`%{}` passes {} value(s) to `%{}`, which takes {}",
                        self.name_of(instr),
                        passed.len(),
                        comp.name,
                        comp.parameters.len()
                    ),
                    "operand count does not match the called computation",
                ));
            }
            for (k, (&arg, &param)) in passed.iter().zip(&comp.parameters).enumerate() {
                let (arg, param) = (self.instr(arg), self.instr(param));
                if !compatible(&arg.shape, &param.shape) {
                    return Err(self.error(
                        id,
                        format!(
                            "`%{}` passes {} to parameter {k} of `%{}`, which is {}",
                            self.name_of(instr),
                            arg.shape,
                            comp.name,
                            param.shape
                        ),
                        "operand shape does not match the called computation",
                    ));
                }
            }
            if let Some(result) = result {
                let root = self.instr(comp.root);
                if !compatible(&root.shape, result) {
                    return Err(self.error(
                        id,
                        format!(
                            "`%{}` has shape {result}, but `%{}` returns {}",
                            self.name_of(instr),
                            comp.name,
                            root.shape
                        ),
                        "shape does not match the called computation's result",
                    ));
                }
            }
        }
        Ok(())
    }
}
