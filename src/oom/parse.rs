//! Finds an out-of-memory message in pasted text and reads it (`grammar/oom.pest`).
//!
//! Each line is parsed on its own; a small state machine remembers which block
//! (stats, peak buffers, a TPU table) the lines belong to.

use pest::iterators::Pair;
use pest::Parser;

use super::model::*;

#[derive(pest_derive::Parser)]
#[grammar = "grammar/oom.pest"]
struct OomParser;

/// What was looked for, for the "not recognized" message.
pub const LOOKED_FOR: &str =
    "\"Out of memory while trying to allocate\", \"BufferAssignment OOM Debugging\", \
\"Peak buffers:\", \"Failed to allocate request for\", \"Allocator (...) ran out of memory\", \
\"Ran out of memory in memory space\", \"Total hbm usage >=\", \"Largest program allocations\", \
\"Attempting to reserve/allocate ... That was not possible\", \"Aborting compilation early\", \
\"Can't reduce memory use below\"";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Stats,
    Peak,
    TpuUsage,
    TpuRequirement,
    TpuLargest,
    Capacity,
    Persistent,
}

#[derive(Default)]
struct Seen {
    out_of_memory: bool,
    failed_request: bool,
    bfc: bool,
    debug_block: bool,
    stats_header: bool,
    peak_header: bool,
    ran_out: bool,
    tpu_tables: bool,
    abort: bool,
    sparse_core: bool,
    reserve: bool,
    allocate: bool,
    warnings: bool,
    /// The last meaningful line was cut off (a row without its value, a key without its text).
    cut_line: bool,
    /// The text ends with a BFC allocator's memory map bar.
    ends_in_bar: bool,
    /// TPU-only entry fields (`XLA label:`, `Unpadded size:`, `Allocation type:`).
    tpu_fields: bool,
}

/// Reads the message in `text`; `None` if there is none.
pub fn parse_message(text: &str) -> Option<OomMessage> {
    let mut msg = OomMessage {
        format: OomFormat::GpuAllocation,
        truncated: false,
        requested: None,
        host: false,
        allocator: None,
        device: None,
        stats: Stats::default(),
        peak_buffers: Vec::new(),
        tpu: None,
        warnings: Vec::new(),
    };
    let mut seen = Seen::default();
    let mut block = Block::None;
    for raw in text.lines() {
        let line = raw.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        // A BFC allocator's memory map bar (`***___`) means a log cut before the error.
        let body = line.rsplit("] ").next().unwrap_or(line).trim();
        seen.ends_in_bar = body.len() > 10 && body.chars().all(|c| c == '*' || c == '_');
        let Ok(mut pairs) = OomParser::parse(Rule::oom_line, line) else {
            continue;
        };
        let Some(line_pair) = pairs.next() else {
            continue;
        };
        let Some(item) = line_pair.into_inner().next() else {
            continue;
        };
        apply(&mut msg, &mut seen, &mut block, item);
    }
    msg.format = detect_format(&msg, &seen)?;
    exactify(&mut msg);
    msg.truncated = is_truncated(&msg, &seen);
    Some(msg)
}

fn detect_format(msg: &OomMessage, seen: &Seen) -> Option<OomFormat> {
    let format = if seen.sparse_core {
        OomFormat::TpuSparseCore
    } else if seen.abort {
        OomFormat::TpuCompileAbort
    } else if seen.reserve {
        OomFormat::TpuRuntimeReserve
    } else if seen.allocate {
        OomFormat::TpuRuntimeAllocate
    } else if seen.ran_out || seen.tpu_tables || seen.tpu_fields {
        OomFormat::TpuCompile
    } else if seen.debug_block
        || seen.stats_header
        || seen.peak_header
        || !msg.peak_buffers.is_empty()
    {
        OomFormat::GpuBufferAssignment
    } else if seen.out_of_memory && msg.host {
        OomFormat::HostAllocation
    } else if seen.failed_request {
        OomFormat::GpuFailedRequest
    } else if seen.out_of_memory {
        OomFormat::GpuAllocation
    } else if seen.warnings {
        OomFormat::GpuCompileWarnings
    } else if seen.bfc {
        OomFormat::GpuBfcAllocator
    } else {
        return None;
    };
    Some(format)
}

fn is_truncated(msg: &OomMessage, seen: &Seen) -> bool {
    let open_entry = msg.peak_buffers.last().is_some_and(|b| !b.complete);
    let stats_incomplete = seen.stats_header && msg.stats.total.is_none();
    // Peak buffers without the block that introduces them: a fragment.
    let fragment = !msg.peak_buffers.is_empty() && !seen.peak_header && !seen.tpu_tables;
    open_entry || stats_incomplete || fragment || seen.cut_line || seen.ends_in_bar
}

/// The integers among a line's parts, in order (unparsable ones skipped).
fn ints_in<'a>(parts: impl Iterator<Item = Pair<'a, Rule>>) -> Vec<u64> {
    parts
        .filter(|p| p.as_rule() == Rule::int)
        .filter_map(|p| int_of(&p))
        .collect()
}

/// The sizes among a line's parts, in order; `None` keeps a size's position
/// when it could not be read.
fn sizes_in<'a>(parts: impl Iterator<Item = Pair<'a, Rule>>) -> Vec<Option<Amount>> {
    parts
        .filter(|p| p.as_rule() == Rule::size)
        .map(|p| size_of(&p))
        .collect()
}

fn bytes_or_unknown(bytes: Option<&u64>) -> String {
    bytes.map_or("?".to_string(), |b| crate::units::human_bytes(*b))
}

fn size_of(pair: &Pair<Rule>) -> Option<Amount> {
    Amount::parse_human(pair.as_str())
}

fn int_of(pair: &Pair<Rule>) -> Option<u64> {
    pair.as_str().parse().ok()
}

fn tpu(msg: &mut OomMessage) -> &mut TpuUsage {
    msg.tpu.get_or_insert_with(TpuUsage::default)
}

fn unquote(text: &str) -> String {
    let inner = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(text);
    crate::hlo::metadata::unescape(inner)
}

/// Applies one recognized line; returns whether it belonged to a message.
fn apply(msg: &mut OomMessage, seen: &mut Seen, block: &mut Block, item: Pair<Rule>) -> bool {
    let rule = item.as_rule();
    let mut parts = item.clone().into_inner();
    match rule {
        Rule::anywhere => {
            let Some(message) = parts.next() else {
                return false;
            };
            return apply(msg, seen, block, message);
        }
        Rule::out_of_memory => {
            seen.out_of_memory = true;
            for p in parts {
                match p.as_rule() {
                    Rule::host => msg.host = true,
                    Rule::byte_count => {
                        msg.requested = p
                            .into_inner()
                            .next()
                            .and_then(|i| int_of(&i))
                            .map(Amount::exact)
                    }
                    Rule::size => msg.requested = size_of(&p),
                    Rule::allocator_name => msg.allocator = Some(p.as_str().to_string()),
                    Rule::int => msg.device = Some(p.as_str().to_string()),
                    _ => {}
                }
            }
        }
        Rule::failed_request => {
            seen.failed_request = true;
            let ints = ints_in(parts);
            if let Some(&bytes) = ints.first() {
                msg.requested = Some(Amount::exact(bytes));
            }
            msg.device = ints.get(1).map(u64::to_string);
        }
        Rule::bfc_out_of_memory => {
            seen.bfc = true;
            for p in parts {
                match p.as_rule() {
                    Rule::allocator_name_paren => msg.allocator = Some(p.as_str().to_string()),
                    Rule::int if msg.requested.is_none() => {
                        msg.requested = int_of(&p).map(Amount::exact)
                    }
                    _ => {}
                }
            }
        }
        Rule::buffer_assignment_header => seen.debug_block = true,
        Rule::stats_header => {
            seen.stats_header = true;
            *block = Block::Stats;
        }
        Rule::stat_line => {
            let name = parts
                .next()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default();
            let value = parts
                .find(|p| p.as_rule() == Rule::size)
                .and_then(|p| size_of(&p));
            if value.is_none() {
                seen.cut_line = true;
            }
            let slot = match name.as_str() {
                "parameter allocation" => &mut msg.stats.parameter,
                "constant allocation" => &mut msg.stats.constant,
                "maybe_live_out allocation" => &mut msg.stats.maybe_live_out,
                "preallocated temp allocation" => &mut msg.stats.preallocated_temp,
                "preallocated temp fragmentation" => &mut msg.stats.preallocated_temp_fragmentation,
                "total allocation" => &mut msg.stats.total,
                _ => &mut msg.stats.total_fragmentation,
            };
            *slot = value;
        }
        Rule::peak_buffers_header => {
            seen.peak_header = true;
            *block = Block::Peak;
        }
        Rule::buffer_header => {
            let number = parts.next().and_then(|p| int_of(&p)).unwrap_or(0);
            msg.peak_buffers.push(PeakBuffer {
                number,
                ..PeakBuffer::default()
            });
            *block = Block::Peak;
        }
        Rule::tpu_item => {
            let number = parts.next().and_then(|p| int_of(&p)).unwrap_or(0);
            let size = parts.next().and_then(|p| size_of(&p));
            msg.peak_buffers.push(PeakBuffer {
                number,
                size,
                ..PeakBuffer::default()
            });
            *block = Block::TpuLargest;
        }
        Rule::size_line
        | Rule::operator_line
        | Rule::entry_parameter_line
        | Rule::xla_label_line
        | Rule::shape_line
        | Rule::unpadded_line
        | Rule::padding_line
        | Rule::allocation_type_line => {
            // A fragment may start in the middle of an entry.
            if msg.peak_buffers.last().is_none_or(|b| b.complete) {
                msg.peak_buffers.push(PeakBuffer::default());
            }
            let tpu_only = matches!(
                rule,
                Rule::unpadded_line | Rule::padding_line | Rule::allocation_type_line
            ) || (rule == Rule::xla_label_line
                && item.as_str().starts_with("XLA label"));
            seen.tpu_fields |= tpu_only;
            let buffer = msg.peak_buffers.last_mut().expect("just ensured");
            apply_buffer_field(buffer, seen, rule, item);
        }
        Rule::separator_line => {
            if let Some(b) = msg.peak_buffers.last_mut() {
                b.complete = true;
            }
        }
        Rule::ran_out => {
            seen.ran_out = true;
            let t = tpu(msg);
            let mut sizes = Vec::new();
            for p in parts {
                match p.as_rule() {
                    Rule::memory_space => t.memory_space = Some(p.as_str().to_string()),
                    Rule::size => sizes.push(size_of(&p)),
                    Rule::exceeded_capacity => {
                        t.exceeded_by = p
                            .into_inner()
                            .find(|q| q.as_rule() == Rule::size)
                            .and_then(|q| size_of(&q))
                    }
                    _ => {}
                }
            }
            if let [used, capacity] = sizes[..] {
                t.used = used;
                t.capacity = capacity;
            }
        }
        Rule::exceeded_capacity => {
            tpu(msg).exceeded_by = parts
                .find(|q| q.as_rule() == Rule::size)
                .and_then(|q| size_of(&q));
        }
        Rule::total_usage_header => {
            seen.tpu_tables = true;
            let t = tpu(msg);
            for p in parts {
                match p.as_rule() {
                    Rule::memory_space => {
                        t.memory_space.get_or_insert_with(|| p.as_str().to_string());
                    }
                    Rule::size => t.total_usage = size_of(&p),
                    _ => {}
                }
            }
            *block = Block::TpuUsage;
        }
        Rule::program_requirement_header => {
            seen.tpu_tables = true;
            tpu(msg).program_requirement = parts
                .find(|p| p.as_rule() == Rule::size)
                .and_then(|p| size_of(&p));
            *block = Block::TpuRequirement;
        }
        Rule::largest_allocations_header => {
            seen.tpu_tables = true;
            *block = Block::TpuLargest;
        }
        Rule::output_size_line => {
            let sizes = sizes_in(parts);
            let t = tpu(msg);
            t.output_size = sizes.first().copied().flatten();
            t.output_shared_with_arguments = sizes.get(1).copied().flatten();
        }
        Rule::usage_row => {
            let target = match *block {
                Block::TpuUsage | Block::Persistent => &mut tpu(msg).usage_rows,
                Block::TpuRequirement => &mut tpu(msg).requirement_rows,
                _ => return false,
            };
            let label = parts
                .next()
                .map(|p| p.as_str().trim().to_string())
                .unwrap_or_default();
            let value = parts.next().filter(|p| p.as_rule() != Rule::EOI);
            let amount = value.as_ref().and_then(size_of);
            if value.is_none() {
                // `overlays` with nothing after it: the line was cut off.
                seen.cut_line = true;
            }
            target.push((label, amount));
        }
        Rule::attempting_reserve | Rule::attempting_allocate => {
            if rule == Rule::attempting_reserve {
                seen.reserve = true;
            } else {
                seen.allocate = true;
            }
            let mut sizes = Vec::new();
            for p in parts {
                match p.as_rule() {
                    Rule::size => sizes.push(size_of(&p)),
                    Rule::device => msg.device = Some(p.as_str().to_string()),
                    _ => {}
                }
            }
            msg.requested = sizes.first().copied().flatten();
            tpu(msg).free = sizes.get(1).copied().flatten();
        }
        Rule::capacity_header => {
            let t = tpu(msg);
            for p in parts {
                match p.as_rule() {
                    Rule::memory_space => {
                        t.memory_space
                            .get_or_insert_with(|| p.as_str().to_lowercase());
                    }
                    Rule::size => t.capacity = size_of(&p),
                    _ => {}
                }
            }
            *block = Block::Capacity;
        }
        Rule::capacity_row => {
            let label = parts
                .next()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default();
            let bytes = parts
                .find(|p| p.as_rule() == Rule::grouped_int)
                .and_then(|p| p.as_str().replace(',', "").parse::<i128>().ok());
            if let Some(bytes) = bytes {
                tpu(msg).capacity_rows.push((label, bytes));
            }
        }
        Rule::heap_status_header | Rule::free_chunk_row => {}
        Rule::persistent_header => *block = Block::Persistent,
        Rule::abort_early => {
            seen.abort = true;
            let sizes = sizes_in(parts);
            let t = tpu(msg);
            t.requires = sizes.first().copied().flatten();
            t.available = sizes.get(1).copied().flatten();
        }
        Rule::tensorcore_usage => {
            seen.sparse_core = true;
            let sizes = sizes_in(parts);
            let t = tpu(msg);
            t.used = sizes.first().copied().flatten();
            t.sparse_core = sizes.get(1).copied().flatten();
            t.capacity = sizes.get(2).copied().flatten();
        }
        Rule::remat_warning => {
            seen.warnings = true;
            let ints = ints_in(parts);
            msg.warnings.push(Warning {
                kind: "rematerialization".into(),
                message: format!(
                    "rematerialization could not bring memory below the limit; it stays at {}",
                    bytes_or_unknown(ints.get(1))
                ),
                bytes: ints.get(1).copied(),
            });
        }
        Rule::arguments_exceed => {
            seen.warnings = true;
            let ints = ints_in(parts);
            msg.warnings.push(Warning {
                kind: "arguments-exceed-limit".into(),
                message: format!(
                    "the program's inputs and outputs alone ({}) exceed the device memory limit ({})",
                    bytes_or_unknown(ints.first()),
                    bytes_or_unknown(ints.get(1))
                ),
                bytes: ints.first().copied(),
            });
        }
        _ => return false,
    }
    true
}

fn apply_buffer_field(buffer: &mut PeakBuffer, seen: &mut Seen, rule: Rule, item: Pair<Rule>) {
    let text = || {
        item.clone()
            .into_inner()
            .find(|p| p.as_rule() == Rule::text)
            .map(|p| p.as_str().trim().to_string())
    };
    match rule {
        Rule::size_line => buffer.size = item.clone().into_inner().next().and_then(|p| size_of(&p)),
        Rule::operator_line => {
            for field in item.clone().into_inner() {
                let mut kv = field.into_inner();
                let (Some(k), Some(v)) = (kv.next(), kv.next()) else {
                    continue;
                };
                let value = unquote(v.as_str());
                match k.as_str() {
                    "op_name" => buffer.op_name = Some(value),
                    "op_type" => buffer.op_type = Some(value),
                    "source_file" => buffer.source_file = Some(value),
                    "source_line" => buffer.source_line = value.parse().ok(),
                    "deduplicated_name" => buffer.deduplicated_name = Some(value),
                    _ => {}
                }
            }
        }
        Rule::entry_parameter_line => {
            buffer.kind = Some("parameter".into());
            buffer.shape = text();
            if buffer.shape.is_none() {
                seen.cut_line = true;
            }
        }
        Rule::xla_label_line => {
            buffer.label = text();
            buffer.kind.get_or_insert_with(|| "instruction".into());
        }
        Rule::shape_line => buffer.shape = text(),
        Rule::unpadded_line => {
            buffer.unpadded_size = item.clone().into_inner().next().and_then(|p| size_of(&p))
        }
        Rule::padding_line => {
            buffer.padding = item.clone().into_inner().next().and_then(|p| size_of(&p))
        }
        Rule::allocation_type_line => buffer.kind = text(),
        _ => {}
    }
}

/// Sizes printed rounded that print exactly like the requested byte count are
/// that byte count (the failed allocation is one of the listed buffers).
fn exactify(msg: &mut OomMessage) {
    let Some(requested) = msg.requested.filter(|r| !r.approximate) else {
        return;
    };
    let printed = crate::units::human_bytes(requested.bytes);
    let fix = |a: &mut Option<Amount>| {
        if let Some(amount) = a {
            if amount.approximate && crate::units::human_bytes(amount.bytes) == printed {
                *amount = requested;
            }
        }
    };
    for b in &mut msg.peak_buffers {
        fix(&mut b.size);
    }
    let s = &mut msg.stats;
    for slot in [
        &mut s.maybe_live_out,
        &mut s.preallocated_temp,
        &mut s.parameter,
        &mut s.total,
    ] {
        fix(slot);
    }
}
