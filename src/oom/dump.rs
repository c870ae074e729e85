//! `explain --dump DIR`: finds the module of a dump that the message is about
//! and links the message's buffers to its instructions, so the explanation can
//! name arguments, source lines and what could have been donated.

use serde::Serialize;
use std::collections::HashSet;

use super::model::{Amount, OomMessage, PeakBuffer};
use crate::analysis::MemoryModel;
use crate::hlo::{InstrId, Module, Opcode, Shape};

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DumpLinks {
    pub module: String,
    pub file: String,
    /// Which front-end made the module, from its text: what the advice's
    /// words follow when the log names no framework, or when the module is the
    /// message's program.
    pub frontend: crate::frontend::Frontend,
    /// hlomem's accounting of that module (XLA's numbers, per issue 3).
    pub memory: crate::analysis::Totals,
    pub buffers: Vec<LinkedBuffer>,
    pub donation_candidates: Vec<crate::findings::DonationCandidate>,
    /// An op name of the module that is a backward pass's: JAX's autodiff
    /// (`transpose(`, `jvp(`), TensorFlow's `gradient_tape/`, PyTorch's
    /// `aten__..._backward` (see [`super::situation::is_autodiff`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_evidence: Option<String>,
    /// An op or instruction name of the module that shows rematerialization
    /// (`checkpoint`, `remat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remat_evidence: Option<String>,
    /// How many instructions carry an op name: none of autodiff's among
    /// many is evidence the program does not train.
    #[serde(default)]
    pub op_names: u64,
    /// Whether the module is the program of the message, as far as can be told.
    pub checks: Vec<DumpCheck>,
}

/// What comparing the message with the dump's module found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DumpCheck {
    /// A buffer of the message whose shape no instruction of the module has.
    BufferNotInModule { number: u64, shape: String },
    /// None of the message's buffers is in the module: another program.
    NoBufferInModule { count: usize },
    /// A buffer found by its shape, but the message gives another size.
    SizeDiffers {
        number: u64,
        message_bytes: u64,
        module_bytes: u64,
    },
    /// A stat of the message that the module's accounting does not reproduce.
    StatDiffers {
        stat: String,
        message_bytes: u64,
        module_bytes: u64,
    },
    /// The module already donates these parameters (`input_output_alias`):
    /// donating them again saves nothing. `of` is how many the entry has.
    AlreadyDonates { parameters: Vec<u64>, of: u64 },
}

impl DumpLinks {
    /// Whether the module is, as far as can be told, the program of the
    /// message (its buffers are there; totals may differ when one of the two
    /// donates): advice uses the dump only then.
    pub fn matches(&self) -> bool {
        !self
            .checks
            .iter()
            .any(|c| matches!(c, DumpCheck::NoBufferInModule { .. }))
    }
}

impl DumpCheck {
    pub fn message(&self) -> String {
        let h = crate::units::human_bytes;
        match self {
            DumpCheck::BufferNotInModule { number, shape } => format!(
                "buffer {number} ({shape}) is not in this module: the dump may be of another program, or another version of it"
            ),
            DumpCheck::NoBufferInModule { count } => format!(
                "none of the message's {count} buffers is in this module: the dump is of another program (or of \
                 other shapes); what follows about it does not describe the failure"
            ),
            DumpCheck::SizeDiffers {
                number,
                message_bytes,
                module_bytes,
            } => format!(
                "buffer {number} is {} in the message but {} in the module",
                h(*message_bytes),
                h(*module_bytes)
            ),
            DumpCheck::StatDiffers {
                stat,
                message_bytes,
                module_bytes,
            } => format!(
                "the message's {stat} is {} but this module's is {}: the dump may be of another program, or of \
                 other shapes",
                h(*message_bytes),
                h(*module_bytes)
            ),
            DumpCheck::AlreadyDonates { parameters, of } => {
                let them = if parameters.len() == 1 { "it" } else { "them" };
                format!(
                    "this module already donates {}: donating {them} again saves nothing, the saving is already in \
                     its numbers",
                    parameter_ranges(parameters, *of)
                )
            }
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LinkedBuffer {
    /// The message's buffer number.
    pub number: u64,
    pub instruction: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<u64>,
    /// The JAX argument (`op_name` of the parameter), or the op's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
}

/// A shape as the messages print it: no layout.
fn plain(shape: &Shape) -> String {
    match shape {
        Shape::Array(a) => {
            let mut a = a.clone();
            a.layout = None;
            a.to_string()
        }
        other => other.to_string(),
    }
}

/// How far a module's numbers are from the message's (relative, summed).
fn number_distance(msg: &OomMessage, model: &MemoryModel) -> f64 {
    let t = &model.totals;
    let pairs = [
        (msg.stats.parameter, t.argument_bytes),
        (msg.stats.maybe_live_out, t.output_bytes),
        (msg.stats.preallocated_temp, t.temp_bytes),
        (msg.stats.total, t.device_bytes),
        (msg.requested, t.temp_bytes.max(t.output_bytes)),
    ];
    let mut d = 0.0;
    for (theirs, ours) in pairs {
        if let Some(Amount { bytes, .. }) = theirs {
            let scale = bytes.max(ours).max(1) as f64;
            d += (bytes as f64 - ours as f64).abs() / scale;
        }
    }
    d
}

/// How far a module is from what the message describes: the sum of the
/// relative differences of the numbers both give, plus one per peak buffer
/// whose shape the module lacks. The pipeline links the message to the
/// module of a dump folder with the smallest distance.
pub fn distance(msg: &OomMessage, module: &Module, model: &MemoryModel) -> f64 {
    number_distance(msg, model) + shape_mismatches(msg, &plain_shapes(module)) as f64
}

/// Links the message's buffers to the instructions, arguments and source
/// lines of `module`, the one it is about.
pub fn links(msg: &OomMessage, module: &Module, model: &MemoryModel) -> DumpLinks {
    let shapes = plain_shapes(module);
    let mut used = Vec::new();
    let mut checks = Vec::new();
    let mut buffers = Vec::new();
    for b in &msg.peak_buffers {
        match link_buffer(module, &shapes, b, &mut used) {
            Some((linked, id)) => {
                // TPU sizes are tiled and padded; only GPU sizes are the shape's.
                let module_bytes = module.instr(id).shape.byte_size();
                if let Some(size) = b.size.filter(|_| !msg.format.is_tpu()) {
                    let theirs = Amount::exact(module_bytes);
                    if !crate::oom::explain::within_rounding(size, theirs) {
                        checks.push(DumpCheck::SizeDiffers {
                            number: b.number,
                            message_bytes: size.bytes,
                            module_bytes,
                        });
                    }
                }
                buffers.push(linked);
            }
            None => {
                if let Some(shape) = &b.shape {
                    checks.push(DumpCheck::BufferNotInModule {
                        number: b.number,
                        shape: shape.clone(),
                    });
                }
            }
        }
    }
    let missing = checks
        .iter()
        .filter(|c| matches!(c, DumpCheck::BufferNotInModule { .. }))
        .count();
    if missing >= 2 && buffers.is_empty() {
        checks.retain(|c| !matches!(c, DumpCheck::BufferNotInModule { .. }));
        checks.push(DumpCheck::NoBufferInModule { count: missing });
    }
    for (stat, theirs, ours) in [
        (
            "total allocation",
            msg.stats.total,
            model.totals.device_bytes,
        ),
        (
            "parameter allocation",
            msg.stats.parameter,
            model.totals.argument_bytes,
        ),
    ] {
        if let Some(theirs) = theirs {
            if !crate::oom::explain::within_rounding(theirs, Amount::exact(ours)) {
                checks.push(DumpCheck::StatDiffers {
                    stat: stat.to_string(),
                    message_bytes: theirs.bytes,
                    module_bytes: ours,
                });
            }
        }
    }
    let mut donated: Vec<u64> = module
        .header
        .input_output_alias
        .iter()
        .map(|a| a.parameter)
        .collect();
    donated.sort_unstable();
    donated.dedup();
    if !donated.is_empty() {
        checks.push(DumpCheck::AlreadyDonates {
            parameters: donated,
            of: module.entry().parameters.len() as u64,
        });
    }
    let op_names = || (0..module.instr_count()).filter_map(|i| module.op_name(InstrId::arena(i)));
    let training_evidence = op_names().find(|o| super::situation::is_autodiff(o));
    let remat_evidence = op_names()
        .find(|o| o.contains("checkpoint") || o.contains("remat"))
        .or_else(|| {
            module
                .instrs()
                .map(|(id, _)| module.instr_name(id))
                .find(|name| name.contains(".remat"))
                .map(str::to_string)
        });
    let parameter_op_names: Vec<Option<String>> = module
        .entry()
        .parameters
        .iter()
        .map(|&p| module.op_name(p))
        .collect();
    DumpLinks {
        module: module.name.clone(),
        file: module.path().display().to_string(),
        frontend: crate::frontend::Frontend::detect(module, &parameter_op_names),
        memory: model.totals.clone(),
        buffers,
        donation_candidates: crate::findings::donation_candidates(module, model),
        training_evidence,
        remat_evidence,
        op_names: op_names().count() as u64,
        checks,
    }
}

/// Parameter numbers as ranges, so that 589 of them read as one phrase:
/// "all 589 parameters", "parameters 0–587 and 589", "parameter 3".
fn parameter_ranges(numbers: &[u64], of: u64) -> String {
    if numbers.len() > 1 && numbers.len() as u64 == of {
        return format!("all {of} parameters");
    }
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &n in numbers {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => runs.push((n, n)),
        }
    }
    let parts: Vec<String> = runs
        .iter()
        .map(|&(a, b)| match b - a {
            0 => a.to_string(),
            1 => format!("{a}, {b}"),
            _ => format!("{a}\u{2013}{b}"),
        })
        .collect();
    let list = match parts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    let s = if numbers.len() == 1 { "" } else { "s" };
    format!("parameter{s} {list}")
}

/// Every instruction's shape as the messages print it, indexed by `InstrId`,
/// so each is formatted once rather than once per message buffer.
fn plain_shapes(module: &Module) -> Vec<String> {
    module.instrs().map(|(_, i)| plain(&i.shape)).collect()
}

/// Message buffers whose shape appears nowhere in the module.
fn shape_mismatches(msg: &OomMessage, shapes: &[String]) -> usize {
    let known: HashSet<&str> = shapes.iter().map(String::as_str).collect();
    msg.peak_buffers
        .iter()
        .filter_map(|b| b.shape.as_deref())
        .filter(|s| !known.contains(s))
        .count()
}

/// Drops the `jit(main)/` levels older JAX put in op names, for comparison.
fn normalize_op_name(name: &str) -> String {
    name.split('/')
        .filter(|part| *part != "jit(main)")
        .collect::<Vec<_>>()
        .join("/")
}

fn link_buffer(
    module: &Module,
    shapes: &[String],
    b: &PeakBuffer,
    used: &mut Vec<InstrId>,
) -> Option<(LinkedBuffer, InstrId)> {
    let shape = b.shape.as_deref()?;
    let entry = module.entry();
    let found = if b.kind.as_deref() == Some("parameter") {
        entry
            .parameters
            .iter()
            .copied()
            .find(|p| shapes[p.index()] == shape && !used.contains(p))
    } else {
        let wanted = b.op_name.as_deref().map(normalize_op_name);
        let candidates: Vec<InstrId> = entry
            .instructions
            .iter()
            .copied()
            .filter(|&i| {
                module.instr(i).opcode != Opcode::Parameter
                    && shapes[i.index()] == shape
                    && !used.contains(&i)
            })
            .collect();
        candidates
            .iter()
            .copied()
            .find(|&i| {
                wanted.is_some() && module.op_name(i).map(|o| normalize_op_name(&o)) == wanted
            })
            .or_else(|| {
                candidates
                    .iter()
                    .copied()
                    .find(|&i| b.label.as_deref() == Some(module.instr(i).opcode.as_str()))
            })
            .or_else(|| candidates.first().copied())
    }?;
    used.push(found);
    let location = module.source_location(found);
    let linked = LinkedBuffer {
        number: b.number,
        instruction: module.instr_name(found).to_string(),
        parameter: module.instr(found).parameter_number,
        op_name: module.op_name(found),
        source: location.as_ref().map(|l| l.to_string()),
        function: location.and_then(|l| l.function.as_deref().map(String::from)),
    };
    Some((linked, found))
}

#[cfg(test)]
mod tests {
    use super::parameter_ranges;

    #[test]
    fn parameters_read_as_ranges() {
        let all: Vec<u64> = (0..589).collect();
        assert_eq!(parameter_ranges(&all, 589), "all 589 parameters");
        let mut most: Vec<u64> = (0..588).collect();
        most.push(589);
        assert_eq!(
            parameter_ranges(&most, 590),
            "parameters 0\u{2013}587 and 589"
        );
        assert_eq!(parameter_ranges(&[3], 10), "parameter 3");
        assert_eq!(
            parameter_ranges(&[1, 2, 5, 7, 8, 9], 10),
            "parameters 1, 2, 5 and 7\u{2013}9"
        );
    }
}
