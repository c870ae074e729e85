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
//! The never-lie contract: at load, [`check_structure`] runs over every deferred
//! line (brackets balance, one `name = ...` per line, names defined once, one
//! ROOT), so a cut or garbled body is refused even if no analysis reads it. A
//! body that passes that check but not the grammar is an error once read: the
//! analysis sees an empty body, and the pipeline refuses the module afterwards
//! ([`Module::deferred_error`]). `--strict` parses every body at load.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::body_check::{self, BodyCheck};
use super::ir::*;
use super::lower;
use super::opcode::Opcode;
use super::parse::{Line, Rule};
use super::resolve::{resolve_computation, Arena};
use super::shape::Shape;
use super::verify;
use crate::error::Error;
use crate::source::SourceFile;

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
pub(super) struct DeferredBody {
    comp: CompId,
    /// The id (without [`InstrId::DEFERRED`]) of its first line.
    base: u32,
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
    users: OnceLock<Box<[u32]>>,
}

/// One line of a deferred body read alone: what the sharing rules ask of an
/// instruction inside a fusion (its opcode, shape and operands), without the
/// rest of the body. See [`Deferred::line`].
#[derive(Debug)]
pub struct LineRead {
    pub opcode: Opcode,
    pub shape: Arc<Shape>,
    /// Operands, as lines of the same body.
    pub operands: Box<[u32]>,
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
    fn line<'t>(&self, text: &'t str, i: u32) -> Line<'t> {
        let (offset, len) = self.lines[i as usize];
        let (offset, len) = (offset as usize, len as usize);
        Line {
            offset,
            text: &text[offset..offset + len],
        }
    }

    pub(super) fn new(
        comp: CompId,
        base: u32,
        lines: Vec<(u32, u32)>,
        mut calls: Vec<(CallRole, CompId)>,
    ) -> DeferredBody {
        calls.sort_by_key(|&(role, c)| (c, role as u8));
        calls.dedup();
        DeferredBody {
            comp,
            base,
            lines: lines.into_boxed_slice(),
            calls: calls.into_boxed_slice(),
            caller: OnceLock::new(),
            reads: OnceLock::new(),
            names: OnceLock::new(),
            parsed: OnceLock::new(),
        }
    }
}

impl Deferred {
    pub(super) fn new(
        comp_ids: rustc_hash::FxHashMap<Box<str>, CompId>,
        bodies: Vec<DeferredBody>,
        callers: Vec<Option<InstrId>>,
    ) -> Deferred {
        for (body, caller) in bodies.iter().zip(callers) {
            if let Some(caller) = caller {
                let _ = body.caller.set(caller);
            }
        }
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

    /// The computations deferred body `k` calls, without parsing it.
    pub fn calls(&self, k: u32) -> &[(CallRole, CompId)] {
        &self.bodies[k as usize].calls
    }

    /// The opcode of deferred computation `comp`'s root, from its ROOT line
    /// alone (the grammar parses that one line), or from the parsed body.
    /// Most questions about a fusion stop at its root: an in-place root
    /// (`dynamic-update-slice`, `scatter`, a tuple of them) is the only kind
    /// that makes an operand share the fusion's buffer.
    pub fn root_opcode(&self, module: &Module, k: u32) -> Opcode {
        let body = &self.bodies[k as usize];
        if let Some(parsed) = body.parsed.get() {
            return module.instr(parsed.computation.root).opcode.clone();
        }
        self.line_opcode(module, k, self.root_line(module, k))
            .clone()
    }

    /// Whether the text of body `k` contains `needle`: a search, no parse. An
    /// opcode no line spells (`dynamic-update-slice(`) is in no instruction.
    pub fn body_mentions(&self, module: &Module, k: u32, needle: &str) -> bool {
        let text = &module.file.text.as_bytes()[self.bodies[k as usize].span()];
        memchr::memmem::find(text, needle.as_bytes()).is_some()
    }

    /// Whether body `k` has been parsed in full (successfully or not).
    pub fn is_parsed(&self, k: u32) -> bool {
        self.bodies[k as usize].parsed.get().is_some()
    }

    /// The line of body `k` that is its ROOT.
    pub fn root_line(&self, module: &Module, k: u32) -> u32 {
        let body = &self.bodies[k as usize];
        (module.computations[body.comp.index()].root.0 & !InstrId::DEFERRED) - body.base
    }

    /// Line `i` of body `k`, read alone the first time it is asked for: the
    /// grammar's `instruction_call` rule on that line, and its operands looked up
    /// among the body's names. Most questions about a fusion reach a few of
    /// its lines (its root and what the root reads), so the rest is never
    /// parsed. A line that does not parse, or names an operand the body does
    /// not define, makes the whole body parse: its error is then the one a
    /// full read reports ([`Module::deferred_error`]), and the line reads as
    /// an empty tuple.
    pub fn line(&self, module: &Module, k: u32, i: u32) -> &LineRead {
        self.reads(k)[i as usize].read.get_or_init(|| {
            Box::new(
                self.read_line(module, &self.bodies[k as usize], i)
                    .unwrap_or_else(|| {
                        self.parsed(module, k as usize);
                        LineRead {
                            opcode: Opcode::Tuple,
                            shape: Arc::new(Shape::Tuple(Vec::new())),
                            operands: Box::default(),
                            parameter_number: None,
                        }
                    }),
            )
        })
    }

    /// The opcode of line `i` of body `k`, from the line's first words only
    /// (`instruction_head`) unless the line was read already: most lines a
    /// rule reaches are asked only what they are.
    pub fn line_opcode(&self, module: &Module, k: u32, i: u32) -> &Opcode {
        let reads = &self.reads(k)[i as usize];
        if let Some(read) = reads.read.get() {
            return &read.opcode;
        }
        reads.opcode.get_or_init(|| {
            let line = self.bodies[k as usize].line(&module.file.text, i);
            match lower::lower_opcode(&module.file, line) {
                Ok(opcode) => opcode,
                // The full read reports the error.
                Err(_) => self.line(module, k, i).opcode.clone(),
            }
        })
    }

    fn reads(&self, k: u32) -> &[LineReads] {
        let body = &self.bodies[k as usize];
        body.reads
            .get_or_init(|| body.lines.iter().map(|_| LineReads::default()).collect())
    }

    fn read_line(&self, module: &Module, body: &DeferredBody, i: u32) -> Option<LineRead> {
        let file = &module.file;
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
                self.line_named(module, body, op.reference.name)
            })
            .collect::<Option<Box<[u32]>>>()?;
        Some(LineRead {
            opcode,
            shape,
            operands,
            parameter_number,
        })
    }

    /// The line of `body` that defines `name`.
    fn line_named(&self, module: &Module, body: &DeferredBody, name: &str) -> Option<u32> {
        let text = module.file.text.as_str();
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
            .map(|&(_, _, line)| line)
    }

    /// The lines of body `k` that have line `i` among their operands. Found
    /// by the text first: only lines that name it (as a whole word) are read.
    /// The body's text is searched in one pass (its lines are consecutive in
    /// the file), each match placed in its line by offset: a big fusion body
    /// is asked about many of its lines, and a search per line costs a
    /// searcher's start-up per line.
    pub fn line_users(&self, module: &Module, k: u32, i: u32) -> &[u32] {
        self.reads(k)[i as usize].users.get_or_init(|| {
            let body = &self.bodies[k as usize];
            let text = module.file.text.as_str();
            let own = body.line(text, i).text;
            let name = &own[line_head(own).name];
            let word = |line: &str, at: usize| {
                let before = line[..at].chars().next_back();
                let after = line[at + name.len()..].chars().next();
                !before.is_some_and(|c| is_name_char(c) && c != '%')
                    && !after.is_some_and(is_name_char)
            };
            let span = body.span();
            let mut users: Vec<u32> = Vec::new();
            // The last line a match was settled in: a line naming it twice is read once.
            let mut settled = None;
            for at in memchr::memmem::find_iter(&text.as_bytes()[span.clone()], name.as_bytes()) {
                let at = (span.start + at) as u32;
                let j = (body.lines.partition_point(|&(offset, _)| offset <= at) - 1) as u32;
                let (offset, len) = body.lines[j as usize];
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
    pub fn parameter_line(&self, module: &Module, k: u32, number: u64) -> Option<u32> {
        let body = &self.bodies[k as usize];
        let text = module.file.text.as_str();
        // The opcode is followed by its `(` with nothing between; what comes
        // before it may be any space or a comment.
        let finder = memchr::memmem::Finder::new(b"parameter(");
        (0..body.lines.len() as u32).find(|&j| {
            let line = body.line(text, j).text;
            finder.find(line.as_bytes()).is_some() && {
                *self.line_opcode(module, k, j) == Opcode::Parameter
                    && self.line(module, k, j).parameter_number == Some(number)
            }
        })
    }

    pub(super) fn instr<'m>(&'m self, module: &'m Module, id: InstrId) -> &'m Instruction {
        let flat = id.0 & !InstrId::DEFERRED;
        let k = self.bodies.partition_point(|b| b.base <= flat) - 1;
        let parsed = self.parsed(module, k);
        &parsed.instructions[(flat - self.bodies[k].base) as usize]
    }

    pub(super) fn computation<'m>(&'m self, module: &'m Module, k: u32) -> &'m Computation {
        &self.parsed(module, k as usize).computation
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

    fn parsed<'m>(&'m self, module: &'m Module, k: usize) -> &'m Parsed {
        self.bodies[k].parsed.get_or_init(|| {
            let body = &self.bodies[k];
            Box::new(match self.parse(module, body) {
                Ok(parsed) => parsed,
                Err(error) => {
                    let shell = &module.computations[body.comp.index()];
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
    fn parse(&self, module: &Module, body: &DeferredBody) -> Result<Parsed, Error> {
        let file = &module.file;
        let shell = &module.computations[body.comp.index()];
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
            id_base: InstrId::DEFERRED | body.base,
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
                let nested = module.shell(callee).deferred;
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
                    let id = InstrId(InstrId::DEFERRED | (body.base + i as u32));
                    let _ = self.bodies[n as usize].caller.set(id);
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
            let flat = id.0 & !InstrId::DEFERRED;
            if id.is_deferred() && (body.base..body.base + body.lines.len() as u32).contains(&flat)
            {
                &instructions[(flat - body.base) as usize]
            } else {
                module.instr(id)
            }
        };
        let caller = body.caller.get().copied();
        verify::verify_body(file, module, (body.comp, &computation), caller, &lookup)?;
        Ok(Parsed {
            computation,
            instructions,
            error: None,
        })
    }
}

/// What the structural check learns of a deferred body without parsing it.
pub(super) struct Structure<'a> {
    /// The ROOT line's index.
    pub(super) root: Option<usize>,
    /// The computations its lines name in call attributes (`calls=`,
    /// `to_apply=`, ...), with the offset of each name: which computations are
    /// fused or thread-local is decided from them (see `analysis::graph`).
    pub(super) calls: Vec<(CallRole, &'a str, usize)>,
}

/// The cheap check every deferred line passes at load: brackets balance
/// outside strings, the line is `[ROOT ]name = ...`, names are defined once,
/// there is at most one ROOT, and what XLA's parser checks of each line
/// ([`body_check`]: operands defined earlier, operand counts, parameter
/// numbers, dimensions and layouts). It also collects the computations the body
/// calls, read from call attributes outside strings and brackets; when the body
/// is parsed, the grammar's reading must agree (`Deferred::parse` checks).
pub(super) fn check_structure<'a>(
    file: &'a SourceFile,
    comp: &str,
    header: &str,
    lines: &[(u32, u32)],
) -> Result<Structure<'a>, Error> {
    let mut body = BodyCheck::default();
    let mut structure = Structure {
        root: None,
        calls: Vec::new(),
    };
    for (i, &(offset, len)) in lines.iter().enumerate() {
        let (offset, len) = (offset as usize, len as usize);
        let text = &file.text[offset..offset + len];
        let head = line_head(text);
        if let Some(root) = head.root {
            if structure.root.is_some() {
                return Err(Error::at(
                    file,
                    offset + root..offset + root + 4,
                    format!("computation `%{comp}` has two ROOTs"),
                    "second ROOT",
                ));
            }
            structure.root = Some(i);
        }
        let token = offset + head.token.start..offset + head.token.end;
        let name = &text[head.name];
        if name.is_empty() || !head.defines {
            return Err(Error::at(
                file,
                token.start..token.end.max(token.start + 1),
                "expected an instruction: `name = shape opcode(operands)`",
                "not an instruction",
            ));
        }
        if let Some((at_byte, what)) = scan_line(text, offset, &mut structure.calls) {
            return Err(Error::at(
                file,
                offset + at_byte..offset + at_byte + 1,
                format!("brackets do not balance: {what}"),
                "here",
            )
            .with_note("the line was probably cut or edited"));
        }
        body.line(i, text, head.token.end + 3)
            .map_err(|p| problem(file, offset, p))?;
        if !body.define(name) {
            return Err(Error::at(
                file,
                token,
                format!("instruction `%{name}` is defined twice"),
                "second definition",
            ));
        }
    }
    body.finish(comp)
        .map_err(|(i, p)| problem(file, lines[i].0 as usize, p))?;
    // Without a ROOT marker XLA takes the last instruction.
    if let Some(&(offset, len)) = lines.get(structure.root.unwrap_or(lines.len().wrapping_sub(1))) {
        let (offset, len) = (offset as usize, len as usize);
        let text = &file.text[offset..offset + len];
        body_check::root_matches_header(header, text, line_head(text).token.end + 3)
            .map_err(|p| problem(file, offset, p))?;
    }
    Ok(structure)
}

/// A token-level problem on the line at `offset`, as an input error there.
fn problem(file: &SourceFile, offset: usize, p: body_check::Problem) -> Error {
    let end = p.at.end.max(p.at.start + 1);
    Error::at(file, offset + p.at.start..offset + end, p.title, p.label)
}

/// Where a line's `[ROOT ]%name = ` prefix puts things, relative to the line.
struct LineHead {
    /// Where `ROOT` is, if the line starts with it.
    root: Option<usize>,
    /// The name as written, `%` included.
    token: std::ops::Range<usize>,
    /// The name without its `%`.
    name: std::ops::Range<usize>,
    /// The name is followed by ` = `.
    defines: bool,
}

fn line_head(text: &str) -> LineHead {
    let indent = text.len() - text.trim_start().len();
    let mut at = indent;
    let root = text[at..].starts_with("ROOT ").then_some(indent);
    if root.is_some() {
        at += 5;
    }
    let rest = &text[at..];
    let token_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    let percent = rest[..token_len].len() - rest[..token_len].trim_start_matches('%').len();
    LineHead {
        root,
        token: at..at + token_len,
        name: at + percent..at + token_len,
        defines: rest[token_len..].starts_with(" = "),
    }
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '%' | '_' | '.' | '-')
}

/// The attributes that name computations, as the grammar's `called_attr` and
/// `called_list_attr` read them.
const CALL_KEYS: [&str; 10] = [
    "calls",
    "to_apply",
    "condition",
    "body",
    "select",
    "scatter",
    "called_computations",
    "branch_computations",
    "true_computation",
    "false_computation",
];

/// Walks a line outside strings: collects the computation names of call
/// attributes (at the attribute list's depth), and says where brackets first
/// fail to balance.
fn scan_line<'a>(
    text: &'a str,
    offset: usize,
    calls: &mut Vec<(CallRole, &'a str, usize)>,
) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let mut stack: Vec<u8> = Vec::new();
    let mut i = 0;
    // Most bytes are none of these: they are skipped a table look-up each,
    // and a string's contents in one search for its closing quote (a body's
    // text is read whole here, so this walk is the cost of the check).
    while let Some(k) = bytes[i..].iter().position(|&b| SPECIAL[b as usize]) {
        i += k;
        match bytes[i] {
            b'"' => match super::parse::string_end(bytes, i + 1) {
                Some(end) => i = end,
                None => return Some((text.len().saturating_sub(1), "a string is not closed")),
            },
            b @ (b'(' | b'[' | b'{') => stack.push(b),
            b'=' if stack.is_empty() => call_attribute(text, i, offset, calls),
            b'=' => {}
            close => {
                let open = match close {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                if stack.pop() != Some(open) {
                    return Some((i, "a closing bracket without its opening one"));
                }
            }
        }
        i += 1;
    }
    (!stack.is_empty()).then(|| (text.len().saturating_sub(1), "a bracket is not closed"))
}

/// The bytes [`scan_line`] stops at: brackets, `=` and the opening quote of a string.
const SPECIAL: [bool; 256] = crate::source::byte_set(b"()[]{}=\"");

/// At the `=` at `eq`: if the key before it names computations, the names
/// after it (`%c` or `{%a, %b}`).
fn call_attribute<'a>(
    text: &'a str,
    eq: usize,
    offset: usize,
    calls: &mut Vec<(CallRole, &'a str, usize)>,
) {
    let key_start = text[..eq]
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |k| k + 1);
    let key = &text[key_start..eq];
    if !CALL_KEYS.contains(&key) {
        return;
    }
    let role = super::lower::call_role(key);
    let value = &text[eq + 1..];
    let (names, mut pos) = match value.strip_prefix('{') {
        Some(list) => (&list[..list.find('}').unwrap_or(list.len())], eq + 2),
        None => (value, eq + 1),
    };
    for part in names.split(',') {
        let token = part.trim_start();
        let len = token
            .find(|c: char| !is_name_char(c))
            .unwrap_or(token.len());
        let name = token[..len].trim_start_matches('%');
        if !name.is_empty() {
            calls.push((role, name, offset + pos + part.len() - token.len()));
        }
        pos += part.len() + 1;
        if !value.starts_with('{') {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scan_line;
    use crate::hlo::InstrId;

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
        let module =
            crate::parse_text_on_demand(std::path::Path::new("users.txt"), text.to_string())
                .expect("parses");
        let k = module.computations[0]
            .deferred
            .expect("the fusion body is deferred");
        let base = module.deferred.bodies[k as usize].base;
        let asked: Vec<Vec<u32>> = (0..5)
            .map(|i| module.deferred.line_users(&module, k, i).to_vec())
            .collect();
        let parsed = module.comp(crate::hlo::CompId(0));
        let mut want = vec![Vec::new(); 5];
        for (j, &id) in parsed.instructions.iter().enumerate() {
            for op in &module.instr(id).operands {
                let line = (op.0 & !InstrId::DEFERRED) - base;
                if !want[line as usize].contains(&(j as u32)) {
                    want[line as usize].push(j as u32);
                }
            }
        }
        assert_eq!(asked, want);
        assert_eq!(asked[0], vec![2, 4]);
    }

    fn scan(text: &str) -> (Option<(usize, &'static str)>, Vec<String>) {
        let mut calls = Vec::new();
        let result = scan_line(text, 0, &mut calls);
        (result, calls.iter().map(|c| c.1.to_string()).collect())
    }

    #[test]
    fn brackets_and_quotes_inside_strings_do_not_count() {
        let line = r#"%f = f32[2]{0} fusion(%a), calls=%c, metadata={op_name="x(\"]{" source_file="a.py"}"#;
        assert_eq!(scan(line), (None, vec!["c".to_string()]));
    }

    #[test]
    fn damage_is_found_where_it_is() {
        assert_eq!(
            scan("%f = f32[2)").0,
            Some((10, "a closing bracket without its opening one"))
        );
        assert_eq!(
            scan("%f = f32[2]{0").0,
            Some((12, "a bracket is not closed"))
        );
        // The escaped quote does not close the string: the error is at the line's end.
        let unclosed = r#"%f = f32[] x(), m={a="b\"}"#;
        assert_eq!(
            scan(unclosed).0,
            Some((unclosed.len() - 1, "a string is not closed"))
        );
    }

    #[test]
    fn calls_are_read_outside_brackets_only() {
        let line =
            "%w = (s32[]) while(%t), condition=%cond, body=%body, backend_config={calls=%no}";
        assert_eq!(
            scan(line),
            (None, vec!["cond".to_string(), "body".to_string()])
        );
    }
}
