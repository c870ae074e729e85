//! The JAX arguments an entry's parameters come from: JAX names each
//! parameter by its pytree path (`params['h_0']['kernel']`, `opt_state[0].mu`),
//! whose first part is the Python argument.

use crate::hlo::{Module, SourceLocation};

/// An entry parameter as its metadata tells it.
#[derive(Debug, Clone, Default)]
pub struct ParameterOrigin {
    /// JAX's name for it: the pytree path, `params['w']`.
    pub op_name: Option<String>,
    /// Where the program passed it, when the dump says.
    pub source: Option<SourceLocation>,
    /// The top-level Python argument of its `op_name` (`params['w']` →
    /// `params`) and that argument's position among the module's top-level
    /// arguments (for `donate_argnums`).
    pub argument: Option<(String, usize)>,
}

/// Every entry parameter's origin, by parameter number. Each reads the
/// parameter's metadata (a grammar parse), on all cores: a model may have
/// thousands of parameters, and the report and the findings all ask.
pub fn parameter_origins(module: &Module) -> Vec<ParameterOrigin> {
    use rayon::prelude::*;
    let params = &module.entry().parameters;
    let read: Vec<(Option<String>, Option<SourceLocation>)> =
        params.par_iter().map(|&p| module.origin(p)).collect();
    let tops: Vec<Option<String>> = read
        .iter()
        .map(|(op_name, _)| op_name.as_deref().map(top_name))
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
        .zip(arguments)
        .map(|((op_name, source), argument)| ParameterOrigin {
            op_name,
            source,
            argument,
        })
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
