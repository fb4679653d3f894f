#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""check-layers.py [SRC_DIR] - do libvrange's modules depend on each other
in one direction only?

A module is a folder directly under SRC_DIR, or, for a file directly in
SRC_DIR, the part of its name before the first '-' or '.' (ctx.c and
ctx-group.c are module "ctx"; map/map.c is "map").  Module A depends on
module B when a file of A (.c or .h) names a non-static function or
variable that a .c file of B defines (universal-ctags decides what is
defined and what is static).  The check fails when two modules depend on
each other, directly or around a circle, and prints each such group with
one reference per edge so the cause can be found.

Options: --graph prints every edge A -> B (one symbol, file); --all prints
every symbol of every edge instead of one; --modules lists the modules
with their files.  Exit 0: acyclic; 1: cycles; 77: no ctags (a meson
test, suite unit: tests/meson.build).
"""
import os
import re
import shutil
import subprocess
import sys


def module_of(src, path):
	rel = os.path.relpath(path, src)
	parts = rel.split(os.sep)
	if len(parts) > 1:
		return parts[0]
	return re.split(r"[-.]", parts[0], maxsplit=1)[0]


def sources(src):
	out = []
	for root, _, files in os.walk(src):
		for f in sorted(files):
			if f.endswith((".c", ".h")):
				out.append(os.path.join(root, f))
	return sorted(out)


def ctags(files, kinds, extra):
	cmd = ["ctags", "-x", "--languages=C", "--language-force=C", "--kinds-C=" + kinds,
	       "--extras=" + extra, "--sort=no"]
	res = subprocess.run(cmd + files, capture_output=True, text=True, check=True)
	for line in res.stdout.splitlines():
		m = re.match(r"(\S+)\s+\S+\s+\d+\s+(\S+)", line)
		if m:
			yield m.group(1), m.group(2)


def definitions(cfiles):
	"""name -> defining file, for non-static functions and variables."""
	defs = {}
	for name, path in ctags(cfiles, "fv", "-F"):
		defs.setdefault(name, path)
	return defs


def own_names(files):
	"""path -> names the file declares itself (statics, locals, parameters,
	macros, members): a use of such a name is not a use of another
	module's symbol of the same name."""
	own = {}
	for name, path in ctags(files, "+lzdmp", "+F"):
		own.setdefault(path, set()).add(name)
	return own


COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def names_in(path):
	with open(path, encoding="utf-8", errors="replace") as f:
		text = COMMENT.sub(" ", f.read())
	return set(IDENT.findall(text))


def sccs(nodes, edges):
	"""Tarjan's strongly connected components (iterative)."""
	index, low, on, stack, comps = {}, {}, set(), [], []
	counter = [0]
	for root in nodes:
		if root in index:
			continue
		work = [(root, iter(sorted(edges.get(root, ()))))]
		index[root] = low[root] = counter[0]
		counter[0] += 1
		stack.append(root)
		on.add(root)
		while work:
			v, it = work[-1]
			advanced = False
			for w in it:
				if w not in index:
					index[w] = low[w] = counter[0]
					counter[0] += 1
					stack.append(w)
					on.add(w)
					work.append((w, iter(sorted(edges.get(w, ())))))
					advanced = True
					break
				if w in on:
					low[v] = min(low[v], index[w])
			if advanced:
				continue
			work.pop()
			if work:
				low[work[-1][0]] = min(low[work[-1][0]], low[v])
			if low[v] == index[v]:
				comp = []
				while True:
					w = stack.pop()
					on.discard(w)
					comp.append(w)
					if w == v:
						break
				comps.append(sorted(comp))
	return comps


def main(argv):
	args = [a for a in argv[1:] if not a.startswith("--")]
	src = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "src")
	if not shutil.which("ctags"):
		print("check-layers: ctags (universal-ctags) not found", file=sys.stderr)
		return 77
	files = sources(src)
	defs = definitions([f for f in files if f.endswith(".c")])
	own = own_names(files)
	mods = {f: module_of(src, f) for f in files}
	edges, why, every = {}, {}, {}
	for f in files:
		a = mods[f]
		for name in names_in(f):
			d = defs.get(name)
			if d is None or (d != f and name in own.get(f, ())):
				continue
			b = module_of(src, d)
			if a == b:
				continue
			edges.setdefault(a, set()).add(b)
			every.setdefault((a, b), set()).add("%s (%s -> %s)" % (
				name, os.path.relpath(f, src), os.path.relpath(d, src)))
			why.setdefault((a, b), "%s (%s -> %s)" % (name, os.path.relpath(f, src),
								  os.path.relpath(d, src)))
	nodes = sorted(set(mods.values()))
	if "--modules" in argv:
		for m in nodes:
			print("%-10s %s" % (m, " ".join(os.path.relpath(f, src) for f in files if mods[f] == m)))
	if "--graph" in argv or "--all" in argv:
		for a in nodes:
			for b in sorted(edges.get(a, ())):
				if "--all" in argv:
					for w in sorted(every[(a, b)]):
						print("%s -> %s: %s" % (a, b, w))
				else:
					print("%s -> %s: %s" % (a, b, why[(a, b)]))
	bad = [c for c in sccs(nodes, edges) if len(c) > 1]
	for c in bad:
		print("cycle among %d modules: %s" % (len(c), " ".join(c)))
		for a in c:
			for b in sorted(edges.get(a, ())):
				if b in c:
					print("    %s -> %s: %s" % (a, b, why[(a, b)]))
	if bad:
		return 1
	print("check-layers: %d modules, %d edges, no cycle" %
	      (len(nodes), sum(len(v) for v in edges.values())))
	return 0


if __name__ == "__main__":
	sys.exit(main(sys.argv))
