//! The pipeline: inputs → text → IR → target → memory model → findings →
//! report, for files and dump folders. It owns every file hlomem reads (the
//! modules, XLA's reports beside them, `target_arguments.txt`); the stages it
//! runs do no I/O.

pub mod host;
pub mod inputs;
mod read;

pub use read::{decode, xla_reports};

use rayon::prelude::*;

use crate::error::Error;
use crate::hlo::{self, LazyModule, Module};
use crate::report::notes::{Note, NoteReport};
use crate::report::{self, Report};
use crate::{analysis, chip, findings, source, usage};

use std::path::{Path, PathBuf};

/// Reads and parses one HLO text file, every line (the analysis itself
/// parses fusion bodies when it reads them: [`hlo::parse_module`]).
pub fn load_module(path: &Path) -> Result<Module, Error> {
    hlo::parse_module_complete(read::read_source(path)?)
}

/// Parses HLO text already in memory, every line; `path` is used in
/// messages only.
pub fn parse_text(path: impl Into<PathBuf>, text: impl Into<String>) -> Result<Module, Error> {
    hlo::parse_module_complete(source::SourceFile::from_text(path, text))
}

/// Parses HLO text as the analysis does: fusion bodies are parsed when an
/// analysis reads them, through [`LazyModule::read`], which fails if a body
/// read was broken.
pub fn parse_text_on_demand(
    path: impl Into<PathBuf>,
    text: impl Into<String>,
) -> Result<LazyModule, Error> {
    hlo::parse_module(source::SourceFile::from_text(path, text))
}

/// The parser the analysis uses: fusion bodies on demand, or all at load.
fn parse(file: source::SourceFile, strict: bool) -> Result<LazyModule, Error> {
    if strict {
        hlo::parse_module_complete(file).map(LazyModule::from)
    } else {
        hlo::parse_module(file)
    }
}

/// What `analyze_paths` does besides the accounting.
#[derive(Debug, Clone, Copy, Default)]
pub struct AnalyzeOptions {
    /// Compare with XLA's own reports beside each HLO file.
    pub verify: bool,
    /// Apply this backend's rules instead of the one the module text shows.
    pub backend: Option<chip::Backend>,
    /// The TPU chip, when the dump does not name it (`target_arguments.txt`).
    pub tpu_version: Option<chip::TpuVersion>,
    /// Whose rules a TPU module was compiled under, when a user named its
    /// libtpu ([`chip::libtpu_rules`]: `Some(true)` is 0.0.52's); `None`
    /// leaves it to the text.
    pub libtpu: Option<bool>,
    /// Parse every line at load ([`hlo::parse_module_complete`]), not
    /// fusion bodies when the analysis reads them.
    pub strict: bool,
    /// Whose settings the notes name (`--tpu`, or the Python package's terms).
    pub interface: chip::Interface,
}

/// The HLO files to analyze: files as given, and for a folder one file per
/// module (see [`inputs`]); folders without modules and files that are not
/// regular files (FIFOs) are left out.
pub fn collect_inputs(paths: &[PathBuf]) -> Vec<PathBuf> {
    inputs::collect(paths)
        .into_iter()
        .filter(|i| i.unreadable.is_none())
        .map(|i| i.path)
        .collect()
}

/// Analyzes files and folders in parallel; the report keeps a stable order
/// (inputs sorted per folder), with every file that failed listed under `errors`.
pub fn analyze_paths(paths: &[PathBuf], options: AnalyzeOptions) -> Report {
    analyze_inputs(&inputs::collect(paths), options, &|_| {})
}

/// One module's report (with the error of an XLA report that `--verify` could
/// not read), or the error that stopped it.
type ModuleResult = Result<(report::ModuleReport, Option<(PathBuf, Error)>), (PathBuf, Error)>;

/// [`analyze_paths`] on inputs already collected; `done` is called as each
/// finishes (from any thread), for a progress bar.
pub fn analyze_inputs(
    inputs: &[inputs::Input],
    options: AnalyzeOptions,
    done: &(dyn Fn(&Path) + Sync),
) -> Report {
    // Largest first, one module per task: a big module started last would leave
    // the other cores idle while it finishes.
    let mut order: Vec<(u64, usize)> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| (input_size(input), i))
        .collect();
    order.sort_by_key(|&(size, i)| (std::cmp::Reverse(size), i));
    let mut results: Vec<(usize, ModuleResult)> = order
        .par_iter()
        .with_max_len(1)
        .map(|&(_, i)| {
            let input = &inputs[i];
            let result = analyze_one(input, options).map_err(|e| (input.path.clone(), e));
            done(&input.path);
            (i, result)
        })
        .collect();
    results.sort_by_key(|(i, _)| *i);
    let mut report = Report {
        modules: Vec::new(),
        errors: Vec::new(),
    };
    for (_, result) in results {
        match result {
            Ok((module, verify_error)) => {
                report.modules.push(module);
                if let Some((path, error)) = verify_error {
                    report.errors.push(report::InputError::new(&path, error));
                }
            }
            Err((path, error)) => report.errors.push(report::InputError::new(&path, error)),
        }
    }
    report
}

/// The size of an input's text, for ordering the work (0 if unknown).
fn input_size(input: &inputs::Input) -> u64 {
    match &input.bytes {
        Some(bytes) => bytes.len() as u64,
        None => std::fs::metadata(&input.path).map_or(0, |m| m.len()),
    }
}

/// The rules `module` (read from `path`) was compiled under: the backend from
/// its text unless `backend` forces one; on TPU the chip from `tpu_version`,
/// else from the dump folder's `*.target_arguments.txt` (the HLO text does not
/// name it).
pub fn target_of(
    module: &Module,
    path: &Path,
    backend: Option<chip::Backend>,
    tpu_version: Option<chip::TpuVersion>,
) -> chip::Target {
    let target = chip::Target::resolve(module, backend);
    if target.backend != chip::Backend::Tpu {
        return target;
    }
    let named = tpu_version
        .map(|v| (v, chip::ChipSource::User))
        .or_else(|| {
            let arguments = inputs::sibling(path, "target_arguments.txt")
                .or_else(|| inputs::in_same_folder(path, ".target_arguments.txt"))?;
            let text = std::fs::read_to_string(arguments).ok()?;
            Some((
                chip::TpuVersion::from_target_arguments(&text)?,
                chip::ChipSource::Dump,
            ))
        });
    let target = target.with_tpu_version(named);
    if !target.libtpu_assumed() {
        return target;
    }
    // The dump's flag file lists every flag of the libtpu that compiled it.
    let release = inputs::sibling(path, "flagfile")
        .or_else(|| inputs::in_same_folder(path, ".flagfile"))
        .and_then(|flags| std::fs::read_to_string(flags).ok())
        .map(|flags| chip::newer_libtpu_flags(&flags));
    target.with_libtpu_from_dump(release)
}

/// Reads, parses and checks one HLO file, and computes its memory with the
/// target its text (or `backend`, `tpu_version`) names.
pub fn load_and_model(
    path: &Path,
    backend: Option<chip::Backend>,
    tpu_version: Option<chip::TpuVersion>,
) -> Result<(LazyModule, analysis::MemoryModel), Error> {
    let options = AnalyzeOptions {
        backend,
        tpu_version,
        ..Default::default()
    };
    let (module, target) = parse_path(path, options)?;
    let model = module.read(|module| model_of(module, &target))??;
    Ok((module, model))
}

/// What `hlomem fits FILE` decides on: hlomem's count of the device memory
/// of the module in `path` (per device, as `check` compares it) and XLA's own
/// totals from the buffer-assignment report beside it, when there is one.
pub fn module_figures(
    path: &Path,
    tpu_version: Option<chip::TpuVersion>,
) -> Result<report::fits::ModuleFigures, Error> {
    let (module, model) = load_and_model(path, None, tpu_version)?;
    let name = module.read(|m| m.name.to_string())?;
    let xla = read::xla_reports(path)?.map(|reports| reports.totals(&model.target));
    let device = model.totals.by_space.first();
    Ok(report::fits::ModuleFigures {
        name,
        file: path.display().to_string(),
        backend: model.target.backend,
        device_bytes: model.totals.device_bytes,
        exact: device.is_none_or(|s| s.exact),
        xla,
    })
}

/// A module's memory model, and what its report reads of the module alone
/// ([`usage::ModuleFacts`], read beside the accounting: the longest stages of
/// the accounting keep one core busy and leave the other idle).
struct Analyzed {
    model: analysis::MemoryModel,
    facts: usage::ModuleFacts,
}

/// Reads and parses one HLO file, and finds its target.
fn parse_path(path: &Path, options: AnalyzeOptions) -> Result<(LazyModule, chip::Target), Error> {
    let module = parse(read::read_source(path)?, options.strict)?;
    let target = module.read(|module| {
        target_of(module, path, options.backend, options.tpu_version).with_libtpu(options.libtpu)
    })?;
    Ok((module, target))
}

/// The memory model of a parsed module under `target`, once its sizes are
/// known to fit in 64 bits.
fn model_of(module: &Module, target: &chip::Target) -> Result<analysis::MemoryModel, Error> {
    check_sizes(module, target)?;
    Ok(analysis::analyze(module, target))
}

/// [`model_of`], with the module's facts read beside it.
fn analyzed(module: &Module, target: chip::Target) -> Result<Analyzed, Error> {
    let (model, facts) = rayon::join(
        || model_of(module, &target),
        || usage::ModuleFacts::read(module),
    );
    Ok(Analyzed {
        model: model?,
        facts,
    })
}

/// [`parse_path`] for an input, which may be text read already (standard
/// input): that text has no folder, so the TPU chip comes from `tpu_version`
/// or is assumed.
fn load_input(
    input: &inputs::Input,
    options: AnalyzeOptions,
) -> Result<(LazyModule, chip::Target), Error> {
    let Some(bytes) = &input.bytes else {
        return parse_path(&input.path, options);
    };
    if bytes.len() as u64 > source::MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            path: input.path.clone(),
            bytes: bytes.len() as u64,
        });
    }
    let module = parse(read::decode(&input.path, bytes.to_vec())?, options.strict)?;
    let target = module.read(|module| {
        chip::Target::resolve(module, options.backend)
            .with_tpu_version(options.tpu_version.map(|v| (v, chip::ChipSource::User)))
            .with_libtpu(options.libtpu)
    })?;
    Ok((module, target))
}

/// The report of a module with its memory model: the findings (what-if runs
/// of the accounting among them) run beside the rest of the report.
pub fn report_module(module: &Module, model: &analysis::MemoryModel) -> report::ModuleReport {
    report_with_facts(module, model, usage::ModuleFacts::read(module))
}

/// [`report_module`] with the module's facts read already.
fn report_with_facts(
    module: &Module,
    model: &analysis::MemoryModel,
    facts: usage::ModuleFacts,
) -> report::ModuleReport {
    let usage = usage::peak_usage_with(module, model, facts);
    let (findings, report) = rayon::join(
        || findings::reported(module, model, &usage),
        || report::ModuleReport::build(module, model, &usage),
    );
    report.with_findings(findings)
}

/// The report of a parsed module, with the target its text shows.
pub fn summarize(module: &Module) -> report::ModuleReport {
    let model = analysis::analyze(module, &chip::Target::detect(module));
    report_module(module, &model)
}

/// One module: parsed, analyzed, summarized, and dropped before the next.
fn analyze_one(
    input: &inputs::Input,
    options: AnalyzeOptions,
) -> Result<(report::ModuleReport, Option<(PathBuf, Error)>), Error> {
    if let Some(reason) = &input.unreadable {
        return Err(Error::Usage(reason.clone()));
    }
    let (module, target) = load_input(input, options)?;
    // A fusion body read on demand that did not parse left the analysis an
    // empty body: the read fails, and the numbers are not shown.
    let summary = module.read(|module| summarize_one(module, target, input, options));
    // Freeing a big module's IR takes a tenth of a second: off the critical path.
    rayon::spawn(move || drop(module));
    summary?
}

/// [`analyze_one`] once the module is parsed and its target known.
fn summarize_one(
    module: &Module,
    target: chip::Target,
    input: &inputs::Input,
    options: AnalyzeOptions,
) -> Result<(report::ModuleReport, Option<(PathBuf, Error)>), Error> {
    let Analyzed { model, facts } = analyzed(module, target)?;
    let target = &model.target;
    let mut summary = report_with_facts(module, &model, facts);
    let mut notes = Vec::new();
    if let (Some(chip::ChipSource::Assumed), Some(assumed)) =
        (target.chip_source, target.tpu_version)
    {
        notes.push(Note::TpuChipAssumed { assumed });
    }
    // Detected again only to say when --backend contradicts the text.
    let detected = options.backend.map(|_| chip::Target::detect(module));
    if let Some(detected) = detected.filter(|d| d.backend != target.backend) {
        if let chip::Evidence::Marker(marker) = detected.evidence {
            notes.push(Note::BackendOverridden {
                forced: target.backend,
                detected: detected.backend,
                marker,
            });
        }
    }
    if options.tpu_version.is_some() && target.backend != chip::Backend::Tpu {
        notes.push(Note::TpuChipIgnored {
            backend: target.backend,
        });
    }
    summary.key = input.key.clone();
    if input.unoptimized || !module.header.is_scheduled {
        notes.push(Note::NotOptimized);
    }
    summary.notes = notes
        .into_iter()
        .map(|n| NoteReport::new(n, options.interface))
        .collect();
    // With --verify, a module without readable reports is an input error:
    // "nothing to compare" must not pass as agreement.
    let mut verify_error = None;
    if options.verify {
        summary.verification = Some(match read::xla_reports(&input.path) {
            Ok(Some(xla)) => {
                let mut verification: report::verification::Verification =
                    analysis::verify::verify(module, &model, &xla).into();
                verification.xla_totals = Some(xla.totals(target));
                verification
            }
            Ok(None) => {
                verify_error = Some((
                    input.path.clone(),
                    Error::Usage(format!(
                        "--verify: no XLA report (`-buffer-assignment.txt`, `-live-range.txt`) beside {}",
                        input.path.display()
                    )),
                ));
                report::verification::Verification::unavailable(
                    "no XLA report files beside the HLO file",
                )
            }
            Err(e) => {
                let note = e.to_string();
                verify_error = Some((input.path.clone(), e));
                report::verification::Verification::unavailable(&note)
            }
        });
    }
    rayon::spawn(move || drop(model));
    Ok((summary, verify_error))
}

/// Refuses a module whose sizes do not fit in 64 bits: one shape once the
/// backend pads it, or all buffers together. Every figure the analysis adds up
/// (allocations, the heap with its alignment, peaks) is at most the sum of
/// all values' sizes plus one alignment each, so past this check no sum can
/// overflow and none is shown saturated.
fn check_sizes(module: &Module, target: &chip::Target) -> Result<(), Error> {
    /// More than any backend's alignment of a buffer within its allocation.
    const ALIGNMENT_MARGIN: u64 = 4096;
    let error = |instr: &hlo::Instruction, title: String| {
        Error::at(
            &module.file,
            instr.span.start as usize..instr.span.end as usize,
            title,
            "this instruction",
        )
    };
    let mut sum: u64 = 0;
    for (_, instr) in module.instrs() {
        if !target.sizes_fit(&instr.shape) {
            return Err(error(
                instr,
                format!(
                    "shape `{}` is larger than 2^64 bytes once padded to {}'s tiles",
                    instr.shape, target.backend
                ),
            ));
        }
        let nodes = instr.shape.nodes().len() as u64;
        let with_margin = target
            .total_size(&instr.shape)
            .checked_add(nodes.saturating_mul(ALIGNMENT_MARGIN));
        match with_margin.and_then(|size| sum.checked_add(size)) {
            Some(total) => sum = total,
            None => {
                return Err(error(
                    instr,
                    "the module's buffers add up to more than 2^64 bytes".into(),
                )
                .with_note(
                    "no device has that much memory; hlomem refuses the module rather than show a total \
                     that is not exact",
                ))
            }
        }
    }
    Ok(())
}

/// `explain --dump DIR`: links an out-of-memory message to the module of the
/// dump it is about (the one whose numbers and shapes are nearest). Modules
/// are read on all cores; each worker keeps only its best so far, and ties go
/// to the first module in folder order.
pub fn link_dump(
    msg: &crate::oom::OomMessage,
    dir: &Path,
) -> Result<crate::oom::dump::DumpLinks, Error> {
    let inputs = collect_inputs(&[dir.to_path_buf()]);
    let best = inputs
        .par_iter()
        .map(
            |path| -> Result<(f64, LazyModule, analysis::MemoryModel), Error> {
                let (module, model) = load_and_model(path, None, None)?;
                let d = module.read(|module| crate::oom::dump::distance(msg, module, &model))?;
                Ok((d, module, model))
            },
        )
        .try_reduce_with(|a, b| Ok(if b.0 < a.0 { b } else { a }))
        .transpose()?;
    let (_, module, model) = best.ok_or_else(|| {
        Error::Usage(format!(
            "{} has no after-optimizations HLO file",
            dir.display()
        ))
    })?;
    module.read(|module| crate::oom::dump::links(msg, module, &model))
}
