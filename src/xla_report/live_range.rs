//! The live-range part (`HloLiveRange::ToString`): `HloLiveRange (max N):`,
//! the flattened `InstructionSequence:`, every value's `BufferLiveRange:`,
//! the values `Live ranges at T (peak):` and, since 2025, the `Stack trace
//! breakdown for peak usage`.

use super::syntax::{cut_off, first_int, int, parse, shape_index, unreadable, Rule};
use super::{PeakValue, XlaLiveRanges};
use crate::error::Error;
use crate::source::SourceFile;

#[derive(Debug, Default, PartialEq)]
enum Section {
    /// After the header.
    #[default]
    None,
    Sequence,
    Ranges,
    Peak,
    Breakdown,
    /// After `Peak memory could not be determined ...`: nothing may follow.
    Done,
}

/// The live-range part being read.
#[derive(Debug, Default)]
pub(super) struct LiveRange {
    out: XlaLiveRanges,
    section: Section,
    header_seen: bool,
}

impl LiveRange {
    /// Reads one line of the part; its first is the `HloLiveRange (max N):`
    /// header, which the caller saw start the part.
    pub(super) fn line(
        &mut self,
        file: &SourceFile,
        offset: usize,
        line: &str,
    ) -> Result<(), Error> {
        let out = &mut self.out;
        let trimmed = line.trim_start();
        if !self.header_seen {
            out.max_time =
                first_int(parse(file, Rule::live_range_header, offset, line)?).unwrap_or(0);
            self.header_seen = true;
            return Ok(());
        }
        match trimmed {
            "InstructionSequence:" => self.section = Section::Sequence,
            "BufferLiveRange:" => self.section = Section::Ranges,
            _ if trimmed.starts_with("Live ranges at ") => {
                out.peak_time = first_int(parse(file, Rule::peak_header, offset, line)?);
                self.section = Section::Peak;
            }
            _ if trimmed.starts_with("Stack trace breakdown") && self.section == Section::Peak => {
                let pair = parse(file, Rule::breakdown_header, offset, line)?;
                out.breakdown_total = pair.into_inner().next().map(|n| spaced_int(&n));
                self.section = Section::Breakdown;
            }
            // XLA prints this instead of the peak's values when it has none.
            _ if trimmed.starts_with("Peak memory could not") => self.section = Section::Done,
            _ => match self.section {
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
                    if let (Some(name), Some(index), Some(start), Some(end)) =
                        (parts.next(), parts.next(), parts.next(), parts.next())
                    {
                        out.ranges.push((
                            name.as_str().to_string(),
                            shape_index(index),
                            int(&start),
                            int(&end),
                        ));
                    }
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
        Ok(())
    }

    /// The part ended at `end`. XLA writes the sequence, every value's range
    /// and the peak, in that order: a part without all three was cut off.
    pub(super) fn finish(self, file: &SourceFile, end: usize) -> Result<XlaLiveRanges, Error> {
        let out = self.out;
        let positions = out.sequence.len() as u64;
        if positions != out.max_time && positions != out.max_time + 1 {
            return Err(cut_off(
                file,
                end,
                &format!(
                    "{positions} schedule positions where the header says {}",
                    out.max_time
                ),
            ));
        }
        if out.ranges.is_empty() || out.peak_time.is_none() {
            return Err(cut_off(file, end, "no `Live ranges at T (peak):` section"));
        }
        Ok(out)
    }
}

/// `a.1{}: 262144 bytes (cumulative: 262144 bytes)`.
fn lower_peak_value(pair: pest::iterators::Pair<Rule>) -> PeakValue {
    let mut value = PeakValue {
        name: String::new(),
        index: Vec::new(),
        indexed: false,
        bytes: 0,
        cumulative: None,
    };
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::value_name => value.name = p.as_str().to_string(),
            Rule::shape_index => {
                value.index = shape_index(p);
                value.indexed = true;
            }
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
