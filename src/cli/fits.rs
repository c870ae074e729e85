//! `hlomem fits` and `hlomem targets [TARGET]`: a target resolved (the
//! table, a shipped GPU config or one's own, read here), and whether a
//! program of the figures given fits on one of its devices, or within a
//! budget given for one device.

use std::path::{Path, PathBuf};

use hlomem::chip::devices::{self, Device, GpuOptions, Platform, TargetSpec};
use hlomem::chip::fit::Figures;
use hlomem::chip::{Backend, Interface};
use hlomem::render::{self, FitsFormat, TargetsFormat};
use hlomem::report::fits::{FitsReport, Limit, ModuleFigures, TargetReport, TargetsReport};
use hlomem::units::{parse_bytes, parse_size};

use super::{write_out, EXIT_FAILED_CHECK, EXIT_INPUT_ERROR, EXIT_OK};

/// What a GPU target's config may be overridden with.
#[derive(Debug, clap::Args)]
pub struct GpuArgs {
    /// GPU: the target's name in messages (default: a shipped target's, or the
    /// config file's stem).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// GPU: the device in words (default: the config's `device_description_str`).
    #[arg(long, value_name = "WORDS")]
    device: Option<String>,
    /// GPU: one device's memory (default: the config's `device_memory_size`).
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// GPU: partitions x hosts x GPUs per host (default 1x1x4; also `TARGET:1x1x8`).
    #[arg(long, value_name = "PxHxG")]
    topology: Option<String>,
    /// GPU: the share of memory JAX's allocator takes (default:
    /// XLA_PYTHON_CLIENT_MEM_FRACTION, else 0.75).
    #[arg(long, value_name = "FRACTION")]
    memory_fraction: Option<String>,
}

/// What `fits` is told: the target or the budget, and the program.
pub struct FitsArgs {
    pub target: Option<String>,
    pub budget: Option<String>,
    pub path: Option<PathBuf>,
    pub needs: Option<String>,
    pub xla_needs: Option<String>,
    pub refused: bool,
    pub unfinished: Option<String>,
}

pub fn targets(
    target: Option<&str>,
    gpu: &GpuArgs,
    format: TargetsFormat,
    interface: Interface,
) -> u8 {
    let report = match target {
        None => TargetsReport::All(devices::targets()),
        Some(spec) => match resolve(spec, gpu, interface) {
            Ok(device) => TargetsReport::One {
                target: TargetReport::new(device),
            },
            Err(e) => return fail(&e),
        },
    };
    match write_out(|out| render::render_targets(&report, format, out)) {
        Ok(()) => EXIT_OK,
        Err(code) => code,
    }
}

pub fn fits(gpu: &GpuArgs, args: FitsArgs, format: FitsFormat, interface: Interface) -> u8 {
    let limit = match (&args.target, &args.budget) {
        (Some(target), _) => resolve(target, gpu, interface).map(Limit::target),
        (None, Some(budget)) if gpu.any() => Err(format!(
            "--name, --device, --memory, --topology and --memory-fraction describe a GPU \
             target; --budget {budget} is one device's memory already"
        )),
        (None, Some(budget)) => parse_size(budget)
            .map(|budget_bytes| Limit::Budget { budget_bytes })
            .map_err(|e| format!("--budget: {e}")),
        (None, None) => Err("give --target TARGET or --budget SIZE".to_string()),
    };
    let limit = match limit {
        Ok(limit) => limit,
        Err(e) => return fail(&e),
    };
    let device = match &limit {
        Limit::Target { target } => Some(&target.device),
        Limit::Budget { .. } => None,
    };
    let size = |flag: &str, text: &Option<String>| {
        text.as_deref()
            .map(|t| parse_bytes(t).map_err(|e| format!("{flag}: {e}")))
            .transpose()
    };
    let (needs, xla_needs) = match (
        size("--needs", &args.needs),
        size("--xla-needs", &args.xla_needs),
    ) {
        (Ok(n), Ok(x)) => (n, x),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let module = match &args.path {
        Some(path) => match module_of(path, device) {
            Ok(module) => Some(module),
            Err(e) => return fail(&e),
        },
        None => None,
    };
    let figures = match (&module, needs) {
        (Some(module), refusal) => {
            if refusal.is_some() && !args.refused {
                return fail(
                    "--needs with FILE is the compiler's own figure for a refusal: add --refused, \
                     or leave FILE out to give the figure alone",
                );
            }
            Figures {
                // A refusal's figure and the refused module's are both lower bounds.
                needed_bytes: module.device_bytes.max(refusal.unwrap_or(0)),
                xla_bytes: module.xla.as_ref().and_then(|x| x.device_bytes()),
                at_least: args.refused,
            }
        }
        (None, Some(needed_bytes)) => Figures {
            needed_bytes,
            xla_bytes: xla_needs,
            at_least: args.refused,
        },
        (None, None) => return fail("give FILE or --needs SIZE"),
    };
    let mut report = FitsReport::new(limit, figures, args.unfinished);
    report.module = module;
    let code = if report.fit.fits {
        EXIT_OK
    } else {
        EXIT_FAILED_CHECK
    };
    match write_out(|out| render::render_fits(&report, format, out)) {
        Ok(()) => code,
        Err(code) => code,
    }
}

/// The figures of the module in `path` (a file, or a folder of one module),
/// analyzed with `device`'s chip, which must be the module's backend; with
/// no device (a budget), with the module's own backend and its folder's chip.
fn module_of(path: &Path, device: Option<&Device>) -> Result<ModuleFigures, String> {
    let files = hlomem::pipeline::collect_inputs(&[path.to_path_buf()]);
    let file = match files.as_slice() {
        [file] => file,
        [] => return Err(format!("no HLO module in {}", path.display())),
        _ => {
            return Err(format!(
                "{} holds {} modules: give one file (its *after_optimizations.txt)",
                path.display(),
                files.len()
            ))
        }
    };
    let chip = device.and_then(Device::tpu_generation);
    let module = hlomem::pipeline::module_figures(file, chip).map_err(|e| e.to_string())?;
    let Some(device) = device else {
        return Ok(module);
    };
    let expected = match device.platform {
        Platform::Tpu => Backend::Tpu,
        Platform::Cuda => Backend::Gpu,
    };
    if module.backend != expected {
        return Err(format!(
            "{} was compiled for {}, not for {}'s {expected}: its memory there is another program's",
            file.display(),
            module.backend,
            device.name
        ));
    }
    Ok(module)
}

fn fail(error: &str) -> u8 {
    eprintln!("error: {error}");
    EXIT_INPUT_ERROR
}

/// The target `spec` names, with `gpu`'s overrides; a GPU config of one's
/// own is read here.
fn resolve(spec: &str, gpu: &GpuArgs, interface: Interface) -> Result<Device, String> {
    match devices::parse_spec(spec, |path| Path::new(path).is_file())? {
        TargetSpec::Tpu {
            generation,
            topology,
        } => {
            if gpu.any() {
                return Err(format!(
                    "--name, --device, --memory, --topology and --memory-fraction describe a GPU; \
                     {spec}'s figures are hlomem's table's (a TPU's topology follows its name: \
                     tpu-v5e:2x2)"
                ));
            }
            devices::tpu_device(generation, topology.as_deref())
                .ok_or_else(|| format!("no TPU target {spec}"))
        }
        TargetSpec::ShippedGpu { name, topology } => {
            let (memory_bytes, fraction) = gpu_figures(gpu)?;
            devices::shipped_gpu_device(name, &gpu.options(memory_bytes, fraction, &topology))
        }
        TargetSpec::ConfigFile { path, topology } => {
            let (memory_bytes, fraction) = gpu_figures(gpu)?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read the GPU target config '{path}': {e}"))?;
            let stem = Path::new(&path)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.clone());
            let options = gpu.options(memory_bytes, fraction, &topology);
            let mut device = devices::gpu_device(&text, &path, &stem, &options, interface)?;
            device.config_path = Some(
                std::fs::canonicalize(&path)
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or(path),
            );
            Ok(device)
        }
    }
}

/// A GPU's memory as given, and the share JAX's allocator takes (read only
/// for a GPU, as JAX reads it).
fn gpu_figures(gpu: &GpuArgs) -> Result<(Option<u64>, f64), String> {
    let fraction = match &gpu.memory_fraction {
        Some(raw) => devices::memory_fraction("--memory-fraction", Some(raw))?,
        None => devices::memory_fraction(
            "XLA_PYTHON_CLIENT_MEM_FRACTION",
            std::env::var("XLA_PYTHON_CLIENT_MEM_FRACTION")
                .ok()
                .as_deref(),
        )?,
    };
    let memory_bytes = gpu
        .memory
        .as_deref()
        .map(|m| parse_size(m).map_err(|e| format!("--memory: {e}")))
        .transpose()?;
    Ok((memory_bytes, fraction))
}

impl GpuArgs {
    /// Whether any GPU override was given.
    fn any(&self) -> bool {
        self.name.is_some()
            || self.device.is_some()
            || self.memory.is_some()
            || self.topology.is_some()
            || self.memory_fraction.is_some()
    }

    fn options<'a>(
        &'a self,
        memory_bytes: Option<u64>,
        fraction: f64,
        topology: &'a Option<String>,
    ) -> GpuOptions<'a> {
        GpuOptions {
            name: self.name.as_deref(),
            device: self.device.as_deref(),
            memory_bytes,
            topology: self.topology.as_deref().or(topology.as_deref()),
            fraction: Some(fraction),
        }
    }
}
