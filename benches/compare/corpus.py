"""Builds the comparison corpus: real English sentences from the docstrings and comments of the Python standard
library installed on this machine (no network), deduplicated and shuffled with a fixed seed.

Usage: python corpus.py OUT.jsonl [N]   (default N = 101000: 100,000 documents and 1,000 held-out queries)
Each line: {"id": "s<k>", "text": "..."}.
"""
import ast
import json
import random
import re
import sys
import sysconfig
from pathlib import Path

WORD = re.compile(r"[A-Za-z][a-z]+")
SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sentences_of(text):
    text = re.sub(r"\s+", " ", text).strip()
    for s in SPLIT.split(text):
        s = s.strip()
        words = s.split()
        if not (6 <= len(words) <= 40):
            continue
        # Mostly English words, not code or tables.
        if sum(1 for w in words if WORD.fullmatch(w.strip(".,;:()'\"!?"))) < 0.7 * len(words):
            continue
        if not s[0].isupper() or s[-1] not in ".!?":
            continue
        yield s


def texts_of(path):
    try:
        src = path.read_text(encoding="utf-8")
        tree = ast.parse(src)
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc
    comment = []
    for line in src.splitlines():
        t = line.strip()
        if t.startswith("# "):
            comment.append(t[2:])
        elif comment:
            yield " ".join(comment)
            comment = []


def main():
    out = Path(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 101_000
    roots = {Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])}
    roots |= {p for p in Path("/usr/lib").glob("python3*") if p.is_dir()}
    seen, sentences = set(), []
    for root in sorted(roots):
        for path in sorted(root.rglob("*.py")):
            for text in texts_of(path):
                for s in sentences_of(text):
                    key = s.lower()
                    if key not in seen:
                        seen.add(key)
                        sentences.append(s)
    random.Random(20261124).shuffle(sentences)
    if len(sentences) < n:
        print(f"only {len(sentences)} sentences found; using them all", file=sys.stderr)
    with out.open("w", encoding="utf-8") as f:
        for k, s in enumerate(sentences[:n]):
            f.write(json.dumps({"id": f"s{k}", "text": s}) + "\n")
    print(f"{min(n, len(sentences))} sentences from {len(seen)} distinct -> {out}")


if __name__ == "__main__":
    main()
