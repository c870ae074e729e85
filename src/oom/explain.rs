//! Turns a parsed message into an explanation, as data: a verdict, what
//! failed, what each number means, how the numbers add up, which buffers fill
//! the memory, what cannot be right, where the memory is and what the
//! program is doing, whether the message decides why it failed, and ranked
//! advice weighed against the message's own figures. Every item knows its
//! words (`sentence`, `meaning`, ...); renderers call them and compute nothing.

use serde::Serialize;

use super::advice::{self, Ranked};
use super::checks::{self, Problem, Quantity};
use super::context::LogContext;
use super::dump::DumpLinks;
use super::failure::{self, Failure};
use super::feasibility::{self, Gap, RuledOut};
use super::model::human as h;
use super::model::*;
use super::readings::{self, CapacityProof, Undecided};
use super::situation::Situation;
use super::verdict::Verdict;
use crate::units::human_bytes;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Explanation {
    pub format: OomFormat,
    pub truncated: bool,
    pub verdict: Verdict,
    pub what_failed: Vec<Failure>,
    pub stats: Vec<StatExplained>,
    /// How the stats add up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arithmetic: Option<StatsSum>,
    pub buffer_groups: Vec<BufferGroup>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tpu: Vec<TpuNote>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Numbers that cannot be right; they are used for nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
    pub situation: Situation,
    /// How far over the program is, when the message gives both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<Gap>,
    /// What a TPU capacity table proves about the program against the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof: Option<CapacityProof>,
    /// The readings the message leaves open, and how to tell them apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecided: Option<Undecided>,
    /// Ranked: what closes the gap, what the situation points to, the rest.
    pub advice: Vec<Ranked>,
    /// Advice the message's figures rule out, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ruled_out: Vec<RuledOut>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump: Option<DumpLinks>,
}

impl Explanation {
    /// The first piece of advice that closes the gap by itself, by the message's figures.
    pub fn first_to_close(&self) -> Option<&Ranked> {
        self.advice
            .iter()
            .find(|r| matches!(r.feasibility, feasibility::Feasibility::Closes { .. }))
    }

    /// Advice again, after the situation changed (the same failure found on
    /// several devices makes sharding the first thing to try).
    pub fn readvise(&mut self, msg: &OomMessage) {
        let (advice, ruled_out) = advice::advise(msg, self);
        self.advice = advice;
        self.ruled_out = ruled_out;
    }
}

/// A buffer of the message, as much as the message says of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct BufferRef {
    pub number: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    pub parameter: bool,
    /// The last part of the op name (`add`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `file:line`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl From<&PeakBuffer> for BufferRef {
    fn from(b: &PeakBuffer) -> BufferRef {
        BufferRef {
            number: b.number,
            shape: b.shape.clone(),
            parameter: b.kind.as_deref() == Some("parameter"),
            op: b
                .op_name
                .as_deref()
                .map(|o| o.rsplit('/').next().unwrap_or(o).to_string()),
            // Long TPU labels are whole instructions: too much for a sentence.
            label: b.label.clone().filter(|l| l.len() < 40),
            source: match (&b.source_file, b.source_line) {
                (Some(f), Some(l)) => Some(format!("{f}:{l}")),
                _ => None,
            },
        }
    }
}

impl BufferRef {
    /// "the result of `add` (fusion) at kernels.py:178", with the shape in front when asked.
    pub fn phrase(&self, with_shape: bool) -> String {
        let shape = self.shape.as_deref().unwrap_or("a buffer");
        let source = self
            .source
            .as_deref()
            .map(|s| format!(" at {s}"))
            .unwrap_or_default();
        let label = self
            .label
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        let lead = if with_shape {
            format!("{shape}, ")
        } else {
            String::new()
        };
        match (self.parameter, &self.op) {
            (true, _) => format!("an input {shape}"),
            (_, Some(op)) => format!("{lead}the result of `{op}`{label}{source}"),
            _ if with_shape => format!("{shape}{label}"),
            _ => format!("a buffer{label}"),
        }
    }
}

/// A stat of the `BufferAssignment stats:` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Stat {
    Parameter,
    Constant,
    MaybeLiveOut,
    PreallocatedTemp,
    PreallocatedTempFragmentation,
    Total,
    TotalFragmentation,
}

impl Stat {
    pub fn name(self) -> &'static str {
        match self {
            Stat::Parameter => "parameter allocation",
            Stat::Constant => "constant allocation",
            Stat::MaybeLiveOut => "maybe_live_out allocation",
            Stat::PreallocatedTemp => "preallocated temp allocation",
            Stat::PreallocatedTempFragmentation => "preallocated temp fragmentation",
            Stat::Total => "total allocation",
            Stat::TotalFragmentation => "total fragmentation",
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Stat::Parameter => "the arguments the caller passed in, held for the whole run (donated ones included)",
            Stat::Constant => "constants baked into the program",
            Stat::MaybeLiveOut => "buffers that may be returned as results: allocated separately so they survive the program (donated parameters that receive an output count here too)",
            Stat::PreallocatedTemp => "one scratch block for all intermediate values, packed by XLA's heap simulator and allocated whole when the program starts",
            Stat::PreallocatedTempFragmentation => "wasted space inside the temp block: gaps the packing could not fill",
            Stat::Total => "everything this program needs at once, besides other arrays already on the device",
            Stat::TotalFragmentation => "wasted space: the total minus the most bytes ever live at once (packing gaps, alignment, constants)",
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StatExplained {
    pub stat: Stat,
    pub bytes: u64,
    pub approximate: bool,
}

/// How parameters, outputs, temp and constants add up to the total.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct StatsSum {
    pub terms: Vec<(Stat, u64)>,
    pub sum: u64,
    pub total: u64,
}

impl StatsSum {
    pub fn sentence(&self) -> String {
        let word = |s: Stat| match s {
            Stat::Parameter => "parameters",
            Stat::MaybeLiveOut => "outputs",
            Stat::PreallocatedTemp => "temp",
            _ => "constants",
        };
        let terms: Vec<String> = self
            .terms
            .iter()
            .map(|(s, b)| format!("{} {}", human_bytes(*b), word(*s)))
            .collect();
        let terms = terms.join(" + ");
        let sum = Amount {
            bytes: self.sum,
            approximate: true,
        };
        if within_rounding(sum, Amount::exact(self.total)) {
            format!("{terms} = {} total", human_bytes(self.total))
        } else if self.sum > self.total {
            format!(
                "{terms} = {}, {} more than the total {}: donated parameters that receive outputs are counted both \
                 as parameters and as outputs",
                human_bytes(self.sum),
                human_bytes(self.sum - self.total),
                human_bytes(self.total)
            )
        } else {
            // Within what rounding and allocations no row counts explain
            // (checks::stats_do_not_add_up draws the line); said as that.
            format!(
                "{terms} = {}, {} short of the total {}: allocations no row counts (thread-local scratch, tuple \
                 tables) and rounding",
                human_bytes(self.sum),
                human_bytes(self.total - self.sum),
                human_bytes(self.total)
            )
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BufferGroup {
    pub count: usize,
    /// `None` when the message was cut off before the shape.
    pub shape: Option<String>,
    /// `None` when the message does not give the size.
    pub each_bytes: Option<u64>,
    /// `None` without a size, or when the sizes add up past 2^64 bytes.
    pub total_bytes: Option<u64>,
    /// How many of the group are entry parameters.
    pub inputs: usize,
    /// The other members, alike ones counted together.
    pub results: Vec<(BufferRef, usize)>,
}

impl BufferGroup {
    /// One line per kind of buffer in the group ("2 are inputs of the jitted function ...").
    pub fn parts(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.inputs > 0 {
            let what = if self.inputs == 1 {
                "is an input"
            } else {
                "are inputs"
            };
            out.push(format!(
                "{} {what} of the jitted function (entry parameters), held for the whole run",
                self.inputs
            ));
        }
        for (b, n) in &self.results {
            let verb = if *n == 1 { "is" } else { "are" };
            out.push(format!("{n} {verb} {}", b.phrase(false)));
        }
        out
    }

    pub fn shape_text(&self) -> &str {
        self.shape.as_deref().unwrap_or("unknown shape (cut off)")
    }
}

/// A fact about the TPU side of the message.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TpuNote {
    MemorySpace {
        space: String,
    },
    TotalUsage {
        total: Amount,
        rows: Vec<(String, Option<Amount>)>,
    },
    ProgramRequirement {
        requirement: Amount,
        rows: Vec<(String, Option<Amount>)>,
    },
    Outputs {
        size: Amount,
        shared_with_arguments: Option<Amount>,
    },
    Padding {
        bytes: u64,
    },
    Capacity {
        rows: Vec<(String, i128)>,
    },
    SparseCore {
        tensor_core: Option<Amount>,
        sparse_core: Amount,
        available: Option<Amount>,
    },
}

fn labelled(rows: &[(String, Option<Amount>)]) -> String {
    let parts: Vec<String> = rows.iter().map(|(l, a)| format!("{l} {}", h(*a))).collect();
    parts.join(", ")
}

impl TpuNote {
    pub fn sentence(&self) -> String {
        match self {
            TpuNote::MemorySpace { space } => match space.as_str() {
                "vmem" => "VMEM is the TPU core's small on-chip vector memory (tens of MiB). Running out of it is a \
                           kernel's working set not fitting, usually a Pallas or fusion block size, not your arrays' \
                           total size."
                    .into(),
                "smem" => "SMEM is the TPU core's tiny scalar memory (about 1MiB): a kernel uses too many scalars \
                           or scalar-prefetched indices."
                    .into(),
                other => format!("{} is the TPU's main device memory.", other.to_uppercase()),
            },
            TpuNote::TotalUsage { total, rows } => format!(
                "Total usage is at least {}: {}.",
                human_bytes(total.bytes),
                labelled(rows)
            ),
            TpuNote::ProgramRequirement { requirement, rows } => format!(
                "The program's own requirement, as the compiler lists it, is {}: {} (HLO temp is the scratch for \
                 intermediate values).",
                human_bytes(requirement.bytes),
                labelled(rows)
            ),
            TpuNote::Outputs {
                size,
                shared_with_arguments,
            } => format!(
                "Outputs take {}, of which {} reuse argument memory.",
                human_bytes(size.bytes),
                h(*shared_with_arguments)
            ),
            TpuNote::Padding { bytes } => format!(
                "Tile padding wastes {} in the largest allocations listed: TPU layouts round the last two dimensions \
                 up to multiples of 8 and 128, so a dimension of 18 takes the room of 128.",
                human_bytes(*bytes)
            ),
            TpuNote::Capacity { rows } => {
                let rows: Vec<String> = rows
                    .iter()
                    .map(|(l, b)| {
                        format!(
                            "{l} {}",
                            crate::units::human_bytes_signed(*b).trim_start_matches('+')
                        )
                    })
                    .collect();
                format!("Device memory at that moment: {}.", rows.join(", "))
            }
            TpuNote::SparseCore {
                tensor_core,
                sparse_core,
                available,
            } => format!(
                "TensorCore buffers take {} and SparseCore (embedding) buffers {}, more than the {} available.",
                h(*tensor_core),
                human_bytes(sparse_core.bytes),
                h(*available)
            ),
        }
    }
}

/// A rounded size (`13.77GiB`) and an exact byte count match if they print the same.
pub fn within_rounding(a: Amount, b: Amount) -> bool {
    if !a.approximate && !b.approximate {
        return a.bytes == b.bytes;
    }
    human_bytes(a.bytes) == human_bytes(b.bytes)
        || a.bytes.abs_diff(b.bytes) <= a.bytes.max(b.bytes) / 500
}

/// Explains `msg` read on its own (no log around it).
pub fn explain(msg: &OomMessage, dump: Option<DumpLinks>) -> Explanation {
    explain_in(msg, &LogContext::default(), dump)
}

/// Explains `msg` as part of a log whose context `ctx` was read.
pub fn explain_in(msg: &OomMessage, ctx: &LogContext, dump: Option<DumpLinks>) -> Explanation {
    let problems = checks::problems(msg);
    let situation = Situation::infer(msg, ctx, dump.as_ref());
    let mut e = Explanation {
        format: msg.format,
        truncated: msg.truncated,
        verdict: Verdict::decide(msg, &situation.placement, &problems),
        what_failed: failure::what_failed(msg, &situation.placement, &problems),
        stats: explain_stats(&msg.stats),
        arithmetic: if checks::usable(&problems, Quantity::TempAllocation)
            && checks::usable(&problems, Quantity::TotalAllocation)
        {
            arithmetic(&msg.stats)
        } else {
            None
        },
        buffer_groups: group_buffers(msg),
        tpu: explain_tpu(msg),
        warnings: msg.warnings.clone(),
        gap: feasibility::gap(msg, &problems),
        proof: CapacityProof::from_capacity_table(msg),
        undecided: None,
        problems,
        situation,
        advice: Vec::new(),
        ruled_out: Vec::new(),
        dump,
    };
    if !matches!(e.verdict, Verdict::ShapeMistake { .. }) {
        e.undecided = readings::undecided(msg, &e.situation);
    }
    e.readvise(msg);
    e
}

fn explain_stats(s: &Stats) -> Vec<StatExplained> {
    [
        (Stat::Parameter, s.parameter),
        (Stat::Constant, s.constant),
        (Stat::MaybeLiveOut, s.maybe_live_out),
        (Stat::PreallocatedTemp, s.preallocated_temp),
        (
            Stat::PreallocatedTempFragmentation,
            s.preallocated_temp_fragmentation,
        ),
        (Stat::Total, s.total),
        (Stat::TotalFragmentation, s.total_fragmentation),
    ]
    .into_iter()
    .filter_map(|(stat, amount)| {
        amount.map(|a| StatExplained {
            stat,
            bytes: a.bytes,
            approximate: a.approximate,
        })
    })
    .collect()
}

fn arithmetic(s: &Stats) -> Option<StatsSum> {
    let total = s.total?;
    let terms: Vec<(Stat, u64)> = [
        (Stat::Parameter, s.parameter),
        (Stat::MaybeLiveOut, s.maybe_live_out),
        (Stat::PreallocatedTemp, s.preallocated_temp),
        (Stat::Constant, s.constant),
    ]
    .into_iter()
    .filter_map(|(n, a)| a.map(|a| (n, a.bytes)))
    .filter(|(_, b)| *b > 0)
    .collect();
    if terms.is_empty() {
        return None;
    }
    // A sum past 2^64 bytes is no statement at all.
    let sum = terms
        .iter()
        .map(|(_, b)| *b)
        .try_fold(0u64, u64::checked_add)?;
    Some(StatsSum {
        terms,
        sum,
        total: total.bytes,
    })
}

fn group_buffers(msg: &OomMessage) -> Vec<BufferGroup> {
    let mut groups: Vec<BufferGroup> = Vec::new();
    let mut members: Vec<Vec<&PeakBuffer>> = Vec::new();
    for b in &msg.peak_buffers {
        let each = b.size.map(|a| a.bytes);
        match groups
            .iter()
            .position(|g| g.shape == b.shape && g.each_bytes == each)
        {
            Some(i) => members[i].push(b),
            None => {
                groups.push(BufferGroup {
                    count: 0,
                    shape: b.shape.clone(),
                    each_bytes: each,
                    total_bytes: None,
                    inputs: 0,
                    results: Vec::new(),
                });
                members.push(vec![b]);
            }
        }
    }
    for (g, bs) in groups.iter_mut().zip(&members) {
        g.count = bs.len();
        g.total_bytes = g.each_bytes.and_then(|e| e.checked_mul(bs.len() as u64));
        g.inputs = bs
            .iter()
            .filter(|b| b.kind.as_deref() == Some("parameter"))
            .count();
        for b in bs.iter().filter(|b| b.kind.as_deref() != Some("parameter")) {
            let mut r = BufferRef::from(*b);
            // Alike buffers differ only in their number.
            r.number = 0;
            match g.results.iter_mut().find(|(p, _)| *p == r) {
                Some((_, n)) => *n += 1,
                None => g.results.push((r, 1)),
            }
        }
        for (r, _) in &mut g.results {
            r.shape = None;
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.total_bytes));
    groups
}

fn explain_tpu(msg: &OomMessage) -> Vec<TpuNote> {
    let Some(t) = &msg.tpu else { return Vec::new() };
    let mut out = Vec::new();
    if let Some(space) = &t.memory_space {
        out.push(TpuNote::MemorySpace {
            space: space.clone(),
        });
    }
    if let Some(total) = t.total_usage {
        out.push(TpuNote::TotalUsage {
            total,
            rows: t.usage_rows.clone(),
        });
    }
    if let Some(requirement) = t.program_requirement {
        out.push(TpuNote::ProgramRequirement {
            requirement,
            rows: t.requirement_rows.clone(),
        });
    }
    if let Some(size) = t.output_size {
        out.push(TpuNote::Outputs {
            size,
            shared_with_arguments: t.output_shared_with_arguments,
        });
    }
    let padding = advice::padding_bytes(msg);
    if padding > 0 {
        out.push(TpuNote::Padding { bytes: padding });
    }
    if !t.capacity_rows.is_empty() {
        out.push(TpuNote::Capacity {
            rows: t.capacity_rows.clone(),
        });
    }
    if let Some(sc) = t.sparse_core {
        out.push(TpuNote::SparseCore {
            tensor_core: t.used,
            sparse_core: sc,
            available: t.capacity,
        });
    }
    out
}
