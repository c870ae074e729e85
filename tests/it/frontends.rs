//! TensorFlow and PyTorch/XLA modules: the front-end named with its evidence,
//! findings and fixes in that front-end's terms (never a JAX API), one row
//! per parameter, short names, source-line hints, and totals equal to XLA's.
//! On the real modules committed in `tests/frontends/` (README there says
//! where each came from), and, with `HLOMEM_CORPUS`, on every module of the
//! shared corpus's `frontends/`.

use std::path::{Path, PathBuf};

use crate::support::{run_hlomem as hlomem, snapshot_settings};

/// The committed cases, each with its front-end and XLA's "Total bytes used".
const CASES: &[(&str, &str, u64)] = &[
    ("tf_add", "tensorflow", 201_326_592),
    ("tf_while", "tensorflow", 4_194_384),
    ("pt_add", "pytorch-xla", 201_326_600),
    ("pt_add_hlodebug", "pytorch-xla", 201_326_600),
    ("pt_mlp", "pytorch-xla", 7_581_204),
];

/// What a TensorFlow or PyTorch/XLA user must never be told (lowercase).
fn jax_words() -> impl Iterator<Item = &'static str> {
    include_str!("../jax_words.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn case_dir(case: &str) -> String {
    format!("tests/frontends/{case}")
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
    for (case, frontend, _) in CASES {
        let m = module_json(&case_dir(case));
        assert_eq!(m["frontend"]["name"], *frontend, "{case}");
        assert_eq!(m["frontend"]["evidence"]["clue"], "module-name", "{case}");
        assert_eq!(m["frontend"]["evidence"]["text"], m["name"], "{case}");
    }
    let (_, text, _) = hlomem(&["analyze", "--color", "never", "tests/frontends/pt_mlp"]);
    assert!(
        text.contains(
            "front-end     PyTorch/XLA (from the module name SyncTensorsGraph.257: its graph 257"
        ),
        "{text}"
    );
}

#[test]
fn totals_equal_xla() {
    for (case, _, total) in CASES {
        let m = module_json(&case_dir(case));
        assert_eq!(m["memory"]["total_bytes"], *total, "{case}");
    }
    for case in ["tf_add", "tf_while", "pt_add", "pt_add_hlodebug"] {
        let (code, stdout, stderr) =
            hlomem(&["analyze", "--verify", "--color", "never", &case_dir(case)]);
        assert_eq!(code, Some(0), "{case}: {stdout}{stderr}");
        assert!(
            stdout.contains("numbers agree with XLA's own reports"),
            "{stdout}"
        );
    }
}

#[test]
fn no_rendering_names_a_jax_api() {
    for (case, ..) in CASES {
        assert_no_jax_words(&case_dir(case));
    }
}

/// `tf.function` `a + b`: the same finding as JAX's, in TensorFlow's terms.
#[test]
fn tensorflow_add_is_told_about_resource_variables() {
    let m = module_json("tests/frontends/tf_add");
    assert_eq!(m["short_name"], "add");
    let f = finding(&m, "HM001");
    assert_eq!(f["bytes"], 64 << 20);
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
        assert_eq!(f["bytes"], 64 << 20, "{case}");
        assert_eq!(f["output_index"], serde_json::json!([0]));
        let fix = f["fix"].as_str().unwrap();
        assert!(
            fix.contains("a.add_(b)") && fix.contains("_set_buffer_donation"),
            "{fix}"
        );
        assert!(m.get("arguments").is_none(), "{case}");
        assert_eq!(m["short_name"], "SyncTensorsGraph.8");
    }
    let plain = module_json("tests/frontends/pt_add");
    assert_eq!(
        plain["peak"]["source_hint"]["kind"],
        "pytorch-xla-debug-off"
    );
    let debug = module_json("tests/frontends/pt_add_hlodebug");
    assert!(debug["peak"].get("source_hint").is_none());
    assert_eq!(debug["parameters"][0]["op_name"], "xla__device_data");
    assert_eq!(debug["parameters"][0]["label"], "p0.2");
}

/// pt_mlp's momentum buffers: torch_xla aliased them; the new value is a
/// layout-changing copy run inside a `call` wrapper, then copied in.
#[test]
fn pytorch_xla_copy_names_the_op_inside_the_call() {
    let m = module_json("tests/frontends/pt_mlp");
    let f = finding(&m, "HM003");
    assert_eq!(f["instruction"], "copy.4.clone");
    assert_eq!(f["severity"], "info");
    assert_eq!(f["evidence"]["how"]["inside"], "call");
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains("copy.4.clone (inside call) cannot write its result over its own input"),
        "{message}"
    );
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .starts_with("nothing to set: torch_xla"));
}

#[test]
fn front_end_reports_match_snapshots() {
    for case in ["tf_add", "pt_mlp"] {
        let (_, text, _) = hlomem(&["analyze", "--color", "never", &case_dir(case)]);
        let mut settings = snapshot_settings();
        settings.set_snapshot_suffix(case);
        settings.bind(|| insta::assert_snapshot!("frontend_text", text));
    }
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
