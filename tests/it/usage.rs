//! What holds the live peak: every breakdown adds up to the live peak, on
//! every sample and (with `HLOMEM_CORPUS`) every corpus module, and on a real
//! flax training step the groups name the lines a person would.

use hlomem::report::ModuleReport;
use hlomem::usage::{Role, ScopeNode};

/// Each scope's children hold at most its bytes (buffers whose path ends at
/// the scope are its own), and the root holds the whole live peak.
fn check_scope(node: &ScopeNode) -> Result<(), String> {
    let children: u64 = node.children.iter().map(|c| c.size.bytes).sum();
    if children > node.size.bytes {
        return Err(format!(
            "{}: children {children} > {}",
            node.name, node.size.bytes
        ));
    }
    if node.forward_bytes + node.backward_bytes + node.outside_bytes != node.size.bytes {
        return Err(format!("{}: phases do not add up", node.name));
    }
    node.children.iter().try_for_each(check_scope)
}

pub fn groups_add_up(m: &ModuleReport) -> Result<(), String> {
    let peak = m.memory.live_peak_bytes;
    let usage = &m.peak.usage;
    let buffers: u64 = m.peak.buffers.iter().map(|b| b.bytes).sum();
    let sources: u64 = usage.by_source.iter().map(|g| g.size.bytes).sum();
    let roles: u64 = usage.by_role.iter().map(|g| g.size.bytes).sum();
    let counted: usize = usage.by_source.iter().map(|g| g.size.buffers).sum();
    for (what, bytes) in [
        ("buffers", buffers),
        ("by_source", sources),
        ("by_role", roles),
        ("by_scope", usage.by_scope.size.bytes),
    ] {
        if bytes != peak {
            return Err(format!("{}: {what} {bytes} != live peak {peak}", m.key));
        }
    }
    if counted != m.peak.buffers.len() {
        return Err(format!("{}: by_source counts {counted} buffers", m.key));
    }
    let sorted = usage
        .by_source
        .windows(2)
        .all(|w| w[0].size.bytes >= w[1].size.bytes);
    if !sorted {
        return Err(format!("{}: by_source not largest first", m.key));
    }
    check_scope(&usage.by_scope).map_err(|e| format!("{}: {e}", m.key))
}

#[test]
fn every_sample_peak_grouping_adds_up_to_the_live_peak() {
    for path in crate::support::sample_modules() {
        let module = hlomem::load_module(&path).unwrap();
        let report = hlomem::pipeline::summarize(&module);
        groups_add_up(&report).unwrap();
    }
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_peak_grouping_adds_up_to_the_live_peak() {
    let root = std::path::PathBuf::from(std::env::var_os("HLOMEM_CORPUS").expect("HLOMEM_CORPUS"));
    let report = hlomem::analyze_paths(
        &[root.join("corpus/cases"), root.join("accelerators")],
        hlomem::AnalyzeOptions::default(),
    );
    assert!(
        report.modules.len() > 40,
        "{} modules",
        report.modules.len()
    );
    let errors: Vec<String> = report
        .modules
        .iter()
        .filter_map(|m| groups_add_up(m).err())
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The flax GPT sample (samples/gen_samples.py, `flax_gpt_train`): the peak is
/// in the backward pass; the dropout masks are flax's `stochastic.py` line
/// called from the model's own `nn.Dropout` lines; the largest group is the
/// loss line's logits gradient; the optimizer state is an argument of its own.
#[test]
fn flax_training_step_groups_name_the_users_lines() {
    let dump = crate::support::root().join("samples/flax_gpt_train/dump");
    let report = hlomem::analyze_paths(&[dump], hlomem::AnalyzeOptions::default());
    let m = &report.modules[0];
    let usage = &m.peak.usage;
    assert!(usage.training && !usage.rematerialized);
    assert_eq!(usage.phase, Some(hlomem::usage::Phase::Backward));
    let top = &usage.by_source[0];
    assert!(
        top.source
            .as_deref()
            .unwrap()
            .ends_with("samples/gen_samples.py:885"),
        "{top:?}"
    );
    assert_eq!(
        top.function.as_deref(),
        Some("build_flax_case.<locals>.train_step.<locals>.loss_fn")
    );
    let dropout: Vec<_> = usage
        .by_source
        .iter()
        .filter(|g| {
            g.source
                .as_deref()
                .is_some_and(|s| s.ends_with("flax/linen/stochastic.py:105"))
        })
        .collect();
    // One group per calling line: the two nn.Dropout lines of Block.
    let callers: Vec<&str> = dropout.iter().filter_map(|g| g.caller.as_deref()).collect();
    assert_eq!(callers.len(), 2, "{dropout:?}");
    assert!(
        callers
            .iter()
            .all(|c| c.ends_with("gen_samples.py:853") || c.ends_with("gen_samples.py:856")),
        "{callers:?}"
    );
    let role = |r: Role| {
        usage
            .by_role
            .iter()
            .find(|g| g.role == r)
            .map(|g| g.size.bytes)
    };
    assert!(role(Role::Activations).unwrap() > role(Role::Gradients).unwrap());
    let optimizer = usage
        .by_role
        .iter()
        .find(|g| g.role == Role::OptimizerState)
        .unwrap();
    assert_eq!(optimizer.arguments[0].name, "opt_state");
    // Both blocks appear as scopes under the model.
    let model = &usage
        .by_scope
        .children
        .iter()
        .find(|c| c.name == "train_step")
        .unwrap();
    let gpt = model.children.iter().find(|c| c.name == "GPT").unwrap();
    let blocks: Vec<&str> = gpt
        .children
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| n.starts_with("h_"))
        .collect();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    groups_add_up(m).unwrap();
}
