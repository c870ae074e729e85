//! HM004 output-copies-parameter: an output is a plain copy of an input.
//! Returning an input unchanged makes XLA copy it into a new output buffer
//! (a read-only parameter cannot also be an output, notes §5.5); returning a
//! donated input that also receives another output copies it as well.

use serde::Serialize;

use super::Finding;
use crate::analysis::MemoryModel;
use crate::frontend::FrontendName;
use crate::hlo::{Module, Opcode};
use crate::units::human_bytes;
use crate::usage::ParameterOrigin;

/// HM004's facts: an output that is a copy of a parameter.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    pub output_index: Vec<u64>,
    pub parameter: u64,
    /// The JAX argument path (`op_name`), when the dump has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// The parameter's name in the HLO (`arg0.1`, `p0.2`).
    pub name: String,
    pub bytes: u64,
    /// The parameter is donated and its buffer receives another output.
    pub donated: bool,
}

impl Evidence {
    pub fn message(&self) -> String {
        let argument = match &self.argument {
            Some(_) => super::quoted(&self.argument),
            None => format!(" (`{}`)", self.name),
        };
        let why = if self.donated {
            "it is donated and its buffer receives another output, so the old value must be copied out first"
        } else {
            "the caller already holds it, and an output needs a buffer of its own"
        };
        format!(
            "output {:?} is a copy of parameter {}{argument} ({}): {why}",
            self.output_index,
            self.parameter,
            human_bytes(self.bytes)
        )
    }

    pub fn fix(&self, frontend: FrontendName) -> String {
        match (frontend, self.donated) {
            (FrontendName::Tensorflow, true) => {
                "do not return the variable from the tf.function as well as updating it in place: the caller \
                 reads the update from the variable"
            }
            (FrontendName::PytorchXla, true) => {
                "do not keep an unchanged copy of a tensor you also update in place (a clone() before an \
                 in-place op): the graph must then write both"
            }
            (_, true) => "do not return the donated input as well as its update: return one of them",
            (FrontendName::Jax, false) => {
                "do not return the input unchanged: the caller still has the array it passed in; where a \
                 framework returns the whole state for you (nnx.jit, a TrainState), donate that argument \
                 instead (donate_argnums), so XLA hands back the same buffer rather than a copy"
            }
            (FrontendName::Tensorflow, false) => {
                "do not return an input unchanged from the tf.function: the caller still has the tensor it \
                 passed in"
            }
            (FrontendName::PytorchXla, false) => {
                "a tensor of this graph equals an input unchanged (a clone(), or a copy into a new tensor): \
                 use the input itself, whose buffer the device already holds"
            }
            (FrontendName::Unknown, false) => {
                "do not return the input unchanged: the caller still has the array it passed in"
            }
        }
        .into()
    }
}

pub fn check(module: &Module, model: &MemoryModel, origins: &[ParameterOrigin]) -> Vec<Finding> {
    let entry = module.entry();
    let root = module.instr(entry.root);
    let outputs: Vec<(Vec<u64>, crate::hlo::InstrId)> = if root.opcode == Opcode::Tuple {
        root.operands
            .iter()
            .enumerate()
            .map(|(i, &op)| (vec![i as u64], op))
            .collect()
    } else {
        vec![(vec![], entry.root)]
    };
    let mut findings = Vec::new();
    for (index, out) in outputs {
        let instr = module.instr(out);
        if instr.opcode != Opcode::Copy {
            continue;
        }
        let Some(mut source) = instr.operands.first().copied() else {
            continue;
        };
        while matches!(module.instr(source).opcode, Opcode::Bitcast | Opcode::Copy) {
            match module.instr(source).operands.first() {
                Some(&op) => source = op,
                None => break,
            }
        }
        let src = module.instr(source);
        if src.opcode != Opcode::Parameter || src.computation != module.entry {
            continue;
        }
        let number = src.parameter_number.unwrap_or(0);
        let bytes = model.target.buffer_size(&instr.shape);
        let donated = module
            .header
            .input_output_alias
            .iter()
            .any(|a| a.parameter == number);
        let evidence = Evidence {
            output_index: index.clone(),
            parameter: number,
            argument: origins.get(number as usize).and_then(|o| o.path.clone()),
            name: module.instr_name(source).to_string(),
            bytes,
            donated,
        };
        let mut f = Finding::new(super::Evidence::OutputCopiesParameter(evidence), bytes)
            .at(module, out)
            .parameter(origins, number);
        f.output_index = Some(index);
        findings.push(f);
    }
    findings
}
