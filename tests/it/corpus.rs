//! Checks against the shared corpus of real XLA dumps (`../shared`), which is
//! not part of the repository. `.ci/run` runs these with
//! `HLOMEM_CORPUS=../shared cargo test --test it -- --ignored corpus`;
//! run without the variable they fail loudly rather than pass empty.

use std::path::{Path, PathBuf};

fn corpus_root() -> PathBuf {
    let root = std::env::var_os("HLOMEM_CORPUS").expect("set HLOMEM_CORPUS to the shared/ folder");
    let root = PathBuf::from(root);
    assert!(
        root.join("corpus/cases").is_dir(),
        "{} has no corpus/cases",
        root.display()
    );
    root
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Every HLO text file: before/after-optimizations dumps, and the external `.txt` and `.hlo` files.
fn hlo_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    walk(&root.join("corpus"), &mut files);
    walk(&root.join("external"), &mut files);
    files.retain(|p| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let in_corpus = p.starts_with(root.join("corpus"));
        if in_corpus {
            name.ends_with("before_optimizations.txt") || name.ends_with("after_optimizations.txt")
        } else {
            (name.ends_with(".txt") || name.ends_with(".hlo")) && !name.ends_with(".md")
        }
    });
    files.sort();
    files
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_every_hlo_file_parses() {
    let root = corpus_root();
    let files = hlo_files(&root);
    assert!(files.len() > 200, "found only {} files", files.len());
    for path in &files {
        if let Err(e) = hlomem::load_module(path) {
            panic!("{}", e.render(false));
        }
    }
    println!("parsed {} HLO files", files.len());
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_argument_and_output_bytes_equal_memory_analysis() {
    let root = corpus_root();
    let mut checked = 0;
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root.join("corpus/cases"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    cases.sort();
    for case in cases {
        let truth: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(case.join("truth.json")).unwrap())
                .unwrap();
        for module in truth["modules_of_interest"].as_array().unwrap() {
            for prefix in module["dump_prefixes"].as_array().unwrap() {
                let prefix = prefix.as_str().unwrap();
                let file = std::fs::read_dir(case.join("dump"))
                    .unwrap()
                    .flatten()
                    .map(|e| e.path())
                    .find(|p| {
                        let name = p.file_name().unwrap().to_string_lossy();
                        name.starts_with(&format!("{prefix}."))
                            && name.ends_with("after_optimizations.txt")
                    })
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: no after-optimizations file for {prefix}",
                            case.display()
                        )
                    });
                let parsed = hlomem::load_module(&file).unwrap();
                let summary = hlomem::report::ModuleReport::summarize(&parsed);
                let ma = &module["memory_analysis"];
                assert_eq!(
                    summary.parameter_bytes,
                    ma["argument_size_in_bytes"].as_u64().unwrap(),
                    "{}",
                    file.display()
                );
                assert_eq!(
                    summary.output_bytes,
                    ma["output_size_in_bytes"].as_u64().unwrap(),
                    "{}",
                    file.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "checked only {checked} modules");
    println!("argument and output bytes equal XLA's for {checked} modules");
}
