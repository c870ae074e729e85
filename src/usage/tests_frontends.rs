//! The usage report of TensorFlow and PyTorch/XLA modules: parameters one
//! row each (no pytree to group them by), and what the source lines say.

use super::*;

fn usage(text: &str) -> PeakUsage {
    let module = crate::parse_text("t_cpu_after_optimizations.txt", text)
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let model = crate::analysis::analyze(&module, &crate::chip::Target::detect(&module));
    peak_usage(&module, &model)
}

const OPS_PY: &str = "/v/lib/python3.11/site-packages/tensorflow/python/framework/ops.py";

/// `a + b` as TensorFlow writes it: every parameter `XLA_Args`, every op at
/// TensorFlow's own `ops.py:1221`; `frames` adds the stack-frame tables
/// and points the add at them.
fn tf_add(frames: bool) -> String {
    let (tables, frame) = if frames {
        (
            format!(
                "FileNames\n1 \"{OPS_PY}\"\n2 \"/home/me/train.py\"\n\n\
                 FunctionNames\n1 \"op_dispatch\"\n2 \"step\"\n\n\
                 FileLocations\n1 {{file_name_id=1 function_name_id=1 line=1221 end_line=1221 column=1 end_column=2}}\n\
                 2 {{file_name_id=2 function_name_id=2 line=12 end_line=12 column=1 end_column=2}}\n\n\
                 StackFrames\n1 {{file_location_id=2 parent_frame_id=1}}\n2 {{file_location_id=1 parent_frame_id=2}}\n\n"
            ),
            " stack_frame_id=2",
        )
    } else {
        (String::new(), "")
    };
    format!(
        "HloModule a_inference_step_1__XlaMustCompile_true_.1, is_scheduled=true\n\n{tables}\
         ENTRY %e (arg0.1: f32[1024], arg1.1: f32[1024]) -> f32[1024] {{\n  \
         %arg0.1 = f32[1024]{{0}} parameter(0), metadata={{op_name=\"XLA_Args\"}}\n  \
         %arg1.1 = f32[1024]{{0}} parameter(1), metadata={{op_name=\"XLA_Args\"}}\n  \
         ROOT %add = f32[1024]{{0}} add(%arg0.1, %arg1.1), metadata={{op_type=\"AddV2\" op_name=\"add\" \
         source_file=\"{OPS_PY}\" source_line=1221{frame}}}\n}}\n"
    )
}

#[test]
fn tensorflow_parameters_are_one_row_each() {
    let u = usage(&tf_add(false));
    assert_eq!(u.frontend.name, crate::frontend::FrontendName::Tensorflow);
    assert!(u
        .parameters
        .iter()
        .all(|p| p.argument.is_none() && p.path.is_none()));
    assert_eq!(u.parameters[1].label(), "arg1.1");
    let places: Vec<&str> = u.by_source.iter().map(|g| g.place.as_str()).collect();
    assert!(places.contains(&"parameter `arg0.1`"), "{places:?}");
    assert!(places.contains(&"parameter `arg1.1`"), "{places:?}");
    assert!(!places.iter().any(|p| p.contains("XLA_Args")), "{places:?}");
}

#[test]
fn tensorflow_without_stack_frames_says_its_lines_are_its_own() {
    let u = usage(&tf_add(false));
    let Some(source::SourceHint::TensorflowOwnLine { location }) = &u.source_hint else {
        panic!("{:?}", u.source_hint)
    };
    assert_eq!(location, &format!("{OPS_PY}:1221"));
    assert!(u
        .source_hint
        .unwrap()
        .message()
        .contains("tensorflow/python/framework/ops.py:1221"));
}

#[test]
fn tensorflow_stack_frames_give_the_users_own_frame() {
    let u = usage(&tf_add(true));
    let add = u
        .by_source
        .iter()
        .find(|g| g.source.is_some())
        .expect("the add's group");
    assert_eq!(add.caller.as_deref(), Some("/home/me/train.py:12"));
    assert!(add.place.ends_with("← train.py:12 (step)"), "{}", add.place);
    assert_eq!(u.source_hint, None, "the user's line is known");
}

const PT_ADD: &str = "HloModule SyncTensorsGraph.8, is_scheduled=true\n\n\
    ENTRY %e (p0.2: f32[1024], p1.3: f32[1024]) -> (f32[1024]) {\n  \
    %p0.2 = f32[1024]{0} parameter(0)PARAM\n  %p1.3 = f32[1024]{0} parameter(1)PARAM\n  \
    %add = f32[1024]{0} add(%p1.3, %p0.2)OP\n  ROOT %tuple.7 = (f32[1024]{0}) tuple(%add)\n}\n";

#[test]
fn pytorch_xla_without_lines_names_the_flags() {
    let plain = usage(&PT_ADD.replace("PARAM", "").replace("OP", ""));
    assert_eq!(
        plain.source_hint,
        Some(source::SourceHint::PytorchXlaDebugOff)
    );
    assert!(plain
        .source_hint
        .unwrap()
        .message()
        .contains("XLA_IR_DEBUG=1 XLA_HLO_DEBUG=1"));
    // With XLA_HLO_DEBUG=1: `xla__device_data` parameters, lines, no hint,
    // and still one row per parameter (no pytree path).
    let debug = usage(
        &PT_ADD
            .replace(
                "PARAM",
                ", metadata={op_type=\"xla__device_data\" op_name=\"xla__device_data\" \
                 source_file=\"/home/me/pt_add.py\" source_line=5}",
            )
            .replace(
                "OP",
                ", metadata={op_type=\"aten__add\" op_name=\"aten__add.1/aten__add\" \
                 source_file=\"/home/me/pt_add.py\" source_line=5}",
            ),
    );
    assert_eq!(debug.source_hint, None);
    let places: Vec<&str> = debug.by_source.iter().map(|g| g.place.as_str()).collect();
    assert!(places.contains(&"parameter `p0.2`"), "{places:?}");
    assert!(places.contains(&"pt_add.py:5"), "{places:?}");
}
