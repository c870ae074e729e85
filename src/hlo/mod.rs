//! HLO text → typed IR.
//!
//! `parse` runs the pest grammar (`grammar/hlo.pest`), `lower` turns pairs into
//! IR values and `resolve` turns names into indices. Everything downstream reads
//! only the IR in `ir`, `shape`, `opcode` and `metadata`.

pub mod ir;
mod lower;
pub mod metadata;
pub mod opcode;
pub mod parse;
mod resolve;
pub mod shape;
mod verify;

pub use ir::*;
pub use metadata::{Metadata, SourceLocation, StackFrameIndex};
pub use opcode::Opcode;
pub use shape::{ArrayShape, Dim, ElementType, Layout, Shape};

/// Parses a whole HLO module file: outline (pest, pass 1), lower each line
/// (pass 2), resolve names, verify.
pub fn parse_module(file: crate::source::SourceFile) -> Result<Module, crate::error::Error> {
    let (name, header, stack_frames, computations, instructions, entry) = {
        let outline = parse::outline(&file)?;
        let lower::Lowered {
            name,
            header,
            stack_frames,
            raw,
            mut instructions,
            unresolved,
        } = lower::lower_module(&file, &outline)?;
        let (computations, entry) = resolve::resolve(&file, raw, &mut instructions, unresolved)?;
        verify::verify(&file, &header, (&computations, entry), &instructions)?;
        (
            name,
            header,
            stack_frames,
            computations,
            instructions,
            entry,
        )
    };
    Ok(Module {
        name,
        path: file.path,
        text: file.text,
        header,
        stack_frames,
        computations,
        instructions,
        entry,
    })
}
