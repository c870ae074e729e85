//! Which device, and which of its memories, ran out: read from the message's
//! own words first, then from the log around it, and said to be unknown when
//! neither tells. A phrase several runtimes print (`Failed to allocate
//! request ... on device ordinal 0` comes from StreamExecutor's allocator,
//! which GPUs and older TPU runtimes both used) is not evidence of a GPU.

use serde::Serialize;

use super::context::{LogContext, Marker};
use super::model::{OomFormat, OomMessage};

/// Where the memory that ran out is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Device {
    Gpu,
    Tpu,
    Host,
    /// Nothing in the text says.
    Unknown,
}

impl Device {
    /// "the GPU", "the TPU", "host memory", "the device".
    pub fn words(self) -> &'static str {
        match self {
            Device::Gpu => "the GPU",
            Device::Tpu => "the TPU",
            Device::Host => "host memory",
            Device::Unknown => "the device",
        }
    }
}

/// Which memory of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MemorySpace {
    /// A GPU's device memory (or an unknown device's).
    DeviceMemory,
    /// A TPU's high-bandwidth memory.
    Hbm,
    /// A TPU core's on-chip vector or scalar memory.
    Vmem,
    Smem,
    /// Ordinary host RAM (XLA's CPU runtime, TensorFlow's CPU allocator).
    HostRam,
    /// Page-locked host memory a GPU runtime pins for transfers and offloading.
    PinnedHost,
    /// GPU memory that host RAM backs (`TF_FORCE_UNIFIED_MEMORY=1`).
    Unified,
}

impl MemorySpace {
    pub fn words(self) -> &'static str {
        match self {
            MemorySpace::DeviceMemory => "device memory",
            MemorySpace::Hbm => "HBM",
            MemorySpace::Vmem => "VMEM (on-chip)",
            MemorySpace::Smem => "SMEM (on-chip)",
            MemorySpace::HostRam => "host RAM",
            MemorySpace::PinnedHost => "pinned (page-locked) host memory",
            MemorySpace::Unified => "unified memory (GPU memory backed by host RAM)",
        }
    }
}

/// The device and memory space of one message, and what says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Placement {
    pub device: Device,
    pub space: MemorySpace,
    /// The words that say so (of the message, or of the log around it).
    pub evidence: String,
}

impl Placement {
    fn new(device: Device, space: MemorySpace, evidence: impl Into<String>) -> Placement {
        Placement {
            device,
            space,
            evidence: evidence.into(),
        }
    }

    /// "the TPU's HBM", "pinned (page-locked) host memory", "an unnamed device's memory".
    pub fn words(&self) -> String {
        match (self.device, self.space) {
            (Device::Host, space) => space.words().to_string(),
            (Device::Unknown, _) => "an unnamed device's memory".into(),
            (Device::Gpu, MemorySpace::DeviceMemory) => "the GPU's memory".into(),
            (d, s) => format!("{}'s {}", d.words(), s.words()),
        }
    }

    pub fn locate(msg: &OomMessage, ctx: &LogContext) -> Placement {
        use MemorySpace as S;
        if let Some(p) = host(msg) {
            return p;
        }
        if msg.unified {
            return Placement::new(
                Device::Gpu,
                S::Unified,
                "`unified memory` in the driver's message",
            );
        }
        if msg.format.is_tpu() {
            let space = match msg.tpu.as_ref().and_then(|t| t.memory_space.as_deref()) {
                Some("vmem") => S::Vmem,
                Some("smem") => S::Smem,
                _ => S::Hbm,
            };
            let evidence = match &msg.device {
                Some(d) => format!("`{d}` in the TPU runtime's message"),
                None => "the TPU compiler's or runtime's own wording".into(),
            };
            return Placement::new(Device::Tpu, space, evidence);
        }
        let gpu = |why: &str| Placement::new(Device::Gpu, S::DeviceMemory, why);
        match msg.format {
            OomFormat::GpuBufferAssignment => return gpu(
                "the `BufferAssignment OOM Debugging` block, which only XLA's GPU backend prints",
            ),
            OomFormat::GpuContext => {
                return gpu("`cuDevicePrimaryCtxRetain`, the CUDA driver's call")
            }
            OomFormat::GpuLibrary => {
                let lib = msg.library.map_or("a GPU library", |l| l.name());
                return gpu(&format!("{lib}, a CUDA library"));
            }
            OomFormat::GpuCommandBuffer => return gpu("a CUDA/HIP graph"),
            _ => {}
        }
        if let Some(name) = msg.allocator.as_deref().filter(|a| a.contains("GPU")) {
            return gpu(&format!("the allocator `{name}`"));
        }
        if let Some(code) = msg
            .driver_error
            .as_deref()
            .filter(|e| e.starts_with("CUDA") || e.starts_with("HIP"))
        {
            return gpu(&format!("`{code}` from the GPU driver"));
        }
        if let Some(d) = msg.device.as_deref() {
            if d.contains("GPU") {
                return gpu(&format!("`{d}`"));
            }
            if d.contains("TPU") {
                return Placement::new(Device::Tpu, S::Hbm, format!("`{d}`"));
            }
        }
        if msg.format == OomFormat::GpuAllocation {
            // `Out of memory while trying to allocate` is the wording of the
            // allocators behind XLA's GPU client (tf_allocator_adapter.cc).
            return gpu(
                "`Out of memory while trying to allocate`, the wording of XLA's GPU allocator",
            );
        }
        match ctx.device_near(msg.line) {
            Some((Marker::Tpu, w)) => Placement::new(Device::Tpu, S::Hbm, format!("`{w}` in the log")),
            Some((Marker::Gpu, w)) => gpu(&format!("`{w}` in the log")),
            None => Placement::new(
                Device::Unknown,
                S::DeviceMemory,
                match msg.format {
                    OomFormat::DeviceFailedRequest => {
                        "`Failed to allocate request` comes from StreamExecutor's allocator, which GPUs and older TPU \
                         runtimes both used, and nothing else in the text names the device"
                    }
                    _ => "nothing in the text names the device",
                },
            ),
        }
    }
}

/// Host memory, when the message is about it: ordinary RAM for XLA's CPU
/// runtime and TensorFlow's CPU allocator (both name the allocator `cpu`),
/// pinned memory for everything a GPU runtime allocates on the host.
fn host(msg: &OomMessage) -> Option<Placement> {
    use MemorySpace as S;
    let allocator = msg.allocator.as_deref();
    if allocator == Some("cpu") {
        return Some(Placement::new(
            Device::Host,
            S::HostRam,
            "the CPU allocator",
        ));
    }
    if let Some(a) = allocator.filter(|a| a.contains("host")) {
        return Some(Placement::new(
            Device::Host,
            S::PinnedHost,
            format!("the allocator `{a}`, which pins host memory for a GPU"),
        ));
    }
    if !msg.host {
        return None;
    }
    let evidence = match msg.format {
        OomFormat::HostAllocation => {
            "`Out of host memory`: the GPU client's host memory space, pinned"
        }
        _ => "`on host` / `pinned host memory`: page-locked host memory the GPU driver allocates",
    };
    Some(Placement::new(Device::Host, S::PinnedHost, evidence))
}
