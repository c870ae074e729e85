//! Checks against the shared GPU and TPU dumps (`../shared/accelerators`),
//! compiled deviceless for an H100 and for TPU v5e/v6e: hlomem's numbers, from
//! the HLO text alone, against the numbers XLA itself wrote. Run by `.ci/run`
//! with the other corpus checks (`--ignored corpus`).

use std::path::{Path, PathBuf};

use hlomem::chip::TpuVersion;

/// One module of one case: its HLO file, its case's `truth.json`, the module's
/// entry under `reports`.
struct Module {
    name: String,
    hlo: PathBuf,
    truth: serde_json::Value,
    report: serde_json::Value,
}

fn accelerator_modules() -> Vec<Module> {
    let root = PathBuf::from(
        std::env::var_os("HLOMEM_CORPUS").expect("set HLOMEM_CORPUS to the shared/ folder"),
    )
    .join("accelerators");
    assert!(root.is_dir(), "{} is missing", root.display());
    let mut modules = Vec::new();
    let mut truths: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .flat_map(|target| {
            std::fs::read_dir(target.path().join("cases"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|case| case.path().join("truth.json"))
        .filter(|p| p.is_file())
        .collect();
    truths.sort();
    for truth_path in truths {
        let truth: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&truth_path).unwrap()).unwrap();
        let dump = truth_path.parent().unwrap().join("dump");
        for (prefix, report) in truth["reports"].as_object().unwrap() {
            let hlo = std::fs::read_dir(&dump)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    n.starts_with(prefix.as_str()) && n.ends_with("after_optimizations.txt")
                })
                .unwrap_or_else(|| panic!("no HLO for {prefix} in {}", dump.display()));
            let case = truth_path.parent().unwrap();
            let name = format!(
                "{}/{}",
                case.parent()
                    .unwrap()
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy(),
                case.file_name().unwrap().to_string_lossy()
            );
            modules.push(Module {
                name,
                hlo,
                truth: truth.clone(),
                report: report.clone(),
            });
        }
    }
    assert!(modules.len() >= 40, "found only {} modules", modules.len());
    modules
}

/// The chip a TPU case was compiled for (`v6e:2x2` → v6e): what a user passes
/// as `--tpu` when a lone HLO file does not say.
fn chip(truth: &serde_json::Value) -> Option<TpuVersion> {
    let topology = truth["topology"].as_str()?;
    TpuVersion::parse(topology.split(':').next()?)
}

/// Modules whose numbers differ from XLA's, each with the reason. The test
/// fails if one of them starts to agree, so the list stays true.
const KNOWN_MISSES: &[(&str, &str)] = &[];

fn known_miss(name: &str) -> bool {
    KNOWN_MISSES
        .iter()
        .any(|(prefix, _)| name.starts_with(prefix))
}

/// From the HLO text alone (copied to an empty folder as `module.txt`, so no
/// file name and no XLA report helps), every number XLA's buffer assignment
/// decides equals XLA's: argument, output and alias bytes
/// (`memory_analysis()`), GPU temp, "Total bytes used" where every space is
/// exact, and each exact memory space's allocation bytes.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_accelerator_memory_equals_xla() {
    let modules = accelerator_modules();
    let scratch = std::env::temp_dir().join(format!("hlomem-accel-{}", std::process::id()));
    let (mut misses, mut unexpectedly_right, mut hits) = (Vec::new(), Vec::new(), 0);
    for m in &modules {
        let dir = scratch.join(m.name.replace('/', "_"));
        std::fs::create_dir_all(&dir).unwrap();
        let lone = dir.join("module.txt");
        std::fs::copy(&m.hlo, &lone).unwrap();
        let options = hlomem::AnalyzeOptions {
            tpu_version: chip(&m.truth),
            ..Default::default()
        };
        let report = hlomem::analyze_paths(std::slice::from_ref(&lone), options);
        assert!(report.errors.is_empty(), "{}: {:?}", m.name, report.errors);
        let memory = &report.modules[0].memory;
        let ma = &m.truth["memory_analysis"];
        let tpu = m.truth["backend"] == "tpu";
        let mut pairs = crate::support::memory_analysis_pairs(memory, ma);
        if !tpu {
            // TPU's memory_analysis() temp comes from later compiler stages.
            pairs.push(("temp", memory.temp_bytes, ma["temp_size_in_bytes"].as_u64()));
        }
        if memory.total_exact {
            pairs.push((
                "total",
                memory.total_bytes,
                m.report["total_bytes_used_line"].as_u64(),
            ));
        }
        let by_color = m.report["allocation_bytes_by_color"].as_object().unwrap();
        for space in memory.by_space.iter().filter(|s| s.exact) {
            let theirs = by_color
                .get(&space.color.to_string())
                .and_then(|b| b.as_u64());
            pairs.push(("space", space.bytes, theirs.or(Some(0))));
        }
        // HBM said to be an estimate because the packing orders disagree:
        // XLA's figure is one of them, so it lies between the smallest and
        // the largest (the rest of the space, outside the heap, is exact).
        for estimate in &memory.device_estimates {
            if let hlomem::analysis::DeviceEstimate::PackingOrder(o) = estimate {
                let space = memory.by_space.iter().find(|s| s.color == 0).unwrap();
                let rest = space.bytes - o.definition;
                let sizes = [o.definition, o.biggest_first, o.longest_first];
                let (low, high) = (
                    rest + sizes.iter().min().unwrap(),
                    rest + sizes.iter().max().unwrap(),
                );
                let theirs = by_color.get("0").and_then(|b| b.as_u64()).unwrap_or(0);
                if !(low..=high).contains(&theirs) {
                    pairs.push((
                        "HBM outside its packing orders' range",
                        space.bytes,
                        Some(theirs),
                    ));
                }
            }
        }
        for (color, bytes) in by_color {
            let color: u64 = color.parse().unwrap();
            if hlomem::chip::Target::detect(&hlomem::load_module(&lone).unwrap())
                .space_is_exact(color)
                && !memory.by_space.iter().any(|s| s.color == color)
            {
                pairs.push(("missing space", 0, bytes.as_u64()));
            }
        }
        let wrong: Vec<String> = pairs
            .iter()
            .filter(|(_, ours, theirs)| Some(*ours) != *theirs)
            .map(|(what, ours, theirs)| format!("{what}: hlomem {ours}, XLA {theirs:?}"))
            .collect();
        match (wrong.is_empty(), known_miss(&m.name)) {
            (true, false) => hits += 1,
            (true, true) => unexpectedly_right.push(m.name.clone()),
            (false, true) => {}
            (false, false) => misses.push(format!("{}: {}", m.name, wrong.join(", "))),
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    println!(
        "accelerator memory equals XLA's for {hits}/{} modules ({} known misses)",
        modules.len(),
        modules.len() - hits
    );
    assert!(misses.is_empty(), "{}", misses.join("\n"));
    assert!(
        unexpectedly_right.is_empty(),
        "now right, take them off KNOWN_MISSES: {unexpectedly_right:?}"
    );
}

/// Read alone with no chip named, no TPU number presented as exact is wrong:
/// a figure that depends on the chip (a tuple table's size) comes with the
/// other chips' figure, and XLA's is one of the two; every other figure, and
/// every space marked exact, is XLA's.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_tpu_read_without_the_chip_marks_every_guess() {
    let scratch = std::env::temp_dir().join(format!("hlomem-nochip-{}", std::process::id()));
    let (mut wrong, mut checked, mut told_apart) = (Vec::new(), 0, 0);
    for m in accelerator_modules() {
        if m.truth["backend"] != "tpu" {
            continue;
        }
        let dir = scratch.join(m.name.replace('/', "_"));
        std::fs::create_dir_all(&dir).unwrap();
        let lone = dir.join("module.txt");
        std::fs::copy(&m.hlo, &lone).unwrap();
        let report = hlomem::analyze_paths(std::slice::from_ref(&lone), Default::default());
        assert!(report.errors.is_empty(), "{}: {:?}", m.name, report.errors);
        let memory = &report.modules[0].memory;
        let other = memory.chip_alternative().map(|(_, _, f)| *f);
        let ma = &m.truth["memory_analysis"];
        let by_color = m.report["allocation_bytes_by_color"].as_object().unwrap();
        let hbm = by_color.get("0").and_then(|b| b.as_u64()).or(Some(0));
        let hbm_exact = memory.by_space.iter().any(|s| s.color == 0 && s.exact);
        let packing_undecided = memory
            .device_estimates
            .iter()
            .any(|e| matches!(e, hlomem::analysis::DeviceEstimate::PackingOrder(_)));
        type Of = fn(&hlomem::analysis::ChipFigures) -> u64;
        let figures: [(&str, Of, Option<u64>); 4] = [
            (
                "argument",
                |f| f.argument_bytes,
                ma["argument_size_in_bytes"].as_u64(),
            ),
            (
                "output",
                |f| f.output_bytes,
                ma["output_size_in_bytes"].as_u64(),
            ),
            (
                "alias",
                |f| f.alias_bytes,
                ma["alias_size_in_bytes"].as_u64(),
            ),
            ("HBM", |f| f.device_bytes, hbm),
        ];
        for (what, of, xla) in figures {
            let (ours, theirs) = (of(&memory.figures()), other.as_ref().map(of));
            let Some(xla) = xla else { continue };
            let ok = match theirs.filter(|&t| t != ours) {
                Some(theirs) => {
                    told_apart += 1;
                    // Where the packing order is undecided too, HBM is
                    // another estimate, checked by the test above.
                    xla == ours || xla == theirs || (what == "HBM" && packing_undecided)
                }
                None if what == "HBM" => !hbm_exact || xla == ours,
                None => xla == ours,
            };
            if !ok {
                wrong.push(format!(
                    "{} {what}: hlomem {ours} (other chips {theirs:?}), XLA {xla}",
                    m.name
                ));
            }
        }
        for space in memory.by_space.iter().filter(|s| s.exact && s.color != 0) {
            let xla = by_color
                .get(&space.color.to_string())
                .and_then(|b| b.as_u64());
            if xla.unwrap_or(0) != space.bytes {
                wrong.push(format!(
                    "{} color {}: hlomem {}, XLA {xla:?}",
                    m.name, space.color, space.bytes
                ));
            }
        }
        checked += 1;
    }
    std::fs::remove_dir_all(&scratch).ok();
    println!("{checked} TPU modules read without their chip; {told_apart} figures depend on it");
    assert!(checked >= 20, "{checked} TPU modules");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// With XLA's reports beside the HLO (and the dump's `target_arguments.txt`
/// naming the TPU chip), `--verify` agrees on every number it compares.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_accelerator_verify_agrees() {
    let modules = accelerator_modules();
    let mut compared = 0;
    for m in modules.iter().filter(|m| !known_miss(&m.name)) {
        let report = hlomem::analyze_paths(
            std::slice::from_ref(&m.hlo),
            hlomem::AnalyzeOptions {
                verify: true,
                ..Default::default()
            },
        );
        assert!(report.errors.is_empty(), "{}: {:?}", m.name, report.errors);
        let verification = report.modules[0].verification.as_ref().unwrap();
        let wrong: Vec<String> = verification
            .disagreements
            .iter()
            .map(|d| format!("{}: hlomem {}, XLA {}", d.what, d.hlomem, d.xla))
            .collect();
        assert!(wrong.is_empty(), "{}: {}", m.name, wrong.join("; "));
        assert!(verification.checked > 0, "{}: nothing compared", m.name);
        compared += verification.checked;
    }
    println!("{compared} numbers of the accelerator dumps compared with XLA's reports, all agree");
}

/// The backend comes from the text, whatever the file is called.
/// XLA's totals as hlomem reads them from the reports beside each module
/// (what `hlomem fits FILE` decides on, and the Python package's
/// `XlaTotals`) equal what XLA's memory-usage report and "Total bytes used"
/// line say, for every module.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_accelerator_xla_totals_are_xlas() {
    for m in accelerator_modules() {
        let figures = hlomem::pipeline::module_figures(&m.hlo, chip(&m.truth)).unwrap();
        let totals = figures.xla.expect("XLA's totals");
        assert_eq!(
            totals.total_bytes_used,
            m.report["total_bytes_used_line"].as_u64(),
            "{}",
            m.name
        );
        let usage = m.report["memory_usage_report"].as_object().unwrap();
        assert!(!usage.is_empty(), "{}", m.name);
        for space in &totals.by_space {
            let key = format!("{} (color={})", space.name, space.color);
            assert_eq!(usage[&key].as_u64(), Some(space.bytes), "{}: {key}", m.name);
        }
        assert_eq!(totals.by_space.len(), usage.len(), "{}", m.name);
    }
}

#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_accelerator_backend_is_read_from_the_text() {
    for m in accelerator_modules() {
        let module = hlomem::load_module(&m.hlo).unwrap();
        let target = hlomem::chip::Target::detect(&module);
        let expected = match m.truth["backend"].as_str().unwrap() {
            "tpu" => hlomem::chip::Backend::Tpu,
            _ => hlomem::chip::Backend::Gpu,
        };
        assert_eq!(target.backend, expected, "{}", m.name);
        if expected == hlomem::chip::Backend::Tpu {
            // The dump folder names the chip.
            let arguments =
                hlomem::pipeline::inputs::in_same_folder(&m.hlo, ".target_arguments.txt")
                    .unwrap_or_else(|| panic!("{}: no target_arguments.txt", m.name));
            let text = std::fs::read_to_string(Path::new(&arguments)).unwrap();
            assert_eq!(
                TpuVersion::from_target_arguments(&text),
                chip(&m.truth),
                "{}",
                m.name
            );
        }
    }
}

/// Someone else's TPU v6e dumps (`external/tpu-v6e-2025`, libtpu 0.0.48) carry,
/// beside some modules, the memory space XLA gave every value
/// (`NAME.after.memory.json`: instruction → shape index → color). hlomem's
/// space for each of those values must be the same.
#[test]
#[ignore = "set HLOMEM_CORPUS"]
fn corpus_external_tpu_memory_spaces_equal_xla() {
    let root = PathBuf::from(std::env::var_os("HLOMEM_CORPUS").expect("set HLOMEM_CORPUS"))
        .join("external/tpu-v6e-2025");
    let mut checked = (0, 0);
    for folder in ["v6e-1", "v6e-2x2", "tpu-v6e"] {
        for entry in std::fs::read_dir(root.join(folder)).unwrap().flatten() {
            let json_path = entry.path();
            let name = json_path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let Some(stem) = name.strip_suffix(".after.memory.json") else {
                continue;
            };
            let hlo = json_path.with_file_name(format!("{stem}.after.hlo"));
            if !hlo.is_file() {
                continue;
            }
            let module = hlomem::load_module(&hlo).unwrap();
            let target = hlomem::chip::Target::detect(&module);
            let model = hlomem::analysis::analyze(&module, &target);
            let by_name: std::collections::HashMap<&str, hlomem::hlo::InstrId> = module
                .instrs()
                .map(|(i, _)| (module.instr_name(i), i))
                .collect();
            let spaces: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
            for (instr, indices) in spaces.as_object().unwrap() {
                let id = by_name[instr.as_str()];
                let shape = &module.instr(id).shape;
                for (index, color) in indices.as_object().unwrap() {
                    let Some(color) = color.as_u64() else {
                        continue; // "thread-local"
                    };
                    let index: Vec<u64> = index
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(|s| s.parse().unwrap())
                        .collect();
                    let node = hlomem::analysis::dataflow::node_of(shape, &index).unwrap();
                    let value = &model.dataflow.values[model.dataflow.value_of(id)[node].index()];
                    let defining = module
                        .instr(value.instr)
                        .shape
                        .subshape(&value.index)
                        .unwrap();
                    assert_eq!(
                        target.memory_space(defining),
                        color,
                        "{folder}/{stem}: {instr}{index:?}"
                    );
                    checked.0 += 1;
                }
            }
            checked.1 += 1;
        }
    }
    assert!(checked.1 >= 10, "only {} modules", checked.1);
    println!(
        "{} values of {} modules in XLA's memory spaces",
        checked.0, checked.1
    );
}

/// `tests/tpu_fallback/module.txt` with its unused pad parameter given `rows`
/// rows, analyzed alone for v5e: HBM's bytes, whether exact, and the bytes
/// of each packing order when they are an estimate.
fn fallback_module_hbm(rows: u64) -> (u64, bool, Option<(u64, u64)>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tpu_fallback/module.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.replace("27369248", &rows.to_string());
    let dir = std::env::temp_dir().join(format!("hlomem-fallback-{}-{rows}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lone = dir.join("module.txt");
    std::fs::write(&lone, text).unwrap();
    let options = hlomem::AnalyzeOptions {
        tpu_version: Some(TpuVersion::V5e),
        ..Default::default()
    };
    let report = hlomem::analyze_paths(std::slice::from_ref(&lone), options);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let memory = &report.modules[0].memory;
    let hbm = memory.by_space.iter().find(|s| s.color == 0).unwrap();
    let range = memory.device_estimates.iter().find_map(|e| match e {
        hlomem::analysis::DeviceEstimate::PackingOrder(o) => {
            let rest = hbm.bytes - o.definition;
            let sizes = [o.definition, o.biggest_first, o.longest_first];
            Some((
                rest + sizes.iter().min().unwrap(),
                rest + sizes.iter().max().unwrap(),
            ))
        }
        _ => None,
    });
    (hbm.bytes, hbm.exact, range)
}

/// libtpu packs HBM again biggest- and longest-first when its total passes
/// the chip's limit less 2.5 GiB (`RunAssignBuffersWithFallback`): 13.4 GiB
/// on v5e is past it, and hlomem's HBM is XLA's, exact.
#[test]
fn tpu_hbm_fallback_past_the_limit_is_exact() {
    let (bytes, exact, range) = fallback_module_hbm(27662848);
    assert_eq!((bytes, exact, range), (14_379_405_312, true, None));
}

/// Totals within the range where v5e's threshold is known to lie (or near
/// it) are not decided: HBM is an estimate, and XLA's figure (start order
/// below the threshold, the fallback above it) lies between the orders.
#[test]
fn tpu_hbm_fallback_near_the_limit_is_an_estimate() {
    for (rows, xla) in [
        (27327304, 14_216_339_456),
        (27348280, 14_227_079_168),
        (27348288, 14_227_083_264),
        (27348440, 14_227_161_088),
        (27369248, 14_229_082_112),
    ] {
        let (_, exact, range) = fallback_module_hbm(rows);
        assert!(!exact, "{rows} rows: HBM said to be exact");
        let (low, high) = range.expect("the packing orders' sizes");
        assert!(
            (low..=high).contains(&xla),
            "{rows} rows: XLA's {xla} outside {low}..={high}"
        );
    }
}

/// `tests/tpu_vmem/module.txt` analyzed alone, the chip named or not: each
/// memory space's (color, bytes, exact), and the total's bytes and exactness.
fn vmem_module(chip: Option<TpuVersion>) -> (Vec<(u64, u64, bool)>, u64, bool) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tpu_vmem/module.txt");
    let options = hlomem::AnalyzeOptions {
        tpu_version: chip,
        ..Default::default()
    };
    let report = hlomem::analyze_paths(std::slice::from_ref(&path), options);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let memory = &report.modules[0].memory;
    let spaces = memory
        .by_space
        .iter()
        .map(|s| (s.color, s.bytes, s.exact))
        .collect();
    (spaces, memory.total_bytes, memory.total_exact)
}

/// libtpu's memory-space assignment lays out at most the chip's VMEM less the
/// scoped VMEM (112 MiB on v5e), and on this MLP step it fills all of it;
/// hlomem's own packing of those buffers would need 156 MiB. VMEM stays an
/// estimate, but held to the bound it is XLA's here, and so is the total.
#[test]
fn tpu_vmem_is_held_to_the_memory_space_assignment_limit() {
    let (spaces, total, total_exact) = vmem_module(Some(TpuVersion::V5e));
    // XLA's `-buffer-assignment.txt` (tests/tpu_vmem/README.md).
    assert_eq!(
        spaces,
        vec![
            (0, 103_444_480, true),
            (1, 117_440_512, false),
            (2, 44, false)
        ]
    );
    assert_eq!((total, total_exact), (220_885_036, false));
}

/// With no chip named, the largest measured chip's bound holds (v5e's: v6e
/// keeps 32 MiB of scoped VMEM, v5e 16): XLA's figure again.
#[test]
fn tpu_vmem_limit_without_the_chip() {
    let (spaces, total, _) = vmem_module(None);
    assert_eq!(spaces[1], (1, 117_440_512, false));
    assert_eq!(total, 220_885_036);
}

/// `tests/tpu_hbm_start_order/module.txt` read alone as v5e: libtpu keeps a
/// loop-carried buffer's HBM chunk through the time holes between its values,
/// and fits a buffer into a gap that held chunks before only up to their
/// highest end; HBM is XLA's figure, and exact (7.7 MB short without the
/// first rule, one 16 KiB slot short without the second).
#[test]
fn tpu_hbm_start_order_rules() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tpu_hbm_start_order/module.txt");
    let options = hlomem::AnalyzeOptions {
        tpu_version: Some(TpuVersion::V5e),
        ..Default::default()
    };
    let report = hlomem::analyze_paths(std::slice::from_ref(&path), options);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let hbm = report.modules[0]
        .memory
        .by_space
        .iter()
        .find(|s| s.color == 0)
        .map(|s| (s.bytes, s.exact));
    // XLA's `-buffer-assignment.txt` (tests/tpu_hbm_start_order/README.md).
    assert_eq!(hbm, Some((488_649_216, true)));
}

/// `tests/tpu_sparsecore_update/module.txt` read alone as v6e: libtpu 0.0.52
/// offloads a gather to the SparseCore as an operand-less `async-start` whose
/// `async-update` hands it the operands, and places the offload's buffers by
/// rules hlomem does not know. Its HBM figure is not XLA's (the report beside
/// the module, `buffer-assignment.txt`), so it must not be called exact: the
/// default space and the total are about, and the estimate names the update.
#[test]
fn tpu_sparsecore_operands_at_update_are_about() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tpu_sparsecore_update");
    let options = hlomem::AnalyzeOptions {
        tpu_version: Some(TpuVersion::V6e),
        ..Default::default()
    };
    let report = hlomem::analyze_paths(&[dir.join("module.txt")], options);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let memory = &report.modules[0].memory;
    // XLA's HBM: the allocations of the default space (XLA writes no color).
    let xla_report = std::fs::read_to_string(dir.join("buffer-assignment.txt")).unwrap();
    let xla_hbm: u64 = xla_report
        .lines()
        .filter(|l| l.starts_with("allocation ") && !l.contains(", color "))
        .map(|l| {
            let size = l
                .split(": size ")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap();
            size.parse::<u64>().unwrap()
        })
        .sum();
    let hbm = memory.by_space.iter().find(|s| s.color == 0).unwrap();
    assert_ne!(hbm.bytes, xla_hbm, "hlomem found the rules: make it exact");
    assert!(!hbm.exact && !memory.total_exact, "{:?}", memory.by_space);
    // Other reasons may join it (the temp block's piece order), never replace it.
    let offload = hlomem::analysis::DeviceEstimate::OperandsAtUpdate {
        updates: vec!["gather_offload_async_start.update".to_string()],
    };
    assert!(
        memory.device_estimates.contains(&offload),
        "{:?}",
        memory.device_estimates
    );
}

/// An `async-update` in XLA's form passes its one operand on, same shape;
/// libtpu 0.0.52's SparseCore offloads start with no operands and hand them
/// over at an update of another shape, where libtpu places buffers by rules
/// of its own: device memory is then an estimate, and says which update.
#[test]
fn async_update_that_hands_operands_makes_device_memory_about() {
    let module = |start: &str, update: &str| {
        hlomem::parse_text(
            "test_after_optimizations.txt",
            format!(
            "HloModule m, is_scheduled=true\n\n\
             %wrapped (v0: f32[1024]) -> f32[1024] {{\n  %v0 = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             ROOT %n = f32[1024]{{0:T(1024)}} negate(%v0)\n}}, execution_thread=\"sparsecore\"\n\n\
             ENTRY %e (p: f32[1024]) -> f32[1024] {{\n  %p = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             %start = {start}, async_execution_thread=\"sparsecore\", calls=%wrapped\n  \
             %update = {update}\n  \
             ROOT %done = f32[1024]{{0:T(1024)}} async-done(%update)\n}}\n"
            ),
        )
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
    };
    let xla_form = "((f32[1024]{0:T(1024)}), f32[1024]{0:T(1024)})";
    let m = module(
        &format!("{xla_form} async-start(%p)"),
        &format!("{xla_form} async-update(%start)"),
    );
    let totals = hlomem::analysis::analyze(&m, &hlomem::chip::Target::detect(&m)).totals;
    assert!(totals.device_estimates.is_empty(), "{totals:?}");
    assert!(totals.by_space.iter().all(|s| s.color != 0 || s.exact));
    let m = module(
        "((), (), (s32[16]{0:T(1024)})) async-start()",
        "((f32[1024]{0:T(1024)}), f32[1024]{0:T(1024)}, (s32[16]{0:T(1024)})) \
         async-update(%start, %p)",
    );
    let totals = hlomem::analysis::analyze(&m, &hlomem::chip::Target::detect(&m)).totals;
    assert_eq!(
        totals.device_estimates,
        vec![hlomem::analysis::DeviceEstimate::OperandsAtUpdate {
            updates: vec!["update".to_string()]
        }]
    );
    assert!(totals.by_space.iter().any(|s| s.color == 0 && !s.exact));
    assert!(!totals.total_exact);
}

/// XLA's HBM bytes (color 0) from a `-buffer-assignment.txt`: the sizes of
/// its allocations whose header names no other color.
fn xla_hbm_bytes(report: &Path) -> u64 {
    std::fs::read_to_string(report)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("allocation ") && !l.contains(", color "))
        .map(|l| {
            let size = l.split("size ").nth(1).unwrap().split(',').next().unwrap();
            size.trim().parse::<u64>().unwrap()
        })
        .sum()
}

/// `tests/tpu_libtpu52`: two holdout modules libtpu 0.0.52 compiled for v6e
/// and v5p. Its HBM scratch block joins pieces (heap, tuple tables) in an
/// order hlomem does not know, which on v6e puts a 32-byte table last where
/// XLA's order puts a 64-byte one: HBM is "about", and XLA's figure lies in
/// the range given. The v5p module has no async copy (no `dma_priority`): its
/// fusions' backend configs tell the newer libtpu, whose rule keeps five
/// scalars out of an output's allocation (16 KiB short without it).
#[test]
fn tpu_libtpu52_hbm_is_exact_only_where_known() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tpu_libtpu52");
    for case in ["v6e_grad_accum_scan", "v5p_scan_unroll_nested_carry"] {
        let dir = root.join(case);
        let prefix = "module_0000.jit_f.cl_1014260217.after_optimizations";
        let path = dir.join(format!("{prefix}.txt"));
        let report = hlomem::analyze_paths(std::slice::from_ref(&path), Default::default());
        assert!(report.errors.is_empty(), "{case}: {:?}", report.errors);
        let module = &report.modules[0];
        assert!(module.target.newer_libtpu, "{case}");
        let memory = &module.memory;
        let hbm = memory.by_space.iter().find(|s| s.color == 0).unwrap();
        let xla = xla_hbm_bytes(&dir.join(format!("{prefix}-buffer-assignment.txt")));
        let order = memory.device_estimates.iter().find_map(|e| match e {
            hlomem::analysis::DeviceEstimate::PieceOrder(o) => Some(*o),
            _ => None,
        });
        if case.starts_with("v5p") {
            // XLA's order ends with the heap here, as libtpu's: known, and
            // exact once the scalars' rule applies.
            assert_eq!((hbm.bytes, hbm.exact, order), (xla, true, None), "{case}");
            continue;
        }
        let order = order.unwrap_or_else(|| panic!("{case}: no piece-order estimate"));
        assert!(!hbm.exact, "{case}");
        let rest = hbm.bytes - memory.temp_bytes;
        assert!(
            (rest + order.smallest..=rest + order.largest).contains(&xla),
            "{case}: XLA's HBM {xla} outside {}..={}",
            rest + order.smallest,
            rest + order.largest
        );
    }
}

/// Every format says "about" on the figures an estimate leaves unknown, not
/// only the text: the markdown table and the GitHub notice of the SparseCore
/// offload module (its temp block's contents and live peak are libtpu's).
#[test]
fn markdown_and_github_say_about_where_the_text_does() {
    let file = "tests/tpu_sparsecore_update/module.txt";
    let (code, markdown, _) =
        crate::support::run_hlomem(&["analyze", file, "--tpu", "v6e", "--format", "markdown"]);
    assert_eq!(code, Some(0));
    let row = markdown
        .lines()
        .find(|l| l.starts_with("| about"))
        .unwrap_or_else(|| panic!("no figures row: {markdown}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    // | total | arguments | outputs | aliased | temp | live peak |
    assert!(cells[5].starts_with("about "), "temp: {row}");
    assert!(cells[6].starts_with("about "), "live peak: {row}");
    assert!(!cells[2].starts_with("about"), "arguments are known: {row}");
    // The sentence on why what must fit is above the live peak too.
    assert!(
        markdown.contains("what must fit (about ") && markdown.contains("the live peak (about "),
        "{markdown}"
    );
    let (code, github, _) =
        crate::support::run_hlomem(&["analyze", file, "--tpu", "v6e", "--format", "github"]);
    assert_eq!(code, Some(0));
    assert!(github.contains(", temp about "), "{github}");
}
