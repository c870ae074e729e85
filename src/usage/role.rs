//! What a buffer live at the peak is for: the model's parameters, the
//! optimizer's state, other inputs, outputs, activations kept for the backward
//! pass, gradients, other temporaries, constants.

use std::collections::HashMap;

use serde::Serialize;

use super::{ArgumentBytes, BufferUse, GroupSize, Phase, RoleGroup};
use crate::analysis::BufferKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Arguments whose JAX path names parameters (`params`, `weights`, `model`).
    Parameters,
    /// Arguments whose path names an optimizer (`opt_state`, `optimizer`, `mu`, `nu`).
    OptimizerState,
    /// Other arguments: the batch, random keys, step counters.
    OtherInputs,
    /// Results of the step, in buffers of their own.
    Outputs,
    /// Values made by the forward pass of a training step: at a peak in the
    /// backward pass, what is kept for it.
    Activations,
    /// Values made by the backward pass: gradients and their intermediates.
    Gradients,
    /// Any other intermediate value (the optimizer update, inference).
    Temporaries,
    Constants,
}

impl Role {
    /// Words for people, used by every renderer.
    pub fn describe(self) -> &'static str {
        match self {
            Role::Parameters => "parameters",
            Role::OptimizerState => "optimizer state",
            Role::OtherInputs => "other inputs",
            Role::Outputs => "outputs",
            Role::Activations => "activations from the forward pass",
            Role::Gradients => "gradients and backward-pass values",
            Role::Temporaries => "other temporaries",
            Role::Constants => "constants",
        }
    }
}

/// The role of one buffer. `op_name` is the argument's path for parameters.
pub fn classify(kind: BufferKind, phase: Phase, training: bool, op_name: Option<&str>) -> Role {
    match kind {
        BufferKind::Parameter => argument_role(op_name.unwrap_or("")),
        BufferKind::Output => Role::Outputs,
        BufferKind::Constant => Role::Constants,
        BufferKind::Temp => match phase {
            Phase::Forward if training => Role::Activations,
            Phase::Backward => Role::Gradients,
            _ => Role::Temporaries,
        },
    }
}

/// Reads the JAX path's words: optimizer words first, since an optimizer's
/// state often repeats the parameters' names (`opt_state[0].mu['params']`).
fn argument_role(path: &str) -> Role {
    let words: Vec<String> = path
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    if has(&[
        "opt_state",
        "optimizer",
        "opt",
        "optim",
        "optimizer_state",
        "mu",
        "nu",
        "momentum",
        "trace",
        "adam",
        "adamw",
        "inner_state",
    ]) {
        Role::OptimizerState
    } else if has(&[
        "params",
        "param",
        "parameters",
        "weights",
        "variables",
        "model",
        "state_dict",
        "kernel",
    ]) {
        Role::Parameters
    } else {
        Role::OtherInputs
    }
}

pub(super) fn groups(buffers: &[BufferUse], live_peak: u64) -> Vec<RoleGroup> {
    // Per role: its size, and bytes and buffers per argument.
    type Arguments = HashMap<String, (u64, usize)>;
    let mut groups: Vec<(Role, GroupSize, Arguments)> = Vec::new();
    for b in buffers {
        let g = match groups.iter().position(|g| g.0 == b.role) {
            Some(g) => g,
            None => {
                groups.push((b.role, GroupSize::default(), HashMap::new()));
                groups.len() - 1
            }
        };
        groups[g].1.add(b);
        if let Some(argument) = b.argument.as_ref().or(b.parameter.as_ref()) {
            let name = if b.layout_copy {
                format!("{argument} (layout copies)")
            } else {
                argument.clone()
            };
            let entry = groups[g].2.entry(name).or_default();
            entry.0 = entry.0.saturating_add(b.bytes);
            entry.1 += 1;
        }
    }
    let mut out: Vec<RoleGroup> = groups
        .into_iter()
        .map(|(role, mut size, arguments)| {
            size.finish(live_peak);
            let mut arguments: Vec<ArgumentBytes> = arguments
                .into_iter()
                .map(|(name, (bytes, buffers))| ArgumentBytes {
                    name,
                    bytes,
                    buffers,
                })
                .collect();
            arguments.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.name.cmp(&b.name)));
            RoleGroup {
                role,
                size,
                arguments,
            }
        })
        .collect();
    out.sort_by_key(|g| std::cmp::Reverse(g.size.bytes));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argument_paths_name_their_role() {
        assert_eq!(argument_role("params['h_0']['kernel']"), Role::Parameters);
        assert_eq!(
            argument_role("state.params['Dense_0']['bias']"),
            Role::Parameters
        );
        assert_eq!(
            argument_role("opt_state[0].mu['Dense_0']['bias']"),
            Role::OptimizerState
        );
        assert_eq!(
            argument_role("state.opt_state[1][0].trace['w']"),
            Role::OptimizerState
        );
        assert_eq!(argument_role("tokens"), Role::OtherInputs);
        assert_eq!(argument_role("rng"), Role::OtherInputs);
    }
}
