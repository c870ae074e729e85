//! Shapes, layouts and the one byte-size function.
//!
//! Sizes follow what XLA's CPU and GPU backends allocate (notes §4.8:
//! `ShapeUtil::ByteSizeOf` plus the backends' dynamic-shape metadata):
//! elements × element width, sub-byte types packed only when the layout says
//! `E(n)`, tuples are an index table of 8 bytes per element, `token` is empty,
//! `opaque` is one pointer, and a dynamic array carries 4 bytes per dimension.

use std::fmt;

use serde::Serialize;

/// Size of a pointer on every backend XLA dumps come from (CPU, GPU, TPU hosts).
pub const POINTER_SIZE: u64 = 8;

/// An HLO shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    Array(ArrayShape),
    Tuple(Vec<Shape>),
    /// `b(f32[8]{0})`: a buffer handle around an array (XLA 2025+).
    Buffer(Box<Shape>),
}

/// An array (including `token[]` and `opaque[]`, which XLA also prints with brackets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayShape {
    pub element: ElementType,
    pub dims: Vec<Dim>,
    pub layout: Option<Layout>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Static(u64),
    /// `<=N`: dynamic, at most N; memory is reserved for N.
    Bounded(u64),
    /// `?`: dynamic with no bound; XLA cannot size it, we count it as 0 elements.
    Unbounded,
}

impl Dim {
    /// The extent memory is reserved for.
    pub fn extent(self) -> u64 {
        match self {
            Dim::Static(n) | Dim::Bounded(n) => n,
            Dim::Unbounded => 0,
        }
    }
    pub fn is_dynamic(self) -> bool {
        !matches!(self, Dim::Static(_))
    }
}

/// `{minor_to_major:fields}`; only the fields that change sizes or placement are typed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layout {
    pub minor_to_major: Vec<u64>,
    /// `T(8,128)(2,1)`: outermost tile first; `None` is a `*` (combined) tile dimension.
    pub tiles: Vec<Vec<Option<u64>>>,
    /// `E(n)`: packed element size in bits.
    pub element_size_bits: Option<u64>,
    /// `S(n)`: memory space; 0 is device memory.
    pub memory_space: u64,
    /// `L(n)`: tail padding in elements.
    pub tail_padding: Option<u64>,
    /// Other fields (`D(...)`, `#(u32)`, `P(...)`, ...), verbatim, in printed order.
    pub other_fields: Vec<String>,
}

impl Layout {
    /// What is wrong with a minor-to-major order for an array of `rank`
    /// dimensions: it must number each dimension once (XLA's
    /// `LayoutUtil::ValidateLayoutForShape`). An empty order is one XLA fills
    /// in (`{:T(128)}`).
    pub fn order_problem(minor_to_major: &[u64], rank: usize) -> Option<String> {
        if minor_to_major.is_empty() {
            return None;
        }
        // A bit per dimension; ranks past 64 (none in practice) use a vector.
        let is_order = minor_to_major.len() == rank
            && if rank <= 64 {
                let mut seen = 0u64;
                minor_to_major.iter().all(|&d| {
                    let fresh = d < rank as u64 && seen & (1 << d) == 0;
                    seen |= 1u64.checked_shl(d as u32).unwrap_or(0);
                    fresh
                })
            } else {
                let mut seen = vec![false; rank];
                minor_to_major.iter().all(|&d| {
                    usize::try_from(d)
                        .ok()
                        .and_then(|d| seen.get_mut(d))
                        .is_some_and(|s| !std::mem::replace(s, true))
                })
            };
        (!is_order).then(|| {
            let list: Vec<String> = minor_to_major.iter().map(u64::to_string).collect();
            format!(
                "layout `{{{}}}` is not an order of the shape's {rank} dimension(s): each of 0..{rank} once",
                list.join(",")
            )
        })
    }
}

/// The layout fields whose contents are numbers (`T(8,128)`, `E(4)`, `S(1)`,
/// `L(2)`): one spelled otherwise is no layout XLA reads.
pub const NUMERIC_LAYOUT_FIELDS: [&str; 4] = ["T(", "E(", "S(", "L("];

macro_rules! element_types {
    ($($variant:ident => $text:literal, $bits:expr;)*) => {
        /// An element type, spelled as XLA spells it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ElementType { $($variant,)* }

        impl ElementType {
            pub fn parse(text: &str) -> Option<ElementType> {
                match text { $($text => Some(ElementType::$variant),)* _ => None }
            }
            pub fn as_str(self) -> &'static str {
                match self { $(ElementType::$variant => $text,)* }
            }
            /// Bits of one element as stored when packed (`E(n)` absent: see `byte_width`).
            pub fn bit_width(self) -> u64 {
                match self { $(ElementType::$variant => $bits,)* }
            }
        }
    };
}

element_types! {
    Pred => "pred", 8;
    S1 => "s1", 1; S2 => "s2", 2; S4 => "s4", 4; S8 => "s8", 8; S16 => "s16", 16; S32 => "s32", 32; S64 => "s64", 64;
    U1 => "u1", 1; U2 => "u2", 2; U4 => "u4", 4; U8 => "u8", 8; U16 => "u16", 16; U32 => "u32", 32; U64 => "u64", 64;
    F16 => "f16", 16; Bf16 => "bf16", 16; F32 => "f32", 32; F64 => "f64", 64;
    F8E5M2 => "f8e5m2", 8; F8E4M3 => "f8e4m3", 8; F8E4M3Fn => "f8e4m3fn", 8; F8E4M3B11Fnuz => "f8e4m3b11fnuz", 8;
    F8E3M4 => "f8e3m4", 8; F8E5M2Fnuz => "f8e5m2fnuz", 8; F8E4M3Fnuz => "f8e4m3fnuz", 8; F8E8M0Fnu => "f8e8m0fnu", 8;
    F4E2M1Fn => "f4e2m1fn", 4; F6E3M2Fn => "f6e3m2fn", 6; F6E2M3Fn => "f6e2m3fn", 6;
    C64 => "c64", 64; C128 => "c128", 128;
    Token => "token", 0;
    Opaque => "opaque", 64;
}

impl ElementType {
    /// Bytes per element when not packed: `ceil(bits / 8)`, so `s4` takes a whole byte.
    pub fn byte_width(self) -> u64 {
        self.bit_width().div_ceil(8)
    }
}

impl ArrayShape {
    pub fn is_dynamic(&self) -> bool {
        self.dims.iter().any(|d| d.is_dynamic())
    }

    /// Number of elements memory is reserved for, or `None` on overflow.
    pub fn element_count(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(d.extent()))
    }

    fn checked_byte_size(&self) -> Option<u64> {
        match self.element {
            ElementType::Token => return Some(0),
            ElementType::Opaque => return Some(POINTER_SIZE),
            _ => {}
        }
        let elements = self.element_count()?;
        let data = match self.layout.as_ref().and_then(|l| l.element_size_bits) {
            Some(bits) => elements.checked_mul(bits)?.div_ceil(8),
            None => elements.checked_mul(self.element.byte_width())?,
        };
        // Dynamic arrays carry their runtime dimension sizes in a 4-byte-per-dim
        // prefix (CpuExecutable::ShapeSizeBytes, gpu::ShapeSizeBytesFunction).
        let metadata = if self.is_dynamic() {
            4 * self.dims.len() as u64
        } else {
            0
        };
        data.checked_add(metadata)
    }
}

impl Shape {
    /// Bytes XLA allocates for this shape's top-level buffer: for a tuple, its
    /// index table only (the elements are separate buffers). Saturates instead of
    /// overflowing; shapes from the parser have been checked with
    /// [`Shape::checked_byte_size`].
    pub fn byte_size(&self) -> u64 {
        self.checked_byte_size().unwrap_or(u64::MAX)
    }

    /// [`Shape::byte_size`], or `None` if it does not fit in 64 bits.
    pub fn checked_byte_size(&self) -> Option<u64> {
        match self {
            Shape::Array(a) => a.checked_byte_size(),
            Shape::Tuple(elements) => (elements.len() as u64).checked_mul(POINTER_SIZE),
            Shape::Buffer(inner) => inner.checked_byte_size(),
        }
    }

    /// Bytes of this shape and, for tuples, of every nested element and index table:
    /// what a whole entry parameter or result occupies.
    pub fn total_byte_size(&self) -> u64 {
        self.total_size_with(&Shape::byte_size)
    }

    /// [`Shape::total_byte_size`] with another size for each buffer (a
    /// backend's padded sizes).
    pub fn total_size_with(&self, buffer_size: &dyn Fn(&Shape) -> u64) -> u64 {
        match self {
            Shape::Tuple(elements) => elements.iter().fold(buffer_size(self), |acc, e| {
                acc.saturating_add(e.total_size_with(buffer_size))
            }),
            _ => buffer_size(self),
        }
    }

    /// Checks that every nested size fits in 64 bits.
    pub fn sizes_fit(&self) -> bool {
        match self {
            Shape::Tuple(elements) => {
                self.checked_byte_size().is_some() && elements.iter().all(Shape::sizes_fit)
            }
            _ => self.checked_byte_size().is_some(),
        }
    }

    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Shape::Array(_))
    }

    pub fn tuple_elements(&self) -> &[Shape] {
        match self {
            Shape::Tuple(elements) => elements,
            _ => &[],
        }
    }

    /// The subshape at a tuple index path, if it exists.
    pub fn subshape(&self, index: &[u64]) -> Option<&Shape> {
        index.iter().try_fold(self, |shape, &i| match shape {
            Shape::Tuple(elements) => elements.get(usize::try_from(i).ok()?),
            _ => None,
        })
    }

    /// Every node of the shape (tuples and their elements) with its index
    /// path, in pre-order: the order XLA numbers a shape's values in.
    pub fn nodes(&self) -> Vec<(Vec<u64>, &Shape)> {
        fn walk<'s>(shape: &'s Shape, path: &mut Vec<u64>, out: &mut Vec<(Vec<u64>, &'s Shape)>) {
            out.push((path.clone(), shape));
            for (i, e) in shape.tuple_elements().iter().enumerate() {
                path.push(i as u64);
                walk(e, path, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        walk(self, &mut Vec::new(), &mut out);
        out
    }

    /// Every array leaf with its index path, in pre-order.
    pub fn leaves(&self) -> Vec<(Vec<u64>, &Shape)> {
        let mut nodes = self.nodes();
        nodes.retain(|(_, shape)| !matches!(shape, Shape::Tuple(_)));
        nodes
    }
}

/// Prints shapes the way XLA does: `f32[2,3]{1,0}`, `(f32[2]{0}, s32[])`.
impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Array(a) => a.fmt(f),
            Shape::Buffer(inner) => write!(f, "b({inner})"),
            Shape::Tuple(elements) => {
                f.write_str("(")?;
                for (i, e) in elements.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    e.fmt(f)?;
                }
                f.write_str(")")
            }
        }
    }
}

impl fmt::Display for ArrayShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.element.as_str())?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match d {
                Dim::Static(n) => write!(f, "{n}")?,
                Dim::Bounded(n) => write!(f, "<={n}")?,
                Dim::Unbounded => f.write_str("?")?,
            }
        }
        f.write_str("]")?;
        if let Some(layout) = &self.layout {
            layout.fmt(f)?;
        }
        Ok(())
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        let m2m: Vec<String> = self.minor_to_major.iter().map(u64::to_string).collect();
        f.write_str(&m2m.join(","))?;
        let has_fields = !self.tiles.is_empty()
            || self.element_size_bits.is_some()
            || self.memory_space != 0
            || self.tail_padding.is_some()
            || !self.other_fields.is_empty();
        if has_fields {
            f.write_str(":")?;
            if !self.tiles.is_empty() {
                f.write_str("T")?;
                for tile in &self.tiles {
                    let dims: Vec<String> = tile
                        .iter()
                        .map(|d| d.map_or("*".to_string(), |n| n.to_string()))
                        .collect();
                    write!(f, "({})", dims.join(","))?;
                }
            }
            if let Some(n) = self.tail_padding {
                write!(f, "L({n})")?;
            }
            if let Some(bits) = self.element_size_bits {
                write!(f, "E({bits})")?;
            }
            if self.memory_space != 0 {
                write!(f, "S({})", self.memory_space)?;
            }
            for field in &self.other_fields {
                f.write_str(field)?;
            }
        }
        f.write_str("}")
    }
}

impl Serialize for Shape {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// In JSON a shape is its HLO text: `f32[8,128]{1,0}`.
impl schemars::JsonSchema for Shape {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Shape".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An HLO shape as XLA prints it, e.g. `f32[8,128]{1,0}`"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(element: ElementType, dims: &[u64], bits: Option<u64>) -> Shape {
        Shape::Array(ArrayShape {
            element,
            dims: dims.iter().map(|&d| Dim::Static(d)).collect(),
            layout: bits.map(|b| Layout {
                element_size_bits: Some(b),
                ..Layout::default()
            }),
        })
    }

    #[test]
    fn array_sizes_follow_byte_size_of() {
        assert_eq!(
            array(ElementType::F64, &[42994, 42994], None).byte_size(),
            14_787_872_288
        );
        assert_eq!(array(ElementType::F32, &[], None).byte_size(), 4);
        assert_eq!(array(ElementType::Pred, &[10], None).byte_size(), 10);
        assert_eq!(array(ElementType::C128, &[2], None).byte_size(), 32);
        assert_eq!(array(ElementType::Bf16, &[3], None).byte_size(), 6);
        assert_eq!(array(ElementType::Token, &[], None).byte_size(), 0);
        assert_eq!(array(ElementType::Opaque, &[], None).byte_size(), 8);
    }

    #[test]
    fn sub_byte_types_pack_only_with_element_size() {
        assert_eq!(array(ElementType::S4, &[1024], None).byte_size(), 1024);
        assert_eq!(array(ElementType::S4, &[1024], Some(4)).byte_size(), 512);
        assert_eq!(array(ElementType::U4, &[3], Some(4)).byte_size(), 2);
    }

    #[test]
    fn tuples_are_index_tables() {
        let t = Shape::Tuple(vec![
            array(ElementType::F32, &[4096, 4096], None),
            array(ElementType::F32, &[4096, 4096], None),
        ]);
        assert_eq!(t.byte_size(), 16);
        // two f32[4096,4096] outputs are 134217744 bytes (the example)
        assert_eq!(t.total_byte_size(), 134_217_744);
    }

    #[test]
    fn dynamic_arrays_add_dimension_metadata() {
        let s = Shape::Array(ArrayShape {
            element: ElementType::F32,
            dims: vec![Dim::Bounded(10), Dim::Static(3)],
            layout: None,
        });
        assert_eq!(s.byte_size(), 10 * 3 * 4 + 8);
    }

    #[test]
    fn absurd_sizes_do_not_overflow() {
        let s = array(ElementType::F32, &[99_999_999_999, 99_999_999_999], None);
        assert_eq!(s.checked_byte_size(), None);
        assert!(!s.sizes_fit());
        assert_eq!(s.byte_size(), u64::MAX);
    }

    #[test]
    fn subshape_follows_tuple_indices() {
        let inner = Shape::Tuple(vec![array(ElementType::S32, &[], None)]);
        let t = Shape::Tuple(vec![array(ElementType::F32, &[2], None), inner]);
        assert_eq!(t.subshape(&[1, 0]).map(Shape::byte_size), Some(4));
        assert_eq!(t.subshape(&[2]), None);
        assert_eq!(t.leaves().len(), 2);
    }
}
