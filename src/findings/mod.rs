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

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
pub struct ParameterRef {
    pub number: u64,
    /// The JAX argument path (`params['w']`), from the parameter's `op_name`.
    pub argument: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub name: &'static str,
    pub severity: Severity,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter: Option<ParameterRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_index: Option<Vec<u64>>,
    /// The instruction the finding is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// Bytes at stake: what the fix would save.
    pub bytes: u64,
    /// `file:line` of the instruction, when the dump says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Further facts: shapes, the instructions involved, their lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    pub fix: String,
}

impl Finding {
    fn new(code: &str, message: String, bytes: u64, fix: String) -> Finding {
        let rule = rule(code).expect("findings use codes from CODES");
        Finding {
            code: rule.code,
            name: rule.name,
            severity: rule.severity,
            message,
            parameter: None,
            output_index: None,
            instruction: None,
            bytes,
            source: None,
            evidence: Vec::new(),
            fix,
        }
    }

    fn at(mut self, module: &Module, instr: InstrId) -> Finding {
        self.instruction = Some(module.instr(instr).name.clone());
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
pub fn reported(module: &Module, model: &MemoryModel) -> Vec<Finding> {
    run(module, model)
        .into_iter()
        .filter(|f| f.bytes >= MIN_REPORTED_BYTES)
        .collect()
}

/// Every finding for a module, most bytes at stake first.
pub fn run(module: &Module, model: &MemoryModel) -> Vec<Finding> {
    let mut findings = Vec::new();
    findings.extend(hm001_not_donated::check(module, model));
    findings.extend(hm002_donation_unusable::check(module, model));
    findings.extend(hm003_donation_copied::check(module, model));
    findings.extend(hm004_output_copies_parameter::check(module, model));
    findings.extend(hm005_temps_dominate::check(module, model));
    findings.extend(hm006_wide_dtype::check(module, model));
    findings.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.severity.cmp(&a.severity))
            .then(a.code.cmp(b.code))
    });
    findings
}

/// The top-level Python argument of a parameter's `op_name` (`params['w']` → `params`)
/// and its position among the module's top-level arguments, for `donate_argnums`.
pub fn jax_argument(module: &Module, number: u64) -> Option<(String, usize)> {
    jax_arguments(module)
        .into_iter()
        .nth(number as usize)
        .flatten()
}

/// [`jax_argument`] of every entry parameter, by parameter number: one pass,
/// for rules that ask about many parameters.
pub fn jax_arguments(module: &Module) -> Vec<Option<(String, usize)>> {
    let top = |name: &str| -> String {
        name.split(['[', '.'])
            .next()
            .unwrap_or(name)
            .trim()
            .to_string()
    };
    let tops: Vec<Option<String>> = module
        .entry()
        .parameters
        .iter()
        .map(|&p| module.op_name(p).map(|name| top(&name)))
        .collect();
    let mut order: Vec<&str> = Vec::new();
    for t in tops.iter().flatten() {
        if !order.contains(&t.as_str()) {
            order.push(t);
        }
    }
    tops.iter()
        .map(|t| {
            let t = t.as_ref()?;
            let index = order.iter().position(|n| n == t)?;
            Some((t.clone(), index))
        })
        .collect()
}

/// `donate_argnums=(1,)` / `donate_argnames="params"` advice for a parameter.
pub fn donate_fix(module: &Module, number: u64) -> String {
    match jax_argument(module, number) {
        Some((name, index)) => format!(
            "donate it: jax.jit(f, donate_argnums={index}) (argument `{name}`, if it is the {} positional argument), \
             or donate_argnames=\"{name}\"",
            ordinal(index)
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
