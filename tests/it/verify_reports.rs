//! `analyze --verify` refuses XLA reports it cannot read: garbage, empty or cut
//! off, each an input error (exit 2) naming the file and line, never "all
//! numbers agree"; and a module without reports is no pass either.

use std::path::{Path, PathBuf};
use std::process::Command;

const SAMPLE_DUMP: &str = "samples/while_loop/dump";
const MODULE: &str = "module_0000.jit_newton_sqrt.cpu_after_optimizations";

/// A copy of the while-loop sample's module and reports in a fresh folder,
/// with `edit` applied to one report.
fn dump_with(name: &str, report: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hlomem-verify-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(SAMPLE_DUMP);
    for entry in std::fs::read_dir(&source).unwrap().flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if !file.starts_with(MODULE) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let text = if file == format!("{MODULE}-{report}.txt") {
            edit(&text)
        } else {
            text
        };
        std::fs::write(dir.join(&file), text).unwrap();
    }
    dir.join(format!("{MODULE}.txt"))
}

fn verify(hlo: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hlomem"))
        .args(["analyze", "--verify", "--color", "never"])
        .arg(hlo)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn intact_reports_agree() {
    let hlo = dump_with("intact", "live-range", |t| t.to_string());
    let (code, stdout, stderr) = verify(&hlo);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("numbers agree"), "{stdout}");
}

#[test]
fn unreadable_reports_are_input_errors() {
    let cut_half = |t: &str| t[..t.len() / 2].to_string();
    let cut_at_line = |t: &str| {
        let lines: Vec<&str> = t.lines().collect();
        lines[..lines.len() / 2].join("\n") + "\n"
    };
    type Edit = Box<dyn Fn(&str) -> String>;
    let cases: Vec<(&str, &str, Edit, &str)> = vec![
        (
            "ba-garbage",
            "buffer-assignment",
            Box::new(|_| "no report here\n".into()),
            "-buffer-assignment.txt:1:",
        ),
        (
            "ba-empty",
            "buffer-assignment",
            Box::new(|_| String::new()),
            "empty or cut off",
        ),
        (
            "ba-cut",
            "buffer-assignment",
            Box::new(cut_at_line),
            "cut off",
        ),
        (
            "ba-cut-mid-line",
            "buffer-assignment",
            Box::new(cut_half),
            "-buffer-assignment",
        ),
        (
            "ba-stray-line",
            "buffer-assignment",
            Box::new(|t| t.replacen("allocation 1:", "alocation 1:", 1)),
            "-buffer-assignment.txt:",
        ),
        (
            "values-garbage",
            "buffer-assignment-values",
            Box::new(|_| "garbage\n".into()),
            "-buffer-assignment-values.txt",
        ),
        (
            "lr-cut",
            "live-range",
            Box::new(cut_at_line),
            "-live-range.txt",
        ),
        (
            "lr-garbage",
            "live-range",
            Box::new(|_| "garbage\n".into()),
            "-live-range.txt:1:",
        ),
        (
            "lr-empty",
            "live-range",
            Box::new(|_| String::new()),
            "-live-range.txt",
        ),
        // A character of several bytes where the error points must not break the caret.
        (
            "lr-multibyte",
            "live-range",
            Box::new(|t| {
                t.replacen(
                    "InstructionSequence:\n",
                    "InstructionSequence:\n  \u{e9}\n",
                    1,
                )
            }),
            "-live-range.txt:3:",
        ),
    ];
    for (name, report, edit, expected) in cases {
        let hlo = dump_with(name, report, edit);
        let (code, stdout, stderr) = verify(&hlo);
        assert_eq!(code, Some(2), "{name}: {stdout}{stderr}");
        assert!(stderr.contains(expected), "{name}: {stderr}");
        assert!(!stdout.contains("numbers agree"), "{name}: {stdout}");
    }
}

#[test]
fn a_module_without_reports_does_not_pass() {
    let dir = std::env::temp_dir().join(format!("hlomem-verify-{}-alone", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lone = dir.join("step.txt");
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(SAMPLE_DUMP)
        .join(format!("{MODULE}.txt"));
    std::fs::copy(source, &lone).unwrap();
    let (code, _, stderr) = verify(&lone);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no XLA report"), "{stderr}");
}

/// One module of a dump folder with XLA's reports beside it.
struct Dump {
    hlo: PathBuf,
    /// `-buffer-assignment`, `-buffer-assignment-values`, `-live-range`; in
    /// the one-file layout all is in the first, the others are empty.
    reports: [String; 3],
}

impl Dump {
    /// The same reports in the one-file layout, as XLA before jax 0.10.2
    /// wrote them: the three files one after another.
    fn joined(&self) -> Dump {
        let [ba, values, lr] = &self.reports;
        Dump {
            hlo: self.hlo.clone(),
            reports: [
                format!("{ba}{values}\n\n{lr}"),
                String::new(),
                String::new(),
            ],
        }
    }
}

/// The after-optimizations modules under `dumps` that have all three reports,
/// or one report of the one-file layout.
fn dumps_under(dumps: &[PathBuf]) -> Vec<Dump> {
    let mut out = Vec::new();
    for dir in dumps {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for hlo in files {
            let name = hlo.file_name().unwrap().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix("after_optimizations.txt") else {
                continue;
            };
            let read = |kind: &str| {
                std::fs::read_to_string(dir.join(format!("{stem}after_optimizations-{kind}.txt")))
                    .ok()
            };
            let reports = match (
                read("buffer-assignment"),
                read("buffer-assignment-values"),
                read("live-range"),
            ) {
                (Some(a), Some(b), Some(c)) => [a, b, c],
                (Some(a), None, None) if a.contains("\nUsed values:") => {
                    [a, String::new(), String::new()]
                }
                _ => continue,
            };
            out.push(Dump {
                hlo: hlo.clone(),
                reports,
            });
        }
    }
    out
}

/// A small deterministic generator (xorshift), so that a failing mutant can
/// be made again.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// The kinds of mutation of issue 36, each with the word that the
/// disagreement (or, for garbage, the error's message) must contain.
const KINDS: [(&str, &str); 8] = [
    ("value size", "size of value"),
    ("value offset", "offset of"),
    ("parameter", "parameter"),
    ("sequence swap", "instruction sequence"),
    ("dropped live range", "live ranges"),
    ("moved value", "allocation"),
    ("total bytes used", "otal bytes used"),
    // A garbage line is refused where it cannot be read, or read as what its
    // place holds (a position, a range) and then disagrees.
    ("garbage line", ""),
];

/// Indexes of the lines of `text` for which `pick` holds.
fn lines_where(text: &str, pick: impl Fn(&str) -> bool) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| pick(l))
        .map(|(i, _)| i)
        .collect()
}

fn with_line(text: &str, at: usize, new: Option<String>) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    match new {
        Some(line) => lines[at] = line,
        None => {
            lines.remove(at);
        }
    }
    lines.join("\n") + "\n"
}

/// `(size=S,offset=O)` of a value line.
fn size_offset(line: &str) -> (u64, u64) {
    let inner = line
        .split("(size=")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let (size, offset) = inner.split_once(",offset=").unwrap();
    (size.parse().unwrap(), offset.parse().unwrap())
}

fn set_size_offset(line: &str, size: u64, offset: u64) -> String {
    let (old_size, old_offset) = size_offset(line);
    line.replacen(
        &format!("(size={old_size},offset={old_offset})"),
        &format!("(size={size},offset={offset})"),
        1,
    )
}

/// One mutant of `kind` (an index into [`KINDS`]): the reports with one change, or
/// `None` when the dump has nothing to change that way.
fn mutate(reports: &[String; 3], kind: usize, rng: &mut Rng) -> Option<[String; 3]> {
    let mut out = reports.clone();
    let ba = &reports[0];
    // The file holding a part: its own in the split layout, the first in the
    // one-file layout.
    let holding = |needle: &str| reports.iter().position(|t| t.contains(needle));
    let values_lines = lines_where(ba, |l| l.starts_with(" value: <"));
    let ba_lines: Vec<&str> = ba.lines().collect();
    match kind {
        0 => {
            let at = *values_lines.get(rng.below(values_lines.len()))?;
            let (size, offset) = size_offset(ba_lines[at]);
            let new = [size * 2, size + 1, size / 2, size + 4096][rng.below(4)];
            (new != size).then_some(())?;
            out[0] = with_line(ba, at, Some(set_size_offset(ba_lines[at], new, offset)));
        }
        1 => {
            let at = *values_lines.get(rng.below(values_lines.len()))?;
            let (size, offset) = size_offset(ba_lines[at]);
            let new = [offset + 1, offset + size.max(1) * 1024, offset + 3][rng.below(3)];
            out[0] = with_line(ba, at, Some(set_size_offset(ba_lines[at], size, new)));
        }
        2 => {
            let headers = lines_where(ba, |l| l.contains(", parameter "));
            let at = *headers.get(rng.below(headers.len()))?;
            let line = ba_lines[at];
            let number: u64 = line
                .split(", parameter ")
                .nth(1)?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            let new = if rng.below(3) == 0 {
                line.replacen("at ShapeIndex {}", "at ShapeIndex {7}", 1)
            } else {
                line.replacen(
                    &format!(", parameter {number},"),
                    &format!(", parameter {},", number + 1 + rng.below(3) as u64),
                    1,
                )
            };
            (new != line).then_some(())?;
            out[0] = with_line(ba, at, Some(new));
        }
        3 => {
            let file = holding("InstructionSequence:")?;
            let lr = &reports[file];
            let sequence = lines_where(lr, |l| {
                l.starts_with("    ")
                    && l.trim()
                        .split_once(':')
                        .is_some_and(|(n, _)| n.parse::<u64>().is_ok())
            });
            let i = rng.below(sequence.len().saturating_sub(1));
            let (a, b) = (*sequence.get(i)?, *sequence.get(i + 1)?);
            let lines: Vec<&str> = lr.lines().collect();
            let name = |l: &str| l.split_once(':').unwrap().1.to_string();
            let number = |l: &str| l.split_once(':').unwrap().0.to_string();
            (name(lines[a]) != name(lines[b])).then_some(())?;
            let swapped = with_line(
                lr,
                a,
                Some(format!("{}:{}", number(lines[a]), name(lines[b]))),
            );
            out[file] = with_line(
                &swapped,
                b,
                Some(format!("{}:{}", number(lines[b]), name(lines[a]))),
            );
        }
        4 => {
            let file = holding("BufferLiveRange:")?;
            let lr = &reports[file];
            let ranges = lines_where(lr, |l| {
                l.starts_with("    ") && l.contains("}:") && !l.contains("bytes")
            });
            let at = *ranges.get(rng.below(ranges.len()))?;
            out[file] = with_line(lr, at, None);
        }
        5 => {
            let from = *values_lines.get(rng.below(values_lines.len()))?;
            let headers = lines_where(ba, |l| l.starts_with("allocation "));
            let owner = |line: usize| headers.iter().filter(|&&h| h < line).count();
            let to = headers[rng.below(headers.len())];
            (owner(to + 1) != owner(from)).then_some(())?;
            let mut lines: Vec<&str> = ba_lines.clone();
            let moved = lines.remove(from);
            let to = if to > from { to - 1 } else { to };
            lines.insert(to + 1, moved);
            out[0] = lines.join("\n") + "\n";
        }
        6 => {
            let file = holding("\nTotal bytes used: ")?;
            let values = &reports[file];
            let at = *lines_where(values, |l| l.starts_with("Total bytes used: ")).first()?;
            let line = values.lines().nth(at)?;
            let total: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
            let new = [total + 1, total.saturating_sub(512), total * 2][rng.below(3)];
            out[file] = with_line(
                values,
                at,
                Some(line.replacen(&total.to_string(), &new.to_string(), 1)),
            );
        }
        _ => {
            let garbage = [
                "garbage",
                "  positions:",
                " value: <1 x @0>",
                "allocation",
                "    x{}:1",
                "  Live",
                "}",
                "<1 @0>",
            ];
            let files: Vec<usize> = (0..3).filter(|&f| !reports[f].is_empty()).collect();
            let file = files[rng.below(files.len())];
            let text = &reports[file];
            let lines: Vec<&str> = text.lines().collect();
            let at = 1 + rng.below(lines.len().saturating_sub(1));
            let mut lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            lines.insert(at, garbage[rng.below(garbage.len())].to_string());
            out[file] = lines.join("\n") + "\n";
        }
    }
    Some(out)
}

/// Whether `--verify` rejects the mutant, and with a message containing `word`:
/// `Ok(())`, or what it said instead.
fn rejected(
    module: &hlomem::hlo::Module,
    model: &hlomem::analysis::MemoryModel,
    mutant: &[String; 3],
    word: &str,
) -> Result<(), String> {
    let xla = match hlomem::xla_report::XlaReports::from_texts(&mutant[0], &mutant[1], &mutant[2]) {
        Err(error) if error.location().is_some() && error.to_string().contains(word) => {
            return Ok(())
        }
        Err(error) => return Err(format!("refused, but with {error}")),
        Ok(xla) => xla,
    };
    let verification = hlomem::report::verification::Verification::from(
        hlomem::analysis::verify::verify(module, model, &xla),
    );
    let whats: Vec<&str> = verification
        .disagreements
        .iter()
        .map(|d| d.what.as_str())
        .collect();
    if whats.iter().any(|w| w.contains(word)) {
        Ok(())
    } else {
        Err(format!(
            "disagreements: {whats:?}; notes: {:?}",
            verification.notes
        ))
    }
}

/// Makes `per_kind` mutants of each kind of every dump's reports and checks
/// that each is rejected with a message naming what disagrees; returns the
/// counts per kind.
fn mutation_campaign(dumps: &[Dump], per_kind: usize) -> Vec<(String, usize)> {
    let mut counts = vec![0usize; KINDS.len()];
    let mut failures = Vec::new();
    let mut ties = Vec::new();
    for (d, dump) in dumps.iter().enumerate() {
        let (module, model) = hlomem::pipeline::load_and_model(&dump.hlo, None, None).unwrap();
        let module = module.into_complete().unwrap();
        let intact = rejected(&module, &model, &dump.reports, "");
        assert!(
            intact.is_err(),
            "{}: intact reports disagree",
            dump.hlo.display()
        );
        for (kind, (name, word)) in KINDS.iter().enumerate() {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((d as u64) << 8 | kind as u64));
            for _ in 0..per_kind {
                let Some(mutant) = mutate(&dump.reports, kind, &mut rng) else {
                    continue;
                };
                counts[kind] += 1;
                match rejected(&module, &model, &mutant, word) {
                    // An offset moved to another start of a gap, aligned and
                    // clear of every live value, is a packing XLA could have
                    // made: a tie, which only a note can say.
                    Err(why) if *name == "value offset" && why.contains("a different packing") => {
                        ties.push(format!("{}: {why}", dump.hlo.display()))
                    }
                    Err(why) => failures.push(format!("{} ({name}): {why}", dump.hlo.display())),
                    Ok(()) => {}
                }
            }
        }
    }
    let counts: Vec<(String, usize)> = KINDS
        .iter()
        .zip(counts)
        .map(|((n, _), c)| (n.to_string(), c))
        .collect();
    println!(
        "mutants made per kind (all rejected unless listed below): {counts:?}; \
         {} offsets moved to a valid place (a note): {ties:?}",
        ties.len()
    );
    assert!(
        failures.is_empty(),
        "{} mutants passed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Such a place is rare: a random offset is almost never the end of another
    // value and clear of everything live with it. Rare, not impossible: a small
    // value moved 1024 of its sizes up can land in a free gap of a large block
    // (one of 99 one-file mutants did, in the v6e sample, once the v4 and v5p
    // samples shifted the seeds), so up to 2% pass, each printed.
    assert!(
        ties.len() * 50 <= counts[1].1,
        "{} of {} offset mutants passed as ties:\n{}",
        ties.len(),
        counts[1].1,
        ties.join("\n")
    );
    counts
}

/// Every mutant of the samples' reports, of each kind of issue 36, is
/// rejected with a message naming what disagrees.
#[test]
#[ignore = "slow (a minute or more in a debug build): .ci/run runs it, `cargo test --test it -- --ignored slow_`"]
fn slow_mutated_sample_reports_are_rejected() {
    let folders = crate::support::sample_dump_folders();
    let dumps = dumps_under(&folders);
    assert!(
        dumps.len() >= 10,
        "{} sample dumps with reports",
        dumps.len()
    );
    let counts = mutation_campaign(&dumps, 6);
    assert!(
        counts.iter().all(|(_, n)| *n > 0),
        "a kind made no mutant: {counts:?}"
    );
}

/// The same, with each sample's three reports joined into one file, the
/// layout XLA wrote before jax 0.10.2.
#[test]
#[ignore = "slow (a minute or more in a debug build): .ci/run runs it, `cargo test --test it -- --ignored slow_`"]
fn slow_mutated_one_file_reports_are_rejected() {
    let folders = crate::support::sample_dump_folders();
    let dumps: Vec<Dump> = dumps_under(&folders).iter().map(Dump::joined).collect();
    let counts = mutation_campaign(&dumps, 3);
    assert!(
        counts.iter().all(|(_, n)| *n > 0),
        "a kind made no mutant: {counts:?}"
    );
}

/// A dump whose one `-buffer-assignment.txt` holds all three parts: read
/// (exit 0 when every number agrees), and refused at the line it breaks.
#[test]
fn one_file_reports_are_read() {
    let join = |name: &str, edit: &dyn Fn(&str) -> String| {
        let hlo = dump_with(name, "live-range", |t| t.to_string());
        let dir = hlo.parent().unwrap();
        let path = |kind: &str| dir.join(format!("{MODULE}-{kind}.txt"));
        let read = |kind: &str| std::fs::read_to_string(path(kind)).unwrap();
        let one = format!(
            "{}{}\n\n{}",
            read("buffer-assignment"),
            read("buffer-assignment-values"),
            read("live-range")
        );
        std::fs::write(path("buffer-assignment"), edit(&one)).unwrap();
        std::fs::remove_file(path("buffer-assignment-values")).unwrap();
        std::fs::remove_file(path("live-range")).unwrap();
        hlo
    };
    let (code, stdout, stderr) = verify(&join("one-file", &|t| t.to_string()));
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("numbers agree"), "{stdout}");
    let broken = |t: &str| t.replacen("\n uses:\n", "\n uses:\ngarbage\n", 1);
    let hlo = join("one-file-broken", &broken);
    let text =
        std::fs::read_to_string(hlo.with_file_name(format!("{MODULE}-buffer-assignment.txt")))
            .unwrap();
    let line = text.lines().position(|l| l == "garbage").unwrap() + 1;
    let (code, stdout, stderr) = verify(&hlo);
    assert_eq!(code, Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("-buffer-assignment.txt:{line}:1")),
        "{stderr}"
    );
}

/// The same campaign over the shared corpus's real reports (CPU, GPU and TPU
/// dumps): every mutant of every kind is rejected.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_mutated_reports_are_rejected() {
    let root = PathBuf::from(
        std::env::var_os("HLOMEM_CORPUS").expect("set HLOMEM_CORPUS to the shared/ folder"),
    );
    let mut folders = Vec::new();
    for cases in [root.join("corpus/cases")].into_iter().chain(
        std::fs::read_dir(root.join("accelerators"))
            .unwrap()
            .flatten()
            .map(|t| t.path().join("cases")),
    ) {
        for case in std::fs::read_dir(cases).into_iter().flatten().flatten() {
            folders.push(case.path().join("dump"));
        }
    }
    // The one-file reports of other XLA versions and front-ends, where
    // every number of the intact reports agrees.
    let mut one_file = Vec::new();
    for under in [root.join("frontends"), root.join("versions")] {
        for dir in std::fs::read_dir(&under).into_iter().flatten().flatten() {
            one_file.push(dir.path().join("dump"));
            for case in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                one_file.push(case.path().join("dump"));
            }
        }
    }
    one_file.sort();
    let one_file: Vec<Dump> = dumps_under(&one_file)
        .into_iter()
        .filter(|dump| {
            let (module, model) = hlomem::pipeline::load_and_model(&dump.hlo, None, None).unwrap();
            module
                .read(|module| rejected(module, &model, &dump.reports, "").is_err())
                .unwrap()
        })
        .collect();
    assert!(
        one_file.len() >= 25,
        "{} one-file dumps that agree",
        one_file.len()
    );
    folders.sort();
    let mut dumps = dumps_under(&folders);
    assert!(
        dumps.len() >= 100,
        "{} corpus dumps with reports",
        dumps.len()
    );
    dumps.extend(one_file);
    mutation_campaign(&dumps, 4);
}
