//! The arguments an entry's parameters come from. JAX names each parameter
//! by its pytree path (`params['h_0']['kernel']`, `opt_state[0].mu`), whose
//! first part is the Python argument. TensorFlow names every parameter
//! `XLA_Args` and torch_xla `xla__device_data` (or nothing): no path, so
//! each parameter stands alone under its HLO name (`arg0.1`, `p0.2`).

use crate::frontend::FrontendName;
use crate::hlo::{Module, SourceLocation};

/// An entry parameter as its metadata tells it.
#[derive(Debug, Clone, Default)]
pub struct ParameterOrigin {
    /// The `op_name` as written (`params['w']`, `XLA_Args`, `xla__device_data`).
    pub op_name: Option<String>,
    /// Where the program passed it, when the dump says.
    pub source: Option<SourceLocation>,
    /// The argument's pytree path (`params['w']`): the `op_name`, where the
    /// front-end names arguments by path (JAX); `None` for TensorFlow's and
    /// PyTorch/XLA's parameters.
    pub path: Option<String>,
    /// The top-level Python argument of its path (`params['w']` →
    /// `params`) and that argument's position among the module's top-level
    /// arguments (for `donate_argnums`).
    pub argument: Option<(String, usize)>,
    /// Its name in the HLO (`arg0.1`, `p0.2`, `Arg_0.1`).
    pub name: String,
}

impl ParameterOrigin {
    /// How reports name the parameter: its path, else its HLO name.
    pub fn label(&self) -> &str {
        self.path.as_deref().unwrap_or(&self.name)
    }
}

/// Each entry parameter's `op_name` and source line, by parameter number.
/// Each reads the parameter's metadata (a grammar parse), on all cores: a
/// model may have thousands of parameters, and the report and the findings
/// all ask.
pub fn read_parameters(module: &Module) -> Vec<(Option<String>, Option<SourceLocation>)> {
    use rayon::prelude::*;
    module
        .entry()
        .parameters
        .par_iter()
        .map(|&p| module.origin(p))
        .collect()
}

/// Every entry parameter's origin, by parameter number, from what
/// [`read_parameters`] read, named as `frontend` names them.
pub fn parameter_origins(
    module: &Module,
    read: Vec<(Option<String>, Option<SourceLocation>)>,
    frontend: FrontendName,
) -> Vec<ParameterOrigin> {
    let paths: Vec<Option<String>> = read
        .iter()
        .map(|(op_name, _)| op_name.clone().filter(|_| frontend.names_arguments()))
        .collect();
    let tops: Vec<Option<String>> = paths
        .iter()
        .map(|path| path.as_deref().map(top_name))
        .collect();
    let mut order: Vec<&str> = Vec::new();
    for t in tops.iter().flatten() {
        if !order.contains(&t.as_str()) {
            order.push(t);
        }
    }
    let arguments: Vec<Option<(String, usize)>> = tops
        .iter()
        .map(|t| {
            let t = t.as_ref()?;
            let index = order.iter().position(|n| n == t)?;
            Some((t.clone(), index))
        })
        .collect();
    read.into_iter()
        .zip(paths)
        .zip(arguments)
        .zip(&module.entry().parameters)
        .map(
            |((((op_name, source), path), argument), &p)| ParameterOrigin {
                op_name,
                source,
                path,
                argument,
                name: module.instr_name(p).to_string(),
            },
        )
        .collect()
}

/// The Python argument of a pytree path: `params['w']` → `params`.
pub fn top_name(path: &str) -> String {
    path.split(['[', '.'])
        .next()
        .unwrap_or(path)
        .trim()
        .to_string()
}
