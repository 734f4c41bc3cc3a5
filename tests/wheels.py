"""Builds small wheels for tests, offline (no setuptools `bdist_wheel`, no
package index): a wheel is a zip with the package and a dist-info."""

import base64
import hashlib
import zipfile


def make_wheel(directory, name, version, files):
    """Writes `<name>-<version>-py3-none-any.whl` holding `files`
    ({path in the wheel: text}) into `directory`; returns its path."""
    info = "%s-%s.dist-info" % (name, version)
    contents = dict(files)
    contents[info + "/METADATA"] = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    contents[info + "/WHEEL"] = "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, text in contents.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append(info + "/RECORD,,")
    contents[info + "/RECORD"] = "\n".join(record) + "\n"
    path = "%s/%s-%s-py3-none-any.whl" % (directory, name, version)
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in contents.items():
            wheel.writestr(member, text)
    return path
