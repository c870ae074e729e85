//! The JAX arguments an entry's parameters come from: JAX names each
//! parameter by its pytree path (`params['h_0']['kernel']`, `opt_state[0].mu`),
//! whose first part is the Python argument.

use crate::hlo::Module;

/// The top-level Python argument of every entry parameter's `op_name`
/// (`params['w']` → `params`) and its position among the module's top-level
/// arguments (for `donate_argnums`), by parameter number.
pub fn jax_arguments(module: &Module) -> Vec<Option<(String, usize)>> {
    let top = top_name;
    let tops: Vec<Option<String>> = module
        .entry()
        .parameters
        .iter()
        .map(|&p| module.op_name(p).map(|name| top(&name)))
        .collect();
    let mut order: Vec<&str> = Vec::new();
    for t in tops.iter().flatten() {
        if !order.contains(&t.as_str()) {
            order.push(t);
        }
    }
    tops.iter()
        .map(|t| {
            let t = t.as_ref()?;
            let index = order.iter().position(|n| n == t)?;
            Some((t.clone(), index))
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
