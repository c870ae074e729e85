//! Fusion bodies are parsed when the analysis reads them (`hlo::deferred`).
//! What must hold: a broken body is never behind a number. Structural damage
//! is refused at load even in a body nothing reads; damage only the grammar
//! sees is refused when the body is read, and always with `--strict`; the
//! numbers with and without `--strict` are the same.

use std::path::{Path, PathBuf};

use crate::support::sample_modules;

fn analyze(path: &Path, strict: bool) -> hlomem::Report {
    hlomem::analyze_paths(
        &[path.to_path_buf()],
        hlomem::AnalyzeOptions {
            strict,
            ..Default::default()
        },
    )
}

/// The fused computations of a module: `(header line index, body line indices)`.
fn fused_bodies(text: &str) -> Vec<(usize, Vec<usize>)> {
    let lines: Vec<&str> = text.lines().collect();
    let fused: Vec<String> = lines
        .iter()
        .filter(|l| l.contains(" fusion("))
        .filter_map(|l| {
            let at = l.find("calls=%")? + "calls=%".len();
            let name: String = l[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || "_.-".contains(*c))
                .collect();
            Some(name)
        })
        .collect();
    let mut bodies = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = line.strip_prefix('%').and_then(|l| l.split(' ').next()) else {
            continue;
        };
        if !fused.iter().any(|f| f == name) {
            continue;
        }
        let body: Vec<usize> = (i + 1..lines.len())
            .take_while(|&k| lines[k] != "}")
            .collect();
        bodies.push((i, body));
    }
    bodies
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn replace_line(text: &str, index: usize, new: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines[index] = new;
    lines.join("\n") + "\n"
}

/// The error the default analysis reports for `text` with line `index`
/// replaced by `new`: its message and line. Panics if the module is not refused.
fn refused(dir: &Path, text: &str, index: usize, new: &str) -> (String, usize) {
    let path = write(
        dir,
        "m_cpu_after_optimizations.txt",
        &replace_line(text, index, new),
    );
    let report = analyze(&path, false);
    let error = report
        .errors
        .first()
        .unwrap_or_else(|| panic!("not refused: {new}"));
    let (_, line, _) = error.error.location().expect("a position");
    (error.error.to_string(), line)
}

/// The text of the `mlp_train_nodonate` sample's module: several fusions,
/// bodies of one to many lines.
fn mlp_train_nodonate() -> String {
    let sample = sample_modules()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("mlp_train_nodonate"))
        .unwrap();
    std::fs::read_to_string(&sample).unwrap()
}

fn error_line(report: &hlomem::Report) -> Option<usize> {
    let error = report.errors.first()?;
    Some(error.error.location().map(|(_, line, _)| line).unwrap_or(0))
}

/// Every fusion body of a real sample in turn gets an operand that does not
/// exist. XLA's parser refuses such a module, so both modes refuse it at
/// that line, whether or not an analysis reads the body (the token-level
/// check at load sees it: `hlo::body_check`).
#[test]
fn a_body_with_an_unknown_operand_is_refused_read_or_not() {
    let sample = sample_modules()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("mlp_train_nodonate"))
        .expect("the mlp_train_nodonate sample");
    let text = std::fs::read_to_string(&sample).unwrap();
    let intact = analyze(&sample, false);
    assert!(intact.errors.is_empty(), "{:?}", intact.errors);
    let dir = tempfile::tempdir().unwrap();
    let bodies = fused_bodies(&text);
    assert!(bodies.len() >= 10, "only {} fusion bodies", bodies.len());
    let mut refused = 0;
    for (_, body) in &bodies {
        let target = *body.last().unwrap();
        let line = text.lines().nth(target).unwrap();
        let Some(open) = line.find("(%") else {
            continue;
        };
        let broken = format!("{}(%no_such_value, {}", &line[..open], &line[open + 1..]);
        let path = write(
            dir.path(),
            "m_cpu_after_optimizations.txt",
            &replace_line(&text, target, &broken),
        );
        let lazy = analyze(&path, false);
        assert_eq!(error_line(&lazy), Some(target + 1), "{broken}");
        let strict = analyze(&path, true);
        assert_eq!(error_line(&strict), Some(target + 1), "--strict: {broken}");
        refused += 1;
    }
    assert!(refused >= 10, "only {refused} bodies tried");
}

/// Damage the structural check sees is refused at load, in any body, with the
/// line: a cut line, a name defined twice, two ROOTs, a call to a
/// computation that does not exist.
#[test]
fn structural_damage_in_any_body_is_refused_at_load() {
    let text = mlp_train_nodonate();
    let dir = tempfile::tempdir().unwrap();
    for (_, body) in fused_bodies(&text) {
        let (first, last) = (body[0], *body.last().unwrap());
        let first_line = text.lines().nth(first).unwrap();
        let last_line = text.lines().nth(last).unwrap();
        let cut = &first_line[..first_line.len() / 2 + 3];
        let cases = [
            (first, cut.to_string(), "do not balance"),
            (last, first_line.replacen(" ROOT", "", 1), "defined twice"),
            (
                first,
                format!("  ROOT {}", first_line.trim_start()),
                "two ROOTs",
            ),
        ];
        for (index, new, expected) in cases {
            if body.len() < 2 && expected != "do not balance" {
                continue;
            }
            let (message, line) = refused(dir.path(), &text, index, &new);
            assert!(message.contains(expected), "{new}: {message}");
            assert!(
                line == index + 1 || line == last + 1 || line == first + 1,
                "{new}: line {line}"
            );
        }
        // `to_apply=` names a computation that does not exist.
        if last_line.contains("to_apply=%") {
            let new = last_line.replacen("to_apply=%", "to_apply=%missing_", 1);
            let path = write(
                dir.path(),
                "m_cpu_after_optimizations.txt",
                &replace_line(&text, last, &new),
            );
            let report = analyze(&path, false);
            let message = report.errors.first().expect("refused").error.to_string();
            assert!(message.contains("unknown computation"), "{message}");
        }
    }
}

/// A fusion whose shape is not the one its body's header says it returns is
/// refused at load, at the fusion's line, even where no analysis reads the
/// body: the same element size (f32 → s32) changes no number, so only the
/// check can catch it.
#[test]
fn a_fusion_that_is_not_its_body_s_declared_result_is_refused_at_load() {
    let text = mlp_train_nodonate();
    let dir = tempfile::tempdir().unwrap();
    let fusions: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(" fusion(") && l.contains(" = f32["))
        .map(|(i, _)| i)
        .collect();
    assert!(fusions.len() >= 3, "the sample has fusions to damage");
    for index in fusions {
        let line = text
            .lines()
            .nth(index)
            .unwrap()
            .replacen(" = f32[", " = s32[", 1);
        let (message, at) = refused(dir.path(), &text, index, &line);
        assert!(message.contains("returns f32["), "{line}: {message}");
        assert_eq!(at, index + 1, "{line}");
    }
}

/// The numbers are the same whether bodies are parsed when read or all at
/// load, on every sample (each also checked against XLA's own by `samples`).
#[test]
fn strict_and_default_give_the_same_numbers() {
    for path in sample_modules() {
        let (lazy, strict) = (analyze(&path, false), analyze(&path, true));
        assert!(lazy.errors.is_empty() && strict.errors.is_empty());
        let (a, b) = (&lazy.modules[0], &strict.modules[0]);
        assert_eq!(
            a.memory.total_bytes,
            b.memory.total_bytes,
            "{}",
            path.display()
        );
        assert_eq!(
            a.memory.temp_bytes,
            b.memory.temp_bytes,
            "{}",
            path.display()
        );
        assert_eq!(a.instructions, b.instructions, "{}", path.display());
        assert_eq!(
            serde_json::to_value(&a.findings).unwrap(),
            serde_json::to_value(&b.findings).unwrap(),
            "{}",
            path.display()
        );
    }
}

/// The sharing rules read a deferred body line by line, finding a value's
/// users by its name in the text first. Names that are prefixes of others
/// (`%p.1`, `%p.10`), a name inside a string, and users that are or are not
/// elementwise must give the numbers a full parse gives; and the variants
/// must differ, or the comparison would not see a wrong reading.
#[test]
fn bodies_read_line_by_line_give_the_numbers_of_a_full_parse() {
    let module = |first_user: &str, second_user: &str| {
        format!(
            r#"HloModule m, entry_computation_layout={{(f32[4096]{{0}}, f32[4096]{{0}})->f32[4096]{{0}}}}

%fused (p.1: f32[4096], p.10: f32[4096]) -> f32[4096] {{
  %p.10 = f32[4096]{{0}} parameter(1)
  %p.1 = f32[4096]{{0}} parameter(0)
  %u.1 = f32[4096]{{0}} {first_user}(%p.1), dimensions={{0}}, metadata={{op_name="reads %p.10 and p.10"}}
  %u.10 = f32[4096]{{0}} {second_user}(%p.10), dimensions={{0}}
  ROOT %sum = f32[4096]{{0}} add(%u.1, %u.10)
}}

ENTRY %main (a: f32[4096], b: f32[4096]) -> f32[4096] {{
  %a = f32[4096]{{0}} parameter(0)
  %b = f32[4096]{{0}} parameter(1)
  %x = f32[4096]{{0}} add(%a, %b)
  %y = f32[4096]{{0}} multiply(%a, %b)
  %f = f32[4096]{{0}} fusion(%x, %y), kind=kLoop, calls=%fused
  ROOT %r = f32[4096]{{0}} negate(%f)
}}
"#
        )
        .replace(", dimensions={0}", "")
        .replacen("broadcast(%p.1)", "broadcast(%p.1), dimensions={0}", 1)
        .replacen("broadcast(%p.10)", "broadcast(%p.10), dimensions={0}", 1)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut temps = Vec::new();
    for (first, second, spacing) in [
        ("negate", "broadcast", " "),
        ("broadcast", "negate", " "),
        ("negate", "negate", " "),
        ("broadcast", "broadcast", " "),
        // Any space or a comment may come before an opcode.
        ("negate", "negate", "\t/* p */"),
    ] {
        let text = module(first, second).replace(" parameter(", &format!("{spacing}parameter("));
        let path = write(dir.path(), "m_cpu_after_optimizations.txt", &text);
        let (lazy, strict) = (analyze(&path, false), analyze(&path, true));
        assert!(
            lazy.errors.is_empty(),
            "{first}/{second}: {:?}",
            lazy.errors
        );
        assert!(
            strict.errors.is_empty(),
            "{first}/{second}: {:?}",
            strict.errors
        );
        let (a, b) = (&lazy.modules[0].memory, &strict.modules[0].memory);
        assert_eq!(a.temp_bytes, b.temp_bytes, "{first}/{second}");
        assert_eq!(a.total_bytes, b.total_bytes, "{first}/{second}");
        temps.push(a.temp_bytes);
    }
    // Both operands may be taken over only when both users are elementwise,
    // neither when both are broadcasts.
    assert!(temps[2] < temps[3], "{temps:?}");
    // Spacing changes nothing.
    assert_eq!(temps[2], temps[4], "{temps:?}");
}

/// A body that passes the check at load but not its reading (an element type
/// XLA does not have) cannot be read past: `LazyModule::read` returns its
/// error, at its line, instead of what the closure computed from the empty
/// body it saw; the module's other reads fail too, and so does completing it.
#[test]
fn a_body_that_fails_when_read_fails_the_read() {
    let text = "HloModule m\n\n\
        %fused (p: f32[4]) -> f32[4] {\n  \
          %p = f32[4]{0} parameter(0)\n  \
          %q = f33[4]{0} negate(%p)\n  \
          ROOT %n = f32[4]{0} negate(%q)\n}\n\n\
        ENTRY %e (x: f32[4]) -> f32[4] {\n  \
          %x = f32[4]{0} parameter(0)\n  \
          ROOT %f = f32[4]{0} fusion(%x), kind=kLoop, calls=%fused\n}\n";
    assert!(
        hlomem::parse_text("m.txt", text).is_err(),
        "a full parse refuses the body"
    );
    let module = hlomem::parse_text_on_demand("m.txt", text).expect("the check at load passes");
    // Nothing read the body yet: reading the entry alone succeeds.
    let entry = module.read(|m| m.entry().instructions.len()).unwrap();
    assert_eq!(entry, 2);
    let read = module.read(|m| m.comp(hlomem::hlo::CompId(0)).instructions.len());
    let error = read.expect_err("the body's error, not its empty reading");
    let (_, line, _) = error.location().expect("points at the body");
    assert_eq!(line, 5, "{error}");
    assert!(
        module.read(|m| m.name.clone()).is_err(),
        "every later read fails"
    );
    assert!(module.into_complete().is_err());
}
