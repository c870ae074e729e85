//! The typed IR of one HLO module: the values every analysis reads.
//!
//! Instructions live in one arena per module and refer to each other and to
//! computations by index, resolved once when the text is lowered. Attributes the
//! analyses need are typed fields; every other attribute is kept as raw text
//! (a span into the module's text), so attributes from newer XLA versions survive.
//! The module that owns them, and reads fusion bodies on demand, is
//! [`super::module::Module`].

use std::sync::Arc;

use super::opcode::Opcode;
use super::shape::Shape;
use crate::source::Span;

/// An instruction: one of the module's arena (read at load, or added by a
/// what-if view), or a line of a fusion body parsed on demand
/// (`hlo::deferred`). Which one is [`InstrId::place`]; the representation
/// is this file's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstrId(u32);

/// Where an instruction lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Index `n` of the module's arena: per-instruction tables have a row for it.
    Arena(usize),
    /// A line of a fusion body parsed on demand: no whole-module table has a
    /// row for it.
    Body(BodyInstr),
}

/// A line of a fusion body read on demand, numbered across every such body
/// of the module (a body's lines are consecutive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyInstr(pub u32);

/// A fusion body read on demand: its index among the module's deferred bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyId(pub u32);

/// A line of one deferred body, counted from its first instruction line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BodyLine(pub u32);

/// Index of a computation in the module's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompId(pub u32);

impl InstrId {
    /// Ids at or above this are body lines (`BODY + n` is [`BodyInstr`] `n`):
    /// a per-instruction table indexed by one fails loudly. Loading refuses a
    /// module with more lines than either half holds.
    const BODY: u32 = 1 << 31;

    /// The most instructions of either kind a module may have.
    pub const LIMIT: u32 = Self::BODY;

    /// The instruction at index `n` of the module's arena.
    pub fn arena(n: usize) -> InstrId {
        assert!(
            n < Self::BODY as usize,
            "an arena index past InstrId::LIMIT"
        );
        InstrId(n as u32)
    }

    /// The instruction of a body line read on demand.
    pub fn body(line: BodyInstr) -> InstrId {
        assert!(line.0 < Self::BODY, "a body line past InstrId::LIMIT");
        InstrId(Self::BODY | line.0)
    }

    pub fn place(self) -> Place {
        match self.0.checked_sub(Self::BODY) {
            None => Place::Arena(self.0 as usize),
            Some(line) => Place::Body(BodyInstr(line)),
        }
    }

    /// Its index in the module's arena. A body line's id has none: per-instruction
    /// tables cover the arena only, and indexing one with it panics (the
    /// index is past every table).
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// In a fused computation's body, parsed only when something reads it.
    pub fn is_deferred(self) -> bool {
        matches!(self.place(), Place::Body(_))
    }
}

impl CompId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What the `HloModule` line says.
#[derive(Debug, Clone, Default)]
pub struct ModuleHeader {
    /// `is_scheduled=true`: each computation's text order is XLA's schedule.
    pub is_scheduled: bool,
    /// `entry_computation_layout={(params)->result}`, with layouts.
    pub entry_layout: Option<ProgramShape>,
    /// `input_output_alias`: outputs that live in a parameter's buffer.
    pub input_output_alias: Vec<IoAlias>,
    /// `buffer_donor`: parameters donated but not (yet) paired with an output.
    pub buffer_donors: Vec<BufferDonor>,
    pub num_partitions: u64,
    pub replica_count: u64,
    /// Every other header attribute, raw.
    pub other: Vec<Attribute>,
}

#[derive(Debug, Clone)]
pub struct ProgramShape {
    pub parameters: Vec<Shape>,
    pub result: Shape,
}

/// `{output_index}: (parameter, {parameter_index}, kind)`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoAlias {
    pub output_index: Vec<u64>,
    pub parameter: u64,
    pub parameter_index: Vec<u64>,
    /// `true` for `must-alias`, `false` for `may-alias` (the default).
    pub must_alias: bool,
}

/// `(parameter, {parameter_index})`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferDonor {
    pub parameter: u64,
    pub parameter_index: Vec<u64>,
}

/// An attribute kept as text: `name=value`.
#[derive(Debug, Clone, Copy)]
pub struct Attribute {
    pub name: Span,
    pub value: Span,
}

#[derive(Debug, Clone)]
pub struct Computation {
    pub name: String,
    pub is_entry: bool,
    /// Instructions in text order, which is the schedule when the module is scheduled.
    pub instructions: Vec<InstrId>,
    pub root: InstrId,
    /// `parameters[n]` is `parameter(n)`.
    pub parameters: Vec<InstrId>,
    /// `execution_thread="..."` after the closing brace; `None` is the main thread.
    pub execution_thread: Option<String>,
    /// The computation's header line.
    pub span: Span,
    /// Set on the shell of a deferred computation: which body it is
    /// ([`super::deferred::Deferred`]).
    pub deferred: Option<BodyId>,
}

#[derive(Debug, Clone)]
pub struct Instruction {
    /// Read it through [`crate::hlo::Module::instr_name`] (or [`Name::as_str`]).
    pub name: Name,
    pub opcode: Opcode,
    /// Shared by the instructions whose shapes are spelled the same: big
    /// modules repeat a few thousand shapes over hundreds of thousands of lines.
    pub shape: Arc<Shape>,
    pub operands: Box<[InstrId]>,
    pub computation: CompId,
    /// Computations this instruction calls, with the attribute that names each.
    pub called: Box<[(CallRole, CompId)]>,
    /// `parameter(N)`.
    pub parameter_number: Option<u64>,
    /// `index=N` of `get-tuple-element`.
    pub tuple_index: Option<u64>,
    /// `custom_call_target="..."`, between the quotes: read it through
    /// [`crate::hlo::Module::custom_call_target`].
    pub custom_call_target: Option<Span>,
    /// `kind=kLoop` of a fusion: read it through [`crate::hlo::Module::fusion_kind`].
    pub fusion_kind: Option<Span>,
    /// `output_to_operand_aliasing={...}` (custom-call, fusion, async-start).
    pub output_to_operand_aliasing: Box<[OperandAlias]>,
    pub control_predecessors: Box<[InstrId]>,
    /// The `{...}` of `metadata={...}` (empty without one); its fields come from
    /// [`crate::hlo::Module::metadata`].
    pub metadata: Span,
    /// Every other attribute, raw.
    pub attributes: Box<[Attribute]>,
    /// The instruction's line, or its first user's line for a `get-tuple-element`
    /// recreated from a compact `%t#0` operand.
    pub span: Span,
    /// Recreated from a compact `%t#i` operand rather than written in the text.
    pub synthetic: bool,
}

/// An instruction's name, without the `%`: where the text spells it, so that
/// a module's tens of thousands of names cost no allocation each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    Text(Span),
    /// Made by hlomem: a recreated get-tuple-element, a what-if's copy.
    Own(Box<str>),
}

impl Name {
    /// The name, `text` being the module's text.
    pub fn as_str<'a>(&'a self, text: &'a str) -> &'a str {
        match self {
            Name::Text(span) => text.get(span.range()).unwrap_or(""),
            Name::Own(name) => name,
        }
    }
}

/// Which attribute named a called computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRole {
    /// `calls=` (fusion, async-start, call in old dumps)
    Calls,
    /// `to_apply=` (call, reduce, map, sort, all-reduce, ...)
    ToApply,
    Condition,
    Body,
    /// `branch_computations`, `true_computation`, `false_computation`
    Branch,
    /// `select=` of select-and-scatter
    Select,
    /// `scatter=` of select-and-scatter
    Scatter,
    /// `called_computations=` (custom-call)
    Called,
}

impl CallRole {
    /// The role of a call attribute's key (`calls`, `to_apply`, ...).
    pub fn of_key(key: &str) -> CallRole {
        match key {
            "calls" => CallRole::Calls,
            "to_apply" => CallRole::ToApply,
            "condition" => CallRole::Condition,
            "body" => CallRole::Body,
            "select" => CallRole::Select,
            "scatter" => CallRole::Scatter,
            "called_computations" => CallRole::Called,
            _ => CallRole::Branch, // branch_computations, true_computation, false_computation
        }
    }
}

/// `{output_index}: (operand, {operand_index})`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperandAlias {
    pub output_index: Vec<u64>,
    pub operand: u64,
    pub operand_index: Vec<u64>,
}
