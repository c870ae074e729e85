//! Each finding's words on small hand-written TensorFlow, PyTorch/XLA and
//! unknown modules (named and written as those front-ends write them): the
//! fix in that front-end's terms, no JAX API, nothing to set where the
//! runtime chose the aliasing. Real dumps of both are the samples
//! `samples/tf_*` and `samples/pt_*`.

use super::*;

fn findings(text: &str) -> Vec<Finding> {
    let module = crate::parse_text("t_cpu_after_optimizations.txt", text)
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let model = crate::analysis::analyze(&module, &crate::chip::Target::detect(&module));
    run(&module, &model, &crate::usage::peak_usage(&module, &model))
}

fn only(f: &[Finding], code: &str) -> Finding {
    let matching: Vec<&Finding> = f.iter().filter(|f| f.code == code).collect();
    assert_eq!(matching.len(), 1, "{code}: {f:?}");
    matching[0].clone()
}

/// What a TensorFlow or PyTorch/XLA user must never be told (lowercase).
fn jax_words() -> impl Iterator<Item = &'static str> {
    include_str!("../../tests/jax_words.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn assert_no_jax(f: &Finding) {
    let words = format!(
        "{}\n{}\n{}",
        f.message(),
        f.fix(),
        f.evidence.details().join("\n")
    )
    .to_ascii_lowercase();
    for w in jax_words() {
        assert!(!words.contains(w), "{} names `{w}`:\n{words}", f.code);
    }
}

const TF_NAME: &str = "a_inference_step_18__XlaMustCompile_true_config_proto_1_executor_type_2_.1";
const TF_OPS_PY: &str =
    "source_file=\"/v/lib/python3.11/site-packages/tensorflow/python/framework/ops.py\" source_line=1221";

/// `tf.function(jit_compile=True)` of `a + b` (samples/tf_add, smaller).
fn tf_add() -> String {
    format!(
        "HloModule {TF_NAME}, is_scheduled=true\n\n\
         ENTRY %e (arg0.1: f32[1024], arg1.1: f32[1024]) -> f32[1024] {{\n  \
         %arg0.1 = f32[1024]{{0}} parameter(0), metadata={{op_name=\"XLA_Args\"}}\n  \
         %arg1.1 = f32[1024]{{0}} parameter(1), metadata={{op_name=\"XLA_Args\"}}\n  \
         ROOT %add = f32[1024]{{0}} add(%arg0.1, %arg1.1), metadata={{op_type=\"AddV2\" op_name=\"add\" {TF_OPS_PY}}}\n}}\n"
    )
}

/// torch_xla's `c = a + b`: XLA's CPU backend wraps the add in a `call`,
/// and the result is a 1-tuple (samples/pt_add, smaller).
const PT_ADD: &str = "HloModule SyncTensorsGraph.8, is_scheduled=true\n\n\
    %parallel_add.6 (p: f32[1024], p.1: f32[1024]) -> f32[1024] {\n  \
    %p = f32[1024]{0} parameter(0)\n  %p.1 = f32[1024]{0} parameter(1)\n  \
    ROOT %add.6.clone = f32[1024]{0} add(%p, %p.1)\n}\n\n\
    ENTRY %e (p0.2: f32[1024], p1.3: f32[1024]) -> (f32[1024]) {\n  \
    %p0.2 = f32[1024]{0} parameter(0)\n  %p1.3 = f32[1024]{0} parameter(1)\n  \
    %call = f32[1024]{0} call(%p1.3, %p0.2), to_apply=%parallel_add.6\n  \
    ROOT %tuple.7 = (f32[1024]{0}) tuple(%call)\n}\n";

#[test]
fn hm001_on_tensorflow_names_resource_variables() {
    let f = only(&findings(&tf_add()), "HM001");
    assert_eq!(f.frontend, FrontendName::Tensorflow);
    assert_eq!(f.bytes, 4096);
    assert!(
        f.message()
            .starts_with("parameter 0 (`arg0.1`) is not aliased to an output"),
        "{}",
        f.message()
    );
    assert!(
        f.fix().contains("tf.Variable") && f.fix().contains("assign_add"),
        "{}",
        f.fix()
    );
    let p = f.parameter.as_ref().unwrap();
    assert_eq!((p.argument.as_deref(), p.name.as_str()), (None, "arg0.1"));
    assert_no_jax(&f);
}

/// XLA's copy insertion orders a `call`'s read of its operand before what
/// the call's computation defines (`HloOrdering::UsesBeforeValueDefinition`):
/// the add inside the wrapper may write over `p0.2`, so the 1-tuple output
/// could live in its buffer, as the same `a + b` could on TensorFlow.
#[test]
fn hm001_on_pytorch_xla_reads_through_the_call_wrapper() {
    let f = only(&findings(PT_ADD), "HM001");
    assert_eq!(f.frontend, FrontendName::PytorchXla);
    assert_eq!(f.bytes, 4096, "the what-if saves the output's buffer");
    assert_eq!(f.instruction.as_deref(), Some("add.6.clone"));
    assert_eq!(f.output_index.as_deref(), Some(&[0u64][..]));
    assert!(f.fix().contains("a.add_(b)"), "{}", f.fix());
    assert!(
        f.fix().contains("torch_xla._XLAC._set_buffer_donation"),
        "{}",
        f.fix()
    );
    assert_no_jax(&f);
}

#[test]
fn hm001_not_when_the_call_reads_the_parameter_after_the_write() {
    // Inside the wrapper, %late reads p0.2 after the add is written.
    let late = PT_ADD.replace(
        "ROOT %add.6.clone = f32[1024]{0} add(%p, %p.1)\n",
        "ROOT %add.6.clone = f32[1024]{0} add(%p, %p.1)\n  %late = f32[1024]{0} negate(%p.1)\n",
    );
    assert!(!findings(&late).iter().any(|f| f.code == "HM001"));
}

/// pt_mlp's momentum buffer: the new value is a layout-changing copy XLA's
/// CPU backend runs inside `call` (`parallel_copy`), then copies into the
/// aliased buffer.
const PT_COPY_IN_CALL: &str = "HloModule SyncTensorsGraph.257, is_scheduled=true, \
    input_output_alias={ {0}: (0, {}, may-alias) }\n\n\
    %parallel_copy.4 (p: f32[32,32]) -> f32[32,32] {\n  %p = f32[32,32]{0,1} parameter(0)\n  \
    ROOT %copy.4.clone = f32[32,32]{1,0} copy(%p)\n}\n\n\
    ENTRY %e (p0.1: f32[32,32], p1.2: f32[32,32]) -> (f32[32,32], f32[32,32]) {\n  \
    %p0.1 = f32[32,32]{1,0} parameter(0)\n  %p1.2 = f32[32,32]{1,0} parameter(1)\n  \
    %dot = f32[32,32]{1,0} dot(%p1.2, %p1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  \
    %bitcast = f32[32,32]{0,1} bitcast(%dot)\n  \
    %call = f32[32,32]{1,0} call(%bitcast), to_apply=%parallel_copy.4\n  \
    %copy.30 = f32[32,32]{1,0} copy(%call)\n  \
    ROOT %t = (f32[32,32]{1,0}, f32[32,32]{1,0}) tuple(%copy.30, %dot)\n}\n";

#[test]
fn hm003_on_pytorch_xla_names_the_op_inside_the_call_and_sets_nothing() {
    let f = only(&findings(PT_COPY_IN_CALL), "HM003");
    assert_eq!(f.instruction.as_deref(), Some("copy.4.clone"));
    assert!(
        f.message()
            .contains("copy.4.clone (inside call) cannot write its result over its own input"),
        "{}",
        f.message()
    );
    assert!(
        f.message().contains("a tensor torch_xla updates in place"),
        "{}",
        f.message()
    );
    assert!(
        f.fix().starts_with("nothing to set: torch_xla"),
        "{}",
        f.fix()
    );
    assert_eq!(f.severity, Severity::Info, "the runtime chose the aliasing");
    assert_no_jax(&f);
}

/// A Keras step: Adam writes the weight while the backward pass
/// (`gradient_tape/...`) still reads its old value, kept by a copy.
fn tf_training_step() -> String {
    format!(
        "HloModule {TF_NAME}, is_scheduled=true, input_output_alias={{ {{0}}: (0, {{}}, may-alias) }}\n\n\
         ENTRY %e (w: f32[32,32], x: f32[32,32]) -> (f32[32,32], f32[32,32]) {{\n  \
         %w = f32[32,32]{{1,0}} parameter(0), metadata={{op_name=\"XLA_Args\"}}\n  \
         %x = f32[32,32]{{1,0}} parameter(1), metadata={{op_name=\"XLA_Args\"}}\n  \
         %copy.1 = f32[32,32]{{1,0}} copy(%w)\n  \
         %g = f32[32,32]{{1,0}} dot(%x, %x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, \
         metadata={{op_type=\"MatMul\" op_name=\"gradient_tape/dense/MatMul\" {TF_OPS_PY}}}\n  \
         %new = f32[32,32]{{1,0}} subtract(%w, %g), metadata={{op_type=\"AssignSubVariableOp\" \
         op_name=\"adam/AssignSubVariableOp\" {TF_OPS_PY}}}\n  \
         %back = f32[32,32]{{1,0}} dot(%g, %copy.1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, \
         metadata={{op_type=\"MatMul\" op_name=\"gradient_tape/dense/MatMul/MatMul_1\" {TF_OPS_PY}}}\n  \
         ROOT %t = (f32[32,32]{{1,0}}, f32[32,32]{{1,0}}) tuple(%new, %back)\n}}\n"
    )
}

#[test]
fn hm003_on_tensorflow_training_is_expected_and_sets_nothing() {
    let f = only(&findings(&tf_training_step()), "HM003");
    assert!(
        f.message()
            .contains("a resource variable TensorFlow updates in place"),
        "{}",
        f.message()
    );
    assert!(
        f.message().contains("(expected: the backward pass reads"),
        "{}",
        f.message()
    );
    assert!(
        f.fix().starts_with("nothing to set: TensorFlow"),
        "{}",
        f.fix()
    );
    assert_eq!(f.severity, Severity::Info);
    assert_no_jax(&f);
}

#[test]
fn hm002_on_pytorch_xla_says_where_to_cast() {
    let text = "HloModule SyncTensorsGraph.3, is_scheduled=true, buffer_donor={ (0, {}) }\n\n\
        ENTRY %e (p0.1: f32[1024]) -> bf16[1024] {\n  %p0.1 = f32[1024]{0} parameter(0)\n  \
        ROOT %c = bf16[1024]{0} convert(%p0.1)\n}\n";
    let f = only(&findings(text), "HM002");
    assert!(
        f.fix()
            .contains("casting outside the graph torch_xla.sync() compiles"),
        "{}",
        f.fix()
    );
    assert_no_jax(&f);
}

#[test]
fn hm004_in_each_front_ends_words() {
    let body = "ENTRY %e (x: f32[256]) -> (f32[256], f32[256]) {\n  \
        %x = f32[256]{0} parameter(0)\n  %n = f32[256]{0} negate(%x)\n  %c = f32[256]{0} copy(%x)\n  \
        ROOT %t = (f32[256]{0}, f32[256]{0}) tuple(%n, %c)\n}\n";
    let tf = only(
        &findings(&format!("HloModule {TF_NAME}, is_scheduled=true\n\n{body}")),
        "HM004",
    );
    assert!(tf.fix().contains("from the tf.function"), "{}", tf.fix());
    assert!(
        tf.message().contains("parameter 0 (`x`)"),
        "{}",
        tf.message()
    );
    assert_no_jax(&tf);
    let pt = only(
        &findings(&format!(
            "HloModule SyncTensorsGraph.5, is_scheduled=true\n\n{body}"
        )),
        "HM004",
    );
    assert!(pt.fix().contains("clone()"), "{}", pt.fix());
    assert_no_jax(&pt);
    let jax = only(
        &findings(&format!("HloModule jit_f, is_scheduled=true\n\n{body}")),
        "HM004",
    );
    assert!(jax.fix().contains("donate_argnums"), "{}", jax.fix());
}

/// A broadcast made concrete, most of the module's memory.
fn temps(name: &str) -> String {
    format!(
        "HloModule {name}, is_scheduled=true\n\n%sum (a: f32[], b: f32[]) -> f32[] {{\n  \
         %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %r = f32[] add(%a, %b)\n}}\n\n\
         ENTRY %e (x: f32[]) -> f32[] {{\n  %x = f32[] parameter(0)\n  \
         %big = f32[65536]{{0}} broadcast(%x), dimensions={{}}\n  %z = f32[] constant(0)\n  \
         ROOT %s = f32[] reduce(%big, %z), dimensions={{0}}, to_apply=%sum\n}}\n"
    )
}

#[test]
fn hm005_in_each_front_ends_words() {
    let tf = only(&findings(&temps(TF_NAME)), "HM005");
    assert!(tf.fix().contains("tf.map_fn"), "{}", tf.fix());
    assert_no_jax(&tf);
    let pt = only(&findings(&temps("SyncTensorsGraph.9")), "HM005");
    assert!(pt.fix().contains("in chunks"), "{}", pt.fix());
    assert_no_jax(&pt);
    let jax = only(&findings(&temps("jit_f")), "HM005");
    assert!(jax.fix().contains("lax.map"), "{}", jax.fix());
}

#[test]
fn hm006_in_each_front_ends_words() {
    let tf = only(&findings(&tf_add().replace("f32", "f64")), "HM006");
    assert!(tf.fix().contains("tf.cast(x, tf.float32)"), "{}", tf.fix());
    assert_no_jax(&tf);
    let pt = only(&findings(&PT_ADD.replace("f32", "f64")), "HM006");
    assert!(pt.fix().contains("torch.float32"), "{}", pt.fix());
    assert_no_jax(&pt);
    let unknown = only(
        &findings(
            &PT_ADD
                .replace("f32", "f64")
                .replace("SyncTensorsGraph.8", "m"),
        ),
        "HM006",
    );
    assert_eq!(unknown.frontend, FrontendName::Unknown);
    assert!(
        !unknown.fix().contains("jax") && !unknown.fix().contains("torch"),
        "{}",
        unknown.fix()
    );
}

/// A module nothing names: the fix says what to achieve and how each
/// front-end gets it, rather than one front-end's API alone.
#[test]
fn unknown_front_end_gets_every_front_ends_way() {
    let f = only(
        &findings(&PT_ADD.replace("SyncTensorsGraph.8", "m")),
        "HM001",
    );
    assert_eq!(f.frontend, FrontendName::Unknown);
    for way in ["JAX: donate_argnums", "PyTorch/XLA", "TensorFlow"] {
        assert!(f.fix().contains(way), "{}", f.fix());
    }
}
