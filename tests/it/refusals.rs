//! Modules XLA refuses are refused, in the default (lazy) mode as with every
//! line parsed: in fusion bodies no analysis reads as in the entry. Each case
//! is one of the kinds a mutation campaign against jaxlib's parser found
//! hlomem accepting (`measure/mutants/`; `tests/python/test_refuses_what_xla_refuses.py`
//! compares with XLA itself where jax is installed). The message and the
//! line it points at are checked, never just "some error".

/// A module with one fusion, whose body is `body` (its parameter `%p`, an
/// `f32[4]`), and an entry line `entry` before the fusion.
fn module(body: &str, entry: &str) -> String {
    format!(
        "HloModule m, entry_computation_layout={{(f32[4]{{0}})->f32[4]{{0}}}}\n\n\
         %fused (p: f32[4]) -> f32[4] {{\n  %p = f32[4]{{0}} parameter(0)\n{body}}}\n\n\
         ENTRY %main (a: f32[4]) -> f32[4] {{\n  %a = f32[4]{{0}} parameter(0)\n{entry}  \
         ROOT %f = f32[4]{{0}} fusion(%a), kind=kLoop, calls=%fused\n}}\n"
    )
}

/// Both parses refuse `text` with a message containing `expected`, at `line`.
fn refused(text: &str, expected: &str, line: usize) {
    for (mode, result) in [
        (
            "on demand",
            hlomem::parse_text_on_demand("m.txt", text.to_string()).map(drop),
        ),
        (
            "complete",
            hlomem::parse_text("m.txt", text.to_string()).map(drop),
        ),
    ] {
        let error = match result {
            Ok(_) => panic!("{mode}: accepted\n{text}"),
            Err(error) => error,
        };
        let message = error.to_string();
        assert!(message.contains(expected), "{mode}: {message}\n{text}");
        let (_, at, _) = error.location().expect("points at a line");
        assert_eq!(at, line, "{mode}: {message}\n{text}");
    }
}

#[test]
fn a_valid_module_passes_both_ways() {
    let text = module("  ROOT %n = f32[4]{0} negate(%p)\n", "");
    hlomem::parse_text_on_demand("m.txt", text.clone()).unwrap();
    hlomem::parse_text("m.txt", text).unwrap();
}

#[test]
fn fusion_bodies_nobody_reads_are_checked_like_the_entry() {
    let cases = [
        (
            "  ROOT %n = f32[4]{0} negate(%q)\n",
            "unknown instruction `%q`",
        ),
        ("  ROOT %n = f32[4]{0} add(%p)\n", "takes 2"),
        (
            "  %x = f32[4]{0} parameter(3)\n  ROOT %n = f32[4]{0} negate(%p)\n",
            "out of range",
        ),
        (
            "  %x = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p)\n",
            "parameter(0) of `%fused` is declared twice",
        ),
        ("  ROOT %n = f32[-4]{0} negate(%p)\n", "negative"),
        ("  ROOT %n = f32[4]{7} negate(%p)\n", "not an order"),
        // On demand the ROOT is held to the header; parsed, to its operand.
        ("  ROOT %n = f32[4,3]{1,0} negate(%p)\n", "f32[4,3]{1,0}"),
        ("  ROOT %n = s8[4]{0} negate(%p)\n", "s8"),
    ];
    for (body, expected) in cases {
        // The first line of the body after `%p` (line 5) holds the problem.
        refused(&module(body, ""), expected, 5);
    }
}

#[test]
fn an_operand_defined_further_down_is_used_before_its_definition() {
    let body = "  ROOT %n = f32[4]{0} negate(%m)\n  %m = f32[4]{0} negate(%p)\n";
    refused(&module(body, ""), "used before", 5);
}

#[test]
fn a_computation_called_before_its_definition_is_refused() {
    // XLA reads top to bottom: a fusion calling a body defined below it (or
    // itself) names a computation that does not exist yet.
    let text = "HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n\
        %outer (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n  \
        ROOT %f = f32[4]{0} fusion(%p), kind=kLoop, calls=%inner\n}\n\n\
        %inner (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%p)\n}\n\n\
        ENTRY %main (a: f32[4]) -> f32[4] {\n  %a = f32[4]{0} parameter(0)\n  \
        ROOT %f = f32[4]{0} fusion(%a), kind=kLoop, calls=%outer\n}\n";
    refused(text, "called before it is defined", 5);
}

#[test]
fn shapes_that_contradict_their_operands_are_refused() {
    let entry = |line: &str| {
        format!(
            "HloModule m, entry_computation_layout={{(f32[1024]{{0}})->f32[1024]{{0}}}}\n\n\
             ENTRY %main (a: f32[1024]) -> f32[1024] {{\n  %a = f32[1024]{{0}} parameter(0)\n{line}  \
             ROOT %r = f32[1024]{{0}} negate(%a)\n}}\n"
        )
    };
    refused(
        &entry("  %n = f32[1024,1024]{1,0} negate(%a)\n"),
        "must have the dimensions of operand 0",
        5,
    );
    refused(
        &entry("  %n = (f32[1024]{0}) negate(%a)\n"),
        "not (f32[1024]{0})",
        5,
    );
    refused(
        &entry("  %n = f32[4000]{0} bitcast(%a)\n"),
        "keeps its operand's bits",
        5,
    );
    refused(
        &entry("  %n = s8[1024]{0} add(%a, %a)\n"),
        "element type",
        5,
    );
}

#[test]
fn the_entry_layout_declares_the_parameters_and_result() {
    // A parameter of 2^61 elements whose declared layout is 8192: never
    // "total 8.00EiB".
    let huge = "HloModule m, entry_computation_layout={(s32[8192]{0})->s32[8192]{0}}\n\n\
        ENTRY %main (a: s32[2305843009213693952]) -> s32[8192] {\n  \
        %a = s32[2305843009213693952]{0} parameter(0)\n  ROOT %n = s32[8192]{0} slice(%a), slice={[0:8192]}\n}\n";
    refused(huge, "declares s32[8192]{0}", 4);
    let extra = "HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n\
        ENTRY %main (a: f32[4]) -> f32[4] {\n  %a = f32[4]{0} parameter(0)\n  \
        %b = f32[1000000]{0} parameter(1)\n  ROOT %n = f32[4]{0} negate(%a)\n}\n";
    refused(extra, "declares 1", 5);
}

#[test]
fn layout_fields_that_should_hold_numbers_are_refused() {
    let text = "HloModule m, entry_computation_layout={(f32[8,128]{1,0})->f32[8,128]{1,0}}\n\n\
        ENTRY %main (a: f32[8,128]) -> f32[8,128] {\n  %a = f32[8,128]{1,0:T(x.1,128)} parameter(0)\n  \
        ROOT %n = f32[8,128]{1,0} negate(%a)\n}\n";
    refused(text, "holds numbers only", 4);
}
