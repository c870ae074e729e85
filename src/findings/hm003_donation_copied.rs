//! HM003 donation-copied: a parameter is aliased to an output, but copy
//! insertion kept a copy, so the donation saves no memory (notes §5.5, §5.6):
//! - the parameter is copied before the output overwrites its buffer, because
//!   other instructions still read the old value after the output is written;
//! - or the output is computed elsewhere and copied into the donated buffer at
//!   the end, because the op that makes it cannot write over its own input.

use rustc_hash::FxHashSet as HashSet;
use serde::Serialize;

use super::{Finding, InstrRef};
use crate::analysis::assign::AllocationKind;
use crate::analysis::dataflow::NodeIndex;
use crate::analysis::{whatif, MemoryModel};
use crate::hlo::{InstrId, IoAlias, Module, Opcode};
use crate::units::human_bytes;

/// Bytes of a buffer that lives in the temp block (or any allocation that is not
/// the parameter's or an output's): memory the donation did not save.
fn temp_bytes(model: &MemoryModel, instr: InstrId) -> u64 {
    let Some(&v) = model.dataflow.value_of(instr).first() else {
        return 0;
    };
    let buffer = model.dataflow.values[v.index()].buffer;
    match model.assignment.allocation_of[buffer.index()].map(|a| &model.assignment.allocations[a]) {
        Some(a) if a.kind == AllocationKind::Temp => model.dataflow.buffers[buffer.index()].size,
        _ => 0,
    }
}

/// Instructions that read `instr`'s top-level value.
fn users(model: &MemoryModel, instr: InstrId) -> Vec<InstrId> {
    let Some(&v) = model.dataflow.value_of(instr).first() else {
        return Vec::new();
    };
    let mut out: Vec<InstrId> = model.dataflow.uses(v).iter().map(|(u, _)| *u).collect();
    out.dedup();
    out
}

/// HM003's facts: a donated parameter whose donation saves nothing, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    pub parameter: u64,
    /// The JAX argument path (`op_name`), when the dump has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    pub output_index: Vec<u64>,
    /// Bytes of temporaries the copy takes: what the donation fails to save.
    pub bytes: u64,
    pub how: Copied,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Copied {
    /// The parameter's old value is copied before the output overwrites it.
    OldValueSaved {
        writer: InstrRef,
        copies: Vec<InstrRef>,
        /// Instructions that read the old value, in schedule order.
        readers: Vec<InstrRef>,
        /// Those of `readers` that need not run before the write: the reason
        /// copy insertion keeps the copy.
        blocking: Vec<String>,
        /// Every read in `blocking` is the backward pass's (`transpose(` in
        /// its `op_name`, or in the `op_name`s of the ops an XLA-made reader,
        /// such as a layout copy, feeds): see [`Evidence::expected_in_training`].
        #[serde(default)]
        backward_only: bool,
    },
    /// The result is computed into a temporary and copied into the donated buffer.
    ResultCopiedIn { computed_by: InstrRef, copy: String },
    /// The result comes out of a `conditional` (`lax.cond`, `lax.switch`):
    /// its branches write their results into the conditional's own buffer,
    /// which is then copied into the donated one.
    ResultOfConditional {
        conditional: InstrRef,
        /// Each branch computation, and the op making its result there.
        branches: Vec<Branch>,
        copy: String,
    },
}

/// One branch of a conditional.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Branch {
    pub index: usize,
    pub computation: String,
    pub result: InstrRef,
}

impl Evidence {
    /// The copy is what a donated training step costs, not something the
    /// user's code did: every read that forces it is in the backward pass
    /// (`transpose(jvp(...))` in its `op_name`: the weight read for the
    /// input's gradient) while the optimizer writes the new value. XLA's copy
    /// insertion keeps the old value alive for such reads; the user's only
    /// choice would be not donating, which keeps a whole second copy. Such a
    /// finding is `info`, and `--fail-on HM003` does not fail on it.
    pub fn expected_in_training(&self) -> bool {
        matches!(
            &self.how,
            Copied::OldValueSaved { blocking, backward_only: true, .. } if !blocking.is_empty()
        )
    }

    pub fn message(&self) -> String {
        let argument = super::quoted(&self.argument);
        match &self.how {
            Copied::OldValueSaved {
                writer, blocking, ..
            } => {
                let why = match blocking.first() {
                    Some(r) => format!(
                        "{r} reads its old value and need not run before {} writes the output",
                        writer.name
                    ),
                    None => format!(
                        "its old value is still read when {} writes the output",
                        writer.name
                    ),
                };
                let expected = if self.expected_in_training() {
                    " (expected: the backward pass reads this weight while its update is computed)"
                } else {
                    ""
                };
                format!(
                    "parameter {}{argument} is donated, but {why}, so XLA copies it first: {} of temporaries, no saving{expected}",
                    self.parameter,
                    human_bytes(self.bytes)
                )
            }
            Copied::ResultOfConditional {
                conditional,
                branches,
                ..
            } => format!(
                "parameter {}{argument} is donated, but its new value comes out of the conditional {} \
                 (lax.cond / lax.switch{}), whose branches write their result into a {} buffer of its own; \
                 XLA then copies it into the donated buffer: no saving",
                self.parameter,
                conditional.describe_at(),
                match branches.as_slice() {
                    [] => String::new(),
                    b => format!(", {} branches", b.len()),
                },
                human_bytes(self.bytes)
            ),
            Copied::ResultCopiedIn { computed_by, .. } => format!(
                "parameter {}{argument} is donated, but {} cannot write its result over its own input, so the \
                 result goes to a {} temporary and is copied into the donated buffer: no saving",
                self.parameter,
                computed_by.name,
                human_bytes(self.bytes)
            ),
        }
    }

    pub fn fix(&self) -> String {
        if self.expected_in_training() {
            return "nothing to change: this is what donating a training step costs (an optimizer such as \
                    optax updates every weight the backward pass reads); not donating would keep a second \
                    copy of the whole argument instead"
                .to_string();
        }
        match self.how {
            Copied::OldValueSaved { .. } => {
                "compute what still needs the old value before the update (e.g. take x.sum() before x.at[...].set), \
                 or do not donate this argument"
            }
            Copied::ResultOfConditional { .. } => {
                "compute both candidates and pick with jnp.where / lax.select outside the cond (an elementwise \
                 select can write in place), or move the update of this argument out of the branches, or do \
                 not donate it"
            }
            Copied::ResultCopiedIn { .. } => {
                "no fix in the donation itself: ops such as transpose, dot or reductions need a separate output; \
                 donate an argument that an elementwise op updates instead, or do not donate this one"
            }
        }
        .to_string()
    }

    pub fn details(&self) -> Vec<String> {
        match &self.how {
            Copied::OldValueSaved {
                writer,
                copies,
                readers,
                blocking,
                ..
            } => {
                let mut out = vec![format!(
                    "the output {:?} is written by {}",
                    self.output_index,
                    writer.describe()
                )];
                out.extend(
                    copies
                        .iter()
                        .map(|c| format!("copy of the parameter: {}", c.describe())),
                );
                out.extend(readers.iter().map(|r| {
                    let how = if blocking.contains(&r.name) {
                        "reads the old value, not necessarily before the write"
                    } else {
                        "reads the old value"
                    };
                    format!("{how}: {}", r.describe())
                }));
                out
            }
            Copied::ResultOfConditional {
                conditional,
                branches,
                copy,
            } => {
                let mut out = vec![format!("the conditional: {}", conditional.describe())];
                out.extend(branches.iter().map(|b| {
                    format!(
                        "branch {} ({}) returns {}",
                        b.index,
                        b.computation,
                        b.result.describe()
                    )
                }));
                out.push(format!("copied into the donated buffer by {copy}"));
                out
            }
            Copied::ResultCopiedIn { computed_by, copy } => vec![
                format!("computed by {}", computed_by.describe()),
                format!("copied into the donated buffer by {copy}"),
            ],
        }
    }
}

/// Whether `reader` reads for the backward pass: its `op_name` is under
/// `transpose(` (JAX's name for the backward pass of a `jvp`), or it is a
/// value XLA made (no scope in its `op_name`: a layout copy carries the
/// argument's path, or nothing) whose users, and theirs while XLA made them,
/// all are. A forward read feeds the loss, so it always runs before the
/// optimizer's write and never forces a copy; a layout copy that does force
/// one is read for the input's gradient.
fn read_for_backward(module: &Module, model: &MemoryModel, reader: InstrId) -> bool {
    let scoped = |op: &Option<String>| op.as_deref().is_some_and(|op| op.contains('/'));
    let mut seen: HashSet<InstrId> = HashSet::default();
    let mut frontier = vec![reader];
    let mut read_by_scoped_ops = false;
    while let Some(id) = frontier.pop() {
        if !seen.insert(id) {
            continue;
        }
        let op = module.op_name(id);
        if scoped(&op) {
            if !op.as_deref().is_some_and(|op| op.contains("transpose(")) {
                return false;
            }
            read_by_scoped_ops = true;
        } else {
            let next = users(model, id);
            if next.is_empty() {
                return false; // an XLA-made value read by nothing scoped: unknown
            }
            frontier.extend(next);
        }
    }
    read_by_scoped_ops
}

fn through_bitcasts(module: &Module, mut id: InstrId) -> InstrId {
    while module.instr(id).opcode == Opcode::Bitcast {
        match module.instr(id).operands.first() {
            Some(&op) => id = op,
            None => break,
        }
    }
    id
}

/// The conditional a value comes out of, through `get-tuple-element`s, and
/// the tuple indices taken on the way (outermost first).
fn conditional_of(module: &Module, mut id: InstrId) -> Option<(InstrId, Vec<u64>)> {
    let mut indices = Vec::new();
    loop {
        let instr = module.instr(id);
        match instr.opcode {
            Opcode::Conditional => {
                indices.reverse();
                return Some((id, indices));
            }
            Opcode::GetTupleElement => {
                indices.push(instr.tuple_index?);
                id = *instr.operands.first()?;
            }
            Opcode::Bitcast => id = *instr.operands.first()?,
            _ => return None,
        }
    }
}

/// The op making the value at `index` of a branch's result (through its tuples).
fn branch_result(module: &Module, mut id: InstrId, index: &[u64]) -> InstrId {
    for &i in index {
        let instr = module.instr(id);
        match instr.operands.get(i as usize) {
            Some(&op) if instr.opcode == Opcode::Tuple => id = op,
            _ => break,
        }
    }
    id
}

fn branches(module: &Module, cond: InstrId, path: &[u64]) -> Vec<Branch> {
    module
        .instr(cond)
        .called
        .iter()
        .filter(|(role, _)| *role == crate::hlo::CallRole::Branch)
        .enumerate()
        .map(|(index, &(_, comp))| {
            let c = module.comp(comp);
            Branch {
                index,
                computation: c.name.clone(),
                result: InstrRef::of(module, branch_result(module, c.root, path)),
            }
        })
        .collect()
}

pub fn check(module: &Module, model: &MemoryModel) -> Vec<Finding> {
    let entry = module.entry();
    let root = entry.root;
    // A set: a training step returns thousands of outputs, and each copy of
    // each donated parameter is looked up here.
    let root_operands: HashSet<InstrId> = if module.instr(root).opcode == Opcode::Tuple {
        module.instr(root).operands.iter().copied().collect()
    } else {
        HashSet::from_iter([root])
    };
    let mut findings = Vec::new();
    let mut saved_copies: Vec<SavedCopies> = Vec::new();
    let outputs = NodeIndex::new(&module.instr(root).shape);
    for alias in &module.header.input_output_alias {
        let Some(&param) = entry.parameters.get(alias.parameter as usize) else {
            continue;
        };
        if !alias.parameter_index.is_empty() {
            continue; // tupled parameters: not produced by JAX today
        }
        let Some(node) = outputs.node_of(&alias.output_index) else {
            continue;
        };
        let Some(&out_value) = model.dataflow.value_of(root).get(node) else {
            continue;
        };
        let producer = model.dataflow.values[out_value.index()].instr;
        // The old value saved: copies of the parameter (and copies of those).
        let mut copies: Vec<InstrId> = Vec::new();
        let mut frontier = vec![param];
        while let Some(x) = frontier.pop() {
            for id in users(model, x) {
                if module.instr(id).opcode == Opcode::Copy && !copies.contains(&id) {
                    copies.push(id);
                    frontier.push(id);
                }
            }
        }
        // A copy that is itself an output is HM004's business.
        copies.retain(|c| !root_operands.contains(c));
        let saved: u64 = copies
            .iter()
            .map(|&c| temp_bytes(model, c))
            .fold(0u64, u64::saturating_add);
        if !copies.is_empty() && saved > 0 {
            let mut readers: Vec<InstrId> = copies
                .iter()
                .flat_map(|&c| users(model, c))
                .filter(|&r| module.instr(r).opcode != Opcode::Copy)
                .collect();
            // In the order they run.
            readers.sort_by_key(|&r| (model.schedule.time(r), r));
            readers.dedup();
            saved_copies.push(SavedCopies {
                alias,
                param,
                producer,
                saved,
                copies,
                readers,
                at: findings.len(),
            });
            continue;
        }

        // The result computed elsewhere and copied in at the end.
        let p = module.instr(producer);
        if p.opcode == Opcode::Copy {
            if let Some(&source) = p.operands.first() {
                let source = through_bitcasts(module, source);
                let bytes = temp_bytes(model, source);
                if source != param && bytes > 0 {
                    let copy = module.instr_name(producer).to_string();
                    let how = match conditional_of(module, source) {
                        Some((cond, index)) => Copied::ResultOfConditional {
                            conditional: InstrRef::of(module, cond),
                            branches: branches(module, cond, &index),
                            copy,
                        },
                        None => Copied::ResultCopiedIn {
                            computed_by: InstrRef::of(module, source),
                            copy,
                        },
                    };
                    let evidence = Evidence {
                        parameter: alias.parameter,
                        argument: module.op_name(param),
                        output_index: alias.output_index.clone(),
                        bytes,
                        how,
                    };
                    let mut f = Finding::new(super::Evidence::DonationCopied(evidence), bytes)
                        .at(module, source)
                        .parameter(module, alias.parameter);
                    f.output_index = Some(alias.output_index.clone());
                    findings.push(f);
                }
            }
        }
    }
    // The reads that force each copy: copy insertion decides before the
    // schedule exists, so a read that is not an ancestor of the write may
    // come after it, even if XLA's schedule then runs it first. Asked of all
    // donations at once (one search of the program).
    let asks: Vec<(&[InstrId], InstrId)> = saved_copies
        .iter()
        .map(|s| (s.readers.as_slice(), s.producer))
        .collect();
    let blocking = whatif::not_ordered_before_each(module, &asks);
    let backward = |reads: &[InstrId]| {
        !reads.is_empty() && reads.iter().all(|&r| read_for_backward(module, model, r))
    };
    // In the donations' order among the other findings.
    for (s, blocking) in saved_copies.iter().zip(blocking).rev() {
        let evidence = Evidence {
            parameter: s.alias.parameter,
            argument: module.op_name(s.param),
            output_index: s.alias.output_index.clone(),
            bytes: s.saved,
            how: Copied::OldValueSaved {
                writer: InstrRef::of(module, s.producer),
                copies: s.copies.iter().map(|&c| InstrRef::of(module, c)).collect(),
                readers: s.readers.iter().map(|&r| InstrRef::of(module, r)).collect(),
                blocking: blocking
                    .iter()
                    .map(|&r| module.instr_name(r).to_string())
                    .collect(),
                backward_only: backward(&blocking),
            },
        };
        let expected = evidence.expected_in_training();
        let mut f = Finding::new(super::Evidence::DonationCopied(evidence), s.saved)
            .at(module, s.copies[0])
            .parameter(module, s.alias.parameter);
        f.output_index = Some(s.alias.output_index.clone());
        if expected {
            // Reported, but not a gate's failure: see `expected_in_training`.
            f.severity = super::Severity::Info;
        }
        findings.insert(s.at, f);
    }
    findings
}

/// A donation whose old value is saved by copies, waiting for the question
/// of which reads force them.
struct SavedCopies<'m> {
    alias: &'m IoAlias,
    param: InstrId,
    producer: InstrId,
    saved: u64,
    copies: Vec<InstrId>,
    /// In the order they run.
    readers: Vec<InstrId>,
    /// Where its finding goes among the others.
    at: usize,
}
