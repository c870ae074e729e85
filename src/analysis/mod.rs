//! Memory accounting from the HLO text alone, following XLA's buffer assignment:
//! `schedule` (call graph, flattened order) → `dataflow` (values, buffers) →
//! `liveness` (live ranges) → `assign` (allocations, with `heap` packing the
//! temporaries) → the numbers XLA reports (notes §4).

pub mod assign;
pub mod dataflow;
pub mod heap;
pub mod liveness;
pub mod schedule;
pub mod sharing;

use self::assign::{AllocationKind, Assignment};
use self::dataflow::{BufferId, Dataflow};
use self::liveness::LiveRange;
use self::schedule::{CallGraph, Schedule};
use crate::hlo::{InstrId, Module, Opcode};

/// Everything the accounting found for one module.
pub struct MemoryModel {
    pub schedule: Schedule,
    pub dataflow: Dataflow,
    pub ranges: Vec<Option<LiveRange>>,
    pub assignment: Assignment,
    pub totals: Totals,
    pub peak: Peak,
}

/// XLA's figures: `compiled.memory_analysis()` and the buffer assignment's
/// "Total bytes used".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Entry parameters' allocations (`argument_size_in_bytes`).
    pub argument_bytes: u64,
    /// Allocations that may be returned, donated parameters included (`output_size_in_bytes`).
    pub output_bytes: u64,
    /// Donated parameters' allocations, counted in both of the above (`alias_size_in_bytes`).
    pub alias_bytes: u64,
    /// The preallocated temporary block (`temp_size_in_bytes`).
    pub temp_bytes: u64,
    /// Every allocation, constants and reducer scratch included ("Total bytes used").
    pub total_bytes: u64,
    /// Most bytes live at one moment, each buffer counted once.
    pub live_peak_bytes: u64,
}

/// The moment of the live peak and what is live then.
#[derive(Debug, Clone, Default)]
pub struct Peak {
    /// Logical time in the flattened schedule.
    pub time: u32,
    /// The instruction scheduled at that time.
    pub instruction: Option<InstrId>,
    /// Buffers live at the peak, largest first.
    pub buffers: Vec<PeakBuffer>,
}

#[derive(Debug, Clone)]
pub struct PeakBuffer {
    pub buffer: BufferId,
    /// The instruction that defines the buffer's first value.
    pub instruction: InstrId,
    pub index: Vec<u64>,
    pub bytes: u64,
    pub kind: BufferKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferKind {
    Parameter,
    Output,
    Temp,
    Constant,
}

impl BufferKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BufferKind::Parameter => "parameter",
            BufferKind::Output => "output",
            BufferKind::Temp => "temp",
            BufferKind::Constant => "constant",
        }
    }
}

/// Temporaries are aligned as XLA aligns them on the backend the dump came from.
fn alignment_for(module: &Module) -> u64 {
    let name = module.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if name.contains("gpu_after_optimizations") {
        256
    } else {
        assign::CPU_ALIGNMENT
    }
}

pub fn analyze(module: &Module) -> MemoryModel {
    let calls = CallGraph::build(module);
    let schedule = Schedule::build(module, &calls);
    let dataflow = Dataflow::build(module, &calls);
    let ranges = liveness::live_ranges(module, &dataflow, &schedule);
    let assignment = assign::assign(module, &calls, &dataflow, &ranges, alignment_for(module));
    let mut totals = Totals::default();
    for a in &assignment.allocations {
        totals.total_bytes = totals.total_bytes.saturating_add(a.size);
        match a.kind {
            AllocationKind::Parameter { aliased, .. } => {
                totals.argument_bytes += a.size;
                if aliased {
                    totals.alias_bytes += a.size;
                }
            }
            AllocationKind::Temp => totals.temp_bytes += a.size,
            _ => {}
        }
        if a.maybe_live_out {
            totals.output_bytes += a.size;
        }
    }
    let peak = live_peak(module, &schedule, &dataflow, &ranges, &assignment);
    totals.live_peak_bytes = peak.buffers.iter().map(|b| b.bytes).sum();
    MemoryModel { schedule, dataflow, ranges, assignment, totals, peak }
}

fn live_peak(
    module: &Module,
    schedule: &Schedule,
    dataflow: &Dataflow,
    ranges: &[Option<LiveRange>],
    assignment: &Assignment,
) -> Peak {
    let n = schedule.len() as usize + 2;
    let mut delta = vec![0i128; n + 1];
    // Each buffer once: the union of its values' ranges.
    let mut intervals: Vec<(BufferId, Vec<LiveRange>)> = Vec::new();
    for (b, buffer) in dataflow.buffers.iter().enumerate() {
        if assignment.allocation_of[b].is_none() {
            continue;
        }
        let mut rs: Vec<LiveRange> = buffer.values.iter().filter_map(|v| ranges[v.index()]).collect();
        if rs.is_empty() {
            continue;
        }
        rs.sort_by_key(|r| r.start);
        let mut merged: Vec<LiveRange> = Vec::new();
        for r in rs {
            match merged.last_mut() {
                Some(last) if r.start <= last.end + 1 => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        for r in &merged {
            delta[r.start as usize] += i128::from(buffer.size);
            delta[(r.end as usize + 1).min(n)] -= i128::from(buffer.size);
        }
        intervals.push((BufferId(b as u32), merged));
    }
    let (mut best_time, mut best, mut running) = (0usize, i128::MIN, 0i128);
    for (t, d) in delta.iter().enumerate().take(n) {
        running += d;
        if running > best {
            best = running;
            best_time = t;
        }
    }
    let t = best_time as u32;
    let mut buffers: Vec<PeakBuffer> = intervals
        .iter()
        .filter(|(_, rs)| rs.iter().any(|r| r.start <= t && t <= r.end))
        .map(|&(b, _)| {
            let buffer = &dataflow.buffers[b.index()];
            let first = buffer.values.iter().min().copied().expect("buffers have values");
            let value = &dataflow.values[first.index()];
            let defs = || buffer.values.iter().map(|v| module.instr(dataflow.values[v.index()].instr));
            let kind = if defs().any(|i| i.opcode == Opcode::Parameter && i.computation == module.entry) {
                BufferKind::Parameter
            } else if assignment.live_out[b.index()] {
                BufferKind::Output
            } else if defs().any(|i| i.opcode == Opcode::Constant) {
                BufferKind::Constant
            } else {
                BufferKind::Temp
            };
            PeakBuffer { buffer: b, instruction: value.instr, index: value.index.clone(), bytes: buffer.size, kind }
        })
        .collect();
    buffers.sort_by_key(|p| (std::cmp::Reverse(p.bytes), p.buffer));
    Peak { time: t, instruction: schedule.order.get(best_time).copied(), buffers }
}

