//! Real out-of-memory cases from public issues (`tests/oom_cases/`, one file
//! per case): the message as pasted, what the thread says the situation was,
//! and what the maintainers (or, where noted, the reporter) found fixed it.
//! The ground truth is the thread, never hlomem's own output.
//!
//! A file is `# case:`, `# source:` (the issue), `# situation:`, `# fix:` (the
//! fix in words, and who gave it), `# fix-kinds:` (the fix as advice kinds,
//! below), `# expect: key=value ...` (what the text itself shows: the device,
//! the framework, the application, the program), then the message.
//!
//! The score: the explanation of the text's first error puts the fix first
//! or second, or says why the message does not allow knowing (two readings
//! and how to tell them apart). It must be at least 90%.

use hlomem::oom::{self, advice::Advice, explain::Explanation};

struct Case {
    name: String,
    source: String,
    fix_kinds: Vec<String>,
    /// What the thread says the setup was: `device=` and `framework=`.
    setup: Vec<(String, String)>,
    expect: Vec<(String, String)>,
    text: String,
}

fn pairs(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .map(|p| {
            let (k, v) = p.split_once('=').expect("key=value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn cases() -> Vec<Case> {
    crate::support::text_files("tests/oom_cases")
        .into_iter()
        .map(|path| {
            let content = std::fs::read_to_string(&path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let header = |key: &str| {
                content
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
                    .unwrap_or_else(|| panic!("{name}: no `# {key}:`"))
                    .trim()
                    .to_string()
            };
            for key in ["case", "situation", "fix"] {
                assert!(!header(key).is_empty(), "{name}: empty `# {key}:`");
            }
            let source = header("source");
            assert!(
                source.starts_with("https://github.com/") && source.contains("/issues/"),
                "{name}: the source is an issue's address"
            );
            let fix_kinds: Vec<String> = header("fix-kinds")
                .split(',')
                .map(|k| k.trim().to_string())
                .collect();
            let expect = pairs(&header("expect"));
            let setup = pairs(&header("setup"));
            let text: String = content
                .lines()
                .filter(|l| !l.starts_with("# "))
                .map(|l| format!("{l}\n"))
                .collect();
            Case {
                name,
                source,
                fix_kinds,
                setup,
                expect,
                text,
            }
        })
        .collect()
}

/// Whether `advice` is the fix a thread names with `kind`.
fn is_fix(kind: &str, advice: &Advice) -> bool {
    match kind {
        "smaller-batch" => matches!(
            advice,
            Advice::SmallerBatch { .. } | Advice::SmallerBatchUnmeasured
        ),
        "more-memory" => matches!(advice, Advice::MoreMemory { .. }),
        // Spreading the program over devices is said by `MoreMemory` too.
        "shard" => matches!(advice, Advice::Shard { .. } | Advice::MoreMemory { .. }),
        "raise-fraction" => matches!(advice, Advice::PoolFraction { raise: true, .. }),
        "lower-fraction" => matches!(advice, Advice::PoolFraction { raise: false, .. }),
        // A change of the pool's setting either way (preallocation, its fraction).
        "pool" => matches!(advice, Advice::PoolFraction { .. }),
        "other-processes" => matches!(advice, Advice::OtherProcesses),
        "kernel-blocks" => matches!(advice, Advice::KernelBlockSizes { .. }),
        "vmem-limit" => matches!(advice, Advice::RaiseVmemLimit { .. }),
        "padding" => matches!(advice, Advice::ReduceTilePadding { .. }),
        "remat" => matches!(
            advice,
            Advice::Rematerialize { .. } | Advice::RematAlreadyOn { .. }
        ),
        "donate" => matches!(
            advice,
            Advice::DonateArgument { .. } | Advice::DonateMatchingInput { .. }
        ),
        "lower-precision" => matches!(
            advice,
            Advice::UseFloat32 { .. } | Advice::LowerPrecision { .. }
        ),
        "host-memory" => matches!(advice, Advice::HostMemory { .. }),
        "xla-bug" => matches!(advice, Advice::ReportXlaBug),
        "check-shapes" => matches!(advice, Advice::CheckShapes { .. }),
        "free-arrays" => matches!(advice, Advice::FreeLiveArrays),
        "disable-command-buffers" => matches!(advice, Advice::DisableCommandBuffers),
        // A fix no advice names (another model file, a library upgrade).
        "other" => false,
        other => panic!("unknown fix kind {other}"),
    }
}

/// What the explanation says for one expectation key.
fn value(e: &Explanation, key: &str) -> String {
    let s = &e.situation;
    let json = |v: serde_json::Value| {
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v["kind"].as_str().unwrap_or("").to_string())
    };
    match key {
        "device" => json(serde_json::to_value(s.placement.device).unwrap()),
        "space" => json(serde_json::to_value(s.placement.space).unwrap()),
        "framework" => s
            .framework()
            .map_or("none".into(), |f| json(serde_json::to_value(f).unwrap())),
        "app" => s
            .app()
            .map_or("none".into(), |a| json(serde_json::to_value(a).unwrap())),
        "workload" => json(serde_json::to_value(&s.workload).unwrap()),
        "verdict" => json(serde_json::to_value(&e.verdict).unwrap()),
        other => panic!("unknown expectation key {other}"),
    }
}

struct Scored {
    name: String,
    top_two: bool,
    undecided: bool,
    line: String,
}

fn score(case: &Case) -> Scored {
    let log = oom::read_log(&case.text);
    let lead =
        oom::lead_index(&log.messages).unwrap_or_else(|| panic!("{}: not recognized", case.name));
    let all = oom::explain_log(&log, None);
    let e = &all[lead];
    for (key, want) in &case.expect {
        assert_eq!(
            &value(e, key),
            want,
            "{} ({}): {key}",
            case.name,
            case.source
        );
    }
    // What the text names is never other than what the thread says ran it.
    for key in ["device", "framework"] {
        let truth = case
            .setup
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str());
        let said = value(e, key);
        assert!(
            matches!(said.as_str(), "unknown" | "none")
                || truth == Some("unknown")
                || truth == Some(said.as_str()),
            "{} ({}): the explanation says {key} {said}, the thread {truth:?}",
            case.name,
            case.source
        );
    }
    let first: Vec<&Advice> = e.advice.iter().take(2).map(|r| &r.advice).collect();
    let top_two = case
        .fix_kinds
        .iter()
        .any(|k| first.iter().any(|a| is_fix(k, a)));
    let undecided = e.undecided.is_some();
    let kinds: Vec<String> = first.iter().map(|a| a.kind()).collect();
    let mark = match (top_two, undecided) {
        (true, _) => "fix in the first two",
        (false, true) => "says what the message cannot tell",
        (false, false) => "MISSED",
    };
    Scored {
        name: case.name.clone(),
        top_two,
        undecided,
        line: format!(
            "{:<40} {mark}: fix {} / first two {}",
            case.name,
            case.fix_kinds.join(","),
            kinds.join(",")
        ),
    }
}

#[test]
fn the_maintainers_fix_comes_first_or_the_answer_says_why_it_cannot() {
    let cases = cases();
    let scored: Vec<Scored> = cases.iter().map(score).collect();
    let report: String = scored.iter().map(|s| format!("{}\n", s.line)).collect();
    let n = scored.len() as f64;
    let strict = scored.iter().filter(|s| s.top_two).count();
    let either = scored.iter().filter(|s| s.top_two || s.undecided).count();
    println!(
        "{report}fix in the first two: {strict}/{}; or says why not: {either}/{}",
        scored.len(),
        scored.len()
    );
    assert!(
        either as f64 >= 0.9 * n,
        "only {either} of {} cases:\n{report}",
        scored.len()
    );
    // The fix itself, not only the caveat, in most cases.
    assert!(
        strict as f64 >= 0.75 * n,
        "the fix comes first or second in only {strict} of {} cases:\n{report}",
        scored.len()
    );
    let missed: Vec<&str> = scored
        .iter()
        .filter(|s| !s.top_two && !s.undecided)
        .map(|s| s.name.as_str())
        .collect();
    println!("missed: {missed:?}");
    assert!(cases.len() >= 40, "the catalog has {} cases", cases.len());
}

/// Cases from every kind of setup: GPU, TPU, host memory, PyTorch/XLA, TensorFlow.
#[test]
fn the_cases_cover_each_device_and_framework() {
    let cases = cases();
    let has = |key: &str, value: &str| {
        cases
            .iter()
            .filter(|c| c.setup.iter().any(|(k, v)| k == key && v == value))
            .count()
    };
    for (key, value, least) in [
        ("device", "gpu", 10),
        ("device", "tpu", 10),
        ("device", "host", 3),
        ("framework", "pytorch-xla", 3),
        ("framework", "tensorflow", 5),
        ("framework", "jax", 10),
    ] {
        assert!(
            has(key, value) >= least,
            "fewer than {least} cases with {key}={value}"
        );
    }
}
