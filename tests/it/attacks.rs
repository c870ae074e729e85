//! The reproducers of the second attack on hlomem (issue "never crash, never
//! lie, round two"): deep call nesting, adversarial sizes of one computation,
//! sums past 2^64, odd folder entries and odd command-line input. Each must
//! give a result or a clear error, never an abort, a hang or a wrong number.
//! How fast the large shapes run is measured by `cargo bench` (stages), not here.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::support::run_hlomem as hlomem;

#[path = "../../measure/shapes.rs"]
mod shapes;
use shapes::{
    chain, diamonds, fan_out, many_outputs, many_parameters, nested_calls, nested_whiles,
    wide_concatenate,
};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hlomem-attack-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// 20,000 nested calls and whiles analyze, on their own and in a folder
/// (whose workers have smaller stacks), with the numbers of one level.
#[test]
#[ignore = "slow (a minute or more in a debug build): .ci/run runs it, `cargo test --test it -- --ignored slow_`"]
fn slow_twenty_thousand_nested_calls_and_whiles() {
    let dir = scratch("nested");
    let calls = dir.join("module_0001.calls.cpu_after_optimizations.txt");
    let whiles = dir.join("module_0002.whiles.cpu_after_optimizations.txt");
    std::fs::write(&calls, nested_calls(20_000)).unwrap();
    std::fs::write(&whiles, nested_whiles(20_000)).unwrap();
    for path in [&calls, &whiles] {
        let (code, out, err) = hlomem(&["analyze", "--format", "json", path.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{}: {err}", path.display());
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(
            json["modules"][0]["memory"]["total_bytes"]
                .as_u64()
                .unwrap()
                > 0
        );
    }
    let (code, out, err) = hlomem(&["analyze", "--format", "json", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let modules = json["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 2);
    // One f32[4] in, one out: the loop state and the calls' values add nothing else.
    assert_eq!(modules[0]["memory"]["argument_bytes"], 16);
    assert_eq!(modules[0]["memory"]["output_bytes"], 16);
    assert_eq!(modules[1]["memory"]["argument_bytes"], 4);
    std::fs::remove_dir_all(&dir).ok();
}

/// A chain of 60,000 instructions (each the only user of the one before, all
/// sharing one buffer), a fan-out (one value read by 60,000) and a
/// concatenate of 1,000,000 operands: the shapes that were quadratic.
#[test]
#[ignore = "slow (a minute or more in a debug build): .ci/run runs it, `cargo test --test it -- --ignored slow_`"]
fn slow_long_chains_wide_fan_out_and_huge_operand_lists() {
    let n = 60_000;
    for text in [chain(n), fan_out(n)] {
        let module = hlomem::parse_text("wide.txt", text).unwrap();
        let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
        assert_eq!(model.totals.argument_bytes, 64);
        assert_eq!(model.totals.output_bytes, 64);
    }
    // 20,000 outputs (a fuzz run's timeout): each its own allocation.
    let module = hlomem::parse_text("outputs.txt", many_outputs(20_000)).unwrap();
    let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
    assert_eq!(model.totals.output_bytes, 20_000 * 64 + 20_000 * 8);
    let text = wide_concatenate(1_000_000);
    let module = hlomem::parse_text("concat.txt", text).unwrap();
    let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
    assert_eq!(model.totals.output_bytes, 4_000_000);
}

/// Values without a source line, each read twice by the next (an unscheduled
/// module, as before-optimizations dumps are): the peak's values are charged
/// to the one line at the end, in time and memory linear in the module (the
/// search carried lists of roots that doubled at each level: 20 GB on an
/// 83 KB TPU module).
#[test]
fn values_without_lines_read_twice_are_charged_in_linear_memory() {
    let dir = scratch("diamonds");
    let path = dir.join("diamonds.txt");
    std::fs::write(&path, diamonds(2_000)).unwrap();
    let (code, out, err) = hlomem(&["analyze", "--format", "json", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let groups = json["modules"][0]["peak"]["by_source"].as_array().unwrap();
    let charged: Vec<&serde_json::Value> =
        groups.iter().filter(|g| g["source"] == "f.py:3").collect();
    assert_eq!(charged.len(), 1, "{groups:#?}");
    // `big` and `v0`, both made without a line, both charged to it.
    assert_eq!(charged[0]["made_by_xla"], true);
    assert_eq!(charged[0]["buffers"], 2);
    assert_eq!(charged[0]["bytes"], 4096 * 4 + 16 * 4);
    std::fs::remove_dir_all(&dir).ok();
}

/// 30,000 entry parameters: each its own group in the peak's scopes (the
/// scope tree searched its children one by one per buffer: quadratic).
/// Without op_names they name no argument: each stands under `parameters`.
#[test]
fn thirty_thousand_parameters_each_grouped() {
    let n = 30_000;
    let module = hlomem::parse_text("params.txt", many_parameters(n)).unwrap();
    let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
    assert_eq!(model.totals.argument_bytes, 16 * n as u64);
    let usage = hlomem::usage::peak_usage(&module, &model);
    let arguments = usage
        .by_scope
        .children
        .iter()
        .find(|c| c.name == "parameters")
        .expect("a parameters scope");
    assert_eq!(arguments.children.len(), n);
}

/// Four parameters of 2^62 bytes add up to 2^64: an input error naming the
/// line, never a saturated "16.00EiB".
#[test]
fn sums_past_64_bits_are_input_errors() {
    let dir = scratch("sums");
    let path = dir.join("huge.txt");
    let shape = "u8[4611686018427387904]{0}";
    let mut text = format!(
        "HloModule m, is_scheduled=true, entry_computation_layout={{({shape}, {shape}, {shape}, {shape})->{shape}}}\n\nENTRY e {{\n"
    );
    for i in 0..4 {
        let _ = writeln!(text, "  p{i} = {shape} parameter({i})");
    }
    let _ = writeln!(text, "  ROOT n = {shape} negate(p0)\n}}");
    std::fs::write(&path, text).unwrap();
    for command in ["analyze", "check"] {
        let mut args = vec![command, path.to_str().unwrap()];
        if command == "check" {
            args.extend(["--budget", "16GiB"]);
        }
        let (code, out, err) = hlomem(&args);
        assert_eq!(code, Some(2), "{command}: {out}{err}");
        assert!(err.contains("add up to more than 2^64 bytes"), "{err}");
        assert!(err.contains("huge.txt:7:"), "{err}");
        assert!(!out.contains("16.00EiB") && !err.contains("16.00EiB"));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// An out-of-memory message with sizes of 2^64 bytes: no sum includes them.
#[test]
fn explain_never_sums_past_64_bits() {
    let text =
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 18446744073709551615 bytes.\n\
                Peak buffers:\n\tBuffer 1:\n\t\tSize: 16.00EiB\n\t\tShape: u8[1]\n\t\t===\n\
                \tBuffer 2:\n\t\tSize: 15.99EiB\n\t\tShape: u8[2]\n\t\t===\n\
                \tBuffer 3:\n\t\tSize: 15.99EiB\n\t\tShape: u8[2]\n\t\t===\n";
    let message = hlomem::oom::read(text).expect("recognized");
    let explanation = hlomem::oom::explain::explain(&message, None);
    for group in &explanation.buffer_groups {
        if group.count > 1 {
            assert_eq!(group.total_bytes, None, "{group:?}");
        }
    }
    // 16.00EiB is not a byte count a u64 holds: no size, rather than a saturated one.
    assert!(explanation
        .buffer_groups
        .iter()
        .any(|g| g.shape.as_deref() == Some("u8[1]") && g.each_bytes.is_none()));
}

/// A FIFO named like a module is named and skipped (reading it would wait
/// forever); a module whose file name is not UTF-8 is analyzed; an empty
/// folder says what hlomem looks for.
#[cfg(unix)]
#[test]
fn fifos_odd_names_and_empty_folders() {
    use std::os::unix::ffi::OsStrExt;
    let dir = scratch("folders");
    let sample = "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt";
    let odd = std::ffi::OsStr::from_bytes(b"module_0001.jit_\xff.cpu_after_optimizations.txt");
    std::fs::copy(sample, dir.join(odd)).unwrap();
    let fifo = dir.join("module_0002.jit_g.cpu_after_optimizations.txt");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let (code, out, err) = hlomem(&["analyze", "--format", "json", dir.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["modules"].as_array().unwrap().len(), 1, "{err}");
    assert!(json["modules"][0]["file"]
        .as_str()
        .unwrap()
        .contains("jit_\u{FFFD}"));
    if made.is_ok_and(|s| s.success()) {
        assert_eq!(code, Some(2));
        assert!(
            err.contains("module_0002.jit_g") && err.contains("a FIFO"),
            "{err}"
        );
    } else {
        assert_eq!(code, Some(0), "{err}");
    }
    std::fs::remove_dir_all(&dir).ok();

    let empty = scratch("empty");
    let (code, out, err) = hlomem(&["analyze", empty.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(
        err.contains("holds no HLO module") && err.contains("--xla_dump_to"),
        "{err}"
    );
    assert!(!err.contains("later release"), "{err}");
    std::fs::remove_dir_all(&empty).ok();
}

/// Budgets are parsed exactly: nothing rounds to another size.
#[test]
fn budgets_are_whole_bytes_or_refused() {
    let sample = "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt";
    // 0.0000001 and 0.4 round to 0 bytes.
    for bad in ["18446744073709551616", "0.0000001", "0.4", "0", "16EiB"] {
        let (code, _, err) = hlomem(&["check", sample, "--budget", bad]);
        assert_eq!(code, Some(2), "--budget {bad}: {err}");
        assert!(err.contains("--budget"), "{err}");
    }
    // `G` is GiB, as in XLA's own messages.
    let (code, out, err) = hlomem(&["check", sample, "--budget", "1G", "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["budget_bytes"], 1u64 << 30);
    // A size as hlomem prints it is taken back, to the nearest byte.
    let (code, out, err) = hlomem(&["check", sample, "--budget", "22.89MiB", "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["budget_bytes"], 24_001_905u64);
}

/// A byte-order mark at the start of a module is not an error.
#[test]
fn a_byte_order_mark_is_skipped() {
    let text = std::fs::read_to_string(
        "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt",
    )
    .unwrap();
    let module = hlomem::pipeline::decode(
        std::path::Path::new("bom.txt"),
        format!("\u{FEFF}{text}").into_bytes(),
    )
    .and_then(hlomem::hlo::parse_module)
    .expect("a BOM is skipped");
    assert_eq!(module.read(|m| m.name.clone()).unwrap(), "jit_fn");
}

/// A closed or empty standard input is said to be so, not "no message found".
#[test]
fn closed_standard_input_is_named() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hlomem"))
        .arg("explain")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("standard input is"), "{err}");
    assert!(!err.contains("no out-of-memory message"), "{err}");
}

/// `--html` onto a symlink replaces the link with the page and leaves what it
/// pointed to alone; the page is written whole or not at all.
#[cfg(unix)]
#[test]
fn html_replaces_a_symlink_instead_of_following_it() {
    let dir = scratch("html");
    let target = dir.join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = dir.join("report.html");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (code, _, err) = hlomem(&[
        "analyze",
        "samples/add_nodonate/dump",
        "--html",
        link.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    let page = std::fs::read_to_string(&link).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") || page.starts_with("<!doctype html>"));
    assert!(!std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let leftovers = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(leftovers, 2, "no temporary file is left behind");
    std::fs::remove_dir_all(&dir).ok();
}

/// A module too large for the memory this process may use is refused before
/// it is read, naming the limit, rather than aborting on an allocation. The
/// file is sparse: 2 GB long, nothing on disk.
#[cfg(target_os = "linux")]
#[test]
fn a_module_too_large_for_the_memory_limit_is_refused_early() {
    let dir = scratch("large");
    let path = dir.join("module_0000.big.cpu_after_optimizations.txt");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(2_000_000_000)
        .unwrap();
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 2000000 && exec {} analyze {}",
            env!("CARGO_BIN_EXE_hlomem"),
            dir.display()
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ulimit -v") && err.contains("needs up to"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
