//! Parse throughput on real modules. The big one lives in the shared corpus
//! (`HLOMEM_CORPUS`, default `../shared`); without it only the samples run.
//! Compare with XLA's own parser: `python measure/compare_xla.py`.

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn corpus_file(relative: &str) -> Option<PathBuf> {
    let root =
        std::env::var_os("HLOMEM_CORPUS").map_or_else(|| PathBuf::from("../shared"), PathBuf::from);
    let path = root.join(relative);
    path.exists().then_some(path)
}

fn bench_file(c: &mut Criterion, name: &str, path: &Path) {
    let text = std::fs::read_to_string(path).expect("readable");
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.bench_function(name, |b| {
        b.iter(|| hlomem::parse_text(path, text.clone()).expect("parses"));
    });
    group.finish();
}

fn parse(c: &mut Criterion) {
    bench_file(
        c,
        "mlp_train_donate (sample)",
        Path::new(
            "samples/mlp_train_donate/dump/module_0000.jit_sgd_step.cpu_after_optimizations.txt",
        ),
    );
    match corpus_file("corpus/cases/big_transformer_48L_unrolled/dump/module_0000.jit_train_step.cpu_after_optimizations.txt") {
        Some(path) => bench_file(c, "big_transformer_48L_unrolled", &path),
        None => eprintln!("skipping big_transformer_48L_unrolled: set HLOMEM_CORPUS to the shared/ folder"),
    }
}

criterion_group!(benches, parse);
criterion_main!(benches);
