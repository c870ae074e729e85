//! "What holds the live peak": the peak's groups by source line, role and
//! scope, each cut to a screen with "N more" lines.

use std::io::{self, Write};

use super::{bold, write_table, write_wrapped};
use crate::render::{one_line, short_shape, RenderOptions};
use crate::report::ModuleReport;
use crate::units::human_bytes;
use crate::usage::{GroupSize, Phase, Role, ScopeNode};

/// Groups listed per breakdown (all with `--verbose`).
const GROUPS_SHOWN: usize = 8;
/// Scope tree depth below the program's own scope, and children per scope.
const SCOPE_DEPTH: usize = 2;
const SCOPE_CHILDREN: usize = 6;
/// Scopes under this share of the peak are folded into "N more".
const SCOPE_MIN_SHARE: f64 = 0.01;

fn percent(size: &GroupSize) -> String {
    format!("{:.1}%", size.share * 100.0)
}

fn buffers(n: usize) -> String {
    if n == 1 {
        "1 buffer".into()
    } else {
        format!("{n} buffers")
    }
}

pub(super) fn write_peak(
    m: &ModuleReport,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let usage = &m.peak.usage;
    let when = match (usage.training, usage.phase) {
        (true, Some(Phase::Backward)) => ", in the backward pass",
        (true, Some(Phase::Forward)) => ", in the forward pass",
        (true, Some(Phase::Outside)) => ", outside the gradient (the update)",
        _ => "",
    };
    let at = m
        .peak
        .instruction
        .as_deref()
        .map(|i| format!(" at {i}"))
        .unwrap_or_default();
    writeln!(out)?;
    writeln!(
        out,
        "  {} {}: {} live{at} (step {} of {}{when})",
        bold("what holds the live peak,", options),
        human_bytes(m.memory.live_peak_bytes),
        buffers(m.peak.buffers.len()),
        m.peak.time,
        m.timeline.length,
    )?;
    for d in &m.differences {
        if let crate::report::differences::Difference::ScheduleIsNotInstructionCount { .. } = d {
            writeln!(out, "    ({})", d.message())?;
        }
    }
    let shown = if options.verbose {
        usize::MAX
    } else {
        GROUPS_SHOWN
    };

    writeln!(out, "    by source line (the library line, then yours)")?;
    let mut rows = Vec::new();
    for g in usage.by_source.iter().take(shown) {
        let place = one_line(&g.place());
        rows.push([
            percent(&g.size),
            human_bytes(g.size.bytes),
            buffers(g.size.buffers),
            short_shape(&g.size.shape),
            place,
        ]);
    }
    write_table(out, &rows)?;
    more_groups(
        out,
        usage.by_source.iter().skip(shown).map(|g| g.size.bytes),
    )?;
    if let Some(hint) = &usage.source_hint {
        write_wrapped(out, "    (", "     ", &format!("{})", hint.message()))?;
    }

    writeln!(out, "    by role")?;
    let rows: Vec<[String; 4]> = usage
        .by_role
        .iter()
        .map(|g| {
            let mut what = g.role.describe().to_string();
            if g.role == Role::Activations && usage.phase == Some(Phase::Backward) {
                what.push_str(", kept for the backward pass");
            }
            let arguments: Vec<String> = g
                .arguments
                .iter()
                .take(3)
                .map(|a| format!("{} {}", a.name, human_bytes(a.bytes)))
                .collect();
            if !arguments.is_empty()
                && matches!(
                    g.role,
                    Role::Parameters | Role::OptimizerState | Role::OtherInputs
                )
            {
                what.push_str(&format!(" ({})", arguments.join(", ")));
            }
            [
                percent(&g.size),
                human_bytes(g.size.bytes),
                buffers(g.size.buffers),
                what,
            ]
        })
        .collect();
    write_table(out, &rows)?;

    writeln!(
        out,
        "    by scope (op_name path; forward / backward / outside the gradient)"
    )?;
    let mut rows = Vec::new();
    for child in &usage.by_scope.children {
        scope_rows(child, 0, options.verbose, &mut rows);
    }
    write_table(out, &rows)?;
    if usage.rematerialized {
        writeln!(
            out,
            "    (the program already rematerializes: some ops are inside jax.checkpoint / remat)"
        )?;
    }
    Ok(())
}

fn more_groups(out: &mut dyn Write, rest: impl Iterator<Item = u64>) -> io::Result<()> {
    let (n, bytes) = rest.fold((0usize, 0u64), |(n, b), x| (n + 1, b.saturating_add(x)));
    if n > 0 {
        writeln!(
            out,
            "     ... and {n} more ({}; --verbose or --format json lists them)",
            human_bytes(bytes)
        )?;
    }
    Ok(())
}

/// A scope and its largest children, indented; a scope with one child is
/// joined to it (`train_step/GPT`) so the tree shows where it branches.
fn scope_rows(node: &ScopeNode, depth: usize, verbose: bool, rows: &mut Vec<[String; 5]>) {
    let mut node = node;
    let mut name = node.name.clone();
    while let [only] = node.children.as_slice() {
        name = format!("{name}/{}", only.name);
        node = only;
    }
    let phases: Vec<String> = [
        (node.forward_bytes, "fwd"),
        (node.backward_bytes, "bwd"),
        (node.outside_bytes, "out"),
    ]
    .iter()
    .filter(|(b, _)| *b > 0)
    .map(|(b, p)| format!("{p} {}", human_bytes(*b)))
    .collect();
    rows.push([
        format!("{}{}", "  ".repeat(depth), one_line(&name)),
        percent(&node.size),
        human_bytes(node.size.bytes),
        buffers(node.size.buffers),
        if phases.len() > 1 {
            phases.join(" / ")
        } else {
            String::new()
        },
    ]);
    if depth + 1 > SCOPE_DEPTH && !verbose {
        return;
    }
    let shown = if verbose {
        node.children.len()
    } else {
        node.children
            .iter()
            .take(SCOPE_CHILDREN)
            .take_while(|c| c.size.share >= SCOPE_MIN_SHARE)
            .count()
    };
    for child in node.children.iter().take(shown) {
        scope_rows(child, depth + 1, verbose, rows);
    }
    let rest = node.children.iter().skip(shown);
    let (n, bytes) = rest.fold((0usize, 0u64), |(n, b), c| {
        (n + 1, b.saturating_add(c.size.bytes))
    });
    if n > 0 {
        rows.push([
            format!("{}... {n} more", "  ".repeat(depth + 1)),
            String::new(),
            human_bytes(bytes),
            String::new(),
            String::new(),
        ]);
    }
}
