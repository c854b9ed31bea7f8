#!/usr/bin/env python3
"""The shape of the code a newcomer reads: functions too long to follow, and files that
import each other.

    python3 bench/code_shape.py                 # check (CI runs this)
    python3 bench/code_shape.py --list          # every function over the limit, longest first
    python3 bench/code_shape.py --write-allowed # record today's offenders (after shrinking them)

Rules (issue 44 item 1): no function in the `lab` crate over 120 lines, counted from its
`fn` line to its closing brace, tests included; no two files in the workspace importing
each other (a `use` or a path naming the other's module, in either direction).

Until every offender is rewritten, bench/code_shape_allowed.txt lists those that were over
the limit when the rule came in, with their length then: the check fails if a function not
listed goes over, if a listed one grows, or if a file pair that did not import each other
starts to. The list only shrinks: `--write-allowed` refuses to add entries.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 120
LIMITED = ["crates/lab/src"]
ALLOWED = os.path.join(ROOT, "bench", "code_shape_allowed.txt")
FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
                r"(?:extern\s+\"C\"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")


def strip_code(text):
    """`text` with string and char literals and comments blanked (newlines kept), so
    braces and paths can be counted."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:i + 12])) and (i == 0 or not (
                text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and (m := re.match(r"'(?:\\.|\\u\{[0-9a-fA-F]+\}|[^\\'])'", text[i:i + 12])):
            out.append(" " * m.end())
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def rust_files(base):
    for d, _, files in os.walk(base):
        if "/target" in d or "/." in d:
            continue
        for f in files:
            if f.endswith(".rs"):
                yield os.path.join(d, f)


def functions(path):
    """(name, first line, lines) of every fn with a body in the file."""
    code = strip_code(open(path).read()).split("\n")
    found = []
    for i, line in enumerate(code):
        m = FN.match(line)
        if not m:
            continue
        depth, started = 0, False
        for j in range(i, len(code)):
            for ch in code[j]:
                if ch == ";" and not started and depth == 0:
                    break  # a declaration without a body
                if ch == "{":
                    depth += 1
                    started = True
                elif ch == "}":
                    depth -= 1
            else:
                if started and depth == 0:
                    found.append((m.group(1), i + 1, j - i + 1))
                    break
                continue
            break
    return found


def long_functions():
    out = []
    for base in LIMITED:
        for path in sorted(rust_files(os.path.join(ROOT, base))):
            rel = os.path.relpath(path, ROOT)
            for name, line, n in functions(path):
                if n > LIMIT:
                    out.append((rel, name, n, line))
    return out


def module_of(rel):
    """`crates/lab/src/experiments/trim.rs` -> ("lab", "experiments::trim")."""
    parts = rel.split("/")
    if parts[0] == "crates":
        crate, inner = parts[1], parts[3:]
    else:
        crate, inner = "flashlab", parts[1:]
    inner[-1] = inner[-1][:-3]
    if inner[-1] in ("mod", "lib", "main"):
        inner = inner[:-1]
    return crate, "::".join(inner)


def import_circles():
    """Pairs of files of one crate each naming the other's module."""
    files = {}
    for base in ["crates", "src"]:
        for path in rust_files(os.path.join(ROOT, base)):
            rel = os.path.relpath(path, ROOT)
            if "/tests/" in rel or "/benches/" in rel or "/examples/" in rel:
                continue
            files[rel] = module_of(rel)
    by_module = {v: k for k, v in files.items()}
    refs = {}
    for rel, (crate, mod) in files.items():
        code = strip_code(open(os.path.join(ROOT, rel)).read())
        # Test modules inside a file may use anything.
        code = code.split("#[cfg(test)]")[0]
        named = set()
        parent = mod.rsplit("::", 1)[0] if "::" in mod else ""
        # `use crate::a::{b, c::d}` names crate::a::b and crate::a::c::d.
        code = re.sub(r"\b((?:crate|super)::(?:[a-z_][a-z0-9_]*::)*)\{([^{}]*)\}",
                      lambda m: " ".join(m.group(1) + x.strip() for x in m.group(2).split(",")),
                      code)
        for root, prefix in (("crate", []), ("super", [parent] if parent else [])):
            for m in re.finditer(rf"\b{root}::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)", code):
                segs = m.group(1).split("::")
                for k in range(len(segs), 0, -1):
                    target = (crate, "::".join(prefix + segs[:k]))
                    if target in by_module:
                        named.add(by_module[target])
                        break
        named.discard(rel)
        refs[rel] = named
    pairs = set()
    for a, named in refs.items():
        for b in named:
            if a in refs.get(b, set()):
                pairs.add(tuple(sorted((a, b))))
    return sorted(pairs)


def load_allowed():
    funcs, circles = {}, set()
    if os.path.exists(ALLOWED):
        for line in open(ALLOWED):
            line = line.split("#")[0].strip()
            if not line:
                continue
            kind, *rest = line.split()
            if kind == "fn":
                path, name, n = rest
                funcs[(path, name)] = int(n)
            elif kind == "circle":
                circles.add(tuple(sorted(rest)))
    return funcs, circles


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--write-allowed", action="store_true")
    a = ap.parse_args()
    longs = long_functions()
    circles = import_circles()
    if a.list:
        for path, name, n, line in sorted(longs, key=lambda x: -x[2]):
            print(f"{n:5} {path}:{line} {name}")
        for p in circles:
            print("circle", *p)
        return
    allowed_fns, allowed_circles = load_allowed()
    if a.write_allowed:
        new = [(p, f) for p, f, _, _ in longs if (p, f) not in allowed_fns]
        new_c = [c for c in circles if c not in allowed_circles]
        if os.path.exists(ALLOWED) and (new or new_c):
            sys.exit(f"--write-allowed only shrinks the list; new offenders: {new + new_c}")
        with open(ALLOWED, "w") as f:
            f.write("# Written by `python3 bench/code_shape.py --write-allowed`: functions over "
                    f"{LIMIT} lines in {', '.join(LIMITED)} and files importing each other\n"
                    "# when the rule came in (issue 44), each to be rewritten; the list only "
                    "shrinks.\n")
            for path, name, n, _ in sorted(longs):
                f.write(f"fn {path} {name} {n}\n")
            for c in circles:
                f.write(f"circle {c[0]} {c[1]}\n")
        print(f"{len(longs)} functions, {len(circles)} circles recorded in {ALLOWED}")
        return
    problems = []
    for path, name, n, line in longs:
        was = allowed_fns.get((path, name))
        if was is None:
            problems.append(f"{path}:{line} fn {name} is {n} lines (at most {LIMIT}): split it")
        elif n > was:
            problems.append(f"{path}:{line} fn {name} grew from {was} to {n} lines "
                            f"(listed to shrink to {LIMIT})")
    for c in circles:
        if c not in allowed_circles:
            problems.append(f"{c[0]} and {c[1]} import each other: move what both need "
                            "into one of them or a third file")
    listed = len(allowed_fns) + len(allowed_circles)
    gone = sum(1 for k in allowed_fns if k not in {(p, f) for p, f, _, _ in longs}) + sum(
        1 for c in allowed_circles if c not in circles)
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"code shape: {len(longs)} functions over {LIMIT} lines and {len(circles)} import "
          f"circles, all listed to shrink ({gone} of {listed} listed are already gone: "
          "`--write-allowed` drops them)")


if __name__ == "__main__":
    main()
