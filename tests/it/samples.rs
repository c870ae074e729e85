//! The bundled samples: their reports (snapshots) and their sizes checked
//! against XLA's own `memory_analysis()` figures in each `truth.json`.

use hlomem::render::{self, Format, RenderOptions};

use crate::support::{sample_modules, sample_truth, snapshot_settings};

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
            insta::assert_snapshot!(
                "analyze_json",
                render_to_string(std::slice::from_ref(&path), Format::Json)
            );
        });
    }
}

#[test]
fn sample_memory_accounting_equals_xla() {
    for path in sample_modules() {
        let case = case_of(&path);
        let truth = sample_truth(&case);
        let module = hlomem::load_module(&path).unwrap();
        let summary = hlomem::report::ModuleReport::summarize(&module);
        let prefix = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .split(".cpu_")
            .next()
            .unwrap()
            .to_string();
        let expected = truth["modules_of_interest"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["dump_prefix"] == prefix.as_str())
            .unwrap_or_else(|| panic!("{case}: no truth for {prefix}"));
        let ma = &expected["memory_analysis"];
        assert_eq!(
            summary.parameter_bytes,
            ma["argument_size_in_bytes"].as_u64().unwrap(),
            "{case}"
        );
        assert_eq!(
            summary.output_bytes,
            ma["output_size_in_bytes"].as_u64().unwrap(),
            "{case}"
        );
    }
}

#[test]
fn before_optimizations_files_parse_too() {
    for path in sample_modules() {
        let before = path
            .to_string_lossy()
            .replace(".cpu_after_optimizations.txt", ".before_optimizations.txt");
        let module = hlomem::load_module(std::path::Path::new(&before)).unwrap();
        assert!(!module.header.is_scheduled, "{before}");
        assert!(!module.instructions.is_empty());
    }
}

#[test]
fn sources_resolve_through_stack_frames() {
    let path = std::path::Path::new(
        "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt",
    );
    let module = hlomem::load_module(path).unwrap();
    let root = module.entry_root();
    assert_eq!(module.instr(root).name, "wrapped_add");
    assert_eq!(module.op_name(root).as_deref(), Some("jit(fn)/add"));
    let location = module
        .source_location(root)
        .expect("the add has a source line");
    assert_eq!(location.file, "samples/gen_samples.py");
    assert_eq!(location.function.as_deref(), Some("build_case.<locals>.fn"));
    // The line is where gen_samples.py writes `a + b`.
    let script = std::fs::read_to_string("samples/gen_samples.py").unwrap();
    let line = script.lines().nth(location.line as usize - 1).unwrap();
    assert!(line.contains("a + b"), "line {}: {line}", location.line);
}

#[test]
fn samples_verify_against_xla_reports() {
    for path in sample_modules() {
        let module = hlomem::load_module(&path).unwrap();
        let model = hlomem::analysis::analyze(&module, &hlomem::target::Target::detect(&module));
        let xla = hlomem::xla_report::XlaReports::load(&path)
            .unwrap()
            .expect("samples keep XLA's reports");
        let verification = hlomem::analysis::verify::verify(&module, &model, &xla);
        assert!(verification.checked > 10, "{}", path.display());
        assert!(
            verification.agrees(),
            "{}: {:?}",
            path.display(),
            verification.disagreements
        );
    }
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
    let report = hlomem::report::ModuleReport::summarize(&module);
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
    assert!(measured < report.parameter_bytes / 2);
}
