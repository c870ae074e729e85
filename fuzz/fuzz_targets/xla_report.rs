//! XLA's report grammars on arbitrary text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // One input feeds all three readers: split at the first two NUL bytes if present.
    let mut parts = text.splitn(3, '\0');
    let (a, b, c) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let _ = hlomem::xla_report::XlaReports::from_texts(a, b, c);
});
