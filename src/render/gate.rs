//! `hlomem check` and `hlomem diff` in every format.

use std::io::{self, Write};

use super::{GateFormat, RenderOptions};
use crate::gate::{CheckResult, CheckedModule, DiffReport, FindingRef};
use crate::units::{human_bytes, human_bytes_signed};

pub fn render_check(
    r: &CheckResult,
    format: GateFormat,
    _options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let scope = if r.whole_program {
        "for the whole program (per-device numbers times devices)"
    } else {
        "per device"
    };
    let budget = |b: u64| format!("the budget of {} {scope}", human_bytes(b));
    // "needs 17.20GiB of HBM per device, 1.20GiB over the budget of 16.00GiB per device"
    let over_budget = |m: &CheckedModule, over: u64| {
        format!(
            "needs {}{} of {}{}, {} over {}",
            about(m),
            human_bytes(m.bytes),
            m.memory.name(),
            if r.whole_program && m.devices > 1 {
                format!(" on {} devices", m.devices)
            } else if m.devices > 1 {
                " per device".to_string()
            } else {
                String::new()
            },
            human_bytes(over),
            budget(r.budget_bytes.unwrap_or(0))
        )
    };
    let forbidden = |f: &FindingRef| format!("{} {} (--fail-on): {}", f.code, f.name, f.message);
    let failing: Vec<&CheckedModule> = r
        .modules
        .iter()
        .filter(|m| m.over_by.is_some() || !m.failing_findings.is_empty())
        .collect();
    match format {
        GateFormat::Json => return super::json::render(r, out),
        GateFormat::Github => {
            for m in &r.modules {
                if let Some(over) = m.over_by {
                    writeln!(
                        out,
                        "::error file={},title=hlomem check {}::{}",
                        m.file,
                        m.key,
                        over_budget(m, over)
                    )?;
                }
                for f in &m.failing_findings {
                    writeln!(
                        out,
                        "::error file={},title=hlomem check {}::{}",
                        m.file,
                        m.key,
                        forbidden(f)
                    )?;
                }
                // Findings the gate does not fail on are still worth a look.
                for f in &m.other_findings {
                    writeln!(
                        out,
                        "::warning file={},title={} {} in {}::{}",
                        m.file, f.code, f.name, m.key, f.message
                    )?;
                }
            }
            if r.errors > 0 {
                writeln!(
                    out,
                    "::error title=hlomem check::{} (see the errors in the log)",
                    unanalyzed(r.errors)
                )?;
            }
            if r.passed {
                writeln!(
                    out,
                    "::notice title=hlomem check::{}",
                    passed_summary(r, &budget)
                )?;
            }
            return Ok(());
        }
        GateFormat::Text | GateFormat::Markdown => {}
    }
    let md = format == GateFormat::Markdown;
    if r.passed {
        writeln!(
            out,
            "{}ok: {}",
            if md { "✅ " } else { "" },
            passed_summary(r, &budget)
        )?;
    } else {
        let over = r.over_budget().count();
        let forbidden_count = r.with_forbidden_findings().count();
        let mut causes = Vec::new();
        if over > 0 {
            causes.push(format!(
                "{} over {}",
                modules(over),
                budget(r.budget_bytes.unwrap_or(0))
            ));
        }
        if forbidden_count > 0 {
            causes.push(format!(
                "{} with a finding --fail-on names ({})",
                modules(forbidden_count),
                r.fail_on.join(", ")
            ));
        }
        if r.errors > 0 {
            causes.push(unanalyzed(r.errors));
        }
        writeln!(
            out,
            "{}FAILED: {} ({} checked{})",
            if md { "❌ " } else { "" },
            causes.join(", and "),
            modules(r.modules.len()),
            if r.errors > 0 {
                "; the errors are above"
            } else {
                ""
            }
        )?;
        for m in &failing {
            writeln!(out)?;
            let line = match m.over_by {
                Some(over) => over_budget(m, over),
                None => format!(
                    "needs {}{} of {}",
                    about(m),
                    human_bytes(m.bytes),
                    m.memory.name()
                ),
            };
            writeln!(out, "{}{}: {line}", if md { "- " } else { "  " }, m.key)?;
            for f in &m.failing_findings {
                writeln!(out, "{}{}", if md { "  - " } else { "    " }, forbidden(f))?;
            }
            for f in &m.other_findings {
                writeln!(
                    out,
                    "{}{} {} ({} at stake): {}",
                    if md { "  - " } else { "    " },
                    f.code,
                    f.name,
                    human_bytes(f.bytes),
                    f.message
                )?;
            }
        }
    }
    Ok(())
}

/// "about " before a figure hlomem had to guess (`CheckedModule::exact`).
fn about(m: &CheckedModule) -> &'static str {
    if m.exact {
        ""
    } else {
        "about "
    }
}

/// "1 file could not be analyzed".
fn unanalyzed(n: usize) -> String {
    match n {
        1 => "1 file could not be analyzed".to_string(),
        n => format!("{n} files could not be analyzed"),
    }
}

/// "3 modules within the budget of 16.00GiB per device; largest m needs 9.1GiB of HBM".
fn passed_summary(r: &CheckResult, budget: &dyn Fn(u64) -> String) -> String {
    let mut parts = Vec::new();
    if let Some(b) = r.budget_bytes {
        parts.push(format!("{} within {}", modules(r.modules.len()), budget(b)));
    }
    if !r.fail_on.is_empty() {
        // "failing": an expected finding (below its rule's severity) may be
        // there, listed with the others, without failing the check.
        parts.push(format!(
            "no failing {} finding in {}",
            r.fail_on.join(", "),
            modules(r.modules.len())
        ));
    }
    if let Some(m) = r.modules.first() {
        parts.push(format!(
            "largest {} needs {}{} of {}",
            m.key,
            about(m),
            human_bytes(m.bytes),
            m.memory.name()
        ));
    }
    parts.join("; ")
}

/// Changed groups listed per module and breakdown without `--verbose`.
const DIFF_GROUPS_SHOWN: usize = 6;

pub fn render_diff(
    d: &DiffReport,
    format: GateFormat,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let md = match format {
        GateFormat::Json => return super::json::render(d, out),
        GateFormat::Github => return render_diff_github(d, out),
        GateFormat::Markdown => true,
        GateFormat::Text => false,
    };
    let item = if md { "- " } else { "  " };
    if let Some(limit) = d.fail_over {
        let over: Vec<&crate::gate::ModuleDiff> = d
            .modules
            .iter()
            .filter(|m| m.over_limit_by.is_some())
            .collect();
        if over.is_empty() {
            writeln!(
                out,
                "{}ok: no module grew by more than --fail-over {}",
                if md { "✅ " } else { "" },
                human_bytes(limit)
            )?;
        } else {
            writeln!(
                out,
                "{}FAILED: {} grew by more than --fail-over {}",
                if md { "❌ " } else { "" },
                modules(over.len()),
                human_bytes(limit)
            )?;
            for m in over {
                writeln!(
                    out,
                    "{item}{}: total {} → {} ({}), {} over the limit",
                    m.name,
                    human_bytes(m.total_bytes.0),
                    human_bytes(m.total_bytes.1),
                    human_bytes_signed(m.growth()),
                    human_bytes(m.over_limit_by.unwrap_or(0))
                )?;
            }
        }
        writeln!(out)?;
    }
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
        // What changed at the peak, by group; single buffers only with --verbose.
        for (label, changes) in [
            ("source line", &m.peak_by_source),
            ("role", &m.peak_by_role),
        ] {
            let shown = if options.verbose {
                usize::MAX
            } else {
                DIFF_GROUPS_SHOWN
            };
            for c in changes.iter().take(shown) {
                writeln!(
                    out,
                    "{item}at the peak, by {label}: {} {} → {} ({})",
                    crate::render::one_line(&c.group),
                    human_bytes(c.old_bytes),
                    human_bytes(c.new_bytes),
                    human_bytes_signed(c.change())
                )?;
            }
            if changes.len() > shown {
                writeln!(
                    out,
                    "{item}... and {} more {label}s changed (--verbose)",
                    changes.len() - shown
                )?;
            }
        }
        if options.verbose {
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
        } else if !m.new_peak_buffers.is_empty() || !m.grown_peak_buffers.is_empty() {
            writeln!(
                out,
                "{item}{} buffers new at the peak, {} grown (--verbose lists them)",
                m.new_peak_buffers.len(),
                m.grown_peak_buffers.len()
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

/// `diff --format github`: `::error` where a module grew past `--fail-over`.
fn render_diff_github(d: &DiffReport, out: &mut dyn Write) -> io::Result<()> {
    for m in &d.modules {
        let growth = m.growth();
        if let (Some(over), Some(limit)) = (m.over_limit_by, d.fail_over) {
            writeln!(
                out,
                "::error file={},title=hlomem diff {}::total grew by {} ({} → {}), {} more than --fail-over {}",
                m.new_file,
                m.name,
                human_bytes_signed(growth),
                human_bytes(m.total_bytes.0),
                human_bytes(m.total_bytes.1),
                human_bytes(over),
                human_bytes(limit)
            )?;
            continue;
        }
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
