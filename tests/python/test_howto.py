"""The how-to pages (docs/howto-*.md) stay true to the tools they show:
every COLLIE_* variable a page names is one that docs/env.md documents, and
every command-line option a page gives collierun, collie-bench or
collie-report appears in that tool's --help (collie-report's: the help of
the subcommand used), run from the build under test.

Where options are looked for: the commands of the pages' sh blocks and of
their inline code spans. A command line is split as a shell would
(comments, quotes, |, &&, ;); the options after a tool's name are that
tool's, up to the end of the command. collierun's end at its program (the
first word that is neither an option nor an option's value, as its --help
says which options take one); the program's own options are not checked
unless the program is one of the three tools."""

import os
import re
import shlex
import subprocess

import pytest

from conftest import ROOT, build_dir

pytestmark = pytest.mark.skipif(os.environ.get("COLLIE_WORLD_SIZE", "1") != "1",
                                reason="reads files and runs --help (1-rank session only)")

DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(n for n in os.listdir(DOCS) if n.startswith("howto-") and n.endswith(".md"))
TOOLS = ("collierun", "collie-bench", "collie-report")
FENCE = re.compile(r"^[ \t]*```([\w+-]*)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)
VAR = re.compile(r"(?<![\w])COLLIE_[A-Z0-9_]*[A-Z0-9](?![\w])")


def read(name):
    with open(os.path.join(DOCS, name), encoding="utf-8") as f:
        return f.read()


def env_documented():
    """The variables of docs/env.md's tables (the first cell of each row)."""
    return set(re.findall(r"^\| `(COLLIE_[A-Z0-9_]+)` \|", read("env.md"), re.M))


_help = {}


def tool_help(tool, sub=None):
    """The --help text of a tool of the build under test (collie-report: of
    one subcommand, or of the tool itself when sub is None)."""
    key = (tool, sub)
    if key not in _help:
        argv = [os.path.join(build_dir(), tool)] + ([sub] if sub else []) + ["--help"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        text = r.stdout + r.stderr
        assert text.strip(), "%s printed no help" % " ".join(argv)
        _help[key] = text
    return _help[key]


def takes_value(tool):
    """Options of a tool's --help that take a value: those of an option line
    followed by one space and a metavariable (`-n, --nproc N`)."""
    out = set()
    for line in tool_help(tool).splitlines():
        m = re.match(r"^\s+((?:-\w, )?)(--[a-z][\w-]*)( (?=\S))?", line)
        if m and m.group(3):
            out.add(m.group(2))
            if m.group(1):
                out.add(m.group(1)[:2])
    return out


def in_help(option, text):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(option), text) is not None


def commands(text):
    """The command lines a page shows: each line of its sh blocks (with
    backslash continuations joined) and each inline code span outside blocks
    that names one of the tools."""
    out = []
    for lang, body in FENCE.findall(text):
        if lang in ("sh", "bash", "shell", "console"):
            out += [l for l in body.replace("\\\n", " ").splitlines() if l.strip()]
    outside = FENCE.sub("", text)
    for span in re.findall(r"`([^`]+)`", re.sub(r"\s*\n\s*", " ", outside)):
        if any(re.search(r"(^|[\s/])%s(\s|$)" % t, span) for t in TOOLS):
            out.append(span)
    return out


def options_of(line):
    """[(tool, subcommand, option)] of one command line."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:  # an unbalanced quote in prose: split on spaces
        words = line.split()
    found, tool, sub, skip = [], None, None, False
    for i, w in enumerate(words):
        if w in ("|", "||", "&&", ";", "&", "(", ")", "$("):
            tool, sub, skip = None, None, False
            continue
        if skip:
            skip = False
            continue
        base = os.path.basename(w)
        if base in TOOLS:
            tool, sub = base, None
            continue
        if tool is None:
            continue
        if tool == "collie-report" and sub is None and not w.startswith("-"):
            sub = w
            continue
        if w == "--":
            tool = None if tool == "collierun" else tool
            continue
        if w.startswith("-") and len(w) > 1:
            opt = w.split("=", 1)[0]
            if not opt.startswith("--") and len(opt) > 2:  # -n4: a value attached
                opt = opt[:2]
            found.append((tool, sub, opt))
            if tool == "collierun" and "=" not in w and opt == w and opt in takes_value("collierun"):
                skip = True
            continue
        if tool == "collierun":  # its program: what follows is the program's
            tool = None
    return found


@pytest.mark.parametrize("page", PAGES)
def test_howto_variables_are_documented(page):
    """Every COLLIE_* name outside code in other languages (C's COLLIE_SUM
    is a constant, not a variable) is a variable of docs/env.md."""
    text = read(page)
    text = FENCE.sub(lambda m: "" if m.group(1) in ("c", "python", "cpp") else m.group(0), text)
    documented = env_documented()
    assert len(documented) > 30, "docs/env.md's tables were not read: %d variables" % len(documented)
    unknown = sorted(set(VAR.findall(text)) - documented)
    assert not unknown, "docs/%s names %s, which docs/env.md does not document" % (page, ", ".join(unknown))


def bare_options(text):
    """The options of inline code spans that start with one (`--csv`, `-t
    0.05`): the prose's mentions of an option of the tool at hand."""
    outside = re.sub(r"\s*\n\s*", " ", FENCE.sub("", text))
    return [m.group(1) for m in re.finditer(r"`(-{1,2}[A-Za-z][\w-]*)[^`]*`", outside)]


REPORT_COMMANDS = ("hang", "summary", "stragglers", "trace", "plot", "html", "bench")


@pytest.mark.parametrize("page", PAGES)
def test_howto_options_are_in_help(page):
    """Each option of a command is in its tool's --help; each option the
    prose names alone is in the --help of one of the tools."""
    wrong = []
    text = read(page)
    for line in commands(text):
        for tool, sub, opt in options_of(line):
            if not in_help(opt, tool_help(tool, sub if tool == "collie-report" else None)):
                wrong.append("%s%s %s (in: %s)" % (tool, " " + sub if sub else "", opt, line.strip()))
    helps = [tool_help(t) for t in TOOLS] + [tool_help("collie-report", c) for c in REPORT_COMMANDS]
    for opt in bare_options(text):
        if not any(in_help(opt, h) for h in helps):
            wrong.append("%s (named alone, in no tool's --help)" % opt)
    assert not wrong, "docs/%s shows options that --help does not list:\n  %s" % (page, "\n  ".join(wrong))


def test_howto_pages_exist_and_show_the_tools():
    """The six pages of issue 41 are there, and the option check is not
    vacuous: the pages show options of each of the three tools."""
    assert PAGES == ["howto-fabric.md", "howto-gpu.md", "howto-hang.md", "howto-hosts.md",
                     "howto-telemetry.md", "howto-tune.md"], PAGES
    seen = {tool for p in PAGES for line in commands(read(p)) for tool, _, _ in options_of(line)}
    assert seen == set(TOOLS), seen


def test_howto_parser():
    """The command splitting the checks rely on."""
    assert options_of("COLLIE_X=1 collierun -n 2 --tag-output python3 t.py --epochs 3") == [
        ("collierun", None, "-n"), ("collierun", None, "--tag-output")]
    assert options_of("collierun -n4 build/collie-bench --fit -o all -b 8  # comment --nope") == [
        ("collierun", None, "-n"), ("collie-bench", None, "--fit"), ("collie-bench", None, "-o"),
        ("collie-bench", None, "-b")]
    assert options_of("collie-report summary logs --timing=t --csv | head -3") == [
        ("collie-report", "summary", "--timing"), ("collie-report", "summary", "--csv")]
    assert options_of("sh scripts/testbed.sh --hosts 2,2 -- build/collie-bench -o allreduce") == [
        ("collie-bench", None, "-o")]
    assert not in_help("--tune", "--tune-check FILE")
    assert "--master-port" in takes_value("collierun") and "--tag-output" not in takes_value("collierun")
