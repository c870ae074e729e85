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

/// Every module of interest: `(case, after-optimizations file, its truth.json entry)`.
fn modules_of_interest(root: &Path) -> Vec<(String, PathBuf, serde_json::Value)> {
    let mut out = Vec::new();
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
                let mut expected = module.clone();
                expected["total_bytes_used"] =
                    module["xla_reported"][prefix]["total_bytes_used"].clone();
                let name = case.file_name().unwrap().to_string_lossy().into_owned();
                out.push((format!("{name} {prefix}"), file, expected));
            }
        }
    }
    out
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_argument_and_output_bytes_equal_memory_analysis() {
    let root = corpus_root();
    let modules = modules_of_interest(&root);
    for (name, file, expected) in &modules {
        let parsed = hlomem::load_module(file).unwrap();
        let summary = hlomem::pipeline::summarize(&parsed);
        let ma = &expected["memory_analysis"];
        assert_eq!(
            summary.parameter_shape_bytes,
            ma["argument_size_in_bytes"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            summary.result_shape_bytes,
            ma["output_size_in_bytes"].as_u64().unwrap(),
            "{name}"
        );
    }
    assert!(
        modules.len() >= 40,
        "checked only {} modules",
        modules.len()
    );
    println!(
        "argument and output bytes equal XLA's for {} modules",
        modules.len()
    );
}

/// Issue 3's bar: from the after-optimizations text alone (copied to an empty
/// folder, so no XLA report can be read), every number equals XLA's.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_memory_accounting_equals_xla() {
    let root = corpus_root();
    let modules = modules_of_interest(&root);
    let scratch = std::env::temp_dir().join(format!("hlomem-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    // Known misses, each with its reason. None today.
    let known_misses: &[(&str, &str)] = &[];
    let mut misses = Vec::new();
    for (name, file, expected) in &modules {
        let lone = scratch.join(file.file_name().unwrap());
        std::fs::copy(file, &lone).unwrap();
        let memory = hlomem::pipeline::summarize(&hlomem::load_module(&lone).unwrap()).memory;
        std::fs::remove_file(&lone).unwrap();
        let ma = &expected["memory_analysis"];
        let mut pairs = crate::support::memory_analysis_pairs(&memory, ma);
        pairs.extend([
            ("temp", memory.temp_bytes, ma["temp_size_in_bytes"].as_u64()),
            (
                "total",
                memory.total_bytes,
                expected["total_bytes_used"].as_u64(),
            ),
        ]);
        let wrong: Vec<String> = pairs
            .iter()
            .filter(|(_, ours, theirs)| Some(*ours) != *theirs)
            .map(|(what, ours, theirs)| format!("{what}: hlomem {ours}, XLA {theirs:?}"))
            .collect();
        if !wrong.is_empty() && !known_misses.iter().any(|(n, _)| name.starts_with(n)) {
            misses.push(format!("{name}: {}", wrong.join(", ")));
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    let hits = modules.len() - misses.len();
    println!(
        "memory accounting equals XLA's for {hits}/{} modules",
        modules.len()
    );
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}

/// With XLA's reports beside the HLO: `--verify` finds no disagreement: totals,
/// allocation sizes, every live range and the set of values live at XLA's peak
/// moment (modules with compact `%t#i` operands skip live ranges, with a note).
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_verify_finds_no_disagreement() {
    let root = corpus_root();
    let modules = modules_of_interest(&root);
    let mut compared = 0;
    for (name, file, _) in &modules {
        let module = hlomem::load_module(file).unwrap();
        let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
        let xla = hlomem::pipeline::xla_reports(file)
            .unwrap()
            .expect("the corpus has XLA's reports");
        let verification = hlomem::report::verification::Verification::from(
            hlomem::analysis::verify::verify(&module, &model, &xla),
        );
        let wrong: Vec<String> = verification
            .disagreements
            .iter()
            .map(|d| format!("{}: hlomem {}, XLA {}", d.what, d.hlomem, d.xla))
            .collect();
        assert!(wrong.is_empty(), "{name}: {}", wrong.join("; "));
        compared += verification.checked;
    }
    println!("{compared} numbers compared with XLA's reports, all agree");
}

/// Every real message users pasted is recognized, with the format its
/// INDEX.md names, and its numbers read.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_every_oom_message_is_recognized() {
    let root = corpus_root();
    // file → (format, truncated, peak buffers or allocations listed)
    let expected: &[(&str, &str, bool, usize)] = &[
        ("000", "gpu-buffer-assignment", false, 3),
        ("001", "tpu-compile", false, 0),
        ("003", "tpu-compile", false, 0),
        ("005", "tpu-compile", false, 0),
        ("007", "tpu-compile", false, 20),
        ("009", "tpu-runtime-reserve", true, 0),
        ("011", "tpu-compile", false, 0),
        ("013", "gpu-allocation", false, 0),
        ("015", "tpu-compile", true, 1),
        ("017", "tpu-compile", false, 0),
        ("019", "tpu-runtime-allocate", false, 0),
        ("021", "gpu-allocation", false, 0),
        ("023", "gpu-buffer-assignment", true, 1),
        ("025", "gpu-buffer-assignment", true, 4),
        ("027", "tpu-compile", true, 1),
        ("029", "gpu-buffer-assignment", true, 3),
        ("031", "tpu-compile", false, 0),
        ("033", "gpu-buffer-assignment", true, 1),
        ("035", "gpu-allocation", false, 0),
        ("037", "gpu-buffer-assignment", true, 0),
        ("039", "tpu-compile-abort", false, 0),
        ("041", "gpu-compile-warnings", true, 0),
        ("043", "device-failed-request", false, 0),
    ];
    let files: Vec<_> = std::fs::read_dir(root.join("oom"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    assert_eq!(
        files.len(),
        expected.len(),
        "a message without an expectation"
    );
    for (name, format, truncated, buffers) in expected {
        let text = std::fs::read_to_string(root.join(format!("oom/{name}.txt"))).unwrap();
        let msg = hlomem::oom::read(&text).unwrap_or_else(|| panic!("{name}: not recognized"));
        assert_eq!(msg.format.name(), *format, "{name}");
        assert_eq!(msg.truncated, *truncated, "{name}");
        assert_eq!(msg.peak_buffers.len(), *buffers, "{name}");
        if msg.format.name() == "gpu-buffer-assignment" && !msg.truncated {
            assert!(msg.stats.total.is_some(), "{name}: stats not read");
        }
    }
    // Spot checks of numbers read from real messages.
    let read = |n: &str| {
        hlomem::oom::read(&std::fs::read_to_string(root.join(format!("oom/{n}.txt"))).unwrap())
            .unwrap()
    };
    assert_eq!(read("013").requested.unwrap().bytes, 4_984_907_648);
    assert_eq!(read("043").requested.unwrap().bytes, 8_589_934_592);
    let tpu = read("001").tpu.unwrap();
    assert_eq!(tpu.memory_space.as_deref(), Some("hbm"));
    assert_eq!(
        hlomem::units::human_bytes(tpu.exceeded_by.unwrap().bytes),
        "6.47GiB"
    );
    let m007 = read("007");
    assert_eq!(m007.peak_buffers[0].op_type.as_deref(), Some("OneHot"));
    assert!(m007.peak_buffers[0].padding.is_some());
    println!("{} OOM messages recognized", expected.len());
}

/// The verdict and advice for every real message users pasted: a snapshot to
/// review whenever advice changes, so each stays right for its situation.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_oom_advice_fits_each_message() {
    let root = corpus_root();
    let mut names: Vec<PathBuf> = std::fs::read_dir(root.join("oom"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    names.sort();
    let mut out = String::new();
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        let source = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("# source: ");
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        // The leading message, explained with the log around it.
        let log = hlomem::oom::read_log(&text);
        let lead = hlomem::oom::lead_index(&log.messages).unwrap();
        let msg = &log.messages[lead];
        let e = hlomem::oom::explain_log(&log, None).swap_remove(lead);
        out += &format!(
            "{name} ({source}) {}\n  verdict: {}\n",
            msg.format.name(),
            e.verdict.sentence()
        );
        for p in &e.problems {
            out += &format!("  problem: {}\n", p.message());
        }
        for a in &e.advice {
            let saves = a
                .advice
                .saves_bytes()
                .map_or("not measurable".to_string(), hlomem::units::human_bytes);
            out += &format!("  - {} [{saves}]\n", a.advice.action(&e.situation));
        }
    }
    crate::support::snapshot_settings().bind(|| insta::assert_snapshot!("corpus_oom_advice", out));
}

fn findings_of(root: &Path, case: &str) -> (hlomem::report::ModuleReport, u64) {
    let modules = modules_of_interest(root);
    let (_, file, expected) = modules
        .iter()
        .find(|(name, _, _)| name.starts_with(&format!("{case} ")))
        .unwrap();
    let module = hlomem::load_module(file).unwrap();
    (
        hlomem::pipeline::summarize(&module),
        expected["total_bytes_used"].as_u64().unwrap(),
    )
}

/// Every donation case gets the finding its description implies, and no
/// "not donated" finding appears where every usable input is already donated.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_donation_cases_get_their_findings() {
    let root = corpus_root();
    let expected: &[(&str, &[&str], &[&str])] = &[
        // (case, codes that must be there, codes that must not)
        ("f2_donate_dtype_mismatch", &["HM002"], &["HM001"]),
        ("f2_donate_identity_and_new", &["HM004"], &["HM001"]),
        ("f2_donate_input_needed_after", &["HM003"], &["HM001"]),
        ("f2_donate_matmul_square", &["HM003"], &["HM001"]),
        // JAX dropped this donation before XLA saw it: nothing in the HLO to find.
        (
            "f2_donate_shape_mismatch",
            &[],
            &["HM001", "HM002", "HM003"],
        ),
        ("f2_donate_transpose", &["HM003"], &["HM001"]),
        // The unused donated argument was pruned by jit; x's donation works.
        ("f2_donate_unused_arg", &[], &["HM001", "HM002", "HM003"]),
        (
            "f2_donate_usable_scale",
            &[],
            &["HM001", "HM002", "HM003", "HM004"],
        ),
        ("f2_fori_dus_nodonate", &["HM001"], &[]),
        (
            "f2_update_inplace_donate",
            &[],
            &["HM001", "HM002", "HM003"],
        ),
        ("f2_update_inplace_nodonate", &["HM001"], &[]),
        ("f1_add_f64_42994_nodonate", &["HM001", "HM006"], &[]),
        ("f1_add_f64_42994_donate0", &["HM006"], &["HM001"]),
        ("f3_mlp_f32_nodonate", &["HM001"], &[]),
        ("f3_tf_f32_donate", &["HM005"], &["HM001"]),
        ("f5_dp_mlp_step", &[], &["HM001"]),
    ];
    for (case, must, must_not) in expected {
        let (report, _) = findings_of(&root, case);
        let codes: Vec<&str> = report.findings.iter().map(|f| f.code).collect();
        for code in *must {
            assert!(
                codes.contains(code),
                "{case}: expected {code}, got {codes:?}"
            );
        }
        for code in *must_not {
            assert!(
                !codes.contains(code),
                "{case}: unexpected {code}: {:?}",
                report.findings
            );
        }
    }
}

/// The not-donated findings' predicted saving against XLA's measured
/// difference between the same program compiled with and without donation:
/// byte for byte. The corpus has four such pairs; `measure/make_data.sh` compiles
/// the non-donated twins of its four donated transformer steps (same
/// program.py) under `target/bench-data/twins`, and they are checked when present.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_not_donated_savings_match_xla() {
    let root = corpus_root();
    let predicted = |report: &hlomem::report::ModuleReport| -> u64 {
        report
            .findings
            .iter()
            .filter(|f| f.code == "HM001")
            .map(|f| f.bytes)
            .sum()
    };
    let check = |name: &str, predicted: u64, measured: u64| {
        println!("{name}: predicted {predicted}, XLA {measured}");
        assert_eq!(
            predicted, measured,
            "{name}: HM001's saving against XLA's difference"
        );
    };
    let pairs: &[(&str, &str)] = &[
        ("f1_add_f64_42994_nodonate", "f1_add_f64_42994_donate0"),
        ("f2_update_inplace_nodonate", "f2_update_inplace_donate"),
        ("f5_dp_replicated_nodonate", "f5_dp_mlp_step"),
        ("f3_mlp_f32_nodonate", "f3_mlp_f32_donate"),
    ];
    for (nodonate, donate) in pairs {
        let (report, total_without) = findings_of(&root, nodonate);
        let (_, total_with) = findings_of(&root, donate);
        check(nodonate, predicted(&report), total_without - total_with);
    }

    let twins = crate::support::root().join("target/bench-data/twins");
    for donated in [
        "f3_tf_f32",
        "f3_tf_f32_L12",
        "f3_tf_bf16",
        "f3_tf_f32_remat",
    ] {
        let dir = twins.join(format!("{donated}_nodonate"));
        let Ok(truth) = std::fs::read_to_string(dir.join("truth.json")) else {
            println!("{donated}: no non-donated twin (measure/make_data.sh makes it); skipped");
            continue;
        };
        let truth: serde_json::Value = serde_json::from_str(&truth).unwrap();
        let total_without = truth["total_bytes_used"].as_u64().unwrap();
        let file = dir.join("dump/module_0000.jit_train_step.cpu_after_optimizations.txt");
        let module = hlomem::load_module(&file).unwrap();
        let report = hlomem::pipeline::summarize(&module);
        assert_eq!(
            report.memory.total_bytes, total_without,
            "{donated}_nodonate"
        );
        let (_, total_with) = findings_of(&root, &format!("{donated}_donate"));
        check(
            &format!("{donated}_nodonate"),
            predicted(&report),
            total_without - total_with,
        );
    }
}

/// A real dump folder of 15 modules: all reported, with the numbers each file gives alone.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_dump_folder_with_many_modules() {
    let root = corpus_root();
    let dir = root.join("corpus/cases/f3_mlp_f32_donate_executed/dump");
    let folder = hlomem::analyze_paths(&[dir], hlomem::AnalyzeOptions::default());
    assert!(folder.errors.is_empty());
    assert_eq!(folder.modules.len(), 15);
    for m in &folder.modules {
        let alone = hlomem::pipeline::summarize(&hlomem::load_module(Path::new(&m.file)).unwrap());
        assert_eq!(alone.memory, m.memory, "{}", m.file);
    }
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_diff_of_the_motivating_pair() {
    let root = corpus_root();
    let old = hlomem::analyze_paths(
        &[root.join("corpus/cases/f1_add_f64_42994_nodonate/dump")],
        Default::default(),
    );
    let new = hlomem::analyze_paths(
        &[root.join("corpus/cases/f1_add_f64_42994_donate0/dump")],
        Default::default(),
    );
    let d = hlomem::gate::diff(&old, &new, None);
    assert_eq!(d.modules[0].growth(), -14_787_872_288, "the 13.77GiB drop");
    assert_eq!(d.modules[0].findings_gone, ["HM001 not-donated a"]);
}

/// The largest module's report stays small enough to attach to an issue.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_big_module_html_is_small() {
    let root = corpus_root();
    let report = hlomem::analyze_paths(
        &[root.join("corpus/cases/big_transformer_48L_unrolled/dump")],
        hlomem::AnalyzeOptions::default(),
    );
    let mut html = Vec::new();
    hlomem::render::render(
        &report,
        hlomem::render::AnalyzeFormat::Html,
        Default::default(),
        &mut html,
    )
    .unwrap();
    assert!(html.len() < 2 * 1024 * 1024, "{} bytes", html.len());
    println!("big_transformer_48L_unrolled report: {} bytes", html.len());
}

/// Every HLO text file under the shared folder (corpus, accelerators,
/// front-ends, older versions, other people's dumps; before- and
/// after-optimizations) is analyzed by the binary under an address-space
/// limit, as a user runs it: none is killed or aborts (exit 0, or 2 with an
/// error), and none needs more than 10x its size in resident memory above
/// what the process takes for any module: the baseline, its peak on a
/// three-line module (the binary, its threads' stacks, the allocator's
/// arenas), plus 2 MiB for what varies from run to run.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn corpus_every_hlo_file_in_bounded_memory() {
    use std::os::unix::process::CommandExt;
    const LIMIT: u64 = 3 << 30;
    let root = corpus_root();
    let mut files = Vec::new();
    for part in [
        "corpus",
        "accelerators",
        "frontends",
        "versions",
        "external",
    ] {
        if root.join(part).is_dir() {
            walk(&root.join(part), &mut files);
        }
    }
    files.retain(|p| {
        let head = std::fs::read(p).map(|b| b.into_iter().take(4096).collect::<Vec<u8>>());
        head.is_ok_and(|h| String::from_utf8_lossy(&h).contains("HloModule"))
    });
    files.sort();
    assert!(files.len() > 400, "found only {} HLO files", files.len());
    // The binary under the limit, as a user runs it: its peak RSS, after
    // checking it exited with 0 or 2 (not killed, not aborted).
    let peak_rss = |path: &Path| -> u64 {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hlomem"));
        command
            .args(["analyze", "--format", "json"])
            .arg(path)
            .env("HLOMEM_REPORT_PEAK_RSS", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: LIMIT,
                    rlim_max: LIMIT,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let output = command.output().expect("hlomem runs");
        use std::os::unix::process::ExitStatusExt;
        assert!(
            matches!(output.status.code(), Some(0 | 2)),
            "{}: killed or aborted ({:?}, signal {:?})",
            path.display(),
            output.status.code(),
            output.status.signal()
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        let rss: u64 = stderr
            .lines()
            .find_map(|l| l.strip_prefix("hlomem: peak RSS "))
            .and_then(|l| l.strip_suffix(" bytes"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}: no peak RSS in {stderr}", path.display()));
        rss
    };
    let tiny = std::env::temp_dir().join(format!("hlomem-tiny-{}.txt", std::process::id()));
    std::fs::write(
        &tiny,
        "HloModule m\n\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n",
    )
    .unwrap();
    let baseline = (0..3).map(|_| peak_rss(&tiny)).max().unwrap() + (2 << 20);
    std::fs::remove_file(&tiny).ok();
    let mut worst = (0.0f64, PathBuf::new());
    for path in &files {
        let size = std::fs::metadata(path).unwrap().len();
        let rss = peak_rss(path);
        let above = rss.saturating_sub(baseline) as f64 / size as f64;
        assert!(
            rss <= baseline + 10 * size,
            "{}: peak RSS {rss} bytes for {size} bytes of text ({above:.1}x above the baseline)",
            path.display()
        );
        if above > worst.0 {
            worst = (above, path.clone());
        }
    }
    println!(
        "{} HLO files within {LIMIT} bytes of address space (baseline {baseline} bytes); the most memory per byte of text: {:.1}x ({})",
        files.len(),
        worst.0,
        worst.1.display()
    );
}

/// The dumps of older jax releases (`versions/jax-0.4.35` ... `0.9.2`): every
/// module of interest is read (0.4.35's XLA ends computations with a
/// `// name` comment), and its temporaries equal `memory_analysis()`'s.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_older_jax_versions_parse_and_their_temp_equals_xla() {
    let root = corpus_root().join("versions");
    if !root.is_dir() {
        println!("no versions/ folder: skipped");
        return;
    }
    let mut checked = 0;
    let mut truths = Vec::new();
    walk(&root, &mut truths);
    truths.retain(|p| p.file_name().is_some_and(|n| n == "truth.json"));
    truths.sort();
    for truth in truths {
        let case = truth.parent().unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&truth).unwrap()).unwrap();
        for module in json["modules_of_interest"].as_array().into_iter().flatten() {
            let Some(prefix) = module["dump_prefixes"][0].as_str() else {
                continue;
            };
            let Some(temp) = module["memory_analysis"]["temp_size_in_bytes"].as_u64() else {
                continue;
            };
            let mut files = Vec::new();
            walk(&case.join("dump"), &mut files);
            let Some(file) = files.into_iter().find(|f| {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with(&format!("{prefix}."))
                    && name.ends_with("after_optimizations.txt")
                    && !name.contains("after_optimizations-")
            }) else {
                continue;
            };
            let parsed =
                hlomem::load_module(&file).unwrap_or_else(|e| panic!("{}", e.render(false)));
            let model = hlomem::analysis::analyze(&parsed, &hlomem::chip::Target::detect(&parsed));
            assert_eq!(model.totals.temp_bytes, temp, "{}", file.display());
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} modules checked");
    println!("{checked} modules of older jax releases: temp equals memory_analysis()");
}
