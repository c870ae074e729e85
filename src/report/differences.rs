//! Where two figures of a report differ, and why, as data: every renderer says
//! it in the same words (`message`).

use serde::Serialize;

use crate::units::human_bytes;

/// Why two numbers a reader compares are not equal.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Difference {
    /// XLA's total counts each allocation for the whole run; at the peak part
    /// of it holds nothing. The parts add up to `total_bytes - live_peak_bytes`.
    TotalAboveLivePeak {
        /// Whether both figures are XLA's to the byte; when not, the words
        /// say "about" on every size.
        exact: bool,
        /// What must fit (device memory: the total off TPU, HBM on TPU).
        total_bytes: u64,
        live_peak_bytes: u64,
        /// Of the scratch block: room for values live at other moments.
        temp_not_in_use: u64,
        /// Outputs not written yet, or already handed over.
        outputs_not_in_use: u64,
        /// Donated arguments whose buffers already passed to an output, and
        /// argument bytes outside any live value.
        arguments_not_in_use: u64,
        /// Constants and anything else allocated but not live then.
        other_not_in_use: u64,
    },
    /// Execution steps (the chart's x axis, "step N of M") count the
    /// instructions that run, not those inside fusions.
    ScheduleIsNotInstructionCount { steps: u32, instructions: usize },
}

impl Difference {
    pub fn message(&self) -> String {
        match self {
            Difference::TotalAboveLivePeak {
                exact,
                total_bytes,
                live_peak_bytes,
                temp_not_in_use,
                outputs_not_in_use,
                arguments_not_in_use,
                other_not_in_use,
            } => {
                let size = |b: u64| match exact {
                    true => human_bytes(b),
                    false => format!("about {}", human_bytes(b)),
                };
                let parts: Vec<String> = [
                    (*temp_not_in_use, "of the scratch block is kept for values live at other moments"),
                    (*outputs_not_in_use, "of outputs are not written yet"),
                    (*arguments_not_in_use, "of arguments are no longer needed"),
                    (*other_not_in_use, "of constants and other buffers are idle"),
                ]
                .iter()
                .filter(|(b, _)| *b > 0)
                .map(|(b, what)| format!("{} {what}", size(*b)))
                .collect();
                // The gap is named: two sizes a few MiB apart print alike
                // (`82.26GiB` and `82.26GiB`).
                format!(
                    "what must fit ({}) is {} above the live peak ({}) because memory is reserved for the whole run: at the peak, {}",
                    size(*total_bytes),
                    size(total_bytes.saturating_sub(*live_peak_bytes)),
                    size(*live_peak_bytes),
                    if parts.is_empty() {
                        "the allocations hold less than they reserve".to_string()
                    } else {
                        parts.join(", ")
                    }
                )
            }
            Difference::ScheduleIsNotInstructionCount { steps, instructions } => format!(
                "steps are the {steps} instructions that run, in execution order; the module's {instructions} \
                 also count those inside fusions"
            ),
        }
    }
}
