//! Renderers: a [`Report`] in, text out. They compute nothing; every number
//! they print is already in the report.

mod json;
mod text;

use std::io::{self, Write};

use crate::report::Report;

/// Output formats of `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people, on a terminal.
    Text,
    /// For programs: exact byte counts.
    Json,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RenderOptions {
    /// ANSI colors (only on a terminal, never with NO_COLOR: decided by the CLI).
    pub color: bool,
}

pub fn render(
    report: &Report,
    format: Format,
    options: RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Text => text::render(report, options, out),
        Format::Json => json::render(report, out),
    }
}
