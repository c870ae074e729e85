//! HLO text → typed IR.
//!
//! `parse` runs the pest grammar (`grammar/hlo.pest`), `lower` turns pairs into
//! IR values and `resolve` turns names into indices. Everything downstream reads
//! only the IR in `ir`, `module`, `shape`, `opcode` and `metadata`.
//!
//! The files form layers, each importing only those below it: `shape`,
//! `opcode`, `parse`, `set_aside`, `metadata`; `ir` (the IR's types),
//! `counts`, `shape_rules`; `body_check`, `structure`; `lower`; `resolve`,
//! `verify`; `deferred` (bodies parsed on demand); `module` (the `Module`
//! that owns them); this file.

mod body_check;
mod counts;
mod deferred;
pub mod ir;
mod lower;
pub mod metadata;
mod module;
pub mod opcode;
pub mod parse;
mod resolve;
mod set_aside;
pub mod shape;
mod shape_rules;
mod structure;
mod verify;

pub use deferred::{Deferred, LineRead};
pub use ir::*;
pub use metadata::{Metadata, SourceLocation, StackFrameIndex};
pub use module::{Body, Edits, LazyModule, Module};
pub use opcode::Opcode;
pub use shape::{ArrayShape, Dim, ElementType, Layout, Shape};

/// Parses an HLO module file for the analysis: outline (pest, pass 1), lower
/// each line (pass 2) of every computation but fusion bodies, which are
/// parsed when read (`deferred`), resolve names, verify.
pub fn parse_module(file: crate::source::SourceFile) -> Result<LazyModule, crate::error::Error> {
    parse(file, true).map(LazyModule::new)
}

/// [`parse_module`] with every line parsed at load (`--strict`, and the
/// library's `load_module`): every error the grammar finds, in file order.
pub fn parse_module_complete(
    file: crate::source::SourceFile,
) -> Result<Module, crate::error::Error> {
    parse(file, false)
}

fn parse(mut file: crate::source::SourceFile, defer: bool) -> Result<Module, crate::error::Error> {
    set_aside::values(&mut file);
    let (name, header, stack_frames, computations, instructions, entry, deferred) = {
        let outline = parse::outline(&file)?;
        let lower::Lowered {
            name,
            header,
            stack_frames,
            raw,
            mut instructions,
            unresolved,
        } = lower::lower_module(&file, outline, defer)?;
        let resolve::Resolved {
            computations,
            entry,
            bodies,
            comp_ids,
        } = resolve::resolve(&file, raw, &mut instructions, unresolved)?;
        verify::verify(&file, &header, (&computations, entry), &instructions)?;
        let deferred = deferred::Deferred::new(comp_ids, bodies);
        (
            name,
            header,
            stack_frames,
            computations,
            instructions,
            entry,
            deferred,
        )
    };
    Ok(Module::new(
        (name, std::sync::Arc::new(file), header, stack_frames),
        computations,
        instructions,
        entry,
        deferred,
    ))
}
