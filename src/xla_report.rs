//! XLA's own memory reports, read so that `analyze --verify` can say where
//! hlomem and XLA disagree. Nothing hlomem reports is copied from them.

use std::path::PathBuf;

use pest::Parser;

use crate::error::Error;
use crate::source::SourceFile;

#[derive(pest_derive::Parser)]
#[grammar = "grammar/report.pest"]
struct ReportParser;

/// What XLA wrote about one module's memory.
#[derive(Debug, Default)]
pub struct XlaReports {
    /// The files found, for messages.
    pub files: Vec<PathBuf>,
    /// "Total bytes used" (`-buffer-assignment-values.txt`, or older `-buffer-assignment.txt`).
    pub total_bytes_used: Option<u64>,
    pub allocations: Vec<XlaAllocation>,
    /// The values listed under `Used values:`, with where each appears.
    pub used_values: Vec<UsedValue>,
    pub live_ranges: Option<XlaLiveRanges>,
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
    pub bytes: u64,
    /// The sum of this and the values above it (absent before 2025-05).
    pub cumulative: Option<u64>,
}

impl XlaAllocation {
    /// Whether `memory_analysis()` counts it as an argument.
    pub fn is_parameter(&self) -> bool {
        self.parameter.is_some()
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
        let mut reports = XlaReports::default();
        if let Some(file) = buffer_assignment {
            reports.read_buffer_assignment(&file)?;
            reports.files.push(file.path);
        }
        if let Some(file) = values {
            reports.read_values(&file)?;
            reports.files.push(file.path);
        }
        if let Some(file) = live_range {
            reports.live_ranges = Some(read_live_ranges(&file)?);
            reports.files.push(file.path);
        }
        Ok((!reports.files.is_empty()).then_some(reports))
    }

    /// Reads reports already in memory (any may be empty), for tests and fuzzing.
    pub fn from_texts(
        buffer_assignment: &str,
        values: &str,
        live_range: &str,
    ) -> Result<XlaReports, Error> {
        let mut reports = XlaReports::default();
        if !buffer_assignment.is_empty() {
            reports.read_buffer_assignment(&SourceFile::from_text(
                "buffer-assignment.txt",
                buffer_assignment,
            ))?;
        }
        if !values.is_empty() {
            reports.read_values(&SourceFile::from_text(
                "buffer-assignment-values.txt",
                values,
            ))?;
        }
        if !live_range.is_empty() {
            reports.live_ranges = Some(read_live_ranges(&SourceFile::from_text(
                "live-range.txt",
                live_range,
            ))?);
        }
        Ok(reports)
    }

    /// `BufferAssignment:`, then `allocation N: ...` lines numbered from 0,
    /// each followed by its ` value: ...` lines. Anything else, a gap in the
    /// numbering or no allocation at all is an error: a report that was cut
    /// or mangled must not pass as "all numbers agree".
    fn read_buffer_assignment(&mut self, file: &SourceFile) -> Result<(), Error> {
        let mut header_seen = false;
        for (offset, line) in lines(&file.text) {
            if line.trim().is_empty() {
                continue;
            }
            if !header_seen {
                if line != "BufferAssignment:" {
                    return Err(unreadable(file, offset, "the `BufferAssignment:` header"));
                }
                header_seen = true;
            } else if line.starts_with("allocation ") {
                let pair = parse(file, Rule::allocation_header, offset, line)?;
                let allocation = lower_allocation(pair);
                if allocation.index != self.allocations.len() as u64 {
                    return Err(unreadable(file, offset, "the next allocation's number"));
                }
                self.allocations.push(allocation);
            } else if line.trim_start().starts_with("value: <") {
                let pair = parse(file, Rule::value_line, offset, line)?;
                match self.allocations.last_mut() {
                    Some(allocation) => allocation.values.push(lower_value(pair)),
                    None => return Err(unreadable(file, offset, "an `allocation N:` line first")),
                }
            } else if line.starts_with("Total bytes used:") && self.total_bytes_used.is_none() {
                // Before 2026-04 the values and the total were in this file too.
                let pair = parse(file, Rule::total_bytes_used, offset, line)?;
                self.total_bytes_used = first_int(pair);
            } else {
                return Err(unreadable(
                    file,
                    offset,
                    "an `allocation N:` or `value:` line",
                ));
            }
        }
        if self.allocations.is_empty() {
            return Err(empty(file, "no allocation"));
        }
        Ok(())
    }

    /// `Total bytes used: N (...)` and the `Used values:` list, whose length
    /// must be the number of values the buffer-assignment report placed. Each
    /// used value is followed by its ` positions:`, ` uses:` and
    /// ` from instruction:` lines; any other line is refused.
    fn read_values(&mut self, file: &SourceFile) -> Result<(), Error> {
        let mut section = ValuesSection::Head;
        for (offset, line) in lines(&file.text) {
            if line.trim().is_empty() {
                continue;
            }
            section = self.values_line(file, offset, line, section)?;
        }
        if self.total_bytes_used.is_none() {
            return Err(empty(file, "no `Total bytes used:` line"));
        }
        if !matches!(section, ValuesSection::Head | ValuesSection::Done) {
            return Err(empty(
                file,
                "the last used value has no `from instruction:` line",
            ));
        }
        let placed: usize = self.allocations.iter().map(|a| a.values.len()).sum();
        let used = (section == ValuesSection::Done).then_some(self.used_values.len());
        if let Some(used) = used.filter(|_| !self.allocations.is_empty()) {
            if used != placed {
                return Err(empty(
                    file,
                    &format!(
                        "it lists {used} used values where the buffer-assignment report places {placed}"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Where the values report is: which lines may come next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValuesSection {
    /// Before `Used values:`.
    Head,
    /// After a used value's `from instruction:` line (or `Used values:`).
    Done,
    /// After `<id name>`: ` positions:` comes next.
    Value,
    Positions,
    Uses,
}

impl XlaReports {
    /// One line of the values report, read in `section`; the section after it.
    fn values_line(
        &mut self,
        file: &SourceFile,
        offset: usize,
        line: &str,
        section: ValuesSection,
    ) -> Result<ValuesSection, Error> {
        use ValuesSection::*;
        let expected = match section {
            Head if line.starts_with("Total bytes used:") && self.total_bytes_used.is_none() => {
                let pair = parse(file, Rule::total_bytes_used, offset, line)?;
                self.total_bytes_used = first_int(pair);
                return Ok(Head);
            }
            Head if line == "Used values:" => return Ok(Done),
            Head => "`Total bytes used:` or `Used values:`",
            Done if line.starts_with('<') => {
                let pair = parse(file, Rule::used_value, offset, line)?;
                self.used_values.push(lower_used_value(pair));
                return Ok(Value);
            }
            Done => "a used value `<id name @color>`",
            Value if line == " positions:" => return Ok(Positions),
            Value => "` positions:`",
            Positions if line == " uses:" => return Ok(Uses),
            Positions => {
                let pair = parse(file, Rule::position_line, offset, line)?;
                let position = name_and_index(pair);
                if let Some(value) = self.used_values.last_mut() {
                    value.positions.push(position);
                }
                return Ok(Positions);
            }
            Uses if line.starts_with(" from instruction:") => {
                parse(file, Rule::from_instruction, offset, line)?;
                return Ok(Done);
            }
            Uses => {
                parse(file, Rule::use_line, offset, line)?;
                return Ok(Uses);
            }
        };
        Err(unreadable(file, offset, expected))
    }
}

/// `<29 add.9{1} (phi) @0>` as a used value, its positions to come.
fn lower_used_value(pair: pest::iterators::Pair<Rule>) -> UsedValue {
    let mut value = UsedValue {
        id: first_int(pair.clone()).unwrap_or(u64::MAX),
        name: String::new(),
        index: Vec::new(),
        positions: Vec::new(),
    };
    (value.name, value.index) = name_and_index(pair);
    value
}

/// The `value_name` and `shape_index` (`{}` when absent) of a line.
fn name_and_index(pair: pest::iterators::Pair<Rule>) -> (String, Vec<u64>) {
    let (mut name, mut index) = (String::new(), Vec::new());
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::value_name => name = p.as_str().to_string(),
            Rule::shape_index => index = shape_index(p),
            _ => {}
        }
    }
    (name, index)
}

/// A report line that is not what this place in the report holds.
fn unreadable(file: &SourceFile, offset: usize, expected: &str) -> Error {
    Error::at(
        file,
        offset..offset + 1,
        format!("unexpected text in an XLA report (expected {expected})"),
        "not in the format hlomem knows",
    )
    .with_note(
        "a report that cannot be read is not compared: fix or remove it, or run without --verify",
    )
}

/// A report that is empty or was cut off.
fn empty(file: &SourceFile, what: &str) -> Error {
    let end = file.text.len();
    Error::at(
        file,
        end.saturating_sub(1)..end,
        format!("XLA report is empty or cut off: {what}"),
        "the report ends here",
    )
    .with_note(
        "a report that cannot be read is not compared: fix or remove it, or run without --verify",
    )
}

fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split('\n').map(move |line| {
        let start = offset;
        offset += line.len() + 1;
        (start, line.strip_suffix('\r').unwrap_or(line))
    })
}

fn parse<'a>(
    file: &SourceFile,
    rule: Rule,
    offset: usize,
    line: &'a str,
) -> Result<pest::iterators::Pair<'a, Rule>, Error> {
    match ReportParser::parse(rule, line) {
        Ok(mut pairs) => Ok(pairs
            .next()
            .expect("a successful parse yields its rule's pair")),
        Err(e) => {
            let at = match e.location {
                pest::error::InputLocation::Pos(p) => p,
                pest::error::InputLocation::Span((s, _)) => s,
            };
            Err(Error::at(
                file,
                offset + at..offset + at + 1,
                format!("unexpected text in an XLA report ({})", describe(rule)),
                "not in the format hlomem knows",
            )
            .with_note("a newer XLA may have changed this report; the HLO analysis itself does not depend on it"))
        }
    }
}

fn describe(rule: Rule) -> &'static str {
    match rule {
        Rule::allocation_header => "an `allocation N: size S, ...:` line",
        Rule::value_line => "a `value: <id name @color> (size=S,offset=O): shape` line",
        Rule::total_bytes_used | Rule::memory_space_total => "a `Total bytes used: N` line",
        Rule::live_range_header => "the `HloLiveRange (max N):` header",
        Rule::sequence_line => "an `N:name` line",
        Rule::range_line => "a `name{index}:start-end` line",
        Rule::peak_header => "a `Live ranges at T (peak):` line",
        Rule::peak_line => "a `name{index}: N bytes (cumulative: N bytes)` line",
        Rule::breakdown_header => "a `Stack trace breakdown for peak usage: N bytes` line",
        Rule::breakdown_line => {
            "a `name (P%, total: N bytes, current: N bytes, remaining: N bytes)` line"
        }
        Rule::position_line => "a position `  name` or `  name {index}`",
        Rule::use_line => "a use `  name, operand N` or `  (none)`",
        Rule::from_instruction => "a ` from instruction: %name = ...` line",
        Rule::used_value => "a used value `<id name{index} @color>`",
        _ => "a report line",
    }
}

fn int(pair: &pest::iterators::Pair<Rule>) -> u64 {
    pair.as_str().parse().unwrap_or(u64::MAX)
}

fn first_int(pair: pest::iterators::Pair<Rule>) -> Option<u64> {
    pair.into_inner()
        .find(|p| p.as_rule() == Rule::int)
        .map(|p| int(&p))
}

fn shape_index(pair: pest::iterators::Pair<Rule>) -> Vec<u64> {
    pair.into_inner().map(|p| int(&p)).collect()
}

fn lower_allocation(pair: pest::iterators::Pair<Rule>) -> XlaAllocation {
    let mut allocation = XlaAllocation::default();
    let mut ints = 0;
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::int => {
                match ints {
                    0 => allocation.index = int(&p),
                    _ => allocation.size = int(&p),
                }
                ints += 1;
            }
            Rule::parameter_flag => {
                for part in p.into_inner() {
                    match part.as_rule() {
                        Rule::int => allocation.parameter = Some(int(&part)),
                        Rule::shape_index => allocation.parameter_index = shape_index(part),
                        _ => {}
                    }
                }
            }
            Rule::color_flag => allocation.color = first_int(p).unwrap_or(0),
            Rule::simple_flag => match p.as_str() {
                "maybe-live-out" => allocation.maybe_live_out = true,
                "constant" => allocation.constant = true,
                "thread-local" => allocation.thread_local = true,
                "preallocated-temp" => allocation.preallocated_temp = true,
                _ => {}
            },
            _ => {}
        }
    }
    allocation
}

fn lower_value(pair: pest::iterators::Pair<Rule>) -> XlaValue {
    let mut value = XlaValue {
        id: 0,
        name: String::new(),
        index: Vec::new(),
        is_phi: false,
        color: None,
        size: 0,
        offset: 0,
    };
    // The ints are, in order: id, [color], size, offset.
    let mut ints = Vec::new();
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::int => ints.push(int(&p)),
            Rule::value_name => value.name = p.as_str().to_string(),
            Rule::shape_index => value.index = shape_index(p),
            Rule::phi => value.is_phi = true,
            _ => {}
        }
    }
    if let (Some(&id), Some(&size), Some(&offset)) = (
        ints.first(),
        ints.get(ints.len().wrapping_sub(2)),
        ints.last(),
    ) {
        value.id = id;
        value.color = (ints.len() == 4).then(|| ints[1]);
        value.size = size;
        value.offset = offset;
    }
    value
}

/// `a.1{}: 262144 bytes (cumulative: 262144 bytes)`.
fn lower_peak_value(pair: pest::iterators::Pair<Rule>) -> PeakValue {
    let mut value = PeakValue {
        name: String::new(),
        index: Vec::new(),
        bytes: 0,
        cumulative: None,
    };
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::value_name => value.name = p.as_str().to_string(),
            Rule::shape_index => value.index = shape_index(p),
            Rule::int => value.bytes = int(&p),
            Rule::cumulative => value.cumulative = first_int(p),
            _ => {}
        }
    }
    value
}

/// `33 554 444`: thousands separated by spaces.
fn spaced_int(pair: &pest::iterators::Pair<Rule>) -> u64 {
    let digits: String = pair.as_str().chars().filter(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(u64::MAX)
}

fn read_live_ranges(file: &SourceFile) -> Result<XlaLiveRanges, Error> {
    #[derive(PartialEq)]
    enum Section {
        None,
        Sequence,
        Ranges,
        Peak,
        Breakdown,
        Done,
    }
    let mut out = XlaLiveRanges::default();
    let mut section = Section::None;
    let mut header_seen = false;
    for (offset, line) in lines(&file.text) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        if line.starts_with("HloLiveRange") {
            out.max_time =
                first_int(parse(file, Rule::live_range_header, offset, line)?).unwrap_or(0);
            header_seen = true;
            continue;
        }
        if !header_seen {
            return Err(unreadable(
                file,
                offset,
                "the `HloLiveRange (max N):` header",
            ));
        }
        match trimmed {
            "InstructionSequence:" => section = Section::Sequence,
            "BufferLiveRange:" => section = Section::Ranges,
            _ if trimmed.starts_with("Live ranges at ") => {
                out.peak_time = first_int(parse(file, Rule::peak_header, offset, line)?);
                section = Section::Peak;
            }
            _ if trimmed.starts_with("Stack trace breakdown") && section == Section::Peak => {
                let pair = parse(file, Rule::breakdown_header, offset, line)?;
                out.breakdown_total = pair.into_inner().next().map(|n| spaced_int(&n));
                section = Section::Breakdown;
            }
            // XLA prints this instead of the peak's values when it has none.
            _ if trimmed.starts_with("Peak memory could not") => section = Section::Done,
            _ => match section {
                Section::Sequence => {
                    let pair = parse(file, Rule::sequence_line, offset, line)?;
                    let mut parts = pair.into_inner();
                    if parts.next().map(|n| int(&n)) != Some(out.sequence.len() as u64) {
                        return Err(unreadable(
                            file,
                            offset,
                            "the next position of the sequence",
                        ));
                    }
                    if let Some(name) = parts.find(|p| p.as_rule() == Rule::value_name) {
                        out.sequence.push(name.as_str().to_string());
                    }
                }
                Section::Ranges => {
                    let mut parts = parse(file, Rule::range_line, offset, line)?.into_inner();
                    let (Some(name), Some(index), Some(start), Some(end)) =
                        (parts.next(), parts.next(), parts.next(), parts.next())
                    else {
                        continue;
                    };
                    out.ranges.push((
                        name.as_str().to_string(),
                        shape_index(index),
                        int(&start),
                        int(&end),
                    ));
                }
                Section::Peak => {
                    let pair = parse(file, Rule::peak_line, offset, line)?;
                    out.peak_values.push(lower_peak_value(pair));
                }
                Section::Breakdown => {
                    parse(file, Rule::breakdown_line, offset, line)?;
                }
                Section::None => {
                    return Err(unreadable(
                        file,
                        offset,
                        "`InstructionSequence:` or `BufferLiveRange:`",
                    ))
                }
                Section::Done => return Err(unreadable(file, offset, "the end of the report")),
            },
        }
    }
    // XLA writes the sequence, every value's range and the peak, in that
    // order: a report without all three was cut off.
    let positions = out.sequence.len() as u64;
    if !header_seen {
        return Err(empty(file, "no `HloLiveRange` header"));
    }
    if positions != out.max_time && positions != out.max_time + 1 {
        return Err(empty(
            file,
            &format!(
                "{positions} schedule positions where the header says {}",
                out.max_time
            ),
        ));
    }
    if out.ranges.is_empty() || out.peak_time.is_none() {
        return Err(empty(file, "no `Live ranges at T (peak):` section"));
    }
    Ok(out)
}
