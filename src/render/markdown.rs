//! `hlomem analyze --format markdown`: tables for a pull-request comment.

use std::io::{self, Write};

use super::{one_line, sized, RenderOptions};
use crate::analysis::ChipFigures;
use crate::report::{ModuleReport, Report};
use crate::units::human_bytes;

pub fn render(report: &Report, options: RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    let modules = report.largest_first();
    if modules.len() > 1 {
        writeln!(out, "## hlomem: {} modules, largest first", modules.len())?;
        writeln!(out)?;
        writeln!(
            out,
            "| module | device memory | temp | arguments | outputs | aliased | top finding |"
        )?;
        writeln!(out, "|---|---:|---:|---:|---:|---:|---|")?;
        for m in &modules {
            let finding = m
                .findings
                .first()
                .map(|f| format!("{} {} ({})", f.code, f.name, human_bytes(f.bytes)));
            writeln!(
                out,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                m.key,
                human_bytes(m.memory.device_bytes),
                human_bytes(m.memory.temp_bytes),
                human_bytes(m.memory.argument_bytes),
                human_bytes(m.memory.output_bytes),
                human_bytes(m.memory.alias_bytes),
                finding.unwrap_or_default()
            )?;
        }
        writeln!(out)?;
    }
    let top = options.top.max(1);
    for (i, m) in modules.iter().take(top).enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        render_module(m, options, out)?;
    }
    // --verify covers every module, whatever --top shows in detail.
    for m in modules.iter().skip(top) {
        if let Some(v) = m.verification.as_ref().filter(|v| !v.agrees()) {
            writeln!(
                out,
                "\n**`{}`: {} of {} numbers disagree with XLA's own reports:**",
                m.key,
                v.disagreements.len(),
                v.checked
            )?;
            for d in &v.disagreements {
                writeln!(out, "- {}: hlomem {}, XLA {}", d.what, d.hlomem, d.xla)?;
            }
        }
    }
    for e in &report.errors {
        let at = match (e.line, e.column) {
            (Some(l), Some(c)) => format!(":{l}:{c}"),
            _ => String::new(),
        };
        writeln!(out, "\n> **error** in `{}{at}`: {}", e.file, e.message)?;
    }
    Ok(())
}

fn render_module(m: &ModuleReport, options: RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "### `{}`", m.short_name)?;
    writeln!(out)?;
    writeln!(
        out,
        "`{}`: {} computations, {} instructions; front-end {}",
        m.file,
        m.computations,
        m.instructions,
        m.frontend.describe()
    )?;
    if m.num_partitions > 1 || m.replica_count > 1 {
        writeln!(
            out,
            "({} partitions x {} replicas: sizes are per device)",
            m.num_partitions, m.replica_count
        )?;
    }
    writeln!(out)?;
    let mem = &m.memory;
    writeln!(
        out,
        "| total | arguments | outputs | aliased | temp | live peak |"
    )?;
    writeln!(out, "|---:|---:|---:|---:|---:|---:|")?;
    // A figure hlomem cannot know exactly reads "about", and why follows.
    let by_chip = |of: fn(&ChipFigures) -> u64| sized(of(&mem.figures()), !mem.depends_on_chip(of));
    writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} |",
        sized(mem.total_bytes, mem.total_exact),
        by_chip(|f| f.argument_bytes),
        by_chip(|f| f.output_bytes),
        by_chip(|f| f.alias_bytes),
        sized(mem.temp_bytes, mem.temp_exact()),
        sized(mem.live_peak_bytes, mem.live_peak_exact())
    )?;
    if !mem.total_exact {
        writeln!(out)?;
        let mut why: Vec<String> = mem
            .device_estimates
            .iter()
            .map(|e| e.describe(options.interface))
            .collect();
        if mem
            .by_space
            .iter()
            .any(|s| s.color != 0 && !s.exact && s.bytes > 0)
        {
            why.push("the TPU on-chip memory spaces in the total are hlomem's estimate".into());
        }
        writeln!(out, "_About: {}._", why.join("; "))?;
    }
    for d in &m.differences {
        if let crate::report::differences::Difference::TotalAboveLivePeak { .. } = d {
            writeln!(out)?;
            writeln!(out, "_{}_", d.message())?;
        }
    }
    if !m.peak.buffers.is_empty() {
        let usage = &m.peak.usage;
        writeln!(out)?;
        writeln!(
            out,
            "**What holds the live peak** ({} in {} buffers, at `{}`), by source line:",
            human_bytes(m.memory.live_peak_bytes),
            m.peak.buffers.len(),
            m.peak.instruction.as_deref().unwrap_or("?")
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "| share | bytes | buffers | largest | source line ← your line |"
        )?;
        writeln!(out, "|---:|---:|---:|---|---|")?;
        let shown = if options.verbose { usize::MAX } else { 8 };
        for g in usage.by_source.iter().take(shown) {
            writeln!(
                out,
                "| {:.1}% | {} | {} | `{}` | {} |",
                g.size.share * 100.0,
                human_bytes(g.size.bytes),
                g.size.buffers,
                super::short_shape(&g.size.shape),
                one_line(&g.place()).replace('|', "\\|")
            )?;
        }
        if usage.by_source.len() > shown {
            writeln!(
                out,
                "| | | | | {} more lines |",
                usage.by_source.len() - shown
            )?;
        }
        if let Some(hint) = &usage.source_hint {
            writeln!(out)?;
            writeln!(out, "_{}_", hint.message())?;
        }
        if options.verbose {
            writeln!(out)?;
            writeln!(out, "| size | kind | shape | buffer | op | source |")?;
            writeln!(out, "|---:|---|---|---|---|---|")?;
            for b in &m.peak.buffers {
                writeln!(
                    out,
                    "| {} | {} | `{}` | `{}` | {} | {} |",
                    human_bytes(b.bytes),
                    b.kind.as_str(),
                    b.shape,
                    b.name,
                    b.op_name
                        .as_deref()
                        .map(|o| format!("`{}`", one_line(o)))
                        .unwrap_or_default(),
                    b.source.as_deref().unwrap_or("")
                )?;
            }
        }
        writeln!(out)?;
        writeln!(out, "By role:")?;
        writeln!(out)?;
        writeln!(out, "| share | bytes | buffers | role |")?;
        writeln!(out, "|---:|---:|---:|---|")?;
        for g in &usage.by_role {
            writeln!(
                out,
                "| {:.1}% | {} | {} | {} |",
                g.size.share * 100.0,
                human_bytes(g.size.bytes),
                g.size.buffers,
                g.role.describe()
            )?;
        }
    }
    if !m.findings.is_empty() {
        writeln!(out)?;
        writeln!(out, "| code | at stake | finding | fix |")?;
        writeln!(out, "|---|---:|---|---|")?;
        for f in &m.findings {
            let at = f
                .source
                .as_deref()
                .map(|s| format!(" (`{}`)", super::short_path(s)))
                .unwrap_or_default();
            writeln!(
                out,
                "| {} {} | {} | {}{at} | {} |",
                f.code,
                f.name,
                human_bytes(f.bytes),
                one_line(&f.message),
                f.fix
            )?;
        }
    }
    if let Some(v) = &m.verification {
        writeln!(out)?;
        if v.agrees() {
            writeln!(
                out,
                "Verified against XLA's own reports: {} numbers agree.",
                v.checked
            )?;
        } else {
            writeln!(
                out,
                "**{} of {} numbers disagree with XLA's own reports:**",
                v.disagreements.len(),
                v.checked
            )?;
            for d in &v.disagreements {
                writeln!(out, "- {}: hlomem {}, XLA {}", d.what, d.hlomem, d.xla)?;
            }
        }
    }
    Ok(())
}
