//! One small hand-written module per XLA rule the accounting relies on.
//! Each test names the rule (and the notes' section) it checks.

use super::dataflow::ValueId;
use super::*;
use crate::hlo::Module;

/// The id of the instruction called `name`.
fn instr_named(m: &Module, name: &str) -> crate::hlo::InstrId {
    let at = m.instrs().find(|&(id, _)| m.instr_name(id) == name);
    at.expect(name).0
}

fn parse(text: &str) -> Module {
    crate::parse_text("test_cpu_after_optimizations.txt", text)
        .unwrap_or_else(|e| panic!("{}", e.render(false)))
}

fn value_of(module: &Module, model: &MemoryModel, name: &str, node: usize) -> ValueId {
    model.dataflow.value_of(instr_named(module, name))[node]
}

fn same_buffer(module: &Module, model: &MemoryModel, a: &str, b: &str) -> bool {
    let (va, vb) = (value_of(module, model, a, 0), value_of(module, model, b, 0));
    model.dataflow.values[va.index()].buffer == model.dataflow.values[vb.index()].buffer
}

fn range(module: &Module, model: &MemoryModel, name: &str) -> (u32, u32) {
    let r = model.ranges[value_of(module, model, name, 0).index()].expect("scheduled");
    (r.start, r.end)
}

/// Notes §4.9, the worked example: parameter 1024, output 4, temp 4096
/// (a, b and c live together; c cannot reuse a's or b's chunk because the
/// shapes differ), total 5124.
#[test]
fn worked_example_of_the_notes() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\nENTRY %main (p0: f32[256]) -> f32[1] {\n  \
         %p0 = f32[256]{0} parameter(0)\n  %a = f32[256]{0} exponential(%p0)\n  %b = f32[256]{0} negate(%a)\n  \
         %c = f32[512]{0} concatenate(%a, %b), dimensions={0}\n  ROOT %r = f32[1]{0} slice(%c), slice={[0:1]}\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert_eq!(
        range(&m, &model, "p0"),
        (0, 5),
        "entry parameters live to the end"
    );
    assert_eq!(range(&m, &model, "a"), (1, 3));
    assert_eq!(
        range(&m, &model, "r"),
        (4, 5),
        "roots live to the end of their computation"
    );
    let t = model.totals;
    assert_eq!(
        (
            t.argument_bytes,
            t.output_bytes,
            t.temp_bytes,
            t.total_bytes
        ),
        (1024, 4, 4096, 5124)
    );
}

/// §4.2: bitcast and get-tuple-element define no value; tuple defines only its
/// index table; copy defines a new value.
#[test]
fn pass_through_ops_define_no_values() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[4]) -> (f32[4], f32[2,2], f32[4]) {\n  \
         %p = f32[4]{0} parameter(0)\n  %n = f32[4]{0} negate(%p)\n  %bc = f32[2,2]{1,0} bitcast(%n)\n  \
         %cp = f32[4]{0} copy(%n)\n  ROOT %t = (f32[4]{0}, f32[2,2]{1,0}, f32[4]{0}) tuple(%n, %bc, %cp)\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert_eq!(value_of(&m, &model, "bc", 0), value_of(&m, &model, "n", 0));
    assert_eq!(value_of(&m, &model, "t", 1), value_of(&m, &model, "n", 0));
    assert_ne!(value_of(&m, &model, "cp", 0), value_of(&m, &model, "n", 0));
    let table = value_of(&m, &model, "t", 0);
    assert_eq!(
        model.dataflow.values[table.index()].size,
        24,
        "3 pointers of 8 bytes"
    );
}

/// §4.3 rule 4: dynamic-update-slice writes into operand 0's buffer.
#[test]
fn dynamic_update_slice_is_in_place() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[8], u: f32[2], i: s32[]) -> f32[8] {\n  \
         %p = f32[8]{0} parameter(0)\n  %u = f32[2]{0} parameter(1)\n  %i = s32[] parameter(2)\n  \
         %n = f32[8]{0} negate(%p)\n  ROOT %d = f32[8]{0} dynamic-update-slice(%n, %u, %i)\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert!(same_buffer(&m, &model, "n", "d"));
}

/// §4.3 rule 4: a fusion whose root is a dynamic-update-slice of a fused
/// parameter writes into that operand's buffer.
#[test]
fn in_place_fusion_shares_its_operand() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\n%f (a: f32[8], b: f32[2], c: s32[]) -> f32[8] {\n  \
         %a = f32[8]{0} parameter(0)\n  %b = f32[2]{0} parameter(1)\n  %c = s32[] parameter(2)\n  \
         ROOT %d = f32[8]{0} dynamic-update-slice(%a, %b, %c)\n}\n\n\
         ENTRY %e (p: f32[8], u: f32[2], i: s32[]) -> f32[8] {\n  \
         %p = f32[8]{0} parameter(0)\n  %u = f32[2]{0} parameter(1)\n  %i = s32[] parameter(2)\n  \
         %n = f32[8]{0} negate(%p)\n  ROOT %fu = f32[8]{0} fusion(%n, %u, %i), kind=kLoop, calls=%f\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert!(same_buffer(&m, &model, "n", "fu"));
}

/// §4.3 rule 4 for each opcode of `sharing::FUSED_IN_PLACE`, in a body parsed
/// on demand (whose text is probed for the opcode before anything is parsed)
/// and in one parsed at load: the fusion's operand 0 aliases its output; a
/// body without one has no pair. A new in-place opcode needs its case here.
#[test]
fn every_fused_in_place_opcode_makes_a_pair_parsed_or_not() {
    use crate::hlo::{Opcode, OperandAlias};
    let cases = [
        (
            Opcode::DynamicUpdateSlice,
            "%b = f32[2]{0} parameter(1)\n  %c = s32[] parameter(2)\n  \
             ROOT %d = f32[8]{0} dynamic-update-slice(%a, %b, %c)",
            "(a: f32[8], b: f32[2], c: s32[])",
            "(p: f32[8], u: f32[2], i: s32[])",
            "%u = f32[2]{0} parameter(1)\n  %i = s32[] parameter(2)",
        ),
        (
            Opcode::Scatter,
            "%b = s32[2,1]{1,0} parameter(1)\n  %c = f32[2]{0} parameter(2)\n  \
             ROOT %d = f32[8]{0} scatter(%a, %b, %c), update_window_dims={}, inserted_window_dims={0}, \
             scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add",
            "(a: f32[8], b: s32[2,1], c: f32[2])",
            "(p: f32[8], u: s32[2,1], i: f32[2])",
            "%u = s32[2,1]{1,0} parameter(1)\n  %i = f32[2]{0} parameter(2)",
        ),
    ];
    let opcodes: Vec<&Opcode> = cases.iter().map(|c| &c.0).collect();
    let listed: Vec<&Opcode> = sharing::FUSED_IN_PLACE.iter().collect();
    assert_eq!(opcodes, listed, "one case per in-place opcode");
    let module = |body: &str, params: &str, entry: &str, entry_params: &str| {
        format!(
            "HloModule m, is_scheduled=true\n\n\
             %add (x: f32[], y: f32[]) -> f32[] {{\n  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n  \
             ROOT %s = f32[] add(%x, %y)\n}}\n\n\
             %f {params} -> f32[8] {{\n  %a = f32[8]{{0}} parameter(0)\n  {body}\n}}\n\n\
             ENTRY %e {entry} -> f32[8] {{\n  %p = f32[8]{{0}} parameter(0)\n  {entry_params}\n  \
             %n = f32[8]{{0}} negate(%p)\n  ROOT %fu = f32[8]{{0}} fusion(%n, %u, %i), kind=kLoop, calls=%f\n}}\n"
        )
    };
    let pairs = |text: &str, on_demand: bool| {
        let m = if on_demand {
            crate::parse_text_on_demand("test_cpu_after_optimizations.txt", text)
        } else {
            crate::parse_text("test_cpu_after_optimizations.txt", text).map(Into::into)
        };
        m.and_then(|m| m.read(|m| sharing::in_place_pairs(m, instr_named(m, "fu"))))
            .unwrap_or_else(|e| panic!("{}", e.render(false)))
    };
    let operand_0 = vec![OperandAlias {
        output_index: vec![],
        operand: 0,
        operand_index: vec![],
    }];
    for (opcode, body, params, entry, entry_params) in cases {
        let text = module(body, params, entry, entry_params);
        for on_demand in [true, false] {
            assert_eq!(pairs(&text, on_demand), operand_0, "{opcode} {on_demand}");
        }
        // The near miss: the same body with its root a negate of operand 0.
        let root = body.find("ROOT").expect("a root");
        let negated = format!("{}ROOT %d = f32[8]{{0}} negate(%a)", &body[..root]);
        let text = module(&negated, params, entry, entry_params);
        for on_demand in [true, false] {
            assert_eq!(pairs(&text, on_demand), vec![], "{opcode} {on_demand}");
        }
    }
}

/// §4.3 rule 4: custom-call `output_to_operand_aliasing` pairs share a buffer.
#[test]
fn custom_call_output_to_operand_aliasing() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n  \
         %n = f32[8]{0} negate(%p)\n  \
         ROOT %cc = f32[8]{0} custom-call(%n), custom_call_target=\"t\", output_to_operand_aliasing={{}: (0, {})}\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert!(same_buffer(&m, &model, "n", "cc"));
}

/// §4.3 rule 1 and §4.4: a donated parameter shares its buffer with the output
/// and dies at its last use; the allocation is both argument and output.
#[test]
fn input_output_alias_merges_parameter_and_output() {
    let m = parse(
        "HloModule m, is_scheduled=true, input_output_alias={ {}: (0, {}, may-alias) }\n\n\
         ENTRY %e (a: f32[1024], b: f32[1024]) -> f32[1024] {\n  \
         %a = f32[1024]{0} parameter(0)\n  %b = f32[1024]{0} parameter(1)\n  ROOT %s = f32[1024]{0} add(%a, %b)\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert!(same_buffer(&m, &model, "a", "s"));
    assert_eq!(
        range(&m, &model, "a"),
        (0, 2),
        "a donated parameter dies at its last use"
    );
    assert_eq!(range(&m, &model, "b"), (0, 3), "the other lives to the end");
    let t = model.totals;
    assert_eq!(
        (
            t.argument_bytes,
            t.output_bytes,
            t.alias_bytes,
            t.total_bytes
        ),
        (8192, 4096, 4096, 8192)
    );
}

/// §4.3 rule 2: loop state is one buffer per element (init, phis, body root);
/// an element the body passes through unchanged has no phi (XLA removes it).
#[test]
fn while_loop_state_shares_buffers() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\n\
         %cond (s: (s32[], f32[8], f32[8])) -> pred[] {\n  %s = (s32[], f32[8]{0}, f32[8]{0}) parameter(0)\n  \
         %i = s32[] get-tuple-element(%s), index=0\n  %k = s32[] constant(3)\n  \
         ROOT %lt = pred[] compare(%i, %k), direction=LT\n}\n\n\
         %body (s: (s32[], f32[8], f32[8])) -> (s32[], f32[8], f32[8]) {\n  %s = (s32[], f32[8]{0}, f32[8]{0}) parameter(0)\n  \
         %i = s32[] get-tuple-element(%s), index=0\n  %x = f32[8]{0} get-tuple-element(%s), index=1\n  \
         %w = f32[8]{0} get-tuple-element(%s), index=2\n  %one = s32[] constant(1)\n  %i2 = s32[] add(%i, %one)\n  \
         %x2 = f32[8]{0} multiply(%x, %w)\n  ROOT %t = (s32[], f32[8]{0}, f32[8]{0}) tuple(%i2, %x2, %w)\n}\n\n\
         ENTRY %e (x0: f32[8], w: f32[8]) -> f32[8] {\n  %x0 = f32[8]{0} parameter(0)\n  %w = f32[8]{0} parameter(1)\n  \
         %z = s32[] constant(0)\n  %c = f32[8]{0} copy(%x0)\n  %init = (s32[], f32[8]{0}, f32[8]{0}) tuple(%z, %c, %w)\n  \
         %loop = (s32[], f32[8]{0}, f32[8]{0}) while(%init), condition=%cond, body=%body\n  \
         ROOT %out = f32[8]{0} get-tuple-element(%loop), index=1\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert!(
        same_buffer(&m, &model, "c", "x2"),
        "init and body result share the loop buffer"
    );
    let loop_x = value_of(&m, &model, "loop", 2);
    assert!(model.dataflow.values[loop_x.index()].is_phi);
    assert_eq!(
        value_of(&m, &model, "loop", 3),
        value_of(&m, &model, "w", 0),
        "invariant element: no phi"
    );
    assert_eq!(
        range(&m, &model, "w").1,
        model.schedule.len(),
        "so the read-only parameter keeps its range"
    );
}

/// §4.4: a while's condition and body are laid out before the while itself.
#[test]
fn schedule_flattens_condition_then_body_before_the_loop() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\n%cond (s: s32[]) -> pred[] {\n  %s = s32[] parameter(0)\n  \
         ROOT %lt = pred[] compare(%s, %s), direction=LT\n}\n\n%body (s: s32[]) -> s32[] {\n  \
         %s = s32[] parameter(0)\n  ROOT %n = s32[] negate(%s)\n}\n\n\
         ENTRY %e (p: s32[]) -> s32[] {\n  %p = s32[] parameter(0)\n  %c = s32[] copy(%p)\n  \
         ROOT %w = s32[] while(%c), condition=%cond, body=%body\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    let names: Vec<&str> = model
        .schedule
        .order
        .iter()
        .map(|&i| m.instr_name(i))
        .collect();
    assert_eq!(names, ["p", "c", "s", "lt", "s", "n", "w"]);
}

/// §4.5 and §5.7: an elementwise op may take over an operand's chunk when the
/// operand dies there, so a chain of same-shape elementwise temps needs one chunk.
#[test]
fn elementwise_chain_reuses_the_dying_operand() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[256]) -> f32[1] {\n  %p = f32[256]{0} parameter(0)\n  \
         %a = f32[256]{0} exponential(%p)\n  %b = f32[256]{0} negate(%a)\n  %c = f32[256]{0} tanh(%b)\n  \
         ROOT %r = f32[1]{0} slice(%c), slice={[0:1]}\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert_eq!(model.totals.temp_bytes, 1024, "a, b and c share one chunk");
}

/// §5.7: shapes that differ, or a non-elementwise user, prevent reuse.
#[test]
fn transpose_cannot_reuse_its_operand() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[16,16]) -> f32[1,1] {\n  %p = f32[16,16]{1,0} parameter(0)\n  \
         %a = f32[16,16]{1,0} exponential(%p)\n  %t = f32[16,16]{1,0} transpose(%a), dimensions={1,0}\n  \
         ROOT %r = f32[1,1]{1,0} slice(%t), slice={[0:1], [0:1]}\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    assert_eq!(model.totals.temp_bytes, 2048, "a and t need a chunk each");
}

/// §4.1: a reducer's buffers get thread-local allocations, counted in the total only.
#[test]
fn reducer_buffers_are_thread_local() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\n%sum (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  \
         %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n\
         ENTRY %e (p: f32[8]) -> f32[] {\n  %p = f32[8]{0} parameter(0)\n  %z = f32[] constant(0)\n  \
         ROOT %r = f32[] reduce(%p, %z), dimensions={0}, to_apply=%sum\n}\n",
    );
    let model = analyze(&m, &Target::detect(&m));
    let kinds: Vec<_> = model
        .assignment
        .allocations
        .iter()
        .map(|a| a.kind)
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == assign::AllocationKind::ThreadLocal)
            .count(),
        3
    );
    let t = model.totals;
    assert_eq!((t.argument_bytes, t.output_bytes, t.temp_bytes), (32, 4, 0));
    assert_eq!(
        t.total_bytes,
        32 + 4 + 4 + 12,
        "parameter, output, constant, three reducer scalars"
    );
}

/// The batched form, as HM001 asks it of every parameter of a step that
/// donates nothing: 150 parameters, so more than 64 readers at a time (the
/// width of one pass). `%r_i` reads `p_i`; the write `%u_i` depends on it
/// for even `i` (no copy), not for odd `i` (a copy because of `%r_i`), except
/// where a control predecessor orders it first.
#[test]
fn donation_copies_for_many_parameters_at_once() {
    let n = 150;
    let mut text = String::from("HloModule m, is_scheduled=true\n\nENTRY %e {\n");
    for i in 0..n {
        text += &format!("  %p_{i} = f32[4]{{0}} parameter({i})\n");
    }
    for i in 0..n {
        text += &format!("  %r_{i} = f32[4]{{0}} multiply(%p_{i}, %p_{i})\n");
        let feeds = if i % 2 == 0 {
            format!("%r_{i}")
        } else {
            format!("%p_{i}")
        };
        text += &format!("  %c_{i} = f32[4]{{0}} negate({feeds})\n");
        let ordered = if i == 149 {
            format!(", control-predecessors={{%r_{i}}}")
        } else {
            String::new()
        };
        text += &format!("  %u_{i} = f32[4]{{0}} add(%p_{i}, %c_{i}){ordered}\n");
    }
    let outputs: Vec<String> = (0..n).map(|i| format!("%u_{i}")).collect();
    let shapes = vec!["f32[4]{0}"; n].join(", ");
    text += &format!("  ROOT %t = ({shapes}) tuple({})\n}}\n", outputs.join(", "));
    let m = parse(&text);
    let id = |name: &str| instr_named(&m, name);
    let asks: Vec<_> = (0..n)
        .map(|i| (id(&format!("p_{i}")), id(&format!("u_{i}"))))
        .collect();
    let answers = whatif::copies_needed(&m, &asks);
    for (i, answer) in answers.into_iter().enumerate() {
        let want = (i % 2 == 1 && i != 149).then(|| id(&format!("r_{i}")));
        assert_eq!(answer, want, "parameter {i}");
    }
}

/// The batched form against a plain search of each writer's ancestors, on a
/// random program: 100 parameters, 800 instructions reading a parameter and
/// an earlier instruction each (some ordered by a control predecessor too),
/// each parameter asked about with three writers.
#[test]
fn donation_copies_at_once_agree_with_a_search_per_writer() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut below = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let (params, n) = (100, 900);
    let mut text = String::from("HloModule m, is_scheduled=true\n\nENTRY %e {\n");
    for i in 0..params {
        text += &format!("  %i{i} = f32[4]{{0}} parameter({i})\n");
    }
    for i in params..n {
        // Half the reads are of parameters: hundreds of readers, several batches.
        let (a, b) = (below(params), below(i));
        let ordered = if below(10) == 0 {
            format!(", control-predecessors={{%i{}}}", below(i))
        } else {
            String::new()
        };
        text += &format!("  %i{i} = f32[4]{{0}} add(%i{a}, %i{b}){ordered}\n");
    }
    text += &format!("  ROOT %t = f32[4]{{0}} negate(%i{})\n}}\n", n - 1);
    let m = parse(&text);
    let id = |i: usize| instr_named(&m, &format!("i{i}"));
    let ancestors = |w: crate::hlo::InstrId| {
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![w];
        while let Some(x) = stack.pop() {
            for &o in m
                .instr(x)
                .operands
                .iter()
                .chain(&m.instr(x).control_predecessors)
            {
                if seen.insert(o) {
                    stack.push(o);
                }
            }
        }
        seen
    };
    let asks: Vec<_> = (0..params)
        .flat_map(|p| (0..3).map(move |k| (p, k)))
        .map(|(p, _)| (id(p), id(params + below(n - params))))
        .collect();
    let readers = |p| -> Vec<_> {
        let entry = m.entry().instructions.iter().copied();
        entry
            .filter(|&r| m.instr(r).operands.contains(&p))
            .collect()
    };
    let answers = whatif::copies_needed(&m, &asks);
    let lists: Vec<_> = asks.iter().map(|&(p, w)| (readers(p), w)).collect();
    let lists: Vec<_> = lists.iter().map(|(r, w)| (r.as_slice(), *w)).collect();
    let blocking = whatif::not_ordered_before_each(&m, &lists);
    for ((&(p, w), answer), blocking) in asks.iter().zip(answers).zip(blocking) {
        let before = ancestors(w);
        let want: Vec<_> = readers(p)
            .into_iter()
            .filter(|&r| r != w && !before.contains(&r))
            .collect();
        assert_eq!(blocking, want, "parameter {p:?}, writer {w:?}");
        assert_eq!(
            answer,
            want.first().copied(),
            "parameter {p:?}, writer {w:?}"
        );
    }
}

/// Copy insertion (notes §5.5-5.6) copies a donated parameter unless every
/// reader is an ancestor of the output's writer; schedule order does not count.
/// `%back` runs before `%update` here, yet it is not an ancestor of it, so
/// donating `w` costs a copy; `%fwd` is an ancestor and costs nothing.
#[test]
fn donation_needs_a_copy_when_a_reader_is_not_an_ancestor_of_the_write() {
    let m = parse(
        "HloModule m, is_scheduled=true\n\n\
         ENTRY %e (w: f32[64], x: f32[64]) -> (f32[64], f32[64]) {\n  \
           %w = f32[64]{0} parameter(0)\n  \
           %x = f32[64]{0} parameter(1)\n  \
           %fwd = f32[64]{0} multiply(%x, %w)\n  \
           %back = f32[64]{0} add(%fwd, %w)\n  \
           %update = f32[64]{0} subtract(%w, %fwd)\n  \
           ROOT %t = (f32[64]{0}, f32[64]{0}) tuple(%update, %back)\n\
         }\n",
    );
    let id = |name: &str| instr_named(&m, name);
    let (w, update) = (id("w"), id("update"));
    assert_eq!(whatif::copy_needed_by(&m, w, update), Some(id("back")));
    assert_eq!(whatif::copy_needed_by(&m, id("x"), id("fwd")), None);

    let copied = whatif::with_parameter_copies(&m, &[w]);
    // The parameter moves to a new id; its old id, which every reader names,
    // is now the copy, scheduled right after the parameters.
    let moved = crate::hlo::InstrId::arena(m.instr_count());
    assert_eq!(copied.instr_count(), m.instr_count() + 1);
    assert_eq!(copied.instr(moved).opcode, crate::hlo::Opcode::Parameter);
    assert_eq!(copied.entry().parameters[0], moved);
    assert_eq!(copied.instr(w).opcode, crate::hlo::Opcode::Copy);
    assert_eq!(*copied.instr(w).operands, [moved]);
    assert_eq!(copied.entry().instructions[..3], [moved, id("x"), w]);
    for reader in ["fwd", "back", "update"] {
        assert!(copied.instr(id(reader)).operands.contains(&w), "{reader}");
    }
    // A view: the module itself is untouched.
    assert_eq!(m.instr(w).opcode, crate::hlo::Opcode::Parameter);
    assert_eq!(m.entry().parameters[0], w);
    // Asked twice, one copy.
    let twice = whatif::with_parameter_copies(&m, &[w, w]);
    assert_eq!(twice.instr_count(), m.instr_count() + 1);
    assert_eq!(twice.entry().instructions, copied.entry().instructions);
}

/// `must_not_live_out` on TPU: libtpu 0.0.42 lets a temporary move into an
/// output's allocation once the two never live together; newer libtpu (read
/// from the text: async copies carry a `dma_priority`) keeps every buffer but
/// the output's own out, so the temporaries need a temp block of their own
/// (`Target::may_join_live_out`; libtpu 0.0.52's reports, e.g. an undonated
/// Adam step's m/v updates of an output's very shape).
#[test]
fn newer_libtpu_keeps_other_buffers_out_of_returned_allocations() {
    let text = |config: &str| {
        format!(
            "HloModule m, is_scheduled=true\n\nENTRY %e (p: f32[1024]) -> f32[1024] {{\n  \
             %p = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             %t = f32[1024]{{0:T(1024)}} exponential(%p){config}\n  \
             %u = f32[1024]{{0:T(1024)}} negate(%t)\n  \
             ROOT %r = f32[1024]{{0:T(1024)}} add(%u, %p)\n}}\n"
        )
    };
    let temp_and_output = |config: &str| {
        let m = parse(&text(config));
        let target = Target::detect(&m);
        let model = analyze(&m, &target);
        (
            target.newer_libtpu,
            model.totals.temp_bytes,
            model.totals.output_bytes,
        )
    };
    assert_eq!(temp_and_output(""), (false, 0, 4096));
    let (newer, temp, output) = temp_and_output(r#", backend_config={"dma_priority":1}"#);
    assert!(newer);
    assert_eq!(output, 4096);
    assert!(
        temp >= 4096,
        "the temporaries stay in the temp block: {temp}"
    );
}

/// The allocation holding `name`'s value at `{}`.
fn allocation_of(module: &Module, model: &MemoryModel, name: &str) -> Option<usize> {
    let v = value_of(module, model, name, 0);
    model.assignment.allocation_of[model.dataflow.values[v.index()].buffer.index()]
}

/// §4.6, `AssignBuffersForComputations`: among buffers of one size, live out
/// or not alike, the one defined first in XLA's post-order numbering is
/// assigned first, computations numbered in the reverse of the call graph's
/// post-order. That walk takes each computation's callees in the order of
/// its own instruction list, which the dump prints as the order of the
/// computations (`MakeComputationPostOrder`), not in the schedule's: the
/// CPU backend's parallel-task outlining appends its `call`s to the list,
/// so the last outlined is numbered first whatever the schedule says. Here
/// `%later` is printed after `%earlier`, so its `.clone` is assigned first
/// and takes the first output allocation, though it is called first (a walk
/// in schedule order would number `%earlier` first).
#[test]
fn callees_are_numbered_in_the_order_the_dump_prints_them() {
    let text = |first: &str, second: &str| {
        format!(
            "HloModule m, is_scheduled=true\n\n\
             %{first} (p.0: f32[64]) -> f32[64] {{\n  %p.0 = f32[64]{{0}} parameter(0)\n  \
             ROOT %{first}.clone = f32[64]{{0}} negate(%p.0)\n}}\n\n\
             %{second} (p.1: f32[64]) -> f32[64] {{\n  %p.1 = f32[64]{{0}} parameter(0)\n  \
             ROOT %{second}.clone = f32[64]{{0}} exponential(%p.1)\n}}\n\n\
             ENTRY %e (x: f32[64]) -> (f32[64], f32[64]) {{\n  %x = f32[64]{{0}} parameter(0)\n  \
             %call = f32[64]{{0}} call(%x), to_apply=%{second}\n  \
             %call.1 = f32[64]{{0}} call(%x), to_apply=%{first}\n  \
             ROOT %t = (f32[64]{{0}}, f32[64]{{0}}) tuple(%call, %call.1)\n}}\n"
        )
    };
    let m = parse(&text("earlier", "later"));
    let model = analyze(&m, &Target::detect(&m));
    let (earlier, later) = (
        allocation_of(&m, &model, "earlier.clone").expect("an output allocation"),
        allocation_of(&m, &model, "later.clone").expect("an output allocation"),
    );
    assert!(
        later < earlier,
        "printed last, numbered first: allocation {later} < {earlier}"
    );
    // The same callees printed the other way round swap their allocations.
    let m = parse(&text("later", "earlier"));
    let model = analyze(&m, &Target::detect(&m));
    assert!(allocation_of(&m, &model, "earlier.clone") < allocation_of(&m, &model, "later.clone"));
}

/// §4.6, `LiveRangeInterferes`: a value may take over the memory of one whose
/// live range ends where its own starts only if its instruction reads the
/// position where that range ends (`HloLiveRange`'s `end_position`: the
/// latest position in the schedule, not the latest use). A value also
/// passed into a `call` has the callee's parameter as a later position,
/// which no instruction of the caller reads: `%c` cannot move into the
/// allocation of `%f`, the output that reads it last, and waits for the
/// temp block (torch_xla 2.9's `copy` operands of `parallel_*` calls).
#[test]
fn a_value_passed_to_a_call_ends_at_the_callee_parameter() {
    let text = |called: &str| {
        format!(
            "HloModule m, is_scheduled=true\n\n\
             %callee (p.0: f32[64]) -> f32[64] {{\n  %p.0 = f32[64]{{0}} parameter(0)\n  \
             ROOT %n.clone = f32[64]{{0}} negate(%p.0)\n}}\n\n\
             ENTRY %e (x: f32[64]) -> (f32[64], f32[64]) {{\n  %x = f32[64]{{0}} parameter(0)\n  \
             %c = f32[64]{{0}} exponential(%x)\n  \
             %call = f32[64]{{0}} call(%{called}), to_apply=%callee\n  \
             %f = f32[64]{{0}} add(%c, %call)\n  \
             ROOT %t = (f32[64]{{0}}, f32[64]{{0}}) tuple(%f, %call)\n}}\n"
        )
    };
    let m = parse(&text("c"));
    let model = analyze(&m, &Target::detect(&m));
    assert_eq!(range(&m, &model, "c"), (1, 5));
    assert_eq!(range(&m, &model, "f"), (5, 7));
    assert_ne!(
        allocation_of(&m, &model, "c"),
        allocation_of(&m, &model, "f")
    );
    assert_eq!(model.totals.temp_bytes, 256, "c is a temporary of its own");
    // The near miss: a call that does not read `%c` leaves `%c` ending at
    // `%f`, which reads it and takes over its memory.
    let m = parse(&text("x"));
    let model = analyze(&m, &Target::detect(&m));
    assert_eq!(
        allocation_of(&m, &model, "c"),
        allocation_of(&m, &model, "f")
    );
    assert_eq!(model.totals.temp_bytes, 0);
}

/// §4.4, `HloLiveRange`'s async context, and libtpu's SparseCore placement:
/// a scatter offloaded to the SparseCore runs an `async-start` inside a
/// computation on the `sparsecore` thread, itself called from the wrapped
/// computation of an outer `async-start`. Every value defined in that
/// context lives until the outer `async-done` (the context is the outer
/// operation's: a `call` passes it on), and the nested start's tuple index
/// tables are colored 7 and take no bytes (libtpu 0.0.42.1's reports of MoE
/// steps on v5p and v6e), so HBM holds none of them. The outer start, on the
/// main thread, keeps its table in HBM.
#[test]
fn sparsecore_async_values_live_until_the_outer_done_off_hbm() {
    let text = |thread: &str| {
        format!(
            "HloModule m, is_scheduled=true\n\n\
             %called.1 (q0: f32[1024]) -> f32[1024] {{\n  %q0 = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             ROOT %n = f32[1024]{{0:T(1024)}} negate(%q0)\n}}, execution_thread=\"{thread}\"\n\n\
             %wrapped.1 (w0: f32[1024]) -> f32[1024] {{\n  %w0 = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             ROOT %c1 = f32[1024]{{0:T(1024)}} call(%w0), to_apply=%called.1\n}}, execution_thread=\"{thread}\"\n\n\
             %called (r0: f32[1024]) -> f32[1024] {{\n  %r0 = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             %inner-start = ((f32[1024]{{0:T(1024)}}), f32[1024]{{0:T(1024)}}, u32[]{{:S(8)}}) async-start(%r0), async_execution_thread=\"{thread}\", calls=%wrapped.1\n  \
             ROOT %inner-done = f32[1024]{{0:T(1024)}} async-done(%inner-start)\n}}, execution_thread=\"{thread}\"\n\n\
             %wrapped (v0: f32[1024]) -> f32[1024] {{\n  %v0 = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             ROOT %c0 = f32[1024]{{0:T(1024)}} call(%v0), to_apply=%called\n}}, execution_thread=\"{thread}\"\n\n\
             ENTRY %e (p: f32[1024]) -> f32[1024] {{\n  %p = f32[1024]{{0:T(1024)}} parameter(0)\n  \
             %outer-start = ((f32[1024]{{0:T(1024)}}), f32[1024]{{0:T(1024)}}) async-start(%p), async_execution_thread=\"{thread}\", calls=%wrapped\n  \
             %busy = f32[1024]{{0:T(1024)}} exponential(%p)\n  \
             %outer-done = f32[1024]{{0:T(1024)}} async-done(%outer-start)\n  \
             ROOT %sum = f32[1024]{{0:T(1024)}} add(%outer-done, %busy)\n}}\n"
        )
    };
    let m = parse(&text("sparsecore"));
    let model = analyze(&m, &Target::detect(&m));
    let time = |name: &str| {
        model
            .schedule
            .time(instr_named(&m, name))
            .expect("scheduled")
    };
    let (start, inner_done, outer_done) =
        (time("inner-start"), time("inner-done"), time("outer-done"));
    assert!(inner_done < outer_done);
    let table = value_of(&m, &model, "inner-start", 0);
    for v in model.dataflow.value_of(instr_named(&m, "inner-start")) {
        let value = &model.dataflow.values[v.index()];
        if value.instr != instr_named(&m, "inner-start") {
            continue; // {0, 0} and {1} are other instructions' values
        }
        let r = model.ranges[v.index()].expect("scheduled");
        assert_eq!((r.start, r.end), (start, outer_done), "{:?}", value.index);
    }
    let color = |v: ValueId| {
        let a = model.assignment.allocation_of[model.dataflow.values[v.index()].buffer.index()];
        model.assignment.allocations[a.expect("assigned")].color
    };
    assert_eq!(model.dataflow.values[table.index()].size, 0);
    assert_eq!(color(table), 7);
    // Nodes in pre-order: {}, {0}, {0,0}, {1}, {2}.
    let flag = value_of(&m, &model, "inner-start", 4);
    assert_eq!(model.dataflow.values[flag.index()].index, vec![2]);
    assert_eq!(
        (model.dataflow.values[flag.index()].size, color(flag)),
        (4, 8)
    );
    let outer_table = value_of(&m, &model, "outer-start", 0);
    assert!(model.dataflow.values[outer_table.index()].size > 0);
    assert_eq!(color(outer_table), 0);
    // The near miss: on another thread the nested start's tables stay in HBM.
    let m = parse(&text("parallel"));
    let model = analyze(&m, &Target::detect(&m));
    let table = value_of(&m, &model, "inner-start", 0);
    assert!(model.dataflow.values[table.index()].size > 0);
}

/// §4.2, `OptimizePhiValues`: a loop whose body passes an element through
/// unchanged has no phi there, also when the body passes it only through a
/// loop nested in it (at any depth) or a conditional whose branches all
/// return it: XLA removes such phis until none is left to remove, so the
/// element outside the loop is one value, live from before the outer loop to
/// its last reader after it (libtpu 0.0.x's reports of a scan over scanned
/// layers: one value `p__layers____g1__.1` at the elements of nested loops).
#[test]
fn nested_loops_pass_an_element_through_without_phis() {
    // Loop `l1` runs `body1`, which runs loop `l2` on `body2`, ... down to
    // `body{depth}`, whose element 1 is `keep`'s result (a bitcast forwards
    // its operand's value, a negate defines a new one).
    let text = |depth: usize, keep: &str| {
        let mut t = String::from(
            "HloModule m, is_scheduled=true\n\n\
             %then (a: f32[8]) -> f32[8] {\n  ROOT %a = f32[8]{0} parameter(0)\n}\n\n\
             %else (b: f32[8]) -> f32[8] {\n  ROOT %b = f32[8]{0} parameter(0)\n}\n\n",
        );
        for k in (1..=depth).rev() {
            let inner = if k == depth {
                format!(
                    "  %q{k} = pred[] compare(%i{k}, %i{k}), direction=EQ\n  \
                     %c{k} = f32[8]{{0}} conditional(%q{k}, %w{k}, %w{k}), true_computation=%then, false_computation=%else\n  \
                     %e{k} = f32[8]{{0}} {keep}(%c{k})\n"
                )
            } else {
                let n = k + 1;
                format!(
                    "  %t{k} = (s32[], f32[8]{{0}}) tuple(%i{k}, %w{k})\n  \
                     %l{n} = (s32[], f32[8]{{0}}) while(%t{k}), condition=%cond{n}, body=%body{n}\n  \
                     %e{k} = f32[8]{{0}} get-tuple-element(%l{n}), index=1\n"
                )
            };
            t += &format!(
                "%cond{k} (sc{k}: (s32[], f32[8])) -> pred[] {{\n  %sc{k} = (s32[], f32[8]{{0}}) parameter(0)\n  \
                 %ic{k} = s32[] get-tuple-element(%sc{k}), index=0\n  %n{k} = s32[] constant(3)\n  \
                 ROOT %lt{k} = pred[] compare(%ic{k}, %n{k}), direction=LT\n}}\n\n\
                 %body{k} (s{k}: (s32[], f32[8])) -> (s32[], f32[8]) {{\n  %s{k} = (s32[], f32[8]{{0}}) parameter(0)\n  \
                 %i{k} = s32[] get-tuple-element(%s{k}), index=0\n  %w{k} = f32[8]{{0}} get-tuple-element(%s{k}), index=1\n\
                 {inner}  %one{k} = s32[] constant(1)\n  %j{k} = s32[] add(%i{k}, %one{k})\n  \
                 ROOT %r{k} = (s32[], f32[8]{{0}}) tuple(%j{k}, %e{k})\n}}\n\n"
            );
        }
        t + "ENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n  \
             %w = f32[8]{0} negate(%p)\n  %z = s32[] constant(0)\n  \
             %init = (s32[], f32[8]{0}) tuple(%z, %w)\n  \
             %l1 = (s32[], f32[8]{0}) while(%init), condition=%cond1, body=%body1\n  \
             %out = f32[8]{0} get-tuple-element(%l1), index=1\n  %late = f32[8]{0} exponential(%p)\n  \
             ROOT %sum = f32[8]{0} add(%out, %late)\n}\n"
    };
    for depth in 1..=3 {
        let m = parse(&text(depth, "bitcast"));
        let model = analyze(&m, &Target::detect(&m));
        let w = value_of(&m, &model, "w", 0);
        // Nodes of the loop state in pre-order: {}, {0}, {1}.
        for k in 1..=depth {
            for name in [format!("l{k}"), format!("s{k}"), format!("sc{k}")] {
                assert_eq!(
                    value_of(&m, &model, &name, 2),
                    w,
                    "{name}{{1}}, depth {depth}"
                );
                let counter = value_of(&m, &model, &name, 1);
                assert!(
                    model.dataflow.values[counter.index()].is_phi,
                    "{name}{{0}} changes"
                );
            }
            assert_eq!(value_of(&m, &model, &format!("w{k}"), 0), w);
        }
        assert_eq!(value_of(&m, &model, &format!("c{depth}"), 0), w);
        let positions = model.dataflow.positions(w);
        assert!(positions.contains(&(instr_named(&m, "out"), 0)));
        let sum = model
            .schedule
            .time(instr_named(&m, "sum"))
            .expect("scheduled");
        assert_eq!(
            range(&m, &model, "w").1,
            sum,
            "read last by `sum`, after the loop"
        );
        // The near miss: a body that changes the element leaves a phi at
        // every loop, and `w` ends where the outer loop's phis take over.
        let m = parse(&text(depth, "negate"));
        let model = analyze(&m, &Target::detect(&m));
        let w = value_of(&m, &model, "w", 0);
        for k in 1..=depth {
            let element = value_of(&m, &model, &format!("l{k}"), 2);
            assert_ne!(element, w);
            assert!(model.dataflow.values[element.index()].is_phi);
        }
        let l1 = model
            .schedule
            .time(instr_named(&m, "l1"))
            .expect("scheduled");
        assert!(range(&m, &model, "w").1 < l1);
    }
}
