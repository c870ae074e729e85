//! The chart of bytes in use over the schedule: the HTML report's figure and
//! `--svg`. Layout only; every number drawn is the report's (and the budget
//! the command line was given).
//!
//! No label can overlap another. Each text's box is computed from a
//! conservative width (per-character advances at least those of DejaVu Sans
//! and of Liberation Sans/Arial, the usual `sans-serif` fonts, plus a tenth)
//! and the ascent and descent a browser gives it, and a label is drawn only
//! where no box placed before it lies ([`Labels`]). Each kind of label has its
//! own band: the peak's row above the plot (and the budget's, when the budget
//! is off the scale), the byte ticks left of the plot, the step ticks below
//! it, then the caption and the legend flowed into rows. The page's script,
//! which zooms the timeline, moves the peak label and redraws the step ticks
//! within their bands only. The SVG scales as a whole (`viewBox`), so a layout
//! without overlap has none at any width.

use std::fmt::Write as _;

use super::html::escape;
use crate::report::{ModuleReport, TimelineBucket};
use crate::units::human_bytes;

/// The chart's width in its own units (pixels at 100%).
const WIDTH: f64 = 1000.0;
const FONT: f64 = 13.0;
/// The box a browser gives a line of text, in ems above and below its
/// baseline (DejaVu Sans: 0.93 and 0.24; Liberation Sans: 0.91 and 0.21).
const ASCENT: f64 = 0.96;
const DESCENT: f64 = 0.26;
/// Estimated widths are this much wider than the widest measured font's.
const WIDTH_MARGIN: f64 = 1.1;
/// The height of a row of labels (a text box is 15.86).
const ROW: f64 = 19.0;
/// Space between a label and its neighbour or its axis.
const GAP: f64 = 6.0;
const PAD: f64 = 4.0;
const PLOT_H: f64 = 220.0;
const RIGHT: f64 = 14.0;
const BUDGET_COLOR: &str = "#6a3d9a";

/// Kinds in stacking order, bottom first: (label, field index, color).
const KINDS: [(&str, usize, &str); 4] = [
    ("parameters", 0, "#4e79a7"),
    ("outputs", 1, "#59a14f"),
    ("temporaries", 2, "#f28e2b"),
    ("constants", 3, "#bab0ac"),
];

fn kind_bytes(b: &TimelineBucket) -> [u64; 4] {
    [b.parameter, b.output, b.temp, b.constant]
}

/// Advance widths in thousandths of an em of ASCII `' '..='~'`: the larger
/// of DejaVu Sans's and Liberation Sans's (Arial's metrics), as Chromium
/// measures them.
const ADVANCE: [u16; 95] = [
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318,
    337, // ' '..'/'
    636, 636, 636, 636, 636, 636, 636, 636, 636, 636, // digits
    337, 337, 838, 838, 838, 556, 1015, // ':'..'@'
    684, 686, 722, 770, 667, 611, 778, 752, 295, 500, 667, 557, 863, 748, 787, 667, 787, 722, 667,
    611, 732, 684, 989, 685, 667, 685, // 'A'..'Z'
    390, 337, 390, 838, 556, 500, // '['..'`'
    613, 635, 532, 635, 567, 352, 635, 634, 278, 278, 579, 278, 974, 634, 556, 635, 635, 384, 521,
    392, 634, 592, 818, 592, 592, 525, // 'a'..'z'
    636, 337, 636, 838, // '{'..'~'
];

/// A conservative width of `text` at the chart's font size: any other
/// character counts a full em.
pub(super) fn text_width(text: &str) -> f64 {
    let thousandths: u32 = text
        .chars()
        .map(|c| match c {
            ' '..='~' => u32::from(ADVANCE[c as usize - 32]),
            _ => 1000,
        })
        .sum();
    f64::from(thousandths) / 1000.0 * FONT * WIDTH_MARGIN
}

/// The height of a text's box.
const TEXT_H: f64 = (ASCENT + DESCENT) * FONT;

#[derive(Clone, Copy, PartialEq)]
enum Anchor {
    Start,
    Middle,
    End,
}

impl Anchor {
    fn name(self) -> &'static str {
        match self {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        }
    }
}

/// A box in the chart's units.
#[derive(Clone, Copy, Debug)]
struct Rect {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Rect {
    fn overlaps(&self, other: &Rect) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }
}

/// One text: where it goes and what it says.
struct Label<'a> {
    class: &'a str,
    x: f64,
    baseline: f64,
    anchor: Anchor,
    text: String,
    /// Further attributes, written as they are (with a leading space).
    attrs: String,
}

impl Label<'_> {
    fn rect(&self) -> Rect {
        let w = text_width(&self.text);
        let x0 = match self.anchor {
            Anchor::Start => self.x,
            Anchor::Middle => self.x - w / 2.0,
            Anchor::End => self.x - w,
        };
        Rect {
            x0,
            y0: self.baseline - ASCENT * FONT,
            x1: x0 + w,
            y1: self.baseline + DESCENT * FONT,
        }
    }
}

/// The boxes of everything placed so far, and the canvas they must stay in.
struct Labels {
    placed: Vec<Rect>,
}

impl Labels {
    fn free(&self, r: &Rect) -> bool {
        r.x0 >= 0.0 && r.x1 <= WIDTH && r.y0 >= 0.0 && !self.placed.iter().any(|p| p.overlaps(r))
    }

    /// Writes the first of `candidates` whose box is free; false if none is.
    fn put<'a>(
        &mut self,
        svg: &mut String,
        candidates: impl IntoIterator<Item = Label<'a>>,
    ) -> bool {
        for label in candidates {
            let r = label.rect();
            if self.free(&r) {
                self.placed.push(r);
                let _ = write!(
                    svg,
                    "<text class=\"{}\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{}\"{}>{}</text>",
                    label.class,
                    label.x,
                    label.baseline,
                    label.anchor.name(),
                    label.attrs,
                    escape(&label.text)
                );
                return true;
            }
        }
        false
    }
}

/// The baseline of a text centred in the row that starts at `top`.
fn row_baseline(top: f64) -> f64 {
    top + (ROW - TEXT_H) / 2.0 + ASCENT * FONT
}

/// The smallest of 1, 2, 5, 10, 20, 50... at least `raw`.
fn nice_step(raw: f64) -> u64 {
    let mut p = 1u64;
    loop {
        for m in [1, 2, 5] {
            if (p * m) as f64 >= raw {
                return p * m;
            }
        }
        p = p.saturating_mul(10);
    }
}

/// Where the budget goes: a line on the plot, or (far above the peak) a
/// label above it.
enum Budget {
    None,
    Line(u64),
    Above(u64),
}

/// The chart of one module: stacked areas by kind, the total as a line with
/// one point per bucket, the peak marked with its value, and the budget when
/// one is given. `standalone` adds the SVG namespace, for a file of its own.
pub fn chart_svg(m: &ModuleReport, budget: Option<u64>, standalone: bool) -> String {
    let buckets = &m.timeline.buckets;
    let peak = m.memory.live_peak_bytes.max(1);
    let steps = m.timeline.length.max(1);
    // The bytes axis reaches the budget when it is at most twice the peak, so
    // that the curve keeps at least half the height; a budget further up is
    // written above the plot instead.
    let (top_bytes, budget) = match budget {
        None => (peak, Budget::None),
        Some(b) if b <= peak => (peak, Budget::Line(b)),
        Some(b) if b / 2 <= peak => (b, Budget::Line(b)),
        Some(b) => (peak, Budget::Above(b)),
    };

    // Byte ticks at quarters of the axis; the left margin fits the widest.
    let ticks: Vec<(u64, String)> = (0..=4u64)
        .map(|q| {
            let bytes = top_bytes / 4 * q + if q == 4 { top_bytes % 4 } else { 0 };
            (bytes, human_bytes(bytes))
        })
        .collect();
    let widest = ticks.iter().map(|(_, t)| text_width(t)).fold(0.0, f64::max);
    let left = (widest + 2.0 * GAP).max(40.0).ceil();
    let plot_w = WIDTH - left - RIGHT;

    // Rows from the top: the peak's, the budget's if it is off the scale,
    // the plot (its top byte label reaches half a text above it), the step
    // ticks (below the bottom byte label's half), the caption and legend.
    let peak_row = PAD;
    let mut y = peak_row + ROW;
    let budget_row = y;
    if matches!(budget, Budget::Above(_)) {
        y += ROW;
    }
    let top = (y + TEXT_H / 2.0 + 1.0).ceil();
    let bottom = top + PLOT_H;
    let xlabel_y = bottom + TEXT_H / 2.0 + 1.0 + ASCENT * FONT;
    let flow_top = bottom + TEXT_H / 2.0 + 1.0 + TEXT_H + GAP;

    let local_x = |step: f64| plot_w * step / f64::from(steps);
    let local_y = |bytes: u64| PLOT_H * (1.0 - bytes as f64 / top_bytes as f64);

    let mut labels = Labels { placed: Vec::new() };
    let mut body = String::new();
    if standalone {
        // A file of its own shows on any background (a dark page's too).
        body.push_str("<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>");
    }
    let _ = write!(
        body,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{plot_w}\" height=\"{PLOT_H}\" fill=\"#fafafa\"/>"
    );
    for (bytes, _) in &ticks {
        let py = top + local_y(*bytes);
        let _ = write!(
            body,
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#ddd\"/>",
            left + plot_w
        );
    }

    // The plot, in its own viewport (it clips what the zoom pushes out), in
    // local units; the script scales `g.zoom` along the schedule. Its size
    // is also inline style: notebooks size every `svg` in an output
    // (`max-width:100%;height:auto`), which would resize this one.
    let _ = write!(
        body,
        "<svg class=\"plot\" x=\"{left}\" y=\"{top}\" width=\"{plot_w}\" height=\"{PLOT_H}\" \
         style=\"width:{plot_w}px;height:{PLOT_H}px;max-width:none\" overflow=\"hidden\"><g class=\"zoom\">"
    );
    // Each bucket is drawn at its busiest moment, so the curve's top is the peak.
    let xs: Vec<f64> = buckets
        .iter()
        .map(|b| local_x(f64::from(b.time) + 0.5))
        .collect();
    let mut below = vec![0u64; buckets.len()];
    let mut drawn = Vec::new();
    for (label, k, color) in KINDS {
        let stacked: Vec<u64> = buckets
            .iter()
            .zip(&below)
            .map(|(b, lo)| lo.saturating_add(kind_bytes(b)[k]))
            .collect();
        if stacked == below {
            continue;
        }
        let mut d = String::new();
        for (i, t) in stacked.iter().enumerate() {
            let op = if i == 0 { "M" } else { " L" };
            let _ = write!(d, "{op}{:.2},{:.1}", xs[i], local_y(*t));
        }
        for (i, lo) in below.iter().enumerate().rev() {
            let _ = write!(d, " L{:.2},{:.1}", xs[i], local_y(*lo));
        }
        let _ = write!(
            body,
            "<path class=\"area {label}\" d=\"{d} Z\" fill=\"{color}\" fill-opacity=\"0.85\"><title>{label}</title></path>"
        );
        drawn.push((label, color));
        below = stacked;
    }
    let mut d = String::new();
    for (i, b) in buckets.iter().enumerate() {
        let op = if i == 0 { "M" } else { " L" };
        let _ = write!(d, "{op}{:.2},{:.1}", xs[i], local_y(b.total));
    }
    let _ = write!(
        body,
        "<path class=\"total\" d=\"{d}\" fill=\"none\" stroke=\"#333\" stroke-width=\"1\" vector-effect=\"non-scaling-stroke\"/>"
    );
    let peak_x = local_x(f64::from(m.peak.time) + 0.5);
    let _ = write!(
        body,
        "<line class=\"peak\" x1=\"{peak_x:.2}\" x2=\"{peak_x:.2}\" y1=\"0\" y2=\"{PLOT_H}\" stroke=\"#c00\" \
         stroke-dasharray=\"4 3\" vector-effect=\"non-scaling-stroke\"/></g>"
    );
    if let Budget::Line(b) = budget {
        let by = local_y(b);
        let _ = write!(
            body,
            "<line class=\"budget\" x1=\"0\" x2=\"{plot_w}\" y1=\"{by:.1}\" y2=\"{by:.1}\" stroke=\"{BUDGET_COLOR}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>"
        );
    }
    body.push_str("</svg>");

    // Byte ticks, right-aligned left of the plot, centred on their lines.
    for (bytes, text) in &ticks {
        let py = top + local_y(*bytes);
        labels.put(
            &mut body,
            [Label {
                class: "ytick",
                x: left - GAP,
                baseline: py + (ASCENT - DESCENT) / 2.0 * FONT,
                anchor: Anchor::End,
                text: text.clone(),
                attrs: String::new(),
            }],
        );
    }

    // The peak, alone in its row: right of its line, or left of it near the end.
    let px = left + peak_x;
    let peak_text = format!("peak {}", human_bytes(m.memory.live_peak_bytes));
    let peak_attrs = format!(
        " data-bytes=\"{}\" data-step=\"{}\" fill=\"#c00\"",
        m.memory.live_peak_bytes, m.peak.time
    );
    let baseline = row_baseline(peak_row);
    labels.put(
        &mut body,
        [
            (px + 4.0, Anchor::Start),
            (px - 4.0, Anchor::End),
            (WIDTH, Anchor::End),
        ]
        .map(|(x, anchor)| Label {
            class: "peak-label",
            x,
            baseline,
            anchor,
            text: peak_text.clone(),
            attrs: peak_attrs.clone(),
        }),
    );

    // The budget: above its line at the plot's right end, or below it when
    // the line is at the top; off the scale, in its own row.
    let budget_label = |x: f64, baseline: f64, anchor: Anchor, text: String, b: u64| {
        Label {
        class: "budget-label",
        x,
        baseline,
        anchor,
        text,
        attrs: format!(
            " data-bytes=\"{b}\" fill=\"{BUDGET_COLOR}\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\""
        ),
    }
    };
    match budget {
        Budget::None => {}
        Budget::Line(b) => {
            let by = top + local_y(b);
            let text = format!("budget {}", human_bytes(b));
            let above = by - 3.0 - DESCENT * FONT;
            let below = by + 3.0 + ASCENT * FONT;
            let inside = |base: f64| base - ASCENT * FONT >= top && base + DESCENT * FONT <= bottom;
            let candidates: Vec<Label> = [above, below]
                .into_iter()
                .filter(|&base| inside(base))
                .flat_map(|base| {
                    [
                        (left + plot_w - 4.0, Anchor::End),
                        (left + 4.0, Anchor::Start),
                    ]
                    .map(|(x, anchor)| budget_label(x, base, anchor, text.clone(), b))
                })
                .collect();
            labels.put(&mut body, candidates);
        }
        Budget::Above(b) => {
            let text = format!("budget {} (above this scale)", human_bytes(b));
            labels.put(
                &mut body,
                [budget_label(
                    left + plot_w,
                    row_baseline(budget_row),
                    Anchor::End,
                    text,
                    b,
                )],
            );
        }
    }

    // Step ticks below the plot, as many as fit: a round step wide enough
    // for the widest label; one that would still touch its neighbour (near
    // the edges, shifted inside the canvas) is left out.
    let _ = write!(body, "<g class=\"xticks\">");
    let label_w = text_width(&(steps - 1).to_string());
    let most = (plot_w / (label_w + 2.0 * GAP)).floor().max(1.0);
    let step = nice_step(f64::from(steps) / most);
    for t in (0..u64::from(steps)).step_by(step.try_into().unwrap_or(usize::MAX)) {
        let x = left + local_x(t as f64 + 0.5);
        let mut label = Label {
            class: "xtick",
            x,
            baseline: xlabel_y,
            anchor: Anchor::Middle,
            text: t.to_string(),
            attrs: String::new(),
        };
        let r = label.rect();
        label.x += (-r.x0).max(0.0) - (r.x1 - WIDTH).max(0.0);
        let mut tick = String::new();
        let _ = write!(
            tick,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{bottom}\" y2=\"{}\" stroke=\"#999\"/>",
            bottom + 4.0
        );
        let at = body.len();
        if labels.put(&mut body, [label]) {
            body.insert_str(at, &tick);
        }
    }
    body.push_str("</g>");

    // The caption, its words flowed into rows, then the legend's entries.
    let (x0, x1) = (left, WIDTH - RIGHT);
    let caption = format!(
        "bytes live in device memory, over the execution steps 0 → {} \
         (instructions in execution order; fused ones not counted)",
        steps - 1
    );
    let mut lines: Vec<String> = Vec::new();
    for word in caption.split(' ') {
        match lines.last_mut() {
            Some(line) if text_width(&format!("{line} {word}")) <= x1 - x0 => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    let mut row = flow_top;
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            row += ROW;
        }
        labels.put(
            &mut body,
            [Label {
                class: "caption",
                x: x0,
                baseline: row_baseline(row),
                anchor: Anchor::Start,
                text: line.clone(),
                attrs: String::new(),
            }],
        );
    }
    // The legend keeps together: right-aligned after the caption's last
    // line if it fits there, else on rows of its own.
    let entry = |label: &str| 14.0 + text_width(label);
    let legend_w = drawn.iter().map(|(l, _)| entry(l)).sum::<f64>()
        + 2.0 * GAP * drawn.len().saturating_sub(1) as f64;
    let caption_end = x0 + lines.last().map_or(0.0, |l| text_width(l));
    let mut x = if caption_end + 4.0 * GAP + legend_w <= x1 {
        x1 - legend_w
    } else {
        row += ROW;
        x0
    };
    for (label, color) in drawn {
        let w = entry(label);
        if x + w > x1 {
            row += ROW;
            x = x0;
        }
        let swatch = Rect {
            x0: x,
            y0: row + (ROW - 10.0) / 2.0,
            x1: x + 10.0,
            y1: row + (ROW + 10.0) / 2.0,
        };
        let at = body.len();
        if labels.free(&swatch)
            && labels.put(
                &mut body,
                [Label {
                    class: "legend",
                    x: x + 14.0,
                    baseline: row_baseline(row),
                    anchor: Anchor::Start,
                    text: label.to_string(),
                    attrs: String::new(),
                }],
            )
        {
            labels.placed.push(swatch);
            body.insert_str(
                at,
                &format!(
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/>",
                    swatch.x0, swatch.y0
                ),
            );
        }
        x += w + 2.0 * GAP;
    }
    let height = (row + ROW + PAD).ceil();

    let ns = if standalone {
        " xmlns=\"http://www.w3.org/2000/svg\""
    } else {
        ""
    };
    format!(
        "<svg{ns} class=\"chart\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" role=\"img\" \
         aria-label=\"bytes in use over the schedule of {}\" font-family=\"sans-serif\" font-size=\"{FONT}\" \
         data-left=\"{left}\" data-top=\"{top}\" data-plot-width=\"{plot_w}\" data-plot-height=\"{PLOT_H}\" \
         data-steps=\"{steps}\" data-xlabel-y=\"{xlabel_y:.1}\">{body}</svg>",
        escape(&m.name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_at_least_the_fonts_and_steps_are_round() {
        // "peak 14.79MiB": 7.401 ems wide in DejaVu Sans, 6.670 in Liberation Sans.
        assert!(text_width("peak 14.79MiB") >= 7.401 * FONT * WIDTH_MARGIN);
        assert_eq!(text_width("é"), FONT * WIDTH_MARGIN);
        assert_eq!(
            [0.3, 1.0, 1.5, 3.0, 7.0, 11.0, 260.0].map(nice_step),
            [1, 1, 2, 5, 10, 20, 500]
        );
    }

    #[test]
    fn a_label_is_placed_only_where_nothing_is() {
        let mut labels = Labels { placed: Vec::new() };
        let mut svg = String::new();
        let label = |x: f64, text: &str| Label {
            class: "t",
            x,
            baseline: 20.0,
            anchor: Anchor::Start,
            text: text.into(),
            attrs: String::new(),
        };
        assert!(labels.put(&mut svg, [label(10.0, "parameters")]));
        // Over the first, then off the canvas: the third candidate is taken.
        assert!(labels.put(
            &mut svg,
            [label(20.0, "x"), label(995.0, "outputs"), label(200.0, "x")]
        ));
        assert!(!labels.put(&mut svg, [label(12.0, "y")]));
        assert_eq!(svg.matches("<text").count(), 2);
    }
}
