//! Sizes for people: the byte formatters (as XLA prints them, and with two
//! decimals as a verdict prints its figures) and the one parser of sizes
//! people type (`--budget`, `--fail-over`).
//!
//! Units: `K`, `M`, `G`, `T` are binary, as in XLA's own messages (`16G` of
//! HBM is 16 GiB), and so are `KiB`, `MiB`, `GiB`, `TiB`; only `KB`, `MB`, `GB`,
//! `TB` are decimal (10^3 ...).

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

/// Every byte, in groups of three: `2,103,296 B`, where two figures differ by
/// less than the last digit [`human_bytes`] shows.
pub fn exact_bytes(bytes: u64) -> String {
    let digits = bytes.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 2);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out + " B"
}

/// A size with two decimals, written as XLA writes sizes (number and unit
/// together), as a verdict prints its figures: `11.30GiB`, `16.00GiB`; in
/// MiB under 1 GiB (`6.20MiB`), so that a small program does not read as
/// 0.00GiB, unless `small_in_mib` is false (a difference of two sizes in
/// GiB: `over by 0.20GiB`).
///
/// Its own rounding, not [`human_bytes`]'s: XLA's format picks the unit
/// and the decimals by the size (`512B`, `5.0KiB`, `9.22MiB`), so beside a
/// need and a limit in GiB a small difference would change unit. A verdict
/// rounds each figure once, to two decimals, and says a difference in the
/// limit's unit (GiB; MiB for a budget under 1 GiB), so need, limit and
/// difference read against each other: `needs 15.76GiB, ... is 15.75GiB,
/// over by 0.01GiB`, not `over by 9.22MiB`.
pub fn two_decimals(bytes: i128, small_in_mib: bool) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    if bytes.unsigned_abs() < 1 << 30 && small_in_mib {
        return format!("{:.2}MiB", bytes as f64 / MIB);
    }
    format!("{:.2}GiB", bytes as f64 / GIB)
}

/// A size's number and unit (`16` and `GiB` of `16 GiB`; the unit is empty
/// for bare bytes). An `e` is an exponent only where digits (or a sign and
/// digits) follow: in `16EiB` it begins the unit, which is then named in the
/// error.
fn split_unit(text: &str) -> (&str, &str) {
    let t = text.trim();
    let bytes = t.as_bytes();
    let exponent_at = |i: usize| {
        let rest = &bytes[i + 1..];
        let rest = rest
            .strip_prefix(b"+")
            .or(rest.strip_prefix(b"-"))
            .unwrap_or(rest);
        rest.first().is_some_and(u8::is_ascii_digit)
    };
    let split = (0..bytes.len())
        .find(|&i| match bytes[i] {
            b'0'..=b'9' | b'.' | b'+' | b'-' => false,
            b'e' | b'E' => !exponent_at(i),
            _ => true,
        })
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    (number, unit.trim())
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

/// A budget: [`parse_bytes`], and at least 1 MiB unless written in bytes
/// (`107B`). No device has less, so `--budget 16` (16 bytes) or
/// `0.0000001GiB` (107 bytes) is a slip, refused with the size it was
/// probably meant to be, never taken as a budget that fails every module.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bytes = parse_bytes(text)?;
    let (number, unit) = split_unit(text);
    if bytes > 0 && bytes < 1 << 20 && !unit.eq_ignore_ascii_case("b") {
        return Err(if unit.is_empty() {
            format!(
                "{number:?} is {bytes} bytes, less than any device has: did you mean {number}GiB? \
                 (write {number}B if you mean bytes)"
            )
        } else {
            format!(
                "{text:?} is {bytes} bytes, less than any device has; write {bytes}B if you mean it"
            )
        });
    }
    match bytes {
        0 => Err(format!(
            "{text:?} is 0 bytes; a budget must be at least 1 byte"
        )),
        bytes => Ok(bytes),
    }
}

/// Parses `16GiB`, `16G`, `80GB`, `1.5TiB`, `512 MiB`, `1e9` or plain bytes,
/// in integers (no floating point). A size with a unit that is not a whole
/// number of bytes is rounded to the nearest byte (half up): sizes are
/// printed to two decimals (`7.63MiB` is 8,000,634.88 bytes), and one copied
/// back should be taken. A bare number is bytes and must be whole (`1.5` is
/// no size). Past 2^64 - 1 bytes is refused; zero is allowed here (a limit on
/// growth, `diff --fail-over 0`: any growth fails), not in [`parse_size`].
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let (number, unit) = split_unit(text);
    let scale: u128 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "k" | "ki" | "kib" => 1 << 10,
        "m" | "mi" | "mib" => 1 << 20,
        "g" | "gi" | "gib" => 1 << 30,
        "t" | "ti" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use B; K, M, G, T or KiB, MiB, GiB, TiB for powers of 1024; \
                 KB, MB, GB, TB for powers of 1000)"
            ))
        }
    };
    let not_a_size = || format!("{text:?} is not a size (e.g. 16GiB, 80GB, 1.5TiB, 1000000)");
    let (mantissa, exponent) = match number.find(['e', 'E']) {
        Some(i) => (
            &number[..i],
            number[i + 1..].parse::<i32>().map_err(|_| not_a_size())?,
        ),
        None => (number, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = format!("{whole}{fraction}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_a_size());
    }
    let too_large = || format!("{text:?} is more than 2^64 - 1 bytes");
    // A fraction of a byte is a slip when no unit says what it is a fraction
    // of (`--budget 1.5`); with one it is a printed size taken back.
    let not_whole = || {
        format!(
            "{text:?} is not a whole number of bytes; add a unit (e.g. {}GiB) or give whole bytes",
            number.trim()
        )
    };
    // value = digits × 10^power × scale, computed in integers.
    let power = i64::from(exponent) - fraction.len() as i64;
    let digits = digits.trim_start_matches('0');
    if digits.len() > 38 {
        return Err(too_large());
    }
    let mut value: u128 = digits.parse().unwrap_or(0);
    if value == 0 {
        return Ok(0);
    }
    value = value.checked_mul(scale).ok_or_else(too_large)?;
    if power >= 0 {
        for _ in 0..power {
            value = value.checked_mul(10).ok_or_else(too_large)?;
        }
    } else {
        // value / 10^k, rounded half up; past 10^38 the quotient is 0.
        value = match 10u128.checked_pow(u32::try_from(power.unsigned_abs()).unwrap_or(u32::MAX)) {
            Some(divisor) => {
                let (quotient, remainder) = (value / divisor, value % divisor);
                if remainder != 0 && unit.is_empty() {
                    return Err(not_whole());
                }
                quotient + u128::from(remainder >= divisor - remainder)
            }
            None if unit.is_empty() => return Err(not_whole()),
            None => 0,
        };
    }
    u64::try_from(value).map_err(|_| too_large())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bytes_groups_digits_in_threes() {
        assert_eq!(exact_bytes(0), "0 B");
        assert_eq!(exact_bytes(512), "512 B");
        assert_eq!(exact_bytes(2_102_816), "2,102,816 B");
        assert_eq!(exact_bytes(100_701_184), "100,701,184 B");
    }

    #[test]
    fn verdict_figures_read_as_xla_writes_sizes() {
        // Number and unit together, as `human_bytes`; two decimals always,
        // MiB under 1 GiB unless asked for GiB, negatives signed.
        assert_eq!(two_decimals(0, true), "0.00MiB");
        assert_eq!(two_decimals(6_501_171, true), "6.20MiB");
        assert_eq!(two_decimals((1 << 30) - 1, true), "1024.00MiB");
        assert_eq!(two_decimals(1 << 30, true), "1.00GiB");
        assert_eq!(two_decimals(16_911_433_728, true), "15.75GiB");
        assert_eq!(two_decimals(214_748_365, false), "0.20GiB");
        assert_eq!(two_decimals(-87_241_523_200, false), "-81.25GiB");
        // What a verdict prints is taken back by the parser of typed sizes.
        assert_eq!(parse_size("15.75GiB"), Ok(16_911_433_728));
    }

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

    #[test]
    fn sizes_parse_exactly() {
        assert_eq!(parse_size("16GiB"), Ok(16 << 30));
        assert_eq!(parse_size("16G"), Ok(16 << 30));
        assert_eq!(parse_size("80GB"), Ok(80_000_000_000));
        assert_eq!(parse_size("1.5TiB"), Ok(1_649_267_441_664));
        assert_eq!(parse_size("1000B"), Ok(1000));
        assert_eq!(parse_size("2000000"), Ok(2_000_000));
        assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_size("2.5e6"), Ok(2_500_000));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        for bad in [
            "lots",
            "3 parsecs",
            "18446744073709551616",
            "16EiB",
            "0.0000001",
            "0.4",
            "0",
            "-1GiB",
            "1e",
            ".",
            "1e99999",
            "0e999999999",
            "1e-999999999",
        ] {
            assert!(parse_size(bad).is_err(), "{bad} must be refused");
        }
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("0MiB"), Ok(0));
        assert!(parse_bytes("-0").is_err());
        // Fractions of a byte round to the nearest: a printed size is taken back.
        assert_eq!(parse_size("7.63MiB"), Ok(8_000_635));
        assert_eq!(parse_bytes("0.5KiB"), Ok(512));
        assert_eq!(parse_bytes("0.00049KiB"), Ok(1));
        // ... but a bare number is bytes, and a fraction of one is a slip.
        for bare in ["1.5", "0.5", "1e-3", "2.0000001e6"] {
            let error = parse_bytes(bare).unwrap_err();
            assert!(
                error.contains("not a whole number of bytes"),
                "{bare}: {error}"
            );
        }
        assert_eq!(parse_bytes("2.5e3"), Ok(2500));
        // A budget under 1 MiB is a slip unless written in bytes.
        let error = parse_size("16").unwrap_err();
        assert!(error.contains("did you mean 16GiB?"), "{error}");
        let error = parse_size("0.0000001GiB").unwrap_err();
        assert!(
            error.contains("is 107 bytes") && error.contains("107B"),
            "{error}"
        );
        assert_eq!(parse_size("107B"), Ok(107));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("13.77GiB"), Ok(14_785_424_916));
        // A unit that starts with E is named as the unit, not read as an exponent.
        let error = parse_size("99999999EiB").unwrap_err();
        assert!(error.contains("unknown unit \"eib\""), "{error}");
    }
}
