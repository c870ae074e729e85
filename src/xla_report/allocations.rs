//! The allocations part: `BufferAssignment:`, then `allocation N: ...` lines
//! numbered from 0, each followed by its ` value: ...` lines.

use super::syntax::{cut_off, first_int, int, parse, shape_index, unreadable, Rule};
use super::{XlaAllocation, XlaReports, XlaValue};
use crate::error::Error;
use crate::source::SourceFile;

/// Reads one line of the part (its `BufferAssignment:` header was read).
/// Anything else than an allocation or a value, or a gap in the numbering,
/// is an error: a report that was mangled must not pass as "all numbers
/// agree".
pub(super) fn line(
    reports: &mut XlaReports,
    file: &SourceFile,
    offset: usize,
    line: &str,
) -> Result<(), Error> {
    if line.starts_with("allocation ") {
        let allocation = lower_allocation(parse(file, Rule::allocation_header, offset, line)?);
        if allocation.index != reports.allocations.len() as u64 {
            return Err(unreadable(file, offset, "the next allocation's number"));
        }
        reports.allocations.push(allocation);
    } else if line.trim_start().starts_with("value: <") {
        let value = lower_value(parse(file, Rule::value_line, offset, line)?);
        match reports.allocations.last_mut() {
            Some(allocation) => allocation.values.push(value),
            None => return Err(unreadable(file, offset, "an `allocation N:` line first")),
        }
    } else {
        return Err(unreadable(
            file,
            offset,
            "an `allocation N:` or `value:` line",
        ));
    }
    Ok(())
}

/// The part ended at `end`: a report without an allocation was cut off.
pub(super) fn finish(reports: &XlaReports, file: &SourceFile, end: usize) -> Result<(), Error> {
    if reports.allocations.is_empty() {
        return Err(cut_off(file, end, "no allocation"));
    }
    Ok(())
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
