//! What an out-of-memory message says, as data.

use serde::Serialize;

/// A byte count read from a message: exact (`14787872288 bytes`) or rounded
/// (`13.77GiB`, kept as the nearest byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Amount {
    pub bytes: u64,
    pub approximate: bool,
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
        let value: f64 = number.parse().ok()?;
        let scale: f64 = match unit {
            "B" => 1.0,
            "K" | "KiB" => 1024.0,
            "M" | "MiB" => 1024f64.powi(2),
            "G" | "GiB" => 1024f64.powi(3),
            "T" | "TiB" => 1024f64.powi(4),
            "P" | "PiB" => 1024f64.powi(5),
            "E" | "EiB" => 1024f64.powi(6),
            _ => return None,
        };
        let bytes = (value * scale).round();
        // 2^64 bytes and more do not fit a byte count: not a size we can
        // state (a float cast would saturate it to 16 EiB and lie).
        if negative || !bytes.is_finite() || bytes >= u64::MAX as f64 {
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
    /// GPU: `Failed to allocate request for ... on device ordinal N` (plain StreamExecutor allocation).
    GpuFailedRequest,
    /// GPU: only the BFC allocator's log lines.
    GpuBfcAllocator,
    /// GPU/CPU compile-time warnings: rematerialization could not reduce memory, arguments exceed the limit.
    GpuCompileWarnings,
    /// Host memory: `Out of host memory while trying to allocate ...`.
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
            OomFormat::GpuFailedRequest => "gpu-failed-request",
            OomFormat::GpuBfcAllocator => "gpu-bfc-allocator",
            OomFormat::GpuCompileWarnings => "gpu-compile-warnings",
            OomFormat::HostAllocation => "host-allocation",
            OomFormat::TpuCompile => "tpu-compile",
            OomFormat::TpuCompileAbort => "tpu-compile-abort",
            OomFormat::TpuSparseCore => "tpu-sparse-core",
            OomFormat::TpuRuntimeReserve => "tpu-runtime-reserve",
            OomFormat::TpuRuntimeAllocate => "tpu-runtime-allocate",
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
}

/// A compiler warning that explains memory pressure.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Warning {
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
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
