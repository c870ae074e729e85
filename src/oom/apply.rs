//! What each recognized part of a line (`grammar/oom.pest`) says about the
//! message being read: its numbers into `OomMessage`, and what was seen
//! (`Seen`, a set of `Clue`s) for the format and whether it was cut off.

use pest::iterators::Pair;

use super::model::*;
use super::parse::{Block, Clue, Rule, Seen};

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

pub(super) fn tpu(msg: &mut OomMessage) -> &mut TpuUsage {
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
pub(super) fn apply(
    msg: &mut OomMessage,
    seen: &mut Seen,
    block: &mut Block,
    item: Pair<Rule>,
) -> bool {
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
            seen.insert(Clue::OutOfMemory);
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
            seen.insert(Clue::FailedRequest);
            let ints = ints_in(parts);
            if let Some(&bytes) = ints.first() {
                msg.requested = Some(Amount::exact(bytes));
            }
            msg.device = ints.get(1).map(u64::to_string);
        }
        Rule::bfc_out_of_memory => {
            seen.insert(Clue::Bfc);
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
        Rule::buffer_assignment_header => seen.insert(Clue::DebugBlock),
        Rule::stats_header => {
            seen.insert(Clue::StatsHeader);
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
                seen.insert(Clue::CutLine);
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
            seen.insert(Clue::PeakHeader);
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
            if tpu_only {
                seen.insert(Clue::TpuFields);
            }
            let buffer = msg.peak_buffers.last_mut().expect("just ensured");
            apply_buffer_field(buffer, seen, rule, item);
        }
        Rule::separator_line => {
            if let Some(b) = msg.peak_buffers.last_mut() {
                b.complete = true;
            }
        }
        Rule::ran_out => {
            seen.insert(Clue::RanOut);
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
            seen.insert(Clue::TpuTables);
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
            seen.insert(Clue::TpuTables);
            tpu(msg).program_requirement = parts
                .find(|p| p.as_rule() == Rule::size)
                .and_then(|p| size_of(&p));
            *block = Block::TpuRequirement;
        }
        Rule::largest_allocations_header => {
            seen.insert(Clue::TpuTables);
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
                seen.insert(Clue::CutLine);
            }
            target.push((label, amount));
        }
        Rule::attempting_reserve | Rule::attempting_allocate => {
            if rule == Rule::attempting_reserve {
                seen.insert(Clue::Reserve);
            } else {
                seen.insert(Clue::Allocate);
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
            seen.insert(Clue::Abort);
            let sizes = sizes_in(parts);
            let t = tpu(msg);
            t.requires = sizes.first().copied().flatten();
            t.available = sizes.get(1).copied().flatten();
        }
        Rule::tensorcore_usage => {
            seen.insert(Clue::SparseCore);
            let sizes = sizes_in(parts);
            let t = tpu(msg);
            t.used = sizes.first().copied().flatten();
            t.sparse_core = sizes.get(1).copied().flatten();
            t.capacity = sizes.get(2).copied().flatten();
        }
        Rule::remat_warning => {
            seen.insert(Clue::Warnings);
            let ints = ints_in(parts);
            msg.warnings.push(Warning::Rematerialization {
                limit_bytes: ints.first().copied(),
                reached_bytes: ints.get(1).copied(),
                original_bytes: ints.get(2).copied(),
            });
        }
        Rule::arguments_exceed => {
            seen.insert(Clue::Warnings);
            let ints = ints_in(parts);
            msg.warnings.push(Warning::ArgumentsExceedLimit {
                argument_bytes: ints.first().copied(),
                limit_bytes: ints.get(1).copied(),
            });
        }
        Rule::out_of_memory_allocating => {
            seen.insert(Clue::OutOfMemoryAllocating);
            msg.host = true;
            // XLA's CPU runtime: ordinary host RAM, as TensorFlow's `cpu` allocator.
            msg.allocator = Some("cpu".into());
            msg.requested = ints_in(parts).first().copied().map(Amount::exact);
        }
        Rule::driver_failure => {
            seen.insert(Clue::Driver);
            for p in parts {
                match p.as_rule() {
                    // The exact count follows the rounded size; it wins.
                    Rule::size if msg.requested.is_none() => msg.requested = size_of(&p),
                    Rule::int => msg.requested = int_of(&p).map(Amount::exact),
                    Rule::host_side => msg.host = true,
                    Rule::unified_side => msg.unified = true,
                    Rule::driver_error => msg.driver_error = Some(p.as_str().to_string()),
                    _ => {}
                }
            }
        }
        Rule::pinned_host_failure => {
            seen.insert(Clue::Driver);
            msg.host = true;
            msg.requested = ints_in(parts).first().copied().map(Amount::exact);
        }
        Rule::scoped_allocation => {
            seen.insert(Clue::Scoped);
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
            seen.insert(Clue::Graph);
            msg.driver_error = parts
                .find(|p| p.as_rule() == Rule::driver_error)
                .map(|p| p.as_str().to_string());
        }
        Rule::tf_tensor_oom => {
            seen.insert(Clue::TfTensor);
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
        Rule::context_retain => {
            seen.insert(Clue::Context);
            msg.driver_error = Some("CUDA_ERROR_OUT_OF_MEMORY".into());
            msg.device_total = ints_in(parts).first().copied().map(Amount::exact);
        }
        Rule::cudnn_autotune | Rule::cudnn_handle | Rule::cublas_handle | Rule::nccl_oom => {
            seen.insert(Clue::Library);
            msg.library = Some(match rule {
                Rule::cublas_handle => Library::CuBlas,
                Rule::nccl_oom => Library::Nccl,
                _ => Library::CuDnn,
            });
            let parts: Vec<Pair<Rule>> = parts.collect();
            if let Some(status) = parts.iter().find(|p| p.as_rule() == Rule::library_status) {
                msg.library_status = Some(status.as_str().to_string());
            }
            // `Failed to CUDA calloc N bytes`
            if let Some(bytes) = ints_in(parts.into_iter()).first() {
                msg.requested = Some(Amount::exact(*bytes));
            }
        }
        Rule::memory_usage | Rule::reported_by_cuda => {
            let ints = ints_in(parts);
            msg.device_free = ints.first().copied().map(Amount::exact);
            msg.device_total = ints.get(1).copied().map(Amount::exact);
        }
        Rule::async_alloc => {
            seen.insert(Clue::Driver);
            msg.driver_error = Some("CUDA_ERROR_OUT_OF_MEMORY".into());
            msg.requested = ints_in(parts).first().copied().map(Amount::exact);
        }
        Rule::tpu_could_not_allocate => {
            seen.insert(Clue::Allocate);
            let mut ints = Vec::new();
            for p in parts {
                match p.as_rule() {
                    Rule::int => ints.extend(int_of(&p)),
                    Rule::device => msg.device = Some(p.as_str().to_string()),
                    _ => {}
                }
            }
            msg.requested = ints.first().copied().map(Amount::exact);
            let t = tpu(msg);
            t.largest_free_region = ints.get(1).copied().map(Amount::exact);
            t.free = ints.get(2).copied().map(Amount::exact);
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
                seen.insert(Clue::CutLine);
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
pub(super) fn exactify(msg: &mut OomMessage) {
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
