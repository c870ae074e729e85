//! `--format html` / `--html FILE`: one self-contained page (inline SVG, CSS and
//! a little JavaScript; nothing fetched) with, per module, the bytes in use over
//! the schedule, the buffers live at the peak and the findings. `--svg FILE`
//! writes the chart alone, for Markdown (`chart.rs`).
//!
//! Everything is inside one `div.hlomem-report.hlomem`, its style and script
//! too: a notebook shows that element (`_repr_html_`), and every CSS rule is
//! under it (`html.css`), so the report neither styles the notebook nor takes
//! the notebook's table styles. Without JavaScript every module is shown, with
//! the chart as drawn; the script (`html.js`) adds the module picker, the
//! tooltip and the timeline's zoom.

use std::io::{self, Write};

use super::chart::chart_svg;
use crate::report::{ModuleReport, Report};
use crate::units::human_bytes;

/// How many buffers live at the peak get a bar.
const BARS: usize = 40;

const STYLE: &str = include_str!("html.css");
const SCRIPT: &str = include_str!("html.js");

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page. `budget`, one device's memory, is drawn on each chart.
pub fn render(report: &Report, budget: Option<u64>, out: &mut dyn Write) -> io::Result<()> {
    let modules = report.largest_first();
    writeln!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    )?;
    writeln!(
        out,
        "<title>hlomem: {} modules</title></head><body>",
        modules.len()
    )?;
    writeln!(
        out,
        "<div class=\"hlomem-report hlomem\">\n<style>{STYLE}</style>\n<header><h1>hlomem</h1>"
    )?;
    if modules.len() > 1 {
        // The picker needs the script; without it every module is shown.
        writeln!(out, "<label class=\"pick\" hidden>module <select>")?;
        for (i, m) in modules.iter().enumerate() {
            writeln!(
                out,
                "<option value=\"{i}\">{} ({})</option>",
                escape(&m.key),
                human_bytes(m.memory.total_bytes)
            )?;
        }
        writeln!(out, "</select></label>")?;
    }
    writeln!(out, "</header>")?;
    for (i, m) in modules.iter().enumerate() {
        render_module(i, m, budget, out)?;
    }
    for e in &report.errors {
        writeln!(
            out,
            "<p class=\"error\">cannot read {}: {}</p>",
            escape(&e.file),
            escape(&e.message)
        )?;
    }
    writeln!(
        out,
        "<div class=\"tip\" hidden></div>\n<script>{SCRIPT}</script>\n</div>\n</body></html>"
    )
}

fn render_module(
    i: usize,
    m: &ModuleReport,
    budget: Option<u64>,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "<section class=\"module\" id=\"m{i}\">")?;
    writeln!(
        out,
        "<h2>{} <small>{}</small></h2>",
        escape(&m.name),
        escape(&m.file)
    )?;
    let mem = &m.memory;
    writeln!(out, "<table class=\"numbers\"><tr>")?;
    for (label, bytes) in [
        ("total", mem.total_bytes),
        ("arguments", mem.argument_bytes),
        ("outputs", mem.output_bytes),
        ("aliased", mem.alias_bytes),
        ("temp", mem.temp_bytes),
        ("live peak", mem.live_peak_bytes),
    ] {
        writeln!(out, "<td><b>{}</b><br>{label}</td>", human_bytes(bytes))?;
    }
    if let Some(budget) = budget {
        writeln!(
            out,
            "<td class=\"budget\"><b>{}</b><br>budget</td>",
            human_bytes(budget)
        )?;
    }
    writeln!(out, "</tr></table>")?;
    for note in &m.notes {
        writeln!(out, "<p class=\"note\">{}</p>", escape(&note.message))?;
    }
    writeln!(out, "<figure>{}</figure>", chart_svg(m, budget, false))?;
    // The buckets for the hover tooltip: [start, end, bytes by kind, instruction, source].
    let data: Vec<serde_json::Value> = m
        .timeline
        .buckets
        .iter()
        .map(|b| {
            serde_json::json!([
                b.start,
                b.end,
                human_bytes(b.total),
                human_bytes(b.parameter),
                human_bytes(b.output),
                human_bytes(b.temp),
                b.instruction,
                b.source
            ])
        })
        .collect();
    let json = serde_json::to_string(&data)
        .unwrap_or_else(|_| "[]".into())
        .replace("</", "<\\/");
    writeln!(
        out,
        "<script type=\"application/json\" class=\"buckets\">{json}</script>"
    )?;

    super::html_groups::write(i, m, out)?;
    writeln!(
        out,
        "<details><summary>The {} largest buffers live at the peak (execution step {})</summary><div class=\"bars\">",
        BARS.min(m.peak.buffers.len()),
        m.peak.time
    )?;
    let largest = m.peak.buffers.first().map_or(1, |b| b.bytes.max(1));
    for b in m.peak.buffers.iter().take(BARS) {
        let width = (b.bytes as f64 / largest as f64 * 100.0).max(0.3);
        let what = b.op_name.as_deref().unwrap_or(&b.name);
        let source = b
            .source
            .as_deref()
            .map(|s| format!(" · {}", escape(s)))
            .unwrap_or_default();
        writeln!(
            out,
            "<div class=\"bar {}\"><span style=\"width:{width:.1}%\"></span><p><b>{}</b> {} <code>{}</code> {}{source}</p></div>",
            b.kind.as_str(),
            human_bytes(b.bytes),
            b.kind.as_str(),
            escape(&b.shape.to_string()),
            escape(what)
        )?;
    }
    let (hidden, bytes) = m.peak.hidden_after(BARS);
    if hidden > 0 {
        writeln!(
            out,
            "<p class=\"more\">and {hidden} smaller buffers ({})</p>",
            human_bytes(bytes)
        )?;
    }
    writeln!(out, "</div></details>")?;
    if !m.findings.is_empty() {
        writeln!(out, "<h3>Findings</h3><ul class=\"findings\">")?;
        for f in &m.findings {
            let at = f
                .source
                .as_deref()
                .map(|s| format!(" <small>{}</small>", escape(s)))
                .unwrap_or_default();
            writeln!(
                out,
                "<li><b>{} {}</b> {} at stake: {}{at}<br><i>fix:</i> {}</li>",
                f.code,
                f.name,
                human_bytes(f.bytes),
                escape(&f.message),
                escape(&f.fix)
            )?;
        }
        writeln!(out, "</ul>")?;
    }
    writeln!(out, "</section>")
}
