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
