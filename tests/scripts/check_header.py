#!/usr/bin/env python3
"""Checks that include/lmstream.h and liblmstream.so agree: every function the
header declares is exported by the library, and the library exports no lms_*
function the header does not document. (Argument and return types agree
because capi/shim.c, which defines every lms_* function, includes the header:
the C compiler rejects a definition that differs from its declaration.)"""
import re
import subprocess
import sys

lib, header = sys.argv[1], sys.argv[2]
text = open(header, encoding="utf-8").read()
text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
declared = set(re.findall(r"\b(lms_\w+)\s*\(", text))
declared -= set(re.findall(r"typedef[^;]*\(\s*\*\s*(lms_\w+)\s*\)", text))
out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                     capture_output=True, text=True).stdout
exported = {line.split()[-1] for line in out.splitlines()
            if line.split() and line.split()[-1].startswith("lms_")}
missing = sorted(declared - exported)
undocumented = sorted(exported - declared)
if missing or undocumented:
    if missing:
        print("declared in the header but not exported:", ", ".join(missing))
    if undocumented:
        print("exported but not declared in the header:", ", ".join(undocumented))
    sys.exit(1)
print(f"header check: {len(declared)} functions declared and exported")
