//! The `HloModule` line (aliases, donors, the entry layout) and the stack-frame tables.

use std::collections::HashMap;

use pest::iterators::Pair;

use super::{raw_attribute, string_contents, At};
use crate::error::Error;
use crate::hlo::ir::*;
use crate::hlo::metadata::{FileLocation, StackFrame, StackFrameIndex};
use crate::hlo::parse::{self, Line, Rule};
use crate::hlo::shape::Shape;
use crate::source::SourceFile;

pub(super) fn lower_header(file: &SourceFile, line: Line) -> Result<(String, ModuleHeader), Error> {
    let at = At {
        file,
        base: line.offset,
    };
    let pair = parse::parse_line(file, Rule::header, line)?;
    let mut name = String::new();
    let mut header = ModuleHeader {
        num_partitions: 1,
        replica_count: 1,
        ..ModuleHeader::default()
    };
    for p in pair.into_inner() {
        match p.as_rule() {
            Rule::module_name => name = p.as_str().to_string(),
            Rule::entry_layout_attr => {
                if let Some(ps) = p.into_inner().next() {
                    header.entry_layout = Some(lower_program_shape(at, ps)?);
                }
            }
            Rule::io_alias_attr => {
                for entry in p.into_inner() {
                    header
                        .input_output_alias
                        .push(lower_alias_entry(at, entry)?);
                }
            }
            Rule::buffer_donor_attr => {
                for entry in p.into_inner() {
                    let mut parts = entry.into_inner();
                    let (Some(param), Some(index)) = (parts.next(), parts.next()) else {
                        continue;
                    };
                    header.buffer_donors.push(BufferDonor {
                        parameter: at.number(&param)?,
                        parameter_index: lower_shape_index(at, index)?,
                    });
                }
            }
            Rule::EOI => {}
            _ => {
                let attribute = raw_attribute(at, &p);
                let value = file.text.get(attribute.value.range()).unwrap_or("");
                match file.text.get(attribute.name.range()).unwrap_or("") {
                    "is_scheduled" => header.is_scheduled = value == "true",
                    "num_partitions" => header.num_partitions = value.parse().unwrap_or(1),
                    "replica_count" => header.replica_count = value.parse().unwrap_or(1),
                    _ => header.other.push(attribute),
                }
            }
        }
    }
    Ok((name, header))
}

fn lower_program_shape(at: At, pair: Pair<Rule>) -> Result<ProgramShape, Error> {
    // A layout repeats each parameter's shape: each spelling is parsed once.
    let mut table = super::ShapeCache::default();
    let mut shapes = pair
        .into_inner()
        .map(|s| {
            let text = Line {
                offset: at.offset(&s),
                text: s.as_str(),
            };
            super::shape_of(at.file, text, &mut table).map(|shape| Shape::clone(&*shape))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let result = shapes.pop().unwrap_or(Shape::Tuple(Vec::new()));
    Ok(ProgramShape {
        parameters: shapes,
        result,
    })
}

fn lower_alias_entry(at: At, pair: Pair<Rule>) -> Result<IoAlias, Error> {
    let mut alias = IoAlias {
        output_index: vec![],
        parameter: 0,
        parameter_index: vec![],
        must_alias: false,
    };
    for (i, p) in pair.into_inner().enumerate() {
        match (i, p.as_rule()) {
            (0, _) => alias.output_index = lower_shape_index(at, p)?,
            (_, Rule::int) => alias.parameter = at.number(&p)?,
            (_, Rule::shape_index) => alias.parameter_index = lower_shape_index(at, p)?,
            (_, Rule::alias_kind) => alias.must_alias = p.as_str() == "must-alias",
            _ => {}
        }
    }
    Ok(alias)
}

pub(super) fn lower_shape_index(at: At, pair: Pair<Rule>) -> Result<Vec<u64>, Error> {
    pair.into_inner().map(|p| at.number(&p)).collect()
}

pub(super) fn lower_stack_tables(
    file: &SourceFile,
    tables: Pair<Rule>,
) -> Result<StackFrameIndex, Error> {
    let at = At { file, base: 0 };
    let mut index = StackFrameIndex::default();
    let mut section = Rule::kw_file_names;
    // Table references are 1-based with 0 for "none"; `parent_frame_id` is
    // printed one higher still, so 1 means "no parent" (notes §1.3).
    let to_index = |v: u64, shift: u64| {
        usize::try_from(v)
            .ok()
            .and_then(|v| v.checked_sub(shift as usize + 1))
    };
    for row in tables.into_inner() {
        match row.as_rule() {
            Rule::string_row => {
                let Some(s) = row.into_inner().nth(1) else {
                    continue;
                };
                let text = crate::hlo::metadata::unescape(
                    file.text.get(string_contents(at, &s).range()).unwrap_or(""),
                );
                match section {
                    Rule::kw_file_names => index.file_names.push(text.into()),
                    _ => index.function_names.push(text.into()),
                }
            }
            Rule::record_row => {
                let mut fields = HashMap::new();
                for field in row.into_inner().skip(1) {
                    let mut kv = field.into_inner();
                    if let (Some(k), Some(v)) = (kv.next(), kv.next()) {
                        fields.insert(k.as_str(), at.number(&v)?);
                    }
                }
                let get = |k: &str| fields.get(k).copied().unwrap_or(0);
                match section {
                    Rule::kw_file_locations => index.file_locations.push(FileLocation {
                        file_name: to_index(get("file_name_id"), 0),
                        function_name: to_index(get("function_name_id"), 0),
                        line: get("line"),
                        column: get("column"),
                    }),
                    _ => index.frames.push(StackFrame {
                        file_location: to_index(get("file_location_id"), 0),
                        parent: to_index(get("parent_frame_id"), 1),
                    }),
                }
            }
            keyword => section = keyword,
        }
    }
    Ok(index)
}
