# The corpus helper that ../shared/corpus/cases/*/program.py imports (the original is not
# published with the corpus): sets XLA_FLAGS before jax is imported, compiles, and
# records memory_analysis() and the dump's "Total bytes used:" in truth.json.
import glob
import json
import os
import re
import sys
import time

OUT_ROOT = os.environ.get("CORPUS_OUT_ROOT", "target/bench-data")


def _total_bytes_used(dump_dir, prefix):
    for suffix in ("-buffer-assignment-values.txt", "-buffer-assignment.txt"):
        for f in sorted(glob.glob(os.path.join(dump_dir, prefix + "*" + suffix))):
            with open(f) as fh:
                for line in fh:
                    m = re.match(r"\s*Total bytes used:\s*(\d+)", line)
                    if m:
                        return int(m.group(1)), os.path.basename(f), line.strip()
    return None, None, None


class Recorder:
    def __init__(self, case, family, dump_dir, flags, x64):
        self.case, self.family, self.dump_dir, self.flags, self.x64 = (
            case,
            family,
            dump_dir,
            flags,
            x64,
        )
        self.modules, self.notes = [], []
        self.t0 = time.time()

    def note(self, s):
        self.notes.append(s)

    def compile(self, label, jitted, *args, donate_argnums=(), description="", expected=""):
        t = time.time()
        lowered = jitted.lower(*args)
        t_lower = time.time() - t
        t = time.time()
        compiled = lowered.compile()
        t_comp = time.time() - t
        ma = compiled.memory_analysis()
        fields = (
            "argument_size_in_bytes",
            "output_size_in_bytes",
            "alias_size_in_bytes",
            "temp_size_in_bytes",
            "generated_code_size_in_bytes",
            "peak_memory_in_bytes",
        )
        mad = {k: int(getattr(ma, k)) for k in fields if hasattr(ma, k)}
        self.modules.append(
            {
                "label": label,
                "donate_argnums": list(donate_argnums),
                "description": description,
                "expected_memory_behavior": expected,
                "memory_analysis": mad,
                "lower_seconds": round(t_lower, 3),
                "compile_seconds": round(t_comp, 3),
            }
        )
        print(f"[{label}] memory_analysis: {mad}", flush=True)
        return compiled

    def finish(self):
        import jax

        # dump files are written during compile; map each module to its dump prefix
        after = sorted(glob.glob(os.path.join(self.dump_dir, "*after_optimizations.txt")))
        prefixes = sorted({os.path.basename(f).split(".cpu_after")[0] for f in after})
        total = {}
        for p in prefixes:
            tb, fname, line = _total_bytes_used(self.dump_dir, p)
            total[p] = {"total_bytes_used": tb, "found_in": fname, "line": line}
        mods = self.modules
        truth = {
            "case": self.case,
            "family": self.family,
            "jax_version": jax.__version__,
            "platform": jax.devices()[0].platform,
            "device_count": jax.device_count(),
            "x64": bool(jax.config.jax_enable_x64),
            "xla_flags": self.flags,
            "command": "python program.py " + self.case,
            "memory_analysis": mods[0]["memory_analysis"] if len(mods) == 1 else None,
            "total_bytes_used": (
                next(iter(total.values()))["total_bytes_used"] if len(total) == 1 else None
            ),
            "total_bytes_used_by_prefix": total,
            "after_optimizations_files": after,
            "modules": mods,
            "notes": self.notes,
            "wall_seconds": round(time.time() - self.t0, 2),
        }
        out = os.path.join(OUT_ROOT, self.case, "truth.json")
        with open(out, "w") as fh:
            json.dump(truth, fh, indent=1)
        print("wrote", out, flush=True)


def init(case, family, keep_helper_modules=False, x64=False, extra_flags=(), devices=None):
    if "jax" in sys.modules:
        raise RuntimeError("init() must run before jax is imported")
    case_dir = os.path.join(OUT_ROOT, case)
    dump_dir = os.path.join(case_dir, "dump")
    os.makedirs(dump_dir, exist_ok=True)
    if glob.glob(os.path.join(dump_dir, "*")):
        raise RuntimeError(f"dump dir {dump_dir} not empty")
    flags = [f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text"] + list(extra_flags)
    if devices:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    os.environ["XLA_FLAGS"] = " ".join(flags)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if x64:
        os.environ["JAX_ENABLE_X64"] = "1"
    return Recorder(case, family, dump_dir, flags, x64)
