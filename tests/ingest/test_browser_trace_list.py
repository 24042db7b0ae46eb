"""The Traces list keeps its State, Findings and Created columns in view with a long-label
trace present (an agent `wrap` trace: its command line as name and label), on a desktop
(1440x900) and a phone (390x844), light and dark (issue 32). Screenshots in
test-artifacts/browser/."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from ingest.uploads import create_trace
from tests.support.fixtures import SHOTS, log_in
from tests.support.phone_layout import assert_fits

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
SIZES = {"desktop": {"viewport": {"width": 1440, "height": 900}},
         "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}}
COMMAND = ("torchrun --nnodes=4 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=gpu-node-017.cluster.internal"
           ".example.com:29500 train.py --config=configs/llama-70b-pretrain-fsdp-hsdp-8x8-bf16.yaml "
           "--max-steps=1000000 --checkpoint-dir=/mnt/checkpoints/llama-70b/run-2026-12-05T23:14:07Z")

# where each cell of the named columns sits: in view (inside the window, not clipped by a parent)
CELLS = """() => [...document.querySelectorAll('tr.trace-row')].flatMap(tr =>
  ['td.trace-state', 'td.trace-findings', 'td.trace-created'].map(sel => {
    const td = tr.querySelector(sel), r = td.getBoundingClientRect();
    return {sel, left: r.left, right: r.right, width: r.width, height: r.height,
            visible: getComputedStyle(td).display !== 'none' && getComputedStyle(td).visibility !== 'hidden'};
  }))"""


@pytest.fixture
def traces(infra, alice):
    short = create_trace(infra, alice, [SimpleUploadedFile("train.log", b"step 1 loss 2.0\n")], name="short one",
                         labels={"env": "dev"})
    wrap = create_trace(infra, alice, [SimpleUploadedFile("run.log", b"NCCL WARN timeout\n")],
                        name=f"gpu-node-017.cluster.internal.example.com: {COMMAND} (exit 1)",
                        labels={"host": "gpu-node-017.cluster.internal.example.com", "command": COMMAND,
                                "exit_code": "1", "agent": "tracedoc-agent wrap", "job": "llama-70b-pretrain-" + "x" * 80})
    return [short, wrap]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_state_findings_and_created_stay_in_view(traces, live_server, browser, size, scheme):
    SHOTS.mkdir(parents=True, exist_ok=True)
    width = SIZES[size]["viewport"]["width"]
    page = browser.new_context(color_scheme=scheme, **SIZES[size]).new_page()
    log_in(page, live_server.url + "/")
    page.wait_for_selector("tr.trace-row")
    assert page.locator("tr.trace-row").count() == 2
    cells = page.evaluate(CELLS)
    edge = min(width, page.evaluate("() => document.querySelector('main').getBoundingClientRect().right"))
    assert len(cells) == 6
    for c in cells:
        assert c["visible"] and c["width"] > 0 and c["height"] > 0, c
        assert 0 <= c["left"] and c["right"] <= edge + 1, f"{size}: {c['sel']} reaches {c['right']:.0f} px"
    assert_fits(page, "traces list", width)
    page.screenshot(path=str(SHOTS / f"trace_list_long_labels_{size}_{scheme}.png"), full_page=True)
