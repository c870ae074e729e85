//! What an out-of-memory message says, as data.

use serde::Serialize;

/// A byte count read from a message: exact (`14787872288 bytes`) or rounded
/// (`13.77GiB`, kept as the nearest byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Amount {
    pub bytes: u64,
    pub approximate: bool,
}

/// `13.77GiB`, or `?` when the message does not give the size.
pub fn human(a: Option<Amount>) -> String {
    a.map_or_else(|| "?".into(), |a| crate::units::human_bytes(a.bytes))
}

impl Amount {
    pub fn exact(bytes: u64) -> Amount {
        Amount {
            bytes,
            approximate: false,
        }
    }

    /// `13.77GiB`, `0B`, `384.0KiB`, TPU's `21.95G`, `1.7K`; `None` if it is not a size.
    pub fn parse_human(text: &str) -> Option<Amount> {
        let text = text.trim();
        let (negative, text) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, unit) = text.split_at(split);
        let shift: u32 = match unit {
            "B" => 0,
            "K" | "KiB" => 10,
            "M" | "MiB" => 20,
            "G" | "GiB" => 30,
            "T" | "TiB" => 40,
            "P" | "PiB" => 50,
            "E" | "EiB" => 60,
            _ => return None,
        };
        // Decimal arithmetic, not floating point: `3.47E` is 4000637620985759007
        // bytes to the byte, which an f64 cannot hold.
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() || fraction.len() > 18 || !fraction.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let digits: u128 = format!("{whole}{fraction}").parse().ok()?;
        let denominator = 10u128.pow(fraction.len() as u32);
        let scaled = digits.checked_mul(1u128 << shift)?;
        // Nearest byte, halves rounded up.
        let bytes = (scaled + denominator / 2) / denominator;
        // 2^64 bytes and more do not fit a byte count: not a size we can state.
        if negative || bytes >= u64::MAX as u128 {
            return None;
        }
        Some(Amount {
            bytes: bytes as u64,
            approximate: unit != "B",
        })
    }
}

/// The message formats hlomem recognizes (named as in the documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OomFormat {
    /// GPU: `Out of memory while trying to allocate N bytes.` and nothing more.
    GpuAllocation,
    /// GPU: the allocator message with the `BufferAssignment OOM Debugging` block (2021-09 to 2024-05).
    GpuBufferAssignment,
    /// `Failed to allocate request for ... on device ordinal N`: StreamExecutor's plain
    /// allocator, which GPUs and older TPU runtimes both used; the device is what the log says.
    DeviceFailedRequest,
    /// GPU: only the BFC allocator's log lines.
    GpuBfcAllocator,
    /// GPU: the CUDA or ROCm driver refused memory (`failed to allocate ... from device: CUDA_ERROR_OUT_OF_MEMORY`).
    GpuDriver,
    /// GPU: a CUDA/HIP graph (an XLA command buffer) could not be instantiated for lack of memory.
    GpuCommandBuffer,
    /// GPU: the CUDA context could not be created (`cuDevicePrimaryCtxRetain`), before any pool exists.
    GpuContext,
    /// GPU: a library beside JAX's pool found no memory: cuDNN (autotuning, its handle), cuBLAS, NCCL.
    GpuLibrary,
    /// GPU/CPU compile-time warnings: rematerialization could not reduce memory, arguments exceed the limit.
    GpuCompileWarnings,
    /// TensorFlow: `OOM when allocating tensor with shape[...] and type T on DEVICE by allocator A`.
    TfTensor,
    /// Host memory: `Out of host memory while trying to allocate ...`, the CPU runtime's
    /// `Out of memory allocating N bytes.`, pinned host memory.
    HostAllocation,
    /// TPU compile time: `Ran out of memory in memory space hbm|vmem|smem` with usage tables.
    TpuCompile,
    /// TPU compile time: `Aborting compilation early ... Requires X, has Y available.`
    TpuCompileAbort,
    /// TPU compile time: TensorCore and SparseCore HBM usage.
    TpuSparseCore,
    /// TPU run time: `Attempting to reserve X at the bottom of memory. That was not possible.`
    TpuRuntimeReserve,
    /// TPU run time: `Attempting to allocate X. That was not possible.`
    TpuRuntimeAllocate,
}

impl OomFormat {
    pub fn name(self) -> &'static str {
        match self {
            OomFormat::GpuAllocation => "gpu-allocation",
            OomFormat::GpuBufferAssignment => "gpu-buffer-assignment",
            OomFormat::DeviceFailedRequest => "device-failed-request",
            OomFormat::GpuBfcAllocator => "gpu-bfc-allocator",
            OomFormat::GpuDriver => "gpu-driver",
            OomFormat::GpuCommandBuffer => "gpu-command-buffer",
            OomFormat::GpuContext => "gpu-context",
            OomFormat::GpuLibrary => "gpu-library",
            OomFormat::GpuCompileWarnings => "gpu-compile-warnings",
            OomFormat::HostAllocation => "host-allocation",
            OomFormat::TfTensor => "tf-tensor",
            OomFormat::TpuCompile => "tpu-compile",
            OomFormat::TpuCompileAbort => "tpu-compile-abort",
            OomFormat::TpuSparseCore => "tpu-sparse-core",
            OomFormat::TpuRuntimeReserve => "tpu-runtime-reserve",
            OomFormat::TpuRuntimeAllocate => "tpu-runtime-allocate",
        }
    }

    /// The format in words.
    pub fn description(self) -> &'static str {
        match self {
            OomFormat::GpuAllocation => "GPU: an allocation failed at run time (the one-line form)",
            OomFormat::GpuBufferAssignment => {
                "GPU: an allocation failed, with XLA's buffer-assignment statistics"
            }
            OomFormat::DeviceFailedRequest => "a device allocation request failed",
            OomFormat::GpuBfcAllocator => "GPU: the BFC allocator ran out of memory",
            OomFormat::GpuDriver => "GPU: the CUDA or ROCm driver refused memory",
            OomFormat::GpuCommandBuffer => {
                "GPU: a CUDA or HIP graph (XLA command buffer) could not be instantiated"
            }
            OomFormat::GpuContext => "GPU: the CUDA context could not be created",
            OomFormat::GpuLibrary => "GPU: cuDNN, cuBLAS or NCCL found no memory",
            OomFormat::GpuCompileWarnings => "GPU: compile-time memory warnings",
            OomFormat::HostAllocation => "host memory allocation failed",
            OomFormat::TfTensor => "TensorFlow: a tensor could not be allocated",
            OomFormat::TpuCompile => "TPU: the program does not fit (compile time)",
            OomFormat::TpuCompileAbort => "TPU: compilation aborted early, the program cannot fit",
            OomFormat::TpuSparseCore => "TPU: TensorCore and SparseCore memory together do not fit",
            OomFormat::TpuRuntimeReserve => {
                "TPU: the program's memory could not be reserved at run time"
            }
            OomFormat::TpuRuntimeAllocate => "TPU: a buffer could not be allocated at run time",
        }
    }

    pub fn is_tpu(self) -> bool {
        matches!(
            self,
            OomFormat::TpuCompile
                | OomFormat::TpuCompileAbort
                | OomFormat::TpuSparseCore
                | OomFormat::TpuRuntimeReserve
                | OomFormat::TpuRuntimeAllocate
        )
    }
}

/// Everything read from one pasted message.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct OomMessage {
    pub format: OomFormat,
    /// The message stops before it is complete (or starts in its middle).
    pub truncated: bool,
    /// What the allocator could not allocate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested: Option<Amount>,
    /// `host memory` rather than device memory.
    pub host: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    pub stats: Stats,
    pub peak_buffers: Vec<PeakBuffer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpu: Option<TpuUsage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// The driver's error code (`CUDA_ERROR_OUT_OF_MEMORY`, `HIP_ERROR_OutOfMemory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_error: Option<String>,
    /// TensorFlow: the tensor that could not be allocated, as `float[500,512,4,4]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor: Option<String>,
    /// The BFC allocator said the failed attempt is not a failure (it retries or
    /// falls back); only a warning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_a_failure: bool,
    /// The allocation was of unified memory (`TF_FORCE_UNIFIED_MEMORY=1`):
    /// device memory that host RAM backs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unified: bool,
    /// Which library beside the pool failed (`gpu-library`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<Library>,
    /// The library's status (`CUDNN_STATUS_INTERNAL_ERROR`, `CUBLAS_STATUS_ALLOC_FAILED`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library_status: Option<String>,
    /// What the driver said of the whole device: `total memory reported: N`,
    /// `Memory usage: F bytes free, T bytes total`, `Free memory/Total memory: F/T`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_total: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_free: Option<Amount>,
    /// The replica or device the log line names (`Execution of replica 1 failed`,
    /// `device ordinal 3`, `(0x3x0_HBM1)`, `TPU:6`): the same failure on two
    /// devices is two messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The XLA message asks for a bug report (`It should not be possible to run
    /// out of smem - please file a bug against XLA`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub xla_bug: bool,
    /// The logical line of the text where the message starts (to read the log around it).
    #[serde(skip)]
    pub line: usize,
}

/// A GPU library that takes memory beside JAX's (or TensorFlow's) pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Library {
    /// cuDNN: its handle, or the scratch its convolution autotuning tries.
    CuDnn,
    CuBlas,
    /// NCCL, the collectives between GPUs: its buffers at communicator set-up.
    Nccl,
}

impl Library {
    pub fn name(self) -> &'static str {
        match self {
            Library::CuDnn => "cuDNN",
            Library::CuBlas => "cuBLAS",
            Library::Nccl => "NCCL",
        }
    }
}

impl OomMessage {
    /// An error rather than only warnings or allocator log lines.
    pub fn is_error(&self) -> bool {
        !matches!(
            self.format,
            OomFormat::GpuCompileWarnings | OomFormat::GpuBfcAllocator | OomFormat::GpuDriver
        )
    }

    pub fn new(format: OomFormat) -> OomMessage {
        OomMessage {
            format,
            truncated: false,
            requested: None,
            host: false,
            allocator: None,
            device: None,
            stats: Stats::default(),
            peak_buffers: Vec::new(),
            tpu: None,
            warnings: Vec::new(),
            driver_error: None,
            tensor: None,
            not_a_failure: false,
            unified: false,
            library: None,
            library_status: None,
            device_total: None,
            device_free: None,
            replica: None,
            xla_bug: false,
            line: 0,
        }
    }
}

/// The `BufferAssignment stats:` block (GPU).
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct Stats {
    pub parameter: Option<Amount>,
    pub constant: Option<Amount>,
    pub maybe_live_out: Option<Amount>,
    pub preallocated_temp: Option<Amount>,
    pub preallocated_temp_fragmentation: Option<Amount>,
    pub total: Option<Amount>,
    pub total_fragmentation: Option<Amount>,
}

impl Stats {
    pub fn is_empty(&self) -> bool {
        self.parameter.is_none()
            && self.constant.is_none()
            && self.maybe_live_out.is_none()
            && self.preallocated_temp.is_none()
            && self.total.is_none()
    }
}

/// One entry of `Peak buffers:` (GPU) or `Largest program allocations` (TPU).
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct PeakBuffer {
    pub number: u64,
    pub size: Option<Amount>,
    /// Without layout on GPU; with the TPU tiled layout on TPU.
    pub shape: Option<String>,
    /// `parameter` (an entry parameter), `instruction` (an instruction's result,
    /// GPU), or TPU's allocation type (`HLO temp`, `scoped`, ...).
    pub kind: Option<String>,
    pub op_name: Option<String>,
    pub op_type: Option<String>,
    pub source_file: Option<String>,
    pub source_line: Option<u64>,
    /// GPU: the opcode (`fusion`); TPU: the instruction text.
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deduplicated_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpadded_size: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<Amount>,
    /// The entry ended with its `=====` line (else it was cut off).
    #[serde(skip)]
    pub complete: bool,
}

/// TPU usage figures.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct TpuUsage {
    pub memory_space: Option<String>,
    /// `Used X of Y`: X.
    pub used: Option<Amount>,
    /// `Used X of Y`: Y, the memory available to the program.
    pub capacity: Option<Amount>,
    pub exceeded_by: Option<Amount>,
    /// `Total hbm usage >= X` and its rows (`reserved`, `program`, `arguments`).
    pub total_usage: Option<Amount>,
    pub usage_rows: Vec<(String, Option<Amount>)>,
    pub output_size: Option<Amount>,
    pub output_shared_with_arguments: Option<Amount>,
    /// `Program hbm requirement X` and its rows (`global`, `scoped`, `HLO temp`).
    pub program_requirement: Option<Amount>,
    pub requirement_rows: Vec<(String, Option<Amount>)>,
    /// Compile abort: `Requires X, has Y available.`
    pub requires: Option<Amount>,
    pub available: Option<Amount>,
    /// Run time: what could not be reserved or allocated, and what was free.
    pub free: Option<Amount>,
    pub capacity_rows: Vec<(String, i128)>,
    /// TensorCore / SparseCore HBM usage.
    pub sparse_core: Option<Amount>,
    /// Run time, reserve: `0B reserved, and 1.92G reservable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservable: Option<Amount>,
    /// Run time: `the largest contiguous region of free memory is X due to fragmentation`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_free_region: Option<Amount>,
    /// Compile time: `Scoped allocation with size X and limit Y exceeded scoped vmem limit by Z`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scoped: Option<ScopedAllocation>,
    /// `while allocating on stack for %name = shape ...`: the instruction whose scoped memory did not fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_instruction: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_shape: Option<String>,
    /// That instruction is a custom kernel (`custom_call_target="tpu_custom_call"`: Pallas or Mosaic).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub custom_kernel: bool,
}

/// One instruction's scoped (on-chip) memory against its limit.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct ScopedAllocation {
    pub size: Option<Amount>,
    pub limit: Option<Amount>,
    pub exceeded_by: Option<Amount>,
}

/// A compiler warning that explains memory pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Warning {
    /// `Can't reduce memory use below LIMIT by rematerialization; only reduced to REACHED, down from ORIGINAL`.
    Rematerialization {
        limit_bytes: Option<u64>,
        reached_bytes: Option<u64>,
        original_bytes: Option<u64>,
    },
    /// `The byte size of input/output arguments (N) exceeds the base limit (M).`
    ArgumentsExceedLimit {
        argument_bytes: Option<u64>,
        limit_bytes: Option<u64>,
    },
}

impl Warning {
    pub fn message(&self) -> String {
        let h = |b: &Option<u64>| b.map_or("?".to_string(), crate::units::human_bytes);
        match self {
            Warning::Rematerialization {
                limit_bytes,
                reached_bytes,
                original_bytes,
            } => {
                let from = original_bytes
                    .map(|o| format!(", down from {}", crate::units::human_bytes(o)))
                    .unwrap_or_default();
                format!(
                    "rematerialization could not bring memory below its target {}; it stays at {}{from}",
                    h(limit_bytes),
                    h(reached_bytes)
                )
            }
            Warning::ArgumentsExceedLimit {
                argument_bytes,
                limit_bytes,
            } => format!(
                "the program's inputs and outputs alone ({}) exceed the device memory limit ({})",
                h(argument_bytes),
                h(limit_bytes)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_become_nearest_bytes() {
        assert_eq!(Amount::parse_human("0B"), Some(Amount::exact(0)));
        let g = Amount::parse_human("13.77GiB").unwrap();
        assert!(g.approximate);
        // 14787872288 bytes print as 13.77GiB; the nearest byte of 13.77GiB is within 0.01GiB.
        assert!((g.bytes as i128 - 14_787_872_288i128).abs() < 1024 * 1024 * 11);
        assert_eq!(Amount::parse_human("1.7K").unwrap().bytes, 1741);
        assert_eq!(Amount::parse_human("384.0KiB").unwrap().bytes, 393_216);
        assert_eq!(Amount::parse_human("-2.55G"), None);
        assert_eq!(Amount::parse_human("12 bytes"), None);
    }
}
