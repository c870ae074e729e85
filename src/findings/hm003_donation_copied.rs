//! HM003 donation-copied: a parameter is aliased to an output, but copy
//! insertion kept a copy, so the donation saves no memory (notes §5.5, §5.6):
//! - the parameter is copied before the output overwrites its buffer, because
//!   other instructions still read the old value after the output is written;
//! - or the output is computed elsewhere and copied into the donated buffer at
//!   the end, because the op that makes it cannot write over its own input
//!   (XLA's CPU backend wraps such an op in a `call` to a `parallel_*`
//!   computation: the op inside is named, with its wrapper).
//!
//! TensorFlow and torch_xla choose which parameters are aliased themselves
//! (the variables, the tensors a step updates in place): there the finding
//! is `info`, and says there is nothing to set.

use rustc_hash::FxHashSet as HashSet;
use serde::Serialize;

use super::{Finding, InstrRef};
use crate::analysis::assign::AllocationKind;
use crate::analysis::dataflow::NodeIndex;
use crate::analysis::{whatif, MemoryModel};
use crate::frontend::FrontendName;
use crate::hlo::{InstrId, IoAlias, Module, Opcode};
use crate::units::human_bytes;
use crate::usage::{scope, ParameterOrigin, Phase};

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
    /// The parameter's name in the HLO (`arg4.1`, `p12.217`).
    pub name: String,
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
        /// Every read in `blocking` is the backward pass's (`transpose(` or
        /// TensorFlow's `gradient_tape/` in its `op_name`, or in the `op_name`s of the ops an XLA-made reader,
        /// such as a layout copy, feeds): see [`Evidence::expected_in_training`].
        #[serde(default)]
        backward_only: bool,
    },
    /// The result is computed into a temporary and copied into the donated
    /// buffer. `inside` is the `call` that wraps the op making it (XLA's CPU
    /// backend runs ops in `call`s to `parallel_*` computations).
    ResultCopiedIn {
        computed_by: InstrRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inside: Option<String>,
        copy: String,
    },
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
    /// (JAX's `transpose(jvp(...))` or TensorFlow's `gradient_tape/` in its
    /// `op_name`: the weight read for the input's gradient) while the
    /// optimizer writes the new value. XLA's copy insertion keeps the old
    /// value alive for such reads; the user's only choice would be not
    /// donating, which keeps a whole second copy. Such a finding is `info`,
    /// and `--fail-on HM003` does not fail on it.
    pub fn expected_in_training(&self) -> bool {
        matches!(
            &self.how,
            Copied::OldValueSaved { blocking, backward_only: true, .. } if !blocking.is_empty()
        )
    }

    /// How the message opens: the parameter, and who aliased it.
    fn subject(&self, frontend: FrontendName) -> String {
        let who = match frontend {
            FrontendName::Tensorflow => ", a resource variable TensorFlow updates in place,",
            FrontendName::PytorchXla => ", a tensor torch_xla updates in place,",
            FrontendName::Jax | FrontendName::Unknown => {
                return format!(
                    "parameter {}{} is donated",
                    self.parameter,
                    super::quoted(&self.argument)
                )
            }
        };
        format!(
            "parameter {} (`{}`){who} shares output {:?}'s buffer",
            self.parameter, self.name, self.output_index
        )
    }

    pub fn message(&self, frontend: FrontendName) -> String {
        let subject = self.subject(frontend);
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
                    "{subject}, but {why}, so XLA copies it first: {} of temporaries, no saving{expected}",
                    human_bytes(self.bytes)
                )
            }
            Copied::ResultOfConditional {
                conditional,
                branches,
                ..
            } => {
                let api = match frontend {
                    FrontendName::Jax => "lax.cond / lax.switch",
                    FrontendName::Tensorflow => "tf.cond / tf.case",
                    FrontendName::PytorchXla => "torch.cond",
                    FrontendName::Unknown => "",
                };
                let what: Vec<String> = [api.to_string(), match branches.as_slice() {
                    [] => String::new(),
                    b => format!("{} branches", b.len()),
                }]
                .into_iter()
                .filter(|w| !w.is_empty())
                .collect();
                let what = if what.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", what.join(", "))
                };
                format!(
                    "{subject}, but its new value comes out of the conditional {}{what}, whose branches write \
                     their result into a {} buffer of its own; XLA then copies it into the parameter's buffer: \
                     no saving",
                    conditional.describe_at(),
                    human_bytes(self.bytes)
                )
            }
            Copied::ResultCopiedIn {
                computed_by,
                inside,
                ..
            } => format!(
                "{subject}, but {}{} cannot write its result over its own input, so the result goes to a {} \
                 temporary and is copied into the parameter's buffer: no saving",
                computed_by.name,
                inside
                    .as_ref()
                    .map(|call| format!(" (inside {call})"))
                    .unwrap_or_default(),
                human_bytes(self.bytes)
            ),
        }
    }

    pub fn fix(&self, frontend: FrontendName) -> String {
        let runtime = match frontend {
            FrontendName::Tensorflow => {
                Some("TensorFlow aliases the resource variables a function updates")
            }
            FrontendName::PytorchXla => {
                Some("torch_xla aliases the tensors a graph updates in place")
            }
            FrontendName::Jax | FrontendName::Unknown => None,
        };
        if let Some(runtime) = runtime {
            let why = if self.expected_in_training() {
                "this copy is what updating a weight in the step whose backward pass reads it costs"
                    .to_string()
            } else {
                match &self.how {
                    Copied::OldValueSaved { .. } => {
                        "XLA keeps this copy because the old value is still read after the update may \
                         have run"
                            .to_string()
                    }
                    Copied::ResultOfConditional { .. } => {
                        "XLA keeps this copy because the new value comes out of a conditional".to_string()
                    }
                    Copied::ResultCopiedIn { computed_by, .. } => format!(
                        "XLA keeps this copy because {} needs an output buffer of its own",
                        computed_by.name
                    ),
                }
            };
            return format!("nothing to set: {runtime} by itself, and {why}");
        }
        if self.expected_in_training() {
            return "nothing to change: this is what donating a training step costs (an optimizer such as \
                    optax updates every weight the backward pass reads); not donating would keep a second \
                    copy of the whole argument instead"
                .to_string();
        }
        if frontend == FrontendName::Unknown {
            return match self.how {
                Copied::OldValueSaved { .. } => {
                    "compute what still needs the old value before the update, or do not donate this parameter"
                }
                Copied::ResultOfConditional { .. } => {
                    "compute both candidates and pick with an elementwise select outside the conditional (a \
                     select can write in place), or do not donate this parameter"
                }
                Copied::ResultCopiedIn { .. } => {
                    "no fix in the donation itself: ops such as transpose, dot or reductions need a separate \
                     output; donate a parameter that an elementwise op updates instead, or do not donate this one"
                }
            }
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
                out.push(format!("copied into the parameter's buffer by {copy}"));
                out
            }
            Copied::ResultCopiedIn {
                computed_by,
                inside,
                copy,
            } => vec![
                format!(
                    "computed by {}{}",
                    computed_by.describe(),
                    inside
                        .as_ref()
                        .map(|call| format!(", inside {call}"))
                        .unwrap_or_default()
                ),
                format!("copied into the parameter's buffer by {copy}"),
            ],
        }
    }
}

/// Whether `reader` reads for the backward pass: its `op_name` is under
/// `transpose(` (JAX's name for the backward pass of a `jvp`) or TensorFlow's
/// `gradient_tape/` ([`scope::phase`]), or it is a
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
            if op
                .as_deref()
                .is_none_or(|op| scope::phase(op) != Phase::Backward)
            {
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

/// The op making a value through XLA's `call` wrappers (the callee's root,
/// through bitcasts), and the outermost `call` it is inside, if any.
fn through_calls(module: &Module, mut id: InstrId) -> (InstrId, Option<InstrId>) {
    let mut outer = None;
    // Bounded: a call's callee is defined above it (no cycles), but be safe.
    for _ in 0..64 {
        let instr = module.instr(id);
        if instr.opcode != Opcode::Call {
            break;
        }
        let Some(&(_, callee)) = instr.called.first() else {
            break;
        };
        outer.get_or_insert(id);
        id = through_bitcasts(module, module.comp(callee).root);
    }
    (id, outer)
}

pub fn check(
    module: &Module,
    model: &MemoryModel,
    origins: &[ParameterOrigin],
    frontend: FrontendName,
) -> Vec<Finding> {
    let argument = |number: u64| origins.get(number as usize).and_then(|o| o.path.clone());
    let name = |number: u64, param: InstrId| {
        origins
            .get(number as usize)
            .map_or_else(|| module.instr_name(param).to_string(), |o| o.name.clone())
    };
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
                        None => {
                            let (op, call) = through_calls(module, source);
                            Copied::ResultCopiedIn {
                                computed_by: InstrRef::of(module, op),
                                inside: call.map(|c| module.instr_name(c).to_string()),
                                copy,
                            }
                        }
                    };
                    let at = match &how {
                        Copied::ResultCopiedIn { .. } => through_calls(module, source).0,
                        _ => source,
                    };
                    let evidence = Evidence {
                        parameter: alias.parameter,
                        argument: argument(alias.parameter),
                        name: name(alias.parameter, param),
                        output_index: alias.output_index.clone(),
                        bytes,
                        how,
                    };
                    let mut f = Finding::new(super::Evidence::DonationCopied(evidence), bytes)
                        .at(module, at)
                        .parameter(origins, alias.parameter);
                    if frontend.runtime_aliases() {
                        f.severity = super::Severity::Info;
                    }
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
            argument: argument(s.alias.parameter),
            name: name(s.alias.parameter, s.param),
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
            .parameter(origins, s.alias.parameter);
        f.output_index = Some(s.alias.output_index.clone());
        if expected || frontend.runtime_aliases() {
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
