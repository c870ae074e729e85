"""A mutation campaign: N mutants of real dumps, each given to XLA's parser
(jaxlib's `hlo_module_from_text`) and to `hlomem analyze`; counts the
mutants XLA refuses and hlomem accepts (the number issue #36 wants at 0),
and any crash or hang.

    python measure/mutants/campaign.py --hlomem target/release/hlomem -n 4000 [--strict] [--show 5] FILES...
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from mutate import MUTATIONS
from xla_parser import XlaParser


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--hlomem", default="target/release/hlomem")
    ap.add_argument("-n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--show", type=int, default=3)
    ap.add_argument("--keep", help="folder to keep the accepted-but-refused mutants in")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts = {f: Path(f).read_text() for f in args.files}
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    shown: collections.Counter[str] = collections.Counter()
    made = 0
    tries = 0
    xla = XlaParser()
    with tempfile.TemporaryDirectory() as tmp:
        while made < args.n and tries < args.n * 20:
            tries += 1
            kind = rng.choice(list(MUTATIONS))
            path = rng.choice(args.files)
            mutant = MUTATIONS[kind](texts[path], rng)
            if mutant is None or mutant == texts[path]:
                continue
            made += 1
            refused = xla.refuses(mutant)
            file = os.path.join(tmp, "m.txt")
            with open(file, "w") as f:
                f.write(mutant)
            cmd = [args.hlomem, "analyze", file, "--format", "json"] + (
                ["--strict"] if args.strict else []
            )
            try:
                p = subprocess.run(cmd, capture_output=True, timeout=60, check=False)
                code = p.returncode
            except subprocess.TimeoutExpired:
                code = "hang"
            c = counts[kind]
            c["made"] += 1
            c["xla_refuses"] += refused
            if code not in (0, 2):
                c["crash"] += 1
                print(f"CRASH {kind} {path} code={code}: {p.stderr[-300:]!r}")
            if refused and code == 0:
                c["wrongly_accepted"] += 1
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    with open(
                        os.path.join(args.keep, f"{kind}.{c['wrongly_accepted']}.txt"), "w"
                    ) as f:
                        f.write(mutant)
                if shown[kind] < args.show:
                    shown[kind] += 1
                    import difflib

                    diff = [
                        l
                        for l in difflib.unified_diff(
                            texts[path].split("\n"), mutant.split("\n"), lineterm="", n=0
                        )
                        if l[:1] in "+-" and l[:3] not in ("+++", "---")
                    ]
                    print(f"ACCEPTED {kind} {os.path.basename(path)}: {diff[:4]}")
            if not refused and code == 2:
                c["refused_xla_accepts"] += 1
    total = collections.Counter()
    for kind, c in sorted(counts.items()):
        print(
            f"{kind:28} made {c['made']:5}  xla refuses {c['xla_refuses']:5}  hlomem accepts those {c['wrongly_accepted']:4}  hlomem refuses, xla accepts {c['refused_xla_accepts']:4}  crash {c['crash']}"
        )
        total.update(c)
    print(
        f"{'total':28} made {total['made']:5}  xla refuses {total['xla_refuses']:5}  hlomem accepts those {total['wrongly_accepted']:4}  hlomem refuses, xla accepts {total['refused_xla_accepts']:4}  crash {total['crash']}"
    )
    return 1 if total["wrongly_accepted"] or total["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
