//! What the parser keeps: hand-written modules for the tricky cases of notes §1.13.

use hlomem::hlo::{CallRole, Opcode, Shape};

fn parse(text: &str) -> hlomem::Module {
    hlomem::parse_text("test.txt", text).unwrap_or_else(|e| panic!("{}", e.render(false)))
}

#[test]
fn unknown_opcodes_and_attributes_parse_generically() {
    let m = parse(
        "HloModule m, some_future_flag={a=[1,2] b=\"c\"}\n\n\
         ENTRY %e (x: f32[8]) -> f32[8] {\n  \
           %x = f32[8]{0} parameter(0)\n  \
           ROOT %y = f32[8]{0} quantum-entangle(%x), spooky_action=at_a_distance, sharding={devices=[4]<=[4]}\n\
         }\n",
    );
    let y = m.instr(m.entry_root());
    assert_eq!(y.opcode, Opcode::Other(Box::new("quantum-entangle".into())));
    assert_eq!(
        m.attribute(m.entry_root(), "spooky_action"),
        Some("at_a_distance")
    );
    assert_eq!(
        m.attribute(m.entry_root(), "sharding"),
        Some("{devices=[4]<=[4]}")
    );
    assert_eq!(
        m.header_attribute("some_future_flag"),
        Some("{a=[1,2] b=\"c\"}")
    );
}

#[test]
fn compact_tuple_operands_recreate_get_tuple_elements() {
    let m = parse(
        "HloModule m\n\nENTRY %e (p: (f32[2], (s32[], f32[4]))) -> f32[4] {\n  \
           %p = (f32[2]{0}, (s32[], f32[4]{0})) parameter(0)\n  \
           ROOT %n = f32[4]{0} negate(%p#1#1)\n}\n",
    );
    let entry = m.entry();
    assert_eq!(entry.instructions.len(), 4, "p, two recreated GTEs, n");
    let n = m.instr(entry.root);
    let inner = m.instr(n.operands[0]);
    assert_eq!(inner.opcode, Opcode::GetTupleElement);
    assert_eq!(inner.tuple_index, Some(1));
    assert_eq!(inner.shape.to_string(), "f32[4]{0}");
    assert!(inner.synthetic);
    assert_eq!(m.instr_name(n.operands[0]), "p_1_1");
    // The schedule puts the recreated GTEs right before their user.
    assert_eq!(entry.instructions[3], entry.root);
}

#[test]
fn old_format_operand_shapes_and_inline_sources() {
    let m = parse(
        "HloModule pmap_f.3\n\n\
         %add (a: f32[], b: f32[]) -> f32[] {\n  \
           %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  \
           ROOT %s = f32[] add(f32[] %a, f32[] %b), metadata={op_type=\"add\" op_name=\"add\" source_file=\"mnist.py\" source_line=242}\n}\n\n\
         ENTRY %main (p: f32[10]) -> f32[] {\n  \
           %p = f32[10]{0} parameter(0)\n  %z = f32[] constant(0)\n  \
           ROOT %r = f32[] reduce(f32[10]{0} %p, f32[] %z), dimensions={0}, to_apply=%add\n}\n",
    );
    let add_root = m.comp(m.instr(m.entry_root()).called[0].1).root;
    assert_eq!(
        m.source_location(add_root).unwrap().to_string(),
        "mnist.py:242"
    );
    assert_eq!(m.instr(m.entry_root()).called[0].0, CallRole::ToApply);
    assert_eq!(m.attribute(m.entry_root(), "dimensions"), Some("{0}"));
    assert_eq!(
        m.entry().name,
        "main",
        "without ENTRY the last computation is the entry"
    );
}

#[test]
fn header_aliases_donors_and_layouts() {
    let m = parse(
        "HloModule m, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, \
         buffer_donor={ (2, {}) }, entry_computation_layout={(f32[4]{0}, f32[4]{0}, s4[8]{0:E(4)})->(f32[4]{0}, f32[4]{0})}, num_partitions=4\n\n\
         ENTRY %e (a: f32[4], b: f32[4], c: s4[8]) -> (f32[4], f32[4]) {\n  \
           %a = f32[4]{0} parameter(0)\n  %b = f32[4]{0} parameter(1)\n  %c = s4[8]{0:E(4)} parameter(2)\n  \
           ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%b, %a)\n}\n",
    );
    assert!(m.header.is_scheduled);
    assert_eq!(m.header.num_partitions, 4);
    assert_eq!(m.header.input_output_alias.len(), 2);
    assert!(m.header.input_output_alias[1].must_alias);
    assert_eq!(m.header.buffer_donors[0].parameter, 2);
    let layout = m.header.entry_layout.as_ref().unwrap();
    assert_eq!(
        layout.parameters[2].byte_size(),
        4,
        "E(4) packs two s4 per byte"
    );
    assert_eq!(layout.result.total_byte_size(), 16 + 32);
    assert!(matches!(*m.instr(m.entry_root()).shape, Shape::Tuple(_)));
}

#[test]
fn windows_line_endings_and_execution_threads() {
    let m = parse(
        "HloModule m\r\n\r\n%host (x: f32[]) -> f32[] {\r\n  ROOT %x = f32[] parameter(0)\r\n}, execution_thread=\"host\"\r\n\r\n\
         ENTRY %e (x: f32[]) -> f32[] {\r\n  %x = f32[] parameter(0)\r\n  ROOT %c = f32[] call(%x), to_apply=%host\r\n}\r\n",
    );
    assert_eq!(
        m.shell(hlomem::hlo::CompId(0)).execution_thread.as_deref(),
        Some("host")
    );
    assert_eq!(m.instr_name(m.entry_root()), "c");
}

#[test]
fn control_predecessors_and_custom_call_aliasing() {
    let m = parse(
        "HloModule m\n\nENTRY %e (x: f32[8]) -> f32[8] {\n  %x = f32[8]{0} parameter(0)\n  \
           %a = f32[8]{0} negate(%x)\n  \
           ROOT %cc = f32[8]{0} custom-call(%a), custom_call_target=\"my$target\", output_to_operand_aliasing={{}: (0, {})}, control-predecessors={%a}\n}\n",
    );
    let cc = m.instr(m.entry_root());
    assert_eq!(
        m.custom_call_target(m.entry_root()).as_deref(),
        Some("my$target")
    );
    assert_eq!(cc.output_to_operand_aliasing.len(), 1);
    assert_eq!(cc.control_predecessors.len(), 1);
}

/// A target and a fusion kind are read from the text when asked; an escaped
/// quote in the target comes back unescaped.
#[test]
fn custom_call_target_is_unescaped_and_fusion_kind_read() {
    let m = parse(
        "HloModule m\n\n%f (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n  \
           ROOT %n = f32[8]{0} negate(%p)\n}\n\n\
         ENTRY %e (x: f32[8]) -> f32[8] {\n  %x = f32[8]{0} parameter(0)\n  \
           %fu = f32[8]{0} fusion(%x), kind=kLoop, calls=%f\n  \
           ROOT %cc = f32[8]{0} custom-call(%fu), custom_call_target=\"say \\\"hi\\\"\"\n}\n",
    );
    let root = m.entry_root();
    assert_eq!(m.custom_call_target(root).as_deref(), Some("say \"hi\""));
    let fusion = m.instr(root).operands[0];
    assert_eq!(m.fusion_kind(fusion), Some("kLoop"));
    assert_eq!(m.fusion_kind(root), None);
    assert_eq!(m.custom_call_target(fusion), None);
}

#[test]
fn a_shape_spelled_again_is_shared_and_each_spelling_is_its_own() {
    let m = parse(
        "HloModule m\n\n\
         ENTRY %e (x: f32[8]) -> (f32[8], f32[8], f32[2,4]) {\n  \
           %x = f32[8]{0} parameter(0)\n  \
           %a = f32[8]{0} negate(%x)\n  \
           %b = f32[2,4]{1,0} reshape(%a)\n  \
           %c = f32[2, 4]{1,0} negate(%b)\n  \
           ROOT %t = (f32[8]{0}, f32[8]{0}, f32[2,4]{1,0}) tuple(%x, %a, %c)\n\
         }\n",
    );
    let shape = |name: &str| {
        let id = m
            .entry()
            .instructions
            .iter()
            .copied()
            .find(|&i| m.instr_name(i) == name)
            .expect("instruction");
        m.instr(id).shape.clone()
    };
    assert!(std::sync::Arc::ptr_eq(&shape("x"), &shape("a")));
    // Spaces inside brackets are another spelling of the same shape.
    assert_eq!(*shape("b"), *shape("c"));
    assert_eq!(shape("c").byte_size(), 32);
    assert!(matches!(*shape("t"), Shape::Tuple(ref e) if e.len() == 3));
}

#[test]
fn metadata_is_read_when_asked_and_odd_fields_are_left_out() {
    let m = parse(
        "HloModule m\n\n\
         ENTRY %e (x: f32[8]) -> f32[8] {\n  \
           %x = f32[8]{0} parameter(0), metadata={op_name=\"x\" source_file=\"a.py\" source_line=7}\n  \
           %y = f32[8]{0} negate(%x), metadata={op_name=\"jit(f)/neg\", future_field={1,2} source_line=9}\n  \
           ROOT %z = f32[8]{0} negate(%y), metadata={= \"not a field\"}\n\
         }\n",
    );
    let entry = m.entry();
    let (x, y, z) = (
        entry.instructions[0],
        entry.instructions[1],
        entry.instructions[2],
    );
    assert_eq!(m.op_name(x).as_deref(), Some("x"));
    assert_eq!(
        m.source_location(x).map(|l| l.to_string()).as_deref(),
        Some("a.py:7")
    );
    assert_eq!(m.op_name(y).as_deref(), Some("jit(f)/neg"));
    assert_eq!(m.metadata(y).source_line, Some(9));
    // Balanced, so the line parses; its fields do not, so there are none.
    assert_eq!(m.op_name(z), None);
    assert_eq!(m.source_location(z), None);
}

/// Metadata and backend configs are set aside from the text before parsing
/// (`hlo/set_aside.rs`); both read back whole, and the text keeps `{}`.
#[test]
fn set_aside_values_read_back_whole() {
    let config = r#"{"aliasing_operands":{"lists":[{"indices":["0","1"]}]},"s":"}{"}"#;
    let m = parse(&format!(
        "HloModule m\n\n\
         ENTRY %e (x: f32[8]) -> f32[8] {{\n  \
           %x = f32[8]{{0}} parameter(0), metadata={{op_name=\"x\"}}\n  \
           ROOT %y = f32[8]{{0}} custom-call(%x), custom_call_target=\"t\", backend_config={config}, metadata={{op_name=\"jit(f)/y\"}}\n\
         }}\n"
    ));
    let y = m.entry_root();
    assert_eq!(m.attribute(y, "backend_config"), Some(config));
    assert_eq!(m.op_name(y).as_deref(), Some("jit(f)/y"));
    assert!(m.text().contains("backend_config={}, metadata={}"));
    assert!(m.text_contains("aliasing_operands"));
}
