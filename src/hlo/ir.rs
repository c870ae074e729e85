//! The typed IR of one HLO module: what every analysis reads.
//!
//! Instructions live in one arena per module and refer to each other and to
//! computations by index, resolved once when the text is lowered. Attributes the
//! analyses need are typed fields; every other attribute is kept as raw text
//! (a span into the module's text), so attributes from newer XLA versions survive.

use std::path::Path;
use std::sync::Arc;

use super::deferred::Deferred;
use super::metadata::{Metadata, SourceLocation, StackFrameIndex};
use super::opcode::Opcode;
use super::shape::Shape;
use crate::source::{SourceFile, Span};

/// Index of an instruction in [`Module::instructions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstrId(pub u32);

/// Index of a computation in [`Module::computations`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompId(pub u32);

impl InstrId {
    /// Ids of instructions in a deferred body (see [`super::deferred`]) have
    /// this bit set: they are never indices into [`Module::instructions`], so a
    /// per-instruction table indexed by one fails loudly in tests.
    pub const DEFERRED: u32 = 1 << 31;

    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// In a fused computation's body, parsed only when something reads it.
    pub fn is_deferred(self) -> bool {
        self.0 & Self::DEFERRED != 0
    }
}
impl CompId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A parsed HLO module.
///
/// Fused computations' bodies are not in [`Module::instructions`]: they are
/// parsed when an analysis first reads them ([`Module::comp`], [`Module::instr`]),
/// so a module costs what its entry and control flow cost.
#[derive(Debug, Clone)]
pub struct Module {
    pub name: String,
    /// The file it was read from; [`Span`]s index into its text. Shared, so
    /// that the what-if copies of the accounting do not copy the text.
    pub file: Arc<SourceFile>,
    pub header: ModuleHeader,
    pub stack_frames: StackFrameIndex,
    /// In the file's order (callees before callers). A deferred computation's
    /// entry here is a shell: read it through [`Module::comp`]. Shared with
    /// the what-if views of the module ([`Module::with_edits`]).
    pub(super) computations: Arc<Vec<Computation>>,
    /// The instructions of every computation that is not deferred, shared
    /// like `computations`: read them through [`Module::instr`] and
    /// [`Module::instrs`], which see a view's edits.
    pub(super) instructions: Arc<Vec<Instruction>>,
    pub entry: CompId,
    /// The bodies parsed on demand.
    pub deferred: Arc<Deferred>,
    /// A what-if view's changes to the instructions it shares (HM001's
    /// donation copies); `None` for a module as read.
    pub(super) edits: Option<Arc<Edits>>,
}

/// What a what-if view of a module changes: a few instructions replaced,
/// some added (ids after the module's own), the entry computation rewritten.
/// Everything else is the module's own, shared, so that asking "what if"
/// costs the change, not a copy of the module.
#[derive(Debug)]
pub struct Edits {
    /// The module's own instruction count: added ids start there.
    first_added: u32,
    replaced: rustc_hash::FxHashMap<InstrId, Instruction>,
    added: Vec<Instruction>,
    entry: Option<Computation>,
}

impl Edits {
    pub fn new(module: &Module) -> Edits {
        Edits {
            first_added: module.instr_count() as u32,
            replaced: Default::default(),
            added: Vec::new(),
            entry: None,
        }
    }

    /// The instruction `id` is in the view (an instruction of the module).
    pub fn replace(&mut self, id: InstrId, instr: Instruction) {
        assert!(
            id.0 < self.first_added,
            "only the module's own instructions are replaced"
        );
        self.replaced.insert(id, instr);
    }

    /// Adds an instruction to the view; its id follows every other.
    pub fn add(&mut self, instr: Instruction) -> InstrId {
        self.added.push(instr);
        InstrId(self.first_added + self.added.len() as u32 - 1)
    }

    /// The entry computation as the view has it.
    pub fn set_entry(&mut self, entry: Computation) {
        self.entry = Some(entry);
    }

    fn instr(&self, id: InstrId) -> Option<&Instruction> {
        match id.0.checked_sub(self.first_added) {
            Some(k) => self.added.get(k as usize),
            None => self.replaced.get(&id),
        }
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
    /// Set on the shell of a deferred computation: its index in [`Deferred`].
    pub deferred: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct Instruction {
    /// Read it through [`Module::instr_name`] (or [`Name::as_str`]).
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
    /// [`Module::custom_call_target`].
    pub custom_call_target: Option<Span>,
    /// `kind=kLoop` of a fusion: read it through [`Module::fusion_kind`].
    pub fusion_kind: Option<Span>,
    /// `output_to_operand_aliasing={...}` (custom-call, fusion, async-start).
    pub output_to_operand_aliasing: Box<[OperandAlias]>,
    pub control_predecessors: Box<[InstrId]>,
    /// The `{...}` of `metadata={...}` (empty without one); its fields come from
    /// [`Module::metadata`].
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

/// `{output_index}: (operand, {operand_index})`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperandAlias {
    pub output_index: Vec<u64>,
    pub operand: u64,
    pub operand_index: Vec<u64>,
}

impl Module {
    pub(super) fn new(
        parts: (String, Arc<SourceFile>, ModuleHeader, StackFrameIndex),
        computations: Vec<Computation>,
        instructions: Vec<Instruction>,
        entry: CompId,
        deferred: Deferred,
    ) -> Module {
        let (name, file, header, stack_frames) = parts;
        Module {
            name,
            file,
            header,
            stack_frames,
            computations: Arc::new(computations),
            instructions: Arc::new(instructions),
            entry,
            deferred: Arc::new(deferred),
            edits: None,
        }
    }

    /// A what-if view: this module with `edits`, sharing everything else.
    pub fn with_edits(&self, edits: Edits) -> Module {
        assert!(self.edits.is_none(), "a view is made of a module as read");
        Module {
            edits: Some(Arc::new(edits)),
            ..self.clone()
        }
    }

    pub fn instr(&self, id: InstrId) -> &Instruction {
        if id.is_deferred() {
            return self.deferred.instr(self, id);
        }
        if let Some(edited) = self.edits.as_ref().and_then(|e| e.instr(id)) {
            return edited;
        }
        &self.instructions[id.index()]
    }

    /// How many instructions [`Module::instr`] answers for (deferred bodies
    /// aside): per-instruction tables have this length.
    pub fn instr_count(&self) -> usize {
        self.instructions.len() + self.edits.as_ref().map_or(0, |e| e.added.len())
    }

    /// Every instruction but those of deferred bodies, by id.
    pub fn instrs(&self) -> impl Iterator<Item = (InstrId, &Instruction)> {
        let edits = self.edits.as_deref();
        let own = self.instructions.iter().enumerate().map(move |(i, own)| {
            let id = InstrId(i as u32);
            (id, edits.and_then(|e| e.replaced.get(&id)).unwrap_or(own))
        });
        let added = edits.into_iter().flat_map(|e| {
            (e.first_added..)
                .zip(&e.added)
                .map(|(i, a)| (InstrId(i), a))
        });
        own.chain(added)
    }

    /// An instruction's name, without the `%`.
    pub fn instr_name(&self, id: InstrId) -> &str {
        self.instr(id).name.as_str(&self.file.text)
    }

    /// `custom_call_target="..."`, unescaped.
    pub fn custom_call_target(&self, id: InstrId) -> Option<std::borrow::Cow<'_, str>> {
        let text = self.slice(self.instr(id).custom_call_target?);
        // Borrowed unless there is an escape to undo.
        Some(if text.contains('\\') {
            super::metadata::unescape(text).into()
        } else {
            text.into()
        })
    }

    /// A fusion's `kind` (`kLoop`, `kInput`, `kOutput`, `kCustom`).
    pub fn fusion_kind(&self, id: InstrId) -> Option<&str> {
        Some(self.slice(self.instr(id).fusion_kind?))
    }

    /// A computation, its body parsed first if it was deferred.
    pub fn comp(&self, id: CompId) -> &Computation {
        let comp = self.shell(id);
        match comp.deferred {
            Some(k) => self.deferred.computation(self, k),
            None => comp,
        }
    }

    /// A computation as listed: for a deferred one, its shell (header, no
    /// body), without parsing it.
    pub fn shell(&self, id: CompId) -> &Computation {
        if id == self.entry {
            if let Some(entry) = self.edits.as_ref().and_then(|e| e.entry.as_ref()) {
                return entry;
            }
        }
        &self.computations[id.index()]
    }

    pub fn comp_count(&self) -> usize {
        self.computations.len()
    }

    /// Every computation as listed ([`Module::shell`]), by id.
    pub fn shells(&self) -> impl Iterator<Item = (CompId, &Computation)> {
        (0..self.comp_count() as u32).map(|c| (CompId(c), self.shell(CompId(c))))
    }

    /// The module's text; [`Span`]s index into it.
    pub fn text(&self) -> &str {
        &self.file.text
    }

    /// Whether `needle` occurs anywhere in the module's text or its metadata
    /// values (set aside from it): a vectorized search, for the markers looked for in a whole dump (a backend's custom
    /// calls, JAX's transformation names).
    pub fn text_contains(&self, needle: &str) -> bool {
        [&self.file.text, &self.file.set_aside.text]
            .iter()
            .any(|t| memchr::memmem::find(t.as_bytes(), needle.as_bytes()).is_some())
    }

    /// The file the module was read from.
    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// Instructions written in the text, deferred bodies included (recreated
    /// `get-tuple-element`s are not counted).
    pub fn instruction_count(&self) -> usize {
        self.instrs().filter(|(_, i)| !i.synthetic).count() + self.deferred.line_count()
    }

    /// The first error met while parsing a deferred body on demand. The
    /// pipeline asks after the report is built: an analysis that read a broken
    /// body saw an empty one, and its numbers must not be shown.
    pub fn deferred_error(&self) -> Result<(), crate::error::Error> {
        match self.deferred.first_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn entry(&self) -> &Computation {
        self.comp(self.entry)
    }

    /// The text a span covers.
    pub fn slice(&self, span: Span) -> &str {
        self.file.text.get(span.range()).unwrap_or("")
    }

    /// The raw text of an attribute that has no typed field, e.g. `dimensions`.
    pub fn attribute(&self, instr: InstrId, name: &str) -> Option<&str> {
        self.instr(instr)
            .attributes
            .iter()
            .find(|a| self.slice(a.name) == name)
            .map(|a| match self.file.set_aside.piece(a.value) {
                // `backend_config={...}`, set aside (`set_aside`).
                Some(piece) => &self.file.set_aside.text[piece.range()],
                None => self.slice(a.value),
            })
    }

    /// Attribute name/value pairs of the header that have no typed field.
    pub fn header_attribute(&self, name: &str) -> Option<&str> {
        self.header
            .other
            .iter()
            .find(|a| self.slice(a.name) == name)
            .map(|a| self.slice(a.value))
    }

    /// The fields of an instruction's `metadata={...}`, parsed when asked for;
    /// its spans index [`Module::metadata_text`].
    pub fn metadata(&self, instr: InstrId) -> Metadata {
        let (text, span) = self.metadata_source(instr);
        super::metadata::parse(text, span)
    }

    /// The text an instruction's metadata was read from: the module's, or the
    /// values set aside from it (`set_aside`), most often.
    pub fn metadata_text(&self, instr: InstrId) -> &str {
        self.metadata_source(instr).0
    }

    fn metadata_source(&self, instr: InstrId) -> (&str, Span) {
        let span = self.instr(instr).metadata;
        match self.file.set_aside.piece(span) {
            Some(piece) => (&self.file.set_aside.text, piece),
            None => (&self.file.text, span),
        }
    }

    /// The `op_name` of an instruction's metadata, unescaped.
    pub fn op_name(&self, instr: InstrId) -> Option<String> {
        let (text, span) = self.metadata_source(instr);
        op_name_in(text, &super::metadata::parse(text, span))
    }

    /// [`Module::op_name`] and [`Module::source_location`] from one read of the metadata.
    pub fn origin(&self, instr: InstrId) -> (Option<String>, Option<SourceLocation>) {
        let (text, span) = self.metadata_source(instr);
        let metadata = super::metadata::parse(text, span);
        let location = metadata.source_location(text, &self.stack_frames);
        (op_name_in(text, &metadata), location)
    }

    /// [`Module::op_name`] and [`Module::stack`] from one read of the metadata.
    pub fn op_name_and_stack(&self, instr: InstrId) -> (Option<String>, Vec<SourceLocation>) {
        let (text, span) = self.metadata_source(instr);
        let metadata = super::metadata::parse(text, span);
        let stack = metadata.stack(text, &self.stack_frames);
        (op_name_in(text, &metadata), stack)
    }

    /// Where in the user's program an instruction comes from, when the dump says.
    pub fn source_location(&self, instr: InstrId) -> Option<SourceLocation> {
        let (text, span) = self.metadata_source(instr);
        super::metadata::parse(text, span).source_location(text, &self.stack_frames)
    }

    /// The call stack an instruction comes from, innermost first (empty when
    /// the dump does not say).
    pub fn stack(&self, instr: InstrId) -> Vec<SourceLocation> {
        let (text, span) = self.metadata_source(instr);
        super::metadata::parse(text, span).stack(text, &self.stack_frames)
    }

    /// Entry parameters in parameter-number order.
    pub fn entry_parameters(&self) -> impl Iterator<Item = InstrId> + '_ {
        self.entry().parameters.iter().copied()
    }

    /// The entry computation's root: the module's result.
    pub fn entry_root(&self) -> InstrId {
        self.entry().root
    }
}

/// The `op_name` of `metadata` (read from `text`), unescaped.
fn op_name_in(text: &str, metadata: &Metadata) -> Option<String> {
    metadata
        .op_name
        .map(|s| super::metadata::unescape(text.get(s.range()).unwrap_or("")))
}
