#!/usr/bin/env python3
"""check_docs.py - the hygiene the docs keep (issue 41).

  python3 scripts/check_docs.py [ROOT]     check the repository at ROOT (default: this one)
  python3 scripts/check_docs.py --self-test

Checks, over the files git tracks (every file under ROOT where it is not a
git checkout):
  - every page of docs/ is linked from docs/index.md, and the README links
    to docs/index.md (no orphan page);
  - every relative link of every Markdown file reaches a file that exists,
    and its #anchor, if any, a heading of that file (GitHub's anchors);
  - no path of the machine it runs on (the checkout's own directory and
    the one above it, the paths pip is configured with; and any
    /home/<user>/ or /Users/<user>/) and no package-mirror host (those of
    the machine's apt and pip configuration, and any host named *mirror*)
    anywhere: what the machine knows is read from it here, never written
    down in the repository, so this file names none either.
Prints each problem as FILE:LINE: what, and exits 1 when there is one
(0 otherwise). --self-test builds a small tree with one problem of each
kind and checks that each is reported (and that a clean tree passes).
"""

import os
import re
import subprocess
import sys
import tempfile

LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ANY_HOME = re.compile(r"(?<![\w.])(/home/[a-z_][\w-]*/|/Users/[A-Za-z][\w-]*/)")
URL_HOST = re.compile(r"[a-z][a-z0-9+.-]*://([\w.-]+)")
TEXT_SUFFIXES = (".md", ".c", ".h", ".cu", ".py", ".pyi", ".sh", ".txt", ".cmake", ".toml", ".cfg", ".in",
                 ".yml", ".yaml", ".json", ".hpp", ".cpp", ".def")


def tracked(root):
    """Files under root: git's tracked ones, else every file."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
        return sorted(p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return sorted(files)


def slug(text):
    """GitHub's anchor for a heading: lower case, markup and punctuation
    dropped (but - and _), spaces as -."""
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out, fence = {}, set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    fence = not fence
                    continue
                m = None if fence else HEADING.match(line)
                if m:
                    s = slug(m.group(2))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    out.add(s if n == 0 else "%s-%d" % (s, n))
        cache[path] = out
    return cache[path]


def links(path):
    """(line number, target) of each Markdown link outside code blocks and spans."""
    fence = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fence = not fence
                continue
            if fence:
                continue
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                yield no, m.group(1)


def machine_facts(root):
    """(paths, hosts) of the machine this runs on: the checkout's directory
    and the one above it (a personal home is caught by ANY_HOME); the hosts of apt's sources and of pip's
    indexes, and the paths pip reads wheels or indexes from."""
    paths, hosts = {os.path.abspath(root), os.path.dirname(os.path.abspath(root))}, set()
    home = os.environ.get("HOME", "")

    def add(value):
        for v in value.split():
            m = URL_HOST.match(v)
            if v.startswith("file://"):
                paths.add(v[len("file://"):].rstrip("/"))
            elif m:
                hosts.add(m.group(1))
            elif v.startswith("/"):
                paths.add(v.rstrip("/"))

    apt = ["/etc/apt/sources.list"]
    d = "/etc/apt/sources.list.d"
    if os.path.isdir(d):
        apt += [os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith((".list", ".sources"))]
    pip = ["/etc/pip.conf", "/etc/xdg/pip/pip.conf", os.path.join(home, ".pip", "pip.conf"),
           os.path.join(home, ".config", "pip", "pip.conf")]
    for f in apt + pip:
        try:
            with open(f, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    line = line.split("#", 1)[0].strip()
                    if f in apt and (line.startswith(("deb ", "deb-src ")) or line.startswith("URIs:")):
                        add(" ".join(w for w in line.split()[1:] if not w.startswith("[")))
                    elif f in pip and "=" in line and line.split("=", 1)[0].strip() in (
                            "index-url", "extra-index-url", "find-links"):
                        add(line.split("=", 1)[1])
        except OSError:
            pass
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        add(os.environ.get(var, ""))
    return sorted(p for p in paths if len(p) > 1), sorted(hosts)


def check(root, machine=None):
    """The problems of the tree at root; machine: (paths, hosts) to refuse
    (default: this machine's, machine_facts)."""
    paths, hosts = machine if machine is not None else machine_facts(root)
    problems = []
    files = tracked(root)
    md = [p for p in files if p.endswith(".md")]
    # Orphans: every docs page is on the index, and the README points to it.
    index = os.path.join(root, "docs", "index.md")
    if not os.path.exists(index):
        problems.append("docs/index.md: missing (the list of every page)")
    else:
        on_index = {os.path.normpath(os.path.join("docs", t.split("#")[0])) for _, t in links(index)}
        for p in md:
            if p.startswith("docs/") and p.count("/") == 1 and p != "docs/index.md" and p not in on_index:
                problems.append("%s:1: not linked from docs/index.md (an orphan page)" % p)
    # Each page says first whom it is for and what it answers.
    for p in md:
        if p.startswith("docs/") and p.count("/") == 1 and p != "docs/index.md":
            with open(os.path.join(root, p), encoding="utf-8") as f:
                head = f.read().split("\n", 3)
            if len(head) < 3 or not head[2].startswith("> For "):
                problems.append("%s:3: does not start with whom it is for (\"> For ...: what it answers\")" % p)
    if os.path.exists(os.path.join(root, "README.md")) and \
            "docs/index.md" not in {t.split("#")[0] for _, t in links(os.path.join(root, "README.md"))}:
        problems.append("README.md:1: does not link to docs/index.md")
    # Dead links and anchors.
    for p in md:
        full = os.path.join(root, p)
        for no, target in links(full):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            path, _, frag = target.partition("#")
            dest = full if not path else os.path.normpath(os.path.join(os.path.dirname(full), path))
            if not os.path.exists(dest):
                problems.append("%s:%d: dead link %s (no %s)" % (p, no, target, os.path.relpath(dest, root)))
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                problems.append("%s:%d: dead link %s (no heading #%s in %s)" % (p, no, target, frag,
                                                                              os.path.relpath(dest, root)))
    # The machine's paths and package mirrors.
    path_re = re.compile(r"(?<![\w.])(%s)(?![\w.-])" % "|".join(re.escape(x) for x in paths)) if paths else None
    for p in files:
        if not p.endswith(TEXT_SUFFIXES) and os.path.basename(p) not in ("Makefile", "CMakeLists.txt", "run"):
            continue
        try:
            with open(os.path.join(root, p), encoding="utf-8", errors="replace") as f:
                for no, line in enumerate(f, 1):
                    m = (path_re.search(line) if path_re else None) or ANY_HOME.search(line)
                    if m:
                        problems.append("%s:%d: a path of a developer's machine: %s" % (p, no, m.group(1)))
                    for h in URL_HOST.findall(line):
                        if h in hosts or "mirror" in h.lower():
                            problems.append("%s:%d: a package mirror's host: %s (take it from the machine's "
                                            "apt or pip configuration)" % (p, no, h))
        except OSError as e:
            problems.append("%s: cannot read: %s" % (p, e))
    return problems


def self_test():
    """Each kind of problem in a small tree is reported; the clean tree is not."""
    def tree(files):
        d = tempfile.mkdtemp(prefix="check-docs.")
        for name, text in files.items():
            os.makedirs(os.path.join(d, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        return d

    clean = {
        "README.md": "# x\n\nSee [the docs](docs/index.md) and [a page](docs/a.md#a-title).\n",
        "docs/index.md": "# Index\n\n[a](a.md), [b](b.md#second-part-x), [web](https://example.com/x)\n",
        "docs/a.md": "# A title\n\n> For tests: a.\n\n```\n[not a link](nowhere.md)\n```\nBack to [the index](index.md).\n",
        "docs/b.md": "# B\n\n> For tests: b.\n\n## Second part: `x`\n\nThe [README](../README.md#x).\n",
        "scripts/s.sh": "echo fine\n",
    }
    bad = dict(clean)
    bad["docs/orphan.md"] = "# Nobody links here\n\nNo line saying whom it is for.\n"
    bad["docs/a.md"] = clean["docs/a.md"] + "A [dead one](gone.md) and [an anchor](b.md#no-such).\n"
    # The machine as the test describes it: a checkout of its own and a
    # package host of its apt sources.
    here = tempfile.mkdtemp(prefix="check-docs-machine.")
    machine = ([here], ["packages.example.test"])
    bad["scripts/s.sh"] = "cd %s/build\nls %s\n" % (here, os.path.join("/home", "someone", "x"))
    bad["docs/b.md"] = clean["docs/b.md"] + "apt from http://packages.example.test/debian\n"
    ok = check(tree(clean), machine)
    if ok:
        print("check_docs self-test: the clean tree was refused: %s" % ok)
        return 1
    got = "\n".join(check(tree(bad), machine))
    want = ["docs/orphan.md:1: not linked from docs/index.md", "docs/a.md:9: dead link gone.md",
            "docs/a.md:9: dead link b.md#no-such (no heading #no-such", "scripts/s.sh:1: a path of a developer's",
            "scripts/s.sh:2: a path of a developer's", "docs/b.md:8: a package mirror's host: packages.example.test",
            "docs/orphan.md:3: does not start with whom"]
    missing = [w for w in want if w not in got]
    if missing:
        print("check_docs self-test: not reported: %s\n(reported:\n%s)" % (missing, got))
        return 1
    nolink = dict(clean)
    nolink["README.md"] = "# x\n"
    if "README.md:1: does not link to docs/index.md" not in "\n".join(check(tree(nolink), machine)):
        print("check_docs self-test: a README without the index's link passed")
        return 1
    print("check_docs self-test: every kind of problem reported, the clean tree passes")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    n = len([f for f in tracked(os.path.abspath(root)) if f.endswith(".md")])
    print("check_docs: %s (%d Markdown files)" % ("%d problem(s)" % len(problems) if problems else "ok", n))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
