//! Adversarial module shapes, generated: the ones the robustness issue found
//! quadratic or stack-hungry. Shared by `benches/adversarial.rs` (how time
//! grows with size) and `tests/it/attacks.rs` (that they analyze at all).

use std::fmt::Write as _;

/// `depth` levels of one construct, each level's computation calling the
/// one below with `call` (`{inner}` stands for the callee); `level0` is
/// the innermost computation, `head` what comes before it.
fn nested(head: &str, level0: &str, shape: &str, call: &str, name: &str, depth: usize) -> String {
    let mut t = format!("{head}{level0}");
    for i in 1..depth {
        let _ = writeln!(
            t,
            "{name}{i} {{\n  p = {shape} parameter(0)\n  ROOT r = {shape} {}\n}}",
            call.replace("{inner}", &format!("{name}{}", i - 1))
        );
    }
    let _ = writeln!(
        t,
        "ENTRY main {{\n  p = {shape} parameter(0)\n  ROOT r = {shape} {}\n}}",
        call.replace("{inner}", &format!("{name}{}", depth - 1))
    );
    t
}

/// `depth` computations, each calling the next; the entry calls the last.
pub fn nested_calls(depth: usize) -> String {
    nested(
        "HloModule nested_calls, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n\n",
        "c0 {\n  p = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p)\n}\n",
        "f32[4]{0}",
        "call(p), to_apply={inner}",
        "c",
        depth,
    )
}

/// `depth` while loops, each one's body the next loop.
pub fn nested_whiles(depth: usize) -> String {
    nested(
        "HloModule nested_whiles, entry_computation_layout={(s32[])->s32[]}\n\n\
         cond {\n  p = s32[] parameter(0)\n  c = s32[] constant(10)\n  ROOT lt = pred[] compare(p, c), direction=LT\n}\n\n",
        "b0 {\n  p = s32[] parameter(0)\n  one = s32[] constant(1)\n  ROOT a = s32[] add(p, one)\n}\n",
        "s32[]",
        "while(p), condition=cond, body={inner}",
        "b",
        depth,
    )
}

/// `n` instructions, each the only user of the one before: all share one buffer.
pub fn chain(n: usize) -> String {
    let mut t = String::from(
        "HloModule chain, is_scheduled=true, entry_computation_layout={(f32[16]{0})->f32[16]{0}}\n\n\
         ENTRY main {\n  v0 = f32[16]{0} parameter(0)\n",
    );
    for i in 1..n {
        let _ = writeln!(t, "  v{i} = f32[16]{{0}} negate(v{})", i - 1);
    }
    let _ = writeln!(t, "  ROOT r = f32[16]{{0}} negate(v{})\n}}", n - 1);
    t
}

/// One value read by `n` instructions, which also form a chain.
pub fn fan_out(n: usize) -> String {
    let mut t = String::from(
        "HloModule fan_out, is_scheduled=true, entry_computation_layout={(f32[16]{0})->f32[16]{0}}\n\n\
         ENTRY main {\n  p = f32[16]{0} parameter(0)\n  v0 = f32[16]{0} negate(p)\n",
    );
    for i in 1..n {
        let _ = writeln!(t, "  v{i} = f32[16]{{0}} add(v0, v{})", i - 1);
    }
    let _ = writeln!(t, "  ROOT r = f32[16]{{0}} negate(v{})\n}}", n - 1);
    t
}

/// An unscheduled module of `n` values without a source line, each reading
/// the one before twice (`add(v, v)`), whose last user has one: every value
/// is charged to that line through the others (the peak is early, where
/// `big` is live). Carrying each value's list
/// of roots forward doubled the lists at every level (2^n; an 83 KB TPU
/// before-optimizations module took 20 GB).
pub fn diamonds(n: usize) -> String {
    let mut t = String::from(
        "HloModule diamonds, entry_computation_layout={(f32[4096]{0})->f32[16]{0}}\n\n\
         ENTRY main {\n  p = f32[4096]{0} parameter(0)\n  big = f32[4096]{0} negate(p)\n  \
         v0 = f32[16]{0} slice(big), slice={[0:16]}\n",
    );
    for i in 1..n {
        let _ = writeln!(t, "  v{i} = f32[16]{{0}} add(v{0}, v{0})", i - 1);
    }
    let _ = writeln!(
        t,
        "  ROOT r = f32[16]{{0}} negate(v{}), metadata={{op_name=\"jit(f)/neg\" source_file=\"f.py\" source_line=3}}\n}}",
        n - 1
    );
    t
}

/// `n` entry parameters summed in a chain: one argument group per
/// parameter in the peak's scope tree (whose children were searched one by
/// one per buffer: 100,000 parameters took 27 s).
pub fn many_parameters(n: usize) -> String {
    let shapes = vec!["f32[4]{0}"; n].join(", ");
    let mut t = format!(
        "HloModule params, entry_computation_layout={{({shapes})->f32[4]{{0}}}}\n\nENTRY main {{\n"
    );
    for i in 0..n {
        let _ = writeln!(t, "  p{i} = f32[4]{{0}} parameter({i})");
    }
    let _ = writeln!(t, "  a0 = f32[4]{{0}} negate(p0)");
    for i in 1..n {
        let _ = writeln!(t, "  a{i} = f32[4]{{0}} add(a{}, p{i})", i - 1);
    }
    let _ = writeln!(t, "  ROOT r = f32[4]{{0}} negate(a{})\n}}", n - 1);
    t
}

/// A `concatenate` of `n` operands, all the same parameter.
pub fn wide_concatenate(n: usize) -> String {
    let operands = vec!["p"; n].join(", ");
    format!(
        "HloModule concat, entry_computation_layout={{(f32[1]{{0}})->f32[{n}]{{0}}}}\n\n\
         ENTRY main {{\n  p = f32[1]{{0}} parameter(0)\n  \
         ROOT c = f32[{n}]{{0}} concatenate({operands}), dimensions={{0}}\n}}\n"
    )
}

/// `n` outputs, each computed from the one parameter: `n` output
/// allocations that every later output would otherwise test.
pub fn many_outputs(n: usize) -> String {
    let shapes = vec!["f32[16]{0}"; n].join(", ");
    let mut t = format!(
        "HloModule many_outputs, is_scheduled=true, entry_computation_layout={{(f32[16]{{0}})->({shapes})}}\n\n\
         ENTRY main {{\n  p = f32[16]{{0}} parameter(0)\n"
    );
    for i in 0..n {
        let _ = writeln!(t, "  v{i} = f32[16]{{0}} negate(p)");
    }
    let names: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    let _ = writeln!(t, "  ROOT r = ({shapes}) tuple({})\n}}", names.join(", "));
    t
}
