//! Renderers: a report in, text out. They compute nothing; every number they
//! print is already in the report.

mod explain;
mod gate;
mod github;
mod html;
mod json;
mod markdown;
mod text;

pub use gate::{render_check, render_diff};

use std::io::{self, Write};

use crate::report::explain::ExplainReport;
use crate::report::Report;

/// `text` on one line: JAX writes some primitives' parameters into `op_name`
/// with line breaks (`reshape[ dimensions=None\n new_sizes=(8,) ]`), which would
/// break a table row. JSON keeps the text as it is.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Output formats of `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people, on a terminal.
    Text,
    /// For programs: exact byte counts.
    Json,
    /// For pull-request and issue comments.
    Markdown,
    /// GitHub Actions annotations (`::error`, `::warning`, `::notice` lines).
    Github,
    /// One self-contained page with a chart of memory over the schedule.
    Html,
}

/// The chart of the largest module as a standalone SVG (`--svg FILE`).
pub fn render_svg(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    match report.largest_first().first() {
        Some(m) => writeln!(out, "{}", html::chart_svg(m, true)),
        None => Ok(()),
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RenderOptions {
    /// ANSI colors (only on a terminal, never with NO_COLOR: decided by the CLI).
    pub color: bool,
    /// With several modules: how many of the largest to show in detail.
    pub top: usize,
}

impl Default for RenderOptions {
    fn default() -> RenderOptions {
        RenderOptions {
            color: false,
            top: 3,
        }
    }
}

/// `hlomem analyze`.
pub fn render(
    report: &Report,
    format: Format,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Text => text::render(report, options, out),
        Format::Json => json::render(report, out),
        Format::Markdown => markdown::render(report, options, out),
        Format::Github => github::render(report, out),
        Format::Html => html::render(report, out),
    }
}

/// `hlomem explain`.
pub fn render_explain(
    report: &ExplainReport,
    format: Format,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Text => explain::render_text(report, options, out),
        Format::Json => json::render(report, out),
        Format::Markdown | Format::Github | Format::Html => explain::render_markdown(report, out),
    }
}
