"""Every python example of docs/porting.md runs, in order, in one namespace; an example followed
by a ```text block raises the error that block shows (each `Name: message` line is an exception
of the raised chain whose message starts so; every other line is part of that message)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "porting.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)
HEADER = re.compile(r"^(\w+): (.*)$")


def examples():
    """(line, python source, expected errors or None) for each python block of the guide; the
    expected errors are [(exception name, message start, [other lines])]."""
    text = GUIDE.read_text()
    blocks = [(m.start(), m.end(), m.group(1), m.group(2)) for m in FENCE.finditer(text)]
    out = []
    for k, (start, end, lang, body) in enumerate(blocks):
        if lang != "python":
            continue
        expected = None
        if k + 1 < len(blocks) and blocks[k + 1][2] == "text" \
                and not text[end:blocks[k + 1][0]].strip():
            expected = []
            for line in blocks[k + 1][3].splitlines():
                m = HEADER.match(line)
                if m:
                    expected.append((m.group(1), m.group(2), []))
                elif line.strip():
                    expected[-1][2].append(line.strip())
        out.append((text.count("\n", 0, start) + 2, body, expected))
    return out


def _chain(exc):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def test_every_example_of_the_porting_guide_runs_and_raises_what_it_shows(capsys):
    ns = {"__name__": "porting_guide"}
    checked = 0
    for line, source, expected in examples():
        code = compile(source, f"{GUIDE}:{line}", "exec")
        if expected is None:
            exec(code, ns)
            continue
        with pytest.raises(Exception) as e:
            exec(code, ns)
        chain = list(_chain(e.value))
        for name, start, rest in expected:
            hits = [x for x in chain if type(x).__name__ == name and str(x).startswith(start)]
            assert hits, (f"docs/porting.md:{line}: no {name} starting {start!r} in "
                          f"{[f'{type(x).__name__}: {x}' for x in chain]}")
            for part in rest:
                assert part in str(hits[0]), f"docs/porting.md:{line}: {part!r} not in {hits[0]}"
        checked += 1
    assert checked == GUIDE.read_text().count("```text\n")  # every error shown is checked


def test_the_readme_links_the_porting_guide():
    assert "(docs/porting.md)" in (ROOT / "README.md").read_text()
