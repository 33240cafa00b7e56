#!/usr/bin/env python3
"""Measures function lengths and `Result<_, String>` uses in non-test Rust code.

Usage: python3 tools/measure.py fns|strings [DIR...] [--list] [--over N]
(default DIRs: host/src plugins). `fns` counts each function from the line
of its `fn` keyword to the line of its closing brace, both included, and
prints how many are over 40, 50 and 100 lines (`--list` names those over
`--over`, default 50). `strings` counts each `Result<T, String>` type
(second generic argument exactly `String`). Both skip comments, string
literals, `#[cfg(test)]` items (inline test modules and the files of
`#[cfg(test)] mod name;`), and every `tests/`, `benches/` and `examples/`
folder. Plain text scanning, no parser: good enough for rustfmt'd code.
"""

import os
import re
import sys

SKIP_DIRS = {"tests", "benches", "examples", "target"}


def strip(text):
    """The code with comments and literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
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
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:i + 260])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 12])
            if m:
                out.append("' '")
                i += m.end()
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def close_of(code, open_at):
    """The index of the brace closing the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def item_end(code, at):
    """Where the item, field or statement starting at `at` ends: its first
    `;` or `,` outside brackets, or the brace closing its body."""
    depth, j = 0, at
    while j < len(code):
        ch = code[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                return j - 1
        elif ch == "}" and depth == 0:
            return j - 1
        elif ch in ";," and depth == 0:
            return j
        elif ch == "{" and depth == 0:
            return close_of(code, j)
        j += 1
    return len(code) - 1


def blank_test_items(code):
    """Blanks every `#[cfg(test)]` item; returns the code and the names of
    the `#[cfg(test)] mod name;` files it declares."""
    files = []
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]", code))):
        rest = code[m.end():]
        decl = re.match(r"(\s*#\[[^\]]*\])*\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", rest)
        if decl:
            files.append(decl.group(4))
            continue
        end = item_end(code, m.end())
        code = code[:m.start()] + re.sub(r"[^\n]", " ", code[m.start():end + 1]) + code[end + 1:]
    return code, files


def rust_files(dirs):
    for top in dirs:
        for root, subdirs, names in os.walk(top):
            subdirs[:] = sorted(d for d in subdirs if d not in SKIP_DIRS)
            for name in sorted(names):
                if name.endswith(".rs"):
                    yield os.path.join(root, name)


def sources(dirs):
    """(path, code) for every non-test file, test items blanked."""
    paths = list(rust_files(dirs))
    test_files = set()
    stripped = {}
    for path in paths:
        code, mods = blank_test_items(strip(open(path, encoding="utf-8").read()))
        stripped[path] = code
        base = os.path.dirname(path)
        stem = os.path.basename(path)[:-3]
        if stem not in ("mod", "lib", "main"):
            base = os.path.join(base, stem)
        for mod in mods:
            test_files.add(os.path.join(base, mod + ".rs"))
            test_files.add(os.path.join(base, mod, "mod.rs"))
    for path in paths:
        if path not in test_files and not any(path.startswith(t[:-6]) for t in test_files if t.endswith("mod.rs")):
            yield path, stripped[path]


def functions(code):
    """(name, first line, length in lines) of each function with a body."""
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        depth, j = 0, m.end()
        while j < len(code):
            ch = code[j]
            if ch in "([<":
                depth += 1
            elif ch in ")]>" and not (ch == ">" and code[j - 1] == "-"):
                depth -= 1
            elif ch == ";" and depth <= 0:
                j = -1
                break
            elif ch == "{" and depth <= 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, close_of(code, j)) + 1
        yield m.group(1), first, last - first + 1


def string_results(code):
    """The line of each `Result<_, String>`."""
    for m in re.finditer(r"\bResult\s*<", code):
        depth, j, args, start = 1, m.end(), [], m.end()
        while j < len(code) and depth:
            ch = code[j]
            if ch in "<([":
                depth += 1
            elif ch in ">)]" and not (ch == ">" and code[j - 1] == "-"):
                depth -= 1
            if (ch == "," and depth == 1) or depth == 0:
                args.append(code[start:j].strip())
                start = j + 1
            j += 1
        if len(args) >= 2 and args[1] in ("String", "std::string::String"):
            yield code.count("\n", 0, m.start()) + 1


def main(argv):
    mode = argv[0] if argv else "fns"
    listing = "--list" in argv
    over = 50
    if "--over" in argv:
        over = int(argv[argv.index("--over") + 1])
    dirs = [a for a in argv[1:] if not a.startswith("--") and not a.isdigit()] or ["host/src", "plugins"]
    if mode == "fns":
        found = []
        for path, code in sources(dirs):
            for name, line, length in functions(code):
                found.append((length, f"{path}:{line}", name))
        found.sort(reverse=True)
        if listing:
            for length, at, name in found:
                if length > over:
                    print(f"{length:4} {at} {name}")
        for limit in (40, 50, 100):
            print(f"functions over {limit} lines: {sum(1 for f in found if f[0] > limit)}")
        print(f"functions: {len(found)}")
    elif mode == "strings":
        total = 0
        for path, code in sources(dirs):
            for line in string_results(code):
                total += 1
                if listing:
                    print(f"{path}:{line}")
        print(f"Result<_, String> in non-test code: {total}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
