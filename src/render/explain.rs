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
    render_one(r, s, out)?;
    for (i, other) in r.others.iter().enumerate() {
        writeln!(out)?;
        let heading = format!(
            "Another out-of-memory message in the same text ({} of {})",
            i + 2,
            r.others.len() + 1
        );
        if s.markdown {
            writeln!(out, "---")?;
            writeln!(out)?;
        }
        writeln!(out, "{}", s.heading(&heading))?;
        writeln!(out)?;
        render_one(other, s, out)?;
    }
    Ok(())
}

fn render_one(r: &ExplainReport, s: &Style, out: &mut dyn Write) -> io::Result<()> {
    let e = &r.explanation;
    let truncated = if r.truncated { ", cut off" } else { "" };
    let description = e.format.description();
    if s.markdown {
        writeln!(
            out,
            "## Out of memory: {description} (`{}`{truncated})",
            r.format
        )?;
        writeln!(out)?;
        writeln!(out, "**Verdict:** {}", r.verdict)?;
    } else {
        writeln!(
            out,
            "{} ({}{truncated})",
            s.heading(&format!("Out of memory: {description}")),
            r.format
        )?;
        writeln!(out, "Verdict: {}", r.verdict)?;
    }

    if !e.problems.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("What cannot be right"))?;
        for p in &e.problems {
            writeln!(out, "{}{}", s.item(), p.message())?;
        }
    }

    if !e.what_failed.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("What failed"))?;
        for f in &e.what_failed {
            writeln!(out, "{}{}", s.item(), f.sentence())?;
        }
    }

    if !e.stats.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("What the numbers mean"))?;
        if s.markdown {
            writeln!(out, "| stat | size | meaning |")?;
            writeln!(out, "|---|---|---|")?;
        }
        let width = e
            .stats
            .iter()
            .map(|st| st.stat.name().len())
            .max()
            .unwrap_or(0);
        for st in &e.stats {
            let size = human_bytes(st.bytes);
            let (name, meaning) = (st.stat.name(), st.stat.meaning());
            if s.markdown {
                writeln!(out, "| {name} | {size} | {meaning} |")?;
            } else {
                writeln!(out, "  {name:<width$}  {size:>9}  {meaning}")?;
            }
        }
        if let Some(a) = &e.arithmetic {
            if s.markdown {
                writeln!(out)?;
            }
            writeln!(out, "{}{}", s.item(), a.sentence())?;
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
                s.code(g.shape_text())
            )?;
            for part in g.parts() {
                let bullet = if s.markdown { "  - " } else { "    " };
                writeln!(out, "{bullet}{part}")?;
            }
        }
    }

    if !e.tpu.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("On the TPU"))?;
        for note in &e.tpu {
            writeln!(out, "{}{}", s.item(), note.sentence())?;
        }
    }

    if !e.warnings.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("Compiler warnings"))?;
        for w in &e.warnings {
            writeln!(out, "{}{}", s.item(), w.message())?;
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
        for c in &d.checks {
            writeln!(out, "{}{}", s.item(), c.message())?;
        }
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
    if r.advice.is_empty() {
        writeln!(out, "{}nothing specific: the message says too little; run with XLA_FLAGS=--xla_dump_to=DIR and use --dump DIR", s.item())?;
    }
    let indent = if s.markdown { "" } else { "  " };
    for (i, a) in r.advice.iter().enumerate() {
        let saves = match a.saves_bytes {
            Some(b) => format!(" (saves {})", human_bytes(b)),
            None => " (saving not measurable from the message)".to_string(),
        };
        writeln!(out, "{indent}{}. {}{saves}", i + 1, a.action)?;
        writeln!(out, "{indent}   {}", a.why)?;
        for link in &a.links {
            writeln!(out, "{indent}   see {link}")?;
        }
    }
    Ok(())
}
