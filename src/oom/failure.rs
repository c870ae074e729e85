//! What failed, statement by statement: the allocation, which of the
//! program's allocations it is, the program against its memory, the kernel
//! against its limit, and what the message leaves out.

use serde::Serialize;

use super::checks::{self, Problem, Quantity};
use super::device::{Device, MemorySpace, Placement};
use super::explain::{within_rounding, BufferRef};
use super::model::human as h;
use super::model::*;
use crate::units::human_bytes;

/// One statement of what failed.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Failure {
    /// One allocation of `requested` could not be had.
    Allocation {
        device: Device,
        space: MemorySpace,
        requested: Amount,
    },
    /// TensorFlow could not allocate one tensor.
    Tensor {
        tensor: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device: Option<String>,
    },
    /// TPU run time: the program's memory could not be reserved.
    Reserve {
        requested: Amount,
        free: Option<Amount>,
        reservable: Option<Amount>,
    },
    /// TPU run time: one buffer could not be allocated.
    RuntimeAllocate {
        requested: Amount,
        free: Option<Amount>,
        largest_free_region: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device: Option<String>,
    },
    /// The failed allocation is the preallocated temp block.
    IsTempBlock,
    /// The failed allocation is this buffer (an output when `output`).
    IsBuffer {
        buffer: BufferRef,
        output: bool,
    },
    /// The failed allocation is the program's outputs.
    IsOutputs,
    /// The compiled program needs more than the memory space holds.
    ProgramTooBig {
        space: String,
        used: Amount,
        capacity: Amount,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        over: Option<Amount>,
    },
    /// The compiled program does not fit, numbers not given.
    DoesNotFit {
        space: String,
    },
    /// One instruction's scoped memory is over its limit.
    ScopedOverLimit {
        space: String,
        size: Option<Amount>,
        limit: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instruction: Option<String>,
        custom_kernel: bool,
    },
    CompileAbort {
        requires: Amount,
        available: Amount,
    },
    /// Only compiler warnings: the failure follows from them.
    WarningsOnly,
    /// The BFC allocator says this attempt is not a failure.
    NotAFailure,
    /// A CUDA/HIP graph (XLA command buffer) could not be instantiated.
    CommandBuffer {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The driver refused the memory.
    Driver {
        space: MemorySpace,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The CUDA context could not be created.
    Context {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device_total: Option<Amount>,
    },
    /// A library beside the pool found no memory.
    Library {
        library: Library,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested: Option<Amount>,
    },
    Truncated,
}

impl Failure {
    pub fn sentence(&self) -> String {
        match self {
            Failure::Allocation {
                device,
                space,
                requested,
            } => {
                let exact = if requested.approximate {
                    String::new()
                } else {
                    format!(" ({} bytes)", requested.bytes)
                };
                let place = Placement {
                    device: *device,
                    space: *space,
                    evidence: String::new(),
                };
                format!(
                    "XLA asked for one block of {}{exact} of {} and could not get it.",
                    human_bytes(requested.bytes),
                    place.words(),
                )
            }
            Failure::Tensor {
                tensor,
                requested,
                device,
            } => {
                let size = requested
                    .map(|r| format!(" ({}, {} bytes)", human_bytes(r.bytes), r.bytes))
                    .unwrap_or_default();
                let on = device
                    .as_deref()
                    .map(|d| format!(" on {d}"))
                    .unwrap_or_default();
                format!("TensorFlow could not allocate a tensor {tensor}{size}{on}.")
            }
            Failure::Reserve {
                requested,
                free,
                reservable,
            } => {
                let mut s = format!(
                    "At run time the TPU could not reserve {} for the program at the bottom of memory; {} were free",
                    human_bytes(requested.bytes),
                    h(*free)
                );
                if let Some(r) = reservable.filter(|r| free.is_none_or(|f| r.bytes < f.bytes)) {
                    s += &format!(
                        ", but only {} reservable (free memory above other live buffers cannot be reserved there)",
                        human_bytes(r.bytes)
                    );
                }
                s + "."
            }
            Failure::RuntimeAllocate {
                requested,
                free,
                largest_free_region,
                device,
            } => {
                let on = device
                    .as_ref()
                    .map(|d| format!(" on {d}"))
                    .unwrap_or_default();
                let mut s = format!(
                    "At run time the TPU could not allocate a buffer of {}; {} were free{on}",
                    human_bytes(requested.bytes),
                    h(*free)
                );
                if let Some(l) = largest_free_region {
                    s += &format!(
                        ", and the largest contiguous free region was {} (fragmentation)",
                        human_bytes(l.bytes)
                    );
                }
                s + "."
            }
            Failure::IsTempBlock => "That is the whole preallocated temp block: the scratch memory for the program's \
                                     intermediate values, allocated in one piece when the program starts."
                .into(),
            Failure::IsBuffer { buffer, output } => {
                let output = if *output {
                    " (the program's result: maybe_live_out)"
                } else {
                    ""
                };
                format!("That is the size of {}{output}.", buffer.phrase(true))
            }
            Failure::IsOutputs => "That is the size of the program's outputs (maybe_live_out).".into(),
            Failure::ProgramTooBig {
                space,
                used,
                capacity,
                over,
            } => format!(
                "The compiler counted {} of {space} for the compiled program against {} available: {} too much.",
                human_bytes(used.bytes),
                human_bytes(capacity.bytes),
                human_bytes(
                    over.map_or(used.bytes.saturating_sub(capacity.bytes), |o| o.bytes)
                )
            ),
            Failure::DoesNotFit { space } => {
                format!("The compiled program does not fit in the TPU's {space} memory.")
            }
            Failure::ScopedOverLimit {
                space,
                size,
                limit,
                instruction,
                custom_kernel,
            } => {
                let who = match (instruction, custom_kernel) {
                    (Some(i), true) => format!("the custom kernel `{i}`"),
                    (Some(i), false) => format!("`{i}`"),
                    (None, _) => "one instruction".to_string(),
                };
                format!(
                    "The scoped {space} that {who} needs while it runs, {}, is over the limit of {}.",
                    h(*size),
                    h(*limit)
                )
            }
            Failure::CompileAbort {
                requires,
                available,
            } => format!(
                "XLA stopped compiling early: the program requires {} and the device has {} available.",
                human_bytes(requires.bytes),
                human_bytes(available.bytes)
            ),
            Failure::WarningsOnly => "The compiler warned that the program will not fit; the allocation failure that \
                                      follows is the consequence."
                .into(),
            Failure::NotAFailure => "The allocator says this is not a failure: it could not get the memory at once \
                                     and retried or fell back, which may only cost speed."
                .into(),
            Failure::Driver { space, error } => {
                let driver = match error.as_deref() {
                    Some(e) if e.starts_with("HIP") => "ROCm",
                    _ => "CUDA",
                };
                let code = error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default();
                match space {
                    MemorySpace::PinnedHost => format!(
                        "The {driver} driver could not pin host memory{code}: page-locked host RAM for transfers, \
                         not the GPU's memory."
                    ),
                    MemorySpace::Unified => format!(
                        "The {driver} driver could not allocate unified memory{code}: GPU memory that host RAM backs."
                    ),
                    _ => format!(
                        "The {driver} driver refused device memory{code}: this happens when a pool grows or a \
                         library allocates beside it, usually because another process holds the GPU."
                    ),
                }
            }
            Failure::Context { device_total } => format!(
                "The CUDA context (the driver's own state, a few hundred MiB) could not be created{}.",
                device_total.map_or(String::new(), |t| format!(" on a GPU the driver says has {}", human_bytes(t.bytes)))
            ),
            Failure::Library {
                library,
                status,
                requested,
            } => format!(
                "{} could not get memory{}{}: it allocates from what the pool leaves of the GPU.",
                library.name(),
                requested.map_or(String::new(), |r| format!(" for {}", human_bytes(r.bytes))),
                status.as_deref().map(|s| format!(" ({s})")).unwrap_or_default()
            ),
            Failure::CommandBuffer { error } => format!(
                "XLA could not instantiate a {} graph for one of its command buffers: the driver had no memory \
                 for it{}.",
                match error.as_deref() {
                    Some(e) if e.starts_with("HIP") => "HIP",
                    _ => "CUDA",
                },
                error
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ),
            Failure::Truncated => "The message is cut off (or starts in its middle): this explains what it shows; \
                                   paste the whole message for the rest."
                .into(),
        }
    }
}

pub fn what_failed(msg: &OomMessage, place: &Placement, problems: &[Problem]) -> Vec<Failure> {
    let mut out = Vec::new();
    let tpu = msg.tpu.as_ref();
    if msg.not_a_failure {
        out.push(Failure::NotAFailure);
    }
    if msg.format == OomFormat::GpuContext {
        out.push(Failure::Context {
            device_total: msg
                .device_total
                .filter(|_| checks::usable(problems, Quantity::DeviceTotal)),
        });
    } else if msg.format == OomFormat::GpuLibrary {
        out.push(Failure::Library {
            library: msg.library.unwrap_or(Library::CuDnn),
            status: msg.library_status.clone(),
            requested: msg.requested,
        });
    } else if let Some(tensor) = &msg.tensor {
        out.push(Failure::Tensor {
            tensor: tensor.clone(),
            requested: msg.requested,
            device: msg.device.clone(),
        });
    } else if let Some(r) = msg.requested {
        match msg.format {
            OomFormat::TpuRuntimeReserve => out.push(Failure::Reserve {
                requested: r,
                free: tpu.and_then(|t| t.free),
                reservable: tpu.and_then(|t| t.reservable),
            }),
            OomFormat::TpuRuntimeAllocate => out.push(Failure::RuntimeAllocate {
                requested: r,
                free: tpu.and_then(|t| t.free),
                largest_free_region: tpu.and_then(|t| t.largest_free_region),
                device: msg.device.clone(),
            }),
            _ => out.push(Failure::Allocation {
                device: place.device,
                space: place.space,
                requested: r,
            }),
        }
        // Which allocation of the program is that? (notes §3.4)
        let s = &msg.stats;
        let close = |a: Option<Amount>| a.is_some_and(|a| within_rounding(a, r));
        if close(s.preallocated_temp) && s.preallocated_temp.is_some_and(|a| a.bytes > 0) {
            out.push(Failure::IsTempBlock);
        } else if let Some(b) = msg.peak_buffers.iter().find(|b| {
            b.size.is_some_and(|a| within_rounding(a, r)) && b.kind.as_deref() != Some("parameter")
        }) {
            out.push(Failure::IsBuffer {
                buffer: BufferRef::from(b),
                output: close(s.maybe_live_out),
            });
        } else if close(s.maybe_live_out) {
            out.push(Failure::IsOutputs);
        }
    }
    if msg.format == OomFormat::GpuCommandBuffer {
        out.push(Failure::CommandBuffer {
            error: msg.driver_error.clone(),
        });
    }
    if msg.format == OomFormat::GpuDriver {
        out.push(Failure::Driver {
            space: place.space,
            error: msg.driver_error.clone(),
        });
    }
    if let Some(t) = tpu {
        let space = t.memory_space.clone().unwrap_or_else(|| "hbm".into());
        if let (Some(used), Some(capacity)) = (t.used, t.capacity) {
            let over = t
                .exceeded_by
                .filter(|_| checks::usable(problems, Quantity::ExceededBy));
            if msg.format != OomFormat::TpuSparseCore {
                out.push(Failure::ProgramTooBig {
                    space: space.clone(),
                    used,
                    capacity,
                    over,
                });
            }
        } else if let Some(s) = t.scoped {
            out.push(Failure::ScopedOverLimit {
                space,
                size: s.size,
                limit: s.limit,
                instruction: t.stack_instruction.clone(),
                custom_kernel: t.custom_kernel,
            });
        } else if t.memory_space.is_some() && msg.format == OomFormat::TpuCompile {
            out.push(Failure::DoesNotFit { space });
        }
        if let (Some(requires), Some(available)) = (t.requires, t.available) {
            out.push(Failure::CompileAbort {
                requires,
                available,
            });
        }
    }
    if out.is_empty() && !msg.warnings.is_empty() {
        out.push(Failure::WarningsOnly);
    }
    if msg.truncated {
        out.push(Failure::Truncated);
    }
    out
}
