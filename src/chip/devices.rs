//! The devices hlomem's Python package compiles for without having them
//! (`hlomem.compile_for`), and how much of one device's memory a program may
//! use there: the one table of them, which `hlomem targets --format json`
//! prints for the package to read.
//!
//! - TPU: the chip's HBM, of which libtpu lets a program use a little less
//!   (the "available HBM" of its refusals, "... exceeds available HBM
//!   (15.75G)", G meaning GiB, seen compiling a too-large program for each
//!   topology with libtpu 0.0.42). The deviceless v4 topology has a device
//!   per TensorCore (8 on 2x2x1), each with half the chip's 32 GiB; the
//!   others one per chip.
//! - GPU: one of XLA's target configs (`python/hlomem/targets/*.txtpb`, read
//!   by XLA in Python), whose `device_memory_size` is the device's memory; JAX's
//!   allocator takes `XLA_PYTHON_CLIENT_MEM_FRACTION` of it.

use serde::Serialize;

use super::TpuVersion;
use crate::units::two_decimals;

const GIB: u64 = 1 << 30;

/// One TPU generation as the deviceless compile sees it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TpuTarget {
    /// What `compile_for` takes: `tpu-v5e:2x2` (the default topology).
    pub name: String,
    pub generation: TpuVersion,
    /// One device in words: `v5e chip`, `v4 TensorCore`.
    pub device: &'static str,
    /// One device's HBM, in bytes.
    pub memory_bytes: u64,
    /// What libtpu lets a program use of it, in bytes.
    pub usable_bytes: u64,
    /// Why `usable_bytes` is less, and how much it is, in words.
    pub usable_note: String,
    /// A topology libtpu accepts (`v5e:1x1` is refused).
    pub default_topology: &'static str,
}

/// One of the GPU target configs shipped with the Python package.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GpuTarget {
    /// What `compile_for` takes: `h100`.
    pub name: &'static str,
    /// The config's file in `python/hlomem/targets/`.
    pub config: &'static str,
    /// One device in words: `H100`, `A100 40GB`.
    pub device: &'static str,
}

/// `hlomem targets --format json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Targets {
    pub tpu: Vec<TpuTarget>,
    pub gpu: Vec<GpuTarget>,
    /// The share of a GPU's memory JAX's allocator takes unless
    /// `XLA_PYTHON_CLIENT_MEM_FRACTION` says otherwise.
    pub gpu_default_fraction: f64,
    /// Partitions x hosts x GPUs per host, when a GPU target does not say.
    pub gpu_default_topology: &'static str,
}

/// (generation, one device in words, its HBM in GiB, what libtpu lets a
/// program use of it in bytes, a topology libtpu accepts). 95.74 GiB is
/// written in bytes as the package has always rounded it (down).
const TPUS: [(TpuVersion, &str, u64, u64, &str); 4] = [
    (TpuVersion::V5e, "v5e chip", 16, 16_911_433_728, "2x2"),
    (TpuVersion::V6e, "v6e chip", 32, 33_554_432_000, "2x2"),
    (TpuVersion::V5p, "v5p chip", 96, 102_800_042_229, "2x2x1"),
    (TpuVersion::V4, "v4 TensorCore", 16, 16_374_562_816, "2x2x1"),
];

/// XLA's GPU target configs the package ships (`targets/README.md` says
/// where each came from): name, file, the device in words.
const GPUS: [(&str, &str, &str); 11] = [
    ("v100", "v100.txtpb", "V100 16GB"),
    ("a100-40", "a100_sxm_40.txtpb", "A100 40GB"),
    ("a100-80", "a100_sxm_80.txtpb", "A100 80GB"),
    ("h100", "h100.txtpb", "H100"),
    ("h100-pcie", "h100_pcie.txtpb", "H100 PCIe"),
    ("h200", "h200.txtpb", "H200"),
    ("b200", "b200.txtpb", "B200"),
    ("gb200", "gb200.txtpb", "GB200 GPU"),
    ("b300", "b300.txtpb", "B300"),
    ("gb300", "gb300.txtpb", "GB300 GPU"),
    ("rtx-pro-6000", "rtx6000pro.txtpb", "RTX PRO 6000"),
];

/// JAX's GPU allocator default (`XLA_PYTHON_CLIENT_MEM_FRACTION`).
const GPU_DEFAULT_FRACTION: f64 = 0.75;

/// Every target, TPUs first.
pub fn targets() -> Targets {
    Targets {
        tpu: TPUS
            .iter()
            .map(
                |&(generation, device, hbm_gib, usable_bytes, default_topology)| TpuTarget {
                    name: format!("tpu-{}:{default_topology}", generation.as_str()),
                    generation,
                    device,
                    memory_bytes: hbm_gib * GIB,
                    usable_bytes,
                    usable_note: format!(
                        "libtpu lets a program use {} of it",
                        two_decimals(usable_bytes as i128, true)
                    ),
                    default_topology,
                },
            )
            .collect(),
        gpu: GPUS
            .iter()
            .map(|&(name, config, device)| GpuTarget {
                name,
                config,
                device,
            })
            .collect(),
        gpu_default_fraction: GPU_DEFAULT_FRACTION,
        gpu_default_topology: "1x1x4",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tpu_generation_has_its_memory() {
        let listed = targets();
        for version in [
            TpuVersion::V4,
            TpuVersion::V5e,
            TpuVersion::V5p,
            TpuVersion::V6e,
        ] {
            let t = listed
                .tpu
                .iter()
                .find(|t| t.generation == version)
                .unwrap_or_else(|| panic!("{} has no memory figures", version.as_str()));
            assert!(t.usable_bytes < t.memory_bytes, "{}", t.name);
        }
        assert_eq!(
            listed.tpu[0].usable_note,
            "libtpu lets a program use 15.75 GiB of it"
        );
    }
}
