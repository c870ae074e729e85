//! The CI gate: `check` (a memory budget, and findings that must not appear)
//! and `diff` (what changed between two dumps of the same program). Both
//! compare reports that `analyze` already computed; they read no files.

use serde::Serialize;

use crate::report::{ModuleReport, Report};

/// Devices a module runs on: SPMD partitions times replicas.
fn devices(m: &ModuleReport) -> u64 {
    m.num_partitions.max(1) * m.replica_count.max(1)
}

/// What `check` compares and what it found.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CheckResult {
    /// `--budget`, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_bytes: Option<u64>,
    /// The budget is for the whole program over all its devices
    /// (`--whole-program`); by default it is one device's memory.
    pub whole_program: bool,
    /// The finding codes `--fail-on` named (`HM003`), as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_on: Vec<String>,
    pub modules: Vec<CheckedModule>,
    /// Files that could not be analyzed.
    pub errors: usize,
    /// Every file was analyzed, and no module is over the budget or has a
    /// finding `--fail-on` names: a file that could not be read is not a pass.
    pub passed: bool,
}

impl CheckResult {
    /// Modules over the budget.
    pub fn over_budget(&self) -> impl Iterator<Item = &CheckedModule> {
        self.modules.iter().filter(|m| m.over_by.is_some())
    }

    /// Modules with a finding `--fail-on` names.
    pub fn with_forbidden_findings(&self) -> impl Iterator<Item = &CheckedModule> {
        self.modules
            .iter()
            .filter(|m| !m.failing_findings.is_empty())
    }
}

/// Which memory a module's figure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryKind {
    /// TPU high-bandwidth memory (on-chip VMEM and SMEM do not count).
    Hbm,
    /// GPU or CPU device memory.
    Device,
}

impl MemoryKind {
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Hbm => "HBM",
            MemoryKind::Device => "device memory",
        }
    }
}

/// A finding as the gate cites it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FindingRef {
    pub code: &'static str,
    pub name: &'static str,
    /// Bytes at stake, as in `analyze`'s findings: what the fix saves where
    /// that is known beforehand, else what the finding is about (HM005: the
    /// temporaries).
    pub bytes: u64,
    pub message: String,
}

impl From<&crate::report::FindingReport> for FindingRef {
    fn from(f: &crate::report::FindingReport) -> FindingRef {
        FindingRef {
            code: f.code,
            name: f.name,
            bytes: f.bytes,
            message: f.message.clone(),
        }
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct CheckedModule {
    pub key: String,
    pub name: String,
    pub file: String,
    /// What was compared with the budget: `device_bytes` (the default memory
    /// space, which is all of `total_bytes` off TPU), per device, or times
    /// the devices with `whole_program`.
    pub bytes: u64,
    /// Whether `bytes` is XLA's figure to the byte; not when hlomem had to
    /// guess (a TPU module whose chip nobody named, holding a tuple table):
    /// the text then says "about".
    pub exact: bool,
    pub memory: MemoryKind,
    pub devices: u64,
    /// How far over the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_by: Option<u64>,
    /// Findings named by `--fail-on` that this module has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_findings: Vec<FindingRef>,
    /// Its other largest findings, which do not fail the check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_findings: Vec<FindingRef>,
}

/// `budget`: one device's memory, or with `whole_program` all devices'.
pub fn check(
    report: &Report,
    budget: Option<u64>,
    whole_program: bool,
    fail_on: &[String],
) -> CheckResult {
    // A finding fails the check when `--fail-on` names its rule, unless it
    // was reported below its rule's severity: an HM003 copy that every
    // donated training step makes is `info`, worth reading, not a failed build.
    let forbidden = |f: &crate::report::FindingReport| {
        let downgraded =
            crate::findings::rule(f.code).is_some_and(|rule| f.severity < rule.severity);
        !downgraded
            && fail_on
                .iter()
                .any(|c| c.eq_ignore_ascii_case(f.code) || c.eq_ignore_ascii_case(f.name))
    };
    let modules: Vec<CheckedModule> = report
        .largest_first()
        .into_iter()
        .map(|m| {
            let d = devices(m);
            // What must fit in device memory: on TPU, HBM (VMEM is on-chip).
            let bytes = if whole_program {
                m.memory.device_bytes.saturating_mul(d)
            } else {
                m.memory.device_bytes
            };
            let (failing, other): (Vec<_>, Vec<_>) = m.findings.iter().partition(|f| forbidden(f));
            CheckedModule {
                key: m.key.clone(),
                name: m.name.clone(),
                file: m.file.clone(),
                bytes,
                exact: m.memory.by_space.iter().all(|s| s.color != 0 || s.exact),
                memory: if m.target.backend == crate::chip::Backend::Tpu {
                    MemoryKind::Hbm
                } else {
                    MemoryKind::Device
                },
                devices: d,
                over_by: budget
                    .and_then(|b| bytes.checked_sub(b))
                    .filter(|over| *over > 0),
                failing_findings: failing.into_iter().map(FindingRef::from).collect(),
                other_findings: other.into_iter().take(3).map(FindingRef::from).collect(),
            }
        })
        .collect();
    let passed = report.errors.is_empty()
        && modules
            .iter()
            .all(|m| m.over_by.is_none() && m.failing_findings.is_empty());
    CheckResult {
        budget_bytes: budget,
        whole_program,
        fail_on: fail_on.to_vec(),
        modules,
        errors: report.errors.len(),
        passed,
    }
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct DiffReport {
    /// `--fail-over`: the growth of a module's total that fails the diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_over: Option<u64>,
    /// No module grew by more than `fail_over`.
    pub passed: bool,
    pub modules: Vec<ModuleDiff>,
    /// Modules only in the old dump.
    pub removed: Vec<String>,
    /// Modules only in the new dump.
    pub added: Vec<String>,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ModuleDiff {
    pub name: String,
    pub old_file: String,
    pub new_file: String,
    /// `(old, new)` of each number of `memory`.
    pub total_bytes: (u64, u64),
    pub temp_bytes: (u64, u64),
    pub argument_bytes: (u64, u64),
    pub output_bytes: (u64, u64),
    pub alias_bytes: (u64, u64),
    pub live_peak_bytes: (u64, u64),
    /// Buffers live at the new peak that were not at the old one: `(description, bytes)`.
    pub new_peak_buffers: Vec<(String, u64)>,
    /// Buffers at both peaks that grew: `(description, old, new)`.
    pub grown_peak_buffers: Vec<(String, u64, u64)>,
    /// The peak's groups by source line whose bytes changed, most change first
    /// (a group absent on one side counts 0 there).
    pub peak_by_source: Vec<GroupChange>,
    /// The same by role.
    pub peak_by_role: Vec<GroupChange>,
    pub findings_appeared: Vec<String>,
    pub findings_gone: Vec<String>,
    /// How far the growth of `total_bytes` passes `--fail-over`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_limit_by: Option<u64>,
}

/// One group of the live peak in the old and the new dump.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct GroupChange {
    /// The group as people read it (`flax/linen/stochastic.py:105 ← train.py:40`, `optimizer state`).
    pub group: String,
    pub old_bytes: u64,
    pub new_bytes: u64,
}

impl GroupChange {
    pub fn change(&self) -> i128 {
        i128::from(self.new_bytes) - i128::from(self.old_bytes)
    }
}

/// Groups matched by name across the two reports, changed ones only.
fn group_changes(old: &[(String, u64)], new: &[(String, u64)]) -> Vec<GroupChange> {
    let mut sums: std::collections::BTreeMap<&str, (u64, u64)> = std::collections::BTreeMap::new();
    for (name, bytes) in old {
        let e = sums.entry(name).or_default();
        e.0 = e.0.saturating_add(*bytes);
    }
    for (name, bytes) in new {
        let e = sums.entry(name).or_default();
        e.1 = e.1.saturating_add(*bytes);
    }
    let mut changes: Vec<GroupChange> = sums
        .into_iter()
        .filter(|(_, (o, n))| o != n)
        .map(|(group, (old_bytes, new_bytes))| GroupChange {
            group: group.to_string(),
            old_bytes,
            new_bytes,
        })
        .collect();
    changes.sort_by_key(|c| std::cmp::Reverse(c.change().abs()));
    changes
}

fn by_source(m: &ModuleReport) -> Vec<(String, u64)> {
    m.peak
        .usage
        .by_source
        .iter()
        .map(|g| (g.place(), g.size.bytes))
        .collect()
}

fn by_role(m: &ModuleReport) -> Vec<(String, u64)> {
    m.peak
        .usage
        .by_role
        .iter()
        .map(|g| (g.role.describe().to_string(), g.size.bytes))
        .collect()
}

impl ModuleDiff {
    /// Growth of `total_bytes` (negative when it shrank).
    pub fn growth(&self) -> i128 {
        i128::from(self.total_bytes.1) - i128::from(self.total_bytes.0)
    }
}

/// A peak buffer as it is recognized across compilations: its op and shape
/// (instruction names change between compiles, op names and shapes do not).
fn buffer_key(b: &crate::report::PeakBufferReport) -> String {
    let what = b.op_name.clone().unwrap_or_else(|| b.name.clone());
    format!("{what} {}", b.shape)
}

fn finding_key(f: &crate::report::FindingReport) -> String {
    // HM001 is about a whole JAX argument (`opt_state`), named as `analyze`
    // names it, not after the first of its parameters (`opt_state[0].count`).
    let argument = match &f.evidence {
        crate::findings::Evidence::NotDonated(e) => e.argument.clone(),
        _ => None,
    };
    let subject = argument
        .or_else(|| {
            f.parameter.as_ref().map(|p| {
                p.argument
                    .clone()
                    .unwrap_or_else(|| format!("parameter {}", p.number))
            })
        })
        .or_else(|| f.output_index.as_ref().map(|i| format!("output {i:?}")))
        .unwrap_or_default();
    format!("{} {} {subject}", f.code, f.name)
}

/// `fail_over`: a module whose total grows by more fails the diff.
pub fn diff(old: &Report, new: &Report, fail_over: Option<u64>) -> DiffReport {
    let mut unmatched_new: Vec<&ModuleReport> = new.modules.iter().collect();
    let mut modules = Vec::new();
    let mut removed = Vec::new();
    for o in &old.modules {
        let Some(i) = unmatched_new.iter().position(|n| n.name == o.name) else {
            removed.push(o.key.clone());
            continue;
        };
        let n = unmatched_new.remove(i);
        let pair = |f: fn(&ModuleReport) -> u64| (f(o), f(n));
        let old_peak: Vec<(String, u64)> = o
            .peak
            .buffers
            .iter()
            .map(|b| (buffer_key(b), b.bytes))
            .collect();
        let mut new_peak_buffers = Vec::new();
        let mut grown_peak_buffers = Vec::new();
        for b in &n.peak.buffers {
            let key = buffer_key(b);
            match old_peak.iter().find(|(k, _)| *k == key) {
                None => new_peak_buffers.push((key, b.bytes)),
                Some((_, before)) if b.bytes > *before => {
                    grown_peak_buffers.push((key, *before, b.bytes))
                }
                Some(_) => {}
            }
        }
        let old_findings: Vec<String> = o.findings.iter().map(finding_key).collect();
        let new_findings: Vec<String> = n.findings.iter().map(finding_key).collect();
        modules.push(ModuleDiff {
            name: o.name.clone(),
            old_file: o.file.clone(),
            new_file: n.file.clone(),
            total_bytes: pair(|m| m.memory.total_bytes),
            temp_bytes: pair(|m| m.memory.temp_bytes),
            argument_bytes: pair(|m| m.memory.argument_bytes),
            output_bytes: pair(|m| m.memory.output_bytes),
            alias_bytes: pair(|m| m.memory.alias_bytes),
            live_peak_bytes: pair(|m| m.memory.live_peak_bytes),
            new_peak_buffers,
            grown_peak_buffers,
            peak_by_source: group_changes(&by_source(o), &by_source(n)),
            peak_by_role: group_changes(&by_role(o), &by_role(n)),
            findings_appeared: new_findings
                .iter()
                .filter(|f| !old_findings.contains(f))
                .cloned()
                .collect(),
            findings_gone: old_findings
                .iter()
                .filter(|f| !new_findings.contains(f))
                .cloned()
                .collect(),
            over_limit_by: None,
        });
    }
    for m in &mut modules {
        let growth = m.growth();
        m.over_limit_by = fail_over
            .and_then(|limit| u64::try_from(growth - i128::from(limit)).ok())
            .filter(|over| *over > 0);
    }
    modules.sort_by_key(|m| std::cmp::Reverse(m.growth()));
    DiffReport {
        fail_over,
        passed: modules.iter().all(|m| m.over_limit_by.is_none()),
        modules,
        removed,
        added: unmatched_new.iter().map(|n| n.key.clone()).collect(),
    }
}
