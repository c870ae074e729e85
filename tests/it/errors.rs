//! Broken inputs: each gets a clear message naming file, line and column, and
//! nothing panics. Snapshots hold the exact text a user sees.

use std::path::Path;

use crate::support::{relative, snapshot_settings};

#[test]
fn bad_inputs_render_rustc_style_errors() {
    let mut settings = snapshot_settings();
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| {
        insta::glob!("../bad_inputs", "*.*", |path| {
            let path = relative(path);
            let error = hlomem::load_module(&path).expect_err("a bad input must not parse");
            let (file, line, column) = match error.location() {
                Some(location) => location,
                None => match &error {
                    hlomem::Error::Encoding { file, offset } => {
                        let (line, column) = file.line_col(*offset);
                        (file.path.as_path(), line, column)
                    }
                    other => panic!("{}: error without a position: {other}", path.display()),
                },
            };
            assert_eq!(file, path.as_path());
            assert!(line >= 1 && column >= 1);
            insta::assert_snapshot!("error", error.render(false));
        });
    });
}

/// 10,000 nested tuples: refused with a message, not a stack overflow.
#[test]
fn deeply_nested_shapes_are_refused() {
    let depth = 10_000;
    let shape = format!("{}f32[]{}", "(".repeat(depth), ")".repeat(depth));
    let text =
        format!("HloModule m\n\nENTRY %e () -> f32[] {{\n  ROOT %p = {shape} parameter(0)\n}}\n");
    let error = hlomem::parse_text("deep.txt", text).expect_err("too deep");
    let (_, line, _) = error.location().expect("points at a line");
    assert_eq!(line, 4);
    assert!(error.to_string().contains("nest"), "{error}");
}

#[test]
fn deeply_nested_literals_are_refused() {
    let depth = 10_000;
    let literal = format!("{}1{}", "{".repeat(depth), "}".repeat(depth));
    let text = format!("HloModule m\n\nENTRY %e () -> f32[1] {{\n  ROOT %c = f32[1]{{0}} constant({literal})\n}}\n");
    let error = hlomem::parse_text("deep.txt", text).expect_err("too deep");
    assert!(error.location().is_some());
}

#[test]
fn missing_files_are_io_errors() {
    let error = hlomem::load_module(Path::new("no/such/file.txt")).unwrap_err();
    assert!(matches!(error, hlomem::Error::Io { .. }));
    assert!(error.render(false).contains("no/such/file.txt"));
}

/// Fusion bodies and the other computations are resolved side by side; of
/// two unknown names, one in each, the one first in the file is reported.
#[test]
fn of_two_unknown_names_the_first_in_the_file_is_reported() {
    let fused = "%fused (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n  ROOT %m = f32[2]{0} map(%p), dimensions={0}, to_apply=%nowhere\n}\n";
    let entry = "ENTRY %e (a: f32[2]) -> f32[2] {\n  %a = f32[2]{0} parameter(0)\n  ROOT %f = f32[2]{0} fusion(%nothing), kind=kLoop, calls=%fused\n}\n";
    let cases = [
        (
            format!("HloModule m\n\n{fused}\n{entry}"),
            5,
            "unknown computation `%nowhere`",
        ),
        (
            format!("HloModule m\n\n{entry}\n{fused}"),
            5,
            "unknown instruction `%nothing`",
        ),
    ];
    for (text, line, message) in cases {
        let error = hlomem::parse_text_on_demand(Path::new("two.txt"), text).expect_err("refused");
        assert!(error.to_string().contains(message), "{error}");
        assert_eq!(error.location().expect("a position").1, line, "{error}");
    }
}
