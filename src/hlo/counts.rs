//! The counts XLA's parser and verifier fix for every instruction line, read
//! by both paths that check lines: the parsed one (`resolve`, `verify`) and the
//! token-level check of bodies loading does not parse (`body_check`).

use super::opcode::Opcode;

/// How many operands an opcode may have.
#[derive(Clone, Copy)]
pub(super) enum Arity {
    Exactly(usize),
    AtLeast(usize),
}

impl Arity {
    pub(super) fn admits(self, n: usize) -> bool {
        match self {
            Arity::Exactly(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        }
    }
}

/// `2` or `at least 1`: how many operands, in a message.
impl std::fmt::Display for Arity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arity::Exactly(k) => write!(f, "{k}"),
            Arity::AtLeast(k) => write!(f, "at least {k}"),
        }
    }
}

/// The operand counts XLA's verifier enforces, for the opcodes whose operands
/// the dataflow and sharing rules read; others (and unknown opcodes) are free.
pub(super) fn arity(opcode: &Opcode) -> Option<Arity> {
    use Opcode::*;
    Some(match opcode {
        Parameter | Constant | Iota => Arity::Exactly(0),
        GetTupleElement
        | Bitcast
        | Copy
        | CopyStart
        | CopyDone
        | While
        | AllReduceDone
        | AllGatherDone
        | CollectivePermuteDone
        | AsyncDone
        | Reshape
        | Transpose
        | Broadcast
        | Convert
        | BitcastConvert
        | Reverse
        | Slice
        | Negate
        | Abs
        | Exp
        | Log
        | Sqrt
        | Rsqrt
        | Tanh
        | Logistic
        | Not
        | Sign
        | Floor
        | Ceil => Arity::Exactly(1),
        Add | Subtract | Multiply | Divide | Maximum | Minimum | Power | Remainder | And | Or
        | Xor | Compare | Atan2 | Complex | ShiftLeft | ShiftRightArithmetic
        | ShiftRightLogical => Arity::Exactly(2),
        Select | Clamp => Arity::Exactly(3),
        DynamicUpdateSlice => Arity::AtLeast(2),
        DynamicSlice | Conditional => Arity::AtLeast(1),
        _ => return None,
    })
}

/// What is wrong with a computation's parameter numbers, sorted: which one
/// (its index in `sorted`) and what, in words after "parameter(N) of `%c`".
/// XLA's parser wants `0..n` once each (a number past the count aborts it).
pub(super) fn parameter_numbers_problem(sorted: &[u64]) -> Option<(usize, String)> {
    let count = sorted.len();
    // A number past the count is surely the wrong one (with 0 and 7 of two,
    // the 7): named before a gap, which only says where numbering broke.
    if sorted.last().is_some_and(|&n| n >= count as u64) {
        return Some((
            count - 1,
            format!("is out of range: it has {count} parameter(s), numbered from 0"),
        ));
    }
    sorted.iter().enumerate().find_map(|(expected, &n)| {
        let what = match n.cmp(&(expected as u64)) {
            std::cmp::Ordering::Equal => return None,
            std::cmp::Ordering::Less => "is declared twice",
            std::cmp::Ordering::Greater => "skips a number",
        };
        Some((expected, what.to_string()))
    })
}
