//! HM002 donation-unusable: a parameter was donated, but XLA found no output to
//! put in its buffer. JAX passes such donations as `buffer_donor` and XLA pairs
//! donors with outputs of the same byte size; a donor still listed in the
//! optimized module was not paired, silently (notes §5.2, §5.6).

use serde::Serialize;

use super::Finding;
use crate::analysis::MemoryModel;
use crate::frontend::FrontendName;
use crate::hlo::Module;
use crate::units::human_bytes;

/// HM002's facts: the donated arrays of one JAX argument (or one parameter)
/// that no output can take. One finding per argument, since
/// `donate_argnums` donates whole arguments; JSON keeps every array.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    /// The JAX argument, when the dump names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument: Option<String>,
    /// Bytes of every unusable array together.
    pub bytes: u64,
    pub unusable: Vec<UnusableArray>,
}

/// A donated parameter no output can take, and why.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct UnusableArray {
    pub parameter: u64,
    /// The JAX path (`op_name`), when the dump has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
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
    /// No output has its byte size. `same_dims` is an output with its
    /// dimensions in another dtype (a cast inside the function), if any.
    NoOutputOfItsSize {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        same_dims: Option<SizedShape>,
        /// How many outputs there are (none of its size).
        outputs: usize,
    },
    /// The outputs of its size already reuse other buffers.
    SameSizeOutputsTaken { outputs: Vec<String> },
}

/// A shape and its bytes on the target.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SizedShape {
    pub index: Vec<u64>,
    pub shape: String,
    pub bytes: u64,
}

/// How many arrays the message names before "and N more".
const NAMED: usize = 3;

impl UnusableArray {
    fn describe(&self) -> String {
        let what = match &self.path {
            Some(p) => format!("parameter {} `{p}`", self.parameter),
            None => format!("parameter {}", self.parameter),
        };
        let reason = match &self.reason {
            Unusable::NeverRead => "the function never reads it".to_string(),
            Unusable::NoOutputOfItsSize {
                same_dims: Some(o), ..
            } => format!(
                "output {:?} has its dimensions in another dtype ({}, {})",
                o.index,
                o.shape,
                human_bytes(o.bytes)
            ),
            Unusable::NoOutputOfItsSize { outputs, .. } => {
                format!(
                    "none of the {outputs} outputs has its size ({} bytes)",
                    self.bytes
                )
            }
            Unusable::SameSizeOutputsTaken { outputs } => {
                let named: Vec<&str> = outputs.iter().take(NAMED).map(String::as_str).collect();
                let more = outputs.len().saturating_sub(NAMED);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                format!(
                    "the outputs of its size ({}{more}) already reuse other buffers",
                    named.join(", ")
                )
            }
        };
        format!("{what} ({}): {reason}", self.shape)
    }
}

impl Evidence {
    pub fn message(&self) -> String {
        match (self.unusable.as_slice(), &self.argument) {
            ([one], _) => format!(
                "{} is donated but no output can use its buffer: {}",
                one.path
                    .as_ref()
                    .map(|p| format!("`{p}`"))
                    .unwrap_or_else(|| format!("parameter {}", one.parameter)),
                one.describe()
            ),
            (many, argument) => format!(
                "{} {} donated arrays ({}) no output can use: {}{}",
                argument
                    .as_ref()
                    .map(|a| format!("argument `{a}` has"))
                    .unwrap_or_else(|| "these parameters are".into()),
                many.len(),
                human_bytes(self.bytes),
                many.first()
                    .map(UnusableArray::describe)
                    .unwrap_or_default(),
                if many.len() > 1 { "; ..." } else { "" }
            ),
        }
    }

    pub fn details(&self) -> Vec<String> {
        if self.unusable.len() <= 1 {
            return Vec::new();
        }
        self.unusable.iter().map(UnusableArray::describe).collect()
    }

    pub fn fix(&self, frontend: FrontendName) -> String {
        if self
            .unusable
            .iter()
            .all(|u| matches!(u.reason, Unusable::NeverRead))
        {
            return "drop the argument, or stop donating it".to_string();
        }
        if let Some(o) = self.unusable.iter().find_map(|u| match &u.reason {
            Unusable::NoOutputOfItsSize {
                same_dims: Some(o), ..
            } => Some((u, o)),
            _ => None,
        }) {
            return format!(
                "return {} in its input dtype ({} rather than {}), casting outside {}, or stop donating it",
                if o.1.index.is_empty() { "the output".to_string() } else { format!("output {:?}", o.1.index) },
                o.0.shape,
                o.1.shape,
                super::compiled_function(frontend)
            );
        }
        "return outputs with the inputs' shapes and dtypes, or stop donating what no output can take".to_string()
    }
}

pub fn check(
    module: &Module,
    model: &MemoryModel,
    origins: &[crate::usage::ParameterOrigin],
) -> Vec<Finding> {
    let entry = module.entry();
    let root = &module.instr(entry.root).shape;
    let outputs = root.leaves();
    // One finding per argument, in the order donors are listed.
    let mut by_argument: Vec<(Option<String>, u64, Vec<UnusableArray>)> = Vec::new();
    for donor in &module.header.buffer_donors {
        let Some(&p) = entry.parameters.get(donor.parameter as usize) else {
            continue;
        };
        let Some(shape) = module.instr(p).shape.subshape(&donor.parameter_index) else {
            continue;
        };
        let bytes = model.target.buffer_size(shape);
        let unused = model
            .dataflow
            .value_of(p)
            .first()
            .is_some_and(|&v| model.dataflow.uses(v).is_empty());
        let same_size: Vec<String> = outputs
            .iter()
            .filter(|(_, s)| model.target.buffer_size(s) == bytes)
            .map(|(i, s)| format!("{i:?} {s}"))
            .collect();
        let reason = if unused {
            Unusable::NeverRead
        } else if same_size.is_empty() {
            let dims = |s: &crate::hlo::Shape| match s {
                crate::hlo::Shape::Array(a) => Some(a.dims.clone()),
                _ => None,
            };
            let same_dims = outputs
                .iter()
                .find(|(_, s)| dims(s).is_some() && dims(s) == dims(shape))
                .map(|(index, s)| SizedShape {
                    index: index.clone(),
                    shape: s.to_string(),
                    bytes: model.target.buffer_size(s),
                });
            Unusable::NoOutputOfItsSize {
                same_dims,
                outputs: outputs.len(),
            }
        } else {
            Unusable::SameSizeOutputsTaken { outputs: same_size }
        };
        let origin = origins.get(donor.parameter as usize);
        let argument = origin
            .and_then(|o| o.argument.clone())
            .map(|(name, _)| name);
        let array = UnusableArray {
            parameter: donor.parameter,
            path: origin.and_then(|o| o.path.clone()),
            shape: shape.to_string(),
            bytes,
            reason,
        };
        // Arrays of one named argument share a finding; unnamed ones each get theirs.
        let group = argument.as_ref().and_then(|a| {
            by_argument
                .iter()
                .position(|(x, _, _)| x.as_ref() == Some(a))
        });
        match group {
            Some(g) => by_argument[g].2.push(array),
            None => by_argument.push((argument, donor.parameter, vec![array])),
        }
    }
    by_argument
        .into_iter()
        .map(|(argument, first, unusable)| {
            let bytes = unusable
                .iter()
                .map(|u| u.bytes)
                .fold(0u64, u64::saturating_add);
            let evidence = Evidence {
                argument,
                bytes,
                unusable,
            };
            Finding::new(super::Evidence::DonationUnusable(evidence), bytes)
                .parameter(origins, first)
        })
        .collect()
}
