//! `hlomem explain`: every message format, the motivating example point by
//! point, linking to a dump, and input that is not an OOM message.

use std::process::Command;

use crate::support::{relative, snapshot_settings};

fn explain(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["explain"];
    all.extend_from_slice(args);
    crate::support::run_hlomem(&all)
}

#[test]
fn sample_messages_explained_in_text_and_markdown() {
    snapshot_settings().bind(|| {
        insta::glob!("../../samples/oom", "*.txt", |path| {
            let path = relative(path);
            let path = path.to_str().unwrap();
            let (code, text, err) = explain(&[path]);
            assert_eq!(code, Some(0), "{path}: {err}");
            insta::assert_snapshot!("explain_text", text);
            let (_, markdown, _) = explain(&[path, "--format", "markdown"]);
            insta::assert_snapshot!("explain_markdown", markdown);
        });
    });
}

#[test]
fn sample_message_formats() {
    let expected = [
        ("motivating", "gpu-buffer-assignment", false),
        ("gpu_add_small", "gpu-buffer-assignment", false),
        ("gpu_one_line", "gpu-allocation", false),
        ("gpu_temp_logged", "gpu-buffer-assignment", false),
        ("gpu_failed_request", "device-failed-request", false),
        ("gpu_truncated", "gpu-buffer-assignment", true),
        ("gpu_compile_warnings", "gpu-compile-warnings", false),
        ("host_oom", "host-allocation", false),
        ("tpu_compile_hbm", "tpu-compile", false),
        ("tpu_compile_vmem", "tpu-compile", false),
        ("tpu_compile_abort", "tpu-compile-abort", false),
        ("tpu_runtime_reserve", "tpu-runtime-reserve", false),
        ("tpu_runtime_allocate", "tpu-runtime-allocate", false),
    ];
    for (name, format, truncated) in expected {
        let path = format!("samples/oom/{name}.txt");
        let (code, out, err) = explain(&[&path, "--format", "json"]);
        assert_eq!(code, Some(0), "{name}: {err}");
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(json["format"], format, "{name}");
        assert_eq!(json["truncated"], truncated, "{name}");
    }
}

/// The bar for the message this project started from.
#[test]
fn motivating_example_states_every_point() {
    let (code, text, _) = explain(&["samples/oom/motivating.txt"]);
    assert_eq!(code, Some(0));
    for expected in [
        // what failed: one allocation, which buffer it is
        "for one block of 13.77GiB (14787872288 bytes)",
        "the result of `add` (fusion) at /home/user/kernels.py:178",
        // each stat in plain words
        "the arguments the caller passed in, held for the whole run",
        "buffers that may be returned as results: allocated separately so they survive the program",
        "one scratch block for all intermediate values, packed by XLA's heap simulator",
        "wasted space: the total minus the most bytes ever live at once",
        // the arithmetic
        "27.54GiB parameters + 13.77GiB outputs = 41.32GiB total",
        // the buffers grouped
        "3 buffers of f64[42994,42994] (13.77GiB each, 41.32GiB together)",
        "2 are inputs of the jitted function (entry parameters)",
        "1 is the result of `add` (fusion) at /home/user/kernels.py:178",
        // what to try, with savings
        "jax.jit(fn, donate_argnums=0)",
        "(saves 13.77GiB)",
        "Use float32 instead of float64",
        "(saves 20.66GiB)",
        "shard the weights and the batch",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    let (_, json, _) = explain(&["samples/oom/motivating.txt", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["requested_bytes"], 14_787_872_288u64);
    assert_eq!(json["requested_approximate"], false);
    assert_eq!(
        json["stats"]["parameter_bytes"].as_u64().unwrap() / (1 << 20),
        28_200
    );
    assert!(json["approximate"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "parameter_bytes"));
    assert_eq!(json["peak_buffers"].as_array().unwrap().len(), 3);
    assert_eq!(json["peak_buffers"][2]["source_line"], 178);
    let advice = json["explanation"]["advice"].as_array().unwrap();
    assert!(
        advice.iter().any(|a| a["saves_bytes"] == 14_787_872_288u64),
        "donation saves exactly one buffer"
    );
}

/// `--dump` on the project's own sample: all three buffers are linked, the two
/// parameters by argument name and the add by its source line.
#[test]
fn dump_links_every_buffer_of_the_add_sample() {
    let (code, out, err) = explain(&[
        "samples/oom/gpu_add_small.txt",
        "--dump",
        "samples/add_nodonate/dump",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let dump = &json["explanation"]["dump"];
    assert_eq!(dump["module"], "jit_fn");
    let buffers = dump["buffers"].as_array().unwrap();
    assert_eq!(buffers.len(), 3);
    assert_eq!(buffers[0]["instruction"], "wrapped_add");
    // The line where gen_samples.py writes `a + b`.
    let script = std::fs::read_to_string("samples/gen_samples.py").unwrap();
    let line = script
        .lines()
        .position(|l| l.contains("return a + b"))
        .expect("gen_samples.py adds a and b")
        + 1;
    assert_eq!(
        buffers[0]["source"],
        format!("samples/gen_samples.py:{line}").as_str()
    );
    let params: Vec<&serde_json::Value> =
        buffers.iter().filter(|b| b["parameter"].is_u64()).collect();
    assert_eq!(params.len(), 2);
    assert_eq!(params[0]["op_name"], "a");
    assert_eq!(params[1]["op_name"], "b");
    // hlomem's own numbers for the module: XLA's (samples/add_nodonate/truth.json)
    assert_eq!(dump["memory"]["total_bytes"], 24_000_000);
    let candidates = dump["donation_candidates"].as_array().unwrap();
    assert_eq!(candidates[0]["parameter"], 0);
    assert_eq!(candidates[0]["bytes"], 8_000_000);
}

#[test]
fn text_that_is_not_an_oom_message_exits_2() {
    let (code, out, err) = explain(&["README.md"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(
        err.contains("no out-of-memory message found in README.md"),
        "{err}"
    );
    assert!(err.contains("looked for"), "{err}");
    assert!(!err.contains("not UTF-8"), "{err}");
    // A binary file is said to be one.
    let (code, _, err) = explain(&["tests/bad_inputs/garbage.bin"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("tests/bad_inputs/garbage.bin is not UTF-8 text (first bad byte at offset 4)"),
        "{err}"
    );
}

#[test]
fn reads_standard_input() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_hlomem"))
        .args(["explain", "-", "--format", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"E1015 12:00:00.1 1 x.cc:1] RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["requested_bytes"], 1024);
}

/// Two different errors in one log: each is explained, the first leads, and
/// neither borrows the other's numbers.
#[test]
fn two_messages_in_one_log_are_each_explained() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    std::fs::write(
        &path,
        "step 1\nXlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes.\n\
         step 2\nRESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity by 6.47G.\n",
    )
    .unwrap();
    let path = path.to_str().unwrap();
    let (code, json, err) = explain(&[path, "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["format"], "gpu-allocation");
    assert_eq!(json["requested_bytes"], 1024);
    assert!(
        json.get("tpu").is_none(),
        "the TPU numbers stay with their message"
    );
    let others = json["others"].as_array().unwrap();
    assert_eq!(others.len(), 1);
    assert_eq!(others[0]["format"], "tpu-compile");
    assert!(others[0]["requested_bytes"].is_null());
    let (_, text, _) = explain(&[path]);
    assert!(text.contains("Message 2 of 2 in the text"), "{text}");
}

/// `--dump` says when the dump is of another program, and when its program
/// already donates what the advice would donate.
#[test]
fn dump_of_another_program_or_already_donating_is_said() {
    let (code, text, err) = explain(&[
        "samples/oom/motivating.txt",
        "--dump",
        "samples/add_nodonate/dump",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        text.contains("none of the message's 3 buffers is in this module"),
        "{text}"
    );
    assert!(
        text.contains("the message's total allocation is 41.32GiB but this module's is 22.89MiB"),
        "{text}"
    );
    let (code, json, err) = explain(&[
        "samples/oom/gpu_add_small.txt",
        "--dump",
        "samples/add_donate0/dump",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let checks = json["explanation"]["dump"]["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["kind"] == "already-donates" && c["parameters"][0] == 0),
        "{checks:?}"
    );
    // The advice does not ask to donate what is donated.
    let advice = json["explanation"]["advice"].as_array().unwrap();
    assert!(
        !advice
            .iter()
            .any(|a| a["kind"].as_str().unwrap().starts_with("donate")),
        "{advice:?}"
    );
}
