//! `-` reads HLO text from standard input (`compiled.as_text()` piped in, or
//! sent by the Python package): the same report as the file, named `<stdin>`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::support::snapshot_settings;

const SAMPLE: &str = "samples/add_donate0/dump/module_0000.jit_fn.cpu_after_optimizations.txt";

/// Runs hlomem with `args`, `input` on its standard input.
fn hlomem_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hlomem"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: a large input would otherwise fill the pipe
    // while hlomem waits to write its own output.
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    // hlomem may refuse its arguments before it reads standard input, and
    // exit: the write then meets a closed pipe, which is no error of ours.
    match writer.join().unwrap() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        result => result.unwrap(),
    }
    out
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn analyze_dash_reads_standard_input_as_the_file() {
    let text = std::fs::read(SAMPLE).unwrap();
    let piped = hlomem_with_stdin(&["analyze", "-", "--format", "json"], &text);
    assert_eq!(piped.status.code(), Some(0));
    let mut piped = json(&piped);
    let module = &mut piped["modules"][0];
    assert_eq!(module["file"], "<stdin>");
    assert_eq!(module["key"], "<stdin>");

    let from_file = hlomem_with_stdin(&["analyze", SAMPLE, "--format", "json"], b"");
    let mut from_file = json(&from_file);
    // Only the name differs: the numbers, findings and everything else agree.
    for report in [&mut piped, &mut from_file] {
        let module = report["modules"][0].as_object_mut().unwrap();
        module.remove("file");
        module.remove("key");
    }
    assert_eq!(piped, from_file);
}

#[test]
fn stdin_beside_files_keeps_its_name() {
    let text = std::fs::read(SAMPLE).unwrap();
    let out = hlomem_with_stdin(&["analyze", SAMPLE, "-", "--format", "json"], &text);
    assert_eq!(out.status.code(), Some(0));
    let report = json(&out);
    let keys: Vec<&str> = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [SAMPLE, "<stdin>"]);
}

#[test]
fn check_and_diff_read_standard_input() {
    let text = std::fs::read(SAMPLE).unwrap();
    let over = hlomem_with_stdin(&["check", "-", "--budget", "1MiB"], &text);
    assert_eq!(over.status.code(), Some(1), "the sample needs 15MiB");
    assert!(String::from_utf8_lossy(&over.stdout).contains("<stdin>"));
    let fits = hlomem_with_stdin(&["check", "-", "--budget", "1GiB"], &text);
    assert_eq!(fits.status.code(), Some(0));
    let same = hlomem_with_stdin(&["diff", SAMPLE, "-", "--fail-over", "1"], &text);
    assert_eq!(same.status.code(), Some(0));
}

#[test]
fn standard_input_is_read_once() {
    let out = hlomem_with_stdin(&["analyze", "-", "-"], b"HloModule m");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("can be given once"));
    let out = hlomem_with_stdin(&["diff", "-", "-"], b"HloModule m");
    assert_eq!(out.status.code(), Some(2));
    let empty = hlomem_with_stdin(&["analyze", "-"], b"");
    assert_eq!(empty.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("standard input is empty"),
        "{}",
        String::from_utf8_lossy(&empty.stderr)
    );
}

/// What `lowered.as_text()` piped in shows: the StableHLO hint, at `<stdin>`.
#[test]
fn stablehlo_on_standard_input_says_what_to_pass() {
    let text = std::fs::read("tests/bad_inputs/stablehlo.mlir").unwrap();
    let out = hlomem_with_stdin(&["analyze", "-", "--color", "never"], &text);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no report");
    snapshot_settings().bind(|| {
        insta::assert_snapshot!("stdin_stablehlo", String::from_utf8_lossy(&out.stderr));
    });
}

/// A TPU module read alone (`compiled.as_text()`, no dump folder) does not
/// say its chip, and tuple tables are 512 bytes on v5e, 32 on v6e: device
/// memory is then "about", never presented as exact; `--tpu` makes it exact,
/// and the dump folder's `target_arguments.txt` names the chip itself.
#[test]
fn a_tpu_module_without_its_chip_is_not_exact() {
    let dump = "samples/tpu_v6e_mlp_train_donate/dump";
    let file = format!("{dump}/module_0000.jit_sgd_step.cl_933746096.after_optimizations.txt");
    let text = std::fs::read(&file).unwrap();
    let exact = |out: &Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let memory = &json["modules"][0]["memory"];
        let hbm = memory["by_space"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["color"] == 0)
            .unwrap()["exact"]
            .as_bool()
            .unwrap();
        (hbm, memory["total_exact"].as_bool().unwrap())
    };
    let alone = hlomem_with_stdin(&["analyze", "-", "--format", "json"], &text);
    assert_eq!(exact(&alone), (false, false));
    let named = hlomem_with_stdin(&["analyze", "-", "--tpu", "v6e", "--format", "json"], &text);
    assert!(exact(&named).0);
    let text_report = hlomem_with_stdin(&["analyze", "-"], &text);
    let shown = String::from_utf8_lossy(&text_report.stdout);
    assert!(shown.contains("about: the TPU chip is assumed"), "{shown}");
    // The gate says so too, in words and as data.
    let check = hlomem_with_stdin(&["check", "-", "--budget", "1GiB"], &text);
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("needs about "), "{said}");
    let check = hlomem_with_stdin(
        &[
            "check", "-", "--budget", "1GiB", "--tpu", "v6e", "--format", "json",
        ],
        &text,
    );
    let json: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(json["modules"][0]["exact"], true);
    let (code, out, err) = crate::support::run_hlomem(&["analyze", dump, "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["modules"][0]["memory"]["by_space"][0]["exact"], true);
}

/// Every TPU sample read alone (no chip named): each figure that depends on
/// the chip says "about" and gives both chips' bytes, and XLA's is one of
/// them; every figure that does not is XLA's own. On v4 and v5e samples the
/// figure shown is XLA's; on v5p and v6e the other chips' figure is.
#[test]
fn tpu_samples_read_alone_give_xlas_figures_for_one_of_the_chips() {
    let mut checked = 0;
    let mut told_apart = 0;
    for hlo in crate::support::sample_modules() {
        let (case, truth) = crate::support::sample_module_truth(&hlo);
        if crate::support::sample_backend(&case) != "tpu" {
            continue;
        }
        let text = std::fs::read(&hlo).unwrap();
        let out = hlomem_with_stdin(&["analyze", "-", "--format", "json"], &text);
        let memory = json(&out)["modules"][0]["memory"].clone();
        let shown = hlomem_with_stdin(&["analyze", "-"], &text);
        let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
        let other = memory["device_estimates"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["kind"] == "chip-assumed")
            .map(|e| e["other_figures"].clone());
        let ma = &truth["memory_analysis"];
        let hbm = truth["xla_reported"]["memory_usage_report_total_bytes"][0].as_u64();
        for (row, field, xla) in [
            (
                "arguments",
                "argument_bytes",
                ma["argument_size_in_bytes"].as_u64(),
            ),
            (
                "outputs",
                "output_bytes",
                ma["output_size_in_bytes"].as_u64(),
            ),
            ("aliased", "alias_bytes", ma["alias_size_in_bytes"].as_u64()),
            ("live peak", "live_peak_bytes", None),
            ("in default", "device_bytes", hbm),
        ] {
            let ours = memory[field].as_u64().unwrap();
            let theirs = other.as_ref().and_then(|o| o[field].as_u64());
            let line = shown
                .lines()
                .find(|l| l.trim_start().starts_with(row))
                .unwrap_or_else(|| panic!("{case}: no {row} row in\n{shown}"));
            match theirs.filter(|&t| t != ours) {
                Some(theirs) => {
                    told_apart += 1;
                    assert!(line.contains("about"), "{case}: {line}");
                    if let Some(xla) = xla {
                        assert!(
                            xla == ours || xla == theirs,
                            "{case} {field}: XLA {xla}, hlomem {ours} or {theirs}"
                        );
                    }
                }
                None => {
                    if let Some(xla) = xla {
                        assert_eq!(ours, xla, "{case} {field}, the same on every chip");
                    }
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 6, "{checked} TPU samples");
    assert!(told_apart > 0, "no figure depended on the chip");
}
