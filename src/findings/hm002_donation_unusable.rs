//! HM002 donation-unusable: a parameter was donated, but XLA found no output to
//! put in its buffer. JAX passes such donations as `buffer_donor` and XLA pairs
//! donors with outputs of the same byte size; a donor still listed in the
//! optimized module was not paired, silently (notes §5.2, §5.6).

use super::Finding;
use crate::analysis::MemoryModel;
use crate::hlo::Module;
use crate::units::human_bytes;

pub fn check(module: &Module, model: &MemoryModel) -> Vec<Finding> {
    let entry = module.entry();
    let root = &module.instr(entry.root).shape;
    let outputs = root.leaves();
    let mut findings = Vec::new();
    for donor in &module.header.buffer_donors {
        let Some(&p) = entry.parameters.get(donor.parameter as usize) else {
            continue;
        };
        let Some(shape) = module.instr(p).shape.subshape(&donor.parameter_index) else {
            continue;
        };
        let bytes = model.target.buffer_size(shape);
        let unused = model.dataflow.value_of[p.index()]
            .first()
            .is_some_and(|v| model.dataflow.values[v.index()].uses.is_empty());
        let same_size: Vec<String> = outputs
            .iter()
            .filter(|(_, s)| model.target.buffer_size(s) == bytes)
            .map(|(i, s)| format!("{i:?} {s}"))
            .collect();
        let listing: Vec<String> = outputs
            .iter()
            .map(|(_, s)| format!("{s} ({})", human_bytes(model.target.buffer_size(s))))
            .collect();
        let reason = if unused {
            "the function never reads it".to_string()
        } else if same_size.is_empty() {
            format!(
                "no output has its size ({} bytes): the outputs are {}",
                bytes,
                listing.join(", ")
            )
        } else {
            format!(
                "the outputs of its size ({}) already reuse other buffers",
                same_size.join(", ")
            )
        };
        let argument = module
            .op_name(p)
            .map(|a| format!(" `{a}`"))
            .unwrap_or_default();
        let finding = Finding::new(
            "HM002",
            format!(
                "parameter {}{argument} ({shape}) is donated but no output can use its buffer: {reason}",
                donor.parameter
            ),
            bytes,
            if unused {
                "drop the argument, or stop donating it".to_string()
            } else {
                format!(
                    "return an output with the input's shape and dtype ({shape}), e.g. cast after the jitted function, \
                     or stop donating it"
                )
            },
        )
        .parameter(module, donor.parameter);
        findings.push(finding);
    }
    findings
}
