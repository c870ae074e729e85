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
pub use lower::parse_module;
pub use metadata::{Metadata, SourceLocation, StackFrameIndex};
pub use opcode::Opcode;
pub use shape::{ArrayShape, Dim, ElementType, Layout, Shape};
