//! HM002 donation-unusable: a parameter was donated, but XLA found no output to
//! put in its buffer. JAX passes such donations as `buffer_donor` and XLA pairs
//! donors with outputs of the same byte size; a donor still listed in the
//! optimized module was not paired, silently (notes §5.2, §5.6).

use serde::Serialize;

use super::Finding;
use crate::analysis::MemoryModel;
use crate::hlo::Module;
use crate::units::human_bytes;

/// HM002's facts: a donated parameter no output can take.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    pub parameter: u64,
    /// The JAX argument path (`op_name`), when the dump has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    pub shape: String,
    pub bytes: u64,
    pub reason: Unusable,
}

/// Why no output can use the donated buffer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Unusable {
    /// The function never reads the argument.
    NeverRead,
    /// No output has its byte size; these are the outputs.
    NoOutputOfItsSize { outputs: Vec<SizedShape> },
    /// The outputs of its size already reuse other buffers.
    SameSizeOutputsTaken { outputs: Vec<String> },
}

/// A shape and its bytes on the target.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SizedShape {
    pub shape: String,
    pub bytes: u64,
}

impl Evidence {
    pub fn message(&self) -> String {
        let reason = match &self.reason {
            Unusable::NeverRead => "the function never reads it".to_string(),
            Unusable::NoOutputOfItsSize { outputs } => format!(
                "no output has its size ({} bytes): the outputs are {}",
                self.bytes,
                outputs
                    .iter()
                    .map(|o| format!("{} ({})", o.shape, human_bytes(o.bytes)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Unusable::SameSizeOutputsTaken { outputs } => format!(
                "the outputs of its size ({}) already reuse other buffers",
                outputs.join(", ")
            ),
        };
        let argument = super::quoted(&self.argument);
        format!(
            "parameter {}{argument} ({}) is donated but no output can use its buffer: {reason}",
            self.parameter, self.shape
        )
    }

    pub fn fix(&self) -> String {
        match self.reason {
            Unusable::NeverRead => "drop the argument, or stop donating it".to_string(),
            _ => format!(
                "return an output with the input's shape and dtype ({}), e.g. cast after the jitted function, \
                 or stop donating it",
                self.shape
            ),
        }
    }
}

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
        let reason = if unused {
            Unusable::NeverRead
        } else if same_size.is_empty() {
            Unusable::NoOutputOfItsSize {
                outputs: outputs
                    .iter()
                    .map(|(_, s)| SizedShape {
                        shape: s.to_string(),
                        bytes: model.target.buffer_size(s),
                    })
                    .collect(),
            }
        } else {
            Unusable::SameSizeOutputsTaken { outputs: same_size }
        };
        let evidence = Evidence {
            parameter: donor.parameter,
            argument: module.op_name(p),
            shape: shape.to_string(),
            bytes,
            reason,
        };
        findings.push(
            Finding::new(super::Evidence::DonationUnusable(evidence), bytes)
                .parameter(module, donor.parameter),
        );
    }
    findings
}
