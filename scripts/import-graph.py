#!/usr/bin/env python3
"""The file-level import graph of the library (every file under src/ that lib.rs reaches; the
binary, src/bin/, is left out), and its loops.

Reads the `mod` and `use` declarations of every library file, and the `crate::`/`super::`/
`self::` paths written inline, resolves each to the file that defines what it names
(following `pub use` re-exports, so a folder's mod.rs that only re-exports is no hub), and
prints one line per file with the files it imports. Test code (`#[cfg(test)]` modules and
items) is left out: tests may reach across the crate.

Then it reports
  (a) import loops: groups of files that import each other, directly or through other
      files, and one cycle through each group; over the whole library, or only the loops
      with two files or more in the folders --scope names;
  (b) operator modules (the folders under src/ops/) that import another operator module.
It exits 1 when it finds either, unless --report is given. `tests/import_graph.rs` runs it
over the whole library.

    python3 scripts/import-graph.py [--report] [--scope pipeline,reader,ops] [--quiet] [--root DIR]
"""

import argparse
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def strip(text):
    """The text with comments, string and character literals blanked (lengths kept)."""
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
        elif re.match(r'b?r#*"', text[i:i + 40]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(b?r)(#*)"', text[i:])
            end = '"' + m.group(2)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c == "'":
            # A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if i + 1 < n and text[i + 1] == "\\":
                j = text.find("'", i + 2)
                j = n if j < 0 else j + 1
                out.append(" " * (j - i))
                i = j
            elif i + 2 < n and text[i + 2] == "'":
                out.append("   ")
                i += 3
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, i):
    """Index after the brace that closes the one at `i`."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def parse_use(raw):
    """(path segments, alias) pairs of one use declaration's tree."""
    # Mark the `as` renames before the spaces go.
    spaced = re.sub(r"\s+as\s+", " as ", raw.strip())
    paths = []
    for seg, alias in _use_tree_spaced(spaced):
        paths.append((seg, alias))
    return paths


def _use_tree_spaced(t):
    t = t.strip()
    parts, depth, cur = [], 0, ""
    for ch in t:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        if p.startswith("{"):
            out += _use_tree_spaced(p[1:p.rfind("}")])
            continue
        brace = p.find("{")
        if brace >= 0:
            prefix = [x.strip() for x in p[:brace].split("::") if x.strip()]
            for segs, alias in _use_tree_spaced(p[brace + 1:p.rfind("}")]):
                out.append((prefix + segs, alias))
            continue
        alias = None
        if " as " in p:
            p, alias = [x.strip() for x in p.split(" as ", 1)]
        out.append(([x.strip() for x in p.split("::") if x.strip()], alias))
    return out


class Module:
    def __init__(self, path, file, inline):
        self.path = path          # tuple of segments from the crate root
        self.file = file          # relative file name
        self.inline = inline
        self.children = {}        # name -> Module
        self.exports = {}         # name -> (absolute segments) from pub use
        self.globs = []           # absolute module paths of `pub use x::*`


class Crate:
    def __init__(self):
        self.modules = {}         # path tuple -> Module
        self.refs = []            # (file, module path, segments, kind, public, alias)
        self.macros = {}          # #[macro_export] macro name -> file (they live at the root)
        self.files = []

    def load(self, rel, path):
        self.files.append(rel)
        root = Module(path, rel, False)
        self.modules[path] = root
        self.scan(self.read(rel), rel, root)

    def read(self, rel):
        text = strip(open(os.path.join(ROOT, rel), encoding="utf-8").read())
        for m in re.finditer(r"#\[macro_export\]\s*macro_rules!\s*(\w+)", text):
            self.macros[m.group(1)] = rel
        return text

    def child_file(self, parent_file, is_dir_owner, name):
        base = os.path.dirname(parent_file)
        if not is_dir_owner:
            stem = os.path.splitext(os.path.basename(parent_file))[0]
            base = os.path.join(base, stem)
        for cand in (os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")):
            if os.path.exists(os.path.join(ROOT, cand)):
                return cand
        return None

    def scan(self, text, rel, file_module):
        owner = os.path.basename(rel) in ("mod.rs", "lib.rs", "main.rs")
        stack = [(file_module, -1)]  # (module, depth at which it closes)
        depth = 0
        test = False
        i, n = 0, len(text)
        ident = re.compile(r"[A-Za-z_]\w*")
        while i < n:
            c = text[i]
            if c.isspace():
                i += 1
                continue
            if text.startswith("#[cfg(test)]", i) or text.startswith("#[cfg(all(test", i):
                test = True
                i = text.find("]", i) + 1
                continue
            if text.startswith("#![", i) or text.startswith("#[", i):
                # Skip the attribute (brackets balanced).
                d, j = 0, i + 1
                while j < n:
                    d += text[j] == "["
                    d -= text[j] == "]"
                    j += 1
                    if d == 0:
                        break
                i = j
                continue
            m = re.compile(r"(pub(\s*\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])").match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                name, end = m.group(3), m.group(4)
                cur = stack[-1][0]
                if test:
                    test = False
                    i = matching(text, m.end() - 1) if end == "{" else m.end()
                    continue
                if end == ";":
                    # (A `mod x;` inside an inline module is not used in this crate.)
                    f = self.child_file(rel, owner, name) if cur is file_module else None
                    if f is not None:
                        child = Module(cur.path + (name,), f, False)
                        cur.children[name] = child
                        self.files.append(f)
                        self.modules[child.path] = child
                        self.scan(self.read(f), f, child)
                    i = m.end()
                    continue
                child = Module(cur.path + (name,), rel, True)
                cur.children[name] = child
                self.modules[child.path] = child
                depth += 1
                stack.append((child, depth))
                i = m.end()
                continue
            m = re.compile(r"(pub(\s*\([^)]*\))?\s+)?use\s+").match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                j = text.find(";", m.end())
                j = n if j < 0 else j
                if not test:
                    public = m.group(1) is not None
                    cur = stack[-1][0]
                    for segs, alias in parse_use(text[m.end():j]):
                        self.refs.append((rel, cur.path, segs, "use", public, alias))
                test = False
                i = j + 1
                continue
            if test:
                # Another item under #[cfg(test)]: skip it whole.
                j = i
                while j < n and text[j] not in ";{":
                    j += 1
                i = matching(text, j) if j < n and text[j] == "{" else j + 1
                test = False
                continue
            if c == "{":
                depth += 1
                i += 1
                continue
            if c == "}":
                if stack[-1][1] == depth:
                    stack.pop()
                depth -= 1
                i += 1
                continue
            m = ident.match(text, i)
            if m:
                after_dot = i > 0 and text[i - 1] in ".:"
                if not after_dot and re.match(r"\s*::\s*[A-Za-z_]", text[m.end():m.end() + 40]):
                    # A path written inline: `crate::`/`super::`/`self::`, or one starting
                    # at a child module (resolved later; other first segments are crates,
                    # types or imported names, and resolve to nothing).
                    p = re.compile(r"[A-Za-z_]\w*(\s*::\s*[A-Za-z_]\w*)+").match(text, i)
                    segs = [s.strip() for s in p.group(0).split("::")]
                    self.refs.append((rel, stack[-1][0].path, segs, "inline", False, None))
                    i = p.end()
                    continue
                i = m.end()
                continue
            i += 1

    def absolute(self, here, segs):
        """Absolute segments for a path written in module `here`, or None (another crate)."""
        if not segs:
            return None
        first = segs[0]
        if first == "crate":
            out, rest = [], segs[1:]
        elif first in ("super", "self"):
            out, rest = list(here), segs
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    out = out[:-1]
                rest = rest[1:]
        else:
            mod = self.modules.get(tuple(here))
            if mod is not None and first in mod.children:
                out, rest = list(here), segs
            else:
                return None
        return out + [s for s in rest if s != "self"]

    def exports(self):
        for rel, here, segs, kind, public, alias in self.refs:
            if kind != "use" or not public:
                continue
            ab = self.absolute(here, segs)
            if ab is None:
                continue
            mod = self.modules[tuple(here)]
            if ab and ab[-1] == "*":
                mod.globs.append(tuple(ab[:-1]))
            elif segs and segs[-1] == "self":
                mod.exports[alias or ab[-1]] = ab
            elif ab:
                mod.exports[alias or ab[-1]] = ab

    def resolve(self, ab, seen=None):
        """The file defining what absolute path `ab` names."""
        seen = seen or set()
        key = tuple(ab)
        if key in seen:
            return None
        seen.add(key)
        k = len(ab)
        while k >= 0 and tuple(ab[:k]) not in self.modules:
            k -= 1
        if k < 0:
            return None
        mod = self.modules[tuple(ab[:k])]
        rest = ab[k:]
        if k == 0 and rest and rest[0] in self.macros:
            return self.macros[rest[0]]
        if rest and rest[0] != "*":
            if rest[0] in mod.exports:
                target = mod.exports[rest[0]] + rest[1:]
                r = self.resolve(target, seen)
                if r is not None:
                    return r
            for g in mod.globs:
                gm = self.modules.get(g)
                if gm is not None and (rest[0] in gm.exports or self.defines(gm, rest[0])):
                    r = self.resolve(list(g) + rest, seen)
                    if r is not None:
                        return r
        return mod.file

    @staticmethod
    def defines(mod, name):
        return name in mod.children

    def graph(self):
        self.exports()
        edges = defaultdict(set)
        for rel, here, segs, kind, public, alias in self.refs:
            ab = self.absolute(here, segs)
            if ab is None or not ab or ab[-1] == "*" and len(ab) == 1:
                continue
            if ab[-1] == "*":
                ab = ab[:-1]
            target = self.resolve(ab)
            if target is not None and target != rel:
                edges[rel].add(target)
        return edges


def sccs(nodes, edges):
    """Strongly connected components (Tarjan), each a sorted list."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(edges.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            u, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[u])
                if low[u] == index[u]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == u:
                            break
                    out.append(sorted(comp))
            elif nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(sorted(edges.get(nxt, ())))))
            elif nxt in on:
                low[u] = min(low[u], index[nxt])

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycle_in(comp, edges, start):
    """One cycle through `start`, a file of component `comp`, as a list of files."""
    members = set(comp)
    prev = {start: None}
    queue = [start]
    while queue:
        u = queue.pop(0)
        for w in sorted(edges.get(u, ())):
            if w == start:
                path = [u]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = u
                queue.append(w)
    return comp


def folder(f):
    parts = f.split("/")
    return parts[1] if len(parts) > 2 else None


def operator(f):
    parts = f.split("/")
    return parts[2] if len(parts) > 3 and parts[1] == "ops" else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", action="store_true", help="print the findings, exit 0")
    ap.add_argument("--scope",
                    help="only loops with two files or more in these folders of src/ "
                         "(comma-separated; default: every loop of the library)")
    ap.add_argument("--quiet", action="store_true", help="leave the graph out, print findings only")
    ap.add_argument("--root", help="the checkout to read (default: the one holding this script)")
    args = ap.parse_args()
    if args.root:
        global ROOT
        ROOT = os.path.abspath(args.root)
    scope = None
    if args.scope:
        scope = {s.strip().strip("/") for s in args.scope.split(",") if s.strip()}

    def watched(f):
        return scope is None or folder(f) in scope

    crate = Crate()
    crate.load("src/lib.rs", ())
    edges = crate.graph()

    if not args.quiet:
        print("import graph (file -> files it imports):")
        for f in sorted(set(crate.files)):
            print(f"  {f} -> {', '.join(sorted(edges.get(f, ()))) or '-'}")

    needed = 1 if scope is None else 2
    loops = [c for c in sccs(set(crate.files), edges)
             if len(c) > 1 and sum(watched(f) for f in c) >= needed]
    inside = sum(1 for c in loops for f in c for t in edges.get(f, ()) if t in c)
    where = "src/" if scope is None else ", ".join(s + "/" for s in sorted(scope))
    print(f"\nimport loops among the files of {where}: {len(loops)}"
          f" ({sum(len(c) for c in loops)} files, {inside} imports inside them)")
    for c in loops:
        print(f"  {len(c)} files: {', '.join(c)}")
        start = next(f for f in c if watched(f))
        print(f"    e.g. {' -> '.join(cycle_in(c, edges, start))}")

    cross = []
    if scope is None or "ops" in scope:
        for f in sorted(edges):
            a = operator(f)
            for t in sorted(edges[f]):
                b = operator(t)
                if a and b and a != b:
                    cross.append((f, t))
    print(f"operator modules importing other operator modules: {len(cross)}")
    for f, t in cross:
        print(f"  {f} -> {t}")

    if (loops or cross) and not args.report:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
