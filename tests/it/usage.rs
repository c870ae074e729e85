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
    // A group named for an argument holds that argument's arrays and
    // nothing else: XLA's copies of it are buffers of their own, in a group
    // of their own (issue #37: `argument params` once read 581 MiB of a
    // 473 MiB argument).
    for g in &usage.by_source {
        let Some(name) = g.argument.as_ref().filter(|_| !g.layout_copy) else {
            continue;
        };
        if let Some(a) = m.arguments.iter().find(|a| &a.name == name) {
            if g.size.bytes > a.bytes || g.size.buffers > a.parameters {
                return Err(format!(
                    "{}: group `{}` holds {} B in {} buffers, the argument {} B in {} arrays",
                    m.key, g.place, g.size.bytes, g.size.buffers, a.bytes, a.parameters
                ));
            }
        }
    }
    check_scope(&usage.by_scope).map_err(|e| format!("{}: {e}", m.key))
}

/// A copy XLA makes of an argument keeps the argument's `op_name` (layout
/// assignment copies the metadata). At the peak it is a buffer beside the
/// argument's own and is shown as a row of its own, named as a copy, and
/// the argument's row stays the argument's size. The module is accepted by
/// XLA's parser (`hlo_module_from_text`, jaxlib 0.10.2).
#[test]
fn layout_copies_of_an_argument_are_a_row_of_their_own() {
    let text = r#"HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[1024,1024]{1,0}, f32[1024,1024]{1,0})->f32[1024,1024]{1,0}}

ENTRY %main (p0: f32[1024,1024], p1: f32[1024,1024]) -> f32[1024,1024] {
  %p0 = f32[1024,1024]{1,0} parameter(0), metadata={op_name="params['w']"}
  %p1 = f32[1024,1024]{1,0} parameter(1), metadata={op_name="x"}
  %copy = f32[1024,1024]{0,1} copy(%p0), metadata={op_name="params['w']"}
  ROOT %add = f32[1024,1024]{1,0} add(%copy, %p1), metadata={op_name="jit(step)/add" source_file="train.py" source_line=3}
}
"#;
    let module = hlomem::parse_text("step.txt", text.to_string()).unwrap();
    let report = hlomem::pipeline::summarize(&module);
    groups_add_up(&report).unwrap();
    let usage = &report.peak.usage;
    let row = |place: &str| {
        usage
            .by_source
            .iter()
            .find(|g| g.place == place)
            .unwrap_or_else(|| panic!("no row {place}: {:?}", usage.by_source))
    };
    let params = row("argument `params`");
    assert_eq!((params.size.bytes, params.size.buffers), (4 << 20, 1));
    let copies = row("layout copies of argument `params` (made by XLA)");
    assert_eq!((copies.size.bytes, copies.size.buffers), (4 << 20, 1));
    assert!(copies.layout_copy && copies.argument.as_deref() == Some("params"));
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
