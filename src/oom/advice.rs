//! What to try, for the situation the message shows: each piece of advice
//! carries the bytes it would save, or says it cannot be measured, and they
//! are ranked by that figure. Advice that does not fit the situation (a
//! gradient for an inference program, sharding for on-chip memory, a flag
//! that frees nothing) is not given.

use serde::Serialize;

use super::checks::{self, Problem, Quantity};
use super::dump::DumpLinks;
use super::explain::{BufferRef, Explanation};
use super::model::*;
use crate::units::human_bytes;

pub const JAX_GPU_MEMORY: &str = "https://docs.jax.dev/en/latest/gpu_memory_allocation.html";
pub const JAX_CHECKPOINT: &str = "https://docs.jax.dev/en/latest/gradient-checkpointing.html";
pub const JAX_DONATION: &str = "https://docs.jax.dev/en/latest/faq.html#buffer-donation";
pub const PALLAS_COMPILER_PARAMS: &str =
    "https://docs.jax.dev/en/latest/_autosummary/jax.experimental.pallas.tpu.CompilerParams.html";
/// OpenXLA's pages for TPU compile-time HBM and scoped VMEM errors (E1000, E1001).
pub const XLA_ERROR_HBM: &str = "https://openxla.org/xla/errors/error_1000";
pub const XLA_ERROR_SCOPED_VMEM: &str = "https://openxla.org/xla/errors/error_1001";

/// Whether the program computes gradients, and what says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Workload {
    /// An op name with `transpose(` or `jvp(`: JAX's autodiff.
    Training {
        evidence: String,
    },
    /// Op names are given and none is autodiff's.
    Inference,
    Unknown,
}

/// What the message (and the dump) tell about the program beyond sizes.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Situation {
    pub workload: Workload,
    /// Evidence that the program already rematerializes (`checkpoint` or
    /// `remat` in its names, or XLA's rematerialization warning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remat: Option<String>,
}

impl Situation {
    pub fn of(msg: &OomMessage, dump: Option<&DumpLinks>) -> Situation {
        let dump = dump.filter(|d| d.matches());
        let names: Vec<&str> = msg
            .peak_buffers
            .iter()
            .flat_map(|b| [b.op_name.as_deref(), b.label.as_deref()])
            .flatten()
            .collect();
        let training = names
            .iter()
            .find(|n| n.contains("transpose(") || n.contains("jvp("))
            .map(|n| n.to_string())
            .or_else(|| dump.and_then(|d| d.training_evidence.clone()));
        // A few op names without autodiff's are weak evidence (the listed
        // buffers may all be forward values); the dump's whole program is strong.
        let op_names = msg
            .peak_buffers
            .iter()
            .filter(|b| b.op_name.is_some())
            .count();
        let workload = match training {
            Some(evidence) => Workload::Training { evidence },
            None if op_names >= 3 || dump.is_some() => Workload::Inference,
            None => Workload::Unknown,
        };
        let remat = names
            .iter()
            .find(|n| n.contains("checkpoint") || n.contains("remat"))
            .map(|n| n.to_string())
            .or_else(|| {
                msg.warnings
                    .iter()
                    .any(|w| matches!(w, Warning::Rematerialization { .. }))
                    .then(|| "XLA's rematerialization warning".to_string())
            })
            .or_else(|| dump.and_then(|d| d.remat_evidence.clone()));
        Situation { workload, remat }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Advice {
    /// A size no device holds: fix the shapes before anything else.
    CheckShapes {
        bytes: u64,
    },
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
    /// Smaller batch without figures (the pool size is not in the message).
    SmallerBatchUnmeasured,
    Rematerialize {
        temp_bytes: u64,
        total_bytes: u64,
        workload: Workload,
    },
    /// Remat is on already: what is left is batch, sharding, or finer remat policies.
    RematAlreadyOn {
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
    /// Host memory: fewer or smaller arrays kept on the host.
    HostMemory,
    FreeLiveArrays {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saves_bytes: Option<u64>,
    },
    /// Enough is free, but not in one piece.
    Fragmentation {
        largest_free_region: u64,
        requested: u64,
    },
    /// JAX's GPU pool: its fraction, and what preallocation does and does not change.
    GpuPool,
    /// XLA's command buffers (CUDA/HIP graphs) need driver memory outside the pool.
    DisableCommandBuffers,
    /// Leave the driver more memory outside JAX's pool.
    SmallerGpuPool,
    /// The driver refused: another process holds the GPU.
    OtherProcesses,
    DumpTheProgram,
    Shard,
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
            | Advice::SmallerBatch { saves_bytes, .. }
            | Advice::ArgumentsTooLarge { saves_bytes, .. }
            | Advice::ReduceTilePadding { saves_bytes } => Saving::Bytes(*saves_bytes),
            Advice::DonateMatchingInput { saves_bytes, .. }
            | Advice::AvoidBroadcast { saves_bytes, .. }
            | Advice::KernelBlockSizes { saves_bytes, .. }
            | Advice::FreeLiveArrays { saves_bytes } => b(saves_bytes),
            _ => Saving::NotMeasurable,
        }
    }

    pub fn saves_bytes(&self) -> Option<u64> {
        match self.saving() {
            Saving::Bytes(b) => Some(b),
            Saving::NotMeasurable => None,
        }
    }

    pub fn action(&self) -> String {
        match self {
            Advice::CheckShapes { .. } => "Check the shapes of the arrays you pass and create".into(),
            Advice::DonateArgument { parameter, argument, .. } => format!(
                "Donate argument {parameter} (`{argument}`): jax.jit(fn, donate_argnums={parameter})"
            ),
            Advice::DonateMatchingInput { .. } => "Donate the input that has the result's shape: \
                 jax.jit(fn, donate_argnums=0) if it is argument 0"
                .into(),
            Advice::UseFloat32 { .. } => "Use float32 instead of float64 (turn off jax_enable_x64, or cast with \
                 .astype(jnp.float32))"
                .into(),
            Advice::AvoidBroadcast { .. } => "Avoid materializing the broadcast: reduce or contract it in the same \
                 expression, or compute it in chunks (lax.map)"
                .into(),
            Advice::SmallerBatch { needs, available, .. } => format!(
                "Use a smaller batch or sequence length: about {:.0}% of the current one fits",
                fits_percent(*needs, *available)
            ),
            Advice::SmallerBatchUnmeasured => "Use a smaller batch or sequence length".into(),
            Advice::Rematerialize { .. } => "Rematerialize: wrap the model's layers in jax.checkpoint (jax.remat) so \
                 activations are recomputed in the backward pass instead of stored"
                .into(),
            Advice::RematAlreadyOn { .. } => "Rematerialization is already on: use a stricter policy \
                 (jax.checkpoint_policies.nothing_saveable) only where layers are largest, or cut the batch"
                .into(),
            Advice::ReduceTilePadding { .. } => "Reshape arrays so their last two dimensions are multiples of 8 and \
                 128 (or move a small dimension out of the last two)"
                .into(),
            Advice::KernelBlockSizes { space, .. } => format!(
                "Reduce the kernel's block sizes (Pallas BlockSpec) or its scratch buffers so its working set fits {space}"
            ),
            Advice::RaiseVmemLimit { size, .. } => format!(
                "Raise the kernel's scoped VMEM limit: pltpu.CompilerParams(vmem_limit_bytes={}) on the pallas_call \
                 (or --xla_tpu_scoped_vmem_limit_kib for all of XLA's own ops)",
                size.map_or("N".to_string(), |s| round_up_mib(s).to_string())
            ),
            Advice::ArgumentsTooLarge { .. } => "Make the inputs and outputs smaller: shard them across devices, \
                 pass smaller arrays, or keep large ones on the host"
                .into(),
            Advice::HostMemory => "Keep fewer or smaller arrays in host memory (arrays placed with \
                 memory_kind=\"pinned_host\", offloaded activations, host-side copies), or run on a machine with more \
                 RAM; on GPU, XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB raises XLA's own cap on pinned host memory"
                .into(),
            Advice::FreeLiveArrays { .. } => "Free device arrays you no longer need before this call (del them, \
                 avoid keeping old results), and donate inputs that are replaced"
                .into(),
            Advice::Fragmentation { .. } => "Allocate the largest arrays first and keep fewer small arrays alive \
                 between steps, so free memory stays in one piece"
                .into(),
            Advice::GpuPool => "Give JAX's GPU pool more of the GPU: XLA_PYTHON_CLIENT_MEM_FRACTION=.95 (the \
                 default is .75); free what other processes hold"
                .into(),
            Advice::DisableCommandBuffers => "Turn XLA's command buffers off: \
                 XLA_FLAGS=--xla_gpu_enable_command_buffer= (an empty list)"
                .into(),
            Advice::SmallerGpuPool => "Leave the driver more memory: XLA_PYTHON_CLIENT_MEM_FRACTION below the \
                 default .75 (for example .6)"
                .into(),
            Advice::OtherProcesses => "Find what else holds the GPU (nvidia-smi or rocm-smi): another process, or \
                 a second JAX/TensorFlow process that preallocated its own pool"
                .into(),
            Advice::DumpTheProgram => "See which buffers these are: dump the program \
                 (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text), then run `hlomem analyze DIR` and \
                 `hlomem explain MESSAGE --dump DIR`"
                .into(),
            Advice::Shard => "Shard the large arrays across devices (jax.sharding.NamedSharding with a mesh)".into(),
        }
    }

    pub fn why(&self) -> String {
        match self {
            Advice::CheckShapes { bytes } => format!(
                "an allocation of {} is more than any device holds; optimizing memory cannot fix it",
                human_bytes(*bytes)
            ),
            Advice::DonateArgument { output, shape, .. } => format!(
                "the output {output} ({shape}) could be written into that input's buffer, but the input is not donated"
            ),
            Advice::DonateMatchingInput { shape, inputs, saves_bytes } => {
                let size = saves_bytes.map_or("?".to_string(), human_bytes);
                format!(
                    "{inputs} input{} the same shape and dtype as the result {shape} ({size}); a donated input's \
                     buffer receives the result instead of a new {size} allocation (`hlomem explain --dump DIR` \
                     names the argument)",
                    if *inputs == 1 { " has" } else { "s have" },
                )
            }
            Advice::UseFloat32 { wide_bytes, .. } => format!(
                "{} of the buffers listed are 64-bit (x64 is on); 32-bit halves each of them",
                human_bytes(*wide_bytes)
            ),
            Advice::AvoidBroadcast { buffer, .. } => format!(
                "{} is a broadcast made concrete; every element is a copy",
                buffer.phrase(buffer.shape.is_some())
            ),
            Advice::SmallerBatch { needs, available, saves_bytes } => format!(
                "the program needs {} and {} are available; if its memory grows with the batch, {} less is enough \
                 (arguments that do not grow with it, such as weights, make the cut larger)",
                human_bytes(*needs),
                human_bytes(*available),
                human_bytes(*saves_bytes)
            ),
            Advice::SmallerBatchUnmeasured => "activations and outputs grow with the batch and the sequence; how \
                 much fits depends on what else holds the device"
                .into(),
            Advice::Rematerialize { temp_bytes, total_bytes, workload } => {
                let kept = match workload {
                    Workload::Training { .. } => "most of them are activations kept for the gradient",
                    _ => "if this is a training step, most of them are activations kept for the gradient",
                };
                format!(
                    "intermediate values take {} of the {} needed; {kept}",
                    human_bytes(*temp_bytes),
                    human_bytes(*total_bytes)
                )
            }
            Advice::RematAlreadyOn { evidence } => format!(
                "the program already rematerializes ({evidence}); more of the same saves little"
            ),
            Advice::ReduceTilePadding { .. } => {
                "TPU tiled layouts pad those dimensions; the listed allocations lose this much to padding".into()
            }
            Advice::KernelBlockSizes { .. } => "this memory space holds one kernel's working set, not whole arrays; \
                 sharding or a smaller model does not change it"
                .into(),
            Advice::RaiseVmemLimit { size, limit, custom_kernel } => {
                let need = match (size, limit) {
                    (Some(s), Some(l)) => format!(
                        "the kernel asks {} and the limit is {}",
                        human_bytes(*s),
                        human_bytes(*l)
                    ),
                    _ => "the kernel asks more than its limit".into(),
                };
                let who = match custom_kernel {
                    Some(true) => "",
                    Some(false) => "; the instruction is not a custom kernel: that is likely an XLA bug, worth reporting with a dump",
                    None => "; if the op is not your own kernel, it is likely an XLA bug, worth reporting with a dump",
                };
                format!("{need}; the scoped limit is a default below the chip's VMEM, not its size{who}")
            }
            Advice::ArgumentsTooLarge {
                argument_bytes,
                limit_bytes,
                ..
            } => format!(
                "the program's inputs and outputs take {} against a scheduling limit of {}; no schedule or \
                 rematerialization can bring memory below what the arguments themselves hold",
                human_bytes(*argument_bytes),
                human_bytes(*limit_bytes)
            ),
            Advice::HostMemory => "the allocation that failed is in host memory, not on the accelerator; \
                 device-side advice (donation, remat, sharding) does not apply"
                .into(),
            Advice::FreeLiveArrays { .. } => {
                "the program fits the device but other live arrays occupy the room it needs at this moment".into()
            }
            Advice::Fragmentation { largest_free_region, requested } => format!(
                "the largest free region is {}, less than the {} asked, though more is free in pieces",
                human_bytes(*largest_free_region),
                human_bytes(*requested)
            ),
            Advice::GpuPool => "the program's own need is only part of what is on the device. \
                 XLA_PYTHON_CLIENT_PREALLOCATE=false does not give more memory: it only takes it on demand (and \
                 can fragment); arrays from earlier steps stay until released"
                .into(),
            Advice::DisableCommandBuffers => "a CUDA or HIP graph takes driver memory of its own; without \
                 command buffers XLA launches the same kernels one at a time, usually a little slower"
                .into(),
            Advice::SmallerGpuPool => "JAX's pool takes 75% of the GPU when the process starts; graphs, \
                 cuDNN and cuBLAS workspaces come from what is left"
                .into(),
            Advice::OtherProcesses => "the driver had less free memory than XLA asked for while growing its pool; \
                 JAX preallocates 75% of each visible GPU per process"
                .into(),
            Advice::DumpTheProgram => "the message only says how much was requested; the dump has every buffer, its \
                 size and its source line, and compiling alone (jax.jit(f).lower(...).compile()) is enough to get it"
                .into(),
            Advice::Shard => "on N devices each holds 1/N of a sharded array; the saving depends on N and on which \
                 arrays you shard"
                .into(),
        }
    }

    /// Pages that explain the advice further.
    pub fn links(&self) -> &'static [&'static str] {
        match self {
            Advice::DonateArgument { .. } | Advice::DonateMatchingInput { .. } => &[JAX_DONATION],
            Advice::Rematerialize { .. } | Advice::RematAlreadyOn { .. } => &[JAX_CHECKPOINT],
            Advice::GpuPool | Advice::OtherProcesses | Advice::SmallerGpuPool => &[JAX_GPU_MEMORY],
            Advice::KernelBlockSizes { .. } => &[XLA_ERROR_SCOPED_VMEM],
            Advice::RaiseVmemLimit { .. } => &[PALLAS_COMPILER_PARAMS, XLA_ERROR_SCOPED_VMEM],
            Advice::SmallerBatch { .. } => &[XLA_ERROR_HBM],
            _ => &[],
        }
    }
}

fn fits_percent(needs: u64, available: u64) -> f64 {
    (available as f64 * 100.0 / needs.max(1) as f64).floor()
}

/// A byte count rounded up to a whole MiB, as one would write the limit.
fn round_up_mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20) * (1 << 20)
}

/// Bytes the listed TPU allocations lose to tile padding.
pub fn padding_bytes(msg: &OomMessage) -> u64 {
    msg.peak_buffers
        .iter()
        .filter_map(|b| b.padding.map(|p| p.bytes))
        .try_fold(0u64, u64::checked_add)
        .unwrap_or(0)
}

/// Whether a shape string such as `f64[42994,42994]` has 64-bit elements (f64, c128).
fn is_wide(shape: &str) -> bool {
    matches!(
        crate::hlo::ElementType::parse(shape.split('[').next().unwrap_or("").trim()),
        Some(crate::hlo::ElementType::F64 | crate::hlo::ElementType::C128)
    )
}

/// The advice for `msg`, ranked.
pub fn advise(msg: &OomMessage, e: &Explanation) -> Vec<Advice> {
    let mut advice = Vec::new();
    let problems = &e.problems;
    if let Some(bytes) = problems.iter().find_map(|p| match p {
        Problem::ImpossibleSize { bytes, .. } => Some(*bytes),
        _ => None,
    }) {
        advice.push(Advice::CheckShapes { bytes });
    }
    let usable = |q: Quantity| checks::usable(problems, q);
    let sized = |b: &PeakBuffer| {
        b.size
            .map(|a| a.bytes)
            .filter(|&s| s <= checks::LARGEST_DEVICE_BYTES)
    };
    let tpu = msg.tpu.as_ref();
    let space = tpu.and_then(|t| t.memory_space.as_deref());
    let on_chip =
        matches!(space, Some("vmem") | Some("smem")) || tpu.is_some_and(|t| t.scoped.is_some());

    donation(msg, e, &mut advice);

    // Wide types: f64 and c128 halve in f32 / c64.
    let wide: u64 = msg
        .peak_buffers
        .iter()
        .filter(|b| b.shape.as_deref().is_some_and(is_wide))
        .filter_map(sized)
        .try_fold(0u64, u64::checked_add)
        .unwrap_or(0);
    if wide > 0 {
        advice.push(Advice::UseFloat32 {
            wide_bytes: wide,
            saves_bytes: wide / 2,
        });
    }

    if let Some(b) = msg.peak_buffers.iter().find(|b| {
        b.label.as_deref() == Some("broadcast")
            || b.op_name
                .as_deref()
                .is_some_and(|o| o.contains("broadcast"))
    }) {
        advice.push(Advice::AvoidBroadcast {
            buffer: BufferRef::of(b),
            saves_bytes: sized(b),
        });
    }

    // How much the program needs against what it has, when the message says both.
    if let Some(t) = tpu.filter(|_| !on_chip && usable(Quantity::ProgramUsage)) {
        if let (Some(used), Some(cap)) = (t.used, t.capacity) {
            let needs = used
                .bytes
                .saturating_add(t.sparse_core.map_or(0, |a| a.bytes));
            if needs > cap.bytes {
                advice.push(Advice::SmallerBatch {
                    needs,
                    available: cap.bytes,
                    saves_bytes: needs - cap.bytes,
                });
            }
        }
    }

    if let Some(t) = tpu.filter(|_| usable(Quantity::CompileRequires)) {
        if let (Some(requires), Some(available)) = (t.requires, t.available) {
            if requires.bytes > available.bytes {
                advice.push(Advice::SmallerBatch {
                    needs: requires.bytes,
                    available: available.bytes,
                    saves_bytes: requires.bytes - available.bytes,
                });
            }
        }
    }
    for w in &msg.warnings {
        if let Warning::ArgumentsExceedLimit {
            argument_bytes: Some(args),
            limit_bytes: Some(limit),
        } = *w
        {
            if args > limit && args <= checks::LARGEST_DEVICE_BYTES {
                advice.push(Advice::ArgumentsTooLarge {
                    argument_bytes: args,
                    limit_bytes: limit,
                    saves_bytes: args - limit,
                });
            }
        }
    }
    if msg.host && msg.format == OomFormat::HostAllocation {
        advice.push(Advice::HostMemory);
    }

    remat(msg, e, &mut advice);

    let padding = padding_bytes(msg);
    if padding > 0 {
        advice.push(Advice::ReduceTilePadding {
            saves_bytes: padding,
        });
    }

    if let Some(t) = tpu.filter(|_| on_chip) {
        let space = space.unwrap_or("vmem").to_string();
        let scoped = t.scoped;
        let over = scoped
            .and_then(|s| {
                s.exceeded_by.or(s
                    .size
                    .zip(s.limit)
                    .map(|(s, l)| Amount::exact(s.bytes.saturating_sub(l.bytes))))
            })
            .or(t.exceeded_by)
            .map(|a| a.bytes);
        advice.push(Advice::KernelBlockSizes {
            space: space.clone(),
            saves_bytes: over,
        });
        // Only the scoped form names a limit that a kernel can raise.
        if let Some(scoped) = scoped.filter(|_| space == "vmem") {
            advice.push(Advice::RaiseVmemLimit {
                size: scoped.size.map(|a| a.bytes),
                limit: scoped.limit.map(|a| a.bytes),
                custom_kernel: t.stack_instruction.as_ref().map(|_| t.custom_kernel),
            });
        }
    }

    if let (Some(t), Some(requested)) = (tpu, msg.requested) {
        if matches!(
            msg.format,
            OomFormat::TpuRuntimeReserve | OomFormat::TpuRuntimeAllocate
        ) {
            let usable_now = t.reservable.or(t.largest_free_region).or(t.free);
            advice.push(Advice::FreeLiveArrays {
                saves_bytes: usable_now.map(|u| requested.bytes.saturating_sub(u.bytes)),
            });
            if let (Some(largest), Some(free)) = (t.largest_free_region, t.free) {
                if largest.bytes < requested.bytes && requested.bytes <= free.bytes {
                    advice.push(Advice::Fragmentation {
                        largest_free_region: largest.bytes,
                        requested: requested.bytes,
                    });
                }
            }
        }
    }

    let gpu = matches!(
        msg.format,
        OomFormat::GpuAllocation | OomFormat::GpuBufferAssignment | OomFormat::GpuFailedRequest
    ) && !msg.host;
    if msg.format == OomFormat::GpuDriver && !msg.host {
        advice.push(Advice::OtherProcesses);
    }
    if msg.format == OomFormat::GpuCommandBuffer {
        advice.push(Advice::DisableCommandBuffers);
        advice.push(Advice::SmallerGpuPool);
    }
    if msg.peak_buffers.is_empty() && msg.stats.is_empty() && tpu.is_none() && !msg.host && gpu {
        advice.push(Advice::DumpTheProgram);
    }
    if gpu {
        advice.push(Advice::GpuPool);
    }
    if gpu || msg.format == OomFormat::TfTensor {
        advice.push(Advice::SmallerBatchUnmeasured);
    }
    // Sharding divides device memory (HBM, a GPU's), not a kernel's on-chip
    // memory, host memory, or run-time room taken by other arrays.
    let divides = !on_chip
        && !msg.host
        && !matches!(
            msg.format,
            OomFormat::TpuRuntimeReserve | OomFormat::TpuRuntimeAllocate | OomFormat::GpuDriver
        );
    let big = msg.stats.total.is_some()
        || tpu.is_some_and(|t| t.used.is_some() || t.total_usage.is_some() || t.requires.is_some())
        || !msg.peak_buffers.is_empty();
    if divides && big {
        advice.push(Advice::Shard);
    }
    // A shape mistake is not a shortage: more memory or less of it per
    // device does not fix it; finding the shape does.
    if matches!(e.verdict, super::verdict::Verdict::ShapeMistake { .. }) {
        advice.retain(|a| matches!(a, Advice::CheckShapes { .. } | Advice::DumpTheProgram));
    }
    rank(advice)
}

/// Shape checks first, then the largest measurable saving, then the rest in
/// the order they were added.
fn rank(mut advice: Vec<Advice>) -> Vec<Advice> {
    advice.sort_by_key(|a| {
        let first = !matches!(a, Advice::CheckShapes { .. });
        let saving = match a.saving() {
            Saving::Bytes(b) => std::cmp::Reverse(Some(b)),
            Saving::NotMeasurable => std::cmp::Reverse(None),
        };
        (first, saving)
    });
    advice
}

fn donation(msg: &OomMessage, e: &Explanation, advice: &mut Vec<Advice>) {
    if let Some(d) = e.dump.as_ref().filter(|d| d.matches()) {
        for c in &d.donation_candidates {
            advice.push(Advice::DonateArgument {
                parameter: c.parameter,
                argument: c.argument.clone(),
                output: c.output.clone(),
                shape: c.shape.clone(),
                saves_bytes: c.bytes,
            });
        }
        // The dump knows which inputs are donated already: no guessing.
        return;
    }
    if !(msg.stats.maybe_live_out.is_some_and(|a| a.bytes > 0) || msg.stats.is_empty()) {
        return;
    }
    let params: Vec<&PeakBuffer> = msg
        .peak_buffers
        .iter()
        .filter(|b| b.kind.as_deref() == Some("parameter"))
        .collect();
    let result = msg
        .peak_buffers
        .iter()
        .filter(|b| b.kind.as_deref() == Some("instruction"))
        .find(|r| {
            params
                .iter()
                .any(|p| p.shape == r.shape && p.size == r.size)
        });
    if let Some(r) = result {
        advice.push(Advice::DonateMatchingInput {
            shape: r.shape.clone().unwrap_or_default(),
            inputs: params.iter().filter(|p| p.shape == r.shape).count(),
            saves_bytes: r.size.map(|a| a.bytes),
        });
    }
}

fn remat(msg: &OomMessage, e: &Explanation, advice: &mut Vec<Advice>) {
    if let Some(evidence) = &e.situation.remat {
        if msg.format.is_tpu() || !msg.stats.is_empty() {
            advice.push(Advice::RematAlreadyOn {
                evidence: evidence.clone(),
            });
        }
        return;
    }
    if e.situation.workload == Workload::Inference {
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
    if let (Some(temp), Some(total)) = (temp, total) {
        if temp.saturating_mul(2) > total && total <= checks::LARGEST_DEVICE_BYTES {
            advice.push(Advice::Rematerialize {
                temp_bytes: temp,
                total_bytes: total,
                workload: e.situation.workload.clone(),
            });
        }
    }
}
