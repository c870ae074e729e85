//! What to try, for the situation the message shows. Each piece of advice
//! carries the bytes it would save when the message allows measuring it; the
//! feasibility check (`feasibility`) weighs it against how far over the
//! program is, rules out what cannot work and says why; then they are
//! ranked: what closes the gap, then what the situation points to first,
//! then the rest. The words are in `advice_words`, in the framework's terms.

use serde::Serialize;

use super::checks::{self, Problem, Quantity};
use super::explain::{BufferRef, Explanation};
use super::feasibility::{self, Feasibility, RuledOut};
pub use super::measured::padding_bytes;
use super::model::*;
use super::situation::{RematBy, Situation, Workload};

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Advice {
    /// A size no device holds: fix the shapes (or split the problem) before anything else.
    CheckShapes {
        bytes: u64,
    },
    /// XLA's own message asks for a bug report.
    ReportXlaBug,
    /// From the dump: this argument could receive an output.
    DonateArgument {
        parameter: u64,
        argument: String,
        output: String,
        shape: String,
        saves_bytes: u64,
    },
    /// An output has the shape of an input that could be donated.
    DonateMatchingInput {
        shape: String,
        inputs: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saves_bytes: Option<u64>,
    },
    UseFloat32 {
        wide_bytes: u64,
        saves_bytes: u64,
    },
    /// The weights alone are over the device: 16-bit weights halve them.
    LowerPrecision {
        argument_bytes: u64,
        saves_bytes: u64,
    },
    AvoidBroadcast {
        buffer: BufferRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saves_bytes: Option<u64>,
    },
    /// Cut the batch (or sequence) so the program fits: saves what it is over.
    SmallerBatch {
        needs: u64,
        available: u64,
        saves_bytes: u64,
    },
    /// Smaller batch without figures.
    SmallerBatchUnmeasured,
    /// A device with more memory, or the program spread over more devices.
    MoreMemory {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        needs: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        available: Option<u64>,
    },
    Rematerialize {
        temp_bytes: u64,
        total_bytes: u64,
        workload: Workload,
    },
    /// Something rematerializes already: the user's `jax.checkpoint`, or XLA's own pass.
    RematAlreadyOn {
        by: RematBy,
        evidence: String,
    },
    ReduceTilePadding {
        saves_bytes: u64,
    },
    /// VMEM/SMEM: smaller kernel blocks.
    KernelBlockSizes {
        space: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saves_bytes: Option<u64>,
    },
    /// VMEM: raise the kernel's scoped limit.
    RaiseVmemLimit {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u64>,
        /// Whether the instruction is a custom kernel; `None` when the message does not name it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        custom_kernel: Option<bool>,
    },
    /// The program's inputs and outputs alone are over the memory limit XLA
    /// schedules for: they must shrink by `saves_bytes` whatever the schedule.
    ArgumentsTooLarge {
        argument_bytes: u64,
        limit_bytes: u64,
        saves_bytes: u64,
    },
    /// Host memory: fewer or smaller arrays kept on the host, or a higher cap.
    HostMemory {
        pinned: bool,
    },
    /// Arrays from earlier calls may hold the room.
    FreeLiveArrays,
    /// Enough is free, but not in one piece.
    Fragmentation {
        largest_free_region: u64,
        requested: u64,
    },
    /// The pool's share of the device: raise it (room for the program, or
    /// host RAM behind unified memory) or lower it (room for the driver,
    /// cuDNN, cuBLAS, NCCL, CUDA graphs, or another process).
    PoolFraction {
        raise: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        current: Option<f64>,
    },
    /// XLA's command buffers (CUDA/HIP graphs) need driver memory outside the pool.
    DisableCommandBuffers,
    /// Another process (or a second framework in this one) holds the GPU.
    OtherProcesses,
    DumpTheProgram,
    /// Spread the arrays over devices; `replicated_on` names the devices that
    /// each failed holding the whole program.
    Shard {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        replicated_on: Vec<String>,
    },
}

/// How much a piece of advice would save.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saving {
    Bytes(u64),
    NotMeasurable,
}

impl Advice {
    pub fn saving(&self) -> Saving {
        let b = |x: &Option<u64>| x.map_or(Saving::NotMeasurable, Saving::Bytes);
        match self {
            Advice::DonateArgument { saves_bytes, .. }
            | Advice::UseFloat32 { saves_bytes, .. }
            | Advice::LowerPrecision { saves_bytes, .. }
            | Advice::SmallerBatch { saves_bytes, .. }
            | Advice::ArgumentsTooLarge { saves_bytes, .. }
            | Advice::ReduceTilePadding { saves_bytes } => Saving::Bytes(*saves_bytes),
            Advice::DonateMatchingInput { saves_bytes, .. }
            | Advice::AvoidBroadcast { saves_bytes, .. }
            | Advice::KernelBlockSizes { saves_bytes, .. } => b(saves_bytes),
            _ => Saving::NotMeasurable,
        }
    }

    pub fn saves_bytes(&self) -> Option<u64> {
        match self.saving() {
            Saving::Bytes(b) => Some(b),
            Saving::NotMeasurable => None,
        }
    }

    /// The kind as the JSON names it (`smaller-batch`).
    pub fn kind(&self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v["kind"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// A piece of advice with what the message's figures say of it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Ranked {
    #[serde(flatten)]
    pub advice: Advice,
    pub feasibility: Feasibility,
}

/// Advice and how much the situation points to it.
pub(super) struct Candidate {
    advice: Advice,
    /// What the situation points to first (the app's own setting, the
    /// library's room, a kernel's blocks, more memory when far over).
    primary: bool,
}

#[derive(Default)]
pub(super) struct Candidates(Vec<Candidate>);

impl Candidates {
    /// Adds `advice` once: a second push of the same advice keeps the first
    /// (and its primacy).
    pub(super) fn push(&mut self, advice: Advice) {
        if !self.0.iter().any(|c| c.advice == advice) {
            self.0.push(Candidate {
                advice,
                primary: false,
            });
        }
    }
    fn primary(&mut self, advice: Advice) {
        match self.0.iter_mut().find(|c| c.advice == advice) {
            Some(c) => c.primary = true,
            None => self.0.push(Candidate {
                advice,
                primary: true,
            }),
        }
    }
    fn has(&self, f: impl Fn(&Advice) -> bool) -> bool {
        self.0.iter().any(|c| f(&c.advice))
    }
}

/// The advice for `msg`, judged and ranked, and what the figures rule out.
pub fn advise(msg: &OomMessage, e: &Explanation) -> (Vec<Ranked>, Vec<RuledOut>) {
    let mut c = Candidates::default();
    let problems = &e.problems;
    let s = &e.situation;
    if let Some(bytes) = problems.iter().find_map(|p| match p {
        Problem::ImpossibleSize { bytes, .. } => Some(*bytes),
        _ => None,
    }) {
        c.push(Advice::CheckShapes { bytes });
    }
    if msg.xla_bug {
        c.push(Advice::ReportXlaBug);
    }
    let shape_mistake = matches!(e.verdict, super::verdict::Verdict::ShapeMistake { .. });
    if !shape_mistake {
        super::measured::measured(msg, e, &mut c);
        by_situation(msg, e, &mut c);
    }
    // A shape mistake is not a shortage: more memory or less of it per
    // device does not fix it; finding the shape does.
    if shape_mistake {
        c.0.retain(|x| {
            matches!(
                x.advice,
                Advice::CheckShapes { .. } | Advice::DumpTheProgram
            )
        });
    }
    let gap = e.gap.as_ref();
    let mut ruled_out = Vec::new();
    let mut judged: Vec<(Candidate, Feasibility)> = Vec::new();
    for cand in c.0 {
        match feasibility::judge(&cand.advice, msg, s, gap) {
            Ok(f) => judged.push((cand, f)),
            Err(why) => ruled_out.push(RuledOut {
                advice: cand.advice.kind(),
                why,
            }),
        }
    }
    (rank(judged), ruled_out)
}

/// Shape checks and bug reports first; then what closes the gap by the
/// message's own figures, largest first; then what the situation points to;
/// then other measured savings, largest first; then the rest in the order
/// the situation gave them; the dump last.
fn rank(mut judged: Vec<(Candidate, Feasibility)>) -> Vec<Ranked> {
    let group = |c: &Candidate, f: &Feasibility| match (&c.advice, f) {
        (Advice::CheckShapes { .. } | Advice::ReportXlaBug, _) => 0,
        (_, Feasibility::Closes { .. }) => 1,
        _ if c.primary => 2,
        (a, _) if a.saves_bytes().is_some() => 3,
        (Advice::DumpTheProgram, _) => 5,
        _ => 4,
    };
    judged.sort_by_key(|(c, f)| {
        let bytes = if group(c, f) == 4 {
            None
        } else {
            c.advice.saves_bytes()
        };
        (group(c, f), std::cmp::Reverse(bytes))
    });
    judged
        .into_iter()
        .map(|(c, feasibility)| Ranked {
            advice: c.advice,
            feasibility,
        })
        .collect()
}

/// Advice the device, the framework and the application point to.
fn by_situation(msg: &OomMessage, e: &Explanation, c: &mut Candidates) {
    use super::device::{Device, MemorySpace as S};
    let s = &e.situation;
    let space = s.placement.space;
    if let Some(r) = &s.replicated {
        c.primary(Advice::Shard {
            replicated_on: r.on.clone(),
        });
    }
    match (s.placement.device, space) {
        (_, S::Vmem | S::Smem) => on_chip(msg, s, c),
        (Device::Unknown, _) => run_time(msg, e, c),
        (Device::Tpu, _) if msg.format.is_tpu() && !is_runtime(msg) => tpu_program(msg, e, c),
        (Device::Host, S::PinnedHost) => pinned_host(msg, c),
        (Device::Host, _) => {
            c.push(Advice::SmallerBatchUnmeasured);
            c.push(Advice::HostMemory { pinned: false });
        }
        _ => match msg.format {
            OomFormat::GpuContext => {
                c.primary(Advice::OtherProcesses);
                c.push(lower_pool(s));
            }
            OomFormat::GpuLibrary => {
                c.primary(lower_pool(s));
                c.push(Advice::OtherProcesses);
            }
            OomFormat::GpuCommandBuffer => {
                c.push(Advice::DisableCommandBuffers);
                c.push(lower_pool(s));
            }
            // Unified memory refused: the GPU and the host RAM behind it are
            // both taken; a smaller problem or a machine with more is the fix.
            OomFormat::GpuDriver if space == S::Unified => {
                c.primary(Advice::SmallerBatchUnmeasured);
                c.push(Advice::MoreMemory {
                    needs: None,
                    available: None,
                });
                c.push(Advice::OtherProcesses);
            }
            OomFormat::GpuDriver => {
                c.primary(Advice::OtherProcesses);
                c.push(lower_pool(s));
            }
            _ if is_runtime(msg) || s.placement.device == Device::Tpu => run_time(msg, e, c),
            _ => gpu_program(msg, e, c),
        },
    }
    // The dump is the answer to "which buffers": not offered once linked.
    if e.dump.is_none()
        && msg.peak_buffers.is_empty()
        && msg.stats.is_empty()
        && msg.tpu.as_ref().is_none_or(|t| t.total_usage.is_none())
        && !matches!(space, S::Vmem | S::Smem)
    {
        c.push(Advice::DumpTheProgram);
    }
}

fn is_runtime(msg: &OomMessage) -> bool {
    matches!(
        msg.format,
        OomFormat::TpuRuntimeReserve | OomFormat::TpuRuntimeAllocate
    )
}

fn lower_pool(s: &Situation) -> Advice {
    Advice::PoolFraction {
        raise: false,
        current: s.fraction(),
    }
}

/// VMEM and SMEM hold one kernel's working set: its blocks, or the limit.
fn on_chip(msg: &OomMessage, s: &Situation, c: &mut Candidates) {
    let t = msg.tpu.clone().unwrap_or_default();
    let space = t.memory_space.clone().unwrap_or_else(|| "vmem".into());
    let over = t
        .scoped
        .and_then(|sc| {
            sc.exceeded_by.or(sc
                .size
                .zip(sc.limit)
                .map(|(s, l)| Amount::exact(s.bytes.saturating_sub(l.bytes))))
        })
        .or(t.exceeded_by)
        .map(|a| a.bytes);
    c.push(Advice::KernelBlockSizes {
        space: space.clone(),
        saves_bytes: over,
    });
    // A server sizes its kernels from the longest sequence and the batch it
    // is asked to serve: those are the user's knobs, not the kernel's blocks.
    // SMEM holds a kernel's scalars: sequence lengths, page tables and block
    // indices, which grow with the sequences and the batch served.
    if s.app().is_some_and(|a| a.is_inference()) || space == "smem" {
        c.primary(Advice::SmallerBatchUnmeasured);
    }
    if let Some(scoped) = t.scoped.filter(|_| space == "vmem") {
        c.push(Advice::RaiseVmemLimit {
            size: scoped.size.map(|a| a.bytes),
            limit: scoped.limit.map(|a| a.bytes),
            custom_kernel: t.stack_instruction.as_ref().map(|_| t.custom_kernel),
        });
    }
}

/// A TPU program the compiler refused: over by how much, and what is over.
fn tpu_program(msg: &OomMessage, e: &Explanation, c: &mut Candidates) {
    let usable = |q: Quantity| checks::usable(&e.problems, q);
    let t = msg.tpu.clone().unwrap_or_default();
    let args = feasibility::argument_bytes(msg);
    match e
        .gap
        .as_ref()
        .filter(|_| usable(Quantity::ProgramUsage) || usable(Quantity::CompileRequires))
    {
        Some(gap) => {
            let over_device = args.is_some_and(|a| a >= gap.available_bytes);
            // Far over (twice or more), or weights alone over: more memory is
            // the change that fits it; a smaller batch is the one to try first otherwise.
            let more = Advice::MoreMemory {
                needs: Some(gap.needs_bytes),
                available: Some(gap.available_bytes),
            };
            if over_device || gap.ratio() >= 2.0 {
                c.primary(more);
            } else {
                c.push(more);
            }
            if let Some(a) = args.filter(|_| over_device) {
                c.push(Advice::LowerPrecision {
                    argument_bytes: a,
                    saves_bytes: a / 2,
                });
            }
            c.push(Advice::SmallerBatch {
                needs: gap.needs_bytes,
                available: gap.available_bytes,
                saves_bytes: gap.over(),
            });
        }
        None => {
            c.push(Advice::SmallerBatchUnmeasured);
            c.push(Advice::MoreMemory {
                needs: t.total_usage.or(t.used).map(|a| a.bytes),
                available: None,
            });
        }
    }
    remat(msg, e, c);
}

/// A run-time failure on a TPU, or on a device nothing names: the program's
/// own memory for this call, or arrays that hold the room; no GPU pool
/// setting is offered for a device that may not be a GPU.
fn run_time(msg: &OomMessage, e: &Explanation, c: &mut Candidates) {
    let s = &e.situation;
    // A server that takes a share of the device at start (vLLM's KV cache)
    // leaves the programs it compiles later only the rest.
    if s.app().is_some_and(|a| a == super::context::App::Vllm) {
        c.primary(lower_pool(s));
    }
    // The capacity table proves the program alone fits: what is already
    // allocated holds the room, and freeing it is the change to make.
    if e.proof.is_some_and(|p| p.program_fits_alone) {
        c.primary(Advice::FreeLiveArrays);
    }
    c.push(Advice::SmallerBatchUnmeasured);
    c.push(Advice::MoreMemory {
        needs: None,
        available: None,
    });
    if is_runtime(msg) {
        c.push(Advice::FreeLiveArrays);
    }
    if let Some(t) = &msg.tpu {
        if let (Some(largest), Some(r)) = (t.largest_free_region, msg.requested) {
            if largest.bytes < r.bytes {
                c.push(Advice::Fragmentation {
                    largest_free_region: largest.bytes,
                    requested: r.bytes,
                });
            }
        }
    }
}

/// A GPU program's allocation that found no room in the pool.
fn gpu_program(msg: &OomMessage, e: &Explanation, c: &mut Candidates) {
    let s = &e.situation;
    // A program smaller than any GPU did not run out on its own: what holds
    // the room is the thing to find, not a smaller batch.
    if super::readings::small_program(msg).is_some() {
        c.primary(Advice::FreeLiveArrays);
        c.primary(Advice::OtherProcesses);
        c.push(lower_pool(s));
        return;
    }
    // Unified memory (AlphaFold's docker default): the pool may grow into host
    // RAM, and its fraction (4.0 there) is the knob.
    if s.unified() {
        c.primary(Advice::PoolFraction {
            raise: true,
            current: s.fraction(),
        });
    }
    remat(msg, e, c);
    c.push(Advice::SmallerBatchUnmeasured);
    c.push(Advice::MoreMemory {
        needs: msg.stats.total.map(|a| a.bytes),
        available: None,
    });
    // TensorFlow takes the whole GPU unless told otherwise: there is nothing
    // to raise then.
    let tf_default =
        s.framework() == Some(super::context::Framework::Tensorflow) && s.fraction().is_none();
    if !s.unified() && !tf_default {
        c.push(Advice::PoolFraction {
            raise: true,
            current: s.fraction(),
        });
    }
    // `MoreMemory` already names spreading the program over devices: a
    // separate sharding item would say the same twice.
}

/// Pinned host memory: a tiny allocation that fails is the driver's state,
/// not RAM (no machine runs out of RAM at a few KiB); a large one is RAM, or
/// the framework's cap on pinned memory.
fn pinned_host(msg: &OomMessage, c: &mut Candidates) {
    let tiny = msg.requested.is_some_and(|r| r.bytes < 1 << 20);
    if tiny {
        c.primary(Advice::PoolFraction {
            raise: false,
            current: None,
        });
        c.push(Advice::OtherProcesses);
    } else {
        c.primary(Advice::HostMemory { pinned: true });
        c.push(Advice::SmallerBatchUnmeasured);
    }
}

/// Rematerialization, when temporaries dominate and the program trains (or
/// may): never for inference, and told apart when it is already on: the
/// user's `jax.checkpoint` (a stricter policy), or only XLA's own pass (which
/// is not `jax.checkpoint`: wrap the blocks).
fn remat(msg: &OomMessage, e: &Explanation, c: &mut Candidates) {
    let s = &e.situation;
    if s.is_inference()
        || c.has(|a| {
            matches!(
                a,
                Advice::Rematerialize { .. } | Advice::RematAlreadyOn { .. }
            )
        })
    {
        return;
    }
    if let Some(r) = s.remat.as_ref().filter(|r| r.by == RematBy::User) {
        if msg.format.is_tpu() || !msg.stats.is_empty() {
            c.push(Advice::RematAlreadyOn {
                by: r.by,
                evidence: r.evidence.clone(),
            });
        }
        return;
    }
    let temp = msg
        .stats
        .preallocated_temp
        .filter(|_| checks::usable(&e.problems, Quantity::TempAllocation))
        .map(|a| a.bytes)
        .or_else(|| {
            msg.tpu.as_ref().and_then(|t| {
                t.requirement_rows
                    .iter()
                    .find(|(l, _)| l.starts_with("HLO temp"))
                    .and_then(|(_, a)| a.map(|a| a.bytes))
            })
        });
    let total = msg
        .stats
        .total
        .filter(|_| checks::usable(&e.problems, Quantity::TotalAllocation))
        .or_else(|| msg.tpu.as_ref().and_then(|t| t.used.or(t.total_usage)))
        .map(|a| a.bytes);
    // XLA's own pass already ran (its warning, `.remat` clones): what is
    // left is the user's checkpointing, which the pass cannot do for them.
    let xla_ran = s.remat.as_ref().is_some_and(|r| r.by == RematBy::Xla);
    if let (Some(temp), Some(total)) = (temp, total) {
        if (temp.saturating_mul(2) > total || xla_ran) && total <= checks::LARGEST_DEVICE_BYTES {
            c.push(Advice::Rematerialize {
                temp_bytes: temp,
                total_bytes: total,
                workload: s.workload.clone(),
            });
        }
    }
    if xla_ran && !c.has(|a| matches!(a, Advice::Rematerialize { .. })) {
        if let Some(r) = &s.remat {
            c.push(Advice::RematAlreadyOn {
                by: r.by,
                evidence: r.evidence.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_the_json_names() {
        assert_eq!(
            Advice::SmallerBatchUnmeasured.kind(),
            "smaller-batch-unmeasured"
        );
        assert_eq!(
            Advice::PoolFraction {
                raise: true,
                current: None
            }
            .kind(),
            "pool-fraction"
        );
    }

    #[test]
    fn rank_puts_closing_savings_first() {
        let gap = 10;
        let judged = vec![
            (
                Candidate {
                    advice: Advice::SmallerBatchUnmeasured,
                    primary: false,
                },
                Feasibility::Unknown,
            ),
            (
                Candidate {
                    advice: Advice::ReduceTilePadding { saves_bytes: 4 },
                    primary: false,
                },
                Feasibility::Partial {
                    saves_at_most: 4,
                    gap_bytes: gap,
                },
            ),
            (
                Candidate {
                    advice: Advice::MoreMemory {
                        needs: None,
                        available: None,
                    },
                    primary: true,
                },
                Feasibility::Unknown,
            ),
            (
                Candidate {
                    advice: Advice::SmallerBatch {
                        needs: 20,
                        available: 10,
                        saves_bytes: 10,
                    },
                    primary: false,
                },
                Feasibility::Closes { gap_bytes: gap },
            ),
        ];
        let kinds: Vec<String> = rank(judged).iter().map(|r| r.advice.kind()).collect();
        assert_eq!(
            kinds,
            [
                "smaller-batch",
                "more-memory",
                "reduce-tile-padding",
                "smaller-batch-unmeasured"
            ]
        );
    }
}
