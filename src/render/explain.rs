//! `hlomem explain` as text (a terminal) or Markdown (an issue comment).
//! The same sections in the same order; only the markup differs.

use std::io::{self, Write};

use super::RenderOptions;
use crate::report::explain::ExplainReport;
use crate::units::human_bytes;

/// Markup for one of the two outputs.
struct Style {
    markdown: bool,
    color: bool,
}

impl Style {
    fn heading(&self, text: &str) -> String {
        if self.markdown {
            format!("### {text}")
        } else if self.color {
            format!("\x1b[1m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn item(&self) -> &'static str {
        if self.markdown {
            "- "
        } else {
            "  "
        }
    }
    fn code(&self, text: &str) -> String {
        if self.markdown {
            format!("`{text}`")
        } else {
            text.to_string()
        }
    }
}

pub fn render_text(
    report: &ExplainReport,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    render(
        report,
        &Style {
            markdown: false,
            color: options.color,
        },
        out,
    )
}

pub fn render_markdown(report: &ExplainReport, out: &mut dyn Write) -> io::Result<()> {
    render(
        report,
        &Style {
            markdown: true,
            color: false,
        },
        out,
    )
}

fn render(r: &ExplainReport, s: &Style, out: &mut dyn Write) -> io::Result<()> {
    let e = &r.explanation;
    let truncated = if r.truncated { ", cut off" } else { "" };
    if s.markdown {
        writeln!(
            out,
            "## Out of memory: {} (`{}`{truncated})",
            e.format_description, r.format
        )?;
    } else {
        writeln!(
            out,
            "{} ({}{truncated})",
            s.heading(&format!("Out of memory: {}", e.format_description)),
            r.format
        )?;
    }

    if !e.what_failed.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("What failed"))?;
        for line in &e.what_failed {
            writeln!(out, "{}{line}", s.item())?;
        }
    }

    if !e.stats.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("What the numbers mean"))?;
        if s.markdown {
            writeln!(out, "| stat | size | meaning |")?;
            writeln!(out, "|---|---|---|")?;
        }
        let width = e.stats.iter().map(|st| st.name.len()).max().unwrap_or(0);
        for st in &e.stats {
            let size = human_bytes(st.bytes);
            if s.markdown {
                writeln!(out, "| {} | {size} | {} |", st.name, st.meaning)?;
            } else {
                writeln!(out, "  {:<width$}  {size:>9}  {}", st.name, st.meaning)?;
            }
        }
        if let Some(a) = &e.arithmetic {
            if s.markdown {
                writeln!(out)?;
            }
            writeln!(out, "{}{a}", s.item())?;
        }
    }

    if !e.buffer_groups.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("Which buffers fill the memory"))?;
        for g in &e.buffer_groups {
            let plural = if g.count == 1 { "" } else { "s" };
            let each = match (g.each_bytes, g.total_bytes) {
                (None, _) => "no readable size in the message".to_string(),
                (Some(each), _) if g.count == 1 => human_bytes(each),
                (Some(each), Some(total)) => {
                    format!(
                        "{} each, {} together",
                        human_bytes(each),
                        human_bytes(total)
                    )
                }
                (Some(each), None) => format!("{} each", human_bytes(each)),
            };
            writeln!(
                out,
                "{}{} buffer{plural} of {} ({each}):",
                s.item(),
                g.count,
                s.code(&g.shape)
            )?;
            for part in &g.parts {
                let bullet = if s.markdown { "  - " } else { "    " };
                writeln!(out, "{bullet}{part}")?;
            }
        }
    }

    if !e.tpu.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("On the TPU"))?;
        for line in &e.tpu {
            writeln!(out, "{}{line}", s.item())?;
        }
    }

    if !e.warnings.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("Compiler warnings"))?;
        for line in &e.warnings {
            writeln!(out, "{}{line}", s.item())?;
        }
    }

    if let Some(d) = &e.dump {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            s.heading(&format!("In the dump: module {} ({})", d.module, d.file))
        )?;
        writeln!(
            out,
            "{}hlomem's accounting of this module: device memory {}, arguments {}, outputs {}, aliased {}, temp {}",
            s.item(),
            human_bytes(d.memory.device_bytes),
            human_bytes(d.memory.argument_bytes),
            human_bytes(d.memory.output_bytes),
            human_bytes(d.memory.alias_bytes),
            human_bytes(d.memory.temp_bytes)
        )?;
        for b in &d.buffers {
            let what = match (b.parameter, &b.op_name) {
                (Some(p), Some(arg)) => format!("parameter {p} ({})", s.code(arg)),
                (Some(p), None) => format!("parameter {p}"),
                (None, Some(op)) => format!("{} ({})", s.code(&b.instruction), op),
                (None, None) => s.code(&b.instruction),
            };
            let source = match (&b.source, &b.function) {
                (Some(src), Some(f)) => format!(" at {src} in {f}"),
                (Some(src), None) => format!(" at {src}"),
                _ => String::new(),
            };
            writeln!(out, "{}buffer {} is {what}{source}", s.item(), b.number)?;
        }
    }

    writeln!(out)?;
    writeln!(out, "{}", s.heading("What to try, largest saving first"))?;
    if e.advice.is_empty() {
        writeln!(out, "{}nothing specific: the message says too little; run with XLA_FLAGS=--xla_dump_to=DIR and use --dump DIR", s.item())?;
    }
    for (i, a) in e.advice.iter().enumerate() {
        let saves = a
            .saves_bytes
            .map(|b| format!(" (saves {})", human_bytes(b)))
            .unwrap_or_default();
        writeln!(
            out,
            "{}{}. {}{saves}",
            if s.markdown { "" } else { "  " },
            i + 1,
            a.action
        )?;
        writeln!(out, "{}   {}", if s.markdown { "" } else { "  " }, a.why)?;
    }
    Ok(())
}
