//! XLA's own memory reports, read so that `analyze --verify` can say where
//! hlomem and XLA disagree. Nothing hlomem reports is copied from them.
//!
//! XLA's buffer-assignment report has three parts, always in this order: the
//! allocations (`BufferAssignment:`), the values (`Total bytes used:`,
//! `Used values:`) and the live ranges (`HloLiveRange (max N):`). XLA has
//! written them in two layouts ([`Layout`]), told apart by what the files
//! hold: every file is read as a run of parts, each part once, in that
//! order, and each file starts with the part its name says.
//!
//! `allocations.rs`, `values.rs` and `live_range.rs` read one part each, line
//! by line; `syntax.rs` holds the grammar (`grammar/report.pest`) and the
//! errors.

mod allocations;
mod live_range;
mod syntax;
#[cfg(test)]
mod tests;
mod values;

use std::path::PathBuf;

use crate::error::Error;
use crate::source::SourceFile;
use syntax::{cut_off, lines, repeated, unreadable};

/// What XLA wrote about one module's memory.
#[derive(Debug, Default)]
pub struct XlaReports {
    /// The files found, for messages.
    pub files: Vec<PathBuf>,
    /// How XLA laid the report out in those files.
    pub layout: Layout,
    /// "Total bytes used" (`-buffer-assignment-values.txt`, or older `-buffer-assignment.txt`).
    pub total_bytes_used: Option<u64>,
    pub allocations: Vec<XlaAllocation>,
    /// The values listed under `Used values:`, with where each appears.
    pub used_values: Vec<UsedValue>,
    pub live_ranges: Option<XlaLiveRanges>,
}

/// XLA's own totals of one module, from its buffer-assignment report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct XlaTotals {
    /// "Total bytes used" (every memory space), when the report has the line.
    pub total_bytes_used: Option<u64>,
    /// The allocations of each memory space, default (device memory) first:
    /// the totals XLA's `-memory-usage-report.txt` prints per space.
    pub by_space: Vec<XlaSpace>,
}

/// One memory space's allocations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct XlaSpace {
    pub color: u64,
    /// As XLA's memory-usage report names it: `default`, `vmem`.
    pub name: String,
    pub bytes: u64,
}

impl XlaTotals {
    /// What must fit in the device's memory: the default space, else (no
    /// allocation listed) "Total bytes used".
    pub fn device_bytes(&self) -> Option<u64> {
        match self.by_space.first() {
            Some(space) if space.color == 0 => Some(space.bytes),
            _ => self.total_bytes_used,
        }
    }
}

/// How XLA wrote the buffer-assignment report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One `-buffer-assignment.txt` holding all three parts: XLA before
    /// 2026-04 (jax 0.4.35 to 0.9.2, TensorFlow 2.21, torch_xla 2.9).
    OneFile,
    /// `-buffer-assignment.txt` (the allocations),
    /// `-buffer-assignment-values.txt` and `-live-range.txt`: XLA since
    /// 2026-04 (jax 0.10.2), or only some of these files.
    #[default]
    Split,
}

/// One value under `Used values:` (`<29 add.9 @0>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedValue {
    pub id: u64,
    pub name: String,
    pub index: Vec<u64>,
    /// `(instruction, shape index)` of each of its positions.
    pub positions: Vec<(String, Vec<u64>)>,
}

#[derive(Debug, Default, Clone)]
pub struct XlaAllocation {
    pub index: u64,
    pub size: u64,
    /// The memory space (`color N,`; 0 when absent).
    pub color: u64,
    pub parameter: Option<u64>,
    /// The parameter's shape index (`at ShapeIndex {1}`).
    pub parameter_index: Vec<u64>,
    pub maybe_live_out: bool,
    pub constant: bool,
    pub thread_local: bool,
    pub preallocated_temp: bool,
    pub values: Vec<XlaValue>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XlaValue {
    pub id: u64,
    pub name: String,
    pub index: Vec<u64>,
    pub is_phi: bool,
    /// The memory space (`@1`; absent in older reports).
    pub color: Option<u64>,
    pub size: u64,
    pub offset: u64,
}

#[derive(Debug, Default)]
pub struct XlaLiveRanges {
    /// `HloLiveRange (max N)`: the flattened schedule's length.
    pub max_time: u64,
    pub sequence: Vec<String>,
    /// `(name, index, start, end)`, inclusive.
    pub ranges: Vec<(String, Vec<u64>, u64, u64)>,
    pub peak_time: Option<u64>,
    /// The values listed at the peak.
    pub peak_values: Vec<PeakValue>,
    /// `Stack trace breakdown for peak usage: N bytes`.
    pub breakdown_total: Option<u64>,
}

/// `a.1{}: 262144 bytes (cumulative: 262144 bytes)` under `Live ranges at T (peak):`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeakValue {
    pub name: String,
    pub index: Vec<u64>,
    /// Whether XLA wrote the shape index. Before 2025-05 it wrote the
    /// instruction's name alone (a tuple's live values repeat it) and the
    /// bytes of the instruction's whole shape.
    pub indexed: bool,
    pub bytes: u64,
    /// The sum of this and the values above it (absent before 2025-05).
    pub cumulative: Option<u64>,
}

impl XlaReports {
    /// The totals, each memory space named as `target`'s XLA names it.
    pub fn totals(&self, target: &crate::chip::Target) -> XlaTotals {
        let mut by_color = std::collections::BTreeMap::<u64, u64>::new();
        for a in &self.allocations {
            let bytes = by_color.entry(a.color).or_default();
            *bytes = bytes.saturating_add(a.size);
        }
        XlaTotals {
            total_bytes_used: self.total_bytes_used,
            by_space: by_color
                .into_iter()
                .map(|(color, bytes)| XlaSpace {
                    color,
                    name: target.space_name(color),
                    bytes,
                })
                .collect(),
        }
    }
}

impl XlaAllocation {
    /// Whether `memory_analysis()` counts it as an argument.
    pub fn is_parameter(&self) -> bool {
        self.parameter.is_some()
    }
}

/// The parts of the report, in the order XLA writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Allocations,
    Values,
    LiveRange,
}

impl Part {
    /// The part a line at the top level starts, if it is a part's first line.
    fn started_by(line: &str) -> Option<Part> {
        if line == "BufferAssignment:" {
            Some(Part::Allocations)
        } else if line.starts_with("Total bytes used:") || line == "Used values:" {
            Some(Part::Values)
        } else if line.starts_with("HloLiveRange") {
            Some(Part::LiveRange)
        } else {
            None
        }
    }

    /// The part in words, for messages.
    fn words(self) -> &'static str {
        match self {
            Part::Allocations => "the allocations (`BufferAssignment:`)",
            Part::Values => "the used values (`Total bytes used:`, `Used values:`)",
            Part::LiveRange => "the live ranges (`HloLiveRange`)",
        }
    }

    /// What a file that should start with this part starts with.
    fn header(self) -> &'static str {
        match self {
            Part::Allocations => "the `BufferAssignment:` header",
            Part::Values => "`Total bytes used:` or `Used values:`",
            Part::LiveRange => "the `HloLiveRange (max N):` header",
        }
    }

    /// What an empty file that should hold this part lacks.
    fn missing(self) -> &'static str {
        match self {
            Part::Allocations => "no allocation",
            Part::Values => "no `Total bytes used:` line",
            Part::LiveRange => "no `HloLiveRange` header",
        }
    }
}

/// A part being read.
enum Open {
    Allocations,
    Values(values::Values),
    LiveRange(live_range::LiveRange),
}

impl Open {
    fn new(part: Part) -> Open {
        match part {
            Part::Allocations => Open::Allocations,
            Part::Values => Open::Values(values::Values::default()),
            Part::LiveRange => Open::LiveRange(live_range::LiveRange::default()),
        }
    }

    fn part(&self) -> Part {
        match self {
            Open::Allocations => Part::Allocations,
            Open::Values(_) => Part::Values,
            Open::LiveRange(_) => Part::LiveRange,
        }
    }
}

impl XlaReports {
    /// Reads the report files XLA writes beside an HLO file, already read by
    /// the pipeline: (`buffer-assignment`, `buffer-assignment-values`,
    /// `live-range`); `None` if there are none.
    pub fn from_files(
        buffer_assignment: Option<SourceFile>,
        values: Option<SourceFile>,
        live_range: Option<SourceFile>,
    ) -> Result<Option<XlaReports>, Error> {
        let mut reader = Reader {
            values_file: values.is_some(),
            ..Reader::default()
        };
        let files = [
            (buffer_assignment, Part::Allocations),
            (values, Part::Values),
            (live_range, Part::LiveRange),
        ];
        for (file, first) in files {
            if let Some(file) = file {
                reader.read_file(&file, first)?;
                reader.reports.files.push(file.path);
            }
        }
        Ok((!reader.reports.files.is_empty()).then_some(reader.reports))
    }

    /// Reads reports already in memory (any may be empty), for tests and
    /// fuzzing: the one-file layout is all in `buffer_assignment`.
    pub fn from_texts(
        buffer_assignment: &str,
        values: &str,
        live_range: &str,
    ) -> Result<XlaReports, Error> {
        let mut reader = Reader {
            values_file: !values.is_empty(),
            ..Reader::default()
        };
        let texts = [
            (
                buffer_assignment,
                "buffer-assignment.txt",
                Part::Allocations,
            ),
            (values, "buffer-assignment-values.txt", Part::Values),
            (live_range, "live-range.txt", Part::LiveRange),
        ];
        for (text, name, first) in texts {
            if !text.is_empty() {
                reader.read_file(&SourceFile::from_text(name, text), first)?;
            }
        }
        Ok(reader.reports)
    }
}

/// The reports read so far, and which file held each part.
#[derive(Default)]
struct Reader {
    reports: XlaReports,
    /// Each part read, with the file it was in (for messages).
    read: Vec<(Part, String)>,
    /// Whether a `-buffer-assignment-values.txt` is among the files.
    values_file: bool,
}

impl Reader {
    /// One file, which must start with `first` and may go on with the parts
    /// XLA writes after it.
    fn read_file(&mut self, file: &SourceFile, first: Part) -> Result<(), Error> {
        let mut open: Option<Open> = None;
        let parts_before = self.read.len();
        for (offset, line) in lines(&file.text) {
            if line.trim().is_empty() {
                continue;
            }
            let current = open.as_ref().map(Open::part);
            // `Used values:` goes on with the part `Total bytes used:` opened.
            let next = Part::started_by(line)
                .filter(|&p| !(p == Part::Values && current == Some(Part::Values)));
            if let Some(part) = next {
                self.start(file, offset, first, part, current)?;
                if let Some(done) = open.take() {
                    self.close(done, file, offset)?;
                }
                open = Some(Open::new(part));
                if part == Part::Allocations {
                    // `BufferAssignment:` says no more.
                    continue;
                }
            }
            let reports = &mut self.reports;
            match open.as_mut() {
                Some(Open::Allocations) => allocations::line(reports, file, offset, line)?,
                Some(Open::Values(part)) => part.line(reports, file, offset, line)?,
                Some(Open::LiveRange(part)) => part.line(file, offset, line)?,
                None => return Err(unreadable(file, offset, first.header())),
            }
        }
        let end = file.text.len();
        match open {
            Some(done) => self.close(done, file, end)?,
            None => return Err(cut_off(file, end, first.missing())),
        }
        if first == Part::Allocations {
            let parts = &self.read[parts_before..];
            if parts.len() > 1 {
                self.reports.layout = Layout::OneFile;
            }
            // Both layouts write the total after the allocations: in the
            // same file, or in `-buffer-assignment-values.txt` beside it.
            if !self.values_file && !parts.iter().any(|(p, _)| *p == Part::Values) {
                return Err(cut_off(
                    file,
                    end,
                    "no `Total bytes used:` after the allocations (XLA writes it below them in this \
                     file, or in the `-buffer-assignment-values.txt` beside it)",
                ));
            }
        }
        Ok(())
    }

    /// Whether `part` may start at `offset`: a file starts with its own
    /// part, each part is read once, and parts come in XLA's order.
    fn start(
        &mut self,
        file: &SourceFile,
        offset: usize,
        first: Part,
        part: Part,
        current: Option<Part>,
    ) -> Result<(), Error> {
        if current.is_none() && part != first {
            return Err(unreadable(file, offset, first.header()));
        }
        if let Some((_, other)) = self.read.iter().find(|(p, _)| *p == part) {
            return Err(repeated(file, offset, part.words(), other));
        }
        if let Some(current) = current.filter(|&c| c > part) {
            return Err(unreadable(
                file,
                offset,
                &format!(
                    "more of {}: XLA writes {} before it",
                    current.words(),
                    part.words()
                ),
            ));
        }
        self.read.push((part, file.path.display().to_string()));
        Ok(())
    }

    /// A part ends at `end` (where the next one starts, or the file's end).
    fn close(&mut self, part: Open, file: &SourceFile, end: usize) -> Result<(), Error> {
        let reports = &mut self.reports;
        match part {
            Open::Allocations => allocations::finish(reports, file, end),
            Open::Values(part) => part.finish(reports, file, end),
            Open::LiveRange(part) => {
                reports.live_ranges = Some(part.finish(file, end)?);
                Ok(())
            }
        }
    }
}
