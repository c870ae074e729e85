//! Each stage of `hlomem analyze` on its own, on the largest modules at hand:
//! parse, graph + dataflow (aliasing), live ranges, buffer assignment with the
//! heap simulation, findings, and the report with its JSON rendering.
//!
//! Inputs: the shared corpus's 48-layer transformer (`HLOMEM_CORPUS`, default
//! `../shared`) and the 96- and 192-layer modules `measure/make_data.sh` makes under
//! `target/bench-data/` (not committed: 13 and 26 MB). Missing inputs are skipped
//! with a note. `HLOMEM_BENCH_ONLY=192` keeps the inputs whose name contains it.

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hlomem::analysis::schedule::Schedule;
use hlomem::analysis::{self, assign, dataflow::Dataflow, graph::ModuleGraph, liveness};
use hlomem::hlo::Module;
use hlomem::render::{render, AnalyzeFormat as Format, RenderOptions};

const MODULE: &str = "module_0000.jit_train_step.cpu_after_optimizations.txt";

fn inputs() -> Vec<(String, PathBuf)> {
    let corpus =
        std::env::var_os("HLOMEM_CORPUS").map_or_else(|| PathBuf::from("../shared"), PathBuf::from);
    let mut found = Vec::new();
    let candidates = [
        (
            "48L",
            corpus
                .join("corpus/cases/big_transformer_48L_unrolled/dump")
                .join(MODULE),
        ),
        (
            "96L",
            Path::new("target/bench-data/big_transformer_96L_unrolled/dump").join(MODULE),
        ),
        (
            "192L",
            Path::new("target/bench-data/big_transformer_192L_unrolled/dump").join(MODULE),
        ),
    ];
    let only = std::env::var("HLOMEM_BENCH_ONLY").unwrap_or_default();
    for (name, path) in candidates {
        if !name.contains(&only) {
            continue;
        }
        if path.exists() {
            found.push((name.to_string(), path));
        } else {
            eprintln!(
                "skipping {name}: {} not found (measure/make_data.sh makes it)",
                path.display()
            );
        }
    }
    found
}

fn stages(c: &mut Criterion) {
    for (name, path) in inputs() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let module = hlomem::parse_text_on_demand(&path, text.clone()).expect("parses");
        module
            .read(|module| stages_of(c, &name, &path, &text, module))
            .expect("the bodies read parse");
    }
}

/// Each stage on one module (`module`, read already).
fn stages_of(c: &mut Criterion, name: &str, path: &Path, text: &str, module: &Module) {
    let bytes = text.len() as u64;
    let aliases = &module.header.input_output_alias;
    let target = hlomem::chip::Target::detect(module);
    let graph = ModuleGraph::build(module);
    let schedule = Schedule::build(module, &graph);
    let dataflow = Dataflow::build(module, &graph, aliases, &target);
    let ranges = liveness::live_ranges(module, aliases, &dataflow, &schedule, &target);
    let model = analysis::analyze(module, &target);
    let report = hlomem::Report {
        modules: vec![hlomem::pipeline::report_module(module, &model)],
        errors: Vec::new(),
    };

    let mut group = c.benchmark_group(format!("stages/{name}"));
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    // As `analyze` parses: fusion bodies when read (the stages below then
    // find the bodies they read parsed already).
    group.bench_function(BenchmarkId::from_parameter("parse"), |b| {
        b.iter(|| hlomem::parse_text_on_demand(path, text).expect("parses"))
    });
    // Every line, as `--strict` and `load_module` parse.
    group.bench_function(BenchmarkId::from_parameter("parse-strict"), |b| {
        b.iter(|| hlomem::parse_text(path, text).expect("parses"))
    });
    // Parse, accounting, findings and report from the text: the cold path.
    group.bench_function(BenchmarkId::from_parameter("end-to-end"), |b| {
        b.iter(|| {
            let module = hlomem::parse_text_on_demand(path, text).expect("parses");
            module
                .read(|module| {
                    let model = analysis::analyze(module, &hlomem::chip::Target::detect(module));
                    hlomem::pipeline::report_module(module, &model)
                })
                .expect("the bodies read parse")
        })
    });
    group.bench_function(BenchmarkId::from_parameter("graph+dataflow"), |b| {
        b.iter(|| {
            let graph = ModuleGraph::build(module);
            let schedule = Schedule::build(module, &graph);
            (Dataflow::build(module, &graph, aliases, &target), schedule)
        })
    });
    group.bench_function(BenchmarkId::from_parameter("live-ranges"), |b| {
        b.iter(|| liveness::live_ranges(module, aliases, &dataflow, &schedule, &target))
    });
    group.bench_function(BenchmarkId::from_parameter("assignment+heap"), |b| {
        b.iter(|| {
            assign::assign(
                module, aliases, &graph, &dataflow, &ranges, &schedule, &target,
            )
        })
    });
    group.bench_function(BenchmarkId::from_parameter("whole-accounting"), |b| {
        b.iter(|| analysis::analyze(module, &target))
    });
    group.bench_function(BenchmarkId::from_parameter("findings"), |b| {
        b.iter(|| hlomem::findings::run(module, &model, &hlomem::usage::peak_usage(module, &model)))
    });
    group.bench_function(BenchmarkId::from_parameter("report+json"), |b| {
        b.iter(|| {
            let report = hlomem::Report {
                modules: vec![hlomem::pipeline::report_module(module, &model)],
                errors: Vec::new(),
            };
            let mut out = Vec::with_capacity(1 << 20);
            render(&report, Format::Json, RenderOptions::default(), &mut out).expect("in memory");
            out
        })
    });
    group.bench_function(BenchmarkId::from_parameter("json-only"), |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(1 << 20);
            render(&report, Format::Json, RenderOptions::default(), &mut out).expect("in memory");
            out
        })
    });
    group.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
