//! The OOM message grammar and the explanation on arbitrary text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(message) = hlomem::oom::read(&text) {
        let explanation = hlomem::oom::explain::explain(&message, None);
        let report = hlomem::report::explain::ExplainReport::build(&message, explanation);
        use hlomem::render::ExplainFormat;
        for format in [ExplainFormat::Text, ExplainFormat::Json, ExplainFormat::Markdown] {
            let _ = hlomem::render::render_explain(&report, format, Default::default(), &mut std::io::sink());
        }
    }
});
