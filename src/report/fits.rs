//! `hlomem fits` and `hlomem targets TARGET`: a target and the decision
//! whether a program fits on one of its devices, or within a budget given
//! for one device (`chip::fit`), with their words. The Python package's `Verdict` and `Target` print these words, so
//! the command line and the API say the same, rounded once (two decimals,
//! `units::two_decimals`).

use serde::Serialize;

use crate::chip::devices::{Device, Platform, Targets, Usable};
use crate::chip::fit::{Figures, Fit};
use crate::chip::Backend;
use crate::units::two_decimals;
use crate::xla_report::XlaTotals;

/// A target with the words a verdict says it in.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TargetReport {
    #[serde(flatten)]
    pub device: Device,
    pub words: TargetWords,
}

/// How a target is named in sentences.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TargetWords {
    /// What a program may use of one device, before "is": `JAX's share of
    /// an H100`, `what libtpu lets a program use of a v5e chip`.
    pub share: String,
    /// `a` or `an` before the device (`an H100`, `a v5e chip`).
    pub article: &'static str,
    /// What the device's memory is called: `HBM` on TPU, `memory` on GPU.
    pub memory_word: &'static str,
}

impl TargetReport {
    pub fn new(device: Device) -> TargetReport {
        // As the device is read aloud: "an H100", "an RTX", "a v5e chip".
        let article = match device.device.chars().next() {
            Some(c) if "AEFHILMNORSX".contains(c) => "an",
            _ => "a",
        };
        let whose = match device.usable {
            Usable::Libtpu => "what libtpu lets a program use of",
            Usable::JaxAllocator { .. } => "JAX's share of",
        };
        let memory_word = match device.platform {
            Platform::Tpu => "HBM",
            Platform::Cuda => "memory",
        };
        let words = TargetWords {
            share: format!("{whose} {article} {}", device.device),
            article,
            memory_word,
        };
        TargetReport { device, words }
    }
}

/// `hlomem targets`: every target, or the one asked for.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum TargetsReport {
    All(Targets),
    One { target: TargetReport },
}

/// The module `hlomem fits FILE` read its figures from.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ModuleFigures {
    /// Its `HloModule` name.
    pub name: String,
    pub file: String,
    /// The backend whose rules were applied (read from the text).
    pub backend: Backend,
    /// hlomem's count of its device memory, per device (`check`'s figure).
    pub device_bytes: u64,
    /// `false` when that count is hlomem's estimate.
    pub exact: bool,
    /// XLA's own totals, from the buffer-assignment report beside the file.
    pub xla: Option<XlaTotals>,
}

/// What a program's figure is decided against.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Limit {
    /// One device of a target: what a program may use of it (boxed: a
    /// target is large beside a budget).
    Target { target: Box<TargetReport> },
    /// One device's memory as given (`fits --budget`, as `check --budget`
    /// takes it): what `hlomem.largest_fit` and its curve compare with.
    Budget { budget_bytes: u64 },
}

impl Limit {
    pub fn target(device: Device) -> Limit {
        Limit::Target {
            target: Box::new(TargetReport::new(device)),
        }
    }

    /// The bytes a program may use of one device.
    pub fn usable_bytes(&self) -> u64 {
        match self {
            Limit::Target { target } => target.device.usable_bytes,
            Limit::Budget { budget_bytes } => *budget_bytes,
        }
    }
}

/// `hlomem fits`: the target or budget, the figures, the decision and its words.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FitsReport {
    #[serde(flatten)]
    pub limit: Limit,
    /// The module the figures are from, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<ModuleFigures>,
    #[serde(flatten)]
    pub figures: Figures,
    /// The compiler's error when the compile did not finish after XLA had
    /// assigned buffers: the figures are that module's.
    pub unfinished: Option<String>,
    #[serde(flatten)]
    pub fit: Fit,
    pub words: FitWords,
}

/// A verdict in words, each figure rounded once (two decimals).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FitWords {
    /// The decision and the figures that make it: `does not fit: needs
    /// 12.00GiB, JAX's share of a V100 16GB is 11.82GiB, over by 0.18GiB`;
    /// against a budget, `fits: needs 3.61MiB, the budget is 16.00GiB,
    /// 15.99GiB to spare`.
    pub headline: String,
    /// The device's memory and the share a program may use (or the budget,
    /// in bytes too), and XLA's figure.
    pub basis: String,
    /// What the program needs: `27.50GiB`, `at least 19.00GiB`.
    pub needs: String,
    /// The spare bytes in GiB (MiB against a budget under 1 GiB), negative
    /// when over: `0.75GiB`, `-81.25GiB`.
    pub spare: String,
    /// Why the figures are those of an unfinished compile.
    pub unfinished: Option<String>,
    /// XLA's figure and hlomem's, when they differ (not for a refusal), in
    /// one short line.
    pub disagreement: Option<String>,
}

impl FitsReport {
    pub fn new(limit: Limit, figures: Figures, unfinished: Option<String>) -> FitsReport {
        let fit = Fit::decide(&figures, limit.usable_bytes());
        let words = FitWords::new(&limit, &figures, unfinished.as_deref(), &fit);
        FitsReport {
            limit,
            module: None,
            figures,
            unfinished,
            fit,
            words,
        }
    }
}

/// The figures of a verdict: MiB under 1 GiB.
fn size(bytes: u64) -> String {
    two_decimals(bytes.into(), true)
}

/// A difference of two figures, in the limit's unit: GiB for a target's
/// share (always over 1 GiB), MiB for a budget under 1 GiB (a test's budget
/// of a few MiB is not "over by 0.00GiB").
fn difference(bytes: i128, in_mib: bool) -> String {
    two_decimals(bytes, in_mib)
}

impl FitWords {
    fn new(limit: &Limit, figures: &Figures, unfinished: Option<&str>, fit: &Fit) -> FitWords {
        let least = if figures.at_least { "at least " } else { "" };
        let needs = format!("{least}{}", size(fit.deciding_bytes));
        let usable_bytes = limit.usable_bytes();
        // What a program may use, said as `check --budget` and `assert_fits`
        // say a budget ("the budget of 16.00GiB"), in a verdict's rounding.
        let usable = match limit {
            Limit::Target { target } => format!("{} is {}", target.words.share, size(usable_bytes)),
            Limit::Budget { .. } => format!("the budget is {}", size(usable_bytes)),
        };
        let in_mib = matches!(limit, Limit::Budget { .. }) && usable_bytes < 1 << 30;
        let difference = |bytes| difference(bytes, in_mib);
        // A compile that did not finish is said in the decision, before any figure.
        let unfinished_said = if unfinished.is_some() {
            " (the compile did not finish)"
        } else {
            ""
        };
        let headline = if fit.fits {
            format!(
                "fits{unfinished_said}: needs {needs}, {usable}, {} to spare",
                difference(fit.spare_bytes)
            )
        } else {
            let decision = if figures.at_least {
                "does not fit (its compiler refused it)".to_string()
            } else {
                format!("does not fit{unfinished_said}")
            };
            let over = -fit.spare_bytes;
            if over <= 0 {
                // Refused, though what the refusal says is within the limit.
                format!("{decision}: needs {needs}, {usable}")
            } else {
                format!(
                    "{decision}: needs {needs}, {usable}, over by {least}{}",
                    difference(over)
                )
            }
        };
        let mut basis = match limit {
            Limit::Target { target } => {
                let device = &target.device;
                let mut basis = format!(
                    "{} {} has {} of {}",
                    target.words.article,
                    device.device,
                    size(device.memory_bytes),
                    target.words.memory_word
                );
                if !device.usable_note.is_empty() {
                    basis += &format!("; {}", device.usable_note);
                }
                basis
            }
            // Said in bytes too: the budget as the command resolved it.
            Limit::Budget { budget_bytes } => format!(
                "the budget, one device's memory, is {} ({budget_bytes} bytes)",
                size(*budget_bytes)
            ),
        };
        let needed = figures.needed_bytes;
        let mut disagreement = None;
        match figures.xla_bytes {
            // needed_bytes is then the refusal's own figure or hlomem's, the larger.
            Some(xla) if figures.at_least => {
                basis += &format!(
                    "; XLA's buffer assignment of the module it refused: {} ({xla} bytes)",
                    size(xla)
                );
            }
            Some(xla) if xla == needed => {
                basis += &format!("; XLA's buffer assignment says the same ({})", size(xla));
            }
            Some(xla) => {
                // Said in bytes too: two figures that print alike may differ.
                basis += &format!(
                    "; XLA's buffer assignment says {} ({xla} bytes), hlomem's analysis {} \
                     ({needed} bytes): they differ, and XLA's decides (hlomem analyze --verify \
                     on a kept dump shows where)",
                    size(xla),
                    size(needed)
                );
                disagreement = Some(format!(
                    "XLA's buffer assignment says {}, hlomem's analysis {}: they differ, and \
                     XLA's decides",
                    size(xla),
                    size(needed)
                ));
            }
            None => {}
        }
        FitWords {
            headline,
            basis,
            needs,
            spare: difference(fit.spare_bytes),
            unfinished: unfinished.map(unfinished_words),
            disagreement,
        }
    }
}

/// Why the figures are an unfinished compile's, with the error's first line.
fn unfinished_words(error: &str) -> String {
    let error = error.trim();
    let first = error.lines().next().unwrap_or(error);
    format!(
        "the compile did not finish ({first}); these are the figures of the module XLA had \
         optimized and assigned buffers to before it stopped"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chip::devices::{shipped_gpu_device, tpu_device, GpuOptions};
    use crate::chip::TpuVersion;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    fn verdict(target: &Device, needed: u64, xla: Option<u64>, at_least: bool) -> FitsReport {
        let figures = Figures {
            needed_bytes: needed,
            xla_bytes: xla,
            at_least,
        };
        FitsReport::new(Limit::target(target.clone()), figures, None)
    }

    fn budgeted(budget: u64, needed: u64, xla: Option<u64>, at_least: bool) -> FitsReport {
        let figures = Figures {
            needed_bytes: needed,
            xla_bytes: xla,
            at_least,
        };
        FitsReport::new(
            Limit::Budget {
                budget_bytes: budget,
            },
            figures,
            None,
        )
    }

    fn v5e() -> Device {
        tpu_device(TpuVersion::V5e, None).unwrap()
    }

    #[test]
    fn the_decision_then_the_figures_it_was_made_from() {
        let over = verdict(&v5e(), 97 * GIB, None, false);
        assert_eq!(
            over.words.headline,
            "does not fit: needs 97.00GiB, what libtpu lets a program use of a v5e chip is \
             15.75GiB, over by 81.25GiB"
        );
        assert_eq!(
            over.words.basis,
            "a v5e chip has 16.00GiB of HBM; libtpu lets a program use 15.75GiB of it"
        );
        let spare = verdict(&v5e(), 15 * GIB, None, false);
        assert_eq!(spare.words.spare, "0.75GiB");
        assert!(spare.words.headline.ends_with(", 0.75GiB to spare"));
    }

    #[test]
    fn exactly_at_the_usable_bytes_fits_one_byte_more_does_not() {
        let usable = v5e().usable_bytes;
        let at = verdict(&v5e(), usable, None, false);
        assert!(at.fit.fits);
        assert!(
            at.words.headline.ends_with(", 0.00GiB to spare"),
            "{}",
            at.words.headline
        );
        let over = verdict(&v5e(), usable + 1, None, false);
        assert!(!over.fit.fits);
        // Over by one byte, which rounds to nothing: still "does not fit".
        assert!(over
            .words
            .headline
            .starts_with("does not fit: needs 15.75GiB"));
        assert!(over.words.headline.ends_with("over by 0.00GiB"));
    }

    #[test]
    fn a_refusal_says_at_least_and_xla_figure_of_what_it_refused() {
        let refused = verdict(&v5e(), 19 * GIB, Some(19 * GIB), true);
        assert_eq!(
            refused.words.headline,
            "does not fit (its compiler refused it): needs at least 19.00GiB, what libtpu lets a \
             program use of a v5e chip is 15.75GiB, over by at least 3.25GiB"
        );
        assert!(refused.words.basis.ends_with(&format!(
            "; XLA's buffer assignment of the module it refused: 19.00GiB ({} bytes)",
            19 * GIB
        )));
        assert_eq!(refused.words.disagreement, None);
        // Refused, though within the limit: no "over by".
        let within = verdict(&v5e(), GIB, None, true);
        assert!(!within.fit.fits);
        assert!(
            within.words.headline.ends_with("is 15.75GiB"),
            "{}",
            within.words.headline
        );
    }

    #[test]
    fn xla_and_hlomem_differing_are_both_said_and_xla_decides() {
        let h100 = shipped_gpu_device("h100", &GpuOptions::default()).unwrap();
        let xla = (48.2 * GIB as f64) as u64;
        let fits = verdict(&h100, 48 * GIB, Some(xla), false);
        assert_eq!(fits.fit.deciding_bytes, xla);
        assert_eq!(
            fits.words.headline,
            "fits: needs 48.20GiB, JAX's share of an H100 is 59.33GiB, 11.13GiB to spare"
        );
        assert_eq!(
            fits.words.basis,
            format!(
                "an H100 has 79.11GiB of memory; JAX's allocator takes \
                 XLA_PYTHON_CLIENT_MEM_FRACTION=0.75 of it; XLA's buffer assignment says \
                 48.20GiB ({xla} bytes), hlomem's analysis 48.00GiB ({} bytes): they differ, and \
                 XLA's decides (hlomem analyze --verify on a kept dump shows where)",
                48 * GIB
            )
        );
        assert!(fits.words.disagreement.is_some());
        let same = verdict(&h100, 48 * GIB, Some(48 * GIB), false);
        assert!(same
            .words
            .basis
            .ends_with("; XLA's buffer assignment says the same (48.00GiB)"));
        assert_eq!(same.words.disagreement, None);
    }

    #[test]
    fn an_unfinished_compile_is_said_in_the_decision() {
        let h100 = shipped_gpu_device("h100", &GpuOptions::default()).unwrap();
        let figures = Figures {
            needed_bytes: GIB,
            xla_bytes: None,
            at_least: false,
        };
        let report = FitsReport::new(
            Limit::target(h100.clone()),
            figures.clone(),
            Some("INTERNAL: CUDA Runtime error: ...\nmore".into()),
        );
        assert!(report
            .words
            .headline
            .starts_with("fits (the compile did not finish): needs 1.00GiB"));
        assert_eq!(
            report.words.unfinished.as_deref(),
            Some(
                "the compile did not finish (INTERNAL: CUDA Runtime error: ...); these are the \
                 figures of the module XLA had optimized and assigned buffers to before it stopped"
            )
        );
        let over = FitsReport::new(
            Limit::target(h100),
            Figures {
                needed_bytes: 70 * GIB,
                ..figures
            },
            Some("INTERNAL".into()),
        );
        assert!(over
            .words
            .headline
            .starts_with("does not fit (the compile did not finish): needs 70.00GiB"));
    }

    #[test]
    fn against_a_budget_exactly_at_it_fits_one_byte_over_does_not() {
        let budget = 16 * GIB;
        let at = budgeted(budget, budget, None, false);
        assert!(at.fit.fits);
        assert_eq!((at.fit.deciding_bytes, at.fit.spare_bytes), (budget, 0));
        assert_eq!(
            at.words.headline,
            "fits: needs 16.00GiB, the budget is 16.00GiB, 0.00GiB to spare"
        );
        assert_eq!(
            at.words.basis,
            format!("the budget, one device's memory, is 16.00GiB ({budget} bytes)")
        );
        let over = budgeted(budget, budget + 1, None, false);
        assert!(!over.fit.fits);
        assert_eq!(over.fit.spare_bytes, -1);
        assert_eq!(
            over.words.headline,
            "does not fit: needs 16.00GiB, the budget is 16.00GiB, over by 0.00GiB"
        );
    }

    #[test]
    fn against_a_budget_xla_decides_when_it_differs_from_hlomem() {
        let budget = 12 * MIB;
        // hlomem's count within the budget, XLA's one byte over: XLA's decides.
        let over = budgeted(budget, budget, Some(budget + 1), false);
        assert!(!over.fit.fits);
        assert_eq!(over.fit.deciding_bytes, budget + 1);
        assert_eq!(
            over.words.headline,
            "does not fit: needs 12.00MiB, the budget is 12.00MiB, over by 0.00MiB"
        );
        assert!(over.words.basis.contains("they differ, and XLA's decides"));
        assert!(over.words.disagreement.is_some());
        // ... and the other way round.
        let within = budgeted(budget, budget + 1, Some(budget), false);
        assert!(within.fit.fits);
        assert_eq!(within.fit.deciding_bytes, budget);
        assert_eq!(
            within.words.headline,
            "fits: needs 12.00MiB, the budget is 12.00MiB, 0.00MiB to spare"
        );
    }

    #[test]
    fn against_a_budget_a_refusal_never_fits() {
        let refused = budgeted(16 * GIB, 19 * GIB, Some(18 * GIB), true);
        assert!(!refused.fit.fits);
        assert_eq!(refused.fit.deciding_bytes, 19 * GIB);
        assert_eq!(
            refused.words.headline,
            "does not fit (its compiler refused it): needs at least 19.00GiB, the budget is \
             16.00GiB, over by at least 3.00GiB"
        );
        let within = budgeted(16 * GIB, GIB, None, true);
        assert!(!within.fit.fits);
        assert!(within.words.headline.ends_with(", the budget is 16.00GiB"));
    }

    #[test]
    fn a_budget_is_said_in_json_instead_of_a_target() {
        let json = serde_json::to_value(budgeted(16 * GIB, GIB, None, false)).unwrap();
        assert_eq!(json["budget_bytes"], 16 * GIB);
        assert!(json.get("target").is_none(), "{json}");
        let json = serde_json::to_value(verdict(&v5e(), GIB, None, false)).unwrap();
        assert!(json.get("budget_bytes").is_none(), "{json}");
        assert_eq!(json["target"]["usable_bytes"], v5e().usable_bytes);
    }

    #[test]
    fn small_programs_in_mib_differences_in_gib() {
        let small = verdict(&v5e(), 6_500_000, None, false);
        assert!(small.words.headline.starts_with("fits: needs 6.20MiB"));
        assert_eq!(small.words.needs, "6.20MiB");
    }
}
