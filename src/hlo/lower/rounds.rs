//! Which computations are lowered at load, round by round, and which are
//! deferred fusion bodies (see `hlo::deferred`); their lines lowered on all
//! cores.

use rayon::prelude::*;

use super::*;

/// Lowers the lines of the computations the accounting always reads, on all
/// cores: the entry and, round by round, whatever it calls other than through
/// `fusion` (loop bodies, branches, reducers, async and called computations).
/// Fusion bodies, and what only they call, are deferred (`super::deferred`):
/// they get the structural check only, and are parsed when read.
///
/// Instructions go straight into the module's arena, in file order, and their
/// unresolved names into a parallel list (a big module would otherwise be held
/// twice while names are resolved). Errors are returned in file order.
#[allow(clippy::type_complexity)]
pub(super) fn lower_computations<'a>(
    file: &'a SourceFile,
    computations: &mut [parse::OutlineComputation<'a>],
    defer: bool,
) -> Result<
    (
        Vec<RawComputation<'a>>,
        Vec<Instruction>,
        Vec<Unresolved<'a>>,
    ),
    Error,
> {
    // Headers by name only: a fusion body's parameter list is read with it.
    let headers: Vec<_> = computations
        .par_iter()
        .map(|c| lower_computation(file, c, Rule::comp_name))
        .collect();
    let n = headers.len();
    let mut by_name: rustc_hash::FxHashMap<&str, usize> =
        rustc_hash::FxHashMap::with_capacity_and_hasher(n, Default::default());
    for (i, (header, _)) in headers.iter().enumerate() {
        if let Ok(h) = header {
            by_name.entry(h.name.name).or_insert(i);
        }
    }
    let entry = headers
        .iter()
        .position(|(h, _)| h.as_ref().is_ok_and(|h| h.is_entry))
        .unwrap_or(n.saturating_sub(1));
    // Compact `%t#0` operands make resolution add instructions, which a
    // deferred body has no ids for; a `#` anywhere keeps a body eager.
    // (One search over each body's text, on all cores: its lines are
    // contiguous, and a line break is no `#`.)
    let text = file.text.as_bytes();
    let mut eager: Vec<bool> = computations
        .par_iter()
        .map(|c| {
            let body = match (c.instructions.first(), c.instructions.last()) {
                (Some(first), Some(last)) => &text[first.offset..last.offset + last.text.len()],
                _ => &[][..],
            };
            !defer || memchr::memchr(b'#', body).is_some()
        })
        .collect();
    // Fusion bodies, as far as known: called by a fusion's `calls=`, from a
    // lowered line or (nested fusions) from a deferred body's call attributes.
    let mut fused = vec![false; n];
    let mut newly_fused: Vec<usize> = Vec::new();
    let mut checks: Vec<Option<Result<DeferredLines<'a>, Error>>> = (0..n).map(|_| None).collect();
    // Each round's lowered lines stay where the round put them (a training
    // step's are 13 MB); each computation knows its round and range, and
    // the arena is made of them in file order (`in_file_order`).
    let mut rounds: Vec<Round<'a>> = Vec::new();
    let mut placed: Vec<Option<(usize, std::ops::Range<usize>)>> = vec![None; n];
    let mut frontier: Vec<usize> = (0..n).filter(|&c| eager[c] || c == entry).collect();
    for &c in &frontier {
        eager[c] = true;
    }
    // The entry's header is as long as its parameter list and is only
    // checked here: it is read beside the rounds, the other headers after.
    let entry_header = computations.get(entry).map(|c| c.header);
    let (entry_full, ()) = rayon::join(
        || entry_header.map(|h| parse::parse_line(file, Rule::comp_header, h).map(|_| ())),
        || {
            loop {
                let mut next = Vec::new();
                fn want(eager: &mut [bool], k: usize, next: &mut Vec<usize>) {
                    if !eager[k] {
                        eager[k] = true;
                        next.push(k);
                    }
                }
                fn mark_fused(fused: &mut [bool], k: usize, newly: &mut Vec<usize>) {
                    if !fused[k] {
                        fused[k] = true;
                        newly.push(k);
                    }
                }
                if !frontier.is_empty() {
                    // In file order, as the arena will hold them.
                    frontier.sort_unstable();
                    let round = lower_lines(file, computations, &frontier);
                    // A computation's lines are side by side in a round.
                    let mut at = 0;
                    for &c in &frontier {
                        let len = computations[c].instructions.len();
                        placed[c] = Some((rounds.len(), at..at + len));
                        at += len;
                    }
                    for (instr, names) in round.instructions.iter().zip(&round.names) {
                        if let Some(Ok(names)) = names {
                            for &(role, callee) in &names.called {
                                let Some(&k) = by_name.get(callee.name) else {
                                    continue;
                                };
                                if instr.opcode == Opcode::Fusion && role == CallRole::Calls {
                                    mark_fused(&mut fused, k, &mut newly_fused);
                                } else {
                                    want(&mut eager, k, &mut next);
                                }
                            }
                        }
                    }
                    rounds.push(round);
                }
                // Deferred bodies' own calls: nested fusions stay deferred; reducers
                // (thread-local, with memory of their own) are lowered.
                // Only the computations found fused since the last round are
                // looked at: a scan of all of them per round was quadratic
                // on 20,000 nested loops (a round each).
                let mut unchecked: Vec<usize> = newly_fused
                    .drain(..)
                    .filter(|&c| !eager[c] && checks[c].is_none())
                    .collect();
                unchecked.sort_unstable();
                unchecked.dedup();
                // Each body's lines are listed on the core that checks them:
                // a training step has 150,000 of them.
                let outline: &[parse::OutlineComputation] = computations;
                let results: Vec<_> = unchecked
                    .par_iter()
                    .map(|&c| {
                        let name = headers[c].0.as_ref().map_or("", |h| h.name.name);
                        let lines: Vec<(u32, u32)> = outline[c]
                            .instructions
                            .iter()
                            .map(|l| (l.offset as u32, l.text.len() as u32))
                            .collect();
                        let header = outline[c].header.text;
                        crate::hlo::structure::check(file, name, header, &lines)
                            .map(|structure| DeferredLines { lines, structure })
                    })
                    .collect();
                for (&c, result) in unchecked.iter().zip(results) {
                    if let Ok(d) = &result {
                        for &(role, callee, _) in &d.structure.calls {
                            let Some(&k) = by_name.get(callee) else {
                                continue;
                            };
                            if role == CallRole::Calls {
                                mark_fused(&mut fused, k, &mut newly_fused);
                            } else {
                                want(&mut eager, k, &mut next);
                            }
                        }
                    }
                    checks[c] = Some(result);
                }
                // Computations nobody calls are lowered, as XLA keeps them.
                if next.is_empty() && unchecked.is_empty() {
                    (0..n)
                        .filter(|&c| !fused[c])
                        .for_each(|c| want(&mut eager, c, &mut next));
                }
                if next.is_empty() && unchecked.is_empty() {
                    break;
                }
                frontier = next;
            }
        },
    );

    // Every line is lowered or kept as offsets now: the outline's lists of
    // lines (16 bytes a line) go before the arena is filled.
    for c in computations.iter_mut() {
        c.instructions = Vec::new();
    }
    let Round {
        instructions,
        names: mut lines_names,
    } = in_file_order(rounds, &placed);
    let mut raw = Vec::with_capacity(n);
    // The full header of every computation lowered now.
    let mut full: Vec<Option<Result<(), Error>>> = computations
        .par_iter()
        .zip(&eager)
        .enumerate()
        .map(|(i, (c, &eager))| {
            (eager && i != entry)
                .then(|| parse::parse_line(file, Rule::comp_header, c.header).map(|_| ()))
        })
        .collect();
    if let Some(slot) = full.get_mut(entry) {
        *slot = entry_full;
    }
    let mut next_line = 0;
    let parts = headers
        .into_iter()
        .zip(full)
        .zip(placed)
        .zip(checks)
        .zip(eager);
    for (((((header, close), full), lines), check), eager) in parts {
        let mut comp_raw = header?;
        if let Some(full) = full {
            full?;
        }
        let start = next_line;
        next_line += lines.map_or(0, |(_, range)| range.len());
        for names in &mut lines_names[start..next_line] {
            if let Some(Err(e)) = names.take_if(|n| n.is_err()) {
                return Err(*e);
            }
        }
        comp_raw.deferred = match check {
            Some(check) if !eager => Some(check?),
            _ => None,
        };
        comp_raw.execution_thread = close?;
        comp_raw.instructions = start..next_line;
        raw.push(comp_raw);
    }
    // Every line's names are there (a round lowers every line it is given)
    // and none is an error (returned above).
    let unresolved = lines_names.into_iter().flatten().flatten().collect();
    Ok((raw, instructions, unresolved))
}

/// One round's lowered lines, its computations' side by side in file order:
/// each line's IR part and its names (or the line's error). A name slot is
/// `None` only while its line is lowered apart (a long line), or once taken.
#[derive(Default)]
struct Round<'a> {
    instructions: Vec<Instruction>,
    names: Vec<Option<Result<Unresolved<'a>, Box<Error>>>>,
}

/// The rounds' lines in file order, moved rather than copied where they
/// lie: the largest round (a training step's entry) becomes the arena, grown
/// once; from the last computation back, each of its blocks moves toward
/// the end, and the other rounds' lines fill the gaps. A copy would hold a
/// big module's lines twice.
fn in_file_order<'a>(
    mut rounds: Vec<Round<'a>>,
    placed: &[Option<(usize, std::ops::Range<usize>)>],
) -> Round<'a> {
    let total = rounds.iter().map(|r| r.instructions.len()).sum();
    let Some(big) = (0..rounds.len()).max_by_key(|&r| rounds[r].instructions.len()) else {
        return Round::default();
    };
    let mut arena = std::mem::take(&mut rounds[big]);
    let filler = placeholder(CompId(0));
    // Exactly: `resize` alone would double the capacity.
    arena
        .instructions
        .reserve_exact(total - arena.instructions.len());
    arena.instructions.resize(total, filler.clone());
    arena.names.reserve_exact(total - arena.names.len());
    arena.names.resize_with(total, || None);
    let mut end = total;
    for (round, range) in placed.iter().rev().flatten() {
        let start = end - range.len();
        if *round == big {
            // A round holds its computations in file order, so a block only
            // moves right, into slots already emptied: last line first.
            for (k, from) in range.clone().enumerate().rev() {
                arena.instructions.swap(from, start + k);
                arena.names.swap(from, start + k);
            }
        } else {
            let source = &mut rounds[*round];
            for (k, from) in range.clone().enumerate() {
                arena.instructions[start + k] =
                    std::mem::replace(&mut source.instructions[from], filler.clone());
                arena.names[start + k] = source.names[from].take();
            }
        }
        end = start;
    }
    arena
}

/// Lowers the lines of the computations `comps` on all cores, in order, each
/// computation's lines side by side. Lines are independent: an unrolled model
/// keeps most of its instructions in one computation, so the work is split by
/// line.
fn lower_lines<'a>(
    file: &'a SourceFile,
    computations: &[parse::OutlineComputation<'a>],
    comps: &[usize],
) -> Round<'a> {
    let lines: Vec<(usize, Line)> = comps
        .iter()
        .flat_map(|&c| computations[c].instructions.iter().map(move |&l| (c, l)))
        .collect();
    type Lowered1<'a> = (Instruction, Option<Result<Unresolved<'a>, Box<Error>>>);
    let lower = |shapes: &mut ShapeCache<'a>, &(c, line): &(usize, Line<'a>)| -> Lowered1<'a> {
        let comp = CompId(c as u32);
        let (instr, names) = match lower_instruction(file, line, shapes) {
            Ok(raw) => raw.split(comp),
            Err(e) => (placeholder(comp), Err(Box::new(e))),
        };
        (instr, Some(names))
    };
    // A line of thousands of operands (a training step's ROOT tuple) takes as
    // long as thousands of lines: it starts first, on a core of its own,
    // instead of ending the pass on one core.
    let long: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].1.text.len() > LONG_LINE)
        .collect();
    let filler = placeholder(CompId(0));
    let mut round = Round::default();
    let (long_done, ()): (Vec<Lowered1>, ()) = rayon::join(
        || {
            long.par_iter()
                .map_init(ShapeCache::default, |shapes, &i| lower(shapes, &lines[i]))
                .collect()
        },
        || {
            lines
                .par_iter()
                .enumerate()
                .with_min_len(256)
                .map_init(ShapeCache::default, |shapes, (i, line)| {
                    // A long line's slot is filled below.
                    match long.binary_search(&i) {
                        Ok(_) => (filler.clone(), None),
                        Err(_) => lower(shapes, line),
                    }
                })
                .unzip_into_vecs(&mut round.instructions, &mut round.names)
        },
    );
    for (&i, (instr, names)) in long.iter().zip(long_done) {
        round.instructions[i] = instr;
        round.names[i] = names;
    }
    round
}

/// Lines longer than this are lowered first (bytes).
const LONG_LINE: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use crate::source::SourceFile;

    /// A line longer than [`super::LONG_LINE`] is lowered ahead of the others
    /// and still lands in its place, its operands in order.
    #[test]
    fn a_long_line_is_lowered_in_its_place() {
        let count = 4000;
        let names: Vec<String> = (0..count)
            .map(|i| format!("%parameter_number_{i}"))
            .collect();
        let mut text = String::from("HloModule long\n\nENTRY %main {\n");
        for (i, name) in names.iter().enumerate() {
            text += &format!("  {name} = f32[4]{{0}} parameter({i})\n");
        }
        let shapes = vec!["f32[4]{0}"; count].join(", ");
        let line = format!("  %t = ({shapes}) tuple({})\n", names.join(", "));
        assert!(line.len() > super::LONG_LINE);
        text += &line;
        text += "  %g = f32[4]{0} get-tuple-element(%t), index=1\n";
        text += "  ROOT %n = f32[4]{0} negate(%g)\n}\n";
        let lazy = crate::hlo::parse_module(SourceFile::from_text("long.txt", text)).unwrap();
        let module = lazy.unchecked();
        let entry = module.entry();
        let order: Vec<&str> = entry
            .instructions
            .iter()
            .map(|&id| module.instr_name(id))
            .collect();
        let mut want: Vec<&str> = names.iter().map(|n| &n[1..]).collect();
        want.extend(["t", "g", "n"]);
        assert_eq!(order, want);
        let tuple = module.instr(entry.instructions[count]);
        let operands: Vec<&str> = tuple
            .operands
            .iter()
            .map(|&id| module.instr_name(id))
            .collect();
        assert_eq!(operands, want[..count]);
        assert_eq!(module.instr_name(entry.root), "n");
    }

    /// Computations lowered in later rounds (what the entry calls, what that
    /// calls) sit before the entry in the file: the arena still holds every
    /// line in file order, each computation's lines together.
    #[test]
    fn later_rounds_take_their_place_in_file_order() {
        let text = "HloModule rounds\n\n\
            %inner (a: f32[], b: f32[]) -> f32[] {\n  \
              %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  \
              ROOT %sum = f32[] add(%a, %b)\n}\n\n\
            %fused (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n  \
              ROOT %neg = f32[8]{0} negate(%p)\n}\n\n\
            %outer (c: f32[], d: f32[]) -> f32[] {\n  \
              %c = f32[] parameter(0)\n  %d = f32[] parameter(1)\n  \
              ROOT %call = f32[] call(%c, %d), to_apply=%inner\n}\n\n\
            ENTRY %main (x: f32[8]) -> f32[] {\n  %x = f32[8]{0} parameter(0)\n  \
              %f = f32[8]{0} fusion(%x), kind=kLoop, calls=%fused\n  \
              %zero = f32[] constant(0)\n  \
              ROOT %r = f32[] reduce(%f, %zero), dimensions={0}, to_apply=%outer\n}\n";
        let lazy = crate::hlo::parse_module(SourceFile::from_text("rounds.txt", text)).unwrap();
        let module = lazy.unchecked();
        let in_id_order: Vec<&str> = module
            .instrs()
            .map(|(id, _)| module.instr_name(id))
            .collect();
        // `%fused` is deferred: its lines are not in the arena.
        let file_order = ["a", "b", "sum", "c", "d", "call", "x", "f", "zero", "r"];
        assert_eq!(in_id_order, file_order);
        for (_, comp) in module.shells().filter(|(_, c)| c.deferred.is_none()) {
            let ids: Vec<usize> = comp.instructions.iter().map(|i| i.index()).collect();
            assert!(
                ids.windows(2).all(|w| w[1] == w[0] + 1),
                "{}: {ids:?}",
                comp.name
            );
        }
        assert_eq!(module.instr_name(module.entry().root), "r");
    }
}
