//! HM005 temps-dominate: the preallocated temporaries are most of what the
//! module needs. Lists the largest temporaries live at the peak and says which
//! look like activations saved for the backward pass (rematerialization
//! candidates) and which are broadcasts or constants made concrete.

use serde::Serialize;

use super::{Finding, InstrRef};
use crate::analysis::{BufferKind, MemoryModel};
use crate::frontend::FrontendName;
use crate::hlo::{Module, Opcode};
use crate::units::human_bytes;
use crate::usage::{PeakUsage, Role};

/// How many temporaries the evidence lists.
const LISTED: usize = 5;

/// HM005's facts: the temporaries' share of device memory and the largest
/// temporaries live at the peak.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    pub temp_bytes: u64,
    pub device_bytes: u64,
    pub largest: Vec<Temporary>,
    /// Bytes of `largest` that are activations saved for the backward pass.
    pub activation_bytes: u64,
    /// A training step (the module has a backward pass).
    pub training: bool,
    /// Some ops are already inside `jax.checkpoint` / `remat`.
    pub rematerialized: bool,
    /// Where the forward values live at the peak, when the peak holds any
    /// (in the backward pass: what is kept for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_scope: Option<crate::usage::ActivationScope>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Temporary {
    pub bytes: u64,
    pub shape: String,
    pub instruction: InstrRef,
    pub kind: TempKind,
}

/// What a large temporary looks like it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TempKind {
    Broadcast,
    Constant,
    /// Random bits or a keep-mask of dropout (`Dropout`, `bernoulli` in its op_name).
    DropoutMask,
    /// A dtype conversion of an argument (an f32 copy of bf16 weights, say).
    ConvertedArgument,
    /// A forward value still live while the backward pass runs.
    SavedActivation,
    Intermediate,
}

impl TempKind {
    fn words(self) -> &'static str {
        match self {
            TempKind::Broadcast => "a broadcast made concrete",
            TempKind::Constant => "a constant",
            TempKind::DropoutMask => "dropout's random bits or mask",
            TempKind::ConvertedArgument => "a converted copy of an argument (another dtype)",
            TempKind::SavedActivation => {
                "an activation saved for the backward pass (rematerialization candidate)"
            }
            TempKind::Intermediate => "an intermediate value",
        }
    }
}

impl Evidence {
    pub fn message(&self) -> String {
        let percent = self.temp_bytes as f64 * 100.0 / self.device_bytes.max(1) as f64;
        format!(
            "temporaries take {} of the {} this module needs ({percent:.0}%)",
            human_bytes(self.temp_bytes),
            human_bytes(self.device_bytes)
        )
    }

    pub fn fix(&self, frontend: FrontendName) -> String {
        if frontend != FrontendName::Jax {
            return self.fix_elsewhere(frontend);
        }
        let scope = self.activation_scope.as_ref().filter(|_| self.training);
        if let Some(scope) = scope.filter(|s| s.bytes > 0 && self.activation_bytes > 0) {
            let layers: Vec<String> = scope
                .largest_children
                .iter()
                .map(|(name, bytes)| format!("{name} {}", human_bytes(*bytes)))
                .collect();
            let where_ = if scope.path.is_empty() {
                String::new()
            } else {
                format!(" under `{}`", scope.path)
            };
            let spread = match layers.len() {
                0 => String::new(),
                n if n == scope.children => format!(" ({})", layers.join(", ")),
                n => format!(
                    " (the largest {n} of {}: {})",
                    scope.children,
                    layers.join(", ")
                ),
            };
            let kept = format!(
                "{} of forward-pass values are kept for the backward pass{where_}{spread}",
                human_bytes(scope.bytes)
            );
            if self.rematerialized {
                format!(
                    "{kept}, although the program already rematerializes: save less with a stricter policy \
                     (jax.checkpoint(..., policy=jax.checkpoint_policies.nothing_saveable)), checkpoint more of it, \
                     or use a smaller batch or sequence"
                )
            } else {
                format!(
                    "{kept}: rematerialize them, wrapping each block in jax.checkpoint (flax: nn.remat), \
                     or use a smaller batch or sequence"
                )
            }
        } else {
            "look at the largest temporaries below: chunk the computation (lax.map, scan) or keep broadcasts fused"
                .into()
        }
    }

    /// The fix off JAX: each front-end's rematerialization and chunking.
    fn fix_elsewhere(&self, frontend: FrontendName) -> String {
        let (remat, chunks) = match frontend {
            FrontendName::Tensorflow => (
                "wrap the largest layers in tf.recompute_grad",
                "compute large intermediates in chunks (tf.map_fn, tf.while_loop)",
            ),
            FrontendName::PytorchXla => (
                "wrap the largest blocks in torch.utils.checkpoint.checkpoint",
                "compute large intermediates in chunks",
            ),
            FrontendName::Jax | FrontendName::Unknown => (
                "rematerialize the largest layers' activations (recompute them in the backward pass)",
                "compute large intermediates in chunks",
            ),
        };
        let remat = if self.training {
            format!("{remat} so their activations are recomputed rather than kept, ")
        } else {
            String::new()
        };
        format!("look at the largest temporaries below: {remat}{chunks}, or use a smaller batch")
    }

    pub fn details(&self) -> Vec<String> {
        self.largest
            .iter()
            .map(|t| {
                let what = t
                    .instruction
                    .op_name
                    .clone()
                    .unwrap_or_else(|| t.instruction.name.clone());
                let at = t
                    .instruction
                    .source
                    .as_ref()
                    .map(|l| format!(" at {}", crate::usage::source::short(l)))
                    .unwrap_or_default();
                format!(
                    "{} {} {what}{at}: {}",
                    human_bytes(t.bytes),
                    t.shape,
                    t.kind.words()
                )
            })
            .collect()
    }
}

pub fn check(module: &Module, model: &MemoryModel, usage: &PeakUsage) -> Vec<Finding> {
    // Device memory only: on TPU the on-chip spaces (VMEM...) are not what
    // runs out, and their layout is an estimate.
    let in_device = |a: &crate::analysis::assign::Allocation| a.color == 0;
    let temp_bytes: u64 = model
        .assignment
        .allocations
        .iter()
        .filter(|a| in_device(a) && a.kind == crate::analysis::assign::AllocationKind::Temp)
        .map(|a| a.size)
        .sum();
    let device_bytes = model.totals.device_bytes;
    if device_bytes == 0 || temp_bytes * 2 <= device_bytes {
        return Vec::new();
    }
    let temps: Vec<_> = model
        .peak
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Temp)
        .filter(|b| {
            model.assignment.allocation_of[b.buffer.index()]
                .is_some_and(|a| in_device(&model.assignment.allocations[a]))
        })
        .collect();
    let mut listed = Vec::new();
    let mut activations = 0u64;
    // Forward values still live while the backward pass (`transpose(...)` in
    // JAX's op names) runs are the activations autodiff saved.
    let peak_op = model
        .peak
        .instruction
        .and_then(|i| module.op_name(i))
        .unwrap_or_default();
    for b in temps.iter().take(LISTED) {
        let at = InstrRef::of(module, b.instruction);
        let op = at.op_name.clone().unwrap_or_default();
        let instr = module.instr(b.instruction);
        let is_argument = |o: &crate::hlo::InstrId| {
            let p = module.instr(*o);
            p.opcode == Opcode::Parameter && p.computation == module.entry
        };
        let kind = if op.contains("Dropout") || op.contains("bernoulli") || op.contains("dropout") {
            TempKind::DropoutMask
        } else if (instr.opcode == Opcode::Convert || op.ends_with("convert_element_type"))
            && instr.operands.iter().any(is_argument)
        {
            TempKind::ConvertedArgument
        } else if instr.opcode == Opcode::Broadcast || op.contains("broadcast") {
            TempKind::Broadcast
        } else if instr.opcode == Opcode::Constant {
            TempKind::Constant
        } else if !op.contains("transpose(") && peak_op.contains("transpose(") {
            activations += b.bytes;
            TempKind::SavedActivation
        } else {
            TempKind::Intermediate
        };
        listed.push(Temporary {
            bytes: b.bytes,
            shape: instr.shape.to_string(),
            instruction: at,
            kind,
        });
    }
    // The whole peak's forward values, not only the listed ones.
    let activation_bytes = usage
        .by_role
        .iter()
        .filter(|g| g.role == Role::Activations)
        .map(|g| g.size.bytes)
        .sum::<u64>()
        .max(activations);
    let evidence = Evidence {
        temp_bytes,
        device_bytes,
        largest: listed,
        activation_bytes,
        training: usage.training,
        rematerialized: usage.rematerialized,
        activation_scope: usage.activation_scope(),
    };
    let mut f = Finding::new(super::Evidence::TempsDominate(evidence), temp_bytes);
    if let Some(first) = temps.first() {
        f = f.at(module, first.instruction);
    }
    vec![f]
}
