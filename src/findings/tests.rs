//! Each finding on a small hand-written module, with a near miss that must not fire.

use super::*;

fn findings(text: &str) -> Vec<Finding> {
    let module = crate::parse_text("t_cpu_after_optimizations.txt", text)
        .unwrap_or_else(|e| panic!("{}", e.render(false)));
    let model = crate::analysis::analyze(&module, &crate::chip::Target::detect(&module));
    run(&module, &model, &crate::usage::peak_usage(&module, &model))
}

fn codes(text: &str) -> Vec<&'static str> {
    findings(text).iter().map(|f| f.code).collect()
}

const ADD: &str = "HloModule jit_add, is_scheduled=true\n\n\
    ENTRY %e (a: f32[1024], b: f32[1024]) -> f32[1024] {\n  \
    %a = f32[1024]{0} parameter(0), metadata={op_name=\"a\"}\n  %b = f32[1024]{0} parameter(1), metadata={op_name=\"b\"}\n  \
    ROOT %s = f32[1024]{0} add(%a, %b)\n}\n";

#[test]
fn hm001_when_an_output_could_take_an_input_buffer() {
    let f = findings(ADD);
    let hm001: Vec<_> = f.iter().filter(|f| f.code == "HM001").collect();
    assert_eq!(hm001.len(), 1);
    assert_eq!(hm001[0].bytes, 4096, "the what-if saves the output's 4 KiB");
    assert_eq!(hm001[0].parameter.as_ref().unwrap().number, 0);
    assert!(
        hm001[0].fix().contains("donate_argnums=0"),
        "{}",
        hm001[0].fix()
    );
}

#[test]
fn hm001_not_when_already_donated() {
    let donated = ADD.replace(
        "jit_add, is_scheduled=true",
        "jit_add, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }",
    );
    assert!(!codes(&donated).contains(&"HM001"));
}

#[test]
fn hm001_not_when_the_input_is_read_after_the_output_is_written() {
    // %a is read by %late after %s (the output) is written: aliasing would need a copy.
    let text = "HloModule m, is_scheduled=true\n\nENTRY %e (a: f32[1024]) -> (f32[1024], f32[]) {\n  \
        %a = f32[1024]{0} parameter(0)\n  %s = f32[1024]{0} negate(%a)\n  %z = f32[] constant(0)\n  \
        %late = f32[] reduce(%a, %z), dimensions={0}, to_apply=%sum\n  ROOT %t = (f32[1024]{0}, f32[]) tuple(%s, %late)\n}\n";
    let text = format!(
        "HloModule m, is_scheduled=true\n\n%sum (x: f32[], y: f32[]) -> f32[] {{\n  %x = f32[] parameter(0)\n  \
         %y = f32[] parameter(1)\n  ROOT %r = f32[] add(%x, %y)\n}}\n\n{}",
        text.trim_start_matches("HloModule m, is_scheduled=true\n\n")
    );
    assert!(!codes(&text).contains(&"HM001"));
}

#[test]
fn hm002_for_a_donor_no_output_can_use() {
    let text = "HloModule m, is_scheduled=true, buffer_donor={ (0, {}) }\n\n\
        ENTRY %e (x: f32[1024]) -> bf16[1024] {\n  %x = f32[1024]{0} parameter(0)\n  \
        ROOT %c = bf16[1024]{0} convert(%x)\n}\n";
    let f = findings(text);
    let hm002 = f.iter().find(|f| f.code == "HM002").expect("HM002");
    // The output with the donor's dimensions in another dtype is named.
    assert!(
        hm002
            .message()
            .contains("has its dimensions in another dtype (bf16[1024]{0}"),
        "{}",
        hm002.message()
    );
    assert!(
        hm002
            .fix()
            .contains("f32[1024]{0} rather than bf16[1024]{0}"),
        "{}",
        hm002.fix()
    );
    assert_eq!(hm002.bytes, 4096);
}

#[test]
fn hm002_is_one_finding_per_argument() {
    // Three donated arrays of one JAX argument `w`, none usable: one finding
    // with the three in its evidence, not three findings.
    let text = "HloModule m, is_scheduled=true, buffer_donor={ (0, {}), (1, {}), (2, {}) }\n\n\
        ENTRY %e (a: f32[256], b: f32[512], c: f32[1024]) -> f32[] {\n  \
        %a = f32[256]{0} parameter(0), metadata={op_name=\"w[0]\"}\n  \
        %b = f32[512]{0} parameter(1), metadata={op_name=\"w[1]\"}\n  \
        %c = f32[1024]{0} parameter(2), metadata={op_name=\"w[2]\"}\n  \
        ROOT %z = f32[] constant(0)\n}\n";
    let f = findings(text);
    let hm002: Vec<_> = f.iter().filter(|f| f.code == "HM002").collect();
    assert_eq!(hm002.len(), 1, "{hm002:?}");
    assert_eq!(hm002[0].bytes, 4 * (256 + 512 + 1024));
    assert!(
        hm002[0]
            .message()
            .starts_with("argument `w` has 3 donated arrays"),
        "{}",
        hm002[0].message()
    );
    assert_eq!(hm002[0].evidence.details().len(), 3);
}

#[test]
fn hm003_when_the_result_is_copied_into_the_donated_buffer() {
    let text = "HloModule m, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }\n\n\
        ENTRY %e (x: f32[32,32]) -> f32[32,32] {\n  %x = f32[32,32]{1,0} parameter(0)\n  \
        %t = f32[32,32]{1,0} transpose(%x), dimensions={1,0}\n  ROOT %c = f32[32,32]{1,0} copy(%t)\n}\n";
    let f = findings(text);
    let hm003 = f.iter().find(|f| f.code == "HM003").expect("HM003");
    assert_eq!(hm003.instruction.as_deref(), Some("t"));
    assert_eq!(hm003.bytes, 4096);
}

#[test]
fn hm004_when_an_output_copies_an_input() {
    let text = "HloModule m, is_scheduled=true\n\nENTRY %e (x: f32[256]) -> (f32[256], f32[256]) {\n  \
        %x = f32[256]{0} parameter(0)\n  %n = f32[256]{0} negate(%x)\n  %c = f32[256]{0} copy(%x)\n  \
        ROOT %t = (f32[256]{0}, f32[256]{0}) tuple(%n, %c)\n}\n";
    let f = findings(text);
    let hm004 = f.iter().find(|f| f.code == "HM004").expect("HM004");
    assert_eq!(hm004.output_index.as_deref(), Some(&[1u64][..]));
}

#[test]
fn hm006_for_64_bit_buffers_only() {
    assert!(codes(&ADD.replace("f32", "f64")).contains(&"HM006"));
    assert!(!codes(ADD).contains(&"HM006"));
}

#[test]
fn every_code_is_documented_with_every_heading() {
    for rule in CODES {
        for heading in [
            "## What it finds",
            "## Why it costs memory",
            "## Example",
            "## Fix",
            "## How XLA shows it",
        ] {
            assert!(rule.doc.contains(heading), "{} lacks {heading}", rule.code);
        }
        assert!(
            rule.doc
                .starts_with(&format!("# {} {}", rule.code, rule.name)),
            "{}",
            rule.code
        );
        assert_eq!(super::rule(rule.name).map(|r| r.code), Some(rule.code));
    }
}

/// A real `lax.cond` update of a donated argument (samples/cond_donate): the
/// copy into the donated buffer is blamed on the conditional, with each
/// branch's result named, not on an op that "cannot write over its input".
#[test]
fn hm003_names_the_conditional_and_its_branches() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("samples/cond_donate/dump/module_0000.jit_cond_update.cpu_after_optimizations.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let f = findings(&text);
    let hm003 = f.iter().find(|f| f.code == "HM003").expect("HM003");
    let super::Evidence::DonationCopied(e) = &hm003.evidence else {
        panic!("{:?}", hm003.evidence)
    };
    let super::hm003_donation_copied::Copied::ResultOfConditional { branches, .. } = &e.how else {
        panic!("{:?}", e.how)
    };
    let ops: Vec<&str> = branches
        .iter()
        .filter_map(|b| b.result.op_name.as_deref())
        .collect();
    assert_eq!(ops.len(), 2, "{branches:?}");
    assert!(
        ops.iter().any(|o| o.ends_with("branch_1_fun/tanh")),
        "{ops:?}"
    );
    assert!(
        ops.iter().any(|o| o.ends_with("branch_0_fun/mul")),
        "{ops:?}"
    );
    assert!(
        hm003.message().contains("comes out of the conditional"),
        "{}",
        hm003.message()
    );
    assert!(hm003.fix().contains("jnp.where"));
}
