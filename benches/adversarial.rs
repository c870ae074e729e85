//! How parse + accounting time grows on the module shapes that used to be
//! quadratic or to overflow the stack (`measure/shapes.rs`): each at sizes 3x
//! apart, so the ratio of two times shows the growth (3x is linear).
//! `cargo bench --bench adversarial`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

#[path = "../measure/shapes.rs"]
mod shapes;

fn analyze(text: &str) -> u64 {
    let module = hlomem::parse_text("shape.txt", text.to_string()).expect("parses");
    let model = hlomem::analysis::analyze(&module, &hlomem::chip::Target::detect(&module));
    // What holds the peak too: its search for values without a line was
    // exponential on `diamonds`.
    let usage = hlomem::usage::peak_usage(&module, &model);
    model.totals.total_bytes + usage.by_source.len() as u64
}

fn adversarial(c: &mut Criterion) {
    type Make = fn(usize) -> String;
    let cases: [(&str, Make, &[usize]); 8] = [
        ("chain", shapes::chain, &[20_000, 60_000, 180_000]),
        ("fan-out", shapes::fan_out, &[20_000, 60_000, 180_000]),
        (
            "nested-calls",
            shapes::nested_calls,
            &[2_222, 6_667, 20_000],
        ),
        (
            "nested-whiles",
            shapes::nested_whiles,
            &[2_222, 6_667, 20_000],
        ),
        (
            "concatenate",
            shapes::wide_concatenate,
            &[333_333, 1_000_000],
        ),
        ("outputs", shapes::many_outputs, &[20_000, 60_000]),
        // Values without a source line read twice each: the peak groups'
        // search (the pipeline's usage step, run here directly).
        ("diamonds", shapes::diamonds, &[20_000, 60_000, 180_000]),
        (
            "parameters",
            shapes::many_parameters,
            &[11_111, 33_333, 100_000],
        ),
    ];
    for (name, make, sizes) in cases {
        let mut group = c.benchmark_group(format!("adversarial/{name}"));
        group.sample_size(10);
        for &n in sizes {
            let text = make(n);
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
                b.iter(|| analyze(text))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, adversarial);
criterion_main!(benches);
