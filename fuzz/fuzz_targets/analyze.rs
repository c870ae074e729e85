//! The whole pipeline on modules that parse: accounting, findings, report,
//! every renderer. Odd modules (a computation calling itself, operands of the
//! wrong arity, a while without a body) must not make the analyses panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(module) = hlomem::parse_text("fuzz_cpu_after_optimizations.txt", text) else { return };
    let target = hlomem::target::Target::detect(&module);
    let model = hlomem::analysis::analyze(&module, &target);
    let summary = hlomem::report::ModuleReport::build(&module, &model);
    let report = hlomem::Report { modules: vec![summary], errors: vec![] };
    for format in [hlomem::render::Format::Text, hlomem::render::Format::Json, hlomem::render::Format::Markdown, hlomem::render::Format::Github] {
        let _ = hlomem::render::render(&report, format, Default::default(), &mut std::io::sink());
    }
});
