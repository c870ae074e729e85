//! Whether a piece of advice can work, measured against the message's own
//! figures: how far over the program is (the gap), and the most each action
//! can save. Advice that cannot close the gap is said to be partial and
//! ranked after what can; advice the figures rule out (a smaller batch when
//! the weights alone are over the device, a larger pool fraction when even
//! the whole device is less than one allocation) is not offered, and the
//! explanation says why.

use serde::Serialize;

use super::advice::Advice;
use super::checks::{self, Problem, Quantity};
use super::model::{OomMessage, Warning};
use super::situation::Situation;
use crate::units::human_bytes;

/// How far over the program is, from the message's own figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Gap {
    pub needs_bytes: u64,
    pub available_bytes: u64,
    /// Which figures: "the compiler's count against the HBM available".
    pub source: String,
}

impl Gap {
    pub fn over(&self) -> u64 {
        self.needs_bytes.saturating_sub(self.available_bytes)
    }

    pub fn ratio(&self) -> f64 {
        self.needs_bytes as f64 / self.available_bytes.max(1) as f64
    }

    pub fn sentence(&self) -> String {
        format!(
            "{} over: {} against {} ({})",
            human_bytes(self.over()),
            human_bytes(self.needs_bytes),
            human_bytes(self.available_bytes),
            self.source
        )
    }
}

/// The gap, when the message gives both sides of it.
pub fn gap(msg: &OomMessage, problems: &[Problem]) -> Option<Gap> {
    let usable = |q: Quantity| checks::usable(problems, q);
    let g = |needs: u64, available: u64, source: &str| {
        (needs > available && needs <= checks::LARGEST_DEVICE_BYTES).then(|| Gap {
            needs_bytes: needs,
            available_bytes: available,
            source: source.to_string(),
        })
    };
    if let Some(t) = &msg.tpu {
        if let Some(s) = t.scoped {
            if let (Some(size), Some(limit)) = (s.size, s.limit) {
                return g(
                    size.bytes,
                    limit.bytes,
                    "one kernel's scoped memory against its limit",
                );
            }
        }
        if let (Some(used), Some(cap)) = (t.used, t.capacity) {
            if usable(Quantity::ProgramUsage) {
                let needs = used
                    .bytes
                    .saturating_add(t.sparse_core.map_or(0, |a| a.bytes));
                return g(
                    needs,
                    cap.bytes,
                    "the compiler's count against what the memory space holds",
                );
            }
        }
        if let (Some(r), Some(a)) = (t.requires, t.available) {
            if usable(Quantity::CompileRequires) {
                return g(
                    r.bytes,
                    a.bytes,
                    "the compiler's estimate against what is available",
                );
            }
        }
    }
    for w in &msg.warnings {
        match *w {
            Warning::Rematerialization {
                limit_bytes: Some(limit),
                reached_bytes: Some(reached),
                ..
            } if limit > 0 => {
                return g(
                    reached,
                    limit,
                    "the compiler's memory limit, and where rematerialization left the program",
                )
            }
            Warning::ArgumentsExceedLimit {
                argument_bytes: Some(args),
                limit_bytes: Some(limit),
            } => {
                return g(
                    args,
                    limit,
                    "the program's inputs and outputs against the scheduler's limit",
                )
            }
            _ => {}
        }
    }
    None
}

/// What the figures say of one piece of advice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Feasibility {
    /// It saves at least the gap: alone, it makes the program fit.
    Closes { gap_bytes: u64 },
    /// It saves at most `saves_at_most`, less than the gap: not alone.
    Partial { saves_at_most: u64, gap_bytes: u64 },
    /// The message gives no gap, or the saving cannot be measured from it.
    Unknown,
}

/// Advice the figures rule out, and why: said, not silently dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RuledOut {
    /// What it would have been (`smaller-batch`, `pool-fraction`, ...).
    pub advice: String,
    pub why: String,
}

/// The arguments' row of the TPU usage table (weights and other inputs):
/// what no change of batch or sequence length can shrink.
pub fn argument_bytes(msg: &OomMessage) -> Option<u64> {
    let t = msg.tpu.as_ref()?;
    t.usage_rows
        .iter()
        .find(|(l, _)| l == "arguments")
        .and_then(|(_, a)| a.map(|a| a.bytes))
        .filter(|&b| b > 0)
}

/// The JAX default fraction of a GPU its pool takes (`.75` since 2023).
pub const DEFAULT_FRACTION: f64 = 0.75;
/// The most of a GPU a pool can usefully take (the driver, cuDNN and
/// cuBLAS need the rest).
pub const MAX_FRACTION: f64 = 0.95;

/// Judges one piece of advice; `Err` rules it out, with the reason.
pub fn judge(
    advice: &Advice,
    msg: &OomMessage,
    situation: &Situation,
    gap: Option<&Gap>,
) -> Result<Feasibility, String> {
    let h = human_bytes;
    // Twice over or more with nothing said of the weights: a cut of the
    // batch closes it only if nearly everything grows with the batch, which
    // the message cannot show; it is not offered as the change that closes it.
    if let (Advice::SmallerBatch { .. }, None, Some(gap)) = (advice, argument_bytes(msg), gap) {
        if gap.ratio() >= 2.0 {
            return Ok(Feasibility::Unknown);
        }
    }
    if let (Advice::SmallerBatch { .. } | Advice::SmallerBatchUnmeasured, Some(args), Some(gap)) =
        (advice, argument_bytes(msg), gap)
    {
        if args >= gap.available_bytes {
            return Err(format!(
                "a smaller batch or sequence cannot help: the arguments alone (weights and other inputs, {}) are more \
                 than the {} available, whatever the batch",
                h(args),
                h(gap.available_bytes)
            ));
        }
        let most = gap.needs_bytes - args;
        if most < gap.over() {
            return Ok(Feasibility::Partial {
                saves_at_most: most,
                gap_bytes: gap.over(),
            });
        }
    }
    if let Advice::PoolFraction { raise: true, .. } = advice {
        if !situation.unified() {
            if let Some(e) = raise_cannot_close(msg, situation, gap) {
                return Err(e);
            }
        }
    }
    if let Advice::Fragmentation {
        largest_free_region,
        requested,
    } = advice
    {
        let free = msg.tpu.as_ref().and_then(|t| t.free).map(|f| f.bytes);
        if free.is_some_and(|f| f < *requested) {
            return Err(format!(
                "defragmenting cannot help: less is free ({}) than the {} asked, even in one piece the largest being {}",
                h(free.unwrap_or(0)),
                h(*requested),
                h(*largest_free_region)
            ));
        }
    }
    let Some(gap) = gap else {
        return Ok(Feasibility::Unknown);
    };
    Ok(match advice.saves_bytes() {
        Some(s) if s >= gap.over() => Feasibility::Closes {
            gap_bytes: gap.over(),
        },
        Some(s) => Feasibility::Partial {
            saves_at_most: s,
            gap_bytes: gap.over(),
        },
        None => Feasibility::Unknown,
    })
}

/// Why a larger pool fraction cannot make room, when the figures show it:
/// the compiler's memory limit comes from the pool, so the most a larger
/// fraction gives is that limit scaled from the current fraction to .95; and
/// no fraction gives more than the device the driver reported.
fn raise_cannot_close(
    msg: &OomMessage,
    situation: &Situation,
    gap: Option<&Gap>,
) -> Option<String> {
    let h = human_bytes;
    let current = situation.fraction().unwrap_or(DEFAULT_FRACTION);
    if current >= MAX_FRACTION {
        return Some(format!(
            "a larger pool fraction is not available: it is {current} already, and the driver and libraries need the rest"
        ));
    }
    if let (Some(total), Some(req)) = (msg.device_total, msg.requested) {
        if req.bytes > total.bytes {
            return Some(format!(
                "a larger pool fraction cannot help: the {} asked is more than the whole device ({})",
                h(req.bytes),
                h(total.bytes)
            ));
        }
    }
    let gap = gap?;
    let most = (gap.available_bytes as f64 * MAX_FRACTION / current) as u64;
    (most < gap.needs_bytes).then(|| {
        format!(
            "a larger pool fraction cannot close the gap: the limit of {} comes from a pool of about {current} of the \
             device; even {MAX_FRACTION} of it gives about {}, less than the {} needed",
            h(gap.available_bytes),
            h(most),
            h(gap.needs_bytes)
        )
    })
}
