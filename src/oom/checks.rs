//! The message's numbers checked against each other and against what a
//! device can hold. A problem found here is said plainly and the number is
//! not used for arithmetic or advice.

use serde::Serialize;

use super::model::{Amount, OomMessage};
use crate::units::human_bytes;

/// More than any single accelerator holds (the largest GPUs of 2025 have
/// 288 GB): one allocation of this size is a shape mistake, or a problem
/// that must be split. The same bound holds for host memory: an allocation
/// a GPU could not hold is no more meant for one buffer in RAM (a 10^6 x 10^6
/// float32 matrix is 3.6 TiB wherever it is asked for), and saying so the
/// same way everywhere is what makes the verdict trustworthy.
pub const LARGEST_DEVICE_BYTES: u64 = 288_000_000_000;

/// How far rounded figures may disagree: each is printed with 3 or 4
/// significant digits, so a sum of a few may be off by well under 1%.
fn agree(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= a.max(b) / 100 + (1 << 20)
}

/// Which of the message's numbers a problem is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Quantity {
    Requested,
    ProgramUsage,
    ExceededBy,
    CompileRequires,
    TempAllocation,
    TotalAllocation,
    Buffer,
    /// The driver's figure for the whole device (`total memory reported: N`).
    DeviceTotal,
}

impl Quantity {
    pub fn words(self) -> &'static str {
        match self {
            Quantity::Requested => "the requested allocation",
            Quantity::ProgramUsage => "the program's memory use",
            Quantity::ExceededBy => "the amount over capacity",
            Quantity::CompileRequires => "the memory the compiler says the program requires",
            Quantity::TempAllocation => "the preallocated temp allocation",
            Quantity::TotalAllocation => "the total allocation",
            Quantity::Buffer => "a buffer",
            Quantity::DeviceTotal => "the device's total memory as the driver reported it",
        }
    }
}

/// Something in the message that cannot be right.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Problem {
    /// A size no single device holds: a shape mistake (a dimension too many,
    /// a batch where a feature size belongs), not something to optimize.
    ImpossibleSize {
        quantity: Quantity,
        bytes: u64,
        /// The shape, when the message gives it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shape: Option<String>,
    },
    /// Close to 2^64 bytes: a negative or uninitialized size printed as unsigned.
    Wraparound { quantity: Quantity, bytes: u64 },
    /// `Used X of Y ... Exceeded by Z` where Z is not X − Y.
    ExceededByMismatch {
        used: u64,
        capacity: u64,
        exceeded_by: u64,
    },
    /// `Scoped allocation with size X and limit Y exceeded ... by Z` where Z is not X − Y.
    ScopedMismatch {
        size: u64,
        limit: u64,
        exceeded_by: u64,
    },
    /// The compiler aborted for lack of memory yet says what it requires fits.
    RequiresFits { requires: u64, available: u64 },
    /// The stats' rows do not add up to their total, by more than rounding
    /// and what no row counts (thread-local scratch, tuple tables), or by more
    /// than donated parameters counted twice.
    StatsDoNotAddUp { sum: u64, total: u64 },
    /// More memory free than the device has.
    FreeAboveTotal { free: u64, total: u64 },
}

impl Problem {
    pub fn message(&self) -> String {
        match self {
            Problem::ImpossibleSize {
                quantity,
                bytes,
                shape,
            } => {
                let shape = shape
                    .as_deref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default();
                format!(
                    "{} is {}{shape}, more than any device holds: check the shapes (a dimension too many, or \
                     sizes multiplied where they should not be); no advice below is computed from it",
                    capitalize(quantity.words()),
                    human_bytes(*bytes)
                )
            }
            Problem::Wraparound { quantity, bytes } => format!(
                "{} is {} ({bytes} bytes), next to 2^64: a negative or unset size printed as unsigned, a bug in \
                 what printed it; it is not used below",
                capitalize(quantity.words()),
                human_bytes(*bytes)
            ),
            Problem::ExceededByMismatch {
                used,
                capacity,
                exceeded_by,
            } => format!(
                "The message says {} used of {} but over capacity by {}, which is not the difference ({}): \
                 the message contradicts itself; the over-capacity figure is not used",
                human_bytes(*used),
                human_bytes(*capacity),
                human_bytes(*exceeded_by),
                human_bytes(used.saturating_sub(*capacity))
            ),
            Problem::ScopedMismatch {
                size,
                limit,
                exceeded_by,
            } => format!(
                "The scoped allocation is {} against a limit of {}, yet the message says it is over by {}: \
                 the message contradicts itself; the size and the limit are used",
                human_bytes(*size),
                human_bytes(*limit),
                human_bytes(*exceeded_by)
            ),
            Problem::RequiresFits {
                requires,
                available,
            } => format!(
                "The compiler aborted for lack of memory but says the program requires {} with {} available, \
                 which would fit: the estimate it printed is not the one it used",
                human_bytes(*requires),
                human_bytes(*available)
            ),
            Problem::StatsDoNotAddUp { sum, total } => format!(
                "The stats' rows add up to {} but the total says {}: these numbers do not add up (a unit or a row \
                 is wrong in what printed them); neither is used below",
                human_bytes(*sum),
                human_bytes(*total)
            ),
            Problem::FreeAboveTotal { free, total } => format!(
                "The message says {} free of {} in all: more free than there is; neither is used below",
                human_bytes(*free),
                human_bytes(*total)
            ),
        }
    }

    /// The quantity this problem makes unusable, if any.
    pub fn discredits(&self) -> Option<Quantity> {
        match self {
            Problem::ImpossibleSize { quantity, .. } | Problem::Wraparound { quantity, .. } => {
                Some(*quantity)
            }
            Problem::ExceededByMismatch { .. } => Some(Quantity::ExceededBy),
            Problem::StatsDoNotAddUp { .. } => Some(Quantity::TotalAllocation),
            Problem::FreeAboveTotal { .. } => Some(Quantity::DeviceTotal),
            _ => None,
        }
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Every problem with the message's numbers.
pub fn problems(msg: &OomMessage) -> Vec<Problem> {
    let mut out = Vec::new();
    let limit = LARGEST_DEVICE_BYTES;
    let mut size = |quantity: Quantity, amount: Option<Amount>, shape: Option<&str>| {
        let Some(bytes) = amount.map(|a| a.bytes) else {
            return;
        };
        if bytes >= 1 << 63 {
            out.push(Problem::Wraparound { quantity, bytes });
        } else if bytes > limit {
            out.push(Problem::ImpossibleSize {
                quantity,
                bytes,
                shape: shape.map(str::to_string),
            });
        }
    };
    size(Quantity::Requested, msg.requested, None);
    size(Quantity::TempAllocation, msg.stats.preallocated_temp, None);
    size(Quantity::TotalAllocation, msg.stats.total, None);
    if let Some(t) = &msg.tpu {
        size(Quantity::ProgramUsage, t.used, None);
        size(Quantity::CompileRequires, t.requires, None);
    }
    // One line for the largest impossible buffer is enough.
    if let Some(b) = msg
        .peak_buffers
        .iter()
        .filter(|b| b.size.is_some_and(|a| a.bytes > limit))
        .max_by_key(|b| b.size.map(|a| a.bytes))
    {
        size(Quantity::Buffer, b.size, b.shape.as_deref());
    }
    // A driver's total next to 2^64 is a negative or unset figure printed as unsigned.
    if let Some(total) = msg.device_total.filter(|t| t.bytes >= 1 << 63) {
        out.push(Problem::Wraparound {
            quantity: Quantity::DeviceTotal,
            bytes: total.bytes,
        });
    } else if let (Some(free), Some(total)) = (msg.device_free, msg.device_total) {
        if free.bytes > total.bytes {
            out.push(Problem::FreeAboveTotal {
                free: free.bytes,
                total: total.bytes,
            });
        }
    }
    if let Some(p) = stats_do_not_add_up(msg) {
        out.push(p);
    }
    if let Some(t) = &msg.tpu {
        if let (Some(used), Some(cap), Some(over)) = (t.used, t.capacity, t.exceeded_by) {
            if used.bytes > cap.bytes && !agree(used.bytes - cap.bytes, over.bytes) {
                out.push(Problem::ExceededByMismatch {
                    used: used.bytes,
                    capacity: cap.bytes,
                    exceeded_by: over.bytes,
                });
            }
        }
        if let Some(s) = t.scoped {
            if let (Some(size), Some(limit), Some(over)) = (s.size, s.limit, s.exceeded_by) {
                if size.bytes < limit.bytes || !agree(size.bytes - limit.bytes, over.bytes) {
                    out.push(Problem::ScopedMismatch {
                        size: size.bytes,
                        limit: limit.bytes,
                        exceeded_by: over.bytes,
                    });
                }
            }
        }
        if let (Some(req), Some(avail)) = (t.requires, t.available) {
            if req.bytes <= avail.bytes {
                out.push(Problem::RequiresFits {
                    requires: req.bytes,
                    available: avail.bytes,
                });
            }
        }
    }
    out
}

/// The stats block's rows against its total. Rows are rounded (3-4
/// significant digits) and allocations no row counts are small, so a total
/// above the rows by more than 64 MiB and 1% is not explained by anything
/// XLA does; rows above the total by more than the parameters that donation
/// counts twice (as parameter and as output) are not either.
fn stats_do_not_add_up(msg: &OomMessage) -> Option<Problem> {
    let s = &msg.stats;
    let total = s.total?.bytes;
    let rows = [
        s.parameter,
        s.constant,
        s.maybe_live_out,
        s.preallocated_temp,
    ];
    if rows.iter().all(Option::is_none) || total >= 1 << 63 {
        return None;
    }
    let sum = rows
        .iter()
        .flatten()
        .map(|a| a.bytes)
        .filter(|&b| b < 1 << 63)
        .try_fold(0u64, u64::checked_add)?;
    let slack = (64 << 20).max(total / 100);
    let twice = s
        .parameter
        .zip(s.maybe_live_out)
        .map_or(0, |(p, o)| p.bytes.min(o.bytes));
    let short = total > sum && total - sum > slack;
    let over = sum > total && sum - total > twice + slack;
    (short || over).then_some(Problem::StatsDoNotAddUp { sum, total })
}

/// Whether `quantity` may be used for arithmetic and advice.
pub fn usable(problems: &[Problem], quantity: Quantity) -> bool {
    !problems.iter().any(|p| p.discredits() == Some(quantity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oom::model::OomFormat;

    #[test]
    fn exabytes_are_a_shape_mistake() {
        let mut msg = OomMessage::new(OomFormat::TpuCompileAbort);
        msg.tpu = Some(Default::default());
        msg.tpu.as_mut().unwrap().requires = Amount::parse_human("3.47E");
        msg.tpu.as_mut().unwrap().available = Amount::parse_human("14.49G");
        let p = problems(&msg);
        assert!(matches!(p[0], Problem::ImpossibleSize { .. }), "{p:?}");
        assert!(p[0].message().contains("3.47EiB"));
        assert!(!usable(&p, Quantity::CompileRequires));
    }

    #[test]
    fn a_two_to_the_64_temp_is_not_arithmetic() {
        let mut msg = OomMessage::new(OomFormat::GpuBufferAssignment);
        msg.stats.preallocated_temp = Some(Amount::exact(u64::MAX - 5));
        let p = problems(&msg);
        assert!(matches!(p[0], Problem::Wraparound { .. }));
    }

    #[test]
    fn exceeded_by_must_be_the_difference() {
        let mut msg = OomMessage::new(OomFormat::TpuCompile);
        let t = msg.tpu.get_or_insert_with(Default::default);
        t.used = Amount::parse_human("21.95G");
        t.capacity = Amount::parse_human("15.48G");
        t.exceeded_by = Amount::parse_human("2147483648G");
        let p = problems(&msg);
        assert!(p
            .iter()
            .any(|p| matches!(p, Problem::ExceededByMismatch { .. })));
        msg.tpu.as_mut().unwrap().exceeded_by = Amount::parse_human("6.47G");
        assert!(problems(&msg).is_empty());
    }
}
