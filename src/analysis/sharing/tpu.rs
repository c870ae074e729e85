//! libtpu's own "may this output take over that operand's buffer?" hints.
//!
//! libtpu writes them into each instruction's backend config:
//! `"aliasing_operands":{"lists":[{"indices":["0","5"]}]}` pairs operand 0
//! with the output; an index past the last operand (`n + k` for `n`
//! operands) names output `{k}` of a tuple result, or the whole result when
//! it is not a tuple. The buffer-assignment reports show XLA honoring them
//! (a transposing update fusion written over its operand's buffer).

use super::gpu::all_reduce_in_place;
use crate::hlo::{InstrId, Module, Opcode};

pub fn may_alias(module: &Module, operand: InstrId, user: InstrId, output: &[u64]) -> Option<bool> {
    let user_instr = module.instr(user);
    if let Some(config) = module.attribute(user, "backend_config") {
        let n = user_instr.operands.len() as u64;
        let is_tuple = user_instr.shape.is_tuple();
        for (a, b) in aliasing_pairs(config) {
            let (op, out) = if a < n && b >= n {
                (a, b - n)
            } else if b < n && a >= n {
                (b, a - n)
            } else {
                continue;
            };
            let names_output = if is_tuple {
                output == [out]
            } else {
                output.is_empty() && out == 0
            };
            if names_output && user_instr.operands.get(op as usize) == Some(&operand) {
                return Some(true);
            }
        }
    }
    (user_instr.opcode == Opcode::AllReduce)
        .then(|| all_reduce_in_place(module, operand, user, output))
}

/// The `(i, j)` index pairs of `"aliasing_operands":{"lists":[{"indices":["i","j"]},...]}`.
fn aliasing_pairs(config: &str) -> Vec<(u64, u64)> {
    let Some(start) = config.find("\"aliasing_operands\"") else {
        return Vec::new();
    };
    let mut pairs = Vec::new();
    let mut rest = &config[start..];
    // The lists end at the first `]}` that closes them: `]}]}`.
    let end = rest.find("]}]}").map_or(rest.len(), |e| e + 4);
    rest = &rest[..end];
    while let Some(at) = rest.find("\"indices\":[") {
        rest = &rest[at + "\"indices\":[".len()..];
        let close = rest.find(']').unwrap_or(rest.len());
        let numbers: Vec<u64> = rest[..close]
            .split(',')
            .filter_map(|x| x.trim().trim_matches('"').parse().ok())
            .collect();
        if let [a, b] = numbers[..] {
            pairs.push((a, b));
        }
        rest = &rest[close..];
    }
    pairs
}

#[cfg(test)]
mod tests {
    #[test]
    fn aliasing_pairs_are_read_from_the_backend_config() {
        let config = r#"{"flag_configs":[],"aliasing_operands":{"lists":[{"indices":["1","6"]},{"indices":["2","7"]}]}}"#;
        assert_eq!(super::aliasing_pairs(config), vec![(1, 6), (2, 7)]);
        assert!(super::aliasing_pairs(r#"{"aliasing_operands":{"lists":[]}}"#).is_empty());
    }
}
