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

use super::{Interface, TpuVersion};
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
    /// JAX's `device_kind` of its devices (`jax.devices()[0].device_kind` on
    /// the chip, and libtpu's deviceless topologies): `TPU v5 lite`.
    pub device_kinds: &'static [&'static str],
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

/// One row of [`TPUS`].
struct TpuRow {
    generation: TpuVersion,
    device: &'static str,
    hbm_gib: u64,
    /// What libtpu lets a program use, in bytes (95.74GiB is written as the
    /// package has always rounded it: down).
    usable_bytes: u64,
    default_topology: &'static str,
    device_kinds: &'static [&'static str],
}

const TPUS: [TpuRow; 4] = [
    TpuRow {
        generation: TpuVersion::V5e,
        device: "v5e chip",
        hbm_gib: 16,
        usable_bytes: 16_911_433_728,
        default_topology: "2x2",
        device_kinds: &["TPU v5 lite", "TPU v5e"],
    },
    TpuRow {
        generation: TpuVersion::V6e,
        device: "v6e chip",
        hbm_gib: 32,
        usable_bytes: 33_554_432_000,
        default_topology: "2x2",
        device_kinds: &["TPU v6 lite", "TPU v6e"],
    },
    TpuRow {
        generation: TpuVersion::V5p,
        device: "v5p chip",
        hbm_gib: 96,
        usable_bytes: 102_800_042_229,
        default_topology: "2x2x1",
        device_kinds: &["TPU v5", "TPU v5p"],
    },
    TpuRow {
        generation: TpuVersion::V4,
        device: "v4 TensorCore",
        hbm_gib: 16,
        usable_bytes: 16_374_562_816,
        default_topology: "2x2x1",
        device_kinds: &["TPU v4"],
    },
];

/// One row of [`GPUS`].
struct GpuRow {
    name: &'static str,
    /// Its file in `python/hlomem/targets/` (`targets/README.md` says where
    /// each came from).
    config: &'static str,
    device: &'static str,
    /// The file itself, built in: the binary knows each one's memory
    /// without finding the package's folder.
    text: &'static str,
}

macro_rules! gpus {
    ($(($name:literal, $config:literal, $device:literal)),* $(,)?) => {
        [$(GpuRow {
            name: $name,
            config: $config,
            device: $device,
            text: include_str!(concat!("../../python/hlomem/targets/", $config)),
        }),*]
    };
}

/// XLA's GPU target configs the package ships: name, file, the device in words.
const GPUS: [GpuRow; 11] = gpus![
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
/// Partitions x hosts x GPUs per host, when a GPU target does not say.
const GPU_DEFAULT_TOPOLOGY: &str = "1x1x4";

/// Every target, TPUs first.
pub fn targets() -> Targets {
    Targets {
        tpu: TPUS
            .iter()
            .map(|row| TpuTarget {
                name: format!("tpu-{}:{}", row.generation.as_str(), row.default_topology),
                generation: row.generation,
                device: row.device,
                memory_bytes: row.hbm_gib * GIB,
                usable_bytes: row.usable_bytes,
                usable_note: Usable::Libtpu.note(row.usable_bytes),
                default_topology: row.default_topology,
                device_kinds: row.device_kinds,
            })
            .collect(),
        gpu: GPUS
            .iter()
            .map(|row| GpuTarget {
                name: row.name,
                config: row.config,
                device: row.device,
            })
            .collect(),
        gpu_default_fraction: GPU_DEFAULT_FRACTION,
        gpu_default_topology: GPU_DEFAULT_TOPOLOGY,
    }
}

/// Which compiler a target is for, as JAX names its platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Tpu,
    Cuda,
}

/// Who keeps a program from using all of a device's memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Usable {
    /// libtpu, which refuses a larger program while compiling ("exceeds
    /// available HBM").
    Libtpu,
    /// JAX's GPU allocator, which takes this share of the memory
    /// (`XLA_PYTHON_CLIENT_MEM_FRACTION`).
    JaxAllocator { fraction: f64 },
}

impl Usable {
    /// Why the usable bytes are fewer than the device's, and how many: the
    /// second figure of a verdict's basis.
    pub fn note(self, usable_bytes: u64) -> String {
        match self {
            Usable::Libtpu => format!(
                "libtpu lets a program use {} of it",
                two_decimals(usable_bytes.into(), true)
            ),
            Usable::JaxAllocator { fraction } => format!(
                "JAX's allocator takes XLA_PYTHON_CLIENT_MEM_FRACTION={} of it",
                general(fraction)
            ),
        }
    }
}

/// A fraction as Python's `{:g}` writes it (six significant digits, no
/// trailing zeros): `0.75`, `0.9`, `1`, the way JAX's users write them.
fn general(x: f64) -> String {
    let rounded: f64 = format!("{x:.5e}").parse().unwrap_or(x);
    format!("{rounded}")
}

/// One device of a target, resolved: what `compile_for` compiles for and
/// what a verdict decides against.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Device {
    /// As given, topology included: `tpu-v5e:2x2`, `h100`, `l40s`.
    pub name: String,
    pub platform: Platform,
    /// One device in words: `v5e chip`, `H100`.
    pub device: String,
    /// One device's memory (HBM), in bytes.
    pub memory_bytes: u64,
    /// What a program may use of it, in bytes.
    pub usable_bytes: u64,
    pub usable: Usable,
    /// [`Usable::note`].
    pub usable_note: String,
    /// What the compiler is asked for: `v5e:2x2` (generation:topology) on
    /// TPU, partitions x hosts x GPUs per host on GPU (`1x1x4`).
    pub topology: String,
    /// GPU: the shipped config's file in `python/hlomem/targets/` when the
    /// target is one of the shipped GPU configs (`GPUS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shipped_config: Option<&'static str>,
    /// GPU: the config file read, when it was a path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_path: Option<String>,
}

impl Device {
    /// The TPU chip (which sizes tuple tables), read from the topology.
    pub fn tpu_generation(&self) -> Option<TpuVersion> {
        match self.platform {
            Platform::Tpu => TpuVersion::parse(self.topology.split(':').next()?),
            Platform::Cuda => None,
        }
    }
}

/// A target as written: `tpu-v5e:2x2`, `h100:1x1x8`, `l40s.txtpb:1x1x2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    Tpu {
        generation: TpuVersion,
        topology: Option<String>,
    },
    ShippedGpu {
        name: &'static str,
        topology: Option<String>,
    },
    /// A GPU target config of one's own (`GpuTargetConfigProto` text).
    ConfigFile {
        path: String,
        topology: Option<String>,
    },
}

/// What a GPU config's reader may override, and the allocator's share.
#[derive(Debug, Clone, Default)]
pub struct GpuOptions<'a> {
    /// Names the target in messages (default: the file's stem).
    pub name: Option<&'a str>,
    /// The device in words (default: the config's `device_description_str`).
    pub device: Option<&'a str>,
    /// One device's memory (default: the config's `device_memory_size`).
    pub memory_bytes: Option<u64>,
    /// Partitions x hosts x GPUs per host.
    pub topology: Option<&'a str>,
    /// JAX's allocator's share ([`memory_fraction`]).
    pub fraction: Option<f64>,
}

const CONFIG_SUFFIXES: [&str; 4] = [".txtpb", ".pbtxt", ".textproto", ".txt"];

/// Every name [`parse_spec`] knows, as `compile_for` takes them.
pub fn target_names() -> Vec<String> {
    let listed = targets();
    listed
        .tpu
        .into_iter()
        .map(|t| t.name)
        .chain(listed.gpu.iter().map(|g| g.name.to_string()))
        .collect()
}

/// `PARTITIONSxHOSTSxGPUS`: three numbers joined by `x`.
fn is_gpu_topology(text: &str) -> bool {
    let parts: Vec<&str> = text.split('x').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Reads a target as written. `is_file` says whether a text names a file
/// (the caller's look at the file system): a name that is neither a known
/// target nor looks like a config's path must be one.
pub fn parse_spec(text: &str, is_file: impl Fn(&str) -> bool) -> Result<TargetSpec, String> {
    let key = text.trim().to_lowercase();
    let (base, topology) = key.split_once(':').unwrap_or((key.as_str(), ""));
    let topology = (!topology.is_empty()).then(|| topology.to_string());
    if let Some(row) = base
        .strip_prefix("tpu-")
        .and_then(|g| TPUS.iter().find(|row| row.generation.as_str() == g))
    {
        return Ok(TargetSpec::Tpu {
            generation: row.generation,
            topology,
        });
    }
    if let Some(row) = GPUS.iter().find(|row| row.name == base) {
        return Ok(TargetSpec::ShippedGpu {
            name: row.name,
            topology,
        });
    }
    let (path, topology) = match text.rsplit_once(':') {
        Some((path, topology)) if !path.is_empty() && is_gpu_topology(topology) => {
            (path, Some(topology.to_string()))
        }
        _ => (text, None),
    };
    if CONFIG_SUFFIXES.iter().any(|s| path.ends_with(s))
        || path.contains(std::path::MAIN_SEPARATOR)
        || is_file(path)
    {
        return Ok(TargetSpec::ConfigFile {
            path: path.to_string(),
            topology,
        });
    }
    Err(format!(
        "unknown target '{text}'; hlomem knows {}, or give the path of a GPU target config (.txtpb)",
        target_names().join(", ")
    ))
}

/// The share of a GPU's memory JAX's allocator takes: `raw` (as
/// `XLA_PYTHON_CLIENT_MEM_FRACTION` or `--memory-fraction` gives it, named
/// `setting` in errors), else JAX's default.
pub fn memory_fraction(setting: &str, raw: Option<&str>) -> Result<f64, String> {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else {
        return Ok(GPU_DEFAULT_FRACTION);
    };
    let fraction: f64 = raw
        .trim()
        .parse()
        .map_err(|_| format!("{setting}='{raw}' is not a number"))?;
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(format!("{setting}='{raw}' is not in (0, 1]"));
    }
    Ok(fraction)
}

/// The TPU target of `generation` on `topology` (its default when `None`).
pub fn tpu_device(generation: TpuVersion, topology: Option<&str>) -> Option<Device> {
    let row = TPUS.iter().find(|row| row.generation == generation)?;
    let topology = topology.unwrap_or(row.default_topology);
    let generation = generation.as_str();
    Some(Device {
        name: format!("tpu-{generation}:{topology}"),
        platform: Platform::Tpu,
        device: row.device.to_string(),
        memory_bytes: row.hbm_gib * GIB,
        usable_bytes: row.usable_bytes,
        usable: Usable::Libtpu,
        usable_note: Usable::Libtpu.note(row.usable_bytes),
        topology: format!("{generation}:{topology}"),
        shipped_config: None,
        config_path: None,
    })
}

/// A shipped GPU target by name, with `options`.
pub fn shipped_gpu_device(name: &str, options: &GpuOptions) -> Result<Device, String> {
    let row = GPUS
        .iter()
        .find(|row| row.name == name)
        .ok_or_else(|| format!("no shipped GPU target '{name}'"))?;
    let named = match options.topology {
        Some(topology) => format!("{name}:{topology}"),
        None => name.to_string(),
    };
    let options = GpuOptions {
        name: Some(options.name.unwrap_or(&named)),
        device: Some(options.device.unwrap_or(row.device)),
        ..options.clone()
    };
    let mut device = gpu_device(row.text, row.config, name, &options, Interface::Cli)?;
    device.shipped_config = Some(row.config);
    Ok(device)
}

/// A GPU target from the text of a `GpuTargetConfigProto` (`shown`: the
/// file as given, for messages; `stem`: the default name). `interface`
/// words how to give a missing memory.
pub fn gpu_device(
    text: &str,
    shown: &str,
    stem: &str,
    options: &GpuOptions,
    interface: Interface,
) -> Result<Device, String> {
    if !text.contains("gpu_device_info") {
        return Err(format!(
            "'{shown}' is not a GpuTargetConfigProto (no gpu_device_info)"
        ));
    }
    if let Some(topology) = options.topology.filter(|t| !is_gpu_topology(t)) {
        return Err(format!(
            "a GPU topology is PARTITIONSxHOSTSxGPUS, like 1x1x8, not '{topology}'"
        ));
    }
    let memory_bytes = match options.memory_bytes {
        Some(bytes) => bytes,
        None => config_field(text, "device_memory_size", true)
            .and_then(|v| {
                let digits = v.bytes().take_while(u8::is_ascii_digit).count();
                v[..digits].parse().ok()
            })
            .ok_or_else(|| {
                let give = match interface {
                    Interface::Cli => "--memory SIZE",
                    Interface::Python => "memory_gib=",
                };
                format!("'{shown}' has no device_memory_size: give {give} (one device's memory)")
            })?,
    };
    let device = match options.device {
        Some(device) => device.to_string(),
        None => match config_field(text, "device_description_str", false)
            .and_then(|v| v.strip_prefix('"')?.split_once('"'))
        {
            Some((described, _)) => described
                .strip_prefix("NVIDIA ")
                .unwrap_or(described)
                .to_string(),
            None => stem.to_string(),
        },
    };
    let fraction = options.fraction.unwrap_or(GPU_DEFAULT_FRACTION);
    // JAX's allocator multiplies in floating point and truncates.
    let usable_bytes = (memory_bytes as f64 * fraction) as u64;
    let usable = Usable::JaxAllocator { fraction };
    Ok(Device {
        name: options.name.unwrap_or(stem).to_string(),
        platform: Platform::Cuda,
        device,
        memory_bytes,
        usable_bytes,
        usable,
        usable_note: usable.note(usable_bytes),
        topology: options.topology.unwrap_or(GPU_DEFAULT_TOPOLOGY).to_string(),
        shipped_config: None,
        config_path: None,
    })
}

/// What follows `name:` on the first line that starts with it (`nested`:
/// after any indentation, as `device_memory_size` sits in
/// `gpu_device_info { ... }`), leading blanks cut.
fn config_field<'t>(text: &'t str, name: &str, nested: bool) -> Option<&'t str> {
    text.lines().find_map(|line| {
        let line = if nested { line.trim_start() } else { line };
        Some(line.strip_prefix(name)?.strip_prefix(':')?.trim_start())
    })
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
            "libtpu lets a program use 15.75GiB of it"
        );
    }

    #[test]
    fn targets_as_written() {
        let no_file = |_: &str| false;
        assert_eq!(
            parse_spec("TPU-v5e:2x2", no_file),
            Ok(TargetSpec::Tpu {
                generation: TpuVersion::V5e,
                topology: Some("2x2".into())
            })
        );
        assert_eq!(
            parse_spec("h100", no_file),
            Ok(TargetSpec::ShippedGpu {
                name: "h100",
                topology: None
            })
        );
        assert_eq!(
            parse_spec("my/l40s:1x1x2", no_file),
            Ok(TargetSpec::ConfigFile {
                path: "my/l40s".into(),
                topology: Some("1x1x2".into())
            })
        );
        // A file without a config's suffix is one because it exists.
        assert!(matches!(
            parse_spec("l40s", |p| p == "l40s"),
            Ok(TargetSpec::ConfigFile { .. })
        ));
        let unknown = parse_spec("tpu-v9", no_file).unwrap_err();
        assert!(unknown.starts_with("unknown target 'tpu-v9'; hlomem knows tpu-v5e:2x2, "));
        assert!(unknown.ends_with(", or give the path of a GPU target config (.txtpb)"));
    }

    #[test]
    fn a_gpu_config_gives_its_memory_and_device() {
        let text = "gpu_device_info {\n  device_memory_size: 48305799168\n}\n\
                    device_description_str: \"NVIDIA L40S\"\n";
        let options = GpuOptions {
            fraction: Some(0.9),
            ..GpuOptions::default()
        };
        let device = gpu_device(text, "l40s.txtpb", "l40s", &options, Interface::Cli).unwrap();
        assert_eq!(
            (device.name.as_str(), device.device.as_str()),
            ("l40s", "L40S")
        );
        assert_eq!(device.memory_bytes, 48_305_799_168);
        // As JAX's allocator computes it: in floating point, truncated.
        assert_eq!(device.usable_bytes, (48_305_799_168f64 * 0.9) as u64);
        assert_eq!(
            device.usable_note,
            "JAX's allocator takes XLA_PYTHON_CLIENT_MEM_FRACTION=0.9 of it"
        );
        assert_eq!(device.topology, "1x1x4");
        let bad = gpu_device("core_count: 1", "x.txtpb", "x", &options, Interface::Cli);
        assert_eq!(
            bad.unwrap_err(),
            "'x.txtpb' is not a GpuTargetConfigProto (no gpu_device_info)"
        );
        let topology = GpuOptions {
            topology: Some("8"),
            ..GpuOptions::default()
        };
        let bad = gpu_device(text, "l40s.txtpb", "l40s", &topology, Interface::Cli);
        assert!(bad
            .unwrap_err()
            .starts_with("a GPU topology is PARTITIONSxHOSTSxGPUS"));
        // Every shipped config has its memory.
        for name in target_names().iter().filter(|n| !n.starts_with("tpu-")) {
            let device = shipped_gpu_device(name, &GpuOptions::default()).unwrap();
            assert!(device.memory_bytes > 8 * GIB, "{name}");
            assert_eq!(
                device.usable_bytes,
                (device.memory_bytes as f64 * 0.75) as u64
            );
        }
    }

    #[test]
    fn the_allocator_fraction_as_jax_takes_it() {
        let env = "XLA_PYTHON_CLIENT_MEM_FRACTION";
        assert_eq!(memory_fraction(env, None), Ok(0.75));
        assert_eq!(memory_fraction(env, Some("")), Ok(0.75));
        assert_eq!(memory_fraction(env, Some("0.9")), Ok(0.9));
        assert_eq!(memory_fraction(env, Some("1")), Ok(1.0));
        for bad in ["0", "1.5", "-0.1", "NaN"] {
            assert_eq!(
                memory_fraction(env, Some(bad)),
                Err(format!("{env}='{bad}' is not in (0, 1]"))
            );
        }
        assert_eq!(
            memory_fraction(env, Some("most")),
            Err(format!("{env}='most' is not a number"))
        );
        assert_eq!(general(0.75), "0.75");
        assert_eq!(general(1.0), "1");
        assert_eq!(general(0.123456789), "0.123457");
    }
}
