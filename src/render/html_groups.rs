//! The HTML report's grouped view of the live peak: one stacked bar per
//! breakdown (source line, scope, role), each segment naming its group on
//! hover and linking to the group's row, whose buffers follow it.

use std::io::{self, Write};

use super::html::escape;
use crate::report::ModuleReport;
use crate::units::human_bytes;
use crate::usage::{GroupSize, ScopeNode};

/// Segments per bar; the rest is one grey segment.
const SEGMENTS: usize = 12;

fn color(i: usize) -> String {
    // Golden-angle hues: neighbours differ, any count works.
    format!("hsl({:.0},55%,55%)", (i as f64 * 137.508) % 360.0)
}

struct Row<'a> {
    label: String,
    size: &'a GroupSize,
}

fn bar(
    out: &mut dyn Write,
    module: usize,
    kind: &str,
    title: &str,
    rows: &[Row],
) -> io::Result<()> {
    writeln!(
        out,
        "<h4>{title}</h4><div class=\"stack\" role=\"img\" aria-label=\"{title}\">"
    )?;
    let mut rest = 0u64;
    let mut rest_share = 0.0;
    for (i, r) in rows.iter().enumerate() {
        if i >= SEGMENTS {
            rest += r.size.bytes;
            rest_share += r.size.share;
            continue;
        }
        writeln!(
            out,
            "<a class=\"seg\" href=\"#m{module}-{kind}-{i}\" style=\"width:{:.3}%;background:{}\" \
             title=\"{}: {} ({:.1}%)\"></a>",
            r.size.share * 100.0,
            color(i),
            escape(&r.label),
            human_bytes(r.size.bytes),
            r.size.share * 100.0
        )?;
    }
    if rest > 0 {
        writeln!(
            out,
            "<span class=\"seg\" style=\"width:{:.3}%;background:#ccc\" title=\"{} more groups: {}\"></span>",
            rest_share * 100.0,
            rows.len() - SEGMENTS,
            human_bytes(rest)
        )?;
    }
    writeln!(out, "</div><table class=\"groups\">")?;
    for (i, r) in rows.iter().enumerate().take(SEGMENTS * 2) {
        writeln!(
            out,
            "<tr id=\"m{module}-{kind}-{i}\"><td><i style=\"background:{}\"></i></td><td>{:.1}%</td><td>{}</td>\
             <td>{}</td><td><code>{}</code></td><td>{}</td><td><small>largest: {}</small></td></tr>",
            if i < SEGMENTS { color(i) } else { "#ccc".into() },
            r.size.share * 100.0,
            human_bytes(r.size.bytes),
            match r.size.buffers {
                1 => "1 buffer".to_string(),
                n => format!("{n} buffers"),
            },
            escape(&r.size.shape),
            escape(&r.label),
            escape(&r.size.largest)
        )?;
    }
    writeln!(out, "</table>")
}

/// The scope tree cut where it branches (single-child chains joined), a
/// scope holding over half the peak opened into its children.
fn scope_rows(root: &ScopeNode) -> Vec<Row<'_>> {
    fn collapse<'a>(prefix: &str, mut node: &'a ScopeNode) -> (String, &'a ScopeNode) {
        let mut name = if prefix.is_empty() {
            node.name.clone()
        } else {
            format!("{prefix}/{}", node.name)
        };
        while let [only] = node.children.as_slice() {
            name = format!("{name}/{}", only.name);
            node = only;
        }
        (name, node)
    }
    let mut open: Vec<(String, &ScopeNode)> =
        root.children.iter().map(|c| collapse("", c)).collect();
    let mut rows = Vec::new();
    while let Some((name, node)) = open.pop() {
        if node.size.share > 0.5 && !node.children.is_empty() {
            open.extend(node.children.iter().map(|c| collapse(&name, c)));
        } else {
            rows.push(Row {
                label: name,
                size: &node.size,
            });
        }
    }
    rows.sort_by(|a, b| b.size.bytes.cmp(&a.size.bytes).then(a.label.cmp(&b.label)));
    rows
}

pub(super) fn write(module: usize, m: &ModuleReport, out: &mut dyn Write) -> io::Result<()> {
    let usage = &m.peak.usage;
    writeln!(
        out,
        "<h3>What holds the live peak: {} in {} buffers</h3>",
        human_bytes(m.memory.live_peak_bytes),
        m.peak.buffers.len()
    )?;
    let sources: Vec<Row> = usage
        .by_source
        .iter()
        .map(|g| Row {
            label: g.place(),
            size: &g.size,
        })
        .collect();
    bar(
        out,
        module,
        "src",
        "by source line (the library line ← your line)",
        &sources,
    )?;
    bar(
        out,
        module,
        "scope",
        "by scope (op_name path)",
        &scope_rows(&usage.by_scope),
    )?;
    let roles: Vec<Row> = usage
        .by_role
        .iter()
        .map(|g| Row {
            label: g.role.describe().to_string(),
            size: &g.size,
        })
        .collect();
    bar(out, module, "role", "by role", &roles)
}
