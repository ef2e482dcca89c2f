"""`view DUMP --compare B` rendered: Model Explorer's own server and web page, drawn by a
headless Chromium, colour the first divergence's node, and only it, red.

Where the red must be is known independently of the tool: B is A with one constant scaled
by 1.25, so the multiply that reads it (`mul.2`) is the first divergence.  The test finds
the red (#d32f2f, what `view` marks with) pixels of the graph's canvas in a screenshot,
clicks them, and reads the node Model Explorer's own info panel says was selected.

Needs the `playwright` Python package (pip) and a Chromium it can drive: playwright's own
browser download, or an executable named by HLO_ROUNDTRIP_CHROMIUM or found on PATH
(Debian's `chromium-headless-shell` works: `apt-get install chromium-headless-shell`, or
its .deb and its libraries' extracted anywhere with LD_LIBRARY_PATH pointing at them).
Without either it is skipped, saying which is missing."""

from __future__ import annotations

import io
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("model_explorer", reason="Model Explorer is the `graph` extra (pip install '.[graph]')")
sync_api = pytest.importorskip("playwright.sync_api", reason="rendering needs the `playwright` package (pip)")
PIL_Image = pytest.importorskip("PIL.Image", reason="reading the screenshot needs Pillow")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "tests", "dumps", "cpu", "mlp_grad.hlo")
MARKED_RGB = (0xD3, 0x2F, 0x2F)  # converter/tools/graph.py node_data: the marked nodes' bgColor
CHROMIUM_NAMES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "headless_shell")


def chromium_executable(playwright) -> str | None:
    """HLO_ROUNDTRIP_CHROMIUM, else a Chromium on PATH (or Debian's place for it), else
    None for playwright's own download (checked to exist)."""
    named = os.environ.get("HLO_ROUNDTRIP_CHROMIUM")
    if named:
        return named
    for name in CHROMIUM_NAMES:
        found = shutil.which(name) or (f"/usr/lib/chromium/{name}" if os.path.exists(f"/usr/lib/chromium/{name}")
                                       else None)
        if found:
            return found
    if os.path.exists(playwright.chromium.executable_path):
        return None
    pytest.skip("no Chromium: set HLO_ROUNDTRIP_CHROMIUM, put chromium-headless-shell on PATH, or run "
                "`playwright install chromium`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_view(args: list[str], log_path, timeout: float = 240) -> tuple[subprocess.Popen, str]:
    """`hlo-roundtrip view ... --no-browser` in a process of its own, its output to a file
    (a pipe nobody reads would stop the server once full); the URL Model Explorer's server
    prints."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "converter", "view", *args, "--no-browser"], cwd=ROOT,
                                env=dict(os.environ, PYTHONPATH=ROOT), stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        m = re.search(r"^\s*(http://localhost:\d+/\?data=\S+)", open(log_path).read(), re.M)
        if m:
            return proc, m.group(1)
        time.sleep(0.5)
    proc.kill()
    proc.wait()
    raise AssertionError("view printed no URL:\n" + open(log_path).read())


@pytest.mark.slow
def test_the_first_divergence_is_the_node_drawn_red(tmp_path):
    text = open(MLP, encoding="utf-8").read()
    assert "%constant.1 = f32[] constant(2)\n" in text  # mul.2 = param * broadcast(constant.1), in a fusion
    b = tmp_path / "b.hlo"
    b.write_text(text.replace("%constant.1 = f32[] constant(2)\n", "%constant.1 = f32[] constant(2.5)\n"))
    with sync_api.sync_playwright() as playwright:
        executable = chromium_executable(playwright)
        proc, url = start_view([MLP, "--compare", str(b), "--out-dir", str(tmp_path / "view"), "--port",
                                str(free_port())], tmp_path / "view.log")
        try:
            browser = playwright.chromium.launch(
                executable_path=executable,
                # WebGL without a GPU (Model Explorer draws the graph with it); root needs no sandbox.
                args=["--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader"])
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                page.goto(url, timeout=120_000)
                page.wait_for_selector("canvas", timeout=120_000)
                canvas = next(box for box in (c.bounding_box() for c in page.locator("canvas").all())
                              if box and box["width"] > 100)
                red = None
                for _ in range(60):  # the layout and the node data arrive after the canvas
                    shot = np.asarray(PIL_Image.open(io.BytesIO(page.screenshot(clip=canvas))).convert("RGB"))
                    ys, xs = np.nonzero(np.all(shot == MARKED_RGB, axis=-1))
                    if len(xs):
                        red = xs, ys
                        break
                    time.sleep(1)
                assert red is not None, "no node drawn red"
                xs, ys = red
                width, height = xs.max() - xs.min() + 1, ys.max() - ys.min() + 1
                # One node's box, mostly filled: one node is red, not two apart.
                assert width < 400 and height < 80 and len(xs) > 0.5 * width * height, (width, height, len(xs))
                page.mouse.click(canvas["x"] + (xs.min() + xs.max()) / 2, canvas["y"] + (ys.min() + ys.max()) / 2)
                info = None
                for _ in range(30):
                    body = re.sub(r"\s+", " ", page.inner_text("body"))
                    info = re.search(r"NODE INFO op name (\S+) id (\S+) namespace (\S+)", body)
                    if info:
                        break
                    time.sleep(1)
                assert info is not None, "clicking the red node selected nothing"
                assert (info.group(1), info.group(3)) == ("stablehlo.multiply", "mul.2")
                # ... and it is the node `view` says it marked.
                said = re.search(r"^marked: %mul\.2: node (\S+) of main$", open(tmp_path / "view.log").read(), re.M)
                assert said is not None and said.group(1) == info.group(2)
                value = re.search(r"NODE DATA PROVIDERS max relative error vs b\.hlo (\S+)", body)
                assert value is not None and float(value.group(1)) == pytest.approx(0.25, rel=1e-5)
            finally:
                browser.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
