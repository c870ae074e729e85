//! Whether a program fits on one device of a target: the decision, as data
//! (`report::fits` words it). The figures come from outside: hlomem's
//! analysis of the compiled module, XLA's own buffer assignment when the
//! compile's dump has it, and, for a compile the target's compiler refused
//! for memory, the larger of the refusal's figure and the dumped module's.

use serde::Serialize;

/// What a program needs on one device, from whoever counted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Figures {
    /// hlomem's count of the device memory the program needs (when
    /// `at_least`, a lower bound).
    pub needed_bytes: u64,
    /// XLA's own figure for the same memory (its buffer assignment's total of
    /// the device's memory space), when its report was at hand.
    pub xla_bytes: Option<u64>,
    /// The target's compiler refused the program for memory: it needs at
    /// least this much (the compiler stops at the first refusal).
    pub at_least: bool,
}

/// The decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Fit {
    /// The figure decided on: XLA's when at hand (it is what the device's
    /// allocator will be asked for; hlomem's equals it unless hlomem's model
    /// misses one of XLA's rules), else hlomem's; for a refused compile the
    /// larger of the two lower bounds.
    pub deciding_bytes: u64,
    /// It fits: not refused, and `deciding_bytes` at most the usable bytes.
    pub fits: bool,
    /// Usable bytes left over; negative when it does not fit.
    pub spare_bytes: i128,
}

impl Fit {
    /// `figures` against `usable_bytes` of one device.
    pub fn decide(figures: &Figures, usable_bytes: u64) -> Fit {
        let deciding_bytes = match figures.xla_bytes {
            Some(xla) if !figures.at_least => xla,
            xla => figures.needed_bytes.max(xla.unwrap_or(0)),
        };
        Fit {
            deciding_bytes,
            fits: !figures.at_least && deciding_bytes <= usable_bytes,
            spare_bytes: i128::from(usable_bytes) - i128::from(deciding_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn figures(needed_bytes: u64, xla_bytes: Option<u64>, at_least: bool) -> Figures {
        Figures {
            needed_bytes,
            xla_bytes,
            at_least,
        }
    }

    #[test]
    fn fits_exactly_at_the_usable_bytes_and_not_one_byte_over() {
        let usable = 15 * GIB + 3;
        let at = Fit::decide(&figures(usable, None, false), usable);
        assert!(at.fits);
        assert_eq!(at.spare_bytes, 0);
        let over = Fit::decide(&figures(usable + 1, None, false), usable);
        assert!(!over.fits);
        assert_eq!(over.spare_bytes, -1);
        assert_eq!(over.deciding_bytes, usable + 1);
    }

    #[test]
    fn xla_decides_when_at_hand_either_way() {
        // hlomem's count under the limit, XLA's over: XLA's decides.
        let fit = Fit::decide(&figures(10 * GIB, Some(10 * GIB + 1), false), 10 * GIB);
        assert!(!fit.fits);
        assert_eq!(fit.deciding_bytes, 10 * GIB + 1);
        // ... and the other way round, even though XLA's is the smaller.
        let fit = Fit::decide(&figures(10 * GIB + 1, Some(10 * GIB), false), 10 * GIB);
        assert!(fit.fits);
        assert_eq!(fit.deciding_bytes, 10 * GIB);
    }

    #[test]
    fn a_refused_compile_never_fits_and_takes_the_larger_bound() {
        let fit = Fit::decide(&figures(GIB, None, true), 16 * GIB);
        assert!(!fit.fits);
        assert_eq!(fit.spare_bytes, i128::from(15 * GIB));
        let fit = Fit::decide(&figures(19 * GIB, Some(20 * GIB), true), 16 * GIB);
        assert_eq!(fit.deciding_bytes, 20 * GIB);
        let fit = Fit::decide(&figures(21 * GIB, Some(20 * GIB), true), 16 * GIB);
        assert_eq!(fit.deciding_bytes, 21 * GIB);
    }

    #[test]
    fn spare_bytes_do_not_overflow() {
        let fit = Fit::decide(&figures(u64::MAX, None, false), 0);
        assert_eq!(fit.spare_bytes, -i128::from(u64::MAX));
    }
}
