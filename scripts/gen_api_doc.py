#!/usr/bin/env python3
"""gen_api_doc.py - docs/api.md, the C API reference, made from include/collie.h.

  python3 scripts/gen_api_doc.py            write docs/api.md
  python3 scripts/gen_api_doc.py --check    exit 1 (saying so) when docs/api.md is not
                                            what the header makes (CI: scripts/check_docs.py)

The header is the one place the API is described: each section of it
("/* ---- Communicators ---- */", with the text that follows on its lines),
each function declared COLLIE_API, each type it defines, and each one-line
macro, with the comment written just before it. Declarations that share a
comment (collie_comm_rank and collie_comm_size) are shown together.
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HEADER = os.path.join(ROOT, "include", "collie.h")
OUT = os.path.join(ROOT, "docs", "api.md")
SECTION = re.compile(r"^/\* -{4} (.*?)\s*-*\s*(\*/)?\s*$")


def prose(lines):
    """A C comment's lines as Markdown paragraphs (what Markdown would read as
    markup escaped)."""
    text, para = [], []  # paragraphs; a list item ("- ") is a paragraph of its own
    for line in lines:
        line = re.sub(r"^\s*/?\*+/?\s?", "", line.rstrip())
        line = re.sub(r"\s*\*/\s*$", "", line)
        if not line.strip() or line.lstrip().startswith("- "):
            if para:
                text.append(" ".join(para))
                para = []
            if not line.strip():
                continue
        para.append(line.strip())
    if para:
        text.append(" ".join(para))
    out = []
    for p in text:
        p = p.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")
        # list items follow one another; anything else is its own paragraph
        out.append(("\n" if p.startswith("- ") else "\n\n") + p)
    return "".join(out).lstrip("\n")


def name_of(decl):
    """The function's or type's name in a declaration."""
    m = re.search(r"(\w+)\s*\(", decl)
    if decl.startswith("typedef"):
        m = re.search(r"(\w+)\s*;\s*(/\*.*)?$", decl.strip().splitlines()[-1]) or m
    elif decl.startswith("#define"):
        m = re.match(r"#define\s+(\w+)", decl)
    return m.group(1) if m else "?"


def parse(lines):
    """[(section, intro, [(names, code, comment)])] in the header's order."""
    sections = [["Conventions", "", []]]
    comment, i, n, last_end = None, 0, len(lines), -2
    # The file's own comment: the conventions every call shares.
    if lines and lines[0].startswith("/*"):
        while i < n and "*/" not in lines[i]:
            i += 1
        head = prose(lines[1:i])
        sections[0][1] = head.split("\n\n", 2)[-1] if head.count("\n\n") >= 2 else head
        i += 1
    while i < n:
        line = lines[i]
        s = line.strip()
        m = SECTION.match(s)
        if m:
            title, intro = m.group(1).rstrip(" -"), []
            title = re.sub(r"\s*\(docs/[\w.-]+\)", "", title)
            if not m.group(2):  # the section's text follows on the comment's lines
                i += 1
                while i < n and "*/" not in lines[i]:
                    intro.append(lines[i])
                    i += 1
                intro.append(lines[i] if i < n else "")
            sections.append([title, prose(intro), []])
            comment = None
            i += 1
            continue
        if s.startswith("/*"):
            block = [line]
            while "*/" not in lines[i] and i + 1 < n:
                i += 1
                block.append(lines[i])
            comment = block
            i += 1
            continue
        if not s:
            comment = None
            i += 1
            continue
        decl, start = None, i
        if s.startswith("COLLIE_API"):
            decl = [line]
            while ";" not in lines[i]:
                i += 1
                decl.append(lines[i])
            code = re.sub(r"\s+", " ", " ".join(x.strip() for x in decl)).replace("COLLIE_API ", "")
            code = code.replace("( ", "(").replace(" )", ")")
        elif s.startswith("typedef"):
            decl = [line]
            if "{" in line and "}" not in line:
                depth = line.count("{") - line.count("}")
                while depth > 0 and i + 1 < n:
                    i += 1
                    decl.append(lines[i])
                    depth += lines[i].count("{") - lines[i].count("}")
            code = "\n".join(x.rstrip() for x in decl)
        elif re.match(r"#define COLLIE_\w*[A-Z0-9]\b", s) and not re.match(r"#define (COLLIE_H|COLLIE_API)\b", s):
            decl = [line]  # (a map: the list an enum is made from)
            while lines[i].rstrip().endswith("\\") and i + 1 < n:
                i += 1
                decl.append(lines[i])
            code = "\n".join(re.sub(r"\s+\\$", lambda m: " \\", x.rstrip()) for x in decl)
        if decl is None:
            comment = None if not s.startswith("#") else comment
            i += 1
            continue
        entries = sections[-1][2]
        text = prose(comment) if comment else ""
        name = name_of(code)
        adjacent_defines = (entries and not text and not entries[-1][2] and code.startswith("#define") and
                            entries[-1][1].startswith("#define") and last_end == start - 1)
        if adjacent_defines or (entries and entries[-1][2] == text and text and entries[-1][3] == "shared"):
            entries[-1][0].append(name)
            entries[-1][1] += "\n" + code
        else:
            entries.append([[name], code, text, "shared" if comment else "alone"])
        last_end = i
        i += 1
        # A blank line or another comment ends the sharing; the next declaration
        # right below keeps it.
        if i < n and lines[i].strip() and not lines[i].strip().startswith("/*"):
            continue
        comment = None
    return sections


def render(sections):
    out = ["# C API reference", "",
           "> For C and C++ programmers: every function, type and constant of "
           "`include/collie.h`, with what the header says of it, section by section.", "",
           "Made from the header by `scripts/gen_api_doc.py` (do not edit by hand: "
           "`scripts/check_docs.py` fails in CI when this page and the header differ). "
           "Errors are `collie_result_t` codes; `collie_last_error()` gives the message "
           "that names what was wrong.", "", "## Contents", ""]
    for title, intro, entries in sections:
        if entries or intro:
            anchor = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            out.append("- [%s](#%s): %s" % (title, anchor, ", ".join(
                "`%s`" % nm for e in entries for nm in e[0] if not nm.startswith("COLLIE_")) or
                ("constants" if entries else "what every call shares")))
    for title, intro, entries in sections:
        if not entries and not intro:
            continue
        out += ["", "## " + title, ""]
        if intro:
            out += [intro, ""]
        for names, code, text, _ in entries:
            out += ["### " + ", ".join("`%s`" % nm for nm in names), "", "```c", code, "```", ""]
            if text:
                out += [text, ""]
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


def main(argv):
    with open(HEADER, encoding="utf-8") as f:
        header = f.read()
    sections = parse(header.splitlines())
    text = render(sections)
    # Every function the header exports is on the page (a declaration the
    # parser missed would otherwise leave it out silently).
    declared = set(re.findall(r"^COLLIE_API\b[^;(]*?\b(\w+)\s*\(", header, re.M))
    shown = {nm for _, _, entries in sections for e in entries for nm in e[0]}
    if declared - shown:
        print("gen_api_doc: include/collie.h declares %s, which the page would not show" %
              ", ".join(sorted(declared - shown)))
        return 1
    if argv[1:] == ["--check"]:
        try:
            with open(OUT, encoding="utf-8") as f:
                have = f.read()
        except OSError:
            have = None
        if have != text:
            print("docs/api.md: not what include/collie.h makes (run python3 scripts/gen_api_doc.py)")
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print("gen_api_doc: wrote docs/api.md (%d lines)" % text.count("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
