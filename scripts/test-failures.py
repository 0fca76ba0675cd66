#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""scripts/test-failures.py XUNIT...: the tests that failed in swift test's xUnit files, one
--filter pattern a line (module.Suite/function(), anchored, regex-escaped). scripts/test reruns
them one at a time. Exit 2 when no file could be read (the run crashed before writing it)."""
import re, sys
import xml.etree.ElementTree as ET

read = 0
seen = []
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        continue
    read += 1
    for case in root.iter("testcase"):
        if case.find("failure") is None and case.find("error") is None:
            continue
        function = case.get("name", "").split("(")[0]
        # A nested suite's id joins its types with "/" (Module.Outer/Inner/function()), which
        # xUnit's classname may write with "." instead: either matches.
        suites = "[./]".join(re.escape(part) for part in case.get("classname", "").split("."))
        pattern = "^" + suites + "/" + re.escape(function) + r"\("
        if pattern not in seen:
            seen.append(pattern)
if read == 0:
    sys.exit(2)
print("\n".join(seen))
