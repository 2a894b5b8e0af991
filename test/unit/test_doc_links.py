"""
Every relative link in the repository's Markdown reaches a file, and its anchor a heading.

Docs move sections between files; a link left behind still renders, and only a reader who
follows it finds it dead. Anchors are GitHub's: the heading in lower case, punctuation
dropped, spaces as hyphens, ``-1``, ``-2`` after repeats.
"""

from pathlib import Path
import re

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC_PLACES = ('README.md', 'docs', 'benchmarks', 'examples', 'config', 'launch')
LINK = re.compile(r'\]\(([^)\s]+)\)')
HEADING = re.compile(r'#{1,6} (.+)')


def _markdown_files() -> list[Path]:
    files = []
    for place in DOC_PLACES:
        path = REPO / place
        files.extend([path] if path.is_file() else sorted(path.rglob('*.md')))
    return files


def _prose_lines(path: Path) -> list[str]:
    """Return the file's lines outside fenced code blocks (a link or heading there is none)."""
    lines, fenced = [], False
    for line in path.read_text(encoding='utf-8').splitlines():
        if line.lstrip().startswith('```'):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def github_anchor(heading: str) -> str:
    """Return the anchor GitHub gives a heading (before the suffix of a repeated one)."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def anchors_of(path: Path) -> set[str]:
    found: set[str] = set()
    repeats: dict[str, int] = {}
    for line in _prose_lines(path):
        match = HEADING.match(line)
        if match:
            anchor = github_anchor(match.group(1))
            count = repeats.get(anchor, 0)
            repeats[anchor] = count + 1
            found.add(anchor if count == 0 else f'{anchor}-{count}')
    return found


def dead_links(path: Path) -> list[str]:
    """Return this file's relative links whose file or anchor does not exist."""
    dead = []
    for line in _prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r'[a-z][a-z0-9+.-]*:', target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition('#')
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                dead.append(f'{target} (no such file)')
            elif anchor and linked.suffix == '.md' and anchor not in anchors_of(linked):
                dead.append(f'{target} (no such heading)')
    return dead


def test_the_anchor_rule_is_githubs() -> None:
    assert github_anchor('Timer slack and capture lateness') == 'timer-slack-and-capture-lateness'
    assert github_anchor("The executor's turn inside a time-step") == \
        'the-executors-turn-inside-a-time-step'
    assert github_anchor('d. Large images (`benchmarks/image_load.py`)') == \
        'd-large-images-benchmarksimage_loadpy'


def test_a_dead_link_is_found(tmp_path: Path) -> None:
    (tmp_path / 'other.md').write_text('# Present\n\n```\n# not a heading\n```\n')
    page = tmp_path / 'page.md'
    page.write_text('[a](other.md#present) [b](other.md#absent) [c](gone.md) '
                    '[d](other.md#not-a-heading) [e](https://example.com/x#y)\n')
    assert dead_links(page) == ['other.md#absent (no such heading)', 'gone.md (no such file)',
                                'other.md#not-a-heading (no such heading)']


@pytest.mark.parametrize('path', _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_is_alive(path: Path) -> None:
    assert dead_links(path) == []
