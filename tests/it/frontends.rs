//! TensorFlow and PyTorch/XLA modules: the front-end named with its evidence,
//! findings and fixes in that front-end's terms (never a JAX API), one row
//! per parameter, short names, source-line hints, and totals equal to XLA's.
//! On the samples `samples/gen_frontend_samples.py` makes (`samples/tf_*`,
//! `samples/pt_*`: an add, a while loop, MLP and conv-net training steps, a
//! `torch.compile(backend="openxla")` function), and, with `HLOMEM_CORPUS`, on
//! every module of the shared corpus's `frontends/`.

use std::path::{Path, PathBuf};

use crate::support::{root, run_hlomem as hlomem, sample_truth};

/// The front-end samples: each case with its `truth.json` (`frontend`,
/// `xla_reported`), sorted.
fn cases() -> Vec<(String, serde_json::Value)> {
    let mut cases: Vec<(String, serde_json::Value)> = std::fs::read_dir(root().join("samples"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("truth.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .map(|case| {
            let truth = sample_truth(&case);
            (case, truth)
        })
        .filter(|(_, truth)| truth["frontend"].is_string())
        .collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = cases.iter().map(|(c, _)| c.as_str()).collect();
    for wanted in [
        "tf_add",
        "tf_conv_train",
        "pt_mlp_train",
        "pt_conv_train",
        "pt_compile",
    ] {
        assert!(
            names.contains(&wanted),
            "samples/{wanted} is missing: {names:?}"
        );
    }
    cases
}

/// What a TensorFlow or PyTorch/XLA user must never be told (lowercase).
fn jax_words() -> impl Iterator<Item = &'static str> {
    include_str!("../jax_words.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn case_dir(case: &str) -> String {
    format!("samples/{case}/dump")
}

/// `analyze --format json` of one folder: its one module.
fn module_json(dir: &str) -> serde_json::Value {
    let (code, stdout, stderr) = hlomem(&["analyze", "--format", "json", dir]);
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let modules = json["modules"].as_array().unwrap();
    assert_eq!(modules.len(), 1, "{dir}");
    modules[0].clone()
}

fn finding<'a>(module: &'a serde_json::Value, code: &str) -> &'a serde_json::Value {
    module["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {}", module["findings"]))
}

/// Every way hlomem shows a module: each `analyze` format (terse and
/// verbose), `check` and its formats.
fn every_rendering(dir: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for format in ["text", "json", "markdown", "github", "html"] {
        for verbose in [false, true] {
            let mut args = vec!["analyze", "--format", format, "--color", "never", dir];
            if verbose {
                args.push("--verbose");
            }
            let (code, stdout, stderr) = hlomem(&args);
            assert_eq!(code, Some(0), "{args:?}: {stderr}");
            out.push((args.join(" "), stdout));
        }
    }
    for format in ["text", "json", "markdown", "github"] {
        let args = ["check", "--budget", "1MiB", "--format", format, dir];
        let (_, stdout, stderr) = hlomem(&args);
        out.push((args.join(" "), stdout + &stderr));
    }
    out
}

fn assert_no_jax_words(dir: &str) {
    for (command, text) in every_rendering(dir) {
        let lower = text.to_ascii_lowercase();
        for w in jax_words() {
            if let Some(at) = lower.find(w) {
                let from = at.saturating_sub(120);
                panic!(
                    "`hlomem {command}` names `{w}`: ...{}...",
                    &text[from..(at + 80).min(text.len())]
                );
            }
        }
    }
}

#[test]
fn front_end_is_named_with_its_evidence() {
    for (case, truth) in cases() {
        let m = module_json(&case_dir(&case));
        assert_eq!(m["frontend"]["name"], truth["frontend"], "{case}");
        assert_eq!(m["frontend"]["evidence"]["clue"], "module-name", "{case}");
        assert_eq!(m["frontend"]["evidence"]["text"], m["name"], "{case}");
    }
    let (_, text, _) = hlomem(&["analyze", "--color", "never", &case_dir("pt_mlp_train")]);
    assert!(
        text.contains(
            "front-end     PyTorch/XLA (from the module name SyncTensorsGraph.204: its graph 204"
        ),
        "{text}"
    );
}

/// Every front-end sample: the total is XLA's "Total bytes used" and
/// `--verify` agrees with every number of XLA's reports (exit 0).
#[test]
fn totals_equal_xla_and_verify_exits_0() {
    for (case, truth) in cases() {
        let m = module_json(&case_dir(&case));
        let xla = &truth["modules_of_interest"][0]["xla_reported"]["total_bytes_used"];
        assert!(xla.is_u64(), "{case}");
        assert_eq!(&m["memory"]["total_bytes"], xla, "{case}");
        assert_eq!(m["memory"]["total_exact"], true, "{case}");
        let (code, stdout, stderr) =
            hlomem(&["analyze", "--verify", "--color", "never", &case_dir(&case)]);
        assert_eq!(code, Some(0), "{case}: {stdout}{stderr}");
        assert!(
            stdout.contains("numbers agree with XLA's own reports"),
            "{case}: {stdout}"
        );
    }
}

#[test]
fn no_rendering_names_a_jax_api() {
    for (case, _) in cases() {
        assert_no_jax_words(&case_dir(&case));
    }
}

/// `tf.function` `a + b`: the same finding as JAX's, in TensorFlow's terms.
#[test]
fn tensorflow_add_is_told_about_resource_variables() {
    let m = module_json(&case_dir("tf_add"));
    assert_eq!(m["short_name"], "add");
    let f = finding(&m, "HM001");
    assert_eq!(f["bytes"], 4 << 20);
    assert!(
        f["fix"].as_str().unwrap().contains("tf.Variable"),
        "{}",
        f["fix"]
    );
    assert_eq!(f["parameter"]["name"], "arg0.1");
    // One row per parameter: `XLA_Args` is no argument.
    assert!(m.get("arguments").is_none(), "{}", m["arguments"]);
    assert_eq!(m["parameters"][1]["label"], "arg1.1");
    assert_eq!(m["parameters"][1]["op_name"], "XLA_Args");
    assert_eq!(m["peak"]["source_hint"]["kind"], "tensorflow-own-line");
}

/// torch_xla's `a + b`: XLA's CPU backend runs the add in a `call` and the
/// graph returns a 1-tuple; the output can still live in an input's buffer
/// (a `call` reads its operands before what it computes is written), so it
/// gets the finding TensorFlow's gets, with torch_xla's way to get there.
#[test]
fn pytorch_xla_add_gets_the_same_finding_as_tensorflow() {
    for case in ["pt_add", "pt_add_hlodebug"] {
        let m = module_json(&case_dir(case));
        let f = finding(&m, "HM001");
        assert_eq!(f["bytes"], 4 << 20, "{case}");
        assert_eq!(f["output_index"], serde_json::json!([0]));
        let fix = f["fix"].as_str().unwrap();
        assert!(
            fix.contains("a.add_(b)") && fix.contains("_set_buffer_donation"),
            "{fix}"
        );
        assert!(m.get("arguments").is_none(), "{case}");
        assert_eq!(m["short_name"], "SyncTensorsGraph.8");
    }
    let plain = module_json(&case_dir("pt_add"));
    assert_eq!(
        plain["peak"]["source_hint"]["kind"],
        "pytorch-xla-debug-off"
    );
    let debug = module_json(&case_dir("pt_add_hlodebug"));
    assert!(debug["peak"].get("source_hint").is_none());
    assert_eq!(debug["parameters"][0]["op_name"], "xla__device_data");
    assert_eq!(debug["parameters"][0]["label"], "p0.2");
    // The add's own line in the generator (XLA_HLO_DEBUG=1 writes it).
    let script = std::fs::read_to_string(root().join("samples/gen_frontend_samples.py")).unwrap();
    let line = script
        .lines()
        .position(|l| l.trim() == "c = a + b")
        .expect("the generator adds a and b")
        + 1;
    let (_, text, _) = hlomem(&["analyze", "--color", "never", &case_dir("pt_add_hlodebug")]);
    assert!(
        text.contains(&format!("gen_frontend_samples.py:{line}")),
        "{text}"
    );
}

/// The MLP step's momentum buffers: torch_xla aliased them; the new value is
/// a layout-changing copy run inside a `call` wrapper, then copied in.
#[test]
fn pytorch_xla_copy_names_the_op_inside_the_call() {
    let m = module_json(&case_dir("pt_mlp_train"));
    let f = finding(&m, "HM003");
    let instruction = f["instruction"].as_str().unwrap();
    assert!(instruction.ends_with(".clone"), "{instruction}");
    assert_eq!(f["severity"], "info");
    assert_eq!(f["evidence"]["how"]["inside"], "call");
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "{instruction} (inside call) cannot write its result over its own input"
        )),
        "{message}"
    );
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .starts_with("nothing to set: torch_xla"));
}

/// The conv nets' steps: each front-end's aliasing is its runtime's (HM003
/// is information, nothing to set), and the temporaries' advice is the
/// front-end's own recomputation where it has one.
#[test]
fn conv_net_steps_speak_their_front_ends_terms() {
    let tf = module_json(&case_dir("tf_conv_train"));
    assert_eq!(tf["short_name"], "train_step");
    let copy = finding(&tf, "HM003");
    assert_eq!(copy["severity"], "info");
    assert!(copy["fix"]
        .as_str()
        .unwrap()
        .starts_with("nothing to set: TensorFlow"));
    let temps = finding(&tf, "HM005")["fix"].as_str().unwrap().to_string();
    assert!(temps.contains("tf.recompute_grad"), "{temps}");
    let pt = module_json(&case_dir("pt_conv_train"));
    let copy = finding(&pt, "HM003");
    assert_eq!(copy["severity"], "info");
    assert!(copy["fix"]
        .as_str()
        .unwrap()
        .starts_with("nothing to set: torch_xla"));
}

/// `torch.compile(backend="openxla")`: torch_xla compiles dynamo's graph as a
/// `SyncTensorsGraph` too; one row per parameter, no source lines without
/// `XLA_HLO_DEBUG=1`, and nothing aliased (an inference graph updates nothing).
#[test]
fn torch_compile_graph_is_pytorch_xla() {
    let m = module_json(&case_dir("pt_compile"));
    assert_eq!(m["frontend"]["name"], "pytorch-xla");
    assert!(m.get("arguments").is_none());
    assert_eq!(m["memory"]["alias_bytes"], 0);
    assert_eq!(
        m["parameters"].as_array().unwrap().len(),
        5,
        "{}",
        m["parameters"]
    );
    assert_eq!(m["peak"]["source_hint"]["kind"], "pytorch-xla-debug-off");
}

// The shared corpus's frontends/ folder: every module.

fn corpus_frontends() -> PathBuf {
    let root = std::env::var_os("HLOMEM_CORPUS").expect("set HLOMEM_CORPUS to the shared/ folder");
    Path::new(&root).join("frontends")
}

fn corpus_cases() -> Vec<(String, PathBuf)> {
    let mut cases: Vec<(String, PathBuf)> = std::fs::read_dir(corpus_frontends())
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("dump").is_dir())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.path().join("dump"),
            )
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 7, "{cases:?}");
    cases
}

fn corpus_modules(dump: &Path) -> Vec<serde_json::Value> {
    let (code, stdout, stderr) = hlomem(&["analyze", "--format", "json", dump.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    json["modules"].as_array().unwrap().clone()
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_frontends_are_named_and_speak_their_terms() {
    for (case, dump) in corpus_cases() {
        let expected = if case.starts_with("tf_") {
            "tensorflow"
        } else {
            "pytorch-xla"
        };
        for m in corpus_modules(&dump) {
            assert_eq!(m["frontend"]["name"], expected, "{case} {}", m["name"]);
            // No pytree: one row per parameter.
            assert!(m.get("arguments").is_none(), "{case} {}", m["name"]);
            if expected == "tensorflow" {
                assert_ne!(m["short_name"], m["name"], "{case}");
                assert_eq!(
                    m["peak"]["source_hint"]["kind"], "tensorflow-own-line",
                    "{case}"
                );
            }
        }
        assert_no_jax_words(dump.to_str().unwrap());
    }
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_source_hint_only_without_xla_hlo_debug() {
    for (case, dump) in corpus_cases()
        .into_iter()
        .filter(|(c, _)| c.starts_with("pt_"))
    {
        for m in corpus_modules(&dump) {
            let hint = &m["peak"]["source_hint"]["kind"];
            if case.ends_with("_hlodebug") {
                assert!(hint.is_null(), "{case} {}: {hint}", m["name"]);
            } else {
                assert_eq!(hint, "pytorch-xla-debug-off", "{case} {}", m["name"]);
            }
        }
    }
}

/// The Keras step: Adam's update of a weight the backward pass
/// (`gradient_tape/...`) still reads is copied: expected, nothing to set.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_tensorflow_training_copy_is_expected() {
    let modules = corpus_modules(&corpus_frontends().join("tf_mlp/dump"));
    let m = &modules[0];
    assert_eq!(m["short_name"], "train_step");
    assert_eq!(
        m["peak"]["phase"], "backward",
        "gradient_tape/ is the backward pass"
    );
    let f = finding(m, "HM003");
    assert_eq!(f["severity"], "info");
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("(expected: the backward pass"));
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .starts_with("nothing to set: TensorFlow"));
}

/// Both PyTorch/XLA training steps' HM003 name the copy inside the `call`,
/// with and without XLA_HLO_DEBUG; the add gets HM001 like TensorFlow's.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_pytorch_xla_findings() {
    for case in ["pt_mlp", "pt_mlp_hlodebug"] {
        for m in corpus_modules(&corpus_frontends().join(case).join("dump")) {
            for f in m["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["code"] == "HM003")
            {
                assert_eq!(f["severity"], "info", "{case}");
                assert!(
                    f["instruction"].as_str().unwrap().ends_with(".clone"),
                    "{case}: {f}"
                );
            }
        }
    }
    for case in ["pt_add", "pt_add_hlodebug", "tf_add"] {
        let modules = corpus_modules(&corpus_frontends().join(case).join("dump"));
        let add = modules
            .iter()
            .find(|m| m["memory"]["argument_bytes"] == 128u64 << 20)
            .expect("the add's module");
        assert_eq!(finding(add, "HM001")["bytes"], 64 << 20, "{case}");
    }
}

/// A GPU allocator's message for the add (two f32[1024,1024] inputs and the
/// sum), as XLA prints it; the log around names no framework.
const ADD_OOM: &str = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4194304 bytes.
BufferAssignment OOM Debugging.
BufferAssignment stats:
             parameter allocation:    8.00MiB
              constant allocation:         0B
        maybe_live_out allocation:    4.00MiB
     preallocated temp allocation:         0B
                 total allocation:   12.00MiB
              total fragmentation:         0B (0.00%)
Peak buffers:
\tBuffer 1:
\t\tSize: 4.00MiB
\t\tXLA Label: fusion
\t\tShape: f32[1024,1024]
\t\t==========================

\tBuffer 2:
\t\tSize: 4.00MiB
\t\tEntry Parameter Subshape: f32[1024,1024]
\t\t==========================

\tBuffer 3:
\t\tSize: 4.00MiB
\t\tEntry Parameter Subshape: f32[1024,1024]
\t\t==========================

";

/// `explain --dump` of a TensorFlow or PyTorch/XLA dump: the dump's module
/// says which front-end ran the program, and every advice is in its terms
/// (the donation the dump measures: a resource variable, an in-place update).
#[test]
fn explain_with_a_dump_advises_in_its_front_ends_terms() {
    let dir = tempfile::tempdir().unwrap();
    let message = dir.path().join("oom.txt");
    std::fs::write(&message, ADD_OOM).unwrap();
    let message = message.to_str().unwrap();
    for (case, framework, words) in [
        ("tf_add", "tensorflow", "tf.Variable"),
        ("pt_add", "pytorch-xla", "_set_buffer_donation"),
        ("pt_add_hlodebug", "pytorch-xla", "_set_buffer_donation"),
    ] {
        let dump = case_dir(case);
        let (code, json, err) = hlomem(&["explain", message, "--dump", &dump, "--format", "json"]);
        assert_eq!(code, Some(0), "{err}");
        let json: serde_json::Value = serde_json::from_str(&json).unwrap();
        let e = &json["explanation"];
        assert_eq!(e["situation"]["framework"]["value"], framework, "{case}");
        assert!(
            e["situation"]["framework"]["evidence"]
                .as_str()
                .unwrap()
                .starts_with("the dump's module name"),
            "{case}: {}",
            e["situation"]["framework"]
        );
        assert_eq!(e["dump"]["frontend"]["name"], framework, "{case}");
        assert!(
            e["advice"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["kind"] == "donate-argument"),
            "{case}: {}",
            e["advice"]
        );
        assert!(
            json["advice"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["action"].as_str().unwrap().contains(words)),
            "{case}: {}",
            json["advice"]
        );
        for format in ["text", "markdown", "json"] {
            let (_, text, _) = hlomem(&["explain", message, "--dump", &dump, "--format", format]);
            let lower = text.to_ascii_lowercase();
            for w in jax_words() {
                assert!(!lower.contains(w), "{case} {format}: `{w}` in\n{text}");
            }
        }
    }
    // Without the dump nothing names the framework: JAX's words, as before.
    let (_, text, _) = hlomem(&["explain", message]);
    assert!(!text.contains("tf.Variable"), "{text}");
}

/// The 2020 TensorFlow TPU dump (`../shared/external/gpu-cpu-tpu-2020`, MLPerf
/// v0.7 DLRM on TPU v3): TensorFlow's TPU bridge names its module
/// `cluster_<id>...`; the JAX dumps beside it (`pmap_`, `xmap_`) are JAX's.
/// No rendering of the TensorFlow one names a JAX API.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_2020_tensorflow_tpu_dump_is_tensorflow() {
    let root = std::env::var_os("HLOMEM_CORPUS").expect("set HLOMEM_CORPUS to the shared/ folder");
    let folder = Path::new(&root).join("external/gpu-cpu-tpu-2020");
    let tf = folder.join("mlperf_training_v0.7__hlo_after_optimizations_dlrm_32_tpuv3.txt");
    let m = corpus_modules(&tf).remove(0);
    assert_eq!(m["frontend"]["name"], "tensorflow");
    assert_eq!(m["frontend"]["evidence"]["clue"], "module-name");
    assert_eq!(
        m["frontend"]["evidence"]["text"],
        "cluster_7035002757448359829_f15n_1__.3522"
    );
    let (_, text, _) = hlomem(&["analyze", "--color", "never", tf.to_str().unwrap()]);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("a cluster of ops TensorFlow handed XLA (a TPU step, or auto-clustering)"),
        "{text}"
    );
    assert_no_jax_words(tf.to_str().unwrap());
    let mut jax = 0;
    for entry in std::fs::read_dir(&folder).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.contains("after_optimizations") && !name.starts_with("mlperf") {
            for m in corpus_modules(&entry.path()) {
                assert_eq!(m["frontend"]["name"], "jax", "{name}");
                jax += 1;
            }
        }
    }
    assert!(jax >= 10, "{jax}");
}
