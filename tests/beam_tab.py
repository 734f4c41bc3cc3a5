"""Reading the Spark UI's Beam tab (execution/ui_watermarks.py) as a user's
browser sees it: its caption and its table of steps."""

import html as html_lib
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request


def beam_tab_rows(html):
    """(caption, {step: {column: cell}}) of the Beam tab's table."""

    def cells(tag, text):
        return [html_lib.unescape(c) for c in re.findall(r"<%s>(.*?)</%s>" % (tag, tag), text, re.S)]

    caption = html_lib.unescape(re.search(r'<p id="beam-caption">(.*?)</p>', html, re.S).group(1))
    table = re.search(r'<table[^>]*id="beam-stages"[^>]*>(.*?)</table>', html, re.S).group(1)
    columns = cells("th", table)
    # A run without keyed steps shows a table without a body.
    body = table.split("<tbody>", 1)[1] if "<tbody>" in table else ""
    rows = [cells("td", row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
    return caption, {row[0]: dict(zip(columns, row)) for row in rows}


def read_beam_tab(url):
    """The tab's (caption, rows), or None while it is not attached or shows no table."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return beam_tab_rows(response.read().decode("utf-8"))
    except (urllib.error.URLError, AttributeError):
        return None


class BeamTabWatcher:
    """Reads the tab at `url` every 50 ms on a thread while a run goes on,
    keeping each distinct table it showed, in order: not the one an
    earlier run left, which the tab shows until the new run's first
    micro-batch completes."""

    def __init__(self, url):
        self.url, self.tables = url, []
        self._earlier = read_beam_tab(url)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while not self._stop.wait(0.05):
            table = read_beam_tab(self.url)
            if table not in (None, self._earlier) and (not self.tables or self.tables[-1] != table):
                self.tables.append(table)

    def stop(self):
        """Stops watching; returns the tables seen."""
        self._stop.set()
        self._thread.join()
        return self.tables


# As the machine's probe starts Chromium: without the background-networking
# flags it tries Google's hosts, which a closed network refuses.
_CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
NO_BROWSER = "no headless browser: install the OS package chromium (tools/services.sh up, or apt-get install chromium)"


def browser_dom(url, user_data_dir):
    """The DOM headless Chromium (Debian's package `chromium`) renders for
    `url`, after the page's scripts ran; None where Chromium is missing."""
    chromium = shutil.which("chromium")
    if chromium is None:
        return None
    command = [chromium, *_CHROMIUM_FLAGS, "--user-data-dir=%s" % user_data_dir, "--dump-dom", url]
    return subprocess.run(command, capture_output=True, text=True, timeout=120).stdout


def require_browser(request, dom):
    """`dom` if Chromium rendered it; else a skip naming the package, or
    a failure under --require-services (the README's test command installs it)."""
    import pytest

    if dom is None:
        if request.config.getoption("--require-services"):
            pytest.fail(NO_BROWSER + " (--require-services)")
        pytest.skip(NO_BROWSER)
    return dom
