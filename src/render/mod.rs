//! Renderers: a report in, text out. They compute nothing; every number they
//! print is already in the report.

mod chart;
mod explain;
mod fits;
mod gate;
mod github;
mod html;
mod html_groups;
mod json;
mod markdown;
mod targets;
mod text;

pub use gate::{render_check, render_diff};

use std::io::{self, Write};

use crate::report::explain::ExplainReport;
use crate::report::fits::{FitsReport, TargetsReport};
use crate::report::Report;

/// `text` on one line: JAX writes some primitives' parameters into `op_name`
/// with line breaks (`reshape[ dimensions=None\n new_sizes=(8,) ]`), which would
/// break a table row. JSON keeps the text as it is.
/// A size as XLA prints it, "about" when hlomem cannot know it exactly.
fn sized(bytes: u64, exact: bool) -> String {
    match exact {
        true => crate::units::human_bytes(bytes),
        false => format!("about {}", crate::units::human_bytes(bytes)),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A shape for a table cell: a long tuple's is cut after `MAX` characters
/// (the JSON has it whole), so that one buffer does not widen every row.
fn short_shape(shape: &str) -> String {
    const MAX: usize = 48;
    match shape.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &shape[..cut]),
        None => shape.to_string(),
    }
}

use crate::usage::source::short as short_path;

/// `analyze --format`. Each command has its own set: a format a command does
/// not support is refused by the argument parser, and a new one does not
/// compile until every renderer of that command handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnalyzeFormat {
    /// For people, on a terminal.
    Text,
    /// For programs: exact byte counts.
    Json,
    /// For pull-request and issue comments.
    Markdown,
    /// GitHub Actions annotations (`::notice`, `::warning`, `::error` lines).
    Github,
    /// One self-contained page with a chart of memory over the schedule.
    Html,
}

/// `check --format` and `diff --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateFormat {
    Text,
    Json,
    Markdown,
    /// `::error` for what fails the gate, `::warning` for findings below it.
    Github,
}

/// `explain --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainFormat {
    Text,
    Json,
    Markdown,
}

/// `targets --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetsFormat {
    Text,
    Json,
}

/// `fits --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitsFormat {
    Text,
    Json,
}

/// `hlomem targets`: every target, or one.
pub fn render_targets(
    targets: &TargetsReport,
    format: TargetsFormat,
    out: &mut dyn Write,
) -> io::Result<()> {
    match (format, targets) {
        (TargetsFormat::Text, TargetsReport::All(all)) => targets::render_text(all, out),
        (TargetsFormat::Text, TargetsReport::One { target }) => fits::render_target(target, out),
        (TargetsFormat::Json, _) => json::render(targets, out),
    }
}

/// `hlomem fits`.
pub fn render_fits(report: &FitsReport, format: FitsFormat, out: &mut dyn Write) -> io::Result<()> {
    match format {
        FitsFormat::Text => fits::render_text(report, out),
        FitsFormat::Json => json::render(report, out),
    }
}

/// The chart of the largest module as a standalone SVG (`--svg FILE`), with
/// `budget` (one device's memory) drawn on it when given.
pub fn render_svg(report: &Report, budget: Option<u64>, out: &mut dyn Write) -> io::Result<()> {
    match report.largest_first().first() {
        Some(m) => writeln!(out, "{}", chart::chart_svg(m, budget, true)),
        None => Ok(()),
    }
}

/// `analyze --format html` (and `--html FILE`), with `budget` (one device's
/// memory) drawn on each chart when given.
pub fn render_html(report: &Report, budget: Option<u64>, out: &mut dyn Write) -> io::Result<()> {
    html::render(report, budget, out)
}

#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    /// ANSI colors (only on a terminal, never with NO_COLOR: decided by the CLI).
    pub color: bool,
    /// With several modules: how many of the largest to show in detail.
    pub top: usize,
    /// Every group, finding, detail, parameter and output, not the first few.
    pub verbose: bool,
    /// Whose settings the words name (`--tpu`, or the Python package's terms).
    pub interface: crate::chip::Interface,
}

impl Default for RenderOptions {
    fn default() -> RenderOptions {
        RenderOptions {
            color: false,
            top: 3,
            verbose: false,
            interface: crate::chip::Interface::Cli,
        }
    }
}

/// `hlomem analyze`.
pub fn render(
    report: &Report,
    format: AnalyzeFormat,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        AnalyzeFormat::Text => text::render(report, options, out),
        AnalyzeFormat::Json => json::render(report, out),
        AnalyzeFormat::Markdown => markdown::render(report, options, out),
        AnalyzeFormat::Github => github::render(report, out),
        AnalyzeFormat::Html => html::render(report, None, out),
    }
}

/// `hlomem explain`.
pub fn render_explain(
    report: &ExplainReport,
    format: ExplainFormat,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        ExplainFormat::Text => explain::render_text(report, options, out),
        ExplainFormat::Json => json::render(report, out),
        ExplainFormat::Markdown => explain::render_markdown(report, out),
    }
}
