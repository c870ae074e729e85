//! Findings: what in a module wastes memory, in the style of ruff or clippy
//! rules. Each has a stable code, a one-line message, the evidence and a fix;
//! `hlomem explain-code CODE` prints its long explanation (the `.md` beside it).
//!
//! The words are the module's front-end's ([`FrontendName`]): a JAX module's
//! fix names `donate_argnums`, a TensorFlow one's resource variables, a
//! PyTorch/XLA one's in-place updates; a front-end's runtime that chooses
//! the aliasing itself gets no donation advice, and an unknown one's words
//! name no front-end's API alone.
//!
//! Codes are never renumbered; a retired one stays in [`CODES`], marked removed.

use serde::Serialize;

pub use hm001_not_donated::{donation_candidates, DonationCandidate};

use crate::analysis::MemoryModel;
use crate::frontend::FrontendName;
use crate::hlo::{InstrId, Module};
use crate::usage::ParameterOrigin;

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

/// Every rule, in code order, from the one list in the `rules!` macro.
pub const CODES: &[Rule] = &RULES;

/// The rules and the evidence each finds, written once: a row gives the
/// evidence's variant and the rule's module (its `.md` is the module's name),
/// code, name, severity and summary. [`CODES`], [`Evidence`] (whose JSON tag
/// is the rule's name) and [`Evidence::rule`] are all made from it, so a
/// finding cannot carry a code the table lacks; codes and names are checked
/// distinct at compile time.
macro_rules! rules {
    ($($variant:ident($module:ident) => $code:literal, $name:literal, $severity:ident, $summary:literal;)*) => {
        $(mod $module;)*

        /// Each rule, named as its evidence's variant.
        #[allow(non_upper_case_globals)]
        mod rule_of {
            use super::{Rule, Severity};
            $(pub const $variant: Rule = Rule {
                code: $code,
                name: $name,
                severity: Severity::$severity,
                summary: $summary,
                doc: include_str!(concat!(stringify!($module), ".md")),
            };)*
        }

        const RULES: [Rule; [$($code),*].len()] = [$(rule_of::$variant,)*];

        /// What a finding found, as data: each rule's own facts, with exact bytes,
        /// shapes and the instructions involved. The words (message, fix, details)
        /// are functions of it, called by the report and the renderers.
        #[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
        #[serde(tag = "rule")]
        pub enum Evidence {
            $(#[serde(rename = $name)] $variant($module::Evidence),)*
        }

        impl Evidence {
            /// The rule that found it.
            pub fn rule(&self) -> &'static Rule {
                match self {
                    $(Evidence::$variant(_) => &rule_of::$variant,)*
                }
            }
        }
    };
}

rules! {
    NotDonated(hm001_not_donated) => "HM001", "not-donated", Warning,
        "an output could reuse an input's buffer, but the input is not donated";
    DonationUnusable(hm002_donation_unusable) => "HM002", "donation-unusable", Warning,
        "a donated input cannot be reused by any output";
    DonationCopied(hm003_donation_copied) => "HM003", "donation-copied", Warning,
        "a donated input is aliased to an output, but a copy keeps its old value, so no memory is saved";
    OutputCopiesParameter(hm004_output_copies_parameter) => "HM004", "output-copies-parameter", Warning,
        "an output is a plain copy of an input";
    TempsDominate(hm005_temps_dominate) => "HM005", "temps-dominate", Info,
        "temporaries are most of the memory the module needs";
    WideDtype(hm006_wide_dtype) => "HM006", "wide-dtype", Info,
        "64-bit floating-point buffers take twice the memory of 32-bit ones";
}

/// Whether two texts are equal, in a constant.
const fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// No two rules share a code or a name (`explain-code` finds a rule by either).
const _: () = {
    let mut i = 0;
    while i < RULES.len() {
        let mut j = 0;
        while j < RULES.len() {
            let (a, b) = (&RULES[i], &RULES[j]);
            assert!(
                i == j
                    || !(same_text(a.code, b.code)
                        || same_text(a.name, b.name)
                        || same_text(a.code, b.name)),
                "two rules share a code or a name"
            );
            j += 1;
        }
        i += 1;
    }
};

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
    /// The JAX argument path (`params['w']`), from the parameter's `op_name`;
    /// absent for front-ends that name no argument (TensorFlow, PyTorch/XLA).
    pub argument: Option<String>,
    /// Its name in the HLO (`arg0.1`, `p0.2`).
    pub name: String,
}

/// The program XLA compiled, as each front-end's users call it.
fn compiled_function(frontend: FrontendName) -> &'static str {
    match frontend {
        FrontendName::Jax => "the jitted function",
        FrontendName::Tensorflow => "the tf.function",
        FrontendName::PytorchXla => "the graph torch_xla.sync() compiles",
        FrontendName::Unknown => "the compiled function",
    }
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

impl Evidence {
    /// One sentence: what is wrong, with the bytes, in `frontend`'s words.
    pub fn message(&self, frontend: FrontendName) -> String {
        match self {
            Evidence::NotDonated(e) => e.message(frontend),
            Evidence::DonationUnusable(e) => e.message(),
            Evidence::DonationCopied(e) => e.message(frontend),
            Evidence::OutputCopiesParameter(e) => e.message(),
            Evidence::TempsDominate(e) => e.message(),
            Evidence::WideDtype(e) => e.message(),
        }
    }

    /// What to change in the program, with `frontend`'s API (or, where its
    /// runtime decides, that there is nothing to set).
    pub fn fix(&self, frontend: FrontendName) -> String {
        match self {
            Evidence::NotDonated(e) => e.fix(frontend),
            Evidence::DonationUnusable(e) => e.fix(frontend),
            Evidence::DonationCopied(e) => e.fix(frontend),
            Evidence::OutputCopiesParameter(e) => e.fix(frontend),
            Evidence::TempsDominate(e) => e.fix(frontend),
            Evidence::WideDtype(e) => e.fix(frontend),
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
    /// The module's front-end, whose words the message and fix use.
    pub frontend: FrontendName,
}

impl Finding {
    fn new(evidence: Evidence, bytes: u64) -> Finding {
        let rule = evidence.rule();
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
            frontend: FrontendName::Unknown,
        }
    }

    pub fn message(&self) -> String {
        self.evidence.message(self.frontend)
    }

    pub fn fix(&self) -> String {
        self.evidence.fix(self.frontend)
    }

    fn at(mut self, module: &Module, instr: InstrId) -> Finding {
        self.instruction = Some(module.instr_name(instr).to_string());
        self.source = module.source_location(instr).map(|l| l.to_string());
        self
    }

    fn parameter(mut self, origins: &[ParameterOrigin], number: u64) -> Finding {
        let origin = origins.get(number as usize);
        self.parameter = Some(ParameterRef {
            number,
            argument: origin.and_then(|o| o.path.clone()),
            name: origin.map(|o| o.name.clone()).unwrap_or_default(),
        });
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
    let origins = &usage.parameters;
    let frontend = usage.frontend.name;
    let mut findings = Vec::new();
    findings.extend(hm001_not_donated::check(module, model, origins));
    findings.extend(hm002_donation_unusable::check(module, model, origins));
    findings.extend(hm003_donation_copied::check(
        module, model, origins, frontend,
    ));
    findings.extend(hm004_output_copies_parameter::check(module, model, origins));
    findings.extend(hm005_temps_dominate::check(module, model, usage));
    findings.extend(hm006_wide_dtype::check(module, model));
    for f in &mut findings {
        f.frontend = frontend;
    }
    findings.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.severity.cmp(&a.severity))
            .then(a.code.cmp(b.code))
    });
    findings
}

use crate::usage::PeakUsage;

/// How to let XLA write an output into parameter `number`'s buffer, in
/// `frontend`'s terms: JAX's `donate_argnums=(1,)` / `donate_argnames="params"`
/// given the argument (name and position), if known; TensorFlow's resource
/// variables updated in place; torch_xla's in-place updates and buffer
/// donation.
pub fn donate_fix(
    frontend: FrontendName,
    number: u64,
    label: &str,
    argument: Option<&(String, usize)>,
) -> String {
    match (frontend, argument) {
        (FrontendName::Jax, Some((name, index))) => format!(
            "donate it: jax.jit(f, donate_argnums={index}) (argument `{name}`, if it is the {} positional argument), \
             or donate_argnames=\"{name}\"",
            ordinal(*index)
        ),
        (FrontendName::Jax, None) => {
            format!("donate parameter {number}: jax.jit(f, donate_argnums=...) naming that argument")
        }
        (FrontendName::Tensorflow, _) => format!(
            "TensorFlow reuses the buffer of a resource variable that the function updates in place, never a \
             tensor argument's: if parameter {number} (`{label}`) is state the result replaces, keep it in a \
             tf.Variable and update it inside the tf.function(jit_compile=True) with assign / assign_add / \
             assign_sub"
        ),
        (FrontendName::PytorchXla, _) => format!(
            "torch_xla reuses the buffer of a tensor the graph updates in place: if parameter {number} \
             (`{label}`) is not read after this step, update it in place (a.add_(b), a.copy_(new), an \
             optimizer's in-place step) instead of making a new tensor, or mark it for donation before the \
             sync with torch_xla._XLAC._set_buffer_donation(tensor, True) (torch_xla 2.x)"
        ),
        (FrontendName::Unknown, _) => format!(
            "let XLA write the output into parameter {number}'s buffer (`{label}`), if the caller does not \
             read it afterwards: donate it (JAX: donate_argnums), update it in place (PyTorch/XLA), or keep it \
             in a resource variable updated with assign (TensorFlow)"
        ),
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
#[cfg(test)]
mod tests_frontends;
