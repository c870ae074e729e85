//! Hostile and odd inputs: a clear error naming the file (and line and column
//! where it applies), exit code 2, no partial report, and never a panic.

use crate::support::run_hlomem as hlomem;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hlomem-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const SAMPLE: &str =
    "samples/mlp_train_donate/dump/module_0000.jit_sgd_step.cpu_after_optimizations.txt";

/// Cut the sample at many places, each kind of boundary among them: every
/// result is a module or an error with a position, never a panic.
#[test]
#[ignore = "slow (a minute or more in a debug build): .ci/run runs it, `cargo test --test it -- --ignored slow_`"]
fn slow_truncated_anywhere() {
    let text = std::fs::read_to_string(SAMPLE).unwrap();
    let mut cuts: Vec<usize> = (0..text.len()).step_by(97).collect();
    // Just before and after every line break, brace and comma of the first lines.
    for (i, c) in text.char_indices().take(20_000) {
        if matches!(c, '\n' | '{' | '}' | ',' | '(' | ')' | '=' | '"') {
            cuts.extend([i, i + 1]);
        }
    }
    for cut in cuts {
        let Some(prefix) = text.get(..cut) else {
            continue;
        };
        match hlomem::parse_text("cut.txt", prefix) {
            Ok(module) => {
                let model =
                    hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
                let _ = hlomem::pipeline::report_module(&module, &model);
            }
            Err(e) => assert!(e.location().is_some(), "cut at {cut}: {e}"),
        }
    }
}

/// A constant whose literal is one line of 100 MB.
#[test]
#[ignore = "slow (a minute or more in a debug build): .ci/run runs it, `cargo test --test it -- --ignored slow_`"]
fn slow_a_line_of_100_megabytes() {
    let mut text = String::from(
        "HloModule m\n\nENTRY %e () -> f32[25000000] {\n  ROOT %c = f32[25000000]{0} constant({",
    );
    let chunk = "1, 2, 3, 4, 5, 6, 7, 8, 9, 0, ";
    while text.len() < 100_000_000 {
        text.push_str(chunk);
    }
    text.push_str("1})\n}\n");
    let module = hlomem::parse_text("big.txt", text).expect("a long literal is still HLO");
    let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
    assert_eq!(model.totals.output_bytes, 100_000_000);
}

#[test]
fn empty_unreadable_and_looping_folders() {
    let empty = scratch("empty");
    let (code, out, err) = hlomem(&["analyze", empty.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(
        err.contains(empty.to_str().unwrap()) && err.contains("holds no HLO module"),
        "{err}"
    );

    // A symlink loop inside a dump: an error naming it, the module still analyzed.
    let looping = scratch("loop");
    std::fs::copy(
        "samples/add_nodonate/dump/module_0000.jit_fn.cpu_after_optimizations.txt",
        looping.join("module_0000.jit_fn.cpu_after_optimizations.txt"),
    )
    .unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&looping, looping.join("again")).unwrap();
    let (code, out, err) = hlomem(&["analyze", "--format", "json", looping.to_str().unwrap()]);
    assert_eq!(code, Some(if cfg!(unix) { 2 } else { 0 }), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["modules"].as_array().unwrap().len(), 1);
    #[cfg(unix)]
    std::fs::remove_file(looping.join("again")).unwrap();

    // Unrelated files in a dump folder are not modules.
    std::fs::write(looping.join("notes.md"), "# not HLO").unwrap();
    std::fs::write(
        looping.join("module_0000.jit_fn.cpu_after_optimizations.ll"),
        "; llvm",
    )
    .unwrap();
    let (code, _, _) = hlomem(&["analyze", looping.to_str().unwrap()]);
    assert_eq!(code, Some(0));

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let locked = looping.join("module_0001.jit_g.cpu_after_optimizations.txt");
        std::fs::write(&locked, "HloModule g").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        // Root reads anything; only check the error path when the file is really unreadable.
        if std::fs::read(&locked).is_err() {
            let (code, _, err) = hlomem(&["analyze", looping.to_str().unwrap()]);
            assert_eq!(code, Some(2));
            assert!(err.contains("module_0001.jit_g"), "{err}");
        }
    }
    std::fs::remove_dir_all(&looping).ok();
    std::fs::remove_dir_all(&empty).ok();
}

/// Modules that parse but that XLA's verifier rejects are refused with a
/// position, never analyzed into numbers.
#[test]
fn odd_modules_are_refused_with_a_position() {
    let odd = [
        // A computation that calls itself.
        "HloModule m\n\n%f (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %c = f32[] call(%x), to_apply=%f\n}\n\n\
         ENTRY %e (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  ROOT %r = f32[] call(%p), to_apply=%f\n}\n",
        // A while whose body is its condition and which has no init.
        "HloModule m\n\n%c (s: f32[]) -> pred[] {\n  %s = f32[] parameter(0)\n  ROOT %t = pred[] compare(%s, %s), direction=LT\n}\n\n\
         ENTRY %e () -> f32[] {\n  ROOT %w = f32[] while(), condition=%c, body=%c\n}\n",
        // Wrong arity and out-of-range tuple indices.
        "HloModule m\n\nENTRY %e (p: (f32[], s32[])) -> f32[] {\n  %p = (f32[], s32[]) parameter(0)\n  \
         %g = f32[] get-tuple-element(%p), index=7\n  %a = f32[] add(%g)\n  %d = f32[8]{0} dynamic-update-slice()\n  \
         ROOT %s = f32[] subtract(%a, %a, %a, %a)\n}\n",
        // An operand used before it is defined in the schedule, and no ROOT.
        "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  %b = f32[4]{0} negate(%a)\n  \
         %a = f32[4]{0} exponential(%p)\n  %p = f32[4]{0} parameter(0)\n}\n",
        // Aliases and donors that point nowhere.
        "HloModule m, input_output_alias={ {5}: (9, {3}, may-alias) }, buffer_donor={ (7, {1}) }\n\n\
         ENTRY %e (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p)\n}\n",
        // A conditional without branches, a fusion of the entry itself.
        "HloModule m\n\nENTRY %e (p: pred[]) -> f32[] {\n  %p = pred[] parameter(0)\n  %c = f32[] conditional(%p)\n  \
         ROOT %f = f32[] fusion(%c), kind=kLoop, calls=%e\n}\n",
    ];
    for text in odd {
        let error = hlomem::parse_text("odd.txt", text).expect_err(text);
        assert!(error.location().is_some(), "{error}");
    }
}

/// Sizes near 2^64: the pipeline refuses the module (its sums would pass
/// 2^64), and the analysis called directly on it does not panic either.
#[test]
fn absurd_sizes_are_refused_and_never_panic() {
    let text = "HloModule m, is_scheduled=true\n\nENTRY %e (a: u8[9223372036854775807], b: u8[9223372036854775807]) \
                -> (u8[9223372036854775807], u8[9223372036854775807]) {\n  \
                %a = u8[9223372036854775807]{0} parameter(0)\n  %b = u8[9223372036854775807]{0} parameter(1)\n  \
                %x = u8[9223372036854775807]{0} negate(%a)\n  %y = u8[9223372036854775807]{0} negate(%b)\n  \
                ROOT %t = (u8[9223372036854775807]{0}, u8[9223372036854775807]{0}) tuple(%x, %y)\n}\n";
    let dir = std::env::temp_dir().join(format!("hlomem-absurd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("huge.txt"), text).unwrap();
    let refused = hlomem::load_and_model(&dir.join("huge.txt"), None, None);
    assert!(refused.is_err_and(|e| e.location().is_some()));
    std::fs::remove_dir_all(&dir).ok();
    let module = hlomem::parse_text("huge.txt", text).unwrap();
    let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
    let report = hlomem::pipeline::report_module(&module, &model);
    let report = hlomem::Report {
        modules: vec![report],
        errors: vec![],
    };
    for format in [
        hlomem::render::AnalyzeFormat::Text,
        hlomem::render::AnalyzeFormat::Html,
    ] {
        hlomem::render::render(&report, format, Default::default(), &mut std::io::sink()).unwrap();
    }
    let msg = hlomem::oom::read(
        "Peak buffers:\n\tBuffer 1:\n\t\tSize: 16.00EiB\n\t\tShape: u8[1]\n\t\t===\n\tBuffer 2:\n\t\tSize: 16.00EiB\n\t\tShape: u8[1]\n",
    );
    if let Some(msg) = msg {
        let _ = hlomem::oom::explain::explain(&msg, None);
    }
}

/// A shape whose TPU tile padding passes 2^64 bytes is an input error naming
/// the line, never a saturated total.
#[test]
fn tpu_padding_past_64_bits_is_an_input_error() {
    let text = "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[256,256]) -> f32[256,256] {\n  \
                ROOT %p = f32[256,256]{1,0:T(18446744073709551615,128)} parameter(0)\n}\n";
    let dir = std::env::temp_dir().join(format!("hlomem-tpu-pad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("m.txt");
    std::fs::write(&path, text).unwrap();
    let report = hlomem::analyze_paths(&[path], hlomem::AnalyzeOptions::default());
    assert!(report.modules.is_empty());
    let message = report.errors[0].error.render(false);
    assert!(
        message.contains("larger than 2^64 bytes once padded"),
        "{message}"
    );
    assert!(message.contains("m.txt:4:"), "{message}");
}
