//! Shared test helpers.

use std::path::{Path, PathBuf};

/// Insta settings for file snapshots: all in the top-level `snapshots/`.
pub fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}

/// The crate's root; tests run with it as the working directory.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `path` relative to the crate root, so messages and snapshots do not depend
/// on where the repository is checked out.
pub fn relative(path: &Path) -> PathBuf {
    path.strip_prefix(root())
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| path.to_path_buf())
}

/// Every sample's after-optimizations HLO file, sorted: CPU
/// (`...cpu_after_optimizations.txt`), GPU (`...sm_9.0a_gpu_after_optimizations.txt`)
/// and TPU (`...cl_NNN.after_optimizations.txt`).
pub fn sample_modules() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("samples"))
        .expect("samples/ exists")
        .flatten()
        .filter(|e| e.path().is_dir())
        .flat_map(|case| {
            std::fs::read_dir(case.path().join("dump"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| relative(&e.path()))
        .filter(|p| p.to_string_lossy().ends_with("after_optimizations.txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no samples found");
    files
}

/// Every sample's `dump` folder, sorted.
pub fn sample_dump_folders() -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(root().join("samples"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("dump"))
        .filter(|d| d.is_dir())
        .collect();
    folders.sort();
    folders
}

/// The `.txt` files of a folder of the repository (`tests/oom_catalog`), sorted.
pub fn text_files(folder: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(folder))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
}

/// A sample case's `truth.json` (XLA's own numbers, written by samples/gen_samples.py).
pub fn sample_truth(case: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("samples").join(case).join("truth.json"))
        .expect("truth.json");
    serde_json::from_str(&text).expect("truth.json is JSON")
}

/// The backend a sample was compiled for: `cpu`, `gpu` or `tpu` (the
/// `backend` of its `truth.json`; the CPU samples predate the field).
pub fn sample_backend(case: &str) -> String {
    sample_truth(case)["backend"]
        .as_str()
        .unwrap_or("cpu")
        .to_string()
}

/// The case of a sample's after-optimizations file (`samples/<case>/dump/...`)
/// and its entry in that case's `truth.json` `modules_of_interest`: the one
/// whose `dump_prefix` starts the file name (`module_0000.jit_fn` for
/// `module_0000.jit_fn.cpu_after_optimizations.txt`,
/// `module_0000.jit_f.cl_1` for `module_0000.jit_f.cl_1.after_optimizations.txt`).
pub fn sample_module_truth(path: &Path) -> (String, serde_json::Value) {
    let case = relative(path)
        .components()
        .nth(1)
        .expect("samples/<case>/dump/<file>")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let truth = sample_truth(&case);
    let module = truth["modules_of_interest"]
        .as_array()
        .expect("modules_of_interest")
        .iter()
        .find(|m| {
            m["dump_prefix"]
                .as_str()
                .is_some_and(|prefix| file.starts_with(&format!("{prefix}.")))
        })
        .unwrap_or_else(|| panic!("{case}: no truth for {file}"))
        .clone();
    (case, module)
}

/// Runs the binary from the crate root: (exit code, stdout, stderr).
pub fn run_hlomem(args: &[&str]) -> (Option<i32>, String, String) {
    run_hlomem_behind(&[], args)
}

/// [`run_hlomem`] with the binary run by `prefix` (`setpriv ...`), if any.
pub fn run_hlomem_behind(prefix: &[String], args: &[&str]) -> (Option<i32>, String, String) {
    let binary = env!("CARGO_BIN_EXE_hlomem");
    let mut command = match prefix.split_first() {
        Some((program, rest)) => {
            let mut c = std::process::Command::new(program);
            c.args(rest).arg(binary);
            c
        }
        None => std::process::Command::new(binary),
    };
    let out = command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .expect("the hlomem binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// hlomem's argument, output and alias bytes beside `memory_analysis()`'s
/// (`ma`, as `truth.json` holds it): `(what, hlomem, XLA)`.
pub fn memory_analysis_pairs(
    memory: &hlomem::analysis::Totals,
    ma: &serde_json::Value,
) -> Vec<(&'static str, u64, Option<u64>)> {
    vec![
        (
            "argument",
            memory.argument_bytes,
            ma["argument_size_in_bytes"].as_u64(),
        ),
        (
            "output",
            memory.output_bytes,
            ma["output_size_in_bytes"].as_u64(),
        ),
        (
            "alias",
            memory.alias_bytes,
            ma["alias_size_in_bytes"].as_u64(),
        ),
    ]
}
