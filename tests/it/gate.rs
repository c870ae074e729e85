//! Dump folders, `check` and `diff`: exit codes, formats, and numbers that
//! equal XLA's (the samples' `truth.json`).

use crate::support::snapshot_settings;

use crate::support::run_hlomem as hlomem;

/// The largest `total_bytes` among the samples, per device, from XLA's own numbers.
/// The sample cases (one module each).
fn sample_cases() -> usize {
    std::fs::read_dir("samples")
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("truth.json").exists())
        .count()
}

/// XLA's device memory in one module's `xla_reported` (`truth.json`): the
/// default memory space's allocations (all of "Total bytes used" off TPU).
fn device_bytes(reported: &serde_json::Value) -> u64 {
    reported["allocation_bytes_by_color"]["0"]
        .as_u64()
        .or_else(|| reported["total_bytes_used"].as_u64())
        .unwrap()
}

/// XLA's device memory for one sample's module.
fn sample_truth_device_bytes(case: &str) -> u64 {
    device_bytes(&crate::support::sample_truth(case)["modules_of_interest"][0]["xla_reported"])
}

/// The most device memory a sample needs, as XLA reported it.
fn largest_sample_total() -> u64 {
    let mut largest = 0;
    for case in std::fs::read_dir("samples")
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("truth.json").exists())
    {
        let truth: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(case.path().join("truth.json")).unwrap())
                .unwrap();
        for m in truth["modules_of_interest"].as_array().unwrap() {
            largest = largest.max(device_bytes(&m["xla_reported"]));
        }
    }
    largest
}

#[test]
fn a_folder_of_samples_in_every_format() {
    let settings = snapshot_settings();
    for format in ["text", "json", "markdown", "github"] {
        let (code, out, err) = hlomem(&["analyze", "samples", "--format", format]);
        assert_eq!(code, Some(0), "{err}");
        settings.bind(|| insta::assert_snapshot!(format!("analyze_folder_{format}"), out));
    }
}

#[test]
fn folder_reports_every_module_with_the_numbers_of_each_file_alone() {
    let (_, out, _) = hlomem(&["analyze", "samples", "--format", "json"]);
    let folder: serde_json::Value = serde_json::from_str(&out).unwrap();
    let modules = folder["modules"].as_array().unwrap();
    assert_eq!(modules.len(), sample_cases(), "one module per sample case");
    for m in modules {
        let (_, alone, _) = hlomem(&["analyze", m["file"].as_str().unwrap(), "--format", "json"]);
        let alone: serde_json::Value = serde_json::from_str(&alone).unwrap();
        assert_eq!(alone["modules"][0]["memory"], m["memory"], "{}", m["file"]);
    }
}

#[test]
fn check_budget_exit_codes() {
    let largest = largest_sample_total();
    let under = (largest - 1).to_string();
    let exact = largest.to_string();
    // Budgets are per device by default: SPMD modules compare one device's memory.
    let (code, out, _) = hlomem(&["check", "samples", "--budget", &under]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("1B over the budget of"), "{out}");
    assert!(
        out.starts_with("FAILED: 1 module over the budget of"),
        "{out}"
    );
    let (code, out, _) = hlomem(&["check", "samples", "--budget", &exact]);
    assert_eq!(code, Some(0), "{out}");
    let ok = format!("ok: {} modules within the budget", sample_cases());
    assert!(out.starts_with(&ok), "{out}");
    // The old flag still runs and means the same.
    let (code, _, _) = hlomem(&["check", "samples", "--per-device", "--budget", &exact]);
    assert_eq!(code, Some(0));
    // With --whole-program the sharded step counts for its 8 devices: a
    // budget of twice one device's memory (XLA's figure for the sample) holds
    // it per device, not whole.
    let sharded = sample_truth_device_bytes("sharded_step");
    let twice = (2 * sharded).to_string();
    let (code, _, _) = hlomem(&["check", "samples/sharded_step", "--budget", &twice]);
    assert_eq!(code, Some(0));
    let (code, out, _) = hlomem(&[
        "check",
        "samples/sharded_step",
        "--whole-program",
        "--budget",
        &twice,
    ]);
    assert_eq!(code, Some(1));
    assert!(
        out.contains("module_0000.jit_sgd_step") && out.contains("on 8 devices"),
        "{out}"
    );
    // GitHub annotations: a failing budget is an error, not a warning.
    let (_, out, _) = hlomem(&["check", "samples", "--budget", &under, "--format", "github"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error ") && l.contains("1B over")),
        "{out}"
    );
}

/// A file that could not be read fails the gate in every format, whatever
/// the budget says of the others: the gate cannot vouch for what it did not read.
#[test]
fn check_fails_when_a_file_could_not_be_analyzed() {
    let args = [
        "check",
        "no/such/file.txt",
        "samples/add_nodonate",
        "--budget",
        "1G",
    ];
    let (code, out, err) = hlomem(&args);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("no/such/file.txt"), "{err}");
    assert!(
        out.starts_with("FAILED: 1 file could not be analyzed (1 module checked"),
        "{out}"
    );
    let (_, out, _) = hlomem(&[&args[..], &["--format", "json"]].concat());
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (json["passed"].as_bool(), json["errors"].as_u64()),
        (Some(false), Some(1))
    );
    let (_, out, _) = hlomem(&[&args[..], &["--format", "markdown"]].concat());
    assert!(out.starts_with("❌ FAILED"), "{out}");
    let (_, out, _) = hlomem(&[&args[..], &["--format", "github"]].concat());
    assert!(
        out.lines()
            .any(|l| l.starts_with("::error ") && l.contains("could not be analyzed"))
            && !out.contains("::notice"),
        "{out}"
    );
}

#[test]
fn check_fail_on_a_finding() {
    let (code, out, _) = hlomem(&["check", "samples/add_nodonate/dump", "--fail-on", "HM001"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("HM001 not-donated (--fail-on)"), "{out}");
    assert!(
        out.contains("with a finding --fail-on names (HM001)"),
        "{out}"
    );
    // No budget given: nothing about a budget is said.
    assert!(!out.contains("budget"), "{out}");
    let (code, out, _) = hlomem(&[
        "check",
        "samples/add_donate0/dump",
        "--fail-on",
        "not-donated",
    ]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("no failing not-donated finding in 1 module") && !out.contains("budget"),
        "{out}"
    );
    let (code, _, err) = hlomem(&["check", "samples", "--fail-on", "HM999"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = hlomem(&["check", "samples", "--budget", "lots"]);
    assert_eq!(code, Some(2), "{err}");
}

/// A finding of a whole argument is named in `diff` as `analyze` names it:
/// HM001 on `params` (a pytree of arrays), not its first array `params[0]['w']`.
#[test]
fn diff_names_a_findings_argument_as_analyze_does() {
    let (code, out, _) = hlomem(&[
        "diff",
        "samples/mlp_train_nodonate/dump",
        "samples/mlp_train_donate/dump",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        d["modules"][0]["findings_gone"],
        serde_json::json!(["HM001 not-donated params"])
    );
}

#[test]
fn diff_reports_the_donation_saving() {
    let (code, out, _) = hlomem(&[
        "diff",
        "samples/add_nodonate/dump",
        "samples/add_donate0/dump",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = &d["modules"][0];
    // XLA's totals: 24000000 without donation, 16000000 with (samples/*/truth.json).
    assert_eq!(
        m["total_bytes"],
        serde_json::json!([24_000_000, 16_000_000])
    );
    assert_eq!(m["findings_gone"][0], "HM001 not-donated a");
    // What changed at the peak, in groups: the output no longer has a
    // buffer of its own (it lives in the donated `a`).
    let outputs = m["peak_by_role"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["group"] == "outputs")
        .expect("outputs changed");
    assert_eq!(
        (outputs["old_bytes"].as_u64(), outputs["new_bytes"].as_u64()),
        (Some(8_000_000), Some(0))
    );
    let (_, text, _) = hlomem(&[
        "diff",
        "samples/add_nodonate/dump",
        "samples/add_donate0/dump",
    ]);
    assert!(
        text.contains("at the peak, by role: outputs 7.63MiB → 0B (-7.63MiB)"),
        "{text}"
    );
    let (code, out, _) = hlomem(&[
        "diff",
        "samples/add_donate0/dump",
        "samples/add_nodonate/dump",
        "--fail-over",
        "7MiB",
    ]);
    assert_eq!(code, Some(1), "grew by 8000000 bytes > 7MiB");
    assert!(
        out.starts_with("FAILED: 1 module grew by more than --fail-over 7.00MiB")
            && out.contains("+7.63MiB"),
        "{out}"
    );
    let (code, _, _) = hlomem(&[
        "diff",
        "samples/add_donate0/dump",
        "samples/add_nodonate/dump",
        "--fail-over",
        "8000000",
    ]);
    assert_eq!(code, Some(0), "grew by exactly the limit");
    // `--fail-over 0`: any growth fails, a shrink or no change passes.
    let (code, out, _) = hlomem(&[
        "diff",
        "samples/add_donate0/dump",
        "samples/add_nodonate/dump",
        "--fail-over",
        "0",
    ]);
    assert_eq!(code, Some(1), "{out}");
    for (old, new) in [
        ("add_nodonate", "add_donate0"),
        ("add_donate0", "add_donate0"),
    ] {
        let (old, new) = (format!("samples/{old}/dump"), format!("samples/{new}/dump"));
        let (code, out, err) = hlomem(&["diff", &old, &new, "--fail-over", "0"]);
        assert_eq!(code, Some(0), "{old} -> {new}: {out}{err}");
    }
}

#[test]
fn module_filter_and_unoptimized_fallback() {
    let (code, out, _) = hlomem(&[
        "analyze", "samples", "--module", "*scan*", "--format", "json",
    ]);
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["modules"].as_array().unwrap().len(), 1);
    let (code, _, err) = hlomem(&["analyze", "samples", "--module", "nothing-like-this"]);
    assert_eq!(code, Some(2), "{err}");

    // A folder with only a before-optimizations module: analyzed, flagged as an estimate.
    let dir = std::env::temp_dir().join(format!("hlomem-before-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let name = "module_0000.jit_fn.before_optimizations.txt";
    std::fs::copy(format!("samples/add_nodonate/dump/{name}"), dir.join(name)).unwrap();
    let (code, out, _) = hlomem(&["analyze", "--format", "json", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let note = &json["modules"][0]["notes"][0];
    assert_eq!(note["code"], "not_optimized", "{note}");
    assert!(note["message"].as_str().unwrap().contains("estimates"));
}

#[test]
fn a_corrupt_module_among_good_ones() {
    let dir = std::env::temp_dir().join(format!("hlomem-mixed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt",
        dir.join("module_0000.jit_fn.cpu_after_optimizations.txt"),
    )
    .unwrap();
    std::fs::write(
        dir.join("module_0001.jit_bad.cpu_after_optimizations.txt"),
        "HloModule bad\n\nENTRY %e {\n",
    )
    .unwrap();
    let (code, out, err) = hlomem(&["analyze", "--format", "json", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(code, Some(2));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["modules"].as_array().unwrap().len(), 1);
    assert!(json["errors"][0]["file"]
        .as_str()
        .unwrap()
        .ends_with("module_0001.jit_bad.cpu_after_optimizations.txt"));
    assert!(err.contains("module_0001.jit_bad"), "{err}");
}

/// Modules from several folders are told apart by their folder; `--verify`
/// results are listed for every module, not only those `--top` details.
#[test]
fn several_folders_and_verify_past_top() {
    let (code, out, err) = hlomem(&[
        "analyze",
        "samples/add_donate0/dump",
        "samples/add_nodonate/dump",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&str> = json["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"samples/add_donate0/dump/module_0000.jit_fn"),
        "{keys:?}"
    );
    assert!(
        keys.contains(&"samples/add_nodonate/dump/module_0000.jit_fn"),
        "{keys:?}"
    );

    let (code, out, err) = hlomem(&["analyze", "samples", "--verify", "--top", "0"]);
    assert_eq!(code, Some(0), "{err}");
    let listed = out
        .lines()
        .filter(|l| l.contains("numbers agree with XLA's"))
        .count();
    assert_eq!(listed, sample_cases(), "{out}");
}
