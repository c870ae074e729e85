//! HM001 not-donated: an entry output could be written into an entry
//! parameter's buffer (same byte size, the parameter is not read after the
//! output is written), but the parameter is not donated.
//!
//! The bytes are real: the accounting is run again with the parameter aliased
//! to the output (a what-if), and the finding reports the difference in XLA's
//! "Total bytes used". Parameters are grouped by the Python argument they come
//! from, since `donate_argnums` donates a whole argument. A parameter that some
//! instruction reads without being an ancestor of the output's writer is copied
//! first in the what-if, as copy insertion would (`analysis::whatif`).

use serde::Serialize;

use super::{donate_fix, Finding, InstrRef};
use crate::analysis::{self, whatif, MemoryModel};
use crate::hlo::{InstrId, IoAlias, Module, Opcode};
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
    /// `op_name` of the parameter (its JAX path), else its HLO name.
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
    pub fn message(&self) -> String {
        let what = match &self.argument {
            Some(a) => format!("argument `{a}`"),
            None => format!("parameter {}", self.reuses[0].parameter),
        };
        let leaves = match self.reuses.as_slice() {
            [one] => format!("{} ({})", one.shape, human_bytes(one.bytes)),
            many => format!(
                "{} of its arrays ({} in all)",
                many.len(),
                human_bytes(many.iter().map(|r| r.bytes).fold(0u64, u64::saturating_add))
            ),
        };
        format!(
            "{what} is not donated: the outputs could reuse {leaves}; donating saves {}",
            human_bytes(self.saving_bytes)
        )
    }

    pub fn fix(&self) -> String {
        let argument = self.argument.clone().zip(self.argnum);
        donate_fix(self.reuses[0].parameter, argument.as_ref())
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
        .flat_map(|(_, members)| members.iter().map(|c| (parameter(c), c.producer)))
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
                copy_reasons.push((c.parameter, p, reader, c.producer));
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
            module
                .op_name(p)
                .unwrap_or_else(|| module.instr_name(p).to_string())
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
            .parameter(module, first.parameter);
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

/// The pairs HM001 considers, for other reports (`explain --dump`).
pub fn donation_candidates(module: &Module, model: &MemoryModel) -> Vec<DonationCandidate> {
    candidates(module, model)
        .into_iter()
        .map(|c| {
            let p = module.entry().parameters[c.parameter as usize];
            DonationCandidate {
                parameter: c.parameter,
                argument: module
                    .op_name(p)
                    .unwrap_or_else(|| module.instr_name(p).to_string()),
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
        let last_read = model
            .dataflow
            .value_of(p)
            .first()
            .map(|&v| {
                model
                    .dataflow
                    .uses(v)
                    .iter()
                    .filter_map(|(u, _)| model.schedule.time(*u))
                    .max()
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        if last_read <= written {
            out.push(Candidate {
                parameter: number,
                output: index,
                producer,
                bytes: model.target.buffer_size(&instr.shape),
            });
        }
    }
    out
}
