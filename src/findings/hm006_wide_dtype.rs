//! HM006 wide-dtype: 64-bit floating-point and complex buffers (JAX with
//! `jax_enable_x64`, TensorFlow's and PyTorch's float64 tensors) take twice
//! the memory of their 32-bit forms.

use serde::Serialize;

use super::Finding;
use crate::analysis::MemoryModel;
use crate::frontend::FrontendName;
use crate::hlo::{ElementType, Module, Shape};
use crate::units::human_bytes;

fn is_wide(shape: &Shape) -> bool {
    matches!(shape, Shape::Array(a) if matches!(a.element, ElementType::F64 | ElementType::C128))
}

/// HM006's facts: the 64-bit buffers live at the peak.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    pub count: usize,
    /// Their bytes together; 32-bit types would save half.
    pub bytes: u64,
    /// The largest of them.
    pub largest: Vec<WideBuffer>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct WideBuffer {
    pub bytes: u64,
    pub shape: String,
}

impl Evidence {
    pub fn message(&self) -> String {
        format!(
            "{} buffers live at the peak are 64-bit ({}); 32-bit types would save {}",
            self.count,
            human_bytes(self.bytes),
            human_bytes(self.bytes / 2)
        )
    }

    pub fn fix(&self, frontend: FrontendName) -> String {
        match frontend {
            FrontendName::Jax => {
                "use float32/complex64: leave jax_enable_x64 off, or cast with .astype(jnp.float32) where 64 \
                 bits are not needed"
            }
            FrontendName::Tensorflow => {
                "use float32/complex64 where 64 bits are not needed: cast with tf.cast(x, tf.float32), and \
                 create tensors as tf.float32 (NumPy's float64 arrays become tf.float64 tensors)"
            }
            FrontendName::PytorchXla => {
                "use float32/complex64 where 64 bits are not needed: x.to(torch.float32) (or x.float()) \
                 before moving it to the device (torch.from_numpy keeps NumPy's float64)"
            }
            FrontendName::Unknown => "use 32-bit types (float32, complex64) where 64 bits are not needed",
        }
        .into()
    }

    pub fn details(&self) -> Vec<String> {
        self.largest
            .iter()
            .map(|b| format!("{} {}", human_bytes(b.bytes), b.shape))
            .collect()
    }
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
    let evidence = Evidence {
        count: wide.len(),
        bytes,
        largest: wide
            .iter()
            .take(5)
            .map(|b| WideBuffer {
                bytes: b.bytes,
                shape: module.instr(b.instruction).shape.to_string(),
            })
            .collect(),
    };
    vec![
        Finding::new(super::Evidence::WideDtype(evidence), bytes / 2)
            .at(module, wide[0].instruction),
    ]
}
