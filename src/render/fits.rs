//! `hlomem fits` and `hlomem targets TARGET` for people: the verdict's
//! words as the report has them, one target's figures.

use std::io::{self, Write};

use crate::report::fits::{FitsReport, TargetReport};
use crate::units::two_decimals;

/// The decision, then the figures it was made from (the Python package's
/// `str(verdict)` is these lines and what was compiled).
pub fn render_text(report: &FitsReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", report.words.headline)?;
    writeln!(out, "  {}", report.words.basis)?;
    if let Some(unfinished) = &report.words.unfinished {
        writeln!(out, "  {unfinished}")?;
    }
    Ok(())
}

/// One target: its device, memory and what a program may use of it.
pub fn render_target(target: &TargetReport, out: &mut dyn Write) -> io::Result<()> {
    let device = &target.device;
    writeln!(
        out,
        "{}: {} {} has {} of {}; {}",
        device.name,
        target.words.article,
        device.device,
        two_decimals(device.memory_bytes.into(), true),
        target.words.memory_word,
        device.usable_note
    )?;
    writeln!(
        out,
        "  {} is {} ({} bytes)",
        target.words.share,
        two_decimals(device.usable_bytes.into(), true),
        device.usable_bytes
    )?;
    write!(out, "  topology {}", device.topology)?;
    match (&device.config_path, device.shipped_config) {
        (Some(path), _) => writeln!(out, ", config {path}"),
        (None, Some(file)) => writeln!(out, ", config {file} (shipped with the Python package)"),
        (None, None) => writeln!(out),
    }
}
