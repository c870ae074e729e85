//! The report: plain data that renderers print. This is the JSON contract, so
//! field names here are the public interface; add fields, never rename them.

pub mod differences;
pub mod explain;
pub mod fits;
pub mod notes;
pub mod verification;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::hlo::{InstrId, Module, Shape};

/// Everything `hlomem analyze` says about a set of inputs.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Report {
    pub modules: Vec<ModuleReport>,
    /// Inputs that could not be read; the others are still reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<InputError>,
}

impl Report {
    /// Modules largest `total_bytes` first, ties by dump name.
    pub fn largest_first(&self) -> Vec<&ModuleReport> {
        let mut modules: Vec<&ModuleReport> = self.modules.iter().collect();
        modules.sort_by(|a, b| {
            b.memory
                .device_bytes
                .cmp(&a.memory.device_bytes)
                .then(a.key.cmp(&b.key))
        });
        modules
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct InputError {
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    pub message: String,
    /// The error itself, to render with the source line and a caret.
    #[serde(skip)]
    pub error: crate::Error,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ModuleReport {
    pub name: String,
    /// The name people know the module by: TensorFlow's function
    /// (`train_step` for `a_inference_train_step_441__XlaMustCompile_true_...`),
    /// otherwise `name`.
    pub short_name: String,
    /// The front-end that made the module (JAX, TensorFlow, PyTorch/XLA), and
    /// what in its text said so; findings are worded for it.
    pub frontend: crate::frontend::Frontend,
    /// The module's name in its dump folder (`module_0000.jit_fn`).
    pub key: String,
    pub file: String,
    /// `is_scheduled=true`: text order is XLA's schedule (after-optimizations dumps).
    pub scheduled: bool,
    pub computations: usize,
    pub instructions: usize,
    /// SPMD partitions; numbers are per device when this is above 1.
    pub num_partitions: u64,
    pub replica_count: u64,
    pub parameters: Vec<ParameterReport>,
    /// The parameters grouped by the JAX argument they come from (`params`:
    /// 446 arrays), in argument order; empty when the dump names none
    /// (TensorFlow's and PyTorch/XLA's parameters have no argument path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<ArgumentReport>,
    /// The entry's result, one entry per array leaf.
    pub outputs: Vec<OutputReport>,
    /// The sizes of the entry parameters' shapes added up (leaves and tuple
    /// index tables): what the caller passes, not an allocation total (XLA's
    /// figures are under `memory`).
    pub parameter_shape_bytes: u64,
    /// The size of the entry's result shape (leaves and tuple index tables).
    pub result_shape_bytes: u64,
    /// The backend whose rules were applied, and what in the text said so.
    pub target: crate::chip::Target,
    /// XLA's memory figures, computed from the HLO text alone.
    pub memory: crate::analysis::Totals,
    /// The moment the most bytes are live, and the buffers live then.
    pub peak: PeakReport,
    /// Bytes in use over the schedule (downsampled), for charts.
    pub timeline: TimelineReport,
    /// Where figures of this report differ, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<differences::Difference>,
    /// Caveats about the numbers (e.g. an unoptimized module).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<notes::NoteReport>,
    /// What wastes memory, most bytes first (`hlomem explain-code CODE`).
    pub findings: Vec<FindingReport>,
    /// With `--verify`: where hlomem and XLA's own reports disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<verification::Verification>,
    /// Opcodes this version of hlomem does not know, with their counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown_opcodes: BTreeMap<String, usize>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PeakReport {
    /// Position in the flattened schedule.
    pub time: u32,
    /// The instruction scheduled there.
    pub instruction: Option<String>,
    /// Every buffer live then, largest first.
    pub buffers: Vec<PeakBufferReport>,
    /// The same buffers grouped by source line, role and scope.
    #[serde(flatten)]
    pub usage: crate::usage::PeakUsage,
}

impl PeakReport {
    /// How many buffers a list cut after `shown` leaves out, and their bytes
    /// (buffers are sorted largest first, so these are the smallest).
    pub fn hidden_after(&self, shown: usize) -> (usize, u64) {
        let rest = self.buffers.get(shown..).unwrap_or_default();
        let bytes = rest.iter().map(|b| b.bytes).fold(0u64, u64::saturating_add);
        (rest.len(), bytes)
    }
}

/// Bytes in use over the flattened schedule, for charts: one bucket per
/// position, or per run of positions when there are more than
/// [`TIMELINE_BUCKETS`] (each bucket then shows its busiest moment, so the
/// peak survives the downsampling).
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TimelineReport {
    /// Positions in the flattened schedule.
    pub length: u32,
    pub buckets: Vec<TimelineBucket>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TimelineBucket {
    /// First and last schedule position of the bucket.
    pub start: u32,
    pub end: u32,
    /// The busiest moment in the bucket.
    pub time: u32,
    pub parameter: u64,
    pub output: u64,
    pub temp: u64,
    pub constant: u64,
    pub total: u64,
    pub instruction: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

pub const TIMELINE_BUCKETS: usize = 1000;

impl TimelineReport {
    fn build(module: &Module, model: &crate::analysis::MemoryModel) -> TimelineReport {
        let timeline = &model.peak.timeline;
        let n = timeline.len();
        let per = n.div_ceil(TIMELINE_BUCKETS).max(1);
        let mut buckets = Vec::with_capacity(n.div_ceil(per));
        for start in (0..n).step_by(per) {
            let end = (start + per).min(n) - 1;
            let total = |t: usize| timeline[t].iter().copied().fold(0u64, u64::saturating_add);
            let busiest = (start..=end)
                .max_by_key(|&t| (total(t), std::cmp::Reverse(t)))
                .unwrap_or(start);
            let [parameter, output, temp, constant] = timeline[busiest];
            let instr = model.schedule.order[busiest];
            buckets.push(TimelineBucket {
                start: start as u32,
                end: end as u32,
                time: busiest as u32,
                parameter,
                output,
                temp,
                constant,
                total: total(busiest),
                instruction: module.instr_name(instr).to_string(),
                source: module.source_location(instr).map(|l| l.to_string()),
            });
        }
        TimelineReport {
            length: n as u32,
            buckets,
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct PeakBufferReport {
    /// The instruction that defines the buffer.
    pub name: String,
    /// Position in that instruction's tuple result; `[]` for an array.
    pub index: Vec<u64>,
    // Shared with the instruction for an array (a big module's report has
    // thousands of these rows).
    pub shape: std::sync::Arc<Shape>,
    pub bytes: u64,
    pub kind: crate::analysis::BufferKind,
    pub role: crate::usage::Role,
    pub phase: crate::usage::Phase,
    pub op_name: Option<String>,
    pub source: Option<String>,
    /// The user's own line that led to `source` (see `by_source`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ParameterReport {
    pub number: u64,
    pub name: String,
    /// How reports name it: its JAX argument path (`params['w']`), else
    /// `name` (TensorFlow's `XLA_Args` and torch_xla's `xla__device_data`
    /// name no argument).
    pub label: String,
    // Shared with the parameter's instruction.
    pub shape: std::sync::Arc<Shape>,
    pub bytes: u64,
    /// The `op_name` as written: for JAX, the Python argument's path (`a`,
    /// `params['w']`); TensorFlow's `XLA_Args`, torch_xla's `xla__device_data`.
    pub op_name: Option<String>,
    /// `file:line` of the user's code, when the dump says.
    pub source: Option<String>,
}

/// One JAX argument: its arrays (entry parameters) together.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ArgumentReport {
    pub name: String,
    /// Its position among the jitted function's arguments (`donate_argnums`).
    pub argnum: usize,
    pub parameters: usize,
    pub bytes: u64,
    /// How many of its arrays are donated (aliased to an output or listed as donors).
    pub donated: usize,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct OutputReport {
    /// Position in the result tuple; `[]` when the result is a single array.
    pub index: Vec<u64>,
    pub shape: Shape,
    pub bytes: u64,
    /// The parameter whose buffer this output lives in (`input_output_alias`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aliases_parameter: Option<AliasedParameter>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct AliasedParameter {
    pub number: u64,
    pub index: Vec<u64>,
}

/// A finding as reports show it: the rule, the bytes at stake, where, the
/// words (message, fix, details) and the typed evidence they are made from.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct FindingReport {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: crate::findings::Severity,
    /// Bytes at stake: what the fix saves where that is known beforehand
    /// (HM001-HM004, HM006), else what the finding is about (HM005: the
    /// temporaries, which only a rematerialization policy or a smaller batch
    /// can reduce, by an amount the module does not say). Renderers label
    /// it "at stake", not "saves".
    pub bytes: u64,
    pub message: String,
    pub fix: String,
    /// Supporting facts, one line each, for people.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<crate::findings::ParameterRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_index: Option<Vec<u64>>,
    /// The instruction the finding is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// `file:line` of the instruction, when the dump says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The same facts as data, per rule (`"rule": "not-donated"`, ...).
    pub evidence: crate::findings::Evidence,
}

impl From<crate::findings::Finding> for FindingReport {
    fn from(f: crate::findings::Finding) -> FindingReport {
        FindingReport {
            code: f.code,
            name: f.name,
            severity: f.severity,
            bytes: f.bytes,
            message: f.message(),
            fix: f.fix(),
            details: f.evidence.details(),
            parameter: f.parameter,
            output_index: f.output_index,
            instruction: f.instruction,
            source: f.source,
            evidence: f.evidence,
        }
    }
}

impl ModuleReport {
    /// Adds the module's findings, most bytes at stake first (the pipeline
    /// computes them beside the rest of the report).
    pub fn with_findings(mut self, findings: Vec<crate::findings::Finding>) -> ModuleReport {
        self.findings = findings.into_iter().map(FindingReport::from).collect();
        self
    }

    /// The report of a module whose memory model is computed, without its
    /// findings ([`ModuleReport::with_findings`]).
    pub fn build(
        module: &Module,
        model: &crate::analysis::MemoryModel,
        usage: &crate::usage::PeakUsage,
    ) -> ModuleReport {
        let entry = module.entry();
        let parameters: Vec<ParameterReport> = entry
            .parameters
            .iter()
            .zip(&usage.parameters)
            .map(|(&id, origin)| parameter_report(module, &model.target, id, origin))
            .collect();
        let result = &module.instr(entry.root).shape;
        // The first alias entry of each output (a model may have thousands of each).
        let mut alias_of: std::collections::HashMap<&[u64], &crate::hlo::IoAlias> =
            std::collections::HashMap::new();
        for a in module.header.input_output_alias.iter().rev() {
            alias_of.insert(&a.output_index, a);
        }
        let outputs = result
            .leaves()
            .into_iter()
            .map(|(index, shape)| {
                let aliases_parameter = alias_of.get(index.as_slice()).map(|a| AliasedParameter {
                    number: a.parameter,
                    index: a.parameter_index.clone(),
                });
                OutputReport {
                    bytes: model.target.buffer_size(shape),
                    shape: shape.clone(),
                    index,
                    aliases_parameter,
                }
            })
            .collect();
        let mut unknown_opcodes = BTreeMap::new();
        for (_, instr) in module.instrs() {
            if !instr.opcode.is_known() {
                *unknown_opcodes
                    .entry(instr.opcode.as_str().to_string())
                    .or_default() += 1;
            }
        }
        ModuleReport {
            name: module.name.clone(),
            short_name: usage.frontend.name.short_name(&module.name),
            frontend: usage.frontend.clone(),
            key: module
                .path()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            notes: Vec::new(),
            file: module.path().display().to_string(),
            scheduled: module.header.is_scheduled,
            computations: module.comp_count(),
            instructions: module.instruction_count(),
            num_partitions: module.header.num_partitions,
            replica_count: module.header.replica_count,
            parameter_shape_bytes: parameters
                .iter()
                .fold(0u64, |acc, p| acc.saturating_add(p.bytes)),
            result_shape_bytes: model.target.total_size(result),
            arguments: argument_reports(module, &parameters, &usage.parameters),
            differences: differences(module, model),
            parameters,
            outputs,
            target: model.target.clone(),
            memory: model.totals.clone(),
            timeline: TimelineReport::build(module, model),
            peak: peak_report(module, model, usage),
            findings: Vec::new(),
            verification: None,
            unknown_opcodes,
        }
    }
}

fn argument_reports(
    module: &Module,
    parameters: &[ParameterReport],
    origins: &[crate::usage::ParameterOrigin],
) -> Vec<ArgumentReport> {
    let donated: std::collections::HashSet<u64> = module
        .header
        .input_output_alias
        .iter()
        .map(|a| a.parameter)
        .chain(module.header.buffer_donors.iter().map(|d| d.parameter))
        .collect();
    let mut out: Vec<ArgumentReport> = Vec::new();
    for (p, origin) in parameters.iter().zip(origins) {
        let Some((name, argnum)) = origin.argument.clone() else {
            continue;
        };
        let i = match out.iter().position(|a| a.argnum == argnum) {
            Some(i) => i,
            None => {
                out.push(ArgumentReport {
                    name,
                    argnum,
                    parameters: 0,
                    bytes: 0,
                    donated: 0,
                });
                out.len() - 1
            }
        };
        let a = &mut out[i];
        a.parameters += 1;
        a.bytes = a.bytes.saturating_add(p.bytes);
        a.donated += usize::from(donated.contains(&p.number));
    }
    out.sort_by_key(|a| a.argnum);
    out
}

/// The figures a reader compares that differ, with the parts of each gap.
fn differences(
    module: &Module,
    model: &crate::analysis::MemoryModel,
) -> Vec<differences::Difference> {
    let mut out = Vec::new();
    let t = &model.totals;
    if t.device_bytes > t.live_peak_bytes {
        use crate::analysis::assign::AllocationKind;
        // Reserved and live bytes per kind of allocation, device memory only.
        let bucket = |kind: &AllocationKind| match kind {
            AllocationKind::Temp => 0,
            AllocationKind::Output => 1,
            AllocationKind::Parameter { .. } => 2,
            AllocationKind::Constant | AllocationKind::ThreadLocal => 3,
        };
        let mut idle = [0u64; 4];
        let allocations = &model.assignment.allocations;
        for a in allocations.iter().filter(|a| a.color == 0) {
            idle[bucket(&a.kind)] = idle[bucket(&a.kind)].saturating_add(a.size);
        }
        for b in &model.peak.buffers {
            if let Some(a) = model.assignment.allocation_of[b.buffer.index()] {
                let k = bucket(&allocations[a].kind);
                idle[k] = idle[k].saturating_sub(b.bytes);
            }
        }
        let gap = t.device_bytes - t.live_peak_bytes;
        let known = idle.iter().fold(0u64, |x, y| x.saturating_add(*y));
        // The parts are only stated when they account for the gap exactly.
        let [temp, outputs, arguments, other] = if known == gap { idle } else { [0; 4] };
        out.push(differences::Difference::TotalAboveLivePeak {
            exact: t.by_space.iter().all(|s| s.color != 0 || s.exact) && t.live_peak_exact(),
            total_bytes: t.device_bytes,
            live_peak_bytes: t.live_peak_bytes,
            temp_not_in_use: temp,
            outputs_not_in_use: outputs,
            arguments_not_in_use: arguments,
            other_not_in_use: other,
        });
    }
    let instructions = module.instruction_count();
    let steps = model.peak.timeline.len() as u32;
    if steps as usize != instructions {
        out.push(differences::Difference::ScheduleIsNotInstructionCount {
            steps,
            instructions,
        });
    }
    out
}

fn peak_report(
    module: &Module,
    model: &crate::analysis::MemoryModel,
    usage: &crate::usage::PeakUsage,
) -> PeakReport {
    let buffers = model
        .peak
        .buffers
        .iter()
        .zip(&usage.buffers)
        .map(|(b, u)| PeakBufferReport {
            name: u.instruction.clone(),
            index: b.index.clone(),
            shape: {
                let whole = &module.instr(b.instruction).shape;
                match whole.subshape(&b.index) {
                    Some(part) if !b.index.is_empty() => std::sync::Arc::new(part.clone()),
                    _ => whole.clone(),
                }
            },
            bytes: b.bytes,
            kind: b.kind,
            role: u.role,
            phase: u.phase,
            op_name: u.op_name.clone(),
            source: u.source().map(ToString::to_string),
            caller: u
                .caller()
                .filter(|c| Some(*c) != u.source())
                .map(ToString::to_string),
        })
        .collect();
    PeakReport {
        time: model.peak.time,
        instruction: model
            .peak
            .instruction
            .map(|i| module.instr_name(i).to_string()),
        buffers,
        usage: usage.summary(),
    }
}

fn parameter_report(
    module: &Module,
    target: &crate::chip::Target,
    id: InstrId,
    origin: &crate::usage::ParameterOrigin,
) -> ParameterReport {
    let instr = module.instr(id);
    ParameterReport {
        number: instr.parameter_number.unwrap_or_default(),
        name: module.instr_name(id).to_string(),
        label: origin.label().to_string(),
        shape: instr.shape.clone(),
        bytes: target.total_size(&instr.shape),
        op_name: origin.op_name.clone(),
        source: origin.source.as_ref().map(|l| l.to_string()),
    }
}

impl InputError {
    pub fn new(path: &std::path::Path, error: crate::Error) -> InputError {
        let location = error.location().map(|(_, line, column)| (line, column));
        InputError {
            file: path.display().to_string(),
            line: location.map(|(line, _)| line),
            column: location.map(|(_, column)| column),
            message: error.to_string(),
            error,
        }
    }
}
