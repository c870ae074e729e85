//! HM006 wide-dtype: 64-bit floating-point and complex buffers (JAX with
//! `jax_enable_x64`) take twice the memory of their 32-bit forms.

use super::Finding;
use crate::analysis::MemoryModel;
use crate::hlo::{ElementType, Module, Shape};
use crate::units::human_bytes;

fn is_wide(shape: &Shape) -> bool {
    matches!(shape, Shape::Array(a) if matches!(a.element, ElementType::F64 | ElementType::C128))
}

pub fn check(module: &Module, model: &MemoryModel) -> Vec<Finding> {
    let wide: Vec<_> = model
        .peak
        .buffers
        .iter()
        .filter(|b| {
            module
                .instr(b.instruction)
                .shape
                .subshape(&b.index)
                .is_some_and(is_wide)
        })
        .collect();
    let bytes: u64 = wide.iter().map(|b| b.bytes).fold(0u64, u64::saturating_add);
    if bytes == 0 {
        return Vec::new();
    }
    let mut f = Finding::new(
        "HM006",
        format!(
            "{} buffers live at the peak are 64-bit ({}); 32-bit types would save {}",
            wide.len(),
            human_bytes(bytes),
            human_bytes(bytes / 2)
        ),
        bytes / 2,
        "use float32/complex64: leave jax_enable_x64 off, or cast with .astype(jnp.float32) where 64 bits are not needed"
            .into(),
    )
    .at(module, wide[0].instruction);
    f.evidence = wide
        .iter()
        .take(5)
        .map(|b| {
            format!(
                "{} {}",
                human_bytes(b.bytes),
                module.instr(b.instruction).shape
            )
        })
        .collect();
    vec![f]
}
