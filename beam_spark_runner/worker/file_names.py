"""Final names of the files a streaming file sink publishes, pane by pane.

The rule the names keep: **no pane's files ever take the name of another
pane's files**, so a later pane can never replace what an earlier one
published. A window's first pane (index 0) gets exactly Beam's names; a
later pane of the same window, where Beam's naming would repeat the first
pane's names, gets them with ``-pane-<index>`` before the file's suffix:

* ``FileBasedSink`` writes (``WriteToText``, ``WriteToAvro``,
  ``WriteToParquet``, ...): Beam's shard-name template (documented on
  ``FileBasedSink``: ``S`` the shard number, ``N`` the number of shards,
  ``U`` a UUID, ``W`` the window, ``V`` the window's bounds in UTC) never
  names the pane, so a later pane always gets the marker. A template that
  names neither the window (``W``/``V``) nor a UUID (``U``) would give every
  window the same names; the streaming planner refuses it
  (``names_windows``).
* ``fileio.WriteToFiles``: the user's ``file_naming`` gets the pane; where
  the name does not depend on the pane's index (Beam's own namings ignore
  the pane), the marker is inserted before the name's last extension.

The template is formatted here rather than through Beam's private
``FileBasedSink._get_final_name`` for two reasons: that method formats the
window's UTC bounds even when the template does not use them, which raises
``OverflowError`` for windows near the end of time (elements at the global
window's max timestamp), and it cannot take a pane. The names are Beam's
otherwise (tests/unit/test_file_names.py compares them with Beam's).
"""

import re
import uuid

from apache_beam.transforms import window as beam_window
from apache_beam.utils.windowed_value import PaneInfo

_PANE_MARKER = "-pane-%d"
# Beam's template letters and what each becomes (FileBasedSink's
# _template_to_format: the first run of each letter, every occurrence of it).
_FIELDS = (
    ("S", "shard_num", "d"),
    ("N", "num_shards", "d"),
    ("U", "uuid", "d"),
    ("W", "window", "s"),
    ("V", "window_utc", "s"),
)


def pane_marker(pane_index: int) -> str:
    """What a pane's names carry besides Beam's: nothing for a window's first pane."""
    return _PANE_MARKER % pane_index if pane_index > 0 else ""


def _template_format(template: str, shard_glob: bool) -> str:
    """Beam's formats: every letter replaced for a name; for a glob, the
    shard number by `*` and the number of shards only (Beam's glob leaves
    the other letters as they are)."""
    if not template:
        return ""
    if not re.search("S+", template):
        raise ValueError("Shard number pattern S+ not found in shard_name_template: %s" % template)
    fmt = template.replace("%", "%%")
    for letter, field, conversion in _FIELDS:
        match = re.search(letter + "+", fmt)
        if match is None:
            continue
        if letter == "S" and shard_glob:
            fmt = fmt.replace(match.group(0), "*")
        elif letter in "SN" or not shard_glob:
            fmt = fmt.replace(match.group(0), "%%(%s)0%d%s" % (field, len(match.group(0)), conversion))
    return fmt


def _utc(timestamp) -> str:
    try:
        return timestamp.to_utc_datetime().strftime("%Y-%m-%dT%H-%M-%S")
    except (OverflowError, ValueError, OSError):
        # Beyond what a datetime holds (near the end of time): the seconds.
        return "%d" % (timestamp.micros // 1000000)


def _window_utc(w):
    if w is None or isinstance(w, beam_window.GlobalWindow):
        return None
    return "[" + _utc(w.start) + ", " + _utc(w.end) + ")"


class ShardTemplate(object):
    """A FileBasedSink shard-name template, formatted as Beam formats it."""

    def __init__(self, template: str):
        self.template = template or ""
        self._format = _template_format(self.template, shard_glob=False)
        self._glob = _template_format(self.template, shard_glob=True)
        self.uses_window_utc = "V" in self.template

    @property
    def names_windows(self) -> bool:
        """Whether two windows' files always get different names."""
        return any(letter in self.template for letter in "WVU")

    def _values(self, shard, total, w):
        return dict(
            shard_num=shard,
            num_shards=total,
            uuid=uuid.uuid4(),
            window=w,
            window_utc=_window_utc(w) if self.uses_window_utc else None,
        )

    def format(self, shard: int, total: int, w) -> str:
        return self._format % self._values(shard, total, w)

    def glob(self, total: int, w) -> str:
        return self._glob % self._values(0, total, w)


class FileBasedSinkNames(object):
    """Final names of a FileBasedSink's shards for one pane of one window."""

    def __init__(self, sink):
        self._prefix = sink.file_path_prefix.get()
        self._suffix = sink.file_name_suffix.get()
        self.template = ShardTemplate(sink.shard_name_template)

    def final_name(self, shard: int, total: int, w, pane_index: int) -> str:
        return self._prefix + self.template.format(shard, total, w) + pane_marker(pane_index) + self._suffix

    def glob(self, total: int, w, pane_index: int) -> str:
        """Beam's glob of final files an earlier run left, which it deletes
        before renaming (`pre_finalize_windowed`), for this pane."""
        return self._prefix + self.template.glob(total, w) + pane_marker(pane_index) + self._suffix


def with_pane_marker(name: str, pane_index: int) -> str:
    """`name` with the pane marker before its last extension (or at its end)."""
    marker = pane_marker(pane_index)
    if not marker:
        return name
    head, sep, base = name.rpartition("/")
    dot = base.rfind(".")
    if dot <= 0:
        return name + marker
    return head + sep + base[:dot] + marker + base[dot:]


def _next_index(pane):
    return PaneInfo(
        pane.is_first,
        pane.is_last,
        pane.timing,
        pane.index + 1,
        pane.nonspeculative_index + 1 if pane.nonspeculative_index >= 0 else pane.nonspeculative_index,
    )


def destination_file_name(file_naming, w, pane, shard: int, total: int, destination) -> str:
    """`fileio.WriteToFiles`' name for one file of a pane: the user's
    `file_naming`, with the pane marker where that name would not differ
    from the next pane's."""
    name = file_naming(w, pane, shard, total, "", destination)
    if pane.index > 0 and file_naming(w, _next_index(pane), shard, total, "", destination) == name:
        return with_pane_marker(name, pane.index)
    return name
