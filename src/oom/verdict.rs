//! The one-line verdict that opens an explanation: how much is needed, how
//! much was there, and what kind of shortage that is.

use serde::Serialize;

use super::checks::Problem;
use super::device::{Device, MemorySpace, Placement};
use super::explain::within_rounding;
use super::model::{human as h, Amount, Library, OomFormat, OomMessage};
use super::readings::CapacityProof;
use crate::units::human_bytes;

/// Which allocation of the program failed, when the stats say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Allocating {
    TempBlock,
    Output,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Verdict {
    /// A size no device holds: the shapes are wrong, memory is not short.
    ShapeMistake { bytes: u64 },
    /// GPU or host: one allocation of `requested` did not fit in what was
    /// left of the pool; the program needs `needs` in all (when the stats say).
    PoolTooSmall {
        device: Device,
        requested: Amount,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        needs: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allocating: Option<Allocating>,
    },
    /// TPU compile time: the program needs more than the memory space holds.
    ProgramTooBig {
        space: String,
        needs: Amount,
        /// `None` when the message does not give the capacity.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        available: Option<Amount>,
        /// The message's own "exceeded by" when it agrees with the rest.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        over: Option<Amount>,
    },
    /// One instruction's scoped memory (VMEM, SMEM) is over its limit.
    ScopedOverLimit {
        space: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<Amount>,
    },
    CompileAbort {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requires: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        available: Option<Amount>,
    },
    /// Run time: memory could not be had; `usable` is what could really be
    /// had (reservable, or the largest contiguous region). Whether the
    /// program is too big or other arrays hold the room is said only when a
    /// capacity table (`proof`) shows it.
    NoRoomAtRunTime {
        device: Device,
        requested: Amount,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        free: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usable: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        proof: Option<CapacityProof>,
    },
    /// The driver refused memory: device memory (held elsewhere), or pinned
    /// host memory (RAM, or the driver's own state for tiny requests).
    DriverRefused {
        space: MemorySpace,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested: Option<Amount>,
    },
    /// The CUDA context could not be created: the GPU is full before this
    /// process has allocated anything.
    ContextFailed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device_total: Option<Amount>,
    },
    /// cuDNN, cuBLAS or NCCL found no memory outside the pool.
    LibraryFailed {
        library: Library,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        free: Option<Amount>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<Amount>,
    },
    /// A CUDA/HIP graph (XLA command buffer) found no driver memory.
    CommandBuffer {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The BFC allocator could not get memory at once and says it is not a failure.
    AllocatorRetried {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested: Option<Amount>,
    },
    /// Only compiler warnings: rematerialization or the argument limit.
    CompilerWarnings {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reached_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_bytes: Option<u64>,
    },
    /// The message says too little for a verdict.
    Unknown,
}

impl Verdict {
    /// The verdict on a message: a size no device holds whatever its form,
    /// the allocator's retry, then by the message's format.
    pub fn decide(msg: &OomMessage, place: &Placement, problems: &[Problem]) -> Verdict {
        if let Some(bytes) = impossible_size(problems) {
            return Verdict::ShapeMistake { bytes };
        }
        if msg.not_a_failure {
            return Verdict::AllocatorRetried {
                requested: msg.requested,
            };
        }
        let usable_total = msg
            .device_total
            .filter(|_| super::checks::usable(problems, super::checks::Quantity::DeviceTotal));
        match msg.format {
            OomFormat::GpuContext => Verdict::ContextFailed {
                device_total: usable_total,
            },
            OomFormat::GpuLibrary => Verdict::LibraryFailed {
                library: msg.library.unwrap_or(Library::CuDnn),
                requested: msg.requested,
                free: msg.device_free.filter(|_| usable_total.is_some()),
                total: usable_total,
            },
            OomFormat::GpuDriver => Verdict::DriverRefused {
                space: place.space,
                requested: msg.requested,
            },
            OomFormat::GpuCommandBuffer => Verdict::CommandBuffer {
                error: msg.driver_error.clone(),
            },
            OomFormat::TpuRuntimeReserve | OomFormat::TpuRuntimeAllocate => {
                no_room_at_run_time(msg, place)
            }
            OomFormat::TpuCompileAbort => {
                let t = msg.tpu.clone().unwrap_or_default();
                Verdict::CompileAbort {
                    requires: t.requires,
                    available: t.available,
                }
            }
            OomFormat::GpuCompileWarnings => rematerialization_warning(msg),
            _ if msg.format.is_tpu() => tpu_compile(msg, problems),
            _ => pool_too_small(msg, place),
        }
    }

    pub fn sentence(&self) -> String {
        match self {
            Verdict::ShapeMistake { bytes } => format!(
                "a size of {}: more than any single device holds, so a shape mistake (a dimension too many, sizes \
                 multiplied where they should not be) or a problem that must be split; no memory setting fixes it",
                human_bytes(*bytes)
            ),
            Verdict::PoolTooSmall {
                device,
                requested,
                needs,
                allocating,
            } => {
                let pool = match device {
                    Device::Host => "host memory",
                    Device::Gpu => "the GPU pool",
                    Device::Tpu => "the TPU",
                    Device::Unknown => "the device (the text does not say which)",
                };
                let when = match allocating {
                    Some(Allocating::TempBlock) => "when the temp block was allocated",
                    Some(Allocating::Output) => "when the output was allocated",
                    None => "for that allocation",
                };
                match needs {
                    Some(n) => format!(
                        "needs {}; {pool} had less than {} free {when}",
                        human_bytes(n.bytes),
                        human_bytes(requested.bytes)
                    ),
                    None => format!(
                        "{pool} had less than {} free {when}",
                        human_bytes(requested.bytes)
                    ),
                }
            }
            Verdict::ProgramTooBig {
                space,
                needs,
                available,
                over,
            } => {
                let Some(available) = available else {
                    return format!(
                        "the compiler counted at least {} of {space} for the program; the message does not say how \
                         much the device has",
                        human_bytes(needs.bytes)
                    );
                };
                let over = over.map_or(needs.bytes.saturating_sub(available.bytes), |o| o.bytes);
                let ratio = needs.bytes as f64 / available.bytes.max(1) as f64;
                // A ratio says how far off the program is; near 1 it says nothing.
                let ratio = if ratio >= 1.1 {
                    format!(" ({ratio:.1}x)")
                } else {
                    String::new()
                };
                // On-chip memory holds one kernel's working set, not the
                // program. "Needs" is said once, where the figure comes from:
                // the compiler's count.
                let who = if matches!(space.as_str(), "vmem" | "smem") {
                    "one kernel's"
                } else {
                    "the program's"
                };
                format!(
                    "the compiler counted {} of {space} for {who} buffers, {} are available: {} over{ratio}",
                    human_bytes(needs.bytes),
                    human_bytes(available.bytes),
                    human_bytes(over)
                )
            }
            Verdict::ScopedOverLimit { space, size, limit } => match (size, limit) {
                (Some(_), Some(_)) => format!(
                    "one kernel needs {} of scoped {space}; its limit is {}",
                    h(*size),
                    h(*limit)
                ),
                _ => format!("one kernel's working set does not fit in {space}"),
            },
            Verdict::CompileAbort {
                requires,
                available,
            } => format!(
                "the compiler expects the program to need {}, with {} available, and stopped",
                h(*requires),
                h(*available)
            ),
            Verdict::NoRoomAtRunTime {
                device,
                requested,
                free,
                usable,
                proof,
            } => {
                let usable = match (usable, free) {
                    (Some(u), Some(f)) if u.bytes < f.bytes => format!(
                        " ({} free, but only {} of it usable in one piece)",
                        human_bytes(f.bytes),
                        human_bytes(u.bytes)
                    ),
                    (_, Some(f)) => format!(" ({} free)", human_bytes(f.bytes)),
                    _ => String::new(),
                };
                let on = match device {
                    Device::Tpu => " on the TPU",
                    _ => "",
                };
                match proof {
                    Some(p) => format!("{} could not be had at run time{on}{usable}: {}", human_bytes(requested.bytes), p.sentence()),
                    None => format!(
                        "{} could not be had at run time{on}{usable}: either the program is too big for the device, \
                         or arrays from earlier calls hold the room; the message does not say which",
                        human_bytes(requested.bytes)
                    ),
                }
            }
            Verdict::DriverRefused { space, requested } => match space {
                MemorySpace::PinnedHost if requested.is_some_and(|r| r.bytes < 1 << 20) => format!(
                    "the GPU driver could not pin {} of host memory: no host runs out of RAM at that size, so the \
                     driver itself had no room (the GPU is usually held whole by a pool, or by another process)",
                    h(*requested)
                ),
                MemorySpace::PinnedHost => format!(
                    "the GPU driver could not pin {} of host memory: host RAM (or the limit on locked memory) is \
                     short, not the GPU's memory",
                    h(*requested)
                ),
                MemorySpace::Unified => format!(
                    "the driver refused {} of unified memory: the GPU and the host RAM behind it are both taken",
                    h(*requested)
                ),
                _ => format!(
                    "the driver refused {}: the GPU's memory is held elsewhere (another process, or this one's pool)",
                    h(*requested)
                ),
            },
            Verdict::ContextFailed { device_total } => format!(
                "the CUDA context could not be created{}: the driver had no room for it before this process's pool \
                 existed, so something else holds the GPU (another process, a second framework in this one, or a \
                 cluster's limit on the device)",
                device_total.map_or(String::new(), |t| format!(" on a GPU of {}", human_bytes(t.bytes)))
            ),
            Verdict::LibraryFailed {
                library,
                requested,
                free,
                total,
            } => match (free, total) {
                (Some(f), Some(t)) if f.bytes >= t.bytes / 2 => format!(
                    "{} failed with {} of {} free: not a memory shortage; the library failed for another reason \
                     (its installation or version)",
                    library.name(),
                    human_bytes(f.bytes),
                    human_bytes(t.bytes)
                ),
                _ => format!(
                    "{} found no memory{}: it allocates outside the pool, from what the pool leaves of the GPU{}",
                    library.name(),
                    requested.map_or(String::new(), |r| format!(" for {}", human_bytes(r.bytes))),
                    match (free, total) {
                        (Some(f), Some(t)) => format!(" ({} of {} free)", human_bytes(f.bytes), human_bytes(t.bytes)),
                        _ => String::new(),
                    }
                ),
            },
            Verdict::CommandBuffer { .. } => "the GPU driver had no memory left to instantiate an XLA command \
                 buffer (a CUDA or HIP graph); graphs take memory outside the pool XLA allocates from"
                .into(),
            Verdict::AllocatorRetried { requested } => format!(
                "a warning, not the error: the allocator could not get {} at once and went on",
                h(*requested)
            ),
            Verdict::CompilerWarnings {
                reached_bytes,
                limit_bytes,
            } => match (reached_bytes, limit_bytes) {
                (Some(r), Some(l)) => format!(
                    "the compiler could only bring the program down to {}, over its memory limit of {}",
                    human_bytes(*r),
                    human_bytes(*l)
                ),
                _ => "the compiler warned that the program will not fit".into(),
            },
            Verdict::Unknown => "out of memory; the message says too little for more".into(),
        }
    }
}

/// A size more than any device holds (or one wrapped around from a negative
/// figure), which no form of message makes a memory shortage.
fn impossible_size(problems: &[Problem]) -> Option<u64> {
    problems.iter().find_map(|p| match p {
        Problem::ImpossibleSize { bytes, .. } => Some(*bytes),
        // A driver's total printed from a negative figure is the driver's
        // report gone wrong, not a size the program asked for.
        Problem::Wraparound { quantity, bytes }
            if *quantity != super::checks::Quantity::DeviceTotal =>
        {
            Some(*bytes)
        }
        _ => None,
    })
}

/// TPU run time: what could not be reserved or allocated, against what was free.
fn no_room_at_run_time(msg: &OomMessage, place: &Placement) -> Verdict {
    let t = msg.tpu.clone().unwrap_or_default();
    match msg.requested {
        Some(requested) => Verdict::NoRoomAtRunTime {
            device: place.device,
            requested,
            free: t.free,
            usable: t.reservable.or(t.largest_free_region),
            proof: CapacityProof::from_capacity_table(msg),
        },
        None => Verdict::Unknown,
    }
}

/// Compiler warnings only: what rematerialization reached against its target.
fn rematerialization_warning(msg: &OomMessage) -> Verdict {
    let (reached_bytes, limit_bytes) = msg
        .warnings
        .iter()
        .find_map(|w| match w {
            super::model::Warning::Rematerialization {
                limit_bytes,
                reached_bytes,
                ..
            } => Some((*reached_bytes, *limit_bytes)),
            _ => None,
        })
        .unwrap_or((None, None));
    Verdict::CompilerWarnings {
        reached_bytes,
        limit_bytes,
    }
}

/// TPU compile time: a scoped allocation over its limit, or the program
/// against the memory space's capacity.
fn tpu_compile(msg: &OomMessage, problems: &[Problem]) -> Verdict {
    let t = msg.tpu.clone().unwrap_or_default();
    let over = t
        .exceeded_by
        .filter(|_| super::checks::usable(problems, super::checks::Quantity::ExceededBy));
    let space = t.memory_space.clone().unwrap_or_else(|| "hbm".into());
    if let Some(s) = t.scoped {
        Verdict::ScopedOverLimit {
            space,
            size: s.size,
            limit: s.limit,
        }
    } else if let (Some(needs), Some(available)) = (t.used, t.capacity) {
        Verdict::ProgramTooBig {
            space,
            needs: match t.sparse_core {
                Some(sc) => Amount {
                    bytes: needs.bytes.saturating_add(sc.bytes),
                    approximate: true,
                },
                None => needs,
            },
            available: Some(available),
            over,
        }
    } else if let Some(total) = t.total_usage {
        Verdict::ProgramTooBig {
            space,
            needs: total,
            available: t.capacity,
            over,
        }
    } else if matches!(space.as_str(), "vmem" | "smem") {
        Verdict::ScopedOverLimit {
            space,
            size: None,
            limit: None,
        }
    } else {
        Verdict::Unknown
    }
}

/// An allocation the pool could not serve (GPU, host, a device the text
/// does not name), and which of the stats' blocks it was, when its size is one's.
fn pool_too_small(msg: &OomMessage, place: &Placement) -> Verdict {
    match msg.requested {
        Some(requested) => {
            let close =
                |a: Option<Amount>| a.is_some_and(|a| a.bytes > 0 && within_rounding(a, requested));
            let allocating = if close(msg.stats.preallocated_temp) {
                Some(Allocating::TempBlock)
            } else if close(msg.stats.maybe_live_out) {
                Some(Allocating::Output)
            } else {
                None
            };
            Verdict::PoolTooSmall {
                device: place.device,
                requested,
                needs: msg.stats.total,
                allocating,
            }
        }
        None if !msg.warnings.is_empty() => Verdict::CompilerWarnings {
            reached_bytes: None,
            limit_bytes: None,
        },
        None => Verdict::Unknown,
    }
}
