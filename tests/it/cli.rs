//! The binary: exit codes, formats, colors.

use std::process::Command;

fn hlomem() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hlomem"));
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

const SAMPLE: &str = "samples/add_donate0/dump/module_0000.jit_fn.cpu_after_optimizations.txt";

/// `hlomem analyze ARGS --format json`: the exit code and the report.
fn analyze_json(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let out = hlomem()
        .arg("analyze")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

#[test]
fn analyze_exits_0_and_prints_json() {
    let (code, json) = analyze_json(&[SAMPLE]);
    assert_eq!(code, Some(0));
    let module = &json["modules"][0];
    assert_eq!(module["name"], "jit_fn");
    assert_eq!(module["parameters"][0]["bytes"], 8_000_000);
    assert_eq!(module["parameters"][0]["op_name"], "a");
    assert_eq!(module["outputs"][0]["aliases_parameter"]["number"], 0);
}

/// A file named on its own and again inside a folder given too is analyzed once.
#[test]
fn a_file_named_twice_is_analyzed_once() {
    let (code, json) = analyze_json(&["samples/add_donate0", SAMPLE, "./samples/add_donate0/dump"]);
    assert_eq!(code, Some(0));
    let modules = json["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 1, "{modules:#?}");
    assert_eq!(
        modules[0]["key"],
        "samples/add_donate0/dump/module_0000.jit_fn"
    );
}

#[test]
fn broken_input_exits_2_with_position_and_no_report() {
    let out = hlomem()
        .args(["analyze", "tests/bad_inputs/truncated.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no partial report");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tests/bad_inputs/truncated.txt:34:"),
        "{stderr}"
    );
}

#[test]
fn one_bad_file_among_good_ones_still_reports_the_good_ones() {
    let (code, json) = analyze_json(&[SAMPLE, "tests/bad_inputs/empty.txt"]);
    assert_eq!(code, Some(2));
    assert_eq!(json["modules"].as_array().unwrap().len(), 1);
    assert_eq!(json["errors"][0]["file"], "tests/bad_inputs/empty.txt");
    assert_eq!(json["errors"][0]["line"], 1);
}

#[test]
fn usage_errors_exit_2() {
    let out = hlomem().args(["analyze"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = hlomem().args(["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = hlomem()
        .args(["analyze", "no/such/file.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Each command has its own formats; one it does not render is refused.
    for (command, format) in [
        (&["explain", "-"][..], "html"),
        (&["explain", "-"][..], "github"),
        (&["check", SAMPLE, "--budget", "1G"][..], "html"),
        (&["diff", SAMPLE, SAMPLE][..], "html"),
    ] {
        let out = hlomem()
            .args(command)
            .args(["--format", format])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command:?} --format {format}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("invalid value"), "{err}");
    }
}

#[test]
fn no_color_when_piped_or_with_no_color() {
    let out = hlomem().args(["analyze", SAMPLE]).output().unwrap();
    assert!(
        !out.stdout.contains(&0x1b),
        "piped output has no escape codes"
    );
    let out = hlomem()
        .args(["analyze", SAMPLE, "--color", "always"])
        .output()
        .unwrap();
    assert!(out.stdout.contains(&0x1b));
    let out = hlomem()
        .args(["analyze", SAMPLE])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!out.stdout.contains(&0x1b));
}

#[test]
fn verify_agrees_on_a_sample_and_exits_0() {
    let out = hlomem()
        .args(["analyze", "--verify", "samples/while_loop/dump"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("numbers agree with XLA's own reports"),
        "{text}"
    );
}

/// A report that says something else than hlomem computes: exit 1, and the
/// number is named.
#[test]
fn verify_reports_a_disagreement_and_exits_1() {
    let dir = std::env::temp_dir().join(format!("hlomem-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stem = "module_0000.jit_fn.cpu_after_optimizations";
    std::fs::copy(
        format!(
            "{}/samples/add_nodonate/dump/{stem}.txt",
            env!("CARGO_MANIFEST_DIR")
        ),
        dir.join(format!("{stem}.txt")),
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("{stem}-buffer-assignment-values.txt")),
        "\nTotal bytes used: 12345 (12.1KiB)\n\nUsed values:\n",
    )
    .unwrap();
    let out = hlomem()
        .args(["analyze", "--verify", "--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &json["modules"][0]["verification"]["disagreements"][0];
    assert_eq!(d["what"], "total bytes used");
    assert_eq!(d["hlomem"], "24000000");
    assert_eq!(d["xla"], "12345");
}

#[test]
fn explain_code_prints_every_code() {
    let out = hlomem().args(["explain-code"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let list = String::from_utf8_lossy(&out.stdout);
    for rule in hlomem::findings::CODES {
        assert!(list.contains(rule.code), "{list}");
        let out = hlomem().args(["explain-code", rule.code]).output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stdout).contains("## Fix"));
    }
    let out = hlomem()
        .args(["explain-code", "not-donated"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("# HM001 not-donated"));
    let out = hlomem().args(["explain-code", "HM999"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// JAX writes some primitives' parameters into `op_name` with line breaks
/// (`reshape[ dimensions=None\n new_sizes=(8,) ]`, seen in the 2020 dumps):
/// text and Markdown keep each row on one line; JSON keeps the text exact.
#[test]
fn op_names_with_line_breaks_stay_on_one_row() {
    let dir = std::env::temp_dir().join(format!("hlomem-op-name-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("module_0000.jit_f.cpu_after_optimizations.txt");
    std::fs::write(
        &file,
        "HloModule jit_f, is_scheduled=true\n\n\
         ENTRY %e (x: f32[1024]) -> f32[8,128] {\n  \
           %x = f32[1024]{0} parameter(0), metadata={op_name=\"x\"}\n  \
           ROOT %r = f32[8,128]{1,0} reshape(%x), metadata={op_name=\"jit(f)/reshape[ dimensions=None\\n new_sizes=(8, 128) ]\" source_file=\"f.py\" source_line=3}\n\
         }\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    for format in ["text", "markdown"] {
        let out = hlomem()
            .args(["analyze", path, "--verbose", "--format", format])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("reshape[ dimensions=None new_sizes=(8, 128) ]"),
            "{format}: {text}"
        );
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with("new_sizes")),
            "{format}: {text}"
        );
    }
    let out = hlomem()
        .args(["analyze", path, "--format", "json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let op_name = json["modules"][0]["peak"]["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|b| b["op_name"].as_str().filter(|o| o.contains("reshape")))
        .expect("the reshape is live at the peak");
    assert_eq!(
        op_name,
        "jit(f)/reshape[ dimensions=None\n new_sizes=(8, 128) ]"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Notes are data, worded for the interface that asked: the command line's
/// name `--tpu`, the Python package's (`--interface python`) say what to do in
/// Python; the code and facts are the same.
#[test]
fn notes_name_the_settings_of_the_interface_that_asked() {
    use std::io::Write;
    let text = std::fs::read(
        "samples/tpu_while_loop/dump/module_0000.jit_newton_sqrt.cl_933746096.after_optimizations.txt",
    )
    .unwrap();
    let run = |extra: &[&str], format: &str| {
        let mut child = hlomem()
            .args(extra)
            .args(["analyze", "-", "--format", format])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&text).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let note = |json: &str| {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["modules"][0]["notes"][0].clone()
    };
    let (cli, python) = (
        note(&run(&[], "json")),
        note(&run(&["--interface", "python"], "json")),
    );
    assert_eq!(cli["code"], "tpu_chip_assumed");
    assert_eq!(cli["assumed"], "v5e");
    assert_eq!(
        (&cli["code"], &cli["assumed"]),
        (&python["code"], &python["assumed"])
    );
    assert!(cli["message"]
        .as_str()
        .unwrap()
        .ends_with("; --tpu sets the chip"));
    let python_words = python["message"].as_str().unwrap();
    assert!(python_words.contains("compiled program") && !python_words.contains("--"));
    let text = run(&["--interface", "python"], "text");
    assert!(
        text.contains("chip assumed, the compiled program names it"),
        "{text}"
    );
    assert!(!text.contains("--tpu"), "{text}");
    assert!(run(&[], "text").contains("chip assumed, --tpu sets it"));
}

/// `hlomem fits`: exit 0 when it fits, 1 when it does not, 2 for a target it
/// does not know; the text is the verdict's headline and basis.
#[test]
fn fits_exits_by_the_verdict() {
    let run = |args: &[&str]| {
        let out = hlomem().arg("fits").args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    // 15.75GiB is what libtpu lets a program use of a v5e chip.
    let (code, out, _) = run(&["--target", "tpu-v5e", "--needs", "16911433728"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("fits: needs 15.75GiB, "), "{out}");
    let (code, out, _) = run(&["--target", "tpu-v5e", "--needs", "16911433729"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("does not fit: needs 15.75GiB, "), "{out}");
    assert!(
        out.contains("\n  a v5e chip has 16.00GiB of HBM; "),
        "{out}"
    );
    // A refusal never fits, even under the limit.
    let (code, _, _) = run(&["--target", "h100", "--needs", "1GiB", "--refused"]);
    assert_eq!(code, Some(1));
    let (code, _, err) = run(&["--target", "tpu-v9", "--needs", "1GiB"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("unknown target 'tpu-v9'; hlomem knows tpu-v5e:2x2"),
        "{err}"
    );
    // A TPU's figures are the table's: GPU overrides are refused, not ignored.
    let (code, _, err) = run(&["--target", "tpu-v5e", "--needs", "1GiB", "--memory", "8GiB"]);
    assert_eq!(code, Some(2), "{err}");
}

/// `hlomem fits --budget`: the same decision against one device's memory
/// given (`hlomem.largest_fit`'s): exit 0 when it fits, 1 when it does not,
/// 2 for a budget with a target or a slip of a budget.
#[test]
fn fits_against_a_budget_exits_by_the_verdict() {
    let run = |args: &[&str]| {
        let out = hlomem().arg("fits").args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, out, _) = run(&["--budget", "16GiB", "--needs", "17179869184"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        out,
        "fits: needs 16.00GiB, the budget is 16.00GiB, 0.00GiB to spare\n  the budget, one \
         device's memory, is 16.00GiB (17179869184 bytes)\n"
    );
    let (code, out, _) = run(&["--budget", "16GiB", "--needs", "17179869185"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.starts_with("does not fit: needs 16.00GiB, the budget is 16.00GiB, over by "));
    // XLA's figure decides, either way.
    let (code, _, _) = run(&[
        "--budget",
        "1GiB",
        "--needs",
        "1GiB",
        "--xla-needs",
        "1073741825",
    ]);
    assert_eq!(code, Some(1));
    let (code, _, _) = run(&["--budget", "1GiB", "--needs", "2GiB", "--xla-needs", "1GiB"]);
    assert_eq!(code, Some(0));
    // A refusal never fits, even under the budget.
    let (code, _, _) = run(&["--budget", "16GiB", "--needs", "1GiB", "--refused"]);
    assert_eq!(code, Some(1));
    for (args, said) in [
        (
            &["--budget", "16GiB", "--target", "h100", "--needs", "1GiB"][..],
            "cannot be used with",
        ),
        (&["--needs", "1GiB"], "--target <TARGET>"),
        (
            &["--budget", "16", "--needs", "1GiB"],
            "did you mean 16GiB?",
        ),
        (
            &["--budget", "16GiB", "--memory", "8GiB", "--needs", "1GiB"],
            "describe a GPU target",
        ),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
    // A dumped module against a budget of exactly XLA's figure, and one byte less.
    let file = "samples/tpu_mlp_train_donate/dump/module_0000.jit_sgd_step.cl_933746096.after_optimizations.txt";
    let json = |budget: &str| {
        let out = hlomem()
            .args(["fits", file, "--budget", budget, "--format", "json"])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), json)
    };
    let (_, json_at) = json("1GiB");
    assert!(json_at.get("target").is_none(), "{json_at}");
    let xla = json_at["xla_bytes"].as_u64().unwrap();
    assert_eq!(
        json_at["module"]["xla"]["by_space"][0]["bytes"].as_u64(),
        Some(xla)
    );
    let (code, at) = json(&format!("{xla}B"));
    assert_eq!(code, Some(0));
    assert_eq!(at["budget_bytes"].as_u64(), Some(xla));
    assert_eq!(at["spare_bytes"].as_i64(), Some(0));
    let (code, under) = json(&format!("{}B", xla - 1));
    assert_eq!(code, Some(1));
    assert_eq!(under["deciding_bytes"].as_u64(), Some(xla));
    assert_eq!(under["fits"], false);
}

/// `hlomem targets TARGET`: one target, a GPU config of one's own read with
/// its overrides and the allocator's share.
#[test]
fn targets_resolves_one_target() {
    let dir = std::env::temp_dir().join(format!("hlomem-targets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("l40s.txtpb");
    std::fs::write(
        &config,
        "gpu_device_info {\n  device_memory_size: 48305799168\n}\ndevice_description_str: \"NVIDIA L40S\"\n",
    )
    .unwrap();
    let spec = format!("{}:1x1x2", config.display());
    let out = hlomem()
        .args([
            "targets",
            &spec,
            "--memory-fraction",
            "0.5",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let target = &json["target"];
    assert_eq!(target["name"], "l40s");
    assert_eq!(target["device"], "L40S");
    assert_eq!(target["topology"], "1x1x2");
    assert_eq!(target["usable_bytes"], 48305799168u64 / 2);
    assert_eq!(target["words"]["share"], "JAX's share of an L40S");
    // Without a memory in the config, the error says how to give one.
    std::fs::write(&config, "gpu_device_info {\n  core_count: 1\n}\n").unwrap();
    let out = hlomem()
        .args(["targets", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("has no device_memory_size: give --memory SIZE"),
        "{err}"
    );
    let out = hlomem()
        .args(["--interface", "python", "targets", config.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("give memory_gib="), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `hlomem fits FILE`: hlomem's count of the module and XLA's own figure,
/// read from the report beside it; XLA's figure for each memory space is
/// what XLA's memory-usage report says.
#[test]
fn fits_reads_a_dumped_module_and_xlas_figure() {
    let mut checked = 0;
    for (case, target) in [
        ("tpu_mlp_train_donate", "tpu-v5e"),
        ("tpu_v6e_mlp_train_donate", "tpu-v6e"),
        ("tpu_v5p_mlp_train_donate", "tpu-v5p"),
        ("tpu_v4_mlp_train_donate", "tpu-v4"),
        ("tpu_while_loop", "tpu-v5e"),
        ("gpu_mlp_train_donate", "h100"),
        ("gpu_while_loop", "h100"),
    ] {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("samples")
            .join(case)
            .join("dump");
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix("-memory-usage-report.txt") else {
                continue;
            };
            let file = folder.join(format!("{stem}.txt"));
            let out = hlomem()
                .args(["fits", file.to_str().unwrap(), "--target", target])
                .args(["--format", "json"])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{name}");
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let usage = std::fs::read_to_string(entry.path()).unwrap();
            let lines: Vec<&str> = usage.lines().collect();
            let spaces: Vec<(String, u64)> = lines
                .windows(2)
                .filter_map(|w| {
                    let space = w[0].strip_prefix("Memory Space: ")?.split(' ').next()?;
                    let bytes = w[1].strip_prefix("Total bytes: ")?.split(' ').next()?;
                    Some((space.to_string(), bytes.parse().ok()?))
                })
                .collect();
            let by_space: Vec<(String, u64)> = json["module"]["xla"]["by_space"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap().to_string(),
                        s["bytes"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert!(!spaces.is_empty(), "{name}");
            assert_eq!(by_space, spaces, "{name}");
            // XLA's figure decides: the default space's.
            assert_eq!(json["xla_bytes"].as_u64(), Some(spaces[0].1), "{name}");
            assert_eq!(json["deciding_bytes"].as_u64(), Some(spaces[0].1), "{name}");
            assert_eq!(
                json["module"]["device_bytes"], json["needed_bytes"],
                "{name}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} modules");
    // A refusal's own figure is a lower bound beside the module's.
    let file = "samples/tpu_mlp_train_donate/dump/module_0000.jit_sgd_step.cl_933746096.after_optimizations.txt";
    let out = hlomem()
        .args([
            "fits",
            file,
            "--target",
            "tpu-v5e",
            "--refused",
            "--needs",
            "17GiB",
        ])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["needed_bytes"].as_u64(), Some(17 << 30));
    assert_eq!(json["deciding_bytes"].as_u64(), Some(17 << 30));
    // ... and without --refused it is refused: the module has its own count.
    let out = hlomem()
        .args(["fits", file, "--target", "tpu-v5e", "--needs", "17GiB"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
