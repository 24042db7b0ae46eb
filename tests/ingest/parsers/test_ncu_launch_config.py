"""Nsight Compute CSV: a kernel launched with a degenerate configuration is named by
`kernel.degenerate-launch` with its grid, block and why it matters (issue 33). Fixtures: a real
`ncu --csv` capture on an H100 (tests/fixtures/captures/h100_issue33, make_captures.py): torch's
single-thread spin_kernel, a one-block one-warp Triton kernel, and well-shaped kernels beside them."""
from __future__ import annotations

from pathlib import Path

import pytest

from diagnosis.engine import scenarios
from ingest.engine.parsers.ncu.launch import shape

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures" / "h100_issue33"


@pytest.mark.parametrize("page", ["details", "raw"])
def test_kernel_rows_carry_their_launch_shape(parse, page):
    result, df = parse(CAPTURES / f"ncu_degenerate_{page}.csv")
    assert result.format == "ncu_csv" and not result.error
    kernels = {r.name: r.a for r in df[df.kind == "kernel"].itertuples()}
    spin = kernels["cuda::<unnamed>::spin_kernel(long)"]
    assert (spin["grid"], spin["block"], spin["threads"], spin["sm_count"]) == ("1x1x1", "1x1x1", 1, 132)
    assert spin["launch_problem"] == "single_thread"
    assert kernels["one_block_sum"]["launch_problem"] == "single_block"
    healthy = [a for name, a in kernels.items() if "vectorized_elementwise_kernel" in name]
    assert healthy and all("launch_problem" not in a for a in healthy)


@pytest.mark.parametrize("page", ["details", "raw"])
def test_the_rule_names_each_degenerate_kernel(page):
    report = scenarios.report(CAPTURES / f"ncu_degenerate_{page}.csv")
    found = [f for f in report["findings"] if f["rule_id"] == "kernel.degenerate-launch"]
    text = " ".join(f["explanation"] for f in found)
    assert len(found) == 2 and all(f["severity"] == "warning" for f in found)
    assert '"cuda::<unnamed>::spin_kernel(long)" was launched with grid 1x1x1 and block 1x1x1' in text
    assert "one thread runs the whole kernel" in text and "of its 132" in text
    assert '"one_block_sum" was launched with grid 1x1x1 and block 32x1x1' in text and "55.3 ms" in text
    assert "vectorized_elementwise_kernel" not in text


def test_healthy_profiles_stay_quiet(corpus_dir):
    report = scenarios.report(corpus_dir / "h200" / "ncu")
    assert not [f for f in report["findings"] if f["rule_id"] == "kernel.degenerate-launch"]


@pytest.mark.parametrize("block, grid, sms, problem", [
    ("(1, 1, 1)", "(1, 1, 1)", 132, "single_thread"),
    ("(16, 1, 1)", "(4096, 1, 1)", 132, "sub_warp_blocks"),
    ("(4, 4, 1)", "(64, 64, 1)", 132, "sub_warp_blocks"),   # 16 threads a block in two dimensions
    ("(1024, 1, 1)", "(1, 1, 1)", 132, "single_block"),
    ("(1024, 1, 1)", "(1, 1, 1)", 1, None),                 # one SM: one block is all of it
    ("(128, 1, 1)", "(2, 66, 1)", 132, None),
    ("(128, 1, 1)", "bad", 132, None),
])
def test_launch_shapes(block, grid, sms, problem):
    assert shape(block, grid, sms).get("launch_problem") == problem
