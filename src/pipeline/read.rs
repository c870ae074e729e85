//! Reading input files: the one place hlomem opens a file it analyzes.

use std::path::Path;

use crate::error::Error;
use crate::source::{SourceFile, MAX_FILE_BYTES};
use crate::units::human_bytes;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Reads a text file; refuses a folder, a file too large to address or to
/// analyze within this process's memory limit, and non-UTF-8 text (with the
/// position of the first bad byte).
pub fn read_source(path: &Path) -> Result<SourceFile, Error> {
    let metadata = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if metadata.is_dir() {
        return Err(Error::Usage(format!(
            "{} is a folder; give an HLO text file here (`hlomem analyze` reads whole dump folders)",
            path.display()
        )));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            bytes: metadata.len(),
        });
    }
    if let Some((limit, source)) = super::host::memory_limit() {
        let needed = super::host::memory_needed(metadata.len());
        if needed > limit {
            return Err(Error::Usage(format!(
                "{} is {}; analyzing it needs up to {} of memory, more than {} allows ({}); \
                 run hlomem where more memory is available",
                path.display(),
                human_bytes(metadata.len()),
                human_bytes(needed),
                source,
                human_bytes(limit),
            )));
        }
    }
    let bytes = read_bytes(path, metadata.len()).map_err(|e| Error::io(path, e))?;
    decode(path, bytes)
}

/// Files this large are read in two halves at once (on Unix, where a file
/// can be read at an offset without moving a shared cursor).
#[cfg(unix)]
const SPLIT_READ_BYTES: u64 = 4 << 20;

/// The file's bytes. Reading a big file is mostly the kernel's work, zeroing
/// fresh pages and copying into them, so a big one is read as two halves on
/// two cores (the 26 MB 192-layer step: 20 ms on one). Anything unexpected
/// (the file changed size since `len` was read, a short read) falls back to
/// one plain read.
fn read_bytes(path: &Path, len: u64) -> std::io::Result<Vec<u8>> {
    #[cfg(unix)]
    if len >= SPLIT_READ_BYTES && rayon::current_num_threads() > 1 {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(path)?;
        let len = usize::try_from(len).map_err(std::io::Error::other)?;
        let mut bytes = vec![0u8; len];
        let (low, high) = bytes.split_at_mut(len / 2);
        let (a, b) = rayon::join(
            || file.read_exact_at(low, 0),
            || file.read_exact_at(high, (len / 2) as u64),
        );
        // One byte more means the file grew: read it whole instead.
        let grew = file.read_at(&mut [0u8], len as u64).map_or(true, |n| n > 0);
        if a.is_ok() && b.is_ok() && !grew {
            return Ok(bytes);
        }
    }
    let _ = len;
    std::fs::read(path)
}

/// Text from bytes already in memory (standard input, tests): a byte-order
/// mark is skipped, non-UTF-8 is refused with the position of the first bad byte.
pub fn decode(path: &Path, mut bytes: Vec<u8>) -> Result<SourceFile, Error> {
    // A byte-order mark (editors on Windows add one) is not text.
    if bytes.starts_with(UTF8_BOM) {
        bytes.drain(..UTF8_BOM.len());
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SourceFile::from_text(path, text)),
        Err(e) => {
            let offset = e.utf8_error().valid_up_to();
            // Keep the valid prefix so the error can show the line and column.
            let mut bytes = e.into_bytes();
            bytes.truncate(offset);
            let text = String::from_utf8(bytes).unwrap_or_default();
            Err(Error::Encoding {
                file: Box::new(SourceFile::from_text(path, text)),
                offset,
            })
        }
    }
}

/// XLA's reports beside an HLO file (same name, `-<kind>.txt`), parsed;
/// `None` if there are none.
pub fn xla_reports(hlo: &Path) -> Result<Option<crate::xla_report::XlaReports>, Error> {
    let sibling = |kind: &str| -> Result<Option<SourceFile>, Error> {
        let Some(stem) = hlo
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".txt"))
        else {
            return Ok(None);
        };
        let path = hlo.with_file_name(format!("{stem}-{kind}.txt"));
        if path.is_file() {
            read_source(&path).map(Some)
        } else {
            Ok(None)
        }
    };
    crate::xla_report::XlaReports::from_files(
        sibling("buffer-assignment")?,
        sibling("buffer-assignment-values")?,
        sibling("live-range")?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_utf8_is_refused_with_its_position() {
        let err = decode(Path::new("bad.txt"), b"HloModule m\n  %x\xff = 1".to_vec()).unwrap_err();
        match err {
            Error::Encoding { file, offset } => {
                assert_eq!(offset, 16);
                assert_eq!(file.line_col(offset), (2, 5));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A big file read in two halves is the file, byte for byte, including
    /// when the size given is stale (the file changed after it was taken).
    #[test]
    fn a_big_file_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.txt");
        let len = SPLIT_READ_BYTES as usize + 12_345;
        let bytes: Vec<u8> = (0..len).map(|i| b'a' + (i * 7 % 26) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert!(read_bytes(&path, len as u64).unwrap() == bytes);
        for stale in [len as u64 - 1000, len as u64 + 1000] {
            assert!(
                read_bytes(&path, stale).unwrap() == bytes,
                "stale size {stale}"
            );
        }
    }
}
