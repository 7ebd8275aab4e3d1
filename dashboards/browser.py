"""A headless Chromium driven over the DevTools protocol, to check the report as a reviewer sees it.

The browser is Debian's `chromium` (scripts/setup-browser.sh installs it); nothing is
downloaded. It is driven through `--remote-debugging-pipe` (file descriptors 3 and 4,
NUL-terminated JSON messages), which needs no port, no websocket library and cannot be
reached by anything else on the machine.

`Browser.open(path)` loads a page and returns a `PageLoad`: console errors and uncaught
exceptions, failed or non-local requests, JavaScript dialogs that tried to open, and the
time until the page's load event and every plotly figure had rendered. Used by the
dashboard tests and `bench/bench_dashboards.py`.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
)

# True once the load event fired and every plotly div has drawn its figure (plotly sets
# `_fullLayout` when a plot finished its first render).
_RENDERED_JS = """
(() => {
  if (document.readyState !== 'complete') return false;
  const divs = Array.from(document.querySelectorAll('.plotly-graph-div'));
  return divs.every(d => d._fullLayout !== undefined && d.querySelector('.main-svg') !== null);
})()
"""


class BrowserError(RuntimeError):
    pass


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    url: str
    load_seconds: float
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    remote_requests: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return [*self.console_errors, *self.exceptions, *(f"dialog: {d}" for d in self.dialogs),
                *(f"failed request: {r}" for r in self.failed_requests),
                *(f"non-local request: {r}" for r in self.remote_requests)]


class Browser:
    """One headless Chromium with a fresh profile; one page (tab) reused for every `open`."""

    def __init__(self, executable: str | None = None, width: int = 1400, height: int = 900):
        exe = executable or find_chromium()
        if not exe:
            raise BrowserError("chromium not found on PATH (run scripts/setup-browser.sh)")
        self._profile = tempfile.mkdtemp(prefix="rebalance-audit-chromium-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()

        def child_fds():
            # Chromium reads commands on fd 3 and writes replies on fd 4. Move both ends
            # out of the way first (either may itself be fd 3 or 4), then into place;
            # dup2 makes them inheritable, every other descriptor closes at exec.
            r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self._proc = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # close_fds would run after preexec_fn and close 3 and 4 again; Python's own
            # descriptors are non-inheritable, so nothing else leaks into the browser.
            preexec_fn=child_fds, close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._next_id = 0
        self._lock = threading.Lock()
        self._replies: dict[int, Queue] = {}
        self.events: Queue = Queue()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self.width, self.height = width, height
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    # -- protocol plumbing ---------------------------------------------------------------

    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._in.read(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.events.put(None)
                for q in list(self._replies.values()):
                    q.put({"error": {"message": "browser closed the pipe"}})
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg and msg["id"] in self._replies:
                    self._replies[msg["id"]].put(msg)
                elif "method" in msg:
                    if msg["method"] == "Page.javascriptDialogOpening":
                        # A dialog blocks the page's scripts (and so every evaluate) until
                        # it is answered: dismiss it here, the event still gets recorded.
                        self._send("Page.handleJavaScriptDialog", {"accept": False}, msg.get("sessionId"))
                    self.events.put(msg)

    def _send(self, method: str, params: dict, session_id: str | None, reply: Queue | None = None) -> int:
        with self._lock:
            self._next_id += 1
            mid = self._next_id
            if reply is not None:
                self._replies[mid] = reply
            msg = {"id": mid, "method": method, "params": params}
            if session_id:
                msg["sessionId"] = session_id
            self._out.write(json.dumps(msg).encode() + b"\0")
        return mid

    def call(self, method: str, session: bool = False, timeout: float = 60.0, **params: object):
        q: Queue = Queue()
        mid = self._send(method, params, self._session if session else None, q)
        try:
            reply = q.get(timeout=timeout)
        except Empty:
            raise BrowserError(f"{method}: no reply within {timeout:.0f} s") from None
        finally:
            self._replies.pop(mid, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def evaluate(self, expression: str, timeout: float = 60.0):
        res = self.call("Runtime.evaluate", session=True, timeout=timeout, expression=expression,
                        returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise BrowserError(f"script failed: {res['exceptionDetails'].get('text')} "
                               f"{res['exceptionDetails'].get('exception', {}).get('description', '')}")
        return res["result"].get("value")

    # -- pages ---------------------------------------------------------------------------

    def open(self, path: str | Path, timeout: float = 60.0, settle: float = 0.3) -> PageLoad:
        """Load a local file and wait until it and its figures rendered; collect what went wrong."""
        url = Path(path).resolve().as_uri() if not str(path).startswith(("file:", "http:", "https:", "about:")) else str(path)
        while True:  # forget events of earlier pages
            try:
                self.events.get_nowait()
            except Empty:
                break
        load = PageLoad(url=url, load_seconds=float("nan"))
        start = time.monotonic()
        self.call("Page.navigate", session=True, url=url)
        deadline = start + timeout
        loaded = False
        while time.monotonic() < deadline:
            self._drain(load, 0.02)
            if self.evaluate(_RENDERED_JS):
                if not loaded:
                    load.load_seconds = time.monotonic() - start
                    loaded = True
                    # Late errors (a figure's deferred code, a failing image) still count.
                    settle_end = time.monotonic() + settle
                    while time.monotonic() < settle_end:
                        self._drain(load, 0.05)
                    break
        if not loaded:
            raise BrowserError(f"{url} did not finish rendering within {timeout:.0f} s")
        return load

    def _drain(self, load: PageLoad, wait: float) -> None:
        end = time.monotonic() + wait
        while True:
            remaining = end - time.monotonic()
            try:
                ev = self.events.get(timeout=max(remaining, 0.001)) if remaining > 0 else self.events.get_nowait()
            except Empty:
                return
            if ev is None:
                raise BrowserError("chromium exited")
            self._note(load, ev)

    def _note(self, load: PageLoad, ev: dict) -> None:
        method, p = ev["method"], ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            load.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            load.exceptions.append(d.get("exception", {}).get("description") or d.get("text", "exception"))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            load.console_errors.append(p["entry"].get("text", ""))
        elif method == "Page.javascriptDialogOpening":
            load.dialogs.append(f"{p.get('type')}: {p.get('message')}")
        elif method == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "about:", "blob:")):
                load.remote_requests.append(url)
        elif method == "Network.loadingFailed":
            load.failed_requests.append(f"{p.get('errorText')} ({p.get('requestId')})")

    def screenshot(self, out: str | Path, full_page: bool = True) -> Path:
        """PNG of the current page (the whole page height when `full_page`)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            h = int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)") or self.height)
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": self.width, "height": min(h, 16000), "scale": 1})
        data = self.call("Page.captureScreenshot", session=True, **params)["data"]
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for f in (self._out, self._in):
            try:
                f.close()
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
