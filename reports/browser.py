"""Open a report in headless Chromium and say what a person would see: a screenshot, the console
errors, and whether the page, its tables and its plots rendered.

Talks the DevTools protocol over ``--remote-debugging-pipe`` (JSON messages, NUL-terminated, on the
child's fds 3 and 4), so it needs no package beyond the Chromium binary. Every wait is bounded.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Run in the page after load: what rendered, measured by the browser's own layout.
PROBE = """(() => {
  const vh = innerHeight, box = e => e.getBoundingClientRect();
  const visible = e => { const r = box(e); return r.width > 0 && r.height > 0; };
  const tables = [...document.querySelectorAll('table')], svgs = [...document.querySelectorAll('svg')];
  const imgs = [...document.images];
  const top = s => { const e = document.querySelector(s); return e ? box(e).top + scrollY : null; };
  return JSON.stringify({
    title: document.title, text_chars: document.body.innerText.length,
    nodes: document.getElementsByTagName('*').length,
    page_height: document.documentElement.scrollHeight, page_width: document.documentElement.scrollWidth,
    viewport: [innerWidth, vh],
    tables: tables.length, tables_blank: tables.filter(t => !visible(t) && !t.closest('details:not([open])')).length,
    svgs: svgs.length, svgs_blank: svgs.filter(s => visible(s) && s.getBBox().width === 0).length,
    images: imgs.length, images_broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length,
    first_screen: [...document.querySelectorAll('#summary .tile, #failures > ol > li')]
        .filter(e => box(e).top + scrollY < vh).map(e => e.innerText.replace(/\\s+/g, ' ').slice(0, 160)),
    summary_top: top('#summary'), failures_top: top('#failures'), areas_top: top('.areas'),
    too_wide: [...document.querySelectorAll('body *')].filter(e => box(e).right > innerWidth + 1
        && !e.closest('details:not([open])') && getComputedStyle(e).position !== 'fixed')
        .filter(e => box(e.parentElement).right <= innerWidth + 1).slice(0, 8)
        .map(e => (e.closest('section[id]') || {}).id + ' ' + e.tagName + '.' + e.className + ' ' + Math.round(box(e).right)),
    load_ms: performance.getEntriesByType('navigation').map(n => n.loadEventEnd - n.startTime)[0] || null,
  });
})()"""


@dataclass
class PageCheck:
    probe: dict[str, Any]
    console_errors: list[str] = field(default_factory=list)
    screenshot: Path | None = None
    wall_s: float = 0.0


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, BINARIES) if p), None)


class _Pipe:
    def __init__(self, binary: str, profile_dir: str, width: int, height: int) -> None:
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def wire() -> None:  # in the child: the protocol reads fd 3 and writes fd 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child_r, from_child_w)]  # the pipes may be 3, 4
            os.dup2(high[0], 3)  # dup2 clears close-on-exec: these two survive into Chromium
            os.dup2(high[1], 4)

        args = [binary, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
                f"--user-data-dir={profile_dir}", f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if not os.environ.get("LC_CHROMIUM_DEBUG") else None)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf, self._id, self.events = b"", 0, []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe (it exited)")
            self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == name for e in self.events):
            self.events.append(self._read(deadline))

    def close(self) -> None:
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc.kill()
        self.proc.wait(timeout=10)


def _console_errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.exceptionThrown":
            out.append(str(p.get("exceptionDetails", {}).get("text", "exception")))
        elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(str(p["entry"].get("text")))
    return out


def check_page(html: Path, screenshot: Path | None = None, width: int = 1280, height: int = 900,
               timeout: float = 60.0, binary: str | None = None) -> PageCheck:
    """Load ``html`` at ``width``×``height``, probe its layout, optionally save a PNG of the first screen."""
    binary = binary or find_chromium()
    if not binary:
        raise FileNotFoundError("no Chromium binary on PATH (apt-get install chromium)")
    t0 = time.monotonic()
    # Chromium's helper processes may still be writing the profile when the browser has exited:
    # a profile left half-deleted is not the page's failure
    with tempfile.TemporaryDirectory(prefix="lc-chromium-", ignore_cleanup_errors=True) as profile:
        pipe = _Pipe(binary, profile, width, height)
        try:
            target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
            s = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                pipe.call(f"{domain}.enable", session=s)
            pipe.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                             "deviceScaleFactor": 1, "mobile": False}, session=s)
            pipe.events.clear()
            pipe.call("Page.navigate", {"url": Path(html).resolve().as_uri()}, session=s, timeout=timeout)
            pipe.wait_event("Page.loadEventFired", timeout)
            probe = json.loads(pipe.call("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                                         session=s, timeout=timeout)["result"]["value"])
            if screenshot is not None:
                png = pipe.call("Page.captureScreenshot", {"format": "png"}, session=s, timeout=timeout)["data"]
                Path(screenshot).write_bytes(base64.b64decode(png))
            return PageCheck(probe, _console_errors(pipe.events), screenshot, round(time.monotonic() - t0, 2))
        finally:
            pipe.close()


def ink_fraction(png: Path) -> float:
    """Share of the screenshot's pixels that are not (near-)white: 0 means a blank page."""
    from PIL import Image

    img = Image.open(png).convert("L")
    hist = img.histogram()
    return 1.0 - sum(hist[245:]) / max(1, sum(hist))
