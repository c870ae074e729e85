//! HLO opcodes. The list is XLA's (`xla/hlo/ir/hlo_opcode.h`); anything else, such
//! as an opcode added after this list was written, is kept as `Other`.

use std::fmt;

macro_rules! opcodes {
    ($($variant:ident => $text:literal,)*) => {
        /// An instruction's opcode.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum Opcode {
            $($variant,)*
            /// An opcode this version of hlomem does not know, e.g. from a newer XLA.
            /// Boxed twice: a thin pointer keeps `Opcode` at 16 bytes (not 24),
            /// and every instruction and deferred line read has one.
            Other(Box<String>),
        }

        impl Opcode {
            pub fn parse(text: &str) -> Opcode {
                match text {
                    $($text => Opcode::$variant,)*
                    other => Opcode::Other(Box::new(other.to_string())),
                }
            }
            pub fn as_str(&self) -> &str {
                match self {
                    $(Opcode::$variant => $text,)*
                    Opcode::Other(text) => text.as_str(),
                }
            }
        }
    };
}

opcodes! {
    Abs => "abs", Acos => "acos", Acosh => "acosh", Add => "add", AddDependency => "add-dependency",
    AfterAll => "after-all", AllGather => "all-gather", AllGatherDone => "all-gather-done",
    AllGatherStart => "all-gather-start", AllReduce => "all-reduce", AllReduceDone => "all-reduce-done",
    AllReduceStart => "all-reduce-start", AllToAll => "all-to-all", And => "and", Asin => "asin",
    Asinh => "asinh", AsyncDone => "async-done", AsyncStart => "async-start", AsyncUpdate => "async-update",
    Atan2 => "atan2", Atanh => "atanh", BatchNormGrad => "batch-norm-grad",
    BatchNormInference => "batch-norm-inference", BatchNormTraining => "batch-norm-training",
    Bitcast => "bitcast", BitcastConvert => "bitcast-convert", Broadcast => "broadcast", Call => "call",
    Cbrt => "cbrt", Ceil => "ceil", Cholesky => "cholesky", Clamp => "clamp", Clz => "count-leading-zeros",
    CollectiveBroadcast => "collective-broadcast", CollectivePermute => "collective-permute",
    CollectivePermuteDone => "collective-permute-done", CollectivePermuteStart => "collective-permute-start",
    Compare => "compare", Complex => "complex", Concatenate => "concatenate", Conditional => "conditional",
    Constant => "constant", Convert => "convert", Convolution => "convolution", Copy => "copy",
    CopyDone => "copy-done", CopyStart => "copy-start", Cos => "cosine", Cosh => "cosh",
    CustomCall => "custom-call", Divide => "divide", Domain => "domain", Dot => "dot",
    DynamicReshape => "dynamic-reshape", DynamicSlice => "dynamic-slice",
    DynamicUpdateSlice => "dynamic-update-slice", Erf => "erf", Exp => "exponential",
    Expm1 => "exponential-minus-one", Fft => "fft", Floor => "floor", Fusion => "fusion", Gather => "gather",
    GetDimensionSize => "get-dimension-size", GetTupleElement => "get-tuple-element", Imag => "imag",
    Infeed => "infeed", Iota => "iota", IsFinite => "is-finite", Log => "log", Log1p => "log-plus-one",
    Logistic => "logistic", Map => "map", Maximum => "maximum", Minimum => "minimum", MulHi => "mulhi",
    Multiply => "multiply", Negate => "negate", Not => "not", OptimizationBarrier => "opt-barrier",
    Or => "or", Outfeed => "outfeed", Pad => "pad", Parameter => "parameter", PartitionId => "partition-id",
    PopulationCount => "popcnt", Power => "power", RaggedAllToAll => "ragged-all-to-all",
    RaggedDot => "ragged-dot", Real => "real", Recv => "recv", RecvDone => "recv-done", Reduce => "reduce",
    ReducePrecision => "reduce-precision", ReduceScatter => "reduce-scatter", ReduceWindow => "reduce-window",
    Remainder => "remainder", ReplicaId => "replica-id", Reshape => "reshape", Reverse => "reverse",
    Rng => "rng", RngBitGenerator => "rng-bit-generator", RngGetAndUpdateState => "rng-get-and-update-state",
    RoundNearestAfz => "round-nearest-afz", RoundNearestEven => "round-nearest-even", Rsqrt => "rsqrt",
    ScaledDot => "scaled-dot", Scan => "scan", Scatter => "scatter", Select => "select",
    SelectAndScatter => "select-and-scatter", Send => "send", SendDone => "send-done",
    SetDimensionSize => "set-dimension-size", ShiftLeft => "shift-left",
    ShiftRightArithmetic => "shift-right-arithmetic", ShiftRightLogical => "shift-right-logical",
    Sign => "sign", Sin => "sine", Sinh => "sinh", Slice => "slice", Sort => "sort", Sqrt => "sqrt",
    StochasticConvert => "stochastic-convert", Subtract => "subtract", Tan => "tan", Tanh => "tanh",
    TopK => "topk", Transpose => "transpose", TriangularSolve => "triangular-solve", Tuple => "tuple",
    While => "while", Xor => "xor",
}

impl Opcode {
    /// Whether this opcode is one of XLA's, as opposed to one kept generically.
    pub fn is_known(&self) -> bool {
        !matches!(self, Opcode::Other(_))
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_opcodes_round_trip() {
        for text in [
            "add",
            "get-tuple-element",
            "all-reduce-start",
            "opt-barrier",
            "count-leading-zeros",
        ] {
            let op = Opcode::parse(text);
            assert!(op.is_known(), "{text}");
            assert_eq!(op.as_str(), text);
        }
        let newer = Opcode::parse("ragged-all-gather-v2");
        assert!(!newer.is_known());
        assert_eq!(newer.as_str(), "ragged-all-gather-v2");
    }
}
