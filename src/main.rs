use std::process::ExitCode;

fn main() -> ExitCode {
    tune_allocator();
    let code = hlomem_cli::run();
    report_peak_rss();
    code
}

/// With `HLOMEM_REPORT_PEAK_RSS` set, the process's peak resident memory
/// (`VmHWM`) goes to standard error at exit, for the memory checks (the
/// corpus test, `measure/`). A parent's `wait4` cannot tell it: a child forked
/// from a big test process counts the parent's pages until it execs.
fn report_peak_rss() {
    if std::env::var_os("HLOMEM_REPORT_PEAK_RSS").is_none() {
        return;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    if let Some(kib) = kib {
        eprintln!("hlomem: peak RSS {} bytes", kib * 1024);
    }
}

#[path = "cli/mod.rs"]
mod hlomem_cli;

/// Two settings of glibc's malloc that bound the memory a big module peaks at
/// (BENCHMARKS.md: 24 MB lower on the 26 MB 192-layer module, 11 MB on the
/// 13 MB one; about 5% slower on the biggest, the price of mapping big
/// blocks afresh):
///
/// - glibc gives a freed block back to the system only above a threshold
///   that grows with the biggest block freed so far, so the big buffers of
///   one stage (a module's lines, a parse's tables) stayed mapped through the
///   next. A fixed threshold returns every block above 64 KiB when freed
///   (and keeps growing such blocks cheap: `mremap`). 64 KiB rather than
///   256: half a megabyte less at the peak of the 6.6 MB 48-layer module, in
///   the same time; 32 KiB is more again (page rounding of more blocks).
/// - glibc gives each thread that allocates an arena of its own, up to eight
///   per core, each keeping its own freed memory. One per worker thread is
///   enough: the main thread waits while the workers run.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator() {
    let workers = i32::try_from(rayon::current_num_threads()).unwrap_or(i32::MAX);
    // SAFETY: `mallopt` only sets the allocator's parameters, which glibc
    // reads under its own locks; a refusal (return value 0) leaves the
    // defaults, which are correct, only larger.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, workers.max(1));
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}
