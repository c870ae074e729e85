//! The text report: short, aligned, sizes as XLA prints them.

use std::io::{self, Write};

use super::RenderOptions;
use crate::report::{ModuleReport, Report};
use crate::units::human_bytes;

pub fn render(report: &Report, options: RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    for (i, module) in report.modules.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        render_module(module, options, out)?;
    }
    Ok(())
}

fn bold(text: &str, options: RenderOptions) -> String {
    if options.color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn render_module(m: &ModuleReport, options: RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{} {}",
        bold("module", options),
        bold(&m.name, options)
    )?;
    writeln!(out, "  file          {}", m.file)?;
    let scheduled = if m.scheduled {
        "scheduled (after optimizations)"
    } else {
        "not scheduled"
    };
    writeln!(
        out,
        "  size          {} computations, {} instructions, {scheduled}",
        m.computations, m.instructions
    )?;
    if m.num_partitions > 1 || m.replica_count > 1 {
        writeln!(
            out,
            "  devices       {} partitions x {} replicas; sizes below are per device",
            m.num_partitions, m.replica_count
        )?;
    }
    if !m.unknown_opcodes.is_empty() {
        let list: Vec<String> = m
            .unknown_opcodes
            .iter()
            .map(|(op, n)| format!("{op} ({n})"))
            .collect();
        writeln!(
            out,
            "  unknown ops   {} (parsed generically)",
            list.join(", ")
        )?;
    }

    writeln!(out)?;
    writeln!(
        out,
        "  parameters: {} in {}",
        m.parameters.len(),
        human_bytes(m.parameter_bytes)
    )?;
    let rows: Vec<[String; 5]> = m
        .parameters
        .iter()
        .map(|p| {
            [
                format!("#{}", p.number),
                p.op_name.clone().unwrap_or_else(|| p.name.clone()),
                p.shape.to_string(),
                human_bytes(p.bytes),
                p.source.clone().unwrap_or_default(),
            ]
        })
        .collect();
    write_table(out, &rows)?;

    writeln!(out)?;
    writeln!(
        out,
        "  outputs: {} in {}",
        m.outputs.len(),
        human_bytes(m.output_bytes)
    )?;
    let rows: Vec<[String; 5]> = m
        .outputs
        .iter()
        .map(|o| {
            let index: Vec<String> = o.index.iter().map(u64::to_string).collect();
            let alias = o
                .aliases_parameter
                .as_ref()
                .map(|a| format!("in parameter #{}'s buffer (donated)", a.number))
                .unwrap_or_default();
            [
                format!("{{{}}}", index.join(",")),
                o.shape.to_string(),
                human_bytes(o.bytes),
                alias,
                String::new(),
            ]
        })
        .collect();
    write_table(out, &rows)
}

/// Left-aligned columns, two spaces apart, trailing blanks trimmed.
fn write_table<const N: usize>(out: &mut dyn Write, rows: &[[String; N]]) -> io::Result<()> {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from("   ");
        for (cell, w) in row.iter().zip(widths) {
            line.push(' ');
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', w - cell.chars().count() + 1));
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}
