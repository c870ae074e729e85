//! `--format html` / `--html FILE`: one self-contained page (inline SVG, CSS and
//! a little JavaScript; nothing fetched) with, per module, the bytes in use over
//! the schedule, the buffers live at the peak and the findings. `--svg FILE`
//! writes the chart alone, for Markdown.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::report::{ModuleReport, Report};
use crate::units::human_bytes;

const WIDTH: f64 = 1000.0;
const HEIGHT: f64 = 280.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 24.0;
const BOTTOM: f64 = 28.0;
/// How many buffers live at the peak get a bar.
const BARS: usize = 40;

/// Kinds in stacking order, bottom first: (label, field index, color).
const KINDS: [(&str, usize, &str); 4] = [
    ("parameters", 0, "#4e79a7"),
    ("outputs", 1, "#59a14f"),
    ("temporaries", 2, "#f28e2b"),
    ("constants", 3, "#bab0ac"),
];

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn kind_bytes(b: &crate::report::TimelineBucket) -> [u64; 4] {
    [b.parameter, b.output, b.temp, b.constant]
}

/// The chart of one module: stacked areas by kind, the total as a line with one
/// point per bucket, and the peak marked with its value.
pub fn chart_svg(m: &ModuleReport, standalone: bool) -> String {
    let buckets = &m.timeline.buckets;
    let peak = m.memory.live_peak_bytes.max(1);
    let plot_w = WIDTH - LEFT - 10.0;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let n = buckets.len().max(1);
    let x = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / n as f64;
    let y = |bytes: u64| TOP + plot_h * (1.0 - bytes as f64 / peak as f64);
    let mut svg = String::new();
    let ns = if standalone {
        " xmlns=\"http://www.w3.org/2000/svg\""
    } else {
        ""
    };
    let _ = write!(
        svg,
        "<svg{ns} class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" \
         aria-label=\"bytes in use over the schedule of {}\" font-family=\"sans-serif\" font-size=\"11\">",
        escape(&m.name)
    );
    let _ = write!(
        svg,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"#fafafa\"/>"
    );
    // Stacked areas: each kind between the sum below it and the sum with it.
    let mut below = vec![0u64; buckets.len()];
    for (label, k, color) in KINDS {
        let top: Vec<u64> = buckets
            .iter()
            .zip(&below)
            .map(|(b, lo)| lo.saturating_add(kind_bytes(b)[k]))
            .collect();
        if top == below {
            continue;
        }
        let mut d = String::new();
        for (i, t) in top.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if i == 0 { "M" } else { " L" },
                x(i),
                y(*t)
            );
        }
        for (i, lo) in below.iter().enumerate().rev() {
            let _ = write!(d, " L{:.1},{:.1}", x(i), y(*lo));
        }
        let _ = write!(svg, "<path class=\"area {label}\" d=\"{d} Z\" fill=\"{color}\" fill-opacity=\"0.85\"><title>{label}</title></path>");
        below = top;
    }
    // The total, one point per bucket.
    let mut d = String::new();
    for (i, b) in buckets.iter().enumerate() {
        let _ = write!(
            d,
            "{}{:.1},{:.1}",
            if i == 0 { "M" } else { " L" },
            x(i),
            y(b.total)
        );
    }
    let _ = write!(
        svg,
        "<path class=\"total\" d=\"{d}\" fill=\"none\" stroke=\"#333\" stroke-width=\"1\"/>"
    );
    // The peak.
    if let Some((i, _)) = buckets
        .iter()
        .enumerate()
        .find(|(_, b)| b.time == m.peak.time)
    {
        let px = x(i);
        let _ = write!(
            svg,
            "<line class=\"peak\" x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>",
            TOP + plot_h
        );
        let anchor = if px > WIDTH * 0.7 { "end" } else { "start" };
        let _ = write!(
            svg,
            "<text class=\"peak-label\" data-bytes=\"{}\" x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"#c00\">peak {}</text>",
            m.memory.live_peak_bytes,
            if anchor == "end" { px - 4.0 } else { px + 4.0 },
            TOP - 8.0,
            human_bytes(m.memory.live_peak_bytes)
        );
    }
    // Axes: bytes on the left with gridlines at quarters of the peak,
    // execution steps below with ticks at quarters of the schedule.
    for q in 0..=4u64 {
        let bytes = peak / 4 * q + if q == 4 { peak % 4 } else { 0 };
        let py = y(bytes);
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>\
             <text class=\"ytick\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            WIDTH - 10.0,
            LEFT - 6.0,
            py + 4.0,
            human_bytes(bytes)
        );
    }
    let steps = m.timeline.length.max(1);
    for q in 0..=4u32 {
        let step = (u64::from(steps - 1) * u64::from(q) / 4) as u32;
        let px = LEFT + plot_w * (f64::from(step) + 0.5) / f64::from(steps);
        let _ = write!(
            svg,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"#999\"/>\
             <text class=\"xtick\" x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{step}</text>",
            TOP + plot_h,
            TOP + plot_h + 4.0,
            TOP + plot_h + 14.0
        );
    }
    let _ = write!(
        svg,
        "<text x=\"{LEFT}\" y=\"{}\">bytes live in device memory, over the execution steps 0 → {} \
         (instructions in execution order; fused ones not counted)</text>",
        HEIGHT - 2.0,
        m.timeline.length.saturating_sub(1)
    );
    let mut lx = WIDTH - 10.0;
    for (label, _, color) in KINDS.iter().rev() {
        lx -= 95.0;
        let _ = write!(svg, "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\">{label}</text>", HEIGHT - 11.0, lx + 14.0, HEIGHT - 2.0);
    }
    svg.push_str("</svg>");
    svg
}

pub fn render(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    let modules = report.largest_first();
    writeln!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    )?;
    writeln!(out, "<title>hlomem: {} modules</title>", modules.len())?;
    writeln!(out, "<style>{STYLE}</style></head><body>")?;
    writeln!(out, "<header><h1>hlomem</h1>")?;
    if modules.len() > 1 {
        writeln!(out, "<label>module <select id=\"module\">")?;
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
        render_module(i, m, out)?;
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
        "<div id=\"tip\" hidden></div>\n<script>{SCRIPT}</script></body></html>"
    )
}

fn render_module(i: usize, m: &ModuleReport, out: &mut dyn Write) -> io::Result<()> {
    let hidden = if i == 0 { "" } else { " hidden" };
    writeln!(out, "<section class=\"module\" id=\"m{i}\"{hidden}>")?;
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
    writeln!(out, "</tr></table>")?;
    for note in &m.notes {
        writeln!(out, "<p class=\"note\">{}</p>", escape(note))?;
    }
    writeln!(out, "<figure>{}</figure>", chart_svg(m, false))?;
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

const STYLE: &str = "body{font-family:sans-serif;margin:0 24px 40px;color:#222}\
.stack{display:flex;height:22px;border:1px solid #bbb;margin:4px 0}.stack .seg{display:block;height:100%}\
.stack .seg:hover{outline:2px solid #222}table.groups{font-size:12px;border-collapse:collapse}\
table.groups td{padding:1px 8px 1px 0}table.groups i{display:inline-block;width:10px;height:10px}\
table.groups tr:target{background:#ffe}header{display:flex;gap:24px;align-items:center}\
h2 small{font-weight:normal;color:#777;font-size:12px}table.numbers td{padding:4px 14px 4px 0;vertical-align:top}\
figure{margin:8px 0}svg.chart{max-width:100%;height:auto}.bars .bar{position:relative;margin:2px 0;min-height:20px}\
.bars .bar span{position:absolute;left:0;top:0;bottom:0;opacity:.35}.bars .bar p{position:relative;margin:0;padding:2px 4px;font-size:12px}\
.bar.parameter span{background:#4e79a7}.bar.output span{background:#59a14f}.bar.temp span{background:#f28e2b}.bar.constant span{background:#bab0ac}\
#tip{position:fixed;background:#fff;border:1px solid #999;padding:6px;font-size:12px;pointer-events:none;max-width:420px}\
.note{color:#a60}.findings li{margin-bottom:6px}";

const SCRIPT: &str = "(function(){\
var sel=document.getElementById('module');\
function show(i){document.querySelectorAll('section.module').forEach(function(s,j){s.hidden=(j!=i);});}\
if(sel){sel.addEventListener('change',function(){show(+sel.value);});}\
var tip=document.getElementById('tip');\
document.querySelectorAll('section.module').forEach(function(sec){\
var svg=sec.querySelector('svg.chart');var data=JSON.parse(sec.querySelector('script.buckets').textContent);\
svg.addEventListener('mousemove',function(e){var r=svg.getBoundingClientRect();var vb=svg.viewBox.baseVal;\
var x=(e.clientX-r.left)/r.width*vb.width;var i=Math.floor((x-70)/(vb.width-80)*data.length);\
if(i<0||i>=data.length){tip.hidden=true;return;}var b=data[i];\
tip.textContent='';var lines=['positions '+b[0]+(b[1]!=b[0]?'-'+b[1]:'')+': '+b[2]+' in use','parameters '+b[3]+', outputs '+b[4]+', temporaries '+b[5],b[6]+(b[7]?' at '+b[7]:'')];\
lines.forEach(function(l){var d=document.createElement('div');d.textContent=l;tip.appendChild(d);});\
tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';tip.hidden=false;});\
svg.addEventListener('mouseleave',function(){tip.hidden=true;});});\
document.body.setAttribute('data-ready','1');})();";
