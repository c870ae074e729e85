//! Finds the out-of-memory messages in pasted text and reads them
//! (`grammar/oom.pest`).
//!
//! Each logical line (see `lines`) is parsed on its own; a small state machine
//! remembers which block (stats, peak buffers, a TPU table) the lines belong
//! to, and which message: a second error headline, or an allocator or
//! compiler line after an error, starts the next one.

use pest::iterators::Pair;
use pest::Parser;

use super::apply::{apply, exactify, tpu};
use super::model::*;

#[derive(pest_derive::Parser)]
#[grammar = "grammar/oom.pest"]
pub(super) struct OomParser;

/// What was looked for, for the "not recognized" message.
pub const LOOKED_FOR: &str =
    "\"Out of memory while trying to allocate\", \"BufferAssignment OOM Debugging\", \
\"Peak buffers:\", \"Failed to allocate request for\", \"Allocator (...) ran out of memory\", \
\"Ran out of memory in memory space\", \"Ran out of memory on HBM, ... HLO temporaries\", \
\"Total hbm usage >=\", \"Largest program allocations\", \
\"Attempting to reserve/allocate ... That was not possible\", \"Aborting compilation early\", \
\"Can't reduce memory use below\", \"Out of memory allocating N bytes\", \
\"failed to allocate ... from device\", \"Scoped allocation with size\", \
\"OOM when allocating tensor\", \"failed call to cuDevicePrimaryCtxRetain\", \
\"Failed to determine best cudnn convolution algorithm\", \"Could not create cudnn handle\", \
\"failed to create cublas handle\", \"NCCL WARN Cuda failure 'out of memory'\", \
\"cuMemAllocAsync failed to allocate\", \"Could not allocate N bytes in memory ...HBM\"";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Block {
    None,
    Stats,
    Peak,
    TpuUsage,
    TpuRequirement,
    TpuLargest,
    Capacity,
    Persistent,
}

/// What the lines of a message have shown so far: the clues to its format
/// ([`detect_format`]) and to whether it was cut off ([`is_truncated`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Clue {
    /// `Out of memory while trying to allocate ...`.
    OutOfMemory,
    /// `Failed to allocate request for ...`.
    FailedRequest,
    /// The BFC allocator ran out of memory (`Allocator (...) ran out of memory`).
    Bfc,
    /// `BufferAssignment OOM Debugging.`
    DebugBlock,
    /// `BufferAssignment stats:`
    StatsHeader,
    /// `Peak buffers:`
    PeakHeader,
    /// TPU: `Ran out of memory in memory space ...`.
    RanOut,
    /// TPU usage, requirement, largest-allocation or capacity tables.
    TpuTables,
    /// TPU: `Aborting compilation early ...`.
    Abort,
    /// TPU: TensorCore and SparseCore HBM usage.
    SparseCore,
    /// TPU run time: `Attempting to reserve ...`.
    Reserve,
    /// TPU run time: `Attempting to allocate ...` (or `Could not allocate ... in memory`).
    Allocate,
    /// Compiler warnings (rematerialization, the argument limit).
    Warnings,
    /// The last meaningful line was cut off (a row without its value, a key without its text).
    CutLine,
    /// The text ends with a BFC allocator's memory map bar.
    EndsInBar,
    /// TPU-only entry fields (`XLA label:`, `Unpadded size:`, `Allocation type:`).
    TpuFields,
    /// TPU: `Scoped allocation with size ...`.
    Scoped,
    /// The CUDA or ROCm driver refused memory.
    Driver,
    /// TensorFlow: `OOM when allocating tensor ...`.
    TfTensor,
    /// A CUDA or HIP graph could not be instantiated.
    Graph,
    /// XLA's CPU runtime: `Out of memory allocating N bytes`.
    OutOfMemoryAllocating,
    /// The CUDA context could not be created.
    Context,
    /// cuDNN, cuBLAS or NCCL said it found no memory.
    Library,
}

/// A set of [`Clue`]s, one bit each.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Seen(u32);

// Every clue has its bit (`Library` is the last).
const _: () = assert!((Clue::Library as u32) < u32::BITS);

impl Seen {
    pub(super) fn insert(&mut self, clue: Clue) {
        self.0 |= 1 << clue as u32;
    }

    pub(super) fn remove(&mut self, clue: Clue) {
        self.0 &= !(1 << clue as u32);
    }

    pub(super) fn has(self, clue: Clue) -> bool {
        self.0 & (1 << clue as u32) != 0
    }

    /// Whether any of `clues` was seen.
    pub(super) fn any(self, clues: &[Clue]) -> bool {
        clues.iter().any(|&c| self.has(c))
    }
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
        | Rule::graph_instantiate
        | Rule::context_retain
        | Rule::cudnn_autotune
        | Rule::cudnn_handle
        | Rule::cublas_handle
        | Rule::nccl_oom
        | Rule::tpu_could_not_allocate => Role::Headline,
        // The scoped-VMEM sentence follows `Ran out of memory in memory space
        // vmem`; on its own it is the error.
        Rule::scoped_allocation
            if reader.seen.has(Clue::RanOut) && !reader.seen.has(Clue::Scoped) =>
        {
            Role::Part
        }
        Rule::scoped_allocation => Role::Headline,
        Rule::bfc_out_of_memory
        | Rule::driver_failure
        | Rule::pinned_host_failure
        | Rule::remat_warning
        | Rule::async_alloc
        | Rule::arguments_exceed => Role::Preamble,
        _ => Role::Part,
    }
}

/// Rules only a TPU compiler or runtime prints.
fn is_tpu_rule(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::ran_out
            | Rule::exceeded_capacity
            | Rule::attempting_reserve
            | Rule::attempting_allocate
            | Rule::abort_early
            | Rule::tensorcore_usage
            | Rule::tpu_could_not_allocate
    )
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
    /// The last headline or preamble read, on this line or an earlier one (a
    /// wrap can put cuDNN's headline and the allocation it quotes on two lines).
    previous: Option<Rule>,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            msg: OomMessage::new(OomFormat::GpuAllocation),
            seen: Seen::default(),
            block: Block::None,
            key: None,
            previous: None,
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
    parse_log(text).0
}

/// Every message in `text`, and the logical lines they were read from (the
/// log around each message says which device and framework it comes from).
pub fn parse_log(text: &str) -> (Vec<OomMessage>, Vec<String>) {
    let lines = super::lines::logical_lines(text, &reach);
    let mut done: Vec<(Option<String>, OomMessage)> = Vec::new();
    let mut reader = Reader::new();
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // A BFC allocator's memory map bar (`***___`) means a log cut before the error.
        let body = line.rsplit("] ").next().unwrap_or(line).trim();
        if body.len() > 10 && body.chars().all(|c| c == '*' || c == '_') {
            reader.seen.insert(Clue::EndsInBar);
        } else {
            reader.seen.remove(Clue::EndsInBar);
        }
        let Ok(mut pairs) = OomParser::parse(Rule::oom_line, line) else {
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
            let rule = part.as_rule();
            // cuDNN's autotuning quotes the allocation that failed right
            // after its headline: one failure, the library's.
            let merged = matches!(
                (reader.previous, rule),
                (Some(Rule::cudnn_autotune), Rule::out_of_memory)
            );
            let role = if merged {
                Role::Part
            } else {
                role(rule, &reader)
            };
            // A GPU allocator's or driver's lines are not the preamble of a
            // TPU error: they are a message of their own, from another device.
            let gpu_before_tpu = role == Role::Headline
                && reader.key.is_none()
                && reader.seen.any(&[Clue::Bfc, Clue::Driver])
                && is_tpu_rule(rule);
            if (role != Role::Part && reader.key.is_some()) || gpu_before_tpu {
                done.extend(std::mem::replace(&mut reader, Reader::new()).finish());
            }
            if role != Role::Part && reader.key.is_none() {
                reader.msg.line = index;
                reader.msg.replica = replica_of(line).or(reader.msg.replica.take());
            }
            if role == Role::Headline {
                reader.key = Some(part.as_str().split_whitespace().collect());
            }
            if rule == Rule::ran_out && line.contains("tpu_custom_call") {
                tpu(&mut reader.msg).custom_kernel = true;
            }
            if rule == Rule::ran_out && line.contains("file a bug against XLA") {
                reader.msg.xla_bug = true;
            }
            // Only headlines and preambles count: the lines between (a wrap's
            // pieces read as table rows) do not part the two.
            if merged || role != Role::Part {
                reader.previous = Some(rule);
            }
            let Reader {
                msg, seen, block, ..
            } = &mut reader;
            apply(msg, seen, block, part);
        }
    }
    done.extend(reader.finish());
    (deduplicate(done), lines)
}

/// The replica, process or device a log line names, so that the same
/// failure on two devices stays two messages: `Execution of replica 1
/// failed`, `device ordinal 3`, `CUDA:2`, `(0x3x0_HBM1)`, `device=TPU:6`,
/// `GPU_1_bfc`, or a launcher's `[3] ` in front of the line.
pub(super) fn replica_of(line: &str) -> Option<String> {
    let number_after = |key: &str| -> Option<String> {
        let at = line.find(key)? + key.len();
        let digits: String = line[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        (!digits.is_empty()).then_some(digits)
    };
    if let Some(n) = number_after("replica ") {
        return Some(format!("replica {n}"));
    }
    // A name that says the device's kind wins over a bare ordinal.
    for (key, name) in [("CUDA:", "GPU"), ("device=TPU:", "TPU"), ("GPU_", "GPU")] {
        if let Some(n) = number_after(key) {
            return Some(format!("{name} {n}"));
        }
    }
    if let Some(n) = number_after("device ordinal ") {
        return Some(format!("device {n}"));
    }
    // libtpu names a core's HBM `0x3x0_HBM1` (chip coordinates, then the core).
    if let Some(at) = line.find("_HBM") {
        let start = line[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric()))
            .map_or(0, |i| i + 1);
        let end = at
            + 4
            + line[at + 4..]
                .chars()
                .take_while(char::is_ascii_digit)
                .count();
        if start < at {
            return Some(line[start..end].to_string());
        }
    }
    let rank = line.trim_start().strip_prefix('[')?;
    let digits: String = rank.chars().take_while(char::is_ascii_digit).collect();
    (!digits.is_empty() && rank[digits.len()..].starts_with("] "))
        .then(|| format!("process {digits}"))
}

/// The same error printed twice is one message, and so is an error printed
/// once short (`Ran out of memory in memory space hbm.`) and once with its
/// numbers: the fuller copy is kept, where the first stood.
fn deduplicate(messages: Vec<(Option<String>, OomMessage)>) -> Vec<OomMessage> {
    // What a copy says, measured by how much of it there is to write down.
    let richness = |m: &OomMessage| serde_json::to_string(m).map_or(0, |j| j.len());
    let same = |a: &str, b: &str| a.starts_with(b) || b.starts_with(a);
    // A message that names no replica (the traceback's copy) is the same as
    // one that does; two that name different ones are two failures.
    let same_place = |a: &OomMessage, b: &OomMessage| {
        a.replica.is_none() || b.replica.is_none() || a.replica == b.replica
    };
    let mut out: Vec<(Option<String>, OomMessage)> = Vec::new();
    for (key, msg) in messages {
        let found = key.as_deref().and_then(|key| {
            out.iter_mut()
                .find(|(k, m)| k.as_deref().is_some_and(|k| same(k, key)) && same_place(m, &msg))
        });
        match found {
            Some((kept_key, kept)) => {
                if richness(&msg) > richness(kept) {
                    let (line, replica) = (kept.line, kept.replica.clone());
                    *kept = msg;
                    *kept_key = key;
                    // Where it first stood, and the replica either copy names.
                    kept.line = line;
                    kept.replica = kept.replica.take().or(replica);
                }
            }
            None => out.push((key, msg)),
        }
    }
    out.into_iter().map(|(_, m)| m).collect()
}

fn detect_format(msg: &OomMessage, seen: &Seen) -> Option<OomFormat> {
    let format = if seen.has(Clue::Context) {
        OomFormat::GpuContext
    } else if seen.has(Clue::Library) {
        OomFormat::GpuLibrary
    } else if seen.has(Clue::SparseCore) {
        OomFormat::TpuSparseCore
    } else if seen.has(Clue::Abort) {
        OomFormat::TpuCompileAbort
    } else if seen.has(Clue::Reserve) {
        OomFormat::TpuRuntimeReserve
    } else if seen.has(Clue::Allocate) {
        OomFormat::TpuRuntimeAllocate
    } else if seen.has(Clue::TfTensor) {
        OomFormat::TfTensor
    } else if seen.has(Clue::Graph) {
        OomFormat::GpuCommandBuffer
    } else if seen.any(&[Clue::RanOut, Clue::TpuTables, Clue::TpuFields, Clue::Scoped]) {
        OomFormat::TpuCompile
    } else if seen.any(&[Clue::DebugBlock, Clue::StatsHeader, Clue::PeakHeader])
        || !msg.peak_buffers.is_empty()
    {
        OomFormat::GpuBufferAssignment
    } else if seen.has(Clue::OutOfMemory) && msg.host || seen.has(Clue::OutOfMemoryAllocating) {
        OomFormat::HostAllocation
    } else if seen.has(Clue::FailedRequest) {
        OomFormat::DeviceFailedRequest
    } else if seen.has(Clue::OutOfMemory) {
        OomFormat::GpuAllocation
    } else if seen.has(Clue::Warnings) {
        OomFormat::GpuCompileWarnings
    } else if seen.has(Clue::Driver) {
        OomFormat::GpuDriver
    } else if seen.has(Clue::Bfc) {
        OomFormat::GpuBfcAllocator
    } else {
        return None;
    };
    Some(format)
}

fn is_truncated(msg: &OomMessage, seen: &Seen) -> bool {
    let open_entry = msg.peak_buffers.last().is_some_and(|b| !b.complete);
    let stats_incomplete = seen.has(Clue::StatsHeader) && msg.stats.total.is_none();
    // Peak buffers without the block that introduces them: a fragment.
    let fragment = !msg.peak_buffers.is_empty() && !seen.any(&[Clue::PeakHeader, Clue::TpuTables]);
    open_entry
        || stats_incomplete
        || fragment
        || seen.has(Clue::CutLine)
        || seen.has(Clue::EndsInBar)
}
