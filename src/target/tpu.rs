//! TPU buffer sizes and memory spaces.
//!
//! A TPU array is stored in tiles: `f32[1000,1000]{1,0:T(8,128)}` pads its two
//! minor-most dimensions (in layout order) up to multiples of 8 and 128, so it
//! takes 1000 × 1024 × 4 = 4,096,000 bytes, not 4,000,000. Later tiles
//! (`(2,1)` in `T(8,128)(2,1)`) subdivide the first and add no padding of
//! their own when they divide it.

use crate::hlo::{ArrayShape, ElementType, Shape};

/// Alignment of chunks in a TPU temporary block.
pub const HEAP_ALIGNMENT: u64 = 512;

/// Bytes of a tuple's index table on TPU.
const TUPLE_TABLE_BYTES: u64 = 512;

pub fn buffer_size(shape: &Shape) -> u64 {
    match shape {
        Shape::Array(a) => array_size(a).unwrap_or(u64::MAX),
        Shape::Tuple(_) => TUPLE_TABLE_BYTES,
        Shape::Buffer(inner) => buffer_size(inner),
    }
}

fn array_size(a: &ArrayShape) -> Option<u64> {
    if a.element == ElementType::Token {
        return Some(0);
    }
    let Some(layout) = a.layout.as_ref().filter(|l| !l.tiles.is_empty()) else {
        return Some(Shape::Array(a.clone()).byte_size());
    };
    // Dimensions in physical order, most major first.
    let mut physical: Vec<u64> = layout
        .minor_to_major
        .iter()
        .rev()
        .map(|&d| a.dims.get(d as usize).map_or(1, |d| d.extent()))
        .collect();
    let tile = &layout.tiles[0];
    // A tile of more dimensions than the shape pads the missing major ones as 1.
    while physical.len() < tile.len() {
        physical.insert(0, 1);
    }
    let offset = physical.len() - tile.len();
    for (i, t) in tile.iter().enumerate() {
        if let Some(t) = t.filter(|&t| t > 0) {
            let d = &mut physical[offset + i];
            *d = d.div_ceil(t).checked_mul(t)?;
        }
    }
    let elements = physical
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))?;
    let bits = layout
        .element_size_bits
        .unwrap_or_else(|| a.element.bit_width());
    elements.checked_mul(bits).map(|b| b.div_ceil(8))
}

/// Memory spaces as XLA's TPU memory-usage report names them.
pub fn space_name(color: u64) -> String {
    match color {
        0 => "default".into(),
        1 => "vmem".into(),
        2 => "smem".into(),
        c => format!("color {c}"),
    }
}
