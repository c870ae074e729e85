//! Reading standard input (`hlomem analyze -`, `hlomem explain`): the one
//! place hlomem reads it, read whole and once.

use std::io::{IsTerminal, Read};

/// All of standard input; `what` names what is expected ("the message",
/// "HLO text") in the prompt on a terminal and in the error when there is none.
pub fn read_stdin(what: &str) -> Result<Vec<u8>, String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("hlomem: reading {what} from the terminal; paste it, then press Ctrl-D");
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read standard input: {e}"))?;
    if bytes.is_empty() {
        let state = if stdin_is_closed() {
            "closed (or /dev/null)"
        } else {
            "empty"
        };
        return Err(format!(
            "standard input is {state}; give {what} as a file, or pipe it in"
        ));
    }
    Ok(bytes)
}

/// Rust opens /dev/null in place of a closed standard input, so a closed one
/// reads as empty; this tells them apart from an empty pipe.
#[cfg(unix)]
fn stdin_is_closed() -> bool {
    use std::os::unix::fs::MetadataExt;
    match (
        std::fs::metadata("/dev/stdin"),
        std::fs::metadata("/dev/null"),
    ) {
        (Ok(i), Ok(n)) => i.dev() == n.dev() && i.ino() == n.ino(),
        (Err(_), _) => true,
        _ => false,
    }
}

#[cfg(not(unix))]
fn stdin_is_closed() -> bool {
    false
}
