//! Advice in words, in the terms of the framework and application that ran
//! the program: `donate_argnums` and `jax.checkpoint` are JAX's; PyTorch/XLA
//! and TensorFlow users get their own settings, or none where their runtime
//! decides for them; vLLM's and AlphaFold's own knobs come before the
//! framework's.

use super::advice::Advice;
use super::context::{App, Framework};
use super::feasibility::{DEFAULT_FRACTION, MAX_FRACTION};
use super::situation::{RematBy, Situation, Workload};
use crate::units::human_bytes;

pub const JAX_GPU_MEMORY: &str = "https://docs.jax.dev/en/latest/gpu_memory_allocation.html";
pub const JAX_CHECKPOINT: &str = "https://docs.jax.dev/en/latest/gradient-checkpointing.html";
pub const JAX_DONATION: &str = "https://docs.jax.dev/en/latest/faq.html#buffer-donation";
pub const JAX_SHARDING: &str = "https://docs.jax.dev/en/latest/sharded-computation.html";
pub const PALLAS_COMPILER_PARAMS: &str =
    "https://docs.jax.dev/en/latest/_autosummary/jax.experimental.pallas.tpu.CompilerParams.html";
/// OpenXLA's pages for TPU compile-time HBM and scoped VMEM errors (E1000, E1001).
pub const XLA_ERROR_HBM: &str = "https://openxla.org/xla/errors/error_1000";
pub const XLA_ERROR_SCOPED_VMEM: &str = "https://openxla.org/xla/errors/error_1001";
pub const XLA_ISSUES: &str = "https://github.com/openxla/xla/issues";
pub const TF_GPU_MEMORY: &str = "https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth";

fn fw(s: &Situation) -> Option<Framework> {
    s.framework()
}

fn fits_percent(needs: u64, available: u64) -> f64 {
    (available as f64 * 100.0 / needs.max(1) as f64).floor()
}

/// A byte count rounded up to a whole MiB, as one would write the limit.
fn round_up_mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20) * (1 << 20)
}

/// The setting that sizes the memory pool, in the terms of who sized it:
/// a whole sentence when an application or framework has its own knob,
/// else JAX's variable.
fn pool_setting(s: &Situation, raise: bool, current: Option<f64>) -> String {
    let verb = if raise {
        "Give the pool more of the device"
    } else {
        "Leave memory outside the pool"
    };
    match (s.app(), fw(s)) {
        (Some(App::Vllm), _) => {
            let now = current.map_or(String::new(), |c| format!(" (it is {c})"));
            if raise {
                format!("Raise vLLM's --gpu-memory-utilization{now}")
            } else {
                format!(
                    "Lower vLLM's --gpu-memory-utilization{now}: vLLM takes that share of the device's memory at \
                     start for its KV cache, and everything it compiles later gets only the rest"
                )
            }
        }
        (Some(App::AlphaFold), _) if raise => format!(
            "Raise XLA_PYTHON_CLIENT_MEM_FRACTION above {} in docker/run_docker.py (or your launcher): with \
             TF_FORCE_UNIFIED_MEMORY=1 the fraction is how many GPUs' worth of memory AlphaFold may use, the rest \
             coming from host RAM",
            current.unwrap_or(4.0)
        ),
        (_, Some(Framework::Tensorflow)) if raise => "Give TensorFlow more of the GPU: raise \
             per_process_gpu_memory_fraction (or set_memory_growth(gpu, True) so it takes memory as needed)"
            .into(),
        (_, Some(Framework::Tensorflow)) => "Leave memory outside TensorFlow's pool: \
             tf.config.experimental.set_memory_growth(gpu, True) (or a smaller per_process_gpu_memory_fraction)"
            .into(),
        (_, Some(Framework::PytorchXla)) if raise => {
            format!("{verb}: PJRT_ALLOCATOR_FRACTION={MAX_FRACTION} (PyTorch/XLA's GPU pool)")
        }
        (_, Some(Framework::PytorchXla)) => format!(
            "{verb}: set PJRT_ALLOCATOR_FRACTION (PyTorch/XLA's GPU pool) below {}",
            current.map_or("its default of .75, for example .6".to_string(), |c| format!("{c}"))
        ),
        _ if s.unified() && raise => format!(
            "{verb}: raise XLA_PYTHON_CLIENT_MEM_FRACTION above {} (with unified memory it may exceed 1: host RAM \
             backs the rest)",
            current.unwrap_or(1.0)
        ),
        _ if raise => format!("{verb}: XLA_PYTHON_CLIENT_MEM_FRACTION={MAX_FRACTION}"),
        _ => match current {
            Some(c) if c > 1.0 => format!("{verb}: set XLA_PYTHON_CLIENT_MEM_FRACTION below {c}"),
            Some(c) => format!(
                "{verb}: set XLA_PYTHON_CLIENT_MEM_FRACTION below {c} (for example {:.2})",
                (c - 0.15).max(0.1)
            ),
            None => format!(
                "{verb}: set XLA_PYTHON_CLIENT_MEM_FRACTION below the default {DEFAULT_FRACTION} (for example .6)"
            ),
        },
    }
}

impl Advice {
    pub fn action(&self, s: &Situation) -> String {
        let f = fw(s);
        match self {
            Advice::CheckShapes { .. } => "Check the shapes of the arrays you pass and create; if they are the ones \
                 you meant, split the problem (smaller pieces, or shards over devices)"
                .into(),
            Advice::ReportXlaBug => "Report it to XLA with a dump of the program: the message itself says this \
                 should not happen"
                .into(),
            Advice::DonateArgument { parameter, argument, .. } => match f {
                Some(Framework::Tensorflow) => format!(
                    "Keep parameter {parameter} (`{argument}`) in a tf.Variable and update it inside the \
                     tf.function with assign / assign_add: TensorFlow writes a result into the buffer of a resource \
                     variable it updates, never into a tensor argument's"
                ),
                Some(Framework::PytorchXla) => format!(
                    "Update parameter {parameter} (`{argument}`) in place (a.add_(b), a.copy_(new), an optimizer's \
                     in-place step) instead of making a new tensor, or mark it for donation before the sync: \
                     torch_xla._XLAC._set_buffer_donation(tensor, True)"
                ),
                _ => format!("Donate argument {parameter} (`{argument}`): jax.jit(fn, donate_argnums={parameter})"),
            },
            Advice::DonateMatchingInput { .. } => match f {
                Some(Framework::PytorchXla) => "Update the input that has the result's shape in place (x.copy_(...), \
                     optimizer updates on the XLA device) rather than allocating a new tensor"
                    .into(),
                Some(Framework::Tensorflow) => "Keep the input that has the result's shape in a tf.Variable and \
                     assign the result to it inside the tf.function, so the result is written into its buffer"
                    .into(),
                _ => "Donate the input that has the result's shape: jax.jit(fn, donate_argnums=0) if it is argument 0".into(),
            },
            Advice::UseFloat32 { .. } => match f {
                Some(Framework::PytorchXla) => "Use float32 instead of float64 (tensor.float(), torch.float32)".into(),
                Some(Framework::Tensorflow) => "Use float32 instead of float64 (tf.float32, or tf.cast)".into(),
                _ => "Use float32 instead of float64 (turn off jax_enable_x64, or cast with .astype(jnp.float32))".into(),
            },
            Advice::LowerPrecision { .. } => match f {
                Some(Framework::PytorchXla) => "Keep the weights in bfloat16 (model.to(torch.bfloat16), or \
                     XLA_USE_BF16=1 on older PyTorch/XLA)"
                    .into(),
                Some(Framework::Tensorflow) => "Keep the weights in bfloat16 \
                     (tf.keras.mixed_precision.set_global_policy('mixed_bfloat16'))"
                    .into(),
                _ => "Keep the weights in bfloat16 (or int8): cast the parameters before the call, \
                     jax.tree_util.tree_map(lambda p: p.astype(jnp.bfloat16), params)"
                    .into(),
            },
            Advice::AvoidBroadcast { .. } => "Avoid materializing the broadcast: reduce or contract it in the same \
                 expression, or compute it in chunks"
                .into(),
            Advice::SmallerBatch { needs, available, .. } => format!(
                "{}: about {:.0}% of the current one fits",
                smaller_batch_words(s),
                fits_percent(*needs, *available)
            ),
            Advice::SmallerBatchUnmeasured => smaller_batch_words(s),
            Advice::MoreMemory { .. } => match f {
                Some(Framework::PytorchXla) => "Use a device with more memory, or spread the model over more devices \
                     (SPMD with xs.mark_sharding, or FSDP)"
                    .into(),
                Some(Framework::Tensorflow) => "Use a device with more memory, or spread the model over more devices \
                     (a tf.distribute strategy that shards variables)"
                    .into(),
                // AlphaFold and ColabFold fold one example on one device: a
                // larger one, not more of them.
                _ if s.app().is_some_and(|a| matches!(a, App::AlphaFold | App::ColabFold)) => {
                    format!("Use a {} with more memory", if s.placement.device == super::device::Device::Gpu { "GPU" } else { "device" })
                }
                _ => "Use a device with more memory, or spread the program over more devices (shard the weights and \
                     the batch: jax.sharding.NamedSharding over a mesh)"
                    .into(),
            },
            Advice::Rematerialize { .. } => match f {
                Some(Framework::PytorchXla) => "Checkpoint activations: wrap the model's blocks in \
                     torch_xla.utils.checkpoint.checkpoint so they are recomputed in the backward pass"
                    .into(),
                Some(Framework::Tensorflow) => "Recompute activations: wrap the model's blocks in tf.recompute_grad".into(),
                _ => "Rematerialize: wrap each of the model's blocks in jax.checkpoint (jax.remat) so activations are \
                     recomputed in the backward pass instead of stored"
                    .into(),
            },
            Advice::RematAlreadyOn { by: RematBy::User, .. } => match f {
                Some(Framework::PytorchXla | Framework::Tensorflow) => "Your checkpointing is on: recompute more of \
                     the model (checkpoint the blocks you left out, or smaller ones where layers are largest), or cut \
                     the batch"
                    .into(),
                _ => "Your checkpointing is on: use a stricter policy (jax.checkpoint_policies.nothing_saveable) where \
                     layers are largest, or cut the batch"
                    .into(),
            },
            Advice::RematAlreadyOn { by: RematBy::Xla, .. } => format!(
                "Checkpoint each block yourself ({} around each layer): XLA's own rematerialization already ran and \
                 could not do enough",
                checkpoint_api(f)
            ),
            Advice::ReduceTilePadding { .. } => "Reshape arrays so their last two dimensions are multiples of 8 and \
                 128 (or move a small dimension out of the last two)"
                .into(),
            Advice::KernelBlockSizes { space, .. } => match s.app() {
                Some(App::Vllm) => format!(
                    "The kernel's {space} use is vLLM's (its Pallas kernels size their blocks from your settings): \
                     report it to vLLM with the model and settings if smaller limits below do not help"
                ),
                _ if matches!(f, Some(Framework::PytorchXla | Framework::Tensorflow)) => format!(
                    "Reduce the kernel's block sizes (a custom kernel's, or a chunk size your library exposes) or its \
                     scratch buffers so its working set fits {space}"
                ),
                _ => format!(
                    "Reduce the kernel's block sizes (Pallas BlockSpec, or a chunk size your library exposes) or its \
                     scratch buffers so its working set fits {space}"
                ),
            },
            Advice::RaiseVmemLimit { size, .. } => match f {
                Some(Framework::PytorchXla | Framework::Tensorflow) => format!(
                    "Raise the scoped VMEM limit of XLA's own ops: LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib={} \
                     (a custom kernel sets its own limit where it is defined)",
                    size.map_or("N".to_string(), |s| (round_up_mib(s) / 1024).to_string())
                ),
                _ => format!(
                    "Raise the kernel's scoped VMEM limit: pltpu.CompilerParams(vmem_limit_bytes={}) on the pallas_call \
                     (or --xla_tpu_scoped_vmem_limit_kib for all of XLA's own ops)",
                    size.map_or("N".to_string(), |s| round_up_mib(s).to_string())
                ),
            },
            Advice::ArgumentsTooLarge { .. } => "Make the inputs and outputs smaller: shard them across devices, \
                 pass smaller arrays, or keep large ones on the host"
                .into(),
            Advice::HostMemory { pinned: true } => match f {
                Some(Framework::Tensorflow) => "Pin less host memory: smaller batches in flight from the input \
                     pipeline, or a lower TF_CUDA_HOST_MEM_LIMIT_IN_MB; or run where there is more RAM"
                    .into(),
                Some(Framework::PytorchXla) => "Pin less host memory (fewer tensors moved to or kept on the host \
                     at once, smaller batches in flight from the data loader) or raise XLA's cap on it \
                     (XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB, 64 by default); or run where there is more RAM"
                    .into(),
                _ => "Pin less host memory (fewer arrays with memory_kind=\"pinned_host\", less offloading) or raise \
                     XLA's cap on it (XLA_PJRT_GPU_HOST_MEMORY_LIMIT_GB, 64 by default); or run where there is more RAM"
                    .into(),
            },
            Advice::HostMemory { pinned: false } => "Keep fewer or smaller arrays in host memory, or run on a \
                 machine with more RAM"
                .into(),
            Advice::FreeLiveArrays => match f {
                Some(Framework::PytorchXla) => "Release tensors you no longer need before this step (del them, then \
                     xm.mark_step()) and keep no old results on the device"
                    .into(),
                Some(Framework::Tensorflow) => "Release what earlier steps left on the device \
                     (tf.keras.backend.clear_session(), del old models and tensors)"
                    .into(),
                _ => "Free device arrays you no longer need before this call (del them; jax.live_arrays() lists what \
                     is held) and donate inputs that are replaced"
                    .into(),
            },
            Advice::Fragmentation { .. } => "Allocate the largest arrays first and keep fewer small arrays alive \
                 between steps, so free memory stays in one piece"
                .into(),
            Advice::PoolFraction { raise, current } => pool_setting(s, *raise, *current),
            Advice::DisableCommandBuffers => "Turn XLA's command buffers off: \
                 XLA_FLAGS=--xla_gpu_enable_command_buffer= (an empty list)"
                .into(),
            Advice::OtherProcesses => match f {
                Some(Framework::Tensorflow | Framework::PytorchXla) => "Find what else holds the GPU (nvidia-smi or \
                     rocm-smi): another process, or a second framework in this one (each framework a process loads \
                     takes a pool of its own); give each process its share or its own GPU (CUDA_VISIBLE_DEVICES)"
                    .into(),
                _ => "Find what else holds the GPU (nvidia-smi or rocm-smi): another process, or a second framework \
                     in this one (JAX and TensorFlow each preallocate their own pool); give each process its share or \
                     its own GPU (CUDA_VISIBLE_DEVICES)"
                    .into(),
            },
            Advice::DumpTheProgram => dump_words(s),
            Advice::Shard { replicated_on } if !replicated_on.is_empty() => format!(
                "Shard the program instead of replicating it: {} each failed holding all of it; {}",
                replicated_on.join(", "),
                shard_how(f)
            ),
            Advice::Shard { .. } => format!("Shard the large arrays across devices: {}", shard_how(f)),
        }
    }

    pub fn why(&self, s: &Situation) -> String {
        let h = human_bytes;
        match self {
            Advice::CheckShapes { bytes } => format!(
                "one allocation of {} is more than any single device holds; no memory setting can make it fit",
                h(*bytes)
            ),
            Advice::ReportXlaBug => "XLA's message says it should not be possible to run out of this memory".into(),
            Advice::DonateArgument { output, shape, .. } => match fw(s) {
                Some(Framework::Tensorflow | Framework::PytorchXla) => format!(
                    "the output {output} ({shape}) could be written into that input's buffer, but the runtime did not \
                     let XLA reuse it"
                ),
                _ => format!(
                    "the output {output} ({shape}) could be written into that input's buffer, but the input is not donated"
                ),
            },
            Advice::DonateMatchingInput { shape, inputs, saves_bytes } => {
                let size = saves_bytes.map_or("?".to_string(), h);
                format!(
                    "{inputs} input{} the same shape and dtype as the result {shape} ({size}); a reused input's \
                     buffer receives the result instead of a new {size} allocation (`hlomem explain --dump DIR` \
                     names the argument)",
                    if *inputs == 1 { " has" } else { "s have" },
                )
            }
            Advice::UseFloat32 { wide_bytes, .. } => format!(
                "{} of the buffers listed are 64-bit; 32-bit halves each of them",
                h(*wide_bytes)
            ),
            Advice::LowerPrecision { argument_bytes, .. } => format!(
                "the arguments alone (weights and other inputs) take {}; 16-bit halves them",
                h(*argument_bytes)
            ),
            Advice::AvoidBroadcast { buffer, .. } => format!(
                "{} is a broadcast made concrete; every element is a copy",
                buffer.phrase(buffer.shape.is_some())
            ),
            Advice::SmallerBatch { needs, available, saves_bytes } => format!(
                "the compiler counted {} against {} available; if memory grows with the batch, {} less is enough \
                 (arguments that do not grow with it, such as weights, make the cut larger)",
                h(*needs),
                h(*available),
                h(*saves_bytes)
            ),
            Advice::SmallerBatchUnmeasured => "activations and outputs grow with the batch and the sequence; how much \
                 to cut, the message does not say"
                .into(),
            Advice::MoreMemory { needs: Some(n), available: Some(a) } => {
                let ratio = *n as f64 / (*a).max(1) as f64;
                // Twice over or more, no cut of the batch alone is likely to
                // fit it; less, a cut may, and more memory is the other way.
                let tail = if ratio >= 2.0 {
                    "that is a larger device or more of them, more than a cut of the batch is likely to give"
                } else {
                    "a device with that much free, or the program spread over two or more, fits it as it is"
                };
                format!("the program is {ratio:.1}x what the device holds ({} against {}): {tail}", h(*n), h(*a))
            }
            Advice::MoreMemory { .. } => "when the program itself is too big for the device, only more memory (or \
                 spreading it) fits it as it is"
                .into(),
            Advice::Rematerialize { temp_bytes, total_bytes, workload } => {
                let kept = match workload {
                    Workload::Training { .. } => "most of them are activations kept for the gradient",
                    _ => "if this is a training step, most of them are activations kept for the gradient",
                };
                let xla = if s.remat.as_ref().is_some_and(|r| r.by == RematBy::Xla) {
                    format!(
                        "; XLA's own rematerialization already ran (it runs when a program is over its limit), but it \
                         is not {}: it only recomputes what it can prove cheap",
                        checkpoint_api(fw(s))
                    )
                } else {
                    String::new()
                };
                format!(
                    "intermediate values take {} of the {}; {kept}{xla}",
                    h(*temp_bytes),
                    h(*total_bytes)
                )
            }
            Advice::RematAlreadyOn { by: RematBy::User, evidence } => format!(
                "your program already checkpoints ({evidence}); more of the same saves little"
            ),
            Advice::RematAlreadyOn { by: RematBy::Xla, evidence } => format!(
                "{evidence} shows XLA's automatic rematerialization, which is not {}; no op name shows your own",
                checkpoint_api(fw(s))
            ),
            Advice::ReduceTilePadding { .. } => {
                "TPU tiled layouts pad those dimensions; the listed allocations lose this much to padding".into()
            }
            Advice::KernelBlockSizes { .. } => "this memory space holds one kernel's working set, not whole arrays; \
                 sharding or a smaller model does not change it"
                .into(),
            Advice::RaiseVmemLimit { size, limit, custom_kernel } => {
                let need = match (size, limit) {
                    (Some(s), Some(l)) => format!("the kernel asks {} and the limit is {}", h(*s), h(*l)),
                    _ => "the kernel asks more than its limit".into(),
                };
                let who = match custom_kernel {
                    Some(true) => "",
                    Some(false) => "; the instruction is not a custom kernel: that is likely an XLA bug, worth reporting with a dump",
                    None => "; if the op is not your own kernel, it is likely an XLA bug, worth reporting with a dump",
                };
                format!("{need}; the scoped limit is a default below the chip's VMEM, not its size{who}")
            }
            Advice::ArgumentsTooLarge { argument_bytes, limit_bytes, .. } => format!(
                "the program's inputs and outputs take {} against a scheduling limit of {}; no schedule or \
                 rematerialization can bring memory below what the arguments themselves hold",
                h(*argument_bytes),
                h(*limit_bytes)
            ),
            Advice::HostMemory { pinned: true } => "the allocation that failed is pinned host memory, not the \
                 accelerator's: device-side advice (donation, remat, sharding) does not apply"
                .into(),
            Advice::HostMemory { pinned: false } => "the allocation that failed is in host memory, not on an \
                 accelerator; device-side advice does not apply"
                .into(),
            Advice::FreeLiveArrays => "if arrays from earlier steps (or another program) hold the room, freeing them \
                 makes it; the message does not say what holds it"
                .into(),
            Advice::Fragmentation { largest_free_region, requested } => format!(
                "the largest free region is {}, less than the {} asked, though more is free in pieces",
                h(*largest_free_region),
                h(*requested)
            ),
            Advice::PoolFraction { raise: true, .. } if s.unified() => "with unified memory the pool may be larger \
                 than the GPU, and its fraction caps how far it grows into host RAM"
                .into(),
            Advice::PoolFraction { raise: true, .. } => match fw(s) {
                Some(Framework::Tensorflow) => "TensorFlow takes the whole GPU unless told otherwise; if a fraction \
                     was set, a larger one is room only if nothing else needs it"
                    .into(),
                Some(Framework::PytorchXla) => "PyTorch/XLA's GPU pool takes a fraction of the device at start; a \
                     larger fraction is room only if nothing else needs it"
                    .into(),
                _ if s.app() == Some(App::Vllm) => "vLLM takes that share of the device at start; a larger share \
                     is room only if nothing else needs it"
                    .into(),
                _ => "the pool takes a fraction of the device when the process starts (.75 in JAX by default); a \
                     larger fraction is room only if nothing else needs it. Turning preallocation off does not give \
                     more memory: it only takes it on demand"
                    .into(),
            },
            Advice::PoolFraction { raise: false, .. } => "the driver, cuDNN, cuBLAS, NCCL, CUDA graphs and other \
                 processes all take their memory from outside the pool; a pool that takes nearly everything leaves \
                 them none"
                .into(),
            Advice::DisableCommandBuffers => "a CUDA or HIP graph takes driver memory of its own; without \
                 command buffers XLA launches the same kernels one at a time, usually a little slower"
                .into(),
            Advice::OtherProcesses => "what this process's pool has not taken, another process or library may \
                 hold; nvidia-smi lists the processes on the GPU and what each holds"
                .into(),
            Advice::DumpTheProgram => "the message lists no buffers; the dump has every buffer, its size and its \
                 source line, and compiling alone is enough to get it"
                .into(),
            Advice::Shard { replicated_on } if !replicated_on.is_empty() => "the same allocation failed on each \
                 device: each holds a whole copy; sharded over N devices each holds 1/N of the sharded arrays"
                .into(),
            Advice::Shard { .. } => "on N devices each holds 1/N of a sharded array; the saving depends on N and on \
                 which arrays you shard"
                .into(),
        }
    }

    /// Pages that explain the advice further.
    pub fn links(&self, s: &Situation) -> Vec<&'static str> {
        let jax = fw(s).is_none_or(|f| f == Framework::Jax);
        match self {
            Advice::DonateArgument { .. } if jax => vec![JAX_DONATION],
            Advice::DonateMatchingInput { .. } if jax => vec![JAX_DONATION],
            Advice::Rematerialize { .. } | Advice::RematAlreadyOn { .. } if jax => {
                vec![JAX_CHECKPOINT]
            }
            Advice::PoolFraction { .. } | Advice::OtherProcesses
                if fw(s) == Some(Framework::Tensorflow) =>
            {
                vec![TF_GPU_MEMORY]
            }
            Advice::PoolFraction { .. } | Advice::OtherProcesses
                if jax && s.app() != Some(App::Vllm) =>
            {
                vec![JAX_GPU_MEMORY]
            }
            Advice::KernelBlockSizes { .. } => vec![XLA_ERROR_SCOPED_VMEM],
            Advice::RaiseVmemLimit { .. } if jax => {
                vec![PALLAS_COMPILER_PARAMS, XLA_ERROR_SCOPED_VMEM]
            }
            Advice::RaiseVmemLimit { .. } => vec![XLA_ERROR_SCOPED_VMEM],
            Advice::SmallerBatch { .. } if s.placement.device == super::device::Device::Tpu => {
                vec![XLA_ERROR_HBM]
            }
            Advice::Shard { .. } | Advice::MoreMemory { .. } if jax => vec![JAX_SHARDING],
            Advice::ReportXlaBug => vec![XLA_ISSUES],
            _ => vec![],
        }
    }
}

fn smaller_batch_words(s: &Situation) -> String {
    match s.app() {
        Some(App::Vllm) => {
            "Serve shorter and fewer sequences: lower --max-model-len (and --max-num-seqs)".into()
        }
        Some(App::AlphaFold | App::ColabFold) => {
            "Fold a shorter sequence: split it into overlapping pieces, fold each, and join them"
                .into()
        }
        _ => "Use a smaller batch or sequence length".into(),
    }
}

/// The framework's own way to recompute activations in the backward pass.
pub(super) fn checkpoint_api(f: Option<Framework>) -> &'static str {
    match f {
        Some(Framework::PytorchXla) => "torch_xla.utils.checkpoint.checkpoint",
        Some(Framework::Tensorflow) => "tf.recompute_grad",
        _ => "jax.checkpoint",
    }
}

fn shard_how(f: Option<Framework>) -> &'static str {
    match f {
        Some(Framework::PytorchXla) => "SPMD (xs.mark_sharding) or FSDP",
        Some(Framework::Tensorflow) => "a tf.distribute strategy that shards variables",
        _ => "jax.sharding.NamedSharding with a mesh",
    }
}

fn dump_words(s: &Situation) -> String {
    match fw(s) {
        Some(Framework::PytorchXla) => "See which buffers these are: dump the program (XLA_FLAGS=--xla_dump_to=DIR \
             --xla_dump_hlo_as_text, or XLA_SAVE_TENSORS_FILE with XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1), then run \
             `hlomem analyze DIR` and `hlomem explain MESSAGE --dump DIR`"
            .into(),
        _ => "See which buffers these are: dump the program (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text), \
             then run `hlomem analyze DIR` and `hlomem explain MESSAGE --dump DIR`"
            .into(),
    }
}
