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
    let mut checks: Vec<Option<Result<DeferredLines<'a>, Error>>> = (0..n).map(|_| None).collect();
    // Each round's lowered lines stay where the round put them (a training
    // step's are 13 MB); each computation knows its round and range, and
    // the arena takes them from there, in file order.
    let mut rounds: Vec<Vec<Option<(usize, Lowered1<'a>)>>> = Vec::new();
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
                if !frontier.is_empty() {
                    let round = lower_lines(file, computations, &frontier);
                    for (i, line) in round.iter().enumerate() {
                        let Some((c, (instr, names))) = line else {
                            continue;
                        };
                        // A computation's lines are side by side in a round.
                        match &mut placed[*c] {
                            Some((_, range)) => range.end = i + 1,
                            slot => *slot = Some((rounds.len(), i..i + 1)),
                        }
                        if let Ok(names) = names {
                            for &(role, callee) in &names.called {
                                let Some(&k) = by_name.get(callee.name) else {
                                    continue;
                                };
                                if instr.opcode == Opcode::Fusion && role == CallRole::Calls {
                                    fused[k] = true;
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
                let unchecked: Vec<usize> = (0..n)
                    .filter(|&c| fused[c] && !eager[c] && checks[c].is_none())
                    .collect();
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
                        crate::hlo::deferred::check_structure(file, name, &lines)
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
                                fused[k] = true;
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
    // Sized once: a big module's arena would otherwise be copied as it grows.
    let count = rounds.iter().map(Vec::len).sum();
    let mut instructions = Vec::with_capacity(count);
    let mut unresolved = Vec::with_capacity(count);
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
        let start = instructions.len();
        if let Some((round, range)) = lines {
            for line in &mut rounds[round][range] {
                let (_, (instr, names)) =
                    line.take().expect("a round lowers every line it is given");
                instructions.push(instr);
                unresolved.push(names.map_err(|e| *e)?);
            }
        }
        comp_raw.deferred = match check {
            Some(check) if !eager => Some(check?),
            _ => None,
        };
        comp_raw.execution_thread = close?;
        comp_raw.instructions = start..instructions.len();
        raw.push(comp_raw);
    }
    Ok((raw, instructions, unresolved))
}

/// One lowered line: its IR part and its names (or the line's error).
type Lowered1<'a> = (Instruction, Result<Unresolved<'a>, Box<Error>>);

/// Lowers the lines of the computations `comps` on all cores, in order, each
/// computation's lines side by side. Lines are independent: an unrolled model
/// keeps most of its instructions in one computation, so the work is split by
/// line. Every slot is `Some`; an `Option` lets the arena move lines out.
fn lower_lines<'a>(
    file: &'a SourceFile,
    computations: &[parse::OutlineComputation<'a>],
    comps: &[usize],
) -> Vec<Option<(usize, Lowered1<'a>)>> {
    let lines: Vec<(usize, Line)> = comps
        .iter()
        .flat_map(|&c| computations[c].instructions.iter().map(move |&l| (c, l)))
        .collect();
    let lower = |shapes: &mut ShapeCache<'a>, &(c, line): &(usize, Line<'a>)| {
        let comp = CompId(c as u32);
        let split = match lower_instruction(file, line, shapes) {
            Ok(raw) => raw.split(comp),
            Err(e) => (placeholder(comp), Err(Box::new(e))),
        };
        (c, split)
    };
    // A line of thousands of operands (a training step's ROOT tuple) takes as
    // long as thousands of lines: it starts first, on a core of its own,
    // instead of ending the pass on one core.
    let long: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].1.text.len() > LONG_LINE)
        .collect();
    let (long_done, mut done): (Vec<_>, Vec<_>) = rayon::join(
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
                    (long.binary_search(&i).is_err()).then(|| lower(shapes, line))
                })
                .collect()
        },
    );
    for (&i, lowered) in long.iter().zip(long_done) {
        done[i] = Some(lowered);
    }
    done
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
        let module = crate::hlo::parse_module(SourceFile::from_text("long.txt", text)).unwrap();
        let entry = module.entry();
        let order: Vec<&str> = entry
            .instructions
            .iter()
            .map(|&id| module.instr(id).name.as_str())
            .collect();
        let mut want: Vec<&str> = names.iter().map(|n| &n[1..]).collect();
        want.extend(["t", "g", "n"]);
        assert_eq!(order, want);
        let tuple = module.instr(entry.instructions[count]);
        let operands: Vec<&str> = tuple
            .operands
            .iter()
            .map(|&id| module.instr(id).name.as_str())
            .collect();
        assert_eq!(operands, want[..count]);
        assert_eq!(module.instr(entry.root).name, "n");
    }
}
