#!/usr/bin/env python3
"""doc_flags.py - flags the manual writes on a command line that its --help lacks.

    doc_flags.py HELPDIR DOC.md...

HELPDIR holds each command's --help output: imshard-train.txt, pack.txt,
convert-folder.txt, ... (imshard CMD --help as CMD.txt, imshard convert
DATASET --help as convert-DATASET.txt). In every DOC, each command line
(an indented code line, with its backslash continuations, or a `...`
span) that starts with `imshard CMD` or `imshard-train` is read, and
every --flag and -x written on it after the command must be in that
command's --help. Prints FILE:LINE: COMMAND: FLAG for each one that is
not (on stderr), and the number of command lines read; exits 1 when any is missing
or no command line was read.
"""
import os
import re
import sys

CMD = re.compile(r"(imshard-train|imshard (?:convert [a-z0-9]+|(?!convert)[a-z][a-z-]*))\b(.*)")


def help_of(helpdir, cmd):
    if cmd == "imshard-train":
        name = "imshard-train"
    elif cmd.startswith("imshard convert "):
        name = "convert-" + cmd.split()[2]
    else:
        name = cmd.split()[1]
    path = os.path.join(helpdir, name + ".txt")
    if not os.path.exists(path):
        return None
    text = open(path).read()
    return (set(re.findall(r"--[a-z0-9][a-z0-9-]*", text)),
            set(re.findall(r"(?<![\w-])-[a-zA-Z]\b", text)))


def main():
    helpdir, docs = sys.argv[1], sys.argv[2:]
    bad = read = 0
    for doc in docs:
        lines = open(doc).read().split("\n")
        i = 0
        while i < len(lines):
            line, j = lines[i], i
            while lines[j].rstrip().endswith("\\") and j + 1 < len(lines):
                j += 1
                line = line.rstrip()[:-1] + " " + lines[j].strip()
            spans = [line] if line.startswith("    ") else re.findall(r"`([^`]*)`", line)
            for span in spans:
                m = CMD.search(span)
                if not m:
                    continue
                opts = help_of(helpdir, m.group(1))
                if opts is None:
                    print(f"{doc}:{i + 1}: {m.group(1)}: no such command", file=sys.stderr)
                    bad += 1
                    continue
                read += 1
                rest = m.group(2).split("#")[0]
                for flag in re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", rest):
                    if flag not in opts[0]:
                        print(f"{doc}:{i + 1}: {m.group(1)}: {flag} is not in its --help", file=sys.stderr)
                        bad += 1
                for flag in re.findall(r"(?<![\w-])-[a-zA-Z]\b", rest):
                    if flag not in opts[1]:
                        print(f"{doc}:{i + 1}: {m.group(1)}: {flag} is not in its --help", file=sys.stderr)
                        bad += 1
            i = j + 1
    print(f"{read} command lines read")
    return 1 if bad or not read else 0


if __name__ == "__main__":
    sys.exit(main())
