//! The text report: short, aligned, sizes as XLA prints them.

use std::io::{self, Write};

mod usage;

use super::{one_line, RenderOptions};
use crate::analysis::{ChipFigures, DeviceEstimate};
use crate::report::{ModuleReport, Report};
use crate::units::{exact_bytes, human_bytes};

/// How many parameters the text report lists when the dump names no JAX
/// arguments to group them by (`--verbose` and JSON list them all).
const LISTED: usize = 20;
/// Outputs listed without `--verbose`.
const OUTPUTS_SHOWN: usize = 5;
/// Findings, and details of each, listed without `--verbose`.
const FINDINGS_SHOWN: usize = 5;
const DETAILS_SHOWN: usize = 3;

fn more(out: &mut dyn Write, total: usize, listed: usize) -> io::Result<()> {
    if total > listed {
        writeln!(
            out,
            "     ... and {} more (--verbose or --format json lists them)",
            total - listed
        )?;
    }
    Ok(())
}

pub fn render(report: &Report, options: RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    if report.modules.len() <= 1 {
        for module in &report.modules {
            render_module(module, options, out)?;
        }
        return Ok(());
    }
    let modules = report.largest_first();
    writeln!(out, "{} modules, largest first", modules.len())?;
    // Device memory: what must fit (all of the total off TPU; HBM on TPU).
    let mut rows = vec![[
        "module".to_string(),
        "device memory".into(),
        "temp".into(),
        "arguments".into(),
        "outputs".into(),
        "aliased".into(),
        "top finding".into(),
    ]];
    for m in &modules {
        let finding = m
            .findings
            .first()
            .map(|f| format!("{} {} ({})", f.code, f.name, human_bytes(f.bytes)));
        rows.push([
            m.key.clone(),
            human_bytes(m.memory.device_bytes),
            human_bytes(m.memory.temp_bytes),
            human_bytes(m.memory.argument_bytes),
            human_bytes(m.memory.output_bytes),
            human_bytes(m.memory.alias_bytes),
            finding.unwrap_or_default(),
        ]);
    }
    write_table(out, &rows)?;
    for module in modules.iter().take(options.top) {
        writeln!(out)?;
        render_module(module, options, out)?;
    }
    let hidden = modules.len().saturating_sub(options.top);
    if hidden > 0 {
        writeln!(out)?;
        let what = match hidden {
            _ if hidden == modules.len() => "modules in the table only".to_string(),
            1 => "1 more module, in the table only".to_string(),
            n => format!("{n} more modules, in the table only"),
        };
        writeln!(
            out,
            "({what}; --top N shows the N largest in detail, --module GLOB picks some)"
        )?;
    }
    // --verify covers every module, whatever --top shows in detail.
    let verified: Vec<&&ModuleReport> = modules
        .iter()
        .filter(|m| m.verification.is_some())
        .collect();
    if !verified.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "{} of all {} modules",
            bold("verify", options),
            verified.len()
        )?;
        for m in verified {
            // Modules shown in detail above listed their disagreements there.
            let shown_above = modules
                .iter()
                .take(options.top)
                .any(|t| std::ptr::eq(*t, *m));
            if let Some(v) = &m.verification {
                write_verification(&m.key, v, !shown_above, out)?;
            }
        }
    }
    Ok(())
}

/// One module's `--verify` result on one line, and with `details` its
/// disagreements and notes below it.
fn write_verification(
    key: &str,
    v: &crate::report::verification::Verification,
    details: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
    if v.checked == 0 {
        writeln!(
            out,
            "    {key}: nothing to compare ({})",
            v.notes.join("; ")
        )?;
    } else if v.agrees() {
        writeln!(out, "    {key}: all {} numbers agree with XLA's", v.checked)?;
    } else {
        writeln!(
            out,
            "    {key}: {} of {} numbers disagree with XLA's",
            v.disagreements.len(),
            v.checked
        )?;
    }
    if details {
        for d in &v.disagreements {
            writeln!(out, "      {}: hlomem {}, XLA {}", d.what, d.hlomem, d.xla)?;
        }
    }
    Ok(())
}

/// `tpu v5e (from tiled layout f32[8]{0:T(256)})`, `cpu (assumed: ...)`; the
/// settings named are `interface`'s.
fn describe_target(target: &crate::chip::Target, interface: crate::chip::Interface) -> String {
    use crate::chip::Evidence;
    let chip = target
        .tpu_version
        .map(|v| format!(" {}", v.as_str()))
        .unwrap_or_default();
    let why = match (&target.evidence, interface.backend_setting()) {
        (Evidence::Forced, Some(flag)) => format!("as {flag} says"),
        (Evidence::Forced, None) => "as given".to_string(),
        (Evidence::Marker(marker), _) => format!("from {marker}"),
        (Evidence::Assumed, Some(flag)) => {
            format!("assumed: nothing in the text names a backend; {flag} sets it")
        }
        (Evidence::Assumed, None) => "assumed: nothing in the text names a backend".to_string(),
    };
    let chip_source = match target.chip_source {
        Some(crate::chip::ChipSource::Dump) => "; chip from the dump's target_arguments.txt".into(),
        Some(crate::chip::ChipSource::User) => match interface.chip_setting() {
            Some(flag) => format!("; chip as {flag} says"),
            None => "; chip from the compiled program".into(),
        },
        Some(crate::chip::ChipSource::Assumed) => {
            format!("; chip assumed, {}", interface.chip_hint())
        }
        None => String::new(),
    };
    format!("{}{chip} ({why}{chip_source})", target.backend)
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
        bold(&m.short_name, options)
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
    writeln!(
        out,
        "  backend       {}",
        describe_target(&m.target, options.interface)
    )?;
    write_wrapped(
        out,
        "  front-end     ",
        "                ",
        &m.frontend.describe(),
    )?;
    if m.num_partitions > 1 || m.replica_count > 1 {
        writeln!(
            out,
            "  devices       {} partitions x {} replicas; sizes below are per device",
            m.num_partitions, m.replica_count
        )?;
    }
    for note in &m.notes {
        writeln!(out, "  note          {}", note.message)?;
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

    let mem = &m.memory;
    writeln!(out)?;
    writeln!(
        out,
        "  {}",
        bold("memory (XLA's buffer assignment)", options)
    )?;
    let hbm_exact = mem.by_space.iter().all(|s| s.color != 0 || s.exact);
    let total_meaning = if mem.total_exact {
        "everything the module needs at once: XLA's \"Total bytes used\"".to_string()
    } else if !hbm_exact {
        let why: Vec<String> = mem
            .device_estimates
            .iter()
            .map(|e| e.describe(options.interface))
            .collect();
        format!("about: {}", why.join("; "))
    } else {
        "every memory space together; the on-chip ones are hlomem's estimate".to_string()
    };
    // A figure that depends on the assumed chip or libtpu says so, with the
    // bytes under each assumption.
    let by_chip = |of: fn(&ChipFigures) -> u64, meaning: &str| -> String {
        let alternatives = mem.alternatives_for(of, options.interface);
        if alternatives.is_empty() {
            return meaning.to_string();
        }
        let each: Vec<String> = alternatives
            .iter()
            .map(|a| {
                format!(
                    "{} {}, {} {} ({})",
                    exact_bytes(of(&mem.figures())),
                    a.assumed,
                    exact_bytes(of(a.other_figures)),
                    a.other,
                    a.hint
                )
            })
            .collect();
        format!("{meaning}, about: {}", each.join("; "))
    };
    let mut rows = vec![
        [
            "total".to_string(),
            human_bytes(mem.total_bytes),
            total_meaning,
        ],
        [
            "arguments".into(),
            human_bytes(mem.argument_bytes),
            by_chip(
                |f| f.argument_bytes,
                "entry parameters, held by the caller for the whole run",
            ),
        ],
        [
            "outputs".into(),
            human_bytes(mem.output_bytes),
            by_chip(
                |f| f.output_bytes,
                "buffers that may be returned to the caller",
            ),
        ],
        [
            "aliased".into(),
            human_bytes(mem.alias_bytes),
            by_chip(
                |f| f.alias_bytes,
                "donated parameters reused as outputs (counted in both above)",
            ),
        ],
        [
            "temp".into(),
            human_bytes(mem.temp_bytes),
            match mem.device_estimates.iter().find(|e| e.temp_is_about()) {
                Some(DeviceEstimate::PackingOrder(_)) => "one scratch block for intermediates, \
                     about: its packing decides (see the total)"
                    .into(),
                Some(DeviceEstimate::PieceOrder(_)) => "one scratch block for intermediates, \
                     about: the order of its pieces decides (see the total)"
                    .into(),
                Some(_) => "one scratch block for intermediates, about: what it holds is \
                     libtpu's (see the total)"
                    .into(),
                None => by_chip(
                    |f| f.temp_bytes,
                    "one scratch block for intermediates; values not live at once share it",
                ),
            },
        ],
        [
            "live peak".into(),
            human_bytes(mem.live_peak_bytes),
            if mem
                .device_estimates
                .iter()
                .any(DeviceEstimate::live_peak_is_about)
            {
                "most bytes of device memory live at one moment, about: which buffers are live \
                 when is unknown (see the total)"
                    .into()
            } else {
                by_chip(
                    |f| f.live_peak_bytes,
                    "most bytes of device memory live at one moment, each buffer once",
                )
            },
        ],
    ];
    if mem.by_space.len() > 1 {
        let mut spaces = Vec::new();
        for space in &mem.by_space {
            let meaning = match (space.color, space.exact) {
                (0, true) => "device memory (HBM): what must fit on the chip".to_string(),
                (0, false) => {
                    "device memory (HBM), about: hlomem's estimate (see the total)".to_string()
                }
                (_, true) => format!("memory space {}", space.color),
                (_, false) => {
                    let what = match space.name.as_str() {
                        "vmem" => "on-chip vector memory",
                        "smem" => "on-chip scalar memory",
                        "hbm" => "v4's space for the memory-space assignment",
                        _ => "another memory space",
                    };
                    format!("{what}, laid out before the buffer assignment: hlomem's estimate")
                }
            };
            spaces.push([
                format!("in {}", space.name),
                human_bytes(space.bytes),
                meaning,
            ]);
        }
        rows.splice(1..1, spaces);
    }
    write_table(out, &rows)?;
    for d in &m.differences {
        if let crate::report::differences::Difference::TotalAboveLivePeak { .. } = d {
            write_wrapped(out, "    ", "     ", &format!("({})", d.message()))?;
        }
    }

    if !m.peak.buffers.is_empty() {
        usage::write_peak(m, options, out)?;
    }
    if options.verbose && !m.peak.buffers.is_empty() {
        writeln!(out, "    the buffers themselves, largest first")?;
        let rows: Vec<[String; 5]> = m
            .peak
            .buffers
            .iter()
            .map(|b| {
                let index = if b.index.is_empty() {
                    String::new()
                } else {
                    let parts: Vec<String> = b.index.iter().map(u64::to_string).collect();
                    format!("{{{}}}", parts.join(","))
                };
                let what = match (b.op_name.as_deref().map(one_line), &b.source) {
                    (Some(op), Some(src)) => format!("{op} at {src}"),
                    (Some(op), None) => op,
                    (None, Some(src)) => src.clone(),
                    (None, None) => String::new(),
                };
                [
                    human_bytes(b.bytes),
                    b.kind.as_str().to_string(),
                    b.shape.to_string(),
                    format!("{}{index}", b.name),
                    what,
                ]
            })
            .collect();
        write_table(out, &rows)?;
    }

    if !m.findings.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "  {} ({}, most bytes first; hlomem explain-code CODE says more)",
            bold("findings", options),
            m.findings.len()
        )?;
        let (shown, details) = if options.verbose {
            (usize::MAX, usize::MAX)
        } else {
            (FINDINGS_SHOWN, DETAILS_SHOWN)
        };
        for f in m.findings.iter().take(shown) {
            let headline = format!(
                "{} {} [{}]: {}",
                f.code,
                f.name,
                human_bytes(f.bytes),
                one_line(&f.message)
            );
            write_wrapped(out, "    ", "        ", &headline)?;
            match (&f.instruction, &f.source) {
                (Some(i), Some(src)) => writeln!(out, "      at {i} ({})", super::short_path(src))?,
                (Some(i), None) => writeln!(out, "      at {i}")?,
                _ => {}
            }
            for e in f.details.iter().take(details) {
                write_wrapped(out, "      - ", "        ", &one_line(e))?;
            }
            if f.details.len() > details {
                writeln!(
                    out,
                    "      - ... and {} more (--verbose or --format json lists them)",
                    f.details.len() - details
                )?;
            }
            write_wrapped(out, "      fix: ", "           ", &one_line(&f.fix))?;
        }
        if m.findings.len() > shown {
            let rest = &m.findings[shown..];
            let bytes = rest.iter().map(|f| f.bytes).fold(0u64, u64::saturating_add);
            writeln!(
                out,
                "    ... and {} more findings ({} at stake; --verbose lists them)",
                rest.len(),
                human_bytes(bytes)
            )?;
        }
    }

    writeln!(out)?;
    writeln!(
        out,
        "  parameters: {} in {}",
        m.parameters.len(),
        human_bytes(m.parameter_shape_bytes)
    )?;
    if !m.arguments.is_empty() && !options.verbose {
        // By JAX argument: what donate_argnums names.
        let rows: Vec<[String; 4]> = m
            .arguments
            .iter()
            .map(|a| {
                let donated = match a.donated {
                    0 => "not donated".to_string(),
                    n if n == a.parameters => "donated".to_string(),
                    n => format!("{n} of them donated"),
                };
                [
                    format!("argument {} `{}`", a.argnum, one_line(&a.name)),
                    if a.parameters == 1 {
                        "1 array".into()
                    } else {
                        format!("{} arrays", a.parameters)
                    },
                    human_bytes(a.bytes),
                    donated,
                ]
            })
            .collect();
        write_table(out, &rows)?;
    } else {
        let listed = if options.verbose { usize::MAX } else { LISTED };
        let rows: Vec<[String; 5]> = m
            .parameters
            .iter()
            .take(listed)
            .map(|p| {
                [
                    format!("#{}", p.number),
                    one_line(&p.label),
                    p.shape.to_string(),
                    human_bytes(p.bytes),
                    p.source
                        .as_deref()
                        .map(super::short_path)
                        .unwrap_or_default(),
                ]
            })
            .collect();
        write_table(out, &rows)?;
        more(out, m.parameters.len(), listed)?;
    }

    writeln!(out)?;
    writeln!(
        out,
        "  outputs: {} in {}",
        m.outputs.len(),
        human_bytes(m.result_shape_bytes)
    )?;
    let listed = if options.verbose {
        usize::MAX
    } else {
        OUTPUTS_SHOWN
    };
    let rows: Vec<[String; 4]> = m
        .outputs
        .iter()
        .take(listed)
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
            ]
        })
        .collect();
    write_table(out, &rows)?;
    more(out, m.outputs.len(), listed)?;

    if let Some(v) = &m.verification {
        writeln!(out)?;
        if v.checked == 0 {
            writeln!(
                out,
                "  {}: nothing to compare ({})",
                bold("verify", options),
                v.notes.join("; ")
            )?;
        } else if v.agrees() {
            writeln!(
                out,
                "  {}: all {} numbers agree with XLA's own reports",
                bold("verify", options),
                v.checked
            )?;
        } else {
            writeln!(
                out,
                "  {}: {} of {} numbers disagree with XLA's own reports",
                bold("verify", options),
                v.disagreements.len(),
                v.checked
            )?;
            for d in &v.disagreements {
                writeln!(out, "    {}: hlomem {}, XLA {}", d.what, d.hlomem, d.xla)?;
            }
        }
        for note in v.notes.iter().filter(|_| v.checked > 0) {
            writeln!(out, "    note: {note}")?;
        }
    }
    Ok(())
}

/// Text wider than a terminal shows, wrapped at [`WIDTH`] columns with the
/// continuation lines indented under the first.
const WIDTH: usize = 100;

fn write_wrapped(out: &mut dyn Write, first: &str, rest: &str, text: &str) -> io::Result<()> {
    let options = textwrap::Options::new(WIDTH)
        .initial_indent(first)
        .subsequent_indent(rest)
        .break_words(false);
    for line in textwrap::wrap(text, options) {
        writeln!(out, "{line}")?;
    }
    Ok(())
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
