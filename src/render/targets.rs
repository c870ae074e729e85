//! `hlomem targets`: the devices the Python package compiles for, one line
//! each, with one device's memory and what a program may use of it.

use std::io::{self, Write};

use crate::chip::devices::Targets;
use crate::units::two_decimals;

pub fn render_text(targets: &Targets, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "TPU (libtpu's available HBM per device):")?;
    for t in &targets.tpu {
        writeln!(
            out,
            "  {:<16} {:<14} {:>9} HBM, {:>9} usable",
            t.name,
            t.device,
            two_decimals(t.memory_bytes.into(), true),
            two_decimals(t.usable_bytes.into(), true)
        )?;
    }
    writeln!(
        out,
        "GPU (XLA's target configs; JAX's allocator takes XLA_PYTHON_CLIENT_MEM_FRACTION, {} unless set, \
         of the config's device_memory_size; topology {} unless given):",
        targets.gpu_default_fraction, targets.gpu_default_topology
    )?;
    for g in &targets.gpu {
        writeln!(out, "  {:<16} {:<14} {}", g.name, g.device, g.config)?;
    }
    Ok(())
}
