//! JAX's `op_name` as a path of scopes: `jit(train_step)/transpose(jvp(GPT))/h_3/attn/dot_general`
//! becomes `train_step / GPT / h_3 / attn / dot_general`, in the backward pass.
//!
//! The transformations JAX wraps around a name (`jvp(...)`, `transpose(...)`,
//! `vmap(...)`) say which pass an op belongs to, not where in the model it is,
//! so they are peeled off: the forward and the backward of `h_3` land in the
//! same scope, told apart by [`Phase`].

use serde::Serialize;

/// Which pass of a training step an op belongs to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Inside `jvp(...)` but not `transpose(...)`: the forward pass; what it
    /// leaves live at the peak is kept for the backward pass.
    Forward,
    /// Inside `transpose(...)`: the backward pass (gradients).
    Backward,
    /// Neither: the optimizer update of a training step, or an inference
    /// program, or an argument.
    Outside,
}

/// TensorFlow's `GradientTape` names the backward pass's ops
/// `gradient_tape/...` (`gradient_tape/sequential_1/dense_1/MatMul/MatMul`);
/// its forward pass has no marker.
pub const TF_BACKWARD: &str = "gradient_tape/";

/// The phase an op_name says.
pub fn phase(op_name: &str) -> Phase {
    let tf_backward =
        op_name.starts_with(TF_BACKWARD) || op_name.contains(&["/", TF_BACKWARD].concat());
    if op_name.contains("transpose(") || tf_backward {
        Phase::Backward
    } else if op_name.contains("jvp(") {
        Phase::Forward
    } else {
        Phase::Outside
    }
}

/// Wrappers whose name is a pass, not a place: peeled off a path component.
const TRANSFORMS: &[&str] = &[
    "jvp",
    "transpose",
    "vmap",
    "pjit",
    "jit",
    "remat",
    "checkpoint",
    "custom_jvp_call",
    "custom_vjp_call",
    "shard_map",
    "pmap",
    "xla_pmap",
];

/// Whether a wrapper or component says the code is rematerialized
/// (`jax.checkpoint`, `nn.remat`).
pub fn is_remat(op_name: &str) -> bool {
    split(op_name).iter().any(|c| {
        let head = c.split('(').next().unwrap_or(c);
        matches!(head, "remat" | "checkpoint" | "rematted_computation")
            || c.contains("remat(")
            || c.contains("checkpoint(")
    })
}

/// The scopes of an op_name, outermost first, transformations peeled off.
pub fn path(op_name: &str) -> Vec<String> {
    split(op_name).into_iter().filter_map(peel).collect()
}

/// Splits at `/` outside brackets (`jit(f)/pjit(g/h)` has two components).
fn split(op_name: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in op_name.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            '/' if depth <= 0 => {
                parts.push(&op_name[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&op_name[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// `transpose(jvp(GPT))` → `GPT`; `jit(train_step)` → `train_step`;
/// `transpose(jvp())` → nothing; `h_3` and `dot_general` stay.
fn peel(component: &str) -> Option<String> {
    let mut c = component.trim();
    while let Some(open) = c.find('(') {
        let head = &c[..open];
        if !c.ends_with(')') || !TRANSFORMS.contains(&head) {
            break;
        }
        c = c[open + 1..c.len() - 1].trim();
    }
    (!c.is_empty()).then(|| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformations_are_peeled() {
        assert_eq!(
            path("jit(train_step)/transpose(jvp(GPT))/h_3/attn/dot_general"),
            ["train_step", "GPT", "h_3", "attn", "dot_general"]
        );
        assert_eq!(
            path("jit(train_step)/transpose(jvp())/pad"),
            ["train_step", "pad"]
        );
        assert_eq!(
            path("jit(f)/while/body/closed_call/mul"),
            ["f", "while", "body", "closed_call", "mul"]
        );
        // A slash inside brackets is not a separator.
        assert_eq!(
            path("jit(f)/reduce_sum[axes=(0/1)]"),
            ["f", "reduce_sum[axes=(0/1)]"]
        );
    }

    #[test]
    fn phases() {
        assert_eq!(phase("jit(s)/transpose(jvp(GPT))/h_0/mul"), Phase::Backward);
        assert_eq!(phase("jit(s)/jvp(GPT)/h_0/mul"), Phase::Forward);
        assert_eq!(phase("jit(s)/mul"), Phase::Outside);
        // TensorFlow's GradientTape: its backward pass; the forward has no marker.
        assert_eq!(
            phase("gradient_tape/sequential_1/dense_1_2/MatMul/MatMul"),
            Phase::Backward
        );
        assert_eq!(phase("while/gradient_tape/dense/MatMul"), Phase::Backward);
        assert_eq!(phase("sequential_1/dense_1/MatMul"), Phase::Outside);
    }

    #[test]
    fn remat_is_seen_in_wrappers_and_components() {
        assert!(is_remat("jit(s)/jvp(GPT)/remat(Block)/mul"));
        assert!(is_remat("jit(s)/jvp(GPT)/checkpoint/mul"));
        assert!(is_remat("jit(s)/transpose(jvp(checkpoint(f)))/mul"));
        assert!(!is_remat("jit(s)/jvp(GPT)/h_0/mul"));
    }
}
