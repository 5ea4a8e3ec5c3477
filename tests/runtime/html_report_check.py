#!/usr/bin/python3
"""Checks a `gtrace report --html` page in headless Chromium (Debian's `chromium`), driven over the
DevTools protocol on a pipe (--remote-debugging-pipe; stdlib only, nothing leaves the machine):

  errors      no console error/assert, no uncaught exception or unhandled rejection, no error in
              the browser log, no request other than file:/data:/about:/blob: (self-contained),
              the page's own error box (#gtrace-errors, fed by window.onerror) empty, and the page
              marked itself rendered (body[data-rendered=ok]).
  pixels      a screenshot of each chart (the area of its <svg class="chart"> elements) decoded
              with zlib: enough non-background pixels, several distinct colours, and the colour of
              every bar large enough to paint present, and of at least one of a chart's lines and
              memory bands (outlined polygons), which may lie on top of each other.
  numbers     in the DOM after the scripts ran: every element with data-json="PATH" shows the
              SUMMARY.json value at PATH — a string as it is, a number by the page's rounding rule:
              (value * data-scale).toFixed(data-digits), scale 1 when absent (the exact binary value
              rounded half away from zero). Every section holds such an element for every process
              (`ranks[]`: ranks, and processes without one, `rank: null`);
              the embedded JSON equals SUMMARY.json; each chart draws as many marks (data-mark) as
              the JSON has data for.

Usage: html_report_check.py REPORT.html SUMMARY.json [--screenshot-out PNG] [--min-marks N]
Exit 0 pass, 1 fail (each failure printed), 77 when chromium is missing and GTRACE_ALLOW_SKIP=1."""
import argparse
import base64
import collections
import fcntl
import itertools
import json
import os
import pathlib
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from decimal import ROUND_HALF_UP, Decimal
from html.parser import HTMLParser

SECTIONS = ["verdict", "breakdown", "steptime", "gpu", "memory", "kernels", "ranks"]
CATS = ["Kernel", "Memcpy", "Memset", "Communication", "Runtime", "DataLoader", "Blocked", "CPU Exec", "Other"]
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Browser:
    """Chromium with the DevTools protocol on fds 3 (its input) and 4 (its output), NUL-framed JSON."""

    def __init__(self, exe, tmp):
        to_chrome, self.out = os.pipe()
        self.inp, from_chrome = os.pipe()
        # Above the numbers the shell redirections below use, so none overwrites another.
        hi_r, hi_w = fcntl.fcntl(to_chrome, fcntl.F_DUPFD, 20), fcntl.fcntl(from_chrome, fcntl.F_DUPFD, 20)
        os.close(to_chrome), os.close(from_chrome)
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}/profile", "--remote-debugging-pipe",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update", "--host-resolver-rules=MAP * ~NOTFOUND",
                "--hide-scrollbars", "--mute-audio", "about:blank"]
        self.log_path = os.path.join(tmp, "chromium.log")
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{hi_r} 4>&{hi_w} {hi_r}<&- {hi_w}>&-', "chromium", *args],
                                     pass_fds=(hi_r, hi_w), stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        os.close(hi_r), os.close(hi_w)
        self.buf, self.next_id, self.events, self.session = b"", 0, [], None

    def close(self):
        try:
            self.call("Browser.close", session=None, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        os.close(self.out), os.close(self.inp)

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.time()
            if left <= 0 or not select.select([self.inp], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe (crashed?)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session="page", timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session == "page":
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.out, data):]
        deadline = time.time() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, timeout):
        deadline = time.time() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read(deadline))

    def evaluate(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluating {expr[:60]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, clip):
        # optimizeForSpeed: rows filtered "Up" only, which decodes quickly here.
        r = self.call("Page.captureScreenshot", {"format": "png", "optimizeForSpeed": True, "captureBeyondViewport": True,
                                                 "clip": {**clip, "scale": 1}})
        return base64.b64decode(r["data"])


def add_bytes(a, b):
    """Bytewise (a + b) mod 256 at C speed: each byte in its own 16-bit lane of one big integer."""
    wa, wb = bytearray(2 * len(a)), bytearray(2 * len(a))
    wa[1::2], wb[1::2] = a, b
    return bytearray((int.from_bytes(wa, "big") + int.from_bytes(wb, "big")).to_bytes(2 * len(a), "big")[1::2])


def png_colours(data):
    """(width, height, {(r, g, b): pixel count}) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", data[pos + 8:pos + 8 + n])
        elif kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
    bpp = 3 if ctype == 2 else 4
    raw, stride, counts = zlib.decompress(idat), w * bpp, collections.Counter()
    prev = bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:  # Sub: a running sum per channel
            for ch in range(bpp):
                line[ch::bpp] = bytes(map((255).__and__, itertools.accumulate(line[ch::bpp])))
        elif f == 2:  # Up (all rows, with optimizeForSpeed)
            line = add_bytes(line, prev)
        elif f in (3, 4):  # Average, Paeth: byte by byte
            for i in range(stride):
                a, b, c = line[i - bpp] if i >= bpp else 0, prev[i], prev[i - bpp] if i >= bpp else 0
                if f == 3:
                    line[i] = (line[i] + (a + b) // 2) & 255
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        counts.update(zip(line[0::bpp], line[1::bpp], line[2::bpp]))
        prev = line
    return w, h, counts


def to_fixed(value, digits, scale):
    """JavaScript's (value * scale).toFixed(digits) for |x| < 1e21."""
    x = float(value) * scale if scale != 1 else float(value)
    if x == 0:
        x = 0.0  # (-0).toFixed gives "0.00"
    return format(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP), "f")


def at(doc, path):
    v = doc
    for k in path.split("."):
        if isinstance(v, list) and k.isdigit() and int(k) < len(v):
            v = v[int(k)]
        elif isinstance(v, dict) and k in v:
            v = v[k]
        else:
            raise KeyError(path)
    return v


class Dom(HTMLParser):
    """Collects data-json elements (path, digits, scale, text, section), marks and error text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.fields, self.marks, self.errors_text, self.section_text, self.sections = [], [], {}, "", {}, set()

    def section(self):
        return next((a.get("data-section") for _, a, _ in reversed(self.stack) if "data-section" in a), None)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        field = None
        if "data-section" in a:
            self.sections.add(a["data-section"])
        if "data-json" in a:
            field = {"path": a["data-json"], "digits": a.get("data-digits"), "scale": a.get("data-scale"), "text": "",
                     "section": self.section()}
            self.fields.append(field)
        if "data-mark" in a:
            key = (self.section(), a["data-mark"])
            self.marks[key] = self.marks.get(key, 0) + 1
        if tag not in VOID:
            self.stack.append((tag, a, field))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        for _, a, field in self.stack:
            if field is not None:
                field["text"] += data
            if a.get("id") == "gtrace-errors":
                self.errors_text += data
        if (sec := self.section()) is not None:
            self.section_text[sec] = self.section_text.get(sec, "") + data


def expected_marks(summary):
    ranks = [r if isinstance(r, dict) else {} for r in summary.get("ranks") or []]
    num = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    steps = lambda r, k: [p for p in r.get("per_step") or [] if isinstance(p, dict) and num(p.get(k))]
    mem = lambda r: [p for p in ((r.get("memory") or {}).get("points") or []) if isinstance(p, list) and len(p) >= 2 and num(p[0]) and num(p[1])]
    return {("breakdown", "breakdown"): sum(1 for r in ranks for c in CATS if num((r.get("breakdown_ms") or {}).get(c)) and r["breakdown_ms"][c] > 0),
            ("steptime", "steptime"): sum(1 for r in ranks if steps(r, "wall_ms")),
            ("gpu", "gpu"): sum(1 for r in ranks if num(r.get("gpu_utilization"))),
            ("gpu", "gpu-step"): sum(1 for r in ranks if steps(r, "gpu_utilization")),
            ("memory", "memory"): sum(1 for r in ranks if mem(r)),
            ("kernels", "kernel"): sum(1 for r in ranks for k in r.get("top_kernels") or [] if isinstance(k, dict) and num(k.get("total_ms")))}


def check_numbers(dom, summary, embedded, fails):
    if embedded != summary:
        fails.append("the JSON embedded in the page differs from SUMMARY.json")
    for f in dom.fields:
        try:
            v = at(summary, f["path"])
        except KeyError:
            fails.append(f"data-json={f['path']!r}: no such path in the JSON (page shows {f['text']!r})")
            continue
        if f["digits"] is None:
            want = v if isinstance(v, str) else None
            if want is None:
                fails.append(f"data-json={f['path']!r}: a {type(v).__name__} shown without data-digits")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            want = to_fixed(v, int(f["digits"]), float(f["scale"]) if f["scale"] else 1)
        else:
            fails.append(f"data-json={f['path']!r}: data-digits on a {type(v).__name__}")
            want = None
        if want is not None and f["text"] != want:
            fails.append(f"data-json={f['path']!r}: page shows {f['text']!r}, the JSON gives {want!r} (value {v!r})")
    for sec in SECTIONS:
        if sec not in dom.sections:
            fails.append(f"section {sec!r}: missing from the page")
            continue
        if not any(f["section"] == sec for f in dom.fields):
            fails.append(f"section {sec!r}: no data-json value in it")
        for i, r in enumerate(summary.get("ranks") or []):
            if isinstance(r, dict) and "rank" in r and not any(f["section"] == sec and f["path"].startswith(f"ranks.{i}.") for f in dom.fields):
                fails.append(f"section {sec!r}: nothing from ranks.{i}")
    # Several traces (one per node): a Nodes section with every node's name, ranks and step time,
    # and the straggler node named in the verdict.
    for i, n in enumerate(summary.get("nodes") or []):
        for key in ("name", "step_ms", "verdict"):
            if n.get(key) is not None and not any(f["section"] == "nodes" and f["path"] == f"nodes.{i}.{key}" for f in dom.fields):
                fails.append(f"section 'nodes': nodes.{i}.{key} not shown")
        for k in range(len(n.get("ranks") or [])):
            if not any(f["section"] == "nodes" and f["path"] == f"nodes.{i}.ranks.{k}" for f in dom.fields):
                fails.append(f"section 'nodes': nodes.{i}.ranks.{k} not shown")
    if summary.get("straggler_node") is not None and not any(f["section"] == "verdict" and f["path"] == "straggler_node" for f in dom.fields):
        fails.append("section 'verdict': the straggler node is not named")
    for key, want in expected_marks(summary).items():
        if dom.marks.get(key, 0) != want:
            fails.append(f"section {key[0]!r}: {dom.marks.get(key, 0)} data-mark={key[1]!r} elements drawn, the JSON has data for {want}")
    if expected_marks(summary)[("memory", "memory")] == 0 and "no GPU memory records in this trace" not in dom.section_text.get("memory", ""):
        fails.append("section 'memory': no memory points, and no 'no GPU memory records in this trace' note")
    return sum(dom.marks.values())


# Per section: the page area of its charts and each mark's colour and size, from the live layout.
CHART_BOXES = """(() => [...document.querySelectorAll("section[data-section]")].map((sec) => {
  const svgs = [...sec.querySelectorAll("svg.chart")].map((s) => s.getBoundingClientRect()).filter((r) => r.width > 0 && r.height > 0);
  if (!svgs.length) return null;
  const x0 = Math.min(...svgs.map((r) => r.left)), y0 = Math.min(...svgs.map((r) => r.top));
  const x1 = Math.max(...svgs.map((r) => r.right)), y1 = Math.max(...svgs.map((r) => r.bottom));
  const marks = [...sec.querySelectorAll("[data-mark]")].map((m) => {
    const r = m.getBoundingClientRect(), st = getComputedStyle(m);
    // Lines and memory bands (polygons) may lie on top of each other; bars never do.
    return { color: m.tagName === "rect" ? st.fill : st.stroke, w: r.width, h: r.height, line: m.tagName !== "rect" };
  });
  return { section: sec.dataset.section, x: x0 + scrollX, y: y0 + scrollY, width: x1 - x0, height: y1 - y0, marks };
}).filter(Boolean))()"""


def check_pixels(browser, fails):
    colours_seen = set()
    for box in browser.evaluate(CHART_BOXES):
        clip = {k: round(box[k]) for k in ("x", "y", "width", "height")}
        w, h, counts = png_colours(browser.screenshot(clip))
        background = max(counts, key=counts.get)
        near = lambda a, b, tol: all(abs(p - q) <= tol for p, q in zip(a, b))
        busy = sum(n for px, n in counts.items() if not near(px, background, 8))
        distinct = {tuple(c >> 4 for c in px) for px, n in counts.items() if n >= 20 and not near(px, background, 8)}
        colours_seen |= distinct
        name = f"section {box['section']!r} chart ({w}x{h} px)"
        if busy < 0.01 * w * h:
            fails.append(f"{name}: blank — {busy} of {w * h} pixels differ from the background")
        if len(distinct) < 2:
            fails.append(f"{name}: {len(distinct)} distinct colour(s) besides the background")
        shows = lambda m: sum(n for px, n in counts.items() if near(px, tuple(int(v) for v in m["color"][m["color"].index("(") + 1:
                                                                                          m["color"].index(")")].split(",")[:3]), 24)) >= 4
        # Bars never overlap: each one big enough to own a pixel must show its colour. Lines and memory
        # bands may lie on top of each other (ranks with equal steps): at least one must show.
        for m in box["marks"]:
            if not m["line"] and m["w"] >= 2 and m["h"] >= 2 and not shows(m):
                fails.append(f"{name}: a bar of colour {m['color']} ({m['w']:.0f}x{m['h']:.0f} px) does not show in the screenshot")
        lines = [m for m in box["marks"] if m["line"] and m["w"] + m["h"] >= 6]
        if lines and not any(shows(m) for m in lines):
            fails.append(f"{name}: none of its {len(lines)} lines shows in the screenshot")
    if len(colours_seen) < 4:
        fails.append(f"the charts show only {len(colours_seen)} distinct colours")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("summary")
    ap.add_argument("--screenshot-out", help="also save a screenshot of the whole page here")
    ap.add_argument("--min-marks", type=int, default=1, help="fewest bar/line elements the page must draw")
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    exe = os.environ.get("GTRACE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print("cannot run: chromium is missing (apt-get install chromium, or scripts/setup.sh)", flush=True)
        sys.exit(77 if os.environ.get("GTRACE_ALLOW_SKIP") == "1" else 1)
    summary = json.load(open(a.summary))
    page = open(a.report, encoding="utf-8").read()
    start = page.find('<script type="application/json" id="gtrace-data">')
    end = page.find("</script>", start)
    embedded = json.loads(page[page.index(">", start) + 1:end]) if start >= 0 else None
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        browser = Browser(exe, tmp)
        try:
            target = browser.call("Target.createTarget", {"url": "about:blank"}, session=None)["targetId"]
            browser.session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=None)["sessionId"]
            for domain in ("Runtime", "Log", "Page", "Network"):
                browser.call(f"{domain}.enable")
            browser.call("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": False})
            browser.call("Page.navigate", {"url": pathlib.Path(a.report).resolve().as_uri()})
            browser.wait_event("Page.loadEventFired", a.timeout)
            deadline, state = time.time() + a.timeout, ""
            while not state and time.time() < deadline:
                state = browser.evaluate("document.body ? document.body.dataset.rendered || '' : ''")
                time.sleep(0.1)
            if state != "ok":
                fails.append(f"the page did not finish rendering (body data-rendered={state!r})")
            time.sleep(0.3)  # late errors (timers, rejections) still arrive
            dom = Dom()
            dom.feed(browser.evaluate("document.documentElement.outerHTML"))
            marks = check_numbers(dom, summary, embedded, fails)
            if marks < a.min_marks:
                fails.append(f"{marks} bar/line elements drawn, expected at least {a.min_marks}")
            if dom.errors_text.strip():
                fails.append(f"the page reports errors: {dom.errors_text.strip()}")
            check_pixels(browser, fails)
            if a.screenshot_out:
                size = browser.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
                with open(a.screenshot_out, "wb") as f:
                    f.write(browser.screenshot({"x": 0, "y": 0, "width": size[0], "height": size[1]}))
            browser.call("Runtime.evaluate", {"expression": "1"})  # collects the events sent meanwhile
        except (RuntimeError, TimeoutError, ValueError) as e:
            fails.append(f"driving chromium: {e}; its log: {open(browser.log_path).read()[-1500:]}")
        finally:
            browser.close()
    for e in browser.events:
        p, m = e.get("params", {}), e.get("method")
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            fails.append(f"console.{p['type']}: " + " ".join(str(x.get("value", x.get("description", ""))) for x in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            fails.append(f"uncaught exception: {d.get('exception', {}).get('description') or d.get('text')} (line {d.get('lineNumber')})")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            fails.append(f"browser log error: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif m == "Network.requestWillBeSent" and not p.get("request", {}).get("url", "").startswith(LOCAL_SCHEMES):
            fails.append(f"not self-contained: the page requested {p['request']['url']}")
        elif m == "Inspector.targetCrashed":
            fails.append("the page crashed")
    for f in fails:
        print(f"FAIL: {f}", flush=True)
    if fails:
        sys.exit(1)
    print(f"ok: {a.report}: no errors, charts painted, {len(dom.fields)} values match {a.summary}, {marks} bars/lines")


if __name__ == "__main__":
    main()
