//! Fused computations' bodies, parsed the first time something reads them.
//!
//! In an unrolled training step four fifths of the instruction lines are
//! bodies of fused computations, and the memory accounting reads few of them:
//! a fusion's body matters where its output may share an operand's buffer, or
//! where a finding names the op inside (the `add` that still reads a donated
//! input). So loading a module lowers the entry and its control flow, and keeps
//! each fusion body (and what only fusion bodies call) as its line offsets.
//! [`Module::comp`] and [`Module::instr`] parse a body, with the same pest
//! grammar, resolution and verifier rules as the rest, the first time they are
//! asked for it; the result is cached.
//!
//! The never-lie contract: at load, [`super::structure::check`] runs over every
//! deferred line (brackets balance, one `name = ...` per line, names defined
//! once, one ROOT), so a cut or garbled body is refused even if no analysis
//! reads it. A body that passes that check but not the grammar is an error
//! once read: the analysis sees an empty body, and the error is kept here
//! ([`Deferred::first_error`]) for [`super::LazyModule::read`], the only way
//! to read a module whose bodies are parsed on demand, to return instead of
//! what was read. `--strict` parses every body at load.
//!
//! This file sits below the module that owns it: what it needs of the module
//! is [`ModuleView`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::ir::*;
use super::lower;
use super::opcode::Opcode;
use super::parse::{Line, Rule};
use super::resolve::{resolve_computation, Arena, UnreadBody};
use super::shape::Shape;
use super::structure::{is_name_char, line_head};
use super::verify;
use crate::error::Error;
use crate::source::SourceFile;

/// What reading a body needs of the module that owns it (`Module`, whose file
/// is above this one).
pub trait ModuleView {
    /// The module's file: the lines' offsets index its text.
    fn source(&self) -> &SourceFile;
    /// The computations as listed: a deferred one as its shell.
    fn listed(&self) -> &[Computation];
    /// Any instruction of the module (another body's parsed first).
    fn instruction(&self, id: InstrId) -> &Instruction;
    /// `is_scheduled=true` in the header.
    fn scheduled(&self) -> bool;
}

/// The deferred bodies of one module.
pub struct Deferred {
    /// Every computation of the module by name, for the names a body calls.
    comp_ids: rustc_hash::FxHashMap<Box<str>, CompId>,
    /// Ordered by `base`.
    bodies: Vec<DeferredBody>,
    lines: usize,
    /// Shapes lowered for bodies so far, by spelling: a module repeats a few
    /// thousand shapes over its bodies.
    shapes: Mutex<HashMap<Box<str>, Arc<Shape>>>,
}

/// One deferred computation: where its lines are, and once read, its body.
struct DeferredBody {
    comp: CompId,
    /// Its first line's number among the module's deferred lines.
    first: BodyInstr,
    /// `(offset, length)` of each instruction line.
    lines: Box<[(u32, u32)]>,
    /// The computations its lines call, from the structural check.
    calls: Box<[(CallRole, CompId)]>,
    /// The fusion that calls it, known once its caller is resolved.
    caller: OnceLock<InstrId>,
    /// What was read of each line alone ([`Deferred::line`]), allocated on
    /// the first read.
    reads: OnceLock<Box<[LineReads]>>,
    /// `(name offset, name length, line)` of every line, sorted by name: an
    /// operand's line is found without parsing the body.
    names: OnceLock<Box<[(u32, u32, u32)]>>,
    /// Boxed: most bodies are never parsed, and the module keeps one
    /// `DeferredBody` per fusion.
    parsed: OnceLock<Box<Parsed>>,
}

/// One line of a deferred body, as far as it was read alone.
#[derive(Default)]
struct LineReads {
    /// From its first words (`instruction_head`), or from `read`.
    opcode: OnceLock<Opcode>,
    /// Boxed: a body's table has a slot per line, and most are never read.
    read: OnceLock<Box<LineRead>>,
    /// Its users' lines.
    users: OnceLock<Box<[BodyLine]>>,
}

/// One line of a deferred body read alone: what the sharing rules ask of an
/// instruction inside a fusion (its opcode, shape and operands), without the
/// rest of the body. See [`Deferred::line`].
#[derive(Debug)]
pub struct LineRead {
    pub opcode: Opcode,
    pub shape: Arc<Shape>,
    /// Operands, as lines of the same body.
    pub operands: Box<[BodyLine]>,
    pub parameter_number: Option<u64>,
}

struct Parsed {
    computation: Computation,
    instructions: Vec<Instruction>,
    error: Option<Box<Error>>,
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parsed = self.bodies.iter().filter(|b| b.parsed.get().is_some());
        f.debug_struct("Deferred")
            .field("bodies", &self.bodies.len())
            .field("parsed", &parsed.count())
            .field("lines", &self.lines)
            .finish()
    }
}

impl DeferredBody {
    /// Where its lines are in the module's text, from the first line's start
    /// to the last one's end: they are consecutive, so one search covers them.
    fn span(&self) -> std::ops::Range<usize> {
        match (self.lines.first(), self.lines.last()) {
            (Some(&(first, _)), Some(&(last, len))) => first as usize..(last + len) as usize,
            _ => 0..0,
        }
    }

    /// Its line `i`, a slice of the module's `text`.
    fn line<'t>(&self, text: &'t str, i: BodyLine) -> Line<'t> {
        let (offset, len) = self.lines[i.0 as usize];
        let (offset, len) = (offset as usize, len as usize);
        Line {
            offset,
            text: &text[offset..offset + len],
        }
    }

    fn new(unread: UnreadBody) -> DeferredBody {
        let UnreadBody {
            comp,
            first,
            lines,
            mut calls,
            caller,
        } = unread;
        calls.sort_by_key(|&(role, c)| (c, role as u8));
        calls.dedup();
        DeferredBody {
            comp,
            first,
            lines: lines.into_boxed_slice(),
            calls: calls.into_boxed_slice(),
            caller: caller.map_or_else(OnceLock::new, OnceLock::from),
            reads: OnceLock::new(),
            names: OnceLock::new(),
            parsed: OnceLock::new(),
        }
    }

    /// Whether body line `line` is one of its own.
    fn holds(&self, line: BodyInstr) -> bool {
        (self.first.0..self.first.0 + self.lines.len() as u32).contains(&line.0)
    }
}

impl Deferred {
    pub(super) fn new(
        comp_ids: rustc_hash::FxHashMap<Box<str>, CompId>,
        bodies: Vec<UnreadBody>,
    ) -> Deferred {
        let bodies: Vec<DeferredBody> = bodies.into_iter().map(DeferredBody::new).collect();
        let lines = bodies.iter().map(|b| b.lines.len()).sum();
        Deferred {
            comp_ids,
            bodies,
            lines,
            shapes: Mutex::new(HashMap::new()),
        }
    }

    /// Instruction lines in deferred bodies.
    pub fn line_count(&self) -> usize {
        self.lines
    }

    fn body(&self, k: BodyId) -> &DeferredBody {
        &self.bodies[k.0 as usize]
    }

    /// The computations deferred body `k` calls, without parsing it.
    pub fn calls(&self, k: BodyId) -> &[(CallRole, CompId)] {
        &self.body(k).calls
    }

    /// The opcode of deferred body `k`'s root, from its ROOT line alone (the
    /// grammar parses that one line), or from the parsed body. Most questions
    /// about a fusion stop at its root: an in-place root
    /// (`dynamic-update-slice`, `scatter`, a tuple of them) is the only kind
    /// that makes an operand share the fusion's buffer.
    pub fn root_opcode<M: ModuleView + ?Sized>(&self, module: &M, k: BodyId) -> Opcode {
        if let Some(parsed) = self.body(k).parsed.get() {
            return module.instruction(parsed.computation.root).opcode.clone();
        }
        self.line_opcode(module, k, self.root_line(module, k))
            .clone()
    }

    /// Whether the text of body `k` contains `needle`: a search, no parse. An
    /// opcode no line spells (`dynamic-update-slice(`) is in no instruction.
    pub fn body_mentions<M: ModuleView + ?Sized>(
        &self,
        module: &M,
        k: BodyId,
        needle: &str,
    ) -> bool {
        let text = &module.source().text.as_bytes()[self.body(k).span()];
        memchr::memmem::find(text, needle.as_bytes()).is_some()
    }

    /// Whether body `k` has been parsed in full (successfully or not).
    pub fn is_parsed(&self, k: BodyId) -> bool {
        self.body(k).parsed.get().is_some()
    }

    /// The line of body `k` that is its ROOT.
    pub fn root_line<M: ModuleView + ?Sized>(&self, module: &M, k: BodyId) -> BodyLine {
        let body = self.body(k);
        match module.listed()[body.comp.index()].root.place() {
            Place::Body(line) if body.holds(line) => BodyLine(line.0 - body.first.0),
            // Resolution gives a shell the id of its ROOT line.
            _ => unreachable!("a deferred body's root is one of its lines"),
        }
    }

    /// Line `i` of body `k`, read alone the first time it is asked for: the
    /// grammar's `instruction_call` rule on that line, and its operands looked up
    /// among the body's names. Most questions about a fusion reach a few of
    /// its lines (its root and what the root reads), so the rest is never
    /// parsed. A line that does not parse, or names an operand the body does
    /// not define, makes the whole body parse: its error is then the one a
    /// full read reports (`Deferred::first_error`), and the line reads as
    /// an empty tuple.
    pub fn line<M: ModuleView + ?Sized>(&self, module: &M, k: BodyId, i: BodyLine) -> &LineRead {
        self.reads(k)[i.0 as usize].read.get_or_init(|| {
            Box::new(self.read_line(module, self.body(k), i).unwrap_or_else(|| {
                self.parsed(module, k);
                LineRead {
                    opcode: Opcode::Tuple,
                    shape: Arc::new(Shape::Tuple(Vec::new())),
                    operands: Box::default(),
                    parameter_number: None,
                }
            }))
        })
    }

    /// The opcode of line `i` of body `k`, from the line's first words only
    /// (`instruction_head`) unless the line was read already: most lines a
    /// rule reaches are asked only what they are.
    pub fn line_opcode<M: ModuleView + ?Sized>(
        &self,
        module: &M,
        k: BodyId,
        i: BodyLine,
    ) -> &Opcode {
        let reads = &self.reads(k)[i.0 as usize];
        if let Some(read) = reads.read.get() {
            return &read.opcode;
        }
        reads.opcode.get_or_init(|| {
            let file = module.source();
            let line = self.body(k).line(&file.text, i);
            match lower::lower_opcode(file, line) {
                Ok(opcode) => opcode,
                // The full read reports the error.
                Err(_) => self.line(module, k, i).opcode.clone(),
            }
        })
    }

    fn reads(&self, k: BodyId) -> &[LineReads] {
        let body = self.body(k);
        body.reads
            .get_or_init(|| body.lines.iter().map(|_| LineReads::default()).collect())
    }

    fn read_line<M: ModuleView + ?Sized>(
        &self,
        module: &M,
        body: &DeferredBody,
        i: BodyLine,
    ) -> Option<LineRead> {
        let file = module.source();
        let line = body.line(&file.text, i);
        let mut shapes = &self.shapes;
        let raw =
            lower::lower_instruction_by(file, line, &mut shapes, Rule::instruction_call).ok()?;
        let (opcode, shape, parameter_number, operands) = raw.into_line_parts();
        let operands = operands
            .iter()
            .map(|op| {
                // Compact `%t#0` operands never occur in a deferred body.
                op.tuple_path.is_empty().then_some(())?;
                line_named(&file.text, body, op.reference.name)
            })
            .collect::<Option<Box<[BodyLine]>>>()?;
        Some(LineRead {
            opcode,
            shape,
            operands,
            parameter_number,
        })
    }

    /// The lines of body `k` that have line `i` among their operands. Found
    /// by the text first: only lines that name it (as a whole word) are read.
    /// The body's text is searched in one pass (its lines are consecutive in
    /// the file), each match placed in its line by offset: a big fusion body
    /// is asked about many of its lines, and a search per line costs a
    /// searcher's start-up per line.
    pub fn line_users<M: ModuleView + ?Sized>(
        &self,
        module: &M,
        k: BodyId,
        i: BodyLine,
    ) -> &[BodyLine] {
        self.reads(k)[i.0 as usize].users.get_or_init(|| {
            let body = self.body(k);
            let text = module.source().text.as_str();
            let own = body.line(text, i).text;
            let name = &own[line_head(own).name];
            let word = |line: &str, at: usize| {
                let before = line[..at].chars().next_back();
                let after = line[at + name.len()..].chars().next();
                !before.is_some_and(|c| is_name_char(c) && c != '%')
                    && !after.is_some_and(is_name_char)
            };
            let span = body.span();
            let mut users: Vec<BodyLine> = Vec::new();
            // The last line a match was settled in: a line naming it twice is read once.
            let mut settled = None;
            for at in memchr::memmem::find_iter(&text.as_bytes()[span.clone()], name.as_bytes()) {
                let at = (span.start + at) as u32;
                let j =
                    BodyLine((body.lines.partition_point(|&(offset, _)| offset <= at) - 1) as u32);
                let (offset, len) = body.lines[j.0 as usize];
                let in_line = (at - offset) as usize;
                if j == i || settled == Some(j) || in_line + name.len() > len as usize {
                    continue;
                }
                let line = body.line(text, j).text;
                if word(line, in_line) {
                    settled = Some(j);
                    if self.line(module, k, j).operands.contains(&i) {
                        users.push(j);
                    }
                }
            }
            users.into_boxed_slice()
        })
    }

    /// The line of body `k` that is `parameter(number)`.
    pub fn parameter_line<M: ModuleView + ?Sized>(
        &self,
        module: &M,
        k: BodyId,
        number: u64,
    ) -> Option<BodyLine> {
        let body = self.body(k);
        let text = module.source().text.as_str();
        // The opcode is followed by its `(` with nothing between; what comes
        // before it may be any space or a comment.
        let finder = memchr::memmem::Finder::new(b"parameter(");
        (0..body.lines.len() as u32).map(BodyLine).find(|&j| {
            let line = body.line(text, j).text;
            finder.find(line.as_bytes()).is_some() && {
                *self.line_opcode(module, k, j) == Opcode::Parameter
                    && self.line(module, k, j).parameter_number == Some(number)
            }
        })
    }

    /// A body line's instruction, its body parsed first.
    pub(super) fn instr<'m, M: ModuleView + ?Sized>(
        &'m self,
        module: &'m M,
        line: BodyInstr,
    ) -> &'m Instruction {
        let k = self.bodies.partition_point(|b| b.first <= line) - 1;
        let body = &self.bodies[k];
        let parsed = self.parsed(module, BodyId(k as u32));
        &parsed.instructions[(line.0 - body.first.0) as usize]
    }

    /// Body `k` as a computation, parsed first.
    pub(super) fn computation<'m, M: ModuleView + ?Sized>(
        &'m self,
        module: &'m M,
        k: BodyId,
    ) -> &'m Computation {
        &self.parsed(module, k).computation
    }

    /// The first error of a body read so far, in file order.
    pub(super) fn first_error(&self) -> Option<Error> {
        self.bodies
            .iter()
            .filter_map(|b| b.parsed.get()?.error.as_deref())
            .next()
            .map(|e| match e {
                Error::Input(d) => Error::Input(d.clone()),
                other => Error::Usage(other.to_string()),
            })
    }

    fn parsed<M: ModuleView + ?Sized>(&self, module: &M, k: BodyId) -> &Parsed {
        let body = self.body(k);
        body.parsed.get_or_init(|| {
            Box::new(match self.parse(module, body) {
                Ok(parsed) => parsed,
                Err(error) => {
                    let shell = &module.listed()[body.comp.index()];
                    let placeholders = body.lines.iter().map(|_| lower::placeholder(body.comp));
                    Parsed {
                        computation: Computation {
                            deferred: None,
                            ..shell.clone()
                        },
                        instructions: placeholders.collect(),
                        error: Some(Box::new(error)),
                    }
                }
            })
        })
    }

    /// Lowers, resolves and verifies one body, as loading does for the rest.
    fn parse<M: ModuleView + ?Sized>(
        &self,
        module: &M,
        body: &DeferredBody,
    ) -> Result<Parsed, Error> {
        let file = module.source();
        let listed = module.listed();
        let shell = &listed[body.comp.index()];
        // The header was read up to its name at load.
        let header_text = file.text.get(shell.span.range()).unwrap_or("");
        let header = Line {
            offset: shell.span.start as usize,
            text: header_text,
        };
        super::parse::parse_line(file, super::parse::Rule::comp_header, header)?;
        let mut shapes = &self.shapes;
        let mut instructions = Vec::with_capacity(body.lines.len());
        let mut names = Vec::with_capacity(body.lines.len());
        for &(offset, len) in body.lines.iter() {
            let (offset, len) = (offset as usize, len as usize);
            let line = Line {
                offset,
                text: &file.text[offset..offset + len],
            };
            let (instruction, unresolved) =
                lower::lower_instruction(file, line, &mut shapes)?.split(body.comp);
            instructions.push(instruction);
            names.push(unresolved.map_err(|e| *e)?);
        }
        let comp_id_of = |name: &str| self.comp_ids.get(name).copied();
        let raw = lower::RawComputation::of_shell(file, shell);
        let mut arena = Arena {
            instructions: &mut instructions,
            body: Some(body.first),
            start: 0,
        };
        // Bodies with compact `%t#0` operands are never deferred (see
        // `lower`), so resolving adds no instruction and ids stay in range.
        let computation = resolve_computation(
            file,
            &comp_id_of,
            (body.comp, false),
            raw,
            names,
            &mut arena,
        )?;
        for (i, instr) in instructions.iter().enumerate() {
            for &(role, callee) in instr.called.iter() {
                let nested = listed[callee.index()].deferred;
                if let (CallRole::Calls, Some(n)) = (role, nested) {
                    if callee == body.comp {
                        return Err(Error::at(
                            file,
                            instr.span.range(),
                            format!(
                                "`%{}` calls its own computation",
                                instr.name.as_str(&file.text)
                            ),
                            "a call cycle",
                        ));
                    }
                    let id = InstrId::body(BodyInstr(body.first.0 + i as u32));
                    let _ = self.body(n).caller.set(id);
                }
            }
        }
        let mut parsed_calls: Vec<(CallRole, CompId)> = instructions
            .iter()
            .flat_map(|i| i.called.iter().copied())
            .collect();
        parsed_calls.sort_by_key(|&(role, c)| (c, role as u8));
        parsed_calls.dedup();
        if *parsed_calls != *body.calls {
            return Err(Error::at(
                file,
                shell.span.range(),
                format!(
                    "the calls in `%{}` read differently by its structure and by the grammar",
                    shell.name
                ),
                "this computation",
            )
            .with_note("please report this file: hlomem's two readings of it disagree"));
        }
        let lookup = |id: InstrId| -> &Instruction {
            match id.place() {
                Place::Body(line) if body.holds(line) => {
                    &instructions[(line.0 - body.first.0) as usize]
                }
                _ => module.instruction(id),
            }
        };
        let caller = body.caller.get().copied();
        let context = verify::Context {
            file,
            computations: listed,
            scheduled: module.scheduled(),
        };
        verify::verify_body(context, (body.comp, &computation), caller, &lookup)?;
        Ok(Parsed {
            computation,
            instructions,
            error: None,
        })
    }
}

/// The line of `body` that defines `name`.
fn line_named(text: &str, body: &DeferredBody, name: &str) -> Option<BodyLine> {
    let names = body.names.get_or_init(|| {
        let mut names: Vec<(u32, u32, u32)> = body
            .lines
            .iter()
            .enumerate()
            .map(|(i, &(offset, len))| {
                let line = &text[offset as usize..(offset + len) as usize];
                let name = line_head(line).name;
                (offset + name.start as u32, name.len() as u32, i as u32)
            })
            .collect();
        names.sort_unstable_by_key(|&(at, len, _)| &text[at as usize..(at + len) as usize]);
        names.into_boxed_slice()
    });
    let name_of = |&(at, len, _): &(u32, u32, u32)| &text[at as usize..(at + len) as usize];
    let k = names.partition_point(|n| name_of(n) < name);
    names
        .get(k)
        .filter(|n| name_of(n) == name)
        .map(|&(_, _, line)| BodyLine(line))
}

#[cfg(test)]
mod tests {
    use crate::hlo::{BodyLine, Place};

    /// `line_users` (a text search, then the matching lines read) agrees with
    /// the parsed body: a name inside a longer name, inside metadata, twice
    /// in one line, or after another name's match in the same line.
    #[test]
    fn line_users_are_the_parsed_bodys_users() {
        let text = "HloModule m\n\n\
            %fused (p.0: f32[4], p.1: f32[4]) -> f32[4] {\n\
            \x20 %p.0 = f32[4]{0} parameter(0)\n\
            \x20 %p.1 = f32[4]{0} parameter(1), metadata={op_name=\"p.0\"}\n\
            \x20 %a = f32[4]{0} add(%p.0, %p.0)\n\
            \x20 %p.0.b = f32[4]{0} multiply(%p.1, %a)\n\
            \x20 ROOT %r = f32[4]{0} add(%p.0.b, %p.0)\n\
            }\n\n\
            ENTRY %e (x: f32[4], y: f32[4]) -> f32[4] {\n\
            \x20 %x = f32[4]{0} parameter(0)\n\
            \x20 %y = f32[4]{0} parameter(1)\n\
            \x20 ROOT %f = f32[4]{0} fusion(%x, %y), kind=kLoop, calls=%fused\n\
            }\n";
        let lazy = crate::parse_text_on_demand(std::path::Path::new("users.txt"), text.to_string())
            .expect("parses");
        let module = lazy.unchecked();
        let k = module.computations[0]
            .deferred
            .expect("the fusion body is deferred");
        let first = module.deferred.body(k).first;
        let asked: Vec<Vec<BodyLine>> = (0..5)
            .map(|i| module.deferred.line_users(module, k, BodyLine(i)).to_vec())
            .collect();
        let parsed = module.comp(crate::hlo::CompId(0));
        let mut want = vec![Vec::new(); 5];
        for (j, &id) in parsed.instructions.iter().enumerate() {
            for op in &module.instr(id).operands {
                let Place::Body(line) = op.place() else {
                    panic!("a body's operands are its own lines");
                };
                let line = line.0 - first.0;
                if !want[line as usize].contains(&BodyLine(j as u32)) {
                    want[line as usize].push(BodyLine(j as u32));
                }
            }
        }
        assert_eq!(asked, want);
        assert_eq!(asked[0], vec![BodyLine(2), BodyLine(4)]);
    }
}
