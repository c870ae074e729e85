//! The module: its text, header, computations and instruction arena, read
//! through one API that also reads fusion bodies on demand
//! ([`super::deferred`]) and sees a what-if view's edits.

use std::path::Path;
use std::sync::Arc;

use super::deferred::{Deferred, LineRead, ModuleView};
use super::ir::*;
use super::metadata::{Metadata, SourceLocation, StackFrameIndex};
use super::opcode::Opcode;
use crate::source::{SourceFile, Span};

/// A parsed HLO module.
///
/// Fused computations' bodies are not in `Module::instructions`: they are
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
    /// The bodies parsed on demand: read one through [`Module::body`].
    pub(super) deferred: Arc<Deferred>,
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
            matches!(id.place(), Place::Arena(n) if n < self.first_added as usize),
            "only the module's own instructions are replaced"
        );
        self.replaced.insert(id, instr);
    }

    /// Adds an instruction to the view; its id follows every other.
    pub fn add(&mut self, instr: Instruction) -> InstrId {
        self.added.push(instr);
        InstrId::arena(self.first_added as usize + self.added.len() - 1)
    }

    /// The entry computation as the view has it.
    pub fn set_entry(&mut self, entry: Computation) {
        self.entry = Some(entry);
    }

    fn instr(&self, n: usize) -> Option<&Instruction> {
        match n.checked_sub(self.first_added as usize) {
            Some(k) => self.added.get(k),
            None => self.replaced.get(&InstrId::arena(n)),
        }
    }
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
        match id.place() {
            Place::Body(line) => self.deferred.instr(self, line),
            Place::Arena(n) => match self.edits.as_ref().and_then(|e| e.instr(n)) {
                Some(edited) => edited,
                None => &self.instructions[n],
            },
        }
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
            let id = InstrId::arena(i);
            (id, edits.and_then(|e| e.replaced.get(&id)).unwrap_or(own))
        });
        let added = edits.into_iter().flat_map(|e| {
            (e.first_added..)
                .zip(&e.added)
                .map(|(i, a)| (InstrId::arena(i as usize), a))
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
    /// Deferred body `k`, read a line at a time.
    pub fn body(&self, k: BodyId) -> Body<'_> {
        Body { module: self, k }
    }

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

/// A fusion body not parsed yet, read a line at a time ([`Module::body`]):
/// most questions about a fusion reach its root and a few lines, so the rest
/// is never parsed. Each line is read once, then kept.
#[derive(Clone, Copy)]
pub struct Body<'m> {
    module: &'m Module,
    k: BodyId,
}

impl<'m> Body<'m> {
    /// The computations it calls, without parsing it.
    pub fn calls(self) -> &'m [(CallRole, CompId)] {
        self.module.deferred.calls(self.k)
    }

    /// Whether its text contains `needle`: a search, no parse.
    pub fn mentions(self, needle: &str) -> bool {
        self.module
            .deferred
            .body_mentions(self.module, self.k, needle)
    }

    /// Its root's opcode, from the ROOT line alone.
    pub fn root_opcode(self) -> Opcode {
        self.module.deferred.root_opcode(self.module, self.k)
    }

    /// Whether it has been parsed whole (then read it through [`Module::comp`]).
    pub fn is_parsed(self) -> bool {
        self.module.deferred.is_parsed(self.k)
    }

    /// Its ROOT line.
    pub fn root_line(self) -> BodyLine {
        self.module.deferred.root_line(self.module, self.k)
    }

    /// Line `i`, read alone the first time it is asked for.
    pub fn line(self, i: BodyLine) -> &'m LineRead {
        self.module.deferred.line(self.module, self.k, i)
    }

    /// Line `i`'s opcode, from its first words only.
    pub fn line_opcode(self, i: BodyLine) -> &'m Opcode {
        self.module.deferred.line_opcode(self.module, self.k, i)
    }

    /// The lines that have line `i` among their operands.
    pub fn line_users(self, i: BodyLine) -> &'m [BodyLine] {
        self.module.deferred.line_users(self.module, self.k, i)
    }

    /// The line that is `parameter(number)`.
    pub fn parameter_line(self, number: u64) -> Option<BodyLine> {
        self.module
            .deferred
            .parameter_line(self.module, self.k, number)
    }
}

/// Bodies are read through the module, which sees other bodies and a view's
/// edits.
impl ModuleView for Module {
    fn source(&self) -> &SourceFile {
        &self.file
    }
    fn listed(&self) -> &[Computation] {
        &self.computations
    }
    fn instruction(&self, id: InstrId) -> &Instruction {
        self.instr(id)
    }
    fn scheduled(&self) -> bool {
        self.header.is_scheduled
    }
}

/// A module whose fusion bodies are parsed when first read
/// ([`super::parse_module`]). It is read only through [`LazyModule::read`],
/// which returns what was computed, or the error of a body that did not parse
/// (the computation saw an empty body there): a broken body cannot go
/// unnoticed.
#[derive(Debug)]
pub struct LazyModule(Module);

impl LazyModule {
    pub(super) fn new(module: Module) -> LazyModule {
        LazyModule(module)
    }

    /// The module, unchecked: for this crate's tests of the parser.
    #[cfg(test)]
    pub(super) fn unchecked(&self) -> &Module {
        &self.0
    }

    /// `f`'s result on the module, unless a body read (by `f` or before) failed
    /// to parse: then the first such error, in file order.
    pub fn read<T>(&self, f: impl FnOnce(&Module) -> T) -> Result<T, crate::error::Error> {
        let value = f(&self.0);
        match self.0.deferred.first_error() {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }

    /// The module with every body parsed now, or the first body's error in
    /// file order: nothing read later can fail, so it is read directly.
    pub fn into_complete(self) -> Result<Module, crate::error::Error> {
        let module = self.0;
        for (id, comp) in module.shells() {
            if comp.deferred.is_some() {
                module.comp(id);
            }
        }
        match module.deferred.first_error() {
            Some(error) => Err(error),
            None => Ok(module),
        }
    }
}

/// A module parsed whole (`--strict`) reads as one whose bodies all parsed.
impl From<Module> for LazyModule {
    fn from(module: Module) -> LazyModule {
        LazyModule(module)
    }
}
