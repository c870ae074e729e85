//! Finds the out-of-memory messages in pasted text and reads them
//! (`grammar/oom.pest`).
//!
//! Each logical line (see `lines`) is parsed on its own; a small state machine
//! remembers which block (stats, peak buffers, a TPU table) the lines belong
//! to, and which message: a second error headline, or an allocator or
//! compiler line after an error, starts the next one.

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
\"Ran out of memory in memory space\", \"Ran out of memory on HBM, ... HLO temporaries\", \
\"Total hbm usage >=\", \"Largest program allocations\", \
\"Attempting to reserve/allocate ... That was not possible\", \"Aborting compilation early\", \
\"Can't reduce memory use below\", \"Out of memory allocating N bytes\", \
\"failed to allocate ... from device\", \"Scoped allocation with size\", \
\"OOM when allocating tensor\"";

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
    scoped: bool,
    driver: bool,
    tf_tensor: bool,
    graph: bool,
    out_of_memory_allocating: bool,
}

/// What a recognized message part does to the message being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The error itself (`Out of memory while trying to allocate`, `Ran out of
    /// memory in memory space`): a second one starts another message.
    Headline,
    /// Lines printed before an error (BFC allocator, driver, compiler
    /// warnings): after a headline they belong to the next message.
    Preamble,
    /// Everything else belongs to the message being read.
    Part,
}

fn role(rule: Rule, reader: &Reader) -> Role {
    match rule {
        Rule::out_of_memory
        | Rule::out_of_memory_allocating
        | Rule::failed_request
        | Rule::ran_out
        | Rule::attempting_reserve
        | Rule::attempting_allocate
        | Rule::abort_early
        | Rule::tensorcore_usage
        | Rule::tf_tensor_oom
        | Rule::graph_instantiate => Role::Headline,
        // The scoped-VMEM sentence follows `Ran out of memory in memory space
        // vmem`; on its own it is the error.
        Rule::scoped_allocation if reader.seen.ran_out && !reader.seen.scoped => Role::Part,
        Rule::scoped_allocation => Role::Headline,
        Rule::bfc_out_of_memory
        | Rule::driver_failure
        | Rule::pinned_host_failure
        | Rule::remat_warning
        | Rule::arguments_exceed => Role::Preamble,
        _ => Role::Part,
    }
}

/// One message being read: what it says so far and which block the next
/// lines belong to.
struct Reader {
    msg: OomMessage,
    seen: Seen,
    block: Block,
    /// The headline's text, without spaces: the same error printed twice (a
    /// log line, then the traceback) is one message.
    key: Option<String>,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            msg: OomMessage::new(OomFormat::GpuAllocation),
            seen: Seen::default(),
            block: Block::None,
            key: None,
        }
    }

    fn finish(mut self) -> Option<(Option<String>, OomMessage)> {
        self.msg.format = detect_format(&self.msg, &self.seen)?;
        exactify(&mut self.msg);
        self.msg.truncated = is_truncated(&self.msg, &self.seen);
        Some((self.key, self.msg))
    }
}

/// Where the messages of `line` start and end (for joining wrapped lines).
fn reach(line: &str) -> Vec<(usize, usize)> {
    let Some(item) = OomParser::parse(Rule::oom_line, line)
        .ok()
        .and_then(|mut p| p.next())
        .and_then(|l| l.into_inner().next())
    else {
        return Vec::new();
    };
    if item.as_rule() != Rule::anywhere {
        return Vec::new();
    }
    item.into_inner()
        .map(|m| (m.as_span().start(), m.as_span().end()))
        .collect()
}

/// Reads every message in `text`, in the order they appear.
pub fn parse_messages(text: &str) -> Vec<OomMessage> {
    let mut done: Vec<(Option<String>, OomMessage)> = Vec::new();
    let mut reader = Reader::new();
    for line in super::lines::logical_lines(text, &reach) {
        if line.trim().is_empty() {
            continue;
        }
        // A BFC allocator's memory map bar (`***___`) means a log cut before the error.
        let body = line.rsplit("] ").next().unwrap_or(&line).trim();
        reader.seen.ends_in_bar = body.len() > 10 && body.chars().all(|c| c == '*' || c == '_');
        let Ok(mut pairs) = OomParser::parse(Rule::oom_line, &line) else {
            continue;
        };
        let Some(item) = pairs.next().and_then(|l| l.into_inner().next()) else {
            continue;
        };
        let parts: Vec<Pair<Rule>> = if item.as_rule() == Rule::anywhere {
            item.into_inner().collect()
        } else {
            vec![item]
        };
        for part in parts {
            let role = role(part.as_rule(), &reader);
            if role != Role::Part && reader.key.is_some() {
                done.extend(std::mem::replace(&mut reader, Reader::new()).finish());
            }
            if role == Role::Headline {
                reader.key = Some(part.as_str().split_whitespace().collect());
            }
            if part.as_rule() == Rule::ran_out && line.contains("tpu_custom_call") {
                tpu(&mut reader.msg).custom_kernel = true;
            }
            let Reader {
                msg, seen, block, ..
            } = &mut reader;
            apply(msg, seen, block, part);
        }
    }
    done.extend(reader.finish());
    deduplicate(done)
}

/// The same error printed twice is one message, and so is an error printed
/// once short (`Ran out of memory in memory space hbm.`) and once with its
/// numbers: the fuller copy is kept, where the first stood.
fn deduplicate(messages: Vec<(Option<String>, OomMessage)>) -> Vec<OomMessage> {
    // What a copy says, measured by how much of it there is to write down.
    let richness = |m: &OomMessage| serde_json::to_string(m).map_or(0, |j| j.len());
    let same = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
    let mut out: Vec<(Option<String>, OomMessage)> = Vec::new();
    for (key, msg) in messages {
        let found = key.as_deref().and_then(|key| {
            out.iter_mut()
                .find(|(k, _)| k.as_deref().is_some_and(|k| same(k, key)))
        });
        match found {
            Some((kept_key, kept)) => {
                if richness(&msg) > richness(kept) {
                    *kept = msg;
                    *kept_key = key;
                }
            }
            None => out.push((key, msg)),
        }
    }
    out.into_iter().map(|(_, m)| m).collect()
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
    } else if seen.tf_tensor {
        OomFormat::TfTensor
    } else if seen.graph {
        OomFormat::GpuCommandBuffer
    } else if seen.ran_out || seen.tpu_tables || seen.tpu_fields || seen.scoped {
        OomFormat::TpuCompile
    } else if seen.debug_block
        || seen.stats_header
        || seen.peak_header
        || !msg.peak_buffers.is_empty()
    {
        OomFormat::GpuBufferAssignment
    } else if seen.out_of_memory && msg.host || seen.out_of_memory_allocating {
        OomFormat::HostAllocation
    } else if seen.failed_request {
        OomFormat::GpuFailedRequest
    } else if seen.out_of_memory {
        OomFormat::GpuAllocation
    } else if seen.warnings {
        OomFormat::GpuCompileWarnings
    } else if seen.driver {
        OomFormat::GpuDriver
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
                    Rule::allocator_name_paren => {
                        // `xla_gpu_host_bfc`, `cuda_host_bfc`: pinned host memory.
                        msg.host |= p.as_str().contains("host");
                        msg.allocator = Some(p.as_str().to_string())
                    }
                    Rule::size if msg.requested.is_none() => msg.requested = size_of(&p),
                    // `(rounded to N)`: the exact bytes the allocator looked for.
                    Rule::int => msg.requested = int_of(&p).map(Amount::exact),
                    Rule::not_a_failure => msg.not_a_failure = true,
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
                    // `hbm`, or `HBM` in the phrasing about HLO temporaries.
                    Rule::memory_space => t.memory_space = Some(p.as_str().to_lowercase()),
                    Rule::size => sizes.push(size_of(&p)),
                    Rule::exceeded_capacity => {
                        t.exceeded_by = p
                            .into_inner()
                            .find(|q| q.as_rule() == Rule::size)
                            .and_then(|q| size_of(&q))
                    }
                    Rule::stack_instruction => {
                        t.stack_instruction = Some(p.as_str().trim_end_matches('.').to_string())
                    }
                    Rule::stack_shape => t.stack_shape = Some(p.as_str().to_string()),
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
                    Rule::fragmentation_note => {
                        tpu(msg).largest_free_region =
                            sizes_in(p.into_inner()).first().copied().flatten()
                    }
                    _ => {}
                }
            }
            msg.requested = sizes.first().copied().flatten();
            let t = tpu(msg);
            t.free = sizes.get(1).copied().flatten();
            t.reserved = sizes.get(2).copied().flatten();
            t.reservable = sizes.get(3).copied().flatten();
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
            msg.warnings.push(Warning::Rematerialization {
                limit_bytes: ints.first().copied(),
                reached_bytes: ints.get(1).copied(),
                original_bytes: ints.get(2).copied(),
            });
        }
        Rule::arguments_exceed => {
            seen.warnings = true;
            let ints = ints_in(parts);
            msg.warnings.push(Warning::ArgumentsExceedLimit {
                argument_bytes: ints.first().copied(),
                limit_bytes: ints.get(1).copied(),
            });
        }
        Rule::out_of_memory_allocating => {
            seen.out_of_memory_allocating = true;
            msg.host = true;
            msg.requested = ints_in(parts).first().copied().map(Amount::exact);
        }
        Rule::driver_failure => {
            seen.driver = true;
            for p in parts {
                match p.as_rule() {
                    // The exact count follows the rounded size; it wins.
                    Rule::size if msg.requested.is_none() => msg.requested = size_of(&p),
                    Rule::int => msg.requested = int_of(&p).map(Amount::exact),
                    Rule::host_side => msg.host = true,
                    Rule::driver_error => msg.driver_error = Some(p.as_str().to_string()),
                    _ => {}
                }
            }
        }
        Rule::pinned_host_failure => {
            seen.driver = true;
            msg.host = true;
            msg.requested = ints_in(parts).first().copied().map(Amount::exact);
        }
        Rule::scoped_allocation => {
            seen.scoped = true;
            let mut sizes = Vec::new();
            let t = tpu(msg);
            for p in parts {
                match p.as_rule() {
                    Rule::size => sizes.push(size_of(&p)),
                    Rule::memory_space => {
                        t.memory_space.get_or_insert_with(|| p.as_str().to_string());
                    }
                    _ => {}
                }
            }
            t.scoped = Some(ScopedAllocation {
                size: sizes.first().copied().flatten(),
                limit: sizes.get(1).copied().flatten(),
                exceeded_by: sizes.get(2).copied().flatten(),
            });
        }
        Rule::graph_instantiate => {
            seen.graph = true;
            msg.driver_error = parts
                .find(|p| p.as_rule() == Rule::driver_error)
                .map(|p| p.as_str().to_string());
        }
        Rule::tf_tensor_oom => {
            seen.tf_tensor = true;
            let (mut dims, mut dtype) = (None, None);
            for p in parts {
                match p.as_rule() {
                    Rule::tf_dims => dims = Some(p.as_str().to_string()),
                    Rule::tf_dtype => dtype = Some(p.as_str().to_string()),
                    Rule::tf_device => {
                        msg.host |= p.as_str().contains("CPU");
                        msg.device = Some(p.as_str().to_string())
                    }
                    Rule::allocator_name => msg.allocator = Some(p.as_str().to_string()),
                    _ => {}
                }
            }
            let dims = dims.unwrap_or_default();
            msg.requested = dtype
                .as_deref()
                .and_then(tf_dtype_bytes)
                .and_then(|each| tensor_bytes(&dims, each))
                .map(Amount::exact);
            msg.tensor = Some(format!("{}[{dims}]", dtype.as_deref().unwrap_or("?")));
        }
        Rule::fragmentation_note => {
            tpu(msg).largest_free_region = sizes_in(parts).first().copied().flatten();
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

/// Bytes of one element of a TensorFlow dtype as its messages name it.
fn tf_dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "bool" | "int8" | "uint8" | "qint8" | "quint8" => 1,
        "half" | "bfloat16" | "int16" | "uint16" => 2,
        "float" | "int32" | "uint32" | "qint32" => 4,
        "double" | "int64" | "uint64" | "complex64" => 8,
        "complex128" => 16,
        _ => return None,
    })
}

/// Elements × bytes of each, `None` past 2^64 or for a dimension that is not a number.
fn tensor_bytes(dims: &str, each: u64) -> Option<u64> {
    dims.split(',')
        .filter(|d| !d.is_empty())
        .try_fold(each, |acc, d| acc.checked_mul(d.parse().ok()?))
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
