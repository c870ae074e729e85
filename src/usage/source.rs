//! Which frames of a call stack are the user's own code.
//!
//! XLA writes the whole Python stack of every op (JAX has already dropped its
//! own frames). The innermost frame is often a library's line (flax's
//! `Dropout.__call__`, optax's moment update); what a person names is the line
//! of their program that called it: the innermost frame outside installed
//! packages and the Python installation.

use serde::Serialize;

use crate::hlo::{InstrId, Module, SourceLocation};

/// An op's `op_name` and call stack, innermost first. An op whose metadata
/// has both an inline `source_file` and a `stack_frame_id` (TensorFlow's
/// inline line is its own `ops.py`) gets the table's frames after the
/// inline line, so that the user's own frame can be found among them.
pub fn op_name_and_stack(module: &Module, id: InstrId) -> (Option<String>, Vec<SourceLocation>) {
    let (op_name, mut stack) = module.op_name_and_stack(id);
    if module.stack_frames.frames.is_empty() {
        return (op_name, stack);
    }
    let metadata = module.metadata(id);
    let frame = metadata.stack_frame_id.filter(|&f| f > 0);
    if let (Some(_), Some(frame)) = (metadata.source_file, frame) {
        let Ok(frame) = usize::try_from(frame - 1) else {
            return (op_name, stack);
        };
        for location in module.stack_frames.stack_of_frame(frame) {
            let known = stack
                .iter()
                .any(|l| l.file == location.file && l.line == location.line);
            if !known {
                stack.push(location);
            }
        }
    }
    (op_name, stack)
}

/// Why the report's source lines say less than they could, and what would
/// give more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SourceHint {
    /// A PyTorch/XLA module without a source line: torch_xla writes them
    /// only when the program runs with `XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1`.
    PytorchXlaDebugOff,
    /// Every op's line is inside TensorFlow (`location`, its
    /// `framework/ops.py`), and no stack frame names the user's file.
    TensorflowOwnLine { location: String },
}

impl SourceHint {
    pub fn message(&self) -> String {
        match self {
            SourceHint::PytorchXlaDebugOff => {
                "no source lines: torch_xla writes them into the HLO only when the program runs with \
                 XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1 (environment variables; the dump then also names each op's \
                 aten operation)"
                    .to_string()
            }
            SourceHint::TensorflowOwnLine { location } => format!(
                "TensorFlow's metadata points every op at its own {}, and the dump holds no stack frames \
                 naming your file: the op_name scopes (tf.name_scope, Keras layer names) below say where \
                 the memory is made",
                short(location)
            ),
        }
    }
}

/// Whether `file` belongs to an installed package or to Python itself rather
/// than to the user's program.
pub fn is_library(file: &str) -> bool {
    let file = file.replace('\\', "/");
    file.contains("/site-packages/")
        || file.contains("/dist-packages/")
        || file.starts_with('<') // <frozen runpy>, <string>, <stdin> run by Python itself
        || is_python_stdlib(&file)
}

/// `/usr/lib/python3.11/runpy.py`, `.../lib/python3.12/threading.py`,
/// `C:/Python311/Lib/...`: the standard library of an installation.
fn is_python_stdlib(file: &str) -> bool {
    let lower = file.to_ascii_lowercase();
    lower.split('/').any(|part| {
        part.strip_prefix("python")
            .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
    }) && (lower.contains("/lib/") || lower.contains("/lib64/"))
}

/// The innermost frame of `stack` (innermost first) that is the user's code.
pub fn caller(stack: &[SourceLocation]) -> Option<&SourceLocation> {
    stack.iter().find(|l| !is_library(&l.file))
}

/// A source location as people read it: a library's file from its package
/// (`flax/linen/stochastic.py:105`), the user's by its name (`train.py:40`).
/// JSON keeps the full path.
pub fn short(location: &str) -> String {
    let location = location.replace('\\', "/");
    for marker in ["site-packages/", "dist-packages/"] {
        if let Some(i) = location.rfind(marker) {
            return location[i + marker.len()..].to_string();
        }
    }
    match location.rsplit_once('/') {
        Some((_, name)) => name.to_string(),
        None => location,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(file: &str, line: u64) -> SourceLocation {
        SourceLocation {
            file: file.into(),
            line,
            function: None,
        }
    }

    #[test]
    fn libraries_and_python_are_not_the_user() {
        assert!(is_library(
            "/venv/lib/python3.11/site-packages/flax/linen/stochastic.py"
        ));
        assert!(is_library(
            "/usr/lib/python3/dist-packages/optax/_src/base.py"
        ));
        assert!(is_library("/usr/lib/python3.11/runpy.py"));
        assert!(is_library("<frozen runpy>"));
        assert!(!is_library("/home/me/train.py"));
        assert!(!is_library("train.py"));
        // A project folder that happens to be called lib is the user's.
        assert!(!is_library("/home/me/lib/model.py"));
    }

    #[test]
    fn caller_is_the_innermost_user_frame() {
        let stack = [
            at(
                "/v/lib/python3.11/site-packages/flax/linen/stochastic.py",
                105,
            ),
            at("/home/me/model.py", 12),
            at("/home/me/train.py", 40),
        ];
        assert_eq!(caller(&stack).map(|l| l.line), Some(12));
        assert_eq!(caller(&stack[..1]), None);
    }
}
