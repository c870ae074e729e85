//! The bundled samples (CPU, GPU and TPU): their reports (snapshots), and
//! their memory figures checked against XLA's own in each `truth.json`.

use hlomem::render::{self, AnalyzeFormat as Format, RenderOptions};

use crate::support::{
    sample_backend, sample_module_truth, sample_modules, sample_truth, snapshot_settings,
};

fn render_to_string(paths: &[std::path::PathBuf], format: Format) -> String {
    let report = hlomem::analyze_paths(paths, hlomem::AnalyzeOptions::default());
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let mut out = Vec::new();
    render::render(&report, format, RenderOptions::default(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn case_of(path: &std::path::Path) -> String {
    path.components()
        .nth(1)
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn sample_reports_match_snapshots() {
    for path in sample_modules() {
        let case = case_of(&path);
        let mut settings = snapshot_settings();
        settings.set_snapshot_suffix(&case);
        settings.bind(|| {
            insta::assert_snapshot!(
                "analyze_text",
                render_to_string(std::slice::from_ref(&path), Format::Text)
            );
            let json = render_to_string(std::slice::from_ref(&path), Format::Json);
            if case == FRAMEWORK_CASE {
                // Its full JSON is half a megabyte (every buffer, every leaf):
                // the grouped peak is what this sample is for.
                insta::assert_snapshot!("analyze_markdown", {
                    render_to_string(std::slice::from_ref(&path), Format::Markdown)
                });
                let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
                let peak = &mut value["modules"][0]["peak"];
                peak.as_object_mut().unwrap().remove("buffers");
                insta::assert_snapshot!(
                    "analyze_peak_json",
                    serde_json::to_string_pretty(peak).unwrap()
                );
            } else {
                insta::assert_snapshot!("analyze_json", json);
            }
        });
    }
}

/// The sample made with flax and optax (a framework's lines and the user's).
const FRAMEWORK_CASE: &str = "flax_gpt_train";

/// hlomem's memory figures for every sample module (CPU, GPU and TPU) equal
/// XLA's own, as the generator recorded them in `truth.json`:
/// `compiled.memory_analysis()` (argument, output, alias; temp on CPU and GPU,
/// not on TPU, where later compiler stages change it), the buffer
/// assignment's "Total bytes used" (when hlomem says its total is exact) and
/// the allocation bytes of each memory space hlomem calls exact (the sum of
/// the allocation sizes per color in `-buffer-assignment.txt`). TensorFlow and
/// PyTorch/XLA (`samples/gen_frontend_samples.py`) have no `memory_analysis()`:
/// their samples are held to the buffer assignment's figures.
#[test]
fn sample_memory_equals_xla() {
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for path in sample_modules() {
        let (case, expected) = sample_module_truth(&path);
        let backend = sample_backend(&case);
        let report = hlomem::analyze_paths(
            std::slice::from_ref(&path),
            hlomem::AnalyzeOptions::default(),
        );
        assert!(report.errors.is_empty(), "{case}: {:?}", report.errors);
        assert_eq!(report.modules.len(), 1, "{case}");
        let memory = &report.modules[0].memory;
        let ma = &expected["memory_analysis"];
        let xla = &expected["xla_reported"];
        let frontend = sample_truth(&case)["frontend"].as_str().map(str::to_string);
        let number = |v: &serde_json::Value, what: &str| {
            v.as_u64()
                .unwrap_or_else(|| panic!("{case}: truth.json has no {what}"))
        };
        let mut check = |what: &str, hlomem: u64, xla: u64| {
            checked += 1;
            if hlomem != xla {
                mismatches.push(format!(
                    "{case} ({backend}) {what}: hlomem {hlomem}, XLA {xla}"
                ));
            }
        };
        if frontend.is_some() {
            assert!(ma.is_null(), "{case}");
            assert!(memory.total_exact, "{case}: a CPU module is exact");
        } else {
            check(
                "argument_bytes vs memory_analysis argument_size_in_bytes",
                memory.argument_bytes,
                number(&ma["argument_size_in_bytes"], "argument_size_in_bytes"),
            );
            check(
                "output_bytes vs memory_analysis output_size_in_bytes",
                memory.output_bytes,
                number(&ma["output_size_in_bytes"], "output_size_in_bytes"),
            );
            check(
                "alias_bytes vs memory_analysis alias_size_in_bytes",
                memory.alias_bytes,
                number(&ma["alias_size_in_bytes"], "alias_size_in_bytes"),
            );
            if backend != "tpu" {
                check(
                    "temp_bytes vs memory_analysis temp_size_in_bytes",
                    memory.temp_bytes,
                    number(&ma["temp_size_in_bytes"], "temp_size_in_bytes"),
                );
                assert!(
                    memory.total_exact,
                    "{case}: on {backend} every memory space is XLA's"
                );
            }
        }
        if memory.total_exact {
            check(
                "total_bytes vs Total bytes used",
                memory.total_bytes,
                number(&xla["total_bytes_used"], "total_bytes_used"),
            );
        }
        let by_color = xla["allocation_bytes_by_color"]
            .as_object()
            .unwrap_or_else(|| panic!("{case}: truth.json has no allocation_bytes_by_color"));
        assert!(
            memory.by_space.iter().any(|s| s.color == 0 && s.exact),
            "{case}: the default memory space is XLA-exact: {:?}",
            memory.by_space
        );
        for space in memory.by_space.iter().filter(|s| s.exact) {
            let xla_bytes = by_color
                .get(&space.color.to_string())
                .map_or(0, |v| number(v, "allocation bytes"));
            check(
                &format!(
                    "by_space color {} ({}) vs allocation bytes of color {}",
                    space.color, space.name, space.color
                ),
                space.bytes,
                xla_bytes,
            );
        }
    }
    assert!(checked > 0);
    assert!(
        mismatches.is_empty(),
        "hlomem differs from XLA:\n{}",
        mismatches.join("\n")
    );
}

/// Every sample has XLA's reports beside it, and `analyze --verify` agrees
/// with all of them (the TPU chip read from the dump's target_arguments.txt).
#[test]
fn samples_verify_against_xla_reports() {
    for path in sample_modules() {
        let report = hlomem::analyze_paths(
            std::slice::from_ref(&path),
            hlomem::AnalyzeOptions {
                verify: true,
                ..Default::default()
            },
        );
        assert!(
            report.errors.is_empty(),
            "{}: {:?}",
            path.display(),
            report.errors
        );
        let verification = report.modules[0]
            .verification
            .as_ref()
            .expect("--verify reports a verification");
        assert!(verification.checked > 10, "{}", path.display());
        assert!(
            verification.agrees(),
            "{}: {:?}",
            path.display(),
            verification.disagreements
        );
    }
}

/// The accelerator samples are found, each for its backend: GPU and TPU
/// modules are told apart by their text, not by the file name.
#[test]
fn accelerator_samples_are_there() {
    let modules = sample_modules();
    for (case, backend) in [
        ("gpu_mlp_train_donate", "gpu"),
        ("gpu_while_loop", "gpu"),
        ("tpu_mlp_train_donate", "tpu"),
        ("tpu_cond_branches", "tpu"),
        ("tpu_while_loop", "tpu"),
        ("tpu_v6e_mlp_train_donate", "tpu"),
        ("tpu_v5p_mlp_train_donate", "tpu"),
        ("tpu_v4_mlp_train_donate", "tpu"),
        ("tpu_v6e_topk_grad_sparsecore", "tpu"),
        ("tpu_nested_loops", "tpu"),
    ] {
        let found: Vec<_> = modules.iter().filter(|p| case_of(p) == case).collect();
        assert_eq!(found.len(), 1, "{case}: {found:?}");
        assert_eq!(sample_backend(case), backend);
        let file = found[0].to_string_lossy();
        match backend {
            "gpu" => assert!(
                file.ends_with(".sm_9.0a_gpu_after_optimizations.txt"),
                "{file}"
            ),
            _ => {
                assert!(file.contains(".cl_"), "{file}");
                // hlomem reads the chip from the dump folder.
                let arguments = file.replace(".after_optimizations.txt", ".target_arguments.txt");
                assert!(std::path::Path::new(&arguments).is_file(), "{arguments}");
            }
        }
    }
}

#[test]
fn before_optimizations_files_parse_too() {
    for path in sample_modules() {
        let (_, expected) = sample_module_truth(&path);
        let before = path.with_file_name(format!(
            "{}.before_optimizations.txt",
            expected["dump_prefix"].as_str().unwrap()
        ));
        let module = hlomem::load_module(&before).unwrap();
        assert!(!module.header.is_scheduled, "{}", before.display());
        assert!(module.instr_count() > 0);
    }
}

#[test]
fn sources_resolve_through_stack_frames() {
    let path = std::path::Path::new(
        "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt",
    );
    let module = hlomem::load_module(path).unwrap();
    let root = module.entry_root();
    assert_eq!(module.instr_name(root), "wrapped_add");
    assert_eq!(module.op_name(root).as_deref(), Some("jit(fn)/add"));
    let location = module
        .source_location(root)
        .expect("the add has a source line");
    assert_eq!(&*location.file, "samples/gen_samples.py");
    assert_eq!(location.function.as_deref(), Some("build_case.<locals>.fn"));
    // The line is where gen_samples.py writes `a + b`.
    let script = std::fs::read_to_string("samples/gen_samples.py").unwrap();
    let line = script.lines().nth(location.line as usize - 1).unwrap();
    assert!(line.contains("a + b"), "line {}: {line}", location.line);
}

/// The MLP twins: XLA's donated build saves far less than the parameters' size,
/// because copy insertion copies the weights the backward pass still reads. The
/// saving HM001 predicts from the non-donated module alone is XLA's, byte for byte.
#[test]
fn not_donated_saving_equals_xla_on_the_mlp_twins() {
    let total = |case: &str| {
        sample_truth(case)["modules_of_interest"][0]["xla_reported"]["total_bytes_used"]
            .as_u64()
            .expect("total_bytes_used")
    };
    let measured = total("mlp_train_nodonate") - total("mlp_train_donate");
    let path = std::path::Path::new(
        "samples/mlp_train_nodonate/dump/module_0000.jit_sgd_step.cpu_after_optimizations.txt",
    );
    let module = hlomem::load_module(path).unwrap();
    let report = hlomem::pipeline::summarize(&module);
    let hm001: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.code == "HM001")
        .collect();
    assert_eq!(hm001.len(), 1, "one finding for the `params` argument");
    assert_eq!(hm001[0].bytes, measured);
    assert!(
        hm001[0].fix.contains("donate_argnums=0"),
        "{}",
        hm001[0].fix
    );
    // Without the copies the what-if would promise the parameters' whole size.
    assert!(measured < report.parameter_shape_bytes / 2);
}
