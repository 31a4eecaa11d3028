#!/usr/bin/env python3
"""Lists every Rust function longer than a limit, longest first, and every file over a limit.

    bench/long-functions.py [--max 80] [--file-max 600] [--no-tests] [path...]   (default: src)

How a function is counted: from the line that holds its `fn` keyword to the line that holds its
closing brace, both included; its doc comment and attributes above the `fn` line are not counted,
blank lines and comments inside the body are. A function nested in another counts on its own and
inside the outer one. Signatures without a body (trait declarations) are skipped; `fn(..)` pointer
types are not functions. Strings, raw strings, chars and comments are skipped when matching braces.

A function is marked `test` when it sits in a `#[cfg(test)]` module or in a file under a `tests/`
folder or named `tests.rs`, or carries a `#[test]`/`#[tokio::test]`-style attribute;
`--no-tests` leaves those out. Exit status 1 when anything is over a limit, 0 otherwise.
"""
import argparse
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z0-9_]")


def skip_string(src, i):
    """Index just past a "..." string whose opening quote is at i."""
    i += 1
    while i < len(src):
        if src[i] == "\\":
            i += 2
            continue
        if src[i] == '"':
            return i + 1
        i += 1
    return i


def raw_string_end(src, i):
    """If a raw string (r"..", r#".."#, br"..") starts at i, the index past it, else None."""
    m = re.match(r'b?r(#*)"', src[i : i + 300])
    if not m:
        return None
    closing = '"' + m.group(1)
    end = src.find(closing, i + m.end())
    return len(src) if end < 0 else end + len(closing)


def char_end(src, i):
    """If a char literal starts at i (not a lifetime), the index past it, else None."""
    m = re.match(r"'(\\u\{[0-9A-Fa-f]+\}|\\x[0-9A-Fa-f]{2}|\\.|[^\\'\n])'", src[i : i + 14])
    return i + m.end() if m else None


def functions(src):
    """Yields (name, first line, last line, brace offset) of every function with a body."""
    line = 1
    i = 0
    n = len(src)
    stack = []  # one entry per open brace: the function it opens, or None
    pending = None  # (name, line) of an `fn` whose body has not opened yet
    parens = 0
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            continue
        if src.startswith("//", i):
            i = src.find("\n", i)
            i = n if i < 0 else i
            continue
        if src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    line += src[i] == "\n"
                    i += 1
            continue
        prev_ident = i > 0 and IDENT.match(src[i - 1])
        if c in "rb" and not prev_ident:
            end = raw_string_end(src, i)
            if end is None and c == "b" and src.startswith('b"', i):
                end = skip_string(src, i + 1)
            if end is not None:
                line += src.count("\n", i, end)
                i = end
                continue
        if c == '"':
            end = skip_string(src, i)
            line += src.count("\n", i, end)
            i = end
            continue
        if c == "'":
            end = char_end(src, i)
            i = end if end is not None else i + 1
            continue
        if not prev_ident:
            m = re.match(r"fn\s+([A-Za-z_][A-Za-z0-9_]*)", src[i : i + 200])
            if m:
                pending, parens = (m.group(1), line), 0
                line += src.count("\n", i, i + m.end())
                i += m.end()
                continue
        if c in "([":
            parens += 1
        elif c in ")]":
            parens -= 1
        elif c == ";" and parens <= 0:
            pending = None
        elif c == "{":
            stack.append((pending, i) if pending else None)
            pending = None
        elif c == "}":
            top = stack.pop() if stack else None
            if top:
                (name, first), offset = top
                yield name, first, line, offset
        i += 1


def test_spans(src):
    """Offsets (start, end) of `#[cfg(test)]` modules."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", src):
        depth, j = 1, m.end()
        while j < len(src) and depth:
            depth += {"{": 1, "}": -1}.get(src[j], 0)
            j += 1
        spans.append((m.start(), j))
    return spans


def is_test_fn(src, name, first_line):
    """Whether the attributes right above the `fn` line hold a test attribute."""
    lines = src.split("\n")[: first_line - 1]
    for text in reversed(lines):
        text = text.strip()
        if re.match(r"#\[(\w+::)?test\b", text):
            return True
        if not (text.startswith("#[") or text.startswith("///") or text.startswith("//")):
            return False
    return False


def rust_files(paths):
    for path in paths:
        if os.path.isfile(path):
            yield path
        for root, _, names in sorted(os.walk(path)):
            for name in sorted(names):
                if name.endswith(".rs"):
                    yield os.path.join(root, name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=80, help="longest function allowed (lines)")
    parser.add_argument("--file-max", type=int, default=600, help="longest file allowed (lines)")
    parser.add_argument("--no-tests", action="store_true", help="leave test functions out")
    parser.add_argument("paths", nargs="*", default=["src"])
    args = parser.parse_args()

    long_fns, long_files = [], []
    for path in rust_files(args.paths):
        with open(path, encoding="utf-8") as f:
            src = f.read()
        file_lines = src.count("\n")
        if file_lines > args.file_max:
            long_files.append((file_lines, path))
        test_file = "/tests/" in "/" + path or path.endswith("tests.rs")
        spans = test_spans(src)
        for name, first, last, offset in functions(src):
            length = last - first + 1
            if length <= args.max:
                continue
            test = (
                test_file
                or any(a <= offset < b for a, b in spans)
                or is_test_fn(src, name, first)
            )
            if test and args.no_tests:
                continue
            long_fns.append((length, path, first, name, test))

    long_fns.sort(key=lambda f: (-f[0], f[1], f[2]))
    for length, path, first, name, test in long_fns:
        print(f"{length:5} {path}:{first} {name}{'  (test)' if test else ''}")
    print(f"{len(long_fns)} functions over {args.max} lines")
    for file_lines, path in sorted(long_files, reverse=True):
        print(f"{file_lines:5} {path}  (file)")
    print(f"{len(long_files)} files over {args.file_max} lines")
    return 1 if long_fns or long_files else 0


if __name__ == "__main__":
    sys.exit(main())
