//! HM001 not-donated: an entry output could be written into an entry
//! parameter's buffer (same byte size, the parameter is not read after the
//! output is written), but the parameter is not donated.
//!
//! "Read after" is copy insertion's question (`HloOrdering::UsesBeforeValueDefinition`):
//! a `call`'s read of its operand comes before everything defined inside the
//! computation it calls, so an elementwise op that XLA's CPU backend wraps
//! in a `call` (`parallel_add`) may write over the operand it reads.
//!
//! The bytes are real: the accounting is run again with the parameter aliased
//! to the output (a what-if), and the finding reports the difference in XLA's
//! "Total bytes used". Parameters are grouped by the Python argument they come
//! from, since `donate_argnums` donates a whole argument. A parameter that some
//! instruction reads without being an ancestor of the output's writer is copied
//! first in the what-if, as copy insertion would (`analysis::whatif`).

use serde::Serialize;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::{donate_fix, Finding, InstrRef};
use crate::analysis::{self, whatif, MemoryModel};
use crate::frontend::FrontendName;
use crate::hlo::{CompId, InstrId, IoAlias, Module, Opcode};
use crate::units::human_bytes;
use crate::usage::ParameterOrigin;

/// HM001's facts: one Python argument (or parameter) whose arrays outputs
/// could reuse, and what donating it saves.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    /// The JAX argument (`params`), when the dump names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// Its position among the jitted function's arguments (`donate_argnums`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argnum: Option<usize>,
    /// Each of its arrays an output could reuse.
    pub reuses: Vec<Reuse>,
    /// Parameters XLA would copy before overwriting them, even when donated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copied_first: Vec<CopiedFirst>,
    /// "Total bytes used" minus the same with the donation (a what-if run).
    pub saving_bytes: u64,
}

/// A parameter's buffer an output could be written into.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Reuse {
    pub parameter: u64,
    /// The parameter's argument path (JAX), else its HLO name.
    pub parameter_name: String,
    pub shape: String,
    pub bytes: u64,
    pub output_index: Vec<u64>,
    pub writer: InstrRef,
}

/// A parameter copy insertion would keep: `reader` reads it and need not run
/// before `writer` overwrites it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CopiedFirst {
    pub parameter: u64,
    pub parameter_name: String,
    pub bytes: u64,
    pub reader: InstrRef,
    pub writer: String,
}

impl Evidence {
    pub fn message(&self, frontend: FrontendName) -> String {
        let first = &self.reuses[0];
        let what = match &self.argument {
            Some(a) => format!("argument `{a}`"),
            None if frontend.names_arguments() => format!("parameter {}", first.parameter),
            None => format!("parameter {} (`{}`)", first.parameter, first.parameter_name),
        };
        let leaves = match self.reuses.as_slice() {
            [one] => format!("{} ({})", one.shape, human_bytes(one.bytes)),
            many => format!(
                "{} of its arrays ({} in all)",
                many.len(),
                human_bytes(many.iter().map(|r| r.bytes).fold(0u64, u64::saturating_add))
            ),
        };
        let (not, saves) = match frontend {
            // TensorFlow has no donation: it aliases the variables it updates.
            FrontendName::Tensorflow => ("is not aliased to an output", "reusing its buffer saves"),
            _ => ("is not donated", "donating saves"),
        };
        format!(
            "{what} {not}: the outputs could reuse {leaves}; {saves} {}",
            human_bytes(self.saving_bytes)
        )
    }

    pub fn fix(&self, frontend: FrontendName) -> String {
        let argument = self.argument.clone().zip(self.argnum);
        let first = &self.reuses[0];
        donate_fix(
            frontend,
            first.parameter,
            &first.parameter_name,
            argument.as_ref(),
        )
    }

    pub fn details(&self) -> Vec<String> {
        let reuses = self.reuses.iter().map(|r| {
            format!(
                "parameter {} ({}) {} → output {:?}, written by {}",
                r.parameter,
                r.parameter_name,
                r.shape,
                r.output_index,
                r.writer.describe_at()
            )
        });
        let copies = self.copied_first.iter().map(|c| {
            format!(
                "XLA would copy parameter {} ({}) first, into a {} temporary: {} reads it{} and need not run \
                 before {} overwrites it",
                c.parameter,
                c.parameter_name,
                human_bytes(c.bytes),
                c.reader.name,
                c.reader
                    .source
                    .as_ref()
                    .map(|l| format!(" at {}", crate::usage::source::short(l)))
                    .unwrap_or_default(),
                c.writer,
            )
        });
        reuses.chain(copies).collect()
    }
}

struct Candidate {
    parameter: u64,
    output: Vec<u64>,
    producer: InstrId,
    /// The producer, or the instruction of the entry that calls the
    /// computation it is in (a CPU `call` wrapper): what the entry's other
    /// readers of the parameter are ordered against.
    site: InstrId,
    bytes: u64,
}

pub fn check(module: &Module, model: &MemoryModel, origins: &[ParameterOrigin]) -> Vec<Finding> {
    let candidates = candidates(module, model);
    // One what-if per Python argument (or per parameter without metadata).
    let mut groups: Vec<(String, Vec<Candidate>)> = Vec::new();
    for c in candidates {
        let key = origins
            .get(c.parameter as usize)
            .and_then(|o| o.argument.clone())
            .map_or_else(|| format!("#{}", c.parameter), |(name, _)| name);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(c),
            None => groups.push((key, vec![c])),
        }
    }
    groups.sort_by_key(|(_, members)| {
        std::cmp::Reverse(
            members
                .iter()
                .map(|c| c.bytes)
                .fold(0u64, u64::saturating_add),
        )
    });

    // Which parameters XLA would copy, asked of all candidates at once.
    let parameter = |c: &Candidate| module.entry().parameters[c.parameter as usize];
    let asks: Vec<(InstrId, InstrId)> = groups
        .iter()
        .flat_map(|(_, members)| members.iter().map(|c| (parameter(c), c.site)))
        .collect();
    let mut copy_readers = whatif::copies_needed(module, &asks).into_iter();
    let mut aliases = module.header.input_output_alias.clone();
    // Parameters XLA would copy before donating them (see `analysis::whatif`).
    let mut copied: Vec<InstrId> = Vec::new();
    let mut total = model.totals.total_bytes;
    let mut findings = Vec::new();
    for (_, members) in groups {
        let before = (aliases.len(), copied.len());
        aliases.extend(members.iter().map(|c| IoAlias {
            output_index: c.output.clone(),
            parameter: c.parameter,
            parameter_index: Vec::new(),
            must_alias: false,
        }));
        let mut copy_reasons = Vec::new();
        for c in &members {
            let p = parameter(c);
            let reader = copy_readers.next().expect("one answer per candidate");
            if let Some(reader) = reader {
                copied.push(p);
                copy_reasons.push((c.parameter, p, reader, c.site));
            }
        }
        let donated = whatif::with_parameter_copies(module, &copied);
        let after = analysis::total_bytes_with_aliases(&donated, &model.target, &aliases);
        if after >= total {
            // XLA already packs temporaries into these outputs, or the copies
            // it would keep cost as much: donating saves nothing.
            aliases.truncate(before.0);
            copied.truncate(before.1);
            continue;
        }
        let saving = total - after;
        total = after;
        let first = &members[0];
        let parameter_name = |p: InstrId| {
            let number = module.instr(p).parameter_number.unwrap_or(0) as usize;
            origins.get(number).map_or_else(
                || module.instr_name(p).to_string(),
                |o| o.label().to_string(),
            )
        };
        let named = origins
            .get(first.parameter as usize)
            .and_then(|o| o.argument.clone());
        let evidence = Evidence {
            argument: named.as_ref().map(|(name, _)| name.clone()),
            argnum: named.map(|(_, index)| index),
            reuses: members
                .iter()
                .map(|c| {
                    let p = module.entry().parameters[c.parameter as usize];
                    Reuse {
                        parameter: c.parameter,
                        parameter_name: parameter_name(p),
                        shape: module.instr(p).shape.to_string(),
                        bytes: c.bytes,
                        output_index: c.output.clone(),
                        writer: InstrRef::of(module, c.producer),
                    }
                })
                .collect(),
            copied_first: copy_reasons
                .into_iter()
                .map(|(number, p, reader, writer)| CopiedFirst {
                    parameter: number,
                    parameter_name: parameter_name(p),
                    bytes: model.target.total_size(&module.instr(p).shape),
                    reader: InstrRef::of(module, reader),
                    writer: module.instr_name(writer).to_string(),
                })
                .collect(),
            saving_bytes: saving,
        };
        let mut finding = Finding::new(super::Evidence::NotDonated(evidence), saving)
            .at(module, first.producer)
            .parameter(origins, first.parameter);
        finding.output_index = Some(first.output.clone());
        findings.push(finding);
    }
    findings
}

/// An output that could live in an input's buffer, but the input is not donated.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct DonationCandidate {
    pub parameter: u64,
    pub argument: String,
    pub output: String,
    pub shape: String,
    pub bytes: u64,
}

/// The pairs HM001 considers, for other reports (`explain --dump`). Each
/// parameter is named by its argument path (JAX) or its HLO name
/// (TensorFlow's and PyTorch/XLA's parameters have no path).
pub fn donation_candidates(module: &Module, model: &MemoryModel) -> Vec<DonationCandidate> {
    let candidates = candidates(module, model);
    if candidates.is_empty() {
        return Vec::new();
    }
    let read = crate::usage::arguments::read_parameters(module);
    let op_names: Vec<Option<String>> = read.iter().map(|(op_name, _)| op_name.clone()).collect();
    let frontend = crate::frontend::Frontend::detect(module, &op_names).name;
    let origins = crate::usage::arguments::parameter_origins(module, read, frontend);
    candidates
        .into_iter()
        .map(|c| {
            let p = module.entry().parameters[c.parameter as usize];
            DonationCandidate {
                parameter: c.parameter,
                argument: origins.get(c.parameter as usize).map_or_else(
                    || module.instr_name(p).to_string(),
                    |o| o.label().to_string(),
                ),
                output: if c.output.is_empty() {
                    "result".into()
                } else {
                    format!("result {:?}", c.output)
                },
                shape: module.instr(p).shape.to_string(),
                bytes: c.bytes,
            }
        })
        .collect()
}

/// Output leaves and parameters that could share a buffer, paired the way JAX
/// pairs donated arguments (`_set_up_aliases`): each parameter, in order, with
/// the first output of the same shape not yet taken. A pair is kept only when
/// the parameter is not read after the output is written; otherwise XLA would
/// have to copy it (HM003) and donating it would save nothing.
fn candidates(module: &Module, model: &MemoryModel) -> Vec<Candidate> {
    let entry = module.entry();
    let root = module.instr(entry.root);
    let header = &module.header;
    // Sets, not scans: a training step donates thousands of parameters.
    let unavailable: std::collections::HashSet<u64> = header
        .input_output_alias
        .iter()
        .map(|a| a.parameter)
        .chain(header.buffer_donors.iter().map(|d| d.parameter))
        .collect();
    let aliased_outputs: std::collections::HashSet<&[u64]> = header
        .input_output_alias
        .iter()
        .map(|a| a.output_index.as_slice())
        .collect();
    // Outputs that could receive a parameter: (index, shape, producer, write time).
    // Leaves with their pre-order node numbers, in one walk of the shape.
    let mut outputs: Vec<(Vec<u64>, &crate::hlo::Shape, InstrId, u32)> = root
        .shape
        .nodes()
        .into_iter()
        .enumerate()
        .filter(|(_, (index, shape))| {
            !shape.is_tuple()
                && shape.byte_size() > 0
                && !aliased_outputs.contains(index.as_slice())
        })
        .filter_map(|(node, (index, shape))| {
            let value = *model.dataflow.value_of(entry.root).get(node)?;
            let producer = model.dataflow.values[value.index()].instr;
            if matches!(
                module.instr(producer).opcode,
                Opcode::Parameter | Opcode::Constant
            ) {
                return None;
            }
            Some((index, shape, producer, model.schedule.time(producer)?))
        })
        .collect();
    let mut nested = NestedIn::default();
    let mut out = Vec::new();
    for &p in &entry.parameters {
        let instr = module.instr(p);
        let Some(number) = instr.parameter_number else {
            continue;
        };
        if instr.shape.is_tuple() || unavailable.contains(&number) {
            continue;
        }
        let Some(i) = outputs
            .iter()
            .position(|(_, shape, _, _)| **shape == *instr.shape)
        else {
            continue;
        };
        let (index, _, producer, written) = outputs.remove(i);
        let producer_comp = module.instr(producer).computation;
        let enclosing = nested.enclosing(module, producer_comp);
        let last_read = model
            .dataflow
            .value_of(p)
            .first()
            .map(|&v| {
                model
                    .dataflow
                    .uses(v)
                    .iter()
                    // A call's read comes before what its callee defines.
                    .filter(|(u, _)| {
                        module.instr(*u).opcode != Opcode::Call || !enclosing.contains(u)
                    })
                    .filter_map(|(u, _)| model.schedule.time(*u))
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        if last_read <= written {
            let site = if producer_comp == module.entry {
                producer
            } else {
                enclosing
                    .iter()
                    .copied()
                    .filter(|&i| module.instr(i).computation == module.entry)
                    .min()
                    .unwrap_or(producer)
            };
            out.push(Candidate {
                parameter: number,
                output: index,
                producer,
                site,
                bytes: model.target.buffer_size(&instr.shape),
            });
        }
    }
    out
}

/// The instructions that call each computation (not through fusions, whose
/// bodies define no values), and for a computation the instructions that
/// call it directly or through others: XLA's
/// `CallGraph::InstructionIsNestedIn`, asked upward so that 20,000 nested
/// calls cost one walk per producer, not one per call.
#[derive(Default)]
struct NestedIn {
    callers: Option<HashMap<CompId, Vec<InstrId>>>,
    enclosing: HashMap<CompId, HashSet<InstrId>>,
}

impl NestedIn {
    /// The instructions whose called computations hold `comp`, however deep.
    fn enclosing(&mut self, module: &Module, comp: CompId) -> &HashSet<InstrId> {
        let callers = self.callers.get_or_insert_with(|| {
            let mut callers: HashMap<CompId, Vec<InstrId>> = HashMap::default();
            for (id, instr) in module.instrs() {
                if instr.opcode != Opcode::Fusion {
                    for &(_, c) in instr.called.iter() {
                        callers.entry(c).or_default().push(id);
                    }
                }
            }
            callers
        });
        self.enclosing.entry(comp).or_insert_with(|| {
            let mut found: HashSet<InstrId> = HashSet::default();
            let mut seen: HashSet<CompId> = HashSet::default();
            let mut todo = vec![comp];
            while let Some(c) = todo.pop() {
                if !seen.insert(c) {
                    continue;
                }
                for &call in callers.get(&c).into_iter().flatten() {
                    if found.insert(call) {
                        todo.push(module.instr(call).computation);
                    }
                }
            }
            found
        })
    }
}
