"""Checks that moving text between docs/ and notes/ lost no measurement, and that every link still lands.

1. Numbers: every number token (``0.280``, ``+0.021``, ``−0.033``, ``2,909``, the ``47`` of ``47 s``) and every
   commit hash in backticks that the docs held at a base revision appears in some Markdown file of today's ``docs/``
   or ``notes/``.
2. Links: every ``[text](path#anchor)`` in README.md, docs/ and notes/ resolves to an existing file and, where it names
   one, to a heading of that file (GitHub's anchors); so does every ``docs/….md#anchor`` or ``notes/….md#anchor``
   named in the project's Python, JSON and TOML files (docstrings, option descriptions, tests).

    python tools/check_docs_numbers.py                 # base: ee49da0, the commit before docs/ and notes/ were split
    python tools/check_docs_numbers.py --base HEAD~3 --old 'docs/*.md' --old 'notes/*.md'

Exits 1 and lists what is missing when a check fails. Reads files only; runs in well under a second.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = "ee49da0e1377650c25d928130b73b03aacf35efc"  # main before issue 92.1 moved the studies out of docs/

# A number: digits with optional thousands commas and decimals, an optional sign (+, −, or - after a space or bracket);
# not part of a word, an identifier or a hash (1.5B, Q4_K_M, sha256, 709ef20 are not numbers).
NUMBER = re.compile(r"(?<![\w.,])([+−-]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\w|[.,]\d)")
COMMIT = re.compile(r"`([0-9a-f]{7,40})`")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_REFERENCE = re.compile(r"\b((?:docs|notes)/[\w.-]+\.md)(#[\w-]+)?")


def number_tokens(text: str) -> list[str]:
    tokens = []
    for match in NUMBER.finditer(text):
        sign, whole, decimals = match.group(1), match.group(2), match.group(3) or ""
        if sign == "-" and match.start() > 0 and text[match.start() - 1] not in " \t([{|/":
            sign = ""
        tokens.append(("−" if sign == "-" else sign) + whole + decimals)
    return tokens


def commit_tokens(text: str) -> list[str]:
    return [h for h in COMMIT.findall(text) if re.search(r"\d", h) and re.search(r"[a-f]", h)]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def old_files(base: str, patterns: list[str]) -> dict[str, str]:
    names = git("ls-tree", "-r", "--name-only", base).splitlines()
    chosen = [n for n in names if any(fnmatch.fnmatch(n, p) for p in patterns)]
    return {n: git("show", f"{base}:{n}") for n in chosen}


def markdown_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.md"))


def check_numbers(base: str, patterns: list[str], counts: bool) -> list[str]:
    old = old_files(base, patterns)
    new_text = "\n".join(p.read_text(encoding="utf-8") for p in markdown_files("docs", "notes"))
    new_numbers, new_commits = Counter(number_tokens(new_text)), Counter(commit_tokens(new_text))
    problems, seen_numbers, seen_commits = [], Counter(), Counter()
    for name, text in old.items():
        for number, line in enumerate(text.splitlines(), 1):
            for kind, tokens, have, seen in (
                ("number", number_tokens(line), new_numbers, seen_numbers),
                ("commit", commit_tokens(line), new_commits, seen_commits),
            ):
                for token in tokens:
                    seen[token] += 1
                    if token not in have:
                        problems.append(f"{name}:{number}: {kind} {token} is in no file of docs/ or notes/")
    if counts:
        for kind, seen, have in (("number", seen_numbers, new_numbers), ("commit", seen_commits, new_commits)):
            for token, n in sorted(seen.items()):
                if have[token] < n:
                    problems.append(f"{kind} {token}: {n} times at {base[:7]}, {have[token]} times now")
    print(
        f"numbers: {sum(seen_numbers.values())} number tokens ({len(seen_numbers)} distinct) and"
        f" {sum(seen_commits.values())} commit hashes ({len(seen_commits)} distinct) in {len(old)} files at"
        f" {base[:7]} ({', '.join(patterns)}); checked against {len(markdown_files('docs', 'notes'))} files of docs/"
        f" and notes/"
    )
    return problems


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (word characters, hyphens, spaces kept),
    spaces as hyphens; links and emphasis read as their text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code blanked, line numbers kept."""
    lines, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), line))
    return "\n".join(lines)


def anchors(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        found, used = set(), Counter()
        fenced = False
        for line in path.read_text(encoding="utf-8").split("\n"):
            if FENCE.match(line):
                fenced = not fenced
                continue
            match = None if fenced else HEADING.match(line)
            if match:
                base = slug(match.group(2))
                found.add(base if not used[base] else f"{base}-{used[base]}")
                used[base] += 1
        found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", path.read_text(encoding="utf-8")))
        cache[path] = found
    return cache[path]


def resolve(source: Path, target: str, cache: dict[Path, set[str]], relative_to: Path) -> str | None:
    """None when ``target`` (a path, a path#anchor or #anchor) lands; otherwise why not."""
    path_part, _, anchor = target.partition("#")
    path = source if not path_part else (relative_to / path_part).resolve()
    if not path.exists():
        return f"{path_part} does not exist"
    if anchor and path.is_file() and path.suffix == ".md" and anchor not in anchors(path, cache):
        return f"{path.relative_to(ROOT)} has no heading #{anchor}"
    return None


def check_links() -> list[str]:
    problems, cache, links = [], {}, 0
    for path in [ROOT / "README.md", *markdown_files("docs", "notes")]:
        text = without_code(path.read_text(encoding="utf-8"))
        for match in LINK.finditer(text):
            target = match.group(2)
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            links += 1
            why = resolve(path, target, cache, path.parent)
            if why:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path.relative_to(ROOT)}:{line}: [{match.group(1)}]({target}): {why}")
    code_files = [
        ROOT / n
        for n in git("ls-files", "--cached", "--others", "--exclude-standard").splitlines()
        if n.endswith((".py", ".json", ".toml")) and (ROOT / n).is_file()
    ]
    references = 0
    for path in code_files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in CODE_REFERENCE.finditer(line):
                references += 1
                why = resolve(path, match.group(1) + (match.group(2) or ""), cache, ROOT)
                if why:
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}: {why}")
    print(
        f"links: {links} relative links in README.md, docs/ and notes/; {references} docs/ or notes/ references in"
        f" {len(code_files)} Python, JSON and TOML files"
    )
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", default=BASE, help="the revision whose docs must not lose a number (default: %(default).7s)"
    )
    parser.add_argument(
        "--old", action="append", help="glob of the files read at --base (repeatable; default docs/*.md)"
    )
    parser.add_argument("--counts", action="store_true", help="also require each token as often as at --base")
    args = parser.parse_args()
    problems = check_numbers(args.base, args.old or ["docs/*.md"], args.counts) + check_links()
    for problem in problems:
        print(problem)
    print("ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
