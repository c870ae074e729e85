//! The whole pipeline on modules that parse (and so pass the verifier), with
//! fusion bodies parsed on demand as `analyze` does: accounting, findings,
//! report, every renderer but HTML.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(module) = hlomem::parse_text_on_demand("fuzz_cpu_after_optimizations.txt", text) else {
        return;
    };
    // A body read on demand may be broken: the read fails then, as the pipeline does.
    let Ok(summary) = module.read(|module| {
        let target = hlomem::chip::Target::detect(module);
        let model = hlomem::analysis::analyze(module, &target);
        hlomem::pipeline::report_module(module, &model)
    }) else {
        return;
    };
    let report = hlomem::Report { modules: vec![summary], errors: vec![] };
    use hlomem::render::AnalyzeFormat;
    for format in [AnalyzeFormat::Text, AnalyzeFormat::Json, AnalyzeFormat::Markdown, AnalyzeFormat::Github] {
        let _ = hlomem::render::render(&report, format, Default::default(), &mut std::io::sink());
    }
});
