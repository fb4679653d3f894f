#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Generate doc/api.md, the API reference, from include/vrange.h.

    tools/gen-api-md.py [--check] [--strict] [HEADER [OUTPUT]]

The header is the documentation (doc comments in the kernel-doc style:
"name - summary", "@param: text", paragraphs, "Returns:", "Since:",
"Context:").  This script only reformats it:

  - the header's opening comment becomes the overview;
  - "/* ---- */ /* name */" banners become sections;
  - each "/** ... */" block documents the declaration after it;
  - "/* caption */" followed by #define lines, and enums without a doc
    block, are listed as constants.

Without --check, OUTPUT (default doc/api.md) is written.  With --check it
is compared with what would be written: exit 1 and a diff if it is stale
(the api-doc test).  Missing pieces of documentation (an undocumented
parameter, no Returns:/Since:/Context:) are reported on stderr; --strict
makes them an error.
"""

import difflib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LABELS = ("Returns", "Since", "Context")


def strip_comment(text):
    """Lines of a /* */ or /** */ comment without the decoration."""
    text = re.sub(r"^/\*\*?", "", text.strip())
    text = re.sub(r"\*/$", "", text)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip()
        m = re.match(r"^\s*\* ?(.*)$", line)
        lines.append(m.group(1) if m else line.strip())
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def tokenize(src):
    """Split the header into (kind, text) items: comment, doc, pp, decl, blank."""
    items = []
    i, n = 0, len(src)
    while i < n:
        if src.startswith("/**", i) and not src.startswith("/**/", i):
            j = src.index("*/", i) + 2
            items.append(("doc", src[i:j]))
            i = j
        elif src.startswith("/*", i):
            j = src.index("*/", i) + 2
            items.append(("comment", src[i:j]))
            i = j
        elif src[i] == "\n":
            # a blank line separates groups
            j = i + 1
            while j < n and src[j] in " \t":
                j += 1
            if j < n and src[j] == "\n":
                items.append(("blank", ""))
            i += 1
        elif src[i] in " \t":
            i += 1
        elif src[i] == "#":
            j = src.find("\n", i)
            j = n if j < 0 else j
            while src[j - 1] == "\\" or src.rfind("/*", i, j) > src.rfind("*/", i, j):
                # a continued line, or a comment still open at its end
                j = src.find("\n", j + 1)
                j = n if j < 0 else j
            items.append(("pp", src[i:j]))
            i = j
        elif re.match(r'extern\s+"C"\s*\{', src[i:]):
            j = src.index("{", i) + 1
            items.append(("pp", src[i:j]))
            i = j
        else:
            # a declaration: up to ";" outside braces and parentheses
            depth, j = 0, i
            while j < n:
                c = src[j]
                if src.startswith("/*", j):
                    j = src.index("*/", j) + 2
                    continue
                if c in "({":
                    depth += 1
                elif c in ")}":
                    depth -= 1
                    if depth < 0:  # the "}" closing extern "C"
                        break
                elif c == ";" and depth == 0:
                    j += 1
                    break
                j += 1
            if depth < 0:
                items.append(("pp", src[i:j + 1]))
                i = j + 1
            else:
                items.append(("decl", src[i:j]))
                i = j
    return items


def decl_name(decl):
    """The name a declaration declares."""
    code = re.sub(r"/\*.*?\*/", "", decl, flags=re.S)
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", code)  # typedef int (*name)(...)
    if m:
        return m.group(1)
    m = re.search(r"(\w+)\s*\(", code)  # a function
    if m:
        return m.group(1)
    m = re.match(r"\s*(?:typedef\s+)?(struct|enum|union)\s+(\w+)", code)
    if m:
        return m.group(2)
    m = re.search(r"(\w+)\s*;?\s*$", code)
    return m.group(1) if m else "?"


def decl_kind(decl):
    code = re.sub(r"/\*.*?\*/", "", decl, flags=re.S).strip()
    if code.startswith("typedef"):
        return "type"
    if re.match(r"(struct|enum|union)\s+\w+\s*[{;]", code):
        return "type"
    return "function" if "(" in code else "type"


def decl_params(decl):
    """Parameter names of a function (or function-pointer typedef) declaration."""
    code = re.sub(r"/\*.*?\*/", "", decl, flags=re.S)
    m = re.search(r"\(([^()]*)\)\s*;?\s*$", code)
    if not m or m.group(1).strip() in ("", "void"):
        return []
    names = []
    for p in m.group(1).split(","):
        pm = re.search(r"(\w+)\s*(\[[^]]*\])?\s*$", p.strip())
        if pm:
            names.append(pm.group(1))
    return names


def format_decl(decl):
    """The declaration as C code: tabs become spaces, continuation kept."""
    lines = [ln.rstrip().replace("\t", "        ") for ln in decl.strip().split("\n")]
    text = "\n".join(lines)
    return text if text.endswith(";") or text.endswith("}") else text + ";"


def parse_doc(lines):
    """kernel-doc lines -> dict(name, summary, params, body, labels)."""
    d = {"name": None, "summary": "", "params": [], "body": [], "labels": {}}
    i = 0
    m = re.match(r"^(\w+)\s+-\s+(.*)$", lines[0]) if lines else None
    if m:
        d["name"], d["summary"] = m.group(1), m.group(2)
        i = 1
        # a summary may continue on the next lines, up to a blank line or tag
        while (i < len(lines) and lines[i].strip() and not lines[i].startswith("@")
               and not re.match(r"^(%s):" % "|".join(LABELS), lines[i])):
            d["summary"] += " " + lines[i].strip()
            i += 1
    para, label = [], None

    def flush():
        nonlocal para
        if para:
            d["body"].append(para)
        para = []

    while i < len(lines):
        line = lines[i]
        pm = re.match(r"^@(\w+):\s*(.*)$", line)
        lm = re.match(r"^(%s):\s*(.*)$" % "|".join(LABELS), line)
        if pm:
            flush()
            label = None
            d["params"].append([pm.group(1), pm.group(2)])
            while i + 1 < len(lines) and re.match(r"^\s+\S", lines[i + 1]):
                i += 1
                d["params"][-1][1] += " " + lines[i].strip()
        elif lm:
            flush()
            label = lm.group(1)
            d["labels"][label] = lm.group(2)
        elif not line.strip():
            flush()
            label = None
        elif label:
            d["labels"][label] += " " + line.strip()
        else:
            para.append(line)
        i += 1
    flush()
    return d


def capital(text):
    """Sentence case, unless the text starts with an identifier."""
    if re.match(r"^[a-z]\w*_", text) or re.match(r"^\w+\(\)", text):
        return text
    return text[:1].upper() + text[1:]


class Doc:
    def __init__(self, names):
        self.names = names  # documented items, for links

    def inline(self, text):
        """Code spans for @params, vr_* names, VR_* constants, errnos; links."""
        def name(m):
            word, call = m.group(1), m.group(2) or ""
            if word in self.names:
                return "[`%s%s`](#%s)" % (word, call, word.lower())
            return "`%s%s`" % (word, call)

        out = []
        for part in re.split(r"(`[^`]*`)", text):
            if part.startswith("`"):
                out.append(part)
                continue
            part = re.sub(r"@(\w+)", r"`\1`", part)
            part = re.sub(r"(?<![\w`])(vr_\w+)(\(\))?", name, part)
            part = re.sub(r"(?<![\w`])((?:VR|VRANGE)_\w*\*?|vr_\*)", r"`\1`", part)
            part = re.sub(r"(?<![\w`])(-E[A-Z]+)", r"`\1`", part)
            out.append(part)
        return "".join(out)


def bullet_items(block):
    """The items of a block written as a "- " list (continuation lines
    joined to their item), or [] when the block is no list."""
    if not any(b.lstrip().startswith("- ") for b in block):
        return []
    items = []
    for b in block:
        if b.lstrip().startswith("- "):
            items.append(b.strip()[2:])
        elif items:
            items[-1] += " " + b.strip()
    return items


def preformatted(block):
    """A block laid out in columns (a table in a comment), not prose."""
    for b in block:
        if re.match(r"^ {4,}\S", b):
            return True
        if re.search(r"[^\s.:;?!] {2,}\S", b.strip()):
            return True
    return False


def overview(lines, doc):
    """The header's opening comment as markdown."""
    out = []
    m = re.match(r"^(\S+) - (.*)$", lines[0])
    out.append("`%s`: %s." % (m.group(1), m.group(2)) if m else lines[0])
    out.append("")
    block = []

    def flush_block():
        if not block:
            return
        items = bullet_items(block)
        if items:
            out.extend("- " + doc.inline(it) for it in items)
        elif preformatted(block):
            out.append("```")
            out.extend(b[2:] if b.startswith("  ") else b for b in block)
            out.append("```")
        else:
            out.append(doc.inline(" ".join(b.strip() for b in block)))
        out.append("")
        block.clear()

    for i, line in enumerate(lines[1:], 1):
        if not line.strip():
            flush_block()
        elif (not line.startswith(" ") and not block and i + 1 < len(lines)
              and lines[i + 1].startswith("  ")):
            out += ["### " + line.strip(), ""]
        else:
            block.append(line)
    flush_block()
    return out


def parse_header(header_path):
    """The header as (intro, sections): intro is the opening comment's
    lines; sections is a list of [title, entries, notes], entries being
    ("consts", caption, define lines) and ("entry", name, declaration,
    doc lines or None), notes the plain comments of the section that
    caption nothing (a section's introduction).  tools/gen-man.py reads
    the header through this function too."""
    src = open(header_path, encoding="utf-8").read()

    # the opening comment (after the SPDX line)
    items = tokenize(src)
    k = 0
    while k < len(items) and items[k][0] in ("comment", "blank") and "SPDX" in items[k][1]:
        k += 1
    while k < len(items) and items[k][0] == "blank":
        k += 1
    intro = strip_comment(items[k][1]) if k < len(items) and items[k][0] == "comment" else []
    items = items[k + 1:] if intro else items[k:]

    # first pass: group into sections of entries
    sections = [["Types and constants", [], []]]
    pending_doc = None
    caption = None
    consts = []

    def flush_consts():
        nonlocal consts, caption
        if consts:
            sections[-1][1].append(("consts", caption, consts))
        elif caption:
            sections[-1][2].append(caption)
        consts, caption = [], None

    idx = 0
    while idx < len(items):
        kind, text = items[idx]
        if kind == "comment":
            lines = strip_comment(text)
            if lines and re.fullmatch(r"-{10,}", lines[0].strip()):
                # banner: /* ---- */ then /* name */
                flush_consts()
                nxt = items[idx + 1] if idx + 1 < len(items) else None
                if nxt and nxt[0] == "comment":
                    name = " ".join(strip_comment(nxt[1])).strip()
                    sections.append([name[:1].upper() + name[1:], [], []])
                    idx += 1
            else:
                flush_consts()
                caption = "\n".join(lines).strip()
        elif kind == "pp":
            if re.match(r"#\s*define\s+(VR_|VRANGE_VERSION_)", text):
                consts.append(text)
        elif kind == "blank":
            flush_consts()
        elif kind == "doc":
            flush_consts()
            pending_doc = strip_comment(text)
        elif kind == "decl":
            flush_consts()
            code = text.strip()
            if code.startswith('extern "C"'):
                pass
            else:
                name = decl_name(code)
                sections[-1][1].append(("entry", name, code, pending_doc))
            pending_doc = None
        idx += 1
    flush_consts()
    return intro, sections


def generate(header_path):
    rel = os.path.relpath(header_path, ROOT)
    warnings = []
    intro, sections = parse_header(header_path)
    names = {e[1] for _, es, _ in sections for e in es if e[0] == "entry" and e[3]}
    doc = Doc(names)

    out = [
        "<!-- Generated by tools/gen-api-md.py from %s: do not edit. -->" % rel,
        "<!-- Regenerate: tools/gen-api-md.py (the api-doc test fails when stale). -->",
        "",
        "# libvrange API reference",
        "",
        "One header, `#include <vrange.h>`; link with `$(pkg-config --cflags --libs libvrange)`.",
        "The header is the source of this page; [the README](../README.md) explains the",
        "concepts (regions, ranges, objects, purging, sharing, limits), and what each",
        "call returns for bad input is in [bad-input.md](bad-input.md).",
        "",
        "## Overview",
        "",
    ]
    out += overview(intro, doc)

    # index of functions
    out += ["## Functions", ""]
    for title, entries, _ in sections:
        funcs = [e for e in entries if e[0] == "entry" and decl_kind(e[2]) == "function"]
        if not funcs:
            continue
        out.append("- %s: %s" % (title, ", ".join(
            "[`%s`](#%s)" % (e[1], e[1].lower()) for e in funcs)))
    out.append("")

    for title, entries, _ in sections:
        if not entries:
            continue
        out += ["## " + title, ""]
        for e in entries:
            if e[0] == "consts":
                _, cap, lines = e
                if cap:
                    cap = " ".join(x.strip() for x in cap.split("\n"))
                    out += [doc.inline(capital(cap)) + ":", ""]
                out += ["```c"] + [format_decl(x).rstrip(";") for x in lines] + ["```", ""]
                continue
            _, name, code, lines = e
            kind = decl_kind(code)
            if not lines:
                # an undocumented enum or struct: list it as a constant group
                out += ["### `%s`" % name, "", "```c", format_decl(code), "```", ""]
                if kind == "function":
                    warnings.append("%s: no doc comment" % name)
                continue
            d = parse_doc(lines)
            out += ["### `%s`" % name, "", "```c", format_decl(code), "```", ""]
            if d["name"] is not None:
                if d["name"] != name:
                    warnings.append("%s: doc comment names %s" % (name, d["name"]))
                out += [doc.inline(capital(d["summary"])) + ".", ""]
            if d["params"]:
                for p, t in d["params"]:
                    out.append("- `%s`: %s" % (p, doc.inline(t)))
                out.append("")
            for para in d["body"]:
                if any(x.startswith("  ") for x in para[1:]) and para[0].endswith(":"):
                    out += [doc.inline(para[0]), ""] + ["```"] + [x.strip() for x in para[1:]] + ["```"]
                elif all(re.match(r"^\s*- ", x) or x.startswith("  ") for x in para):
                    merged = []
                    for x in para:
                        if re.match(r"^\s*- ", x):
                            merged.append(x.strip()[2:])
                        else:
                            merged[-1] += " " + x.strip()
                    out += ["- " + doc.inline(x) for x in merged]
                else:
                    out.append(doc.inline(" ".join(x.strip() for x in para)))
                out.append("")
            for lab in LABELS:
                if lab in d["labels"]:
                    out += ["**%s:** %s" % (lab, doc.inline(d["labels"][lab])), ""]
            # completeness
            if kind == "function" and d["name"] is not None:
                documented = {p for p, _ in d["params"]}
                for p in decl_params(code):
                    if p not in documented:
                        warnings.append("%s: parameter %s is not documented" % (name, p))
                is_void = re.match(r"\s*(static\s+)?void\s+\w", code) is not None
                if not code.startswith("typedef"):
                    for lab in LABELS:
                        if lab == "Returns" and is_void:
                            continue
                        if lab not in d["labels"]:
                            warnings.append("%s: no %s:" % (name, lab))
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n", warnings


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    opts = {a for a in argv if a.startswith("--")}
    unknown = opts - {"--check", "--strict"}
    if unknown or len(args) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    header = args[0] if args else os.path.join(ROOT, "include", "vrange.h")
    output = args[1] if len(args) > 1 else os.path.join(ROOT, "doc", "api.md")
    text, warnings = generate(header)
    for w in warnings:
        print("gen-api-md: warning: %s" % w, file=sys.stderr)
    if "--check" in opts:
        try:
            old = open(output, encoding="utf-8").read()
        except OSError as e:
            print("gen-api-md: %s: %s" % (output, e.strerror), file=sys.stderr)
            return 1
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), output, "generated"))
            print("gen-api-md: %s is stale: run tools/gen-api-md.py" % output, file=sys.stderr)
            return 1
        print("gen-api-md: %s is current" % output)
    else:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    if warnings and "--strict" in opts:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
