//! HM005 temps-dominate: the preallocated temporaries are most of what the
//! module needs. Lists the largest temporaries live at the peak and says which
//! look like activations saved for the backward pass (rematerialization
//! candidates) and which are broadcasts or constants made concrete.

use super::Finding;
use crate::analysis::{BufferKind, MemoryModel};
use crate::hlo::{Module, Opcode};
use crate::units::human_bytes;

/// How many temporaries the evidence lists.
const LISTED: usize = 5;

pub fn check(module: &Module, model: &MemoryModel) -> Vec<Finding> {
    // Device memory only: on TPU the on-chip spaces (VMEM...) are not what
    // runs out, and their layout is an estimate.
    let in_device = |a: &crate::analysis::assign::Allocation| a.color == 0;
    let temp_bytes: u64 = model
        .assignment
        .allocations
        .iter()
        .filter(|a| in_device(a) && a.kind == crate::analysis::assign::AllocationKind::Temp)
        .map(|a| a.size)
        .sum();
    let device_bytes = model.totals.device_bytes;
    if device_bytes == 0 || temp_bytes * 2 <= device_bytes {
        return Vec::new();
    }
    let temps: Vec<_> = model
        .peak
        .buffers
        .iter()
        .filter(|b| b.kind == BufferKind::Temp)
        .filter(|b| {
            model.assignment.allocation_of[b.buffer.index()]
                .is_some_and(|a| in_device(&model.assignment.allocations[a]))
        })
        .collect();
    let mut evidence = Vec::new();
    let mut activations = 0u64;
    for b in temps.iter().take(LISTED) {
        let op = module.op_name(b.instruction).unwrap_or_default();
        let instr = module.instr(b.instruction);
        // Forward values still live while the backward pass (`transpose(...)` in
        // JAX's op names) runs are the activations autodiff saved.
        let peak_op = model
            .peak
            .instruction
            .and_then(|i| module.op_name(i))
            .unwrap_or_default();
        let kind = if instr.opcode == Opcode::Broadcast || op.contains("broadcast") {
            "a broadcast made concrete"
        } else if instr.opcode == Opcode::Constant {
            "a constant"
        } else if !op.contains("transpose(") && peak_op.contains("transpose(") {
            activations += b.bytes;
            "an activation saved for the backward pass (rematerialization candidate)"
        } else {
            "an intermediate value"
        };
        let at = module
            .source_location(b.instruction)
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        evidence.push(format!(
            "{} {} {}{}: {kind}",
            human_bytes(b.bytes),
            module.instr(b.instruction).shape,
            if op.is_empty() {
                instr.name.clone()
            } else {
                op
            },
            at
        ));
    }
    let percent = temp_bytes as f64 * 100.0 / device_bytes as f64;
    let mut f = Finding::new(
        "HM005",
        format!(
            "temporaries take {} of the {} this module needs ({percent:.0}%)",
            human_bytes(temp_bytes),
            human_bytes(device_bytes)
        ),
        temp_bytes,
        if activations > 0 {
            "rematerialize: wrap layers in jax.checkpoint so saved activations are recomputed in the backward pass"
                .into()
        } else {
            "look at the largest temporaries below: chunk the computation (lax.map, scan) or keep broadcasts fused"
                .into()
        },
    );
    if let Some(first) = temps.first() {
        f = f.at(module, first.instruction);
    }
    f.evidence = evidence;
    vec![f]
}
