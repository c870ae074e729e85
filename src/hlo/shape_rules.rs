//! The shape rules of XLA's HLO verifier (`ShapeVerifier`) for the
//! instructions whose sizes the accounting counts directly: elementwise ops
//! produce an array of their operands' dimensions, and a bitcast keeps its
//! operand's bits. XLA's parser takes the shape a line declares; a line that
//! contradicts its operands (`f32[1024,1024] negate(f32[1024])`) is a module
//! XLA would reject before compiling, and hlomem would count the wrong bytes.
//!
//! Only dimensions and element types are compared: layouts are the layout
//! pass's to choose, and dynamic dimensions are compared as written.

use super::opcode::Opcode;
use super::shape::{ArrayShape, ElementType, Shape};

/// What the verifier would say of an instruction of `opcode` with this
/// result and these operands, or `None` if its shapes agree (or the opcode
/// has no rule here).
pub(super) fn problem(opcode: &Opcode, result: &Shape, operands: &[&Shape]) -> Option<String> {
    use Opcode::*;
    let same_type = match opcode {
        // A copy may copy a tuple; an array's copy is elementwise.
        Copy if !(result.is_array() && operands.iter().all(|o| o.is_array())) => return None,
        Negate | Exp | Log | Sqrt | Rsqrt | Tanh | Logistic | Not | Sign | Floor | Ceil | Copy
        | Add | Subtract | Multiply | Divide | Maximum | Minimum | Power | Remainder | And | Or
        | Xor | Atan2 | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical => true,
        // The result's element type is its own: `abs` of a complex is real,
        // `compare` gives `pred`, `convert` changes it.
        Abs | Compare | Convert => false,
        Bitcast => return bitcast(result, operands.first()?),
        _ => return None,
    };
    let Shape::Array(out) = result else {
        return Some(format!(
            "`{opcode}` is elementwise: its result is an array, not {result}"
        ));
    };
    for (i, operand) in operands.iter().enumerate() {
        let Shape::Array(input) = operand else {
            return Some(format!(
                "`{opcode}` is elementwise: operand {i} is {operand}, not an array"
            ));
        };
        if input.dims != out.dims {
            return Some(format!(
                "`{opcode}` is elementwise: its result {result} must have the dimensions of operand {i}, {operand}"
            ));
        }
        // Backends that allow mixed precision (XLA's `allow_mixed_precision`)
        // mix floating-point types in one op.
        let mixed_precision = is_float(input.element) && is_float(out.element);
        if same_type && input.element != out.element && !mixed_precision {
            return Some(format!(
                "`{opcode}` keeps its operands' element type: the result is {}, operand {i} is {}",
                out.element.as_str(),
                input.element.as_str()
            ));
        }
    }
    None
}

fn is_float(t: ElementType) -> bool {
    use ElementType::*;
    !matches!(
        t,
        Pred | S1
            | S2
            | S4
            | S8
            | S16
            | S32
            | S64
            | U1
            | U2
            | U4
            | U8
            | U16
            | U32
            | U64
            | C64
            | C128
            | Token
            | Opaque
    )
}

/// A bitcast reinterprets its operand's bytes: as many bits in, as out.
fn bitcast(result: &Shape, operand: &Shape) -> Option<String> {
    let (Shape::Array(out), Shape::Array(input)) = (result, operand) else {
        return None;
    };
    let (Some(a), Some(b)) = (bits(out), bits(input)) else {
        return None;
    };
    (a != b).then(|| {
        format!(
            "`bitcast` keeps its operand's bits: {result} holds {} bytes, its operand {operand} {}",
            a.div_ceil(8),
            b.div_ceil(8)
        )
    })
}

/// The bits of a static array's elements (`None` if dynamic, packed or tiled
/// by its layout, or past 2^64: a tiled bitcast keeps the padded bytes, which
/// only the target knows, as TPU's `f32[8,33]` of an `f32[8,64]` does).
fn bits(shape: &ArrayShape) -> Option<u64> {
    if shape.is_dynamic()
        || matches!(shape.element, ElementType::Token | ElementType::Opaque)
        || shape
            .layout
            .as_ref()
            .is_some_and(|l| l.element_size_bits.is_some() || !l.tiles.is_empty())
    {
        return None;
    }
    shape
        .element_count()?
        .checked_mul(shape.element.bit_width())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Shape {
        let module = format!("HloModule m\n\nENTRY e {{\n  ROOT p = {text} parameter(0)\n}}\n");
        let module = crate::parse_text("s.txt", module).unwrap();
        (*module.instr(module.entry().root).shape).clone()
    }

    #[test]
    fn elementwise_results_have_their_operands_dimensions() {
        let (v, m, s8) = (
            shape("f32[1024]{0}"),
            shape("f32[1024,1024]{1,0}"),
            shape("s8[1024]{0}"),
        );
        assert!(problem(&Opcode::Negate, &v, &[&v]).is_none());
        assert!(problem(&Opcode::Negate, &m, &[&v])
            .unwrap()
            .contains("dimensions"));
        assert!(problem(&Opcode::Add, &s8, &[&v, &v])
            .unwrap()
            .contains("element type"));
        assert!(problem(&Opcode::Convert, &s8, &[&v]).is_none());
        let tuple = shape("(f32[1024]{0})");
        assert!(problem(&Opcode::Negate, &tuple, &[&v])
            .unwrap()
            .contains("not (f32"));
    }

    #[test]
    fn bitcasts_keep_their_bits() {
        let (v, square, big) = (
            shape("f32[4]{0}"),
            shape("f32[2,2]{1,0}"),
            shape("f32[400]{0}"),
        );
        assert!(problem(&Opcode::Bitcast, &square, &[&v]).is_none());
        assert!(problem(&Opcode::Bitcast, &shape("s32[4]{0}"), &[&v]).is_none());
        assert!(problem(&Opcode::Bitcast, &big, &[&v])
            .unwrap()
            .contains("1600 bytes"));
    }
}
