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
    let all = r.in_order();
    for (i, one) in all.iter().enumerate() {
        if all.len() > 1 {
            if i > 0 {
                writeln!(out)?;
                if s.markdown {
                    writeln!(out, "---")?;
                    writeln!(out)?;
                }
            }
            let lead = if std::ptr::eq(*one, r) {
                ", the first error"
            } else {
                ""
            };
            let heading = format!(
                "Message {} of {} in the text{lead}",
                one.position,
                all.len()
            );
            writeln!(out, "{}", s.heading(&heading))?;
            writeln!(out)?;
        }
        render_one(one, s, out)?;
    }
    Ok(())
}

/// The format's words without a device in front: the device is said from
/// the evidence, not from the format's name.
fn what(description: &str) -> &str {
    ["GPU: ", "TPU: "]
        .iter()
        .find_map(|p| description.strip_prefix(p))
        .unwrap_or(description)
}

fn render_one(r: &ExplainReport, s: &Style, out: &mut dyn Write) -> io::Result<()> {
    let e = &r.explanation;
    let truncated = if r.truncated { ", cut off" } else { "" };
    let place = &e.situation.placement;
    let title = format!(
        "Out of memory in {}: {}",
        place.words(),
        what(e.format.description())
    );
    if s.markdown {
        writeln!(out, "## {title} (`{}`{truncated})", r.format)?;
        writeln!(out)?;
        writeln!(out, "**Verdict:** {}", r.verdict)?;
    } else {
        writeln!(out, "{} ({}{truncated})", s.heading(&title), r.format)?;
        writeln!(out, "Verdict: {}", r.verdict)?;
    }
    if !r.same_failure_as.is_empty() {
        let others: Vec<String> = r.same_failure_as.iter().map(usize::to_string).collect();
        writeln!(
            out,
            "The same failure as message{} {} on another device: each device holds the whole program.",
            if others.len() == 1 { "" } else { "s" },
            others.join(", ")
        )?;
    }

    writeln!(out)?;
    writeln!(out, "{}", s.heading("Where and what"))?;
    for line in situation_lines(e) {
        writeln!(out, "{}{line}", s.item())?;
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

    if let Some(u) = &e.undecided {
        writeln!(out)?;
        writeln!(out, "{}", s.heading("What the message cannot tell"))?;
        if let [only] = u.readings.as_slice() {
            writeln!(out, "{}{}:", s.item(), capitalize(&u.why))?;
            writeln!(out, "{}  {only}", s.item())?;
            writeln!(out, "{}To find what it is:", s.item())?;
        } else {
            let n = match u.readings.len() {
                2 => "two".to_string(),
                3 => "three".to_string(),
                n => n.to_string(),
            };
            writeln!(
                out,
                "{}{}; {n} readings fit it:",
                s.item(),
                capitalize(&u.why)
            )?;
            for (i, reading) in u.readings.iter().enumerate() {
                writeln!(out, "{}  {}. {reading}", s.item(), i + 1)?;
            }
            writeln!(out, "{}To tell them apart:", s.item())?;
        }
        for how in &u.how_to_tell {
            writeln!(out, "{}  - {how}", s.item())?;
        }
    }

    writeln!(out)?;
    writeln!(out, "{}", s.heading("What to try, in order"))?;
    if r.advice.is_empty() {
        writeln!(out, "{}nothing specific: the message says too little; run with XLA_FLAGS=--xla_dump_to=DIR and use --dump DIR", s.item())?;
    }
    if let Some(g) = &e.gap {
        writeln!(out, "{}The program is {}.", s.item(), g.sentence())?;
    }
    let indent = if s.markdown { "" } else { "  " };
    for (i, a) in r.advice.iter().enumerate() {
        let saves = match a.saves_bytes {
            Some(b) => format!(" (saves {})", human_bytes(b)),
            None => " (saving not measurable from the message)".to_string(),
        };
        writeln!(out, "{indent}{}. {}{saves}", i + 1, a.action)?;
        writeln!(out, "{indent}   {}", a.why)?;
        if let Some(f) = &a.feasibility {
            writeln!(out, "{indent}   {f}")?;
        }
        for link in &a.links {
            writeln!(out, "{indent}   see {link}")?;
        }
    }
    if !e.ruled_out.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            s.heading("Not offered: the message's figures rule it out")
        )?;
        for r in &e.ruled_out {
            writeln!(out, "{}{}", s.item(), r.why)?;
        }
    }
    Ok(())
}

fn capitalize(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Where the memory is, what the program is doing, and what the log shows
/// of the framework and settings, each with what says so.
fn situation_lines(e: &crate::oom::explain::Explanation) -> Vec<String> {
    use crate::oom::situation::Workload;
    let s = &e.situation;
    let mut out = vec![match s.placement.device {
        crate::oom::device::Device::Unknown => format!(
            "Memory: which device, the text does not say: {}",
            s.placement.evidence
        ),
        _ => format!("Memory: {} ({})", s.placement.words(), s.placement.evidence),
    }];
    match &s.workload {
        Workload::Training { evidence } => {
            out.push(format!("Program: a training step ({evidence})"))
        }
        Workload::Inference { evidence } => out.push(format!("Program: inference ({evidence})")),
        Workload::Unknown => {}
    }
    if let Some(f) = &s.framework {
        out.push(format!("Framework: {} (`{}`)", f.value.name(), f.evidence));
    }
    if let Some(a) = &s.app {
        out.push(format!(
            "Application: {} (`{}`)",
            a.value.name(),
            a.evidence
        ));
    }
    if let Some(f) = &s.settings.memory_fraction {
        out.push(format!("Setting: {}", f.evidence));
    }
    if let Some(p) = &s.settings.preallocate_off {
        out.push(format!("Setting: preallocation off ({p})"));
    }
    if let Some(u) = &s.settings.unified_memory {
        out.push(format!("Setting: unified memory ({u})"));
    }
    if let Some(r) = &s.remat {
        out.push(format!("Rematerialization: {}", r.describe(s.framework())));
    }
    if let Some(r) = &s.replicated {
        out.push(format!(
            "Replicated: the same failure on {} ({})",
            r.on.len(),
            r.on.join(", ")
        ));
    }
    out
}
