//! When the message does not say whether the program itself is too big or
//! the room was held by something else (arrays from earlier steps, another
//! process, a pool set too small), the explanation names both readings and
//! how to tell them apart, rather than asserting one. Only figures the
//! message prints decide it: a TPU capacity table that shows the program's
//! requirement beside what is already allocated, or a compiler's refusal
//! (the program alone is over).

use serde::Serialize;

use super::context::Framework;
use super::device::Device;
use super::model::{human as h, OomFormat, OomMessage};
use super::situation::Situation;
use crate::units::human_bytes;

/// Why the message does not decide, the readings it leaves, and how to tell them apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Undecided {
    pub why: String,
    pub readings: Vec<String>,
    pub how_to_tell: Vec<String>,
}

/// What a TPU capacity table proves: the program's requirement against the
/// capacity less the reserved top, beside what is allocated already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CapacityProof {
    pub capacity: u64,
    pub reserved: u64,
    pub requirement: u64,
    pub allocated: u64,
    /// The program alone (and the reserved top) fits the device.
    pub program_fits_alone: bool,
}

impl CapacityProof {
    pub fn from_capacity_table(msg: &OomMessage) -> Option<CapacityProof> {
        let t = msg.tpu.as_ref()?;
        let row = |label: &str| {
            t.capacity_rows
                .iter()
                .find(|(l, _)| l == label)
                .and_then(|(_, b)| u64::try_from(*b).ok())
        };
        let capacity = t.capacity?.bytes;
        let reserved = row("Top-of-Memory reserved").unwrap_or(0);
        let requirement = row("Program requirement")?;
        let allocated = row("Currently allocated")?;
        Some(CapacityProof {
            capacity,
            reserved,
            requirement,
            allocated,
            program_fits_alone: reserved.saturating_add(requirement) <= capacity,
        })
    }

    pub fn sentence(&self) -> String {
        if self.program_fits_alone {
            format!(
                "the program alone fits: its {} and the reserved {} are within the {} of HBM; what is already \
                 allocated ({}: this call's arguments and outputs, and arrays from earlier calls) holds the room",
                human_bytes(self.requirement),
                human_bytes(self.reserved),
                human_bytes(self.capacity),
                human_bytes(self.allocated)
            )
        } else {
            format!(
                "the program alone does not fit: its {} and the reserved {} are more than the {} of HBM",
                human_bytes(self.requirement),
                human_bytes(self.reserved),
                human_bytes(self.capacity)
            )
        }
    }
}

/// The readings a message leaves open, or `None` when its figures decide.
pub fn undecided(msg: &OomMessage, s: &Situation) -> Option<Undecided> {
    use OomFormat as F;
    if CapacityProof::from_capacity_table(msg).is_some() {
        return None;
    }
    let requested = msg.requested.map(|r| human_bytes(r.bytes));
    let why = match msg.format {
        F::TpuRuntimeReserve | F::TpuRuntimeAllocate => {
            let free = msg.tpu.as_ref().and_then(|t| t.free);
            format!(
                "at run time {} could not be had{}; the message does not say what holds the rest",
                requested.as_deref().unwrap_or("memory"),
                free.map_or(String::new(), |f| format!(" with {} free", human_bytes(f.bytes)))
            )
        }
        F::GpuBufferAssignment => match msg.stats.total {
            Some(t) => format!(
                "the program needs {} in all, but the message does not say how much the device (or its pool) had, \
                 nor what else was on it",
                human_bytes(t.bytes)
            ),
            None => return None,
        },
        F::GpuAllocation | F::DeviceFailedRequest | F::GpuBfcAllocator | F::TfTensor => format!(
            "the message gives the one allocation that failed ({}) and nothing of the program's total, the \
             device's capacity, or what else was on it",
            h(msg.requested)
        ),
        F::GpuDriver if s.placement.device == Device::Gpu => format!(
            "the driver refused {} while the pool grew; the message does not say who holds the rest of the GPU",
            h(msg.requested)
        ),
        _ => return None,
    };
    let gpu = s.placement.device == Device::Gpu;
    if let Some(total) = small_program(msg) {
        // No accelerator XLA runs on has less than a GiB: a program that needs
        // less did not run out on its own.
        return Some(Undecided {
            why: format!(
                "the program needs only {} in all, less than any accelerator holds: something else held the room, \
                 and the message does not say what",
                human_bytes(total)
            ),
            readings: vec![format!(
                "Arrays kept from earlier steps, another process or framework on the same device{}.",
                if gpu { ", or a pool set too small" } else { "" }
            )],
            // What the program needs is known: only what holds the rest is to find.
            how_to_tell: how_to_tell(s, gpu)
                .into_iter()
                .filter(|h| !(h.contains("needs") || h.contains("which reading holds") || h.starts_with("In JAX, measure")))
                .collect(),
        });
    }
    let mut readings = vec![
        "The program is too big for the device: what this call needs (its batch, sequence length, model) is more \
         than the device holds, whatever else is there."
            .to_string(),
        format!(
            "The program would fit, but the room was held: arrays kept from earlier steps, or another process or \
             framework on the same device{}.",
            if gpu { ", or a pool set too small" } else { "" }
        ),
    ];
    if msg.format == F::GpuDriver {
        readings = vec![
            "Another process (or a second framework in this one) holds the GPU's memory.".into(),
            "This process's own pool took it, and the driver had nothing left for what it asked outside the pool."
                .into(),
        ];
    }
    Some(Undecided {
        why,
        readings,
        how_to_tell: how_to_tell(s, gpu),
    })
}

/// The program's own total when the message gives one and it is under a
/// GiB, less than any GPU or TPU has.
pub fn small_program(msg: &OomMessage) -> Option<u64> {
    msg.stats.total.map(|t| t.bytes).filter(|&t| t < 1 << 30)
}

fn how_to_tell(s: &Situation, gpu: bool) -> Vec<String> {
    let mut out = Vec::new();
    match s.framework() {
        Some(Framework::PytorchXla) => {
            out.push(
                "Measure the step alone: dump its program (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text) and \
                 run `hlomem explain MESSAGE --dump DIR`, whose total is what the program needs."
                    .into(),
            );
            out.push(
                "See what is held before the step: xm.get_memory_info(xm.xla_device()); memory that grows from one \
                 step to the next is being kept."
                    .into(),
            );
        }
        Some(Framework::Tensorflow) => {
            out.push(
                "Measure what is held: tf.config.experimental.get_memory_info('GPU:0') before and after the step; \
                 a peak near the device's size with nothing else running means the program itself is too big."
                    .into(),
            );
        }
        None => {
            // Nothing names the framework: the dump works for all of them.
            out.push(
                "Dump the program (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text) and run `hlomem explain \
                 MESSAGE --dump DIR`: the module's own total says which reading holds."
                    .into(),
            );
            out.push(
                "In JAX, measure it without running it (jax.jit(f).lower(*args).compile().memory_analysis(), or \
                 hlomem.compile_for(f, *args, target=...) for a device you do not have); in PyTorch/XLA, \
                 xm.get_memory_info(xm.xla_device()) before the step shows what is held."
                    .into(),
            );
        }
        Some(Framework::Jax) => {
            out.push(
                "Measure what the program needs without running it: jax.jit(f).lower(*args).compile().memory_analysis(), \
                 or hlomem.compile_for(f, *args, target=...) for a device you do not have, and compare with the \
                 device's memory (jax.devices()[0].memory_stats()['bytes_limit'])."
                    .into(),
            );
            out.push(
                "Dump the program (XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text) and run `hlomem explain \
                 MESSAGE --dump DIR`: the module's own total says which reading holds."
                    .into(),
            );
            out.push("See what is held before the call: jax.live_arrays(), and memory_stats()['bytes_in_use'].".into());
        }
    }
    if gpu {
        out.push(
            "nvidia-smi (or rocm-smi) while it runs shows the other processes on the GPU.".into(),
        );
    }
    out
}
