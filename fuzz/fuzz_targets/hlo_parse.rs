//! The HLO grammar and IR building on arbitrary bytes: an error or a module, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.txt");
    if let Ok(file) = hlomem::pipeline::decode(path, data.to_vec()) {
        if let Err(e) = hlomem::hlo::parse_module(file) {
            let _ = e.render(false);
        }
    }
});
