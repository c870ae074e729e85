//! The only byte formatter: sizes for people, as XLA prints them.

/// Formats like XLA's `HumanReadableNumBytes` (tsl/platform/numbers.cc, notes §2.6):
/// `512B`, `5.0KiB`, `6.00MiB`, `13.77GiB`. JSON carries exact integers instead.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    // XLA divides in integers while the value is at least 1 MiB, then prints
    // value / 1024 as a float: the digits are truncated at each step, not rounded.
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024 * 1024 {
        value /= 1024;
        unit += 1;
    }
    let shown = value as f64 / 1024.0;
    if unit == 0 {
        format!("{shown:.1}{}", UNITS[unit])
    } else {
        format!("{shown:.2}{}", UNITS[unit])
    }
}

/// A signed difference in the same format, with an explicit sign.
pub fn human_bytes_signed(delta: i128) -> String {
    let magnitude = human_bytes(u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX));
    if delta < 0 {
        format!("-{magnitude}")
    } else {
        format!("+{magnitude}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_xla_examples() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(5124), "5.0KiB");
        assert_eq!(human_bytes(6_291_456), "6.00MiB");
        assert_eq!(human_bytes(1_610_612_736), "1.50GiB");
        // The motivating OOM: one f64[42994,42994] and the parameters' total.
        assert_eq!(human_bytes(14_787_872_288), "13.77GiB");
        assert_eq!(human_bytes(29_575_744_576), "27.54GiB");
        assert_eq!(human_bytes(u64::MAX), "16.00EiB");
        assert_eq!(human_bytes_signed(-14_787_872_288), "-13.77GiB");
    }
}
