//! `hlomem check` and `hlomem diff` in every format.

use std::io::{self, Write};

use super::{Format, RenderOptions};
use crate::gate::{CheckResult, DiffReport};
use crate::units::{human_bytes, human_bytes_signed};

pub fn render_check(
    r: &CheckResult,
    format: Format,
    _options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let scope = if r.per_device {
        "per device"
    } else {
        "for the whole program (per-device numbers times devices)"
    };
    let over: Vec<_> = r
        .modules
        .iter()
        .filter(|m| m.over_by.is_some() || !m.failing_findings.is_empty())
        .collect();
    match format {
        Format::Json => return super::json::render(r, out),
        Format::Github => {
            for m in &over {
                let why = match m.over_by {
                    Some(o) => format!(
                        "needs {} of {} {scope}, {} over the budget of {}",
                        human_bytes(m.bytes),
                        m.memory,
                        human_bytes(o),
                        human_bytes(r.budget_bytes)
                    ),
                    None => format!(
                        "has findings that must not appear: {}",
                        m.failing_findings.join("; ")
                    ),
                };
                writeln!(
                    out,
                    "::error file={},title=hlomem check {}::{why}",
                    m.file, m.key
                )?;
            }
            if over.is_empty() {
                writeln!(
                    out,
                    "::notice title=hlomem check::{} within {} {scope}",
                    modules(r.modules.len()),
                    human_bytes(r.budget_bytes)
                )?;
            }
            return Ok(());
        }
        Format::Text | Format::Markdown | Format::Html => {}
    }
    let md = format == Format::Markdown;
    if r.passed {
        let largest = r
            .modules
            .first()
            .map(|m| {
                format!(
                    "; largest {} needs {} of {}",
                    m.key,
                    human_bytes(m.bytes),
                    m.memory
                )
            })
            .unwrap_or_default();
        writeln!(
            out,
            "{}ok: {} within the budget of {} {scope}{largest}",
            if md { "✅ " } else { "" },
            modules(r.modules.len()),
            human_bytes(r.budget_bytes)
        )?;
    } else {
        writeln!(
            out,
            "{}FAILED: {} of {} modules exceed the budget of {} {scope} or have forbidden findings",
            if md { "❌ " } else { "" },
            over.len(),
            r.modules.len(),
            human_bytes(r.budget_bytes)
        )?;
        for m in &over {
            writeln!(out)?;
            let devices = if m.devices > 1 {
                format!(" ({} devices)", m.devices)
            } else {
                String::new()
            };
            match m.over_by {
                Some(o) => writeln!(
                    out,
                    "{}{}: needs {} of {}{devices}, {} over",
                    if md { "- " } else { "  " },
                    m.key,
                    human_bytes(m.bytes),
                    m.memory,
                    human_bytes(o)
                )?,
                None => writeln!(
                    out,
                    "{}{}: within the budget",
                    if md { "- " } else { "  " },
                    m.key
                )?,
            }
            for f in &m.failing_findings {
                writeln!(
                    out,
                    "{}forbidden finding: {f}",
                    if md { "  - " } else { "    " }
                )?;
            }
            for f in &m.top_findings {
                writeln!(out, "{}{f}", if md { "  - " } else { "    " })?;
            }
        }
    }
    if r.errors > 0 {
        writeln!(
            out,
            "{} files could not be analyzed (see the errors above)",
            r.errors
        )?;
    }
    Ok(())
}

pub fn render_diff(
    d: &DiffReport,
    format: Format,
    _options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    if format == Format::Json {
        return super::json::render(d, out);
    }
    if format == Format::Github {
        for m in &d.modules {
            let growth = m.growth();
            let level = if growth > 0 { "warning" } else { "notice" };
            writeln!(
                out,
                "::{level} file={},title=hlomem diff {}::total {} → {} ({}); findings appeared: {}; gone: {}",
                m.new_file,
                m.name,
                human_bytes(m.total_bytes.0),
                human_bytes(m.total_bytes.1),
                human_bytes_signed(growth),
                if m.findings_appeared.is_empty() { "none".into() } else { m.findings_appeared.join(", ") },
                if m.findings_gone.is_empty() { "none".into() } else { m.findings_gone.join(", ") }
            )?;
        }
        return Ok(());
    }
    let md = matches!(format, Format::Markdown | Format::Html);
    let item = if md { "- " } else { "  " };
    for (i, m) in d.modules.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        let total = format!(
            "{} → {} ({})",
            human_bytes(m.total_bytes.0),
            human_bytes(m.total_bytes.1),
            human_bytes_signed(m.growth())
        );
        if md {
            writeln!(out, "### `{}`: {total}", m.name)?;
            writeln!(out)?;
            writeln!(out, "| | old | new | change |")?;
            writeln!(out, "|---|---:|---:|---:|")?;
        } else {
            writeln!(out, "module {}: total {total}", m.name)?;
        }
        for (label, (a, b)) in [
            ("total", m.total_bytes),
            ("temp", m.temp_bytes),
            ("arguments", m.argument_bytes),
            ("outputs", m.output_bytes),
            ("aliased", m.alias_bytes),
            ("live peak", m.live_peak_bytes),
        ] {
            let change = human_bytes_signed(i128::from(b) - i128::from(a));
            if md {
                writeln!(
                    out,
                    "| {label} | {} | {} | {change} |",
                    human_bytes(a),
                    human_bytes(b)
                )?;
            } else {
                writeln!(
                    out,
                    "  {label:<10} {:>10} → {:>10}  {change}",
                    human_bytes(a),
                    human_bytes(b)
                )?;
            }
        }
        if md {
            writeln!(out)?;
        }
        for (what, bytes) in &m.new_peak_buffers {
            writeln!(
                out,
                "{item}new at the peak: {what} ({})",
                human_bytes(*bytes)
            )?;
        }
        for (what, before, after) in &m.grown_peak_buffers {
            writeln!(
                out,
                "{item}grew at the peak: {what} ({} → {})",
                human_bytes(*before),
                human_bytes(*after)
            )?;
        }
        for f in &m.findings_appeared {
            writeln!(out, "{item}finding appeared: {f}")?;
        }
        for f in &m.findings_gone {
            writeln!(out, "{item}finding gone: {f}")?;
        }
    }
    for k in &d.removed {
        writeln!(out, "{item}only in the old dump: {k}")?;
    }
    for k in &d.added {
        writeln!(out, "{item}only in the new dump: {k}")?;
    }
    Ok(())
}

/// `1 module`, `3 modules`.
fn modules(n: usize) -> String {
    if n == 1 {
        "1 module".to_string()
    } else {
        format!("{n} modules")
    }
}
