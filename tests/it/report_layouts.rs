//! `analyze --verify` on the dumps of other XLA versions and front-ends
//! (`../shared/frontends`: TensorFlow 2.21, torch_xla 2.9; `../shared/versions`:
//! jax 0.4.35 to 0.9.2), whose XLA writes the buffer-assignment report as one
//! file: every report is read, and what `--verify` then says follows from
//! XLA's own numbers. Run with
//! `HLOMEM_CORPUS=../shared cargo test --test it -- --ignored corpus`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn after_optimizations(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            after_optimizations(&path, out);
        } else if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("after_optimizations.txt"))
        {
            out.push(path);
        }
    }
}

/// What `analyze --verify --format json` said of one module.
struct Verified {
    code: Option<i32>,
    total: u64,
    disagreements: Vec<String>,
    stderr: String,
}

fn verify(hlo: &Path) -> Verified {
    let out = Command::new(env!("CARGO_BIN_EXE_hlomem"))
        .args(["analyze", "--verify", "--format", "json"])
        .arg(hlo)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let module = &json["modules"][0];
    let disagreements = module["verification"]["disagreements"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| format!("{}: hlomem {}, XLA {}", d["what"], d["hlomem"], d["xla"]))
        .collect();
    Verified {
        code: out.status.code(),
        total: module["memory"]["total_bytes"].as_u64().unwrap_or(0),
        disagreements,
        stderr,
    }
}

/// Every module under `frontends/` and `versions/`: its one-file report is
/// read, and every number agrees with XLA's (exit 0), the modules whose XLA
/// outlines work into `parallel_*` calls of `.clone` values (jax 0.4.35 to
/// 0.6.2, torch_xla 2.9) among them (issues 40 and 44).
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_verify_reads_every_report_layout() {
    let root = PathBuf::from(
        std::env::var_os("HLOMEM_CORPUS").expect("set HLOMEM_CORPUS to the shared/ folder"),
    );
    let mut modules = Vec::new();
    after_optimizations(&root.join("frontends"), &mut modules);
    after_optimizations(&root.join("versions"), &mut modules);
    modules.sort();
    assert!(modules.len() >= 39, "only {} modules", modules.len());
    let mut failures = Vec::new();
    let mut clones = 0;
    for hlo in &modules {
        let name = hlo.strip_prefix(&root).unwrap_or(hlo).display().to_string();
        let xla = match hlomem::pipeline::xla_reports(hlo) {
            Ok(Some(xla)) => xla,
            Ok(None) => {
                failures.push(format!("{name}: no report beside it"));
                continue;
            }
            Err(e) => {
                failures.push(format!("{name}: {}", e.render(false)));
                continue;
            }
        };
        assert_eq!(
            xla.layout,
            hlomem::xla_report::Layout::OneFile,
            "{name}: these XLAs write one file"
        );
        let v = verify(hlo);
        let xla_total = xla.total_bytes_used.expect("the total is read");
        let first = v.disagreements.first().cloned().unwrap_or_default();
        println!("{:?}  {name}  {first}", v.code);
        if xla
            .allocations
            .iter()
            .flat_map(|a| &a.values)
            .any(|v| v.name.ends_with(".clone"))
        {
            clones += 1;
        }
        if v.code != Some(0) || v.total != xla_total {
            failures.push(format!(
                "{name}: exit 0 with XLA's total {xla_total}, got {:?} with {}: {}{}",
                v.code,
                v.total,
                v.disagreements.join("; "),
                v.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        clones >= 20,
        "only {clones} modules with `.clone` values in XLA's allocations"
    );
    println!(
        "{} modules read; every one agrees with XLA on every number, {clones} of them with `.clone` values",
        modules.len()
    );
}
