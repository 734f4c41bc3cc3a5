"""Reading the Spark UI's Beam tab (execution/ui_watermarks.py) as a user's
browser sees it: its caption and its table of steps."""

import html as html_lib
import re
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
    rows = [cells("td", row) for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)]
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
