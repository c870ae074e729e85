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
    /// hlomem's accounting of that module (XLA's numbers, per issue 3).
    pub memory: crate::analysis::Totals,
    pub buffers: Vec<LinkedBuffer>,
    pub donation_candidates: Vec<crate::findings::DonationCandidate>,
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
    let buffers = msg
        .peak_buffers
        .iter()
        .filter_map(|b| link_buffer(module, &shapes, b, &mut used))
        .collect();
    DumpLinks {
        module: module.name.clone(),
        file: module.path.display().to_string(),
        memory: model.totals.clone(),
        buffers,
        donation_candidates: crate::findings::donation_candidates(module, model),
    }
}

/// Every instruction's shape as the messages print it, indexed by `InstrId`,
/// so each is formatted once rather than once per message buffer.
fn plain_shapes(module: &Module) -> Vec<String> {
    module
        .instructions
        .iter()
        .map(|i| plain(&i.shape))
        .collect()
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
) -> Option<LinkedBuffer> {
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
    Some(LinkedBuffer {
        number: b.number,
        instruction: module.instr(found).name.clone(),
        parameter: module.instr(found).parameter_number,
        op_name: module.op_name(found),
        source: location.as_ref().map(|l| l.to_string()),
        function: location.and_then(|l| l.function),
    })
}
