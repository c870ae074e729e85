"""The verdict and the target are the binary's (``hlomem fits``, ``hlomem
targets TARGET``): Python's ``Verdict`` says exactly what the command line
says, and the one Python byte formatter left (``gib``, for the views only
Python draws) prints every size as the binary's ``units::two_decimals`` does."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import hlomem
from hlomem._targets import gib, resolve_target

GIB = 1 << 30
MIB = 1 << 20


def _binary(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [hlomem.find_binary(), *args], capture_output=True, text=True, check=False
    )


def _fits(*args: str) -> dict[str, Any]:
    process = _binary("fits", *args, "--format", "json")
    assert process.returncode in (0, 1), process.stderr
    document: dict[str, Any] = json.loads(process.stdout)
    return document


@pytest.mark.parametrize(
    ("target", "needed", "xla", "at_least", "unfinished"),
    [
        ("tpu-v5e", 97 * GIB, None, False, None),
        ("tpu-v5e", 19 * GIB, 19 * GIB, True, None),
        ("tpu-v6e:2x2", 5 * MIB, 5 * MIB, False, None),
        ("h100", 48 * GIB, int(48.2 * GIB), False, None),
        ("v100", GIB, None, False, "INTERNAL: CUDA Runtime error: ...\nsecond line"),
        ("a100-40:1x1x8", 0, None, False, None),
    ],
)
def test_python_says_what_the_binary_says(
    target: str, needed: int, xla: int | None, at_least: bool, unfinished: str | None
) -> None:
    verdict = hlomem.Verdict(resolve_target(target), needed, xla, at_least, None, unfinished)
    args = ["--target", target, "--needs", str(needed)]
    if xla is not None:
        args += ["--xla-needs", str(xla)]
    if at_least:
        args.append("--refused")
    if unfinished is not None:
        args += ["--unfinished", unfinished]
    text = _binary("fits", *args)
    assert text.returncode == (0 if verdict.fits else 1), text.stderr
    assert str(verdict) + "\n" == text.stdout
    document = _fits(*args)
    assert (verdict.deciding_bytes, verdict.fits, verdict.spare_bytes) == (
        document["deciding_bytes"],
        document["fits"],
        document["spare_bytes"],
    )


def test_fits_and_targets_json_validate(repo_root: Path) -> None:
    for document, output in (
        ("fits", _fits("--target", "h100", "--needs", "1GiB", "--xla-needs", "2GiB")),
        ("targets", json.loads(_binary("targets", "b200:1x1x8", "--format", "json").stdout)),
        ("targets", json.loads(_binary("targets", "--format", "json").stdout)),
    ):
        schema = json.loads((repo_root / f"schema/{document}.schema.json").read_text())
        jsonschema.validate(output, schema)


# Sizes around each boundary of the format: 0, bytes, MiB, 1 GiB - 1 and
# 1 GiB (where MiB turn into GiB), ties of the second decimal (0.125,
# 0.375: whichever way both round them, they round them alike), and large.
SIZES = [
    0,
    1,
    MIB // 8,
    MIB - 1,
    MIB,
    6_500_000,
    3 * MIB // 8 * 1024,
    GIB // 8,
    GIB - 1,
    GIB,
    GIB + 1,
    GIB + GIB // 8,
    int(15.755 * GIB),
]


@pytest.mark.parametrize("size", SIZES)
def test_gib_is_the_binarys_two_decimals(size: int) -> None:
    v5e = resolve_target("tpu-v5e")
    # What it needs: MiB under 1 GiB.
    assert gib(size) == _fits("--target", "tpu-v5e", "--needs", str(size))["words"]["needs"]
    # The spare, in GiB (negative when over): usable - needed.
    for spare in (size, -size):
        needed = v5e.usable_bytes - spare
        if needed < 0:
            continue
        words = _fits("--target", "tpu-v5e", "--needs", str(needed))["words"]
        assert gib(spare, small_in_mib=False) == words["spare"], spare


def test_a_gpu_config_of_ones_own_is_read_by_the_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "l40s.txtpb"
    config.write_text(
        "gpu_device_info {\n  device_memory_size: 48305799168\n}\n"
        'device_description_str: "NVIDIA L40S"\n'
    )
    target = hlomem.gpu_target(config, topology="1x1x2")
    assert (target.device, target.memory_bytes, target.topology) == ("L40S", 48305799168, "1x1x2")
    assert target.share == "JAX's share of an L40S"
    # A Target made by hand is described to the binary by its own fields.
    again = dataclasses.replace(target)
    assert "_words" not in again.__dict__
    assert again == target and again.share == target.share
    with pytest.raises(ValueError, match="a GPU topology is PARTITIONSxHOSTSxGPUS"):
        hlomem.gpu_target(config, topology="8")
    with pytest.raises(ValueError, match="memory_gib must be positive"):
        hlomem.gpu_target(config, memory_gib=0)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "2")
    with pytest.raises(ValueError, match="XLA_PYTHON_CLIENT_MEM_FRACTION='2' is not in"):
        hlomem.gpu_target(config)


def test_device_kinds_come_from_the_binary() -> None:
    from hlomem._targets import device_kinds

    kinds = device_kinds()
    assert kinds["TPU v5 lite"] == "v5e" and kinds["TPU v6 lite"] == "v6e"
    assert set(kinds.values()) == {t["generation"] for t in hlomem._targets._catalog()["tpu"]}


def test_the_libtpu_installed_here_is_named_and_the_binary_takes_it(
    monkeypatch: pytest.MonkeyPatch, repo_root: Path
) -> None:
    import importlib.metadata

    from hlomem import _devices

    installed = {"libtpu": "0.0.52"}

    def version(name: str) -> str:
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(_devices.importlib.metadata, "version", version)
    assert _devices.libtpu_options() == ("--libtpu", "0.0.52")
    installed = {"libtpu-nightly": "0.0.53.dev20261201+nightly"}
    options = _devices.libtpu_options()
    assert options == ("--libtpu", "0.0.53.dev20261201+nightly")
    # The binary takes a nightly's version too (as a release whose rules it
    # does not know), never refusing what pip prints.
    sample = str(repo_root / "samples/tpu_mlp_train_donate/dump")
    assert _binary("analyze", sample, *options).returncode == 0
    installed = {}
    assert _devices.libtpu_options() == ()


@pytest.mark.parametrize(
    "case", ["tpu_mlp_train_donate", "tpu_v6e_mlp_train_donate", "gpu_mlp_train_donate"]
)
def test_xla_totals_are_xlas_memory_usage_report(repo_root: Path, case: str) -> None:
    """The dump's totals come from the binary's reader of XLA's reports: each
    space's allocations are what XLA's own memory-usage report says."""
    from hlomem._xla_dump import read_dump

    folder = repo_root / "samples" / case / "dump"
    dumped = read_dump(folder)
    assert dumped is not None and dumped.xla is not None
    (usage,) = folder.glob("*-memory-usage-report.txt")
    spaces = re.findall(
        r"^Memory Space: (\S+) \(color=\d+\)\nTotal bytes: (\d+)", usage.read_text(), re.MULTILINE
    )
    assert spaces and dumped.xla.by_space == {name: int(n) for name, n in spaces}
    (values,) = folder.glob("*-buffer-assignment-values.txt")
    total = re.search(r"^Total bytes used: (\d+)", values.read_text(), re.MULTILINE)
    assert total is not None and dumped.xla.total_bytes == int(total.group(1))


def test_largest_fits_points_are_decided_by_the_binary() -> None:
    """A compiled point's decision is ``hlomem fits --budget``'s: XLA's figure
    decides where there is one, exactly at the budget fits, a byte over not."""
    from hlomem._measure import FitPoint, Session

    session = Session(
        lambda: None,
        target=None,
        budget="12MiB",
        options={},
        progress=False,
        cache=False,
        need_budget=True,
        caller="test",
    )
    budget = 12 * MIB
    point = FitPoint(
        n=1, label="n=1", fits=None, needed_bytes=None, budget_bytes=None, hlomem_bytes=budget
    )

    def decided(hlomem_bytes: int, xla: int | None) -> tuple[bool | None, int | None, int | None]:
        p = session._decide(dataclasses.replace(point, hlomem_bytes=hlomem_bytes, xla_bytes=xla))
        return p.fits, p.needed_bytes, p.budget_bytes

    assert decided(budget, None) == (True, budget, budget)
    assert decided(budget + 1, None) == (False, budget + 1, budget)
    assert decided(budget, budget + 1) == (False, budget + 1, budget)
    assert decided(budget + 1, budget) == (True, budget, budget)


def test_a_dumped_curve_point_is_decided_by_the_binary(repo_root: Path) -> None:
    """``curve_from_dumps`` decides each size as ``hlomem fits FILE --budget``
    does, on XLA's own figure from the report beside the file."""
    from hlomem.curve import curve_from_dumps

    folder = repo_root / "samples" / "tpu_mlp_train_donate" / "dump"
    (file,) = folder.glob("*jit_sgd_step*after_optimizations.txt")
    xla = _binary("fits", str(file), "--budget", "1GiB", "--format", "json")
    figure = json.loads(xla.stdout)["module"]["xla"]["by_space"][0]["bytes"]
    at = curve_from_dumps({8: folder}, budget=figure).points[0]
    assert (at.fits, at.needed_bytes, at.xla_bytes, at.budget_bytes) == (
        True,
        figure,
        figure,
        figure,
    )
    under = curve_from_dumps({8: file}, budget=figure - 1).points[0]
    assert (under.fits, under.needed_bytes) == (False, figure)


def test_a_curve_says_why_its_figures_are_about(repo_root: Path, tmp_path: Path) -> None:
    """A TPU module read without its chip: the curve's note says the chip was
    assumed (the analysis's own reason, not a fixed sentence); with the dump
    folder, whose target_arguments.txt names the chip, there is no such note."""
    import shutil

    from hlomem.curve import curve_from_dumps

    folder = repo_root / "samples" / "tpu_v6e_mlp_train_donate" / "dump"
    (file,) = folder.glob("*jit_sgd_step*after_optimizations.txt")
    alone = tmp_path / "module.txt"
    shutil.copy(file, alone)
    point = curve_from_dumps({8: alone}, budget="1GiB").points[0]
    assert (point.exact, point.estimated_because) == (False, ("chip-assumed",))
    notes = curve_from_dumps({8: alone}, budget="1GiB").notes
    assert any("about at 1 of the 1 points: the TPU chip was assumed" in n for n in notes), notes
    named = curve_from_dumps({8: folder}, budget="1GiB")
    assert named.points[0].exact and named.points[0].estimated_because == ()
    assert not any("about" in n for n in named.notes), named.notes
