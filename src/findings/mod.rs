//! Findings: what in a module wastes memory, in the style of ruff or clippy
//! rules. Each has a stable code, a one-line message, the evidence and a fix;
//! `hlomem explain-code CODE` prints its long explanation (the `.md` beside it).
//!
//! Codes are never renumbered; a retired one stays in [`CODES`], marked removed.

mod hm001_not_donated;
mod hm002_donation_unusable;
mod hm003_donation_copied;
mod hm004_output_copies_parameter;
mod hm005_temps_dominate;
mod hm006_wide_dtype;

use serde::Serialize;

pub use hm001_not_donated::{donation_candidates, DonationCandidate};

use crate::analysis::MemoryModel;
use crate::hlo::{InstrId, Module};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
}

/// A rule: its code, its name, and its documentation.
pub struct Rule {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub summary: &'static str,
    /// The long explanation (Markdown), printed by `explain-code`.
    pub doc: &'static str,
}

pub const CODES: &[Rule] = &[
    Rule {
        code: "HM001",
        name: "not-donated",
        severity: Severity::Warning,
        summary: "an output could reuse an input's buffer, but the input is not donated",
        doc: include_str!("hm001_not_donated.md"),
    },
    Rule {
        code: "HM002",
        name: "donation-unusable",
        severity: Severity::Warning,
        summary: "a donated input cannot be reused by any output",
        doc: include_str!("hm002_donation_unusable.md"),
    },
    Rule {
        code: "HM003",
        name: "donation-copied",
        severity: Severity::Warning,
        summary: "a donated input is aliased to an output, but a copy keeps its old value, so no memory is saved",
        doc: include_str!("hm003_donation_copied.md"),
    },
    Rule {
        code: "HM004",
        name: "output-copies-parameter",
        severity: Severity::Warning,
        summary: "an output is a plain copy of an input",
        doc: include_str!("hm004_output_copies_parameter.md"),
    },
    Rule {
        code: "HM005",
        name: "temps-dominate",
        severity: Severity::Info,
        summary: "temporaries are most of the memory the module needs",
        doc: include_str!("hm005_temps_dominate.md"),
    },
    Rule {
        code: "HM006",
        name: "wide-dtype",
        severity: Severity::Info,
        summary: "64-bit buffers (x64 on) take twice the memory of 32-bit ones",
        doc: include_str!("hm006_wide_dtype.md"),
    },
];

/// Findings about less memory than this are left out of reports: in a dump of
/// hundreds of modules, a 4-byte saving is noise.
pub const MIN_REPORTED_BYTES: u64 = 64 * 1024;

/// Looks a rule up by code (`HM001`) or name (`not-donated`), any case.
pub fn rule(code: &str) -> Option<&'static Rule> {
    CODES
        .iter()
        .find(|r| r.code.eq_ignore_ascii_case(code) || r.name.eq_ignore_ascii_case(code))
}

/// An entry parameter as the user knows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ParameterRef {
    pub number: u64,
    /// The JAX argument path (`params['w']`), from the parameter's `op_name`.
    pub argument: Option<String>,
}

/// `` `params['w']` `` with a leading space, or nothing without an argument
/// name: the way messages name a parameter's JAX argument.
fn quoted(argument: &Option<String>) -> String {
    argument
        .as_ref()
        .map(|a| format!(" `{a}`"))
        .unwrap_or_default()
}

/// An instruction as a finding cites it: its name in the dump, its JAX
/// operation and the user's source line, when the dump has them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct InstrRef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl InstrRef {
    pub fn of(module: &Module, id: InstrId) -> InstrRef {
        let (op_name, source) = module.origin(id);
        InstrRef {
            name: module.instr_name(id).to_string(),
            op_name,
            source: source.map(|l| l.to_string()),
        }
    }

    /// `fusion.3 at model.py:12` (a library's file from its package; JSON
    /// keeps the full path).
    pub fn describe_at(&self) -> String {
        match &self.source {
            Some(l) => format!("{} at {}", self.name, crate::usage::source::short(l)),
            None => self.name.clone(),
        }
    }

    /// `fusion.3 (jit(f)/add) at model.py:12`.
    pub fn describe(&self) -> String {
        let op = self
            .op_name
            .as_ref()
            .map(|o| format!(" ({o})"))
            .unwrap_or_default();
        let at = self
            .source
            .as_ref()
            .map(|l| format!(" at {}", crate::usage::source::short(l)))
            .unwrap_or_default();
        format!("{}{op}{at}", self.name)
    }
}

/// What a finding found, as data: each rule's own facts, with exact bytes,
/// shapes and the instructions involved. The words (message, fix, details)
/// are functions of it, called by the report and the renderers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Evidence {
    NotDonated(hm001_not_donated::Evidence),
    DonationUnusable(hm002_donation_unusable::Evidence),
    DonationCopied(hm003_donation_copied::Evidence),
    OutputCopiesParameter(hm004_output_copies_parameter::Evidence),
    TempsDominate(hm005_temps_dominate::Evidence),
    WideDtype(hm006_wide_dtype::Evidence),
}

impl Evidence {
    fn code(&self) -> &'static str {
        match self {
            Evidence::NotDonated(_) => "HM001",
            Evidence::DonationUnusable(_) => "HM002",
            Evidence::DonationCopied(_) => "HM003",
            Evidence::OutputCopiesParameter(_) => "HM004",
            Evidence::TempsDominate(_) => "HM005",
            Evidence::WideDtype(_) => "HM006",
        }
    }

    /// One sentence: what is wrong, with the bytes.
    pub fn message(&self) -> String {
        match self {
            Evidence::NotDonated(e) => e.message(),
            Evidence::DonationUnusable(e) => e.message(),
            Evidence::DonationCopied(e) => e.message(),
            Evidence::OutputCopiesParameter(e) => e.message(),
            Evidence::TempsDominate(e) => e.message(),
            Evidence::WideDtype(e) => e.message(),
        }
    }

    /// What to change in the program.
    pub fn fix(&self) -> String {
        match self {
            Evidence::NotDonated(e) => e.fix(),
            Evidence::DonationUnusable(e) => e.fix(),
            Evidence::DonationCopied(e) => e.fix(),
            Evidence::OutputCopiesParameter(e) => e.fix(),
            Evidence::TempsDominate(e) => e.fix(),
            Evidence::WideDtype(e) => e.fix(),
        }
    }

    /// The supporting facts, one line each.
    pub fn details(&self) -> Vec<String> {
        match self {
            Evidence::NotDonated(e) => e.details(),
            Evidence::DonationUnusable(e) => e.details(),
            Evidence::OutputCopiesParameter(_) => Vec::new(),
            Evidence::DonationCopied(e) => e.details(),
            Evidence::TempsDominate(e) => e.details(),
            Evidence::WideDtype(e) => e.details(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub parameter: Option<ParameterRef>,
    pub output_index: Option<Vec<u64>>,
    /// The instruction the finding is about.
    pub instruction: Option<String>,
    /// Bytes at stake, as [`crate::report::FindingReport::bytes`] says.
    pub bytes: u64,
    /// `file:line` of the instruction, when the dump says.
    pub source: Option<String>,
    pub evidence: Evidence,
}

impl Finding {
    fn new(evidence: Evidence, bytes: u64) -> Finding {
        let rule = rule(evidence.code()).expect("findings use codes from CODES");
        Finding {
            code: rule.code,
            name: rule.name,
            severity: rule.severity,
            parameter: None,
            output_index: None,
            instruction: None,
            bytes,
            source: None,
            evidence,
        }
    }

    pub fn message(&self) -> String {
        self.evidence.message()
    }

    pub fn fix(&self) -> String {
        self.evidence.fix()
    }

    fn at(mut self, module: &Module, instr: InstrId) -> Finding {
        self.instruction = Some(module.instr_name(instr).to_string());
        self.source = module.source_location(instr).map(|l| l.to_string());
        self
    }

    fn parameter(mut self, module: &Module, number: u64) -> Finding {
        let argument = module
            .entry()
            .parameters
            .get(number as usize)
            .and_then(|&p| module.op_name(p));
        self.parameter = Some(ParameterRef { number, argument });
        self
    }
}

/// The findings a report shows: those about at least [`MIN_REPORTED_BYTES`].
pub fn reported(module: &Module, model: &MemoryModel, usage: &PeakUsage) -> Vec<Finding> {
    run(module, model, usage)
        .into_iter()
        .filter(|f| f.bytes >= MIN_REPORTED_BYTES)
        .collect()
}

/// Every finding for a module, most bytes at stake first.
pub fn run(module: &Module, model: &MemoryModel, usage: &PeakUsage) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.extend(hm001_not_donated::check(module, model, &usage.parameters));
    findings.extend(hm002_donation_unusable::check(
        module,
        model,
        &usage.parameters,
    ));
    findings.extend(hm003_donation_copied::check(module, model));
    findings.extend(hm004_output_copies_parameter::check(module, model));
    findings.extend(hm005_temps_dominate::check(module, model, usage));
    findings.extend(hm006_wide_dtype::check(module, model));
    findings.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.severity.cmp(&a.severity))
            .then(a.code.cmp(b.code))
    });
    findings
}

use crate::usage::PeakUsage;

/// `donate_argnums=(1,)` / `donate_argnames="params"` advice for a
/// parameter, given its JAX argument (name and position), if known.
pub fn donate_fix(number: u64, argument: Option<&(String, usize)>) -> String {
    match argument {
        Some((name, index)) => format!(
            "donate it: jax.jit(f, donate_argnums={index}) (argument `{name}`, if it is the {} positional argument), \
             or donate_argnames=\"{name}\"",
            ordinal(*index)
        ),
        None => format!("donate parameter {number}: jax.jit(f, donate_argnums=...) naming that argument"),
    }
}

fn ordinal(i: usize) -> String {
    match i {
        0 => "first".into(),
        1 => "second".into(),
        2 => "third".into(),
        n => format!("{}th", n + 1),
    }
}

#[cfg(test)]
mod tests;
