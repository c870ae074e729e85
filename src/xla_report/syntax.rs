//! The report grammar (`grammar/report.pest`) run on one line at a time, the
//! small readers of its tokens, and the two errors a report can get: a line
//! that is not what its place holds, and a part that ends too early.

use pest::Parser;

use crate::error::Error;
use crate::source::SourceFile;

#[derive(pest_derive::Parser)]
#[grammar = "grammar/report.pest"]
struct ReportParser;

/// What every refusal of a report ends with.
const NOT_COMPARED: &str =
    "a report that cannot be read is not compared: fix or remove it, or run without --verify";

/// The lines of a text with the byte offset each starts at (a `\r` before
/// the `\n` is not part of the line).
pub(super) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split('\n').map(move |line| {
        let start = offset;
        offset += line.len() + 1;
        (start, line.strip_suffix('\r').unwrap_or(line))
    })
}

/// `line` (at `offset` in `file`) read whole as `rule`; an error at the first
/// character the rule could not read.
pub(super) fn parse<'a>(
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

/// Whether `text` is, whole, what `rule` reads.
pub(super) fn reads_as(rule: Rule, text: &str) -> bool {
    ReportParser::parse(rule, text).is_ok()
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

/// A report line that is not what this place in the report holds.
pub(super) fn unreadable(file: &SourceFile, offset: usize, expected: &str) -> Error {
    Error::at(
        file,
        offset..offset + 1,
        format!("unexpected text in an XLA report (expected {expected})"),
        "not in the format hlomem knows",
    )
    .with_note(NOT_COMPARED)
}

/// A report, or a part of one, that is empty or ends too early: `what` is
/// missing where the part ends, at `end` (the end of the file, or the line
/// that starts the next part).
pub(super) fn cut_off(file: &SourceFile, end: usize, what: &str) -> Error {
    let len = file.text.len();
    let (span, label) = if end >= len {
        (len.saturating_sub(1)..len, "the report ends here")
    } else {
        (
            end..end + 1,
            "the part ends here, where the next one starts",
        )
    };
    Error::at(
        file,
        span,
        format!("XLA report is empty or cut off: {what}"),
        label,
    )
    .with_note(NOT_COMPARED)
}

/// A part of the report that XLA writes once, found a second time.
pub(super) fn repeated(file: &SourceFile, offset: usize, part: &str, first: &str) -> Error {
    Error::at(
        file,
        offset..offset + 1,
        format!("XLA's reports hold {part} twice"),
        format!("read already in {first}"),
    )
    .with_note(NOT_COMPARED)
}

pub(super) fn int(pair: &pest::iterators::Pair<Rule>) -> u64 {
    pair.as_str().parse().unwrap_or(u64::MAX)
}

pub(super) fn first_int(pair: pest::iterators::Pair<Rule>) -> Option<u64> {
    pair.into_inner()
        .find(|p| p.as_rule() == Rule::int)
        .map(|p| int(&p))
}

pub(super) fn shape_index(pair: pest::iterators::Pair<Rule>) -> Vec<u64> {
    pair.into_inner().map(|p| int(&p)).collect()
}

/// The `value_name` and `shape_index` (`{}` when absent) of a line.
pub(super) fn name_and_index(pair: pest::iterators::Pair<Rule>) -> (String, Vec<u64>) {
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
