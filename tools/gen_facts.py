#!/usr/bin/env python3
# gen_facts: the mirrors of lib/wire/dtype.h (the dtype/op table) outside C: inca.h's enums, the
# Python bindings, the Wireshark dissector, the YANG module and docs/protocol.md. Each mirror
# keeps its table between "begin generated: NAME" / "end generated: NAME" marker lines (or, for a
# single Markdown table row, on the line with a known prefix); this script renders those parts
# from the table (as printed by the wire_dtype_dump program) and either checks them (--check,
# the 'dtype_mirrors' unit test) or rewrites them in place (--write: `meson compile -C build
# gen-facts`). Nothing else in those files is touched.
import argparse
import difflib
import glob
import json
import os
import subprocess
import sys


def ranges(codes):
    """[4, 5, 6] -> '4-6', [0, 2] -> '0, 2'."""
    out, i = [], 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        out.append(str(codes[i]) if i == j else "%d-%d" % (codes[i], codes[j]))
        i = j + 1
    return ", ".join(out)


def wrap(items, first, indent, width=79):
    """Items, each followed by a comma, greedily filled into lines of at most width columns
    (tabs count 8); the first line starts with first, the others with indent."""
    def cols(line):
        return len(line.expandtabs(8))
    lines, cur, fresh = [], first, True
    for it in items:
        piece = it + ","
        if not fresh and cols(cur) + 1 + len(piece) > width:
            lines.append(cur)
            cur, fresh = indent, True
        cur += ("" if fresh else " ") + piece
        fresh = False
    lines.append(cur)
    return lines


# ---- renderers: table -> list of lines (without newline) ------------------------------------

def c_enum(prefix, rows):
    return ["\t%s%s = %d," % (prefix, r["id"], r["code"]) for r in rows]


def py_tables(t):
    dts, ops = t["dtypes"], t["ops"]
    out = ["DTYPES = {"]
    out += wrap(['"%s": %d' % (d["name"], d["code"]) for d in dts], "    ", "    ")
    out.append("}")
    out.append("DTYPE_SIZES = {%s}" % ", ".join("%d: %d" % (d["code"], d["size"]) for d in dts))
    out.append("OPS = {%s}" % ", ".join('"%s": %d' % (o["name"], o["code"]) for o in ops))
    return out


def lua_tables(t):
    dts, ops = t["dtypes"], t["ops"]

    def lua_map(name, pairs):
        lines = wrap(["[%d] = %s" % (k, v) for k, v in pairs], "local %s = { " % name, "\t",
                     96)
        lines[-1] = lines[-1].rstrip(",") + " }"
        return lines

    out = lua_map("DTYPE", [(d["code"], '"%s"' % d["name"]) for d in dts])
    out += lua_map("DSIZE", [(d["code"], d["size"]) for d in dts])
    out += lua_map("OP", [(o["code"], '"%s"' % o["name"]) for o in ops])
    out += lua_map("DT_INT", [(d["code"], "true") for d in dts if d["kind"] == "INT"])
    out += lua_map("OP_INT_ONLY", [(o["code"], "true") for o in ops if o["applies"] == "INT"])
    return out


def lua_elem(t):
    out = []
    for d in t["dtypes"]:
        if d["kind"] == "INT":
            pf = d["name"]
        else:
            pf = "double" if d["size"] == 8 else "float"
        out.append('\t[%d] = ProtoField.%s("inca.elem.%s", "%s"),' % (d["code"], pf, d["name"],
                                                                     d["name"]))
    return out


def yang_enum(rows):
    return ["      enum %s { value %d; }" % (r["name"], r["code"]) for r in rows]


def md_dtype_table(t):
    dts = t["dtypes"]
    half = (len(dts) + 1) // 2
    out = ["| value | name | size | value | name | size |", "|---|---|---|---|---|---|"]
    for i in range(half):
        cells = []
        for d in (dts[i], dts[i + half] if i + half < len(dts) else None):
            cells += [str(d["code"]), d["name"], str(d["size"])] if d else ["", "", ""]
        out.append("| " + " | ".join(cells) + " |")
    return out


def md_op_row(t):
    ops = ", ".join("%d %s" % (o["code"], o["name"]) for o in t["ops"])
    int_ops = [o["code"] for o in t["ops"] if o["applies"] == "INT"]
    int_dts = [d["code"] for d in t["dtypes"] if d["kind"] == "INT"]
    return ["| 3 | 1 | Op | %s; ops %s only with integer types (%s); else reject `op` |"
            % (ops, ranges(int_ops), ranges(int_dts))]


# The switch's YANG module: its file name carries the current revision (found in main()).
YANG = "yang/inca-switch@REVISION.yang"

# (file, block name or line prefix, renderer); a name starting with "|" is a line prefix.
TARGETS = [
    ("include/inca/inca.h", "dtypes", lambda t: c_enum("INCA_", t["dtypes"])),
    ("include/inca/inca.h", "ops", lambda t: c_enum("INCA_", t["ops"])),
    ("python/inca/_lib.py", "dtypes and ops", py_tables),
    ("tools/inca.lua", "dtypes and ops", lua_tables),
    ("tools/inca.lua", "element fields", lua_elem),
    (YANG, "dtypes", lambda t: yang_enum(t["dtypes"])),
    (YANG, "ops", lambda t: yang_enum(t["ops"])),
    ("docs/protocol.md", "dtype table", md_dtype_table),
    ("docs/protocol.md", "| 3 | 1 | Op |", md_op_row),
]


def apply(text, name, new_lines, path):
    """text with the block (or prefixed line) `name` replaced by new_lines."""
    lines = text.split("\n")
    if name.startswith("|"):
        idx = [i for i, l in enumerate(lines) if l.startswith(name)]
        if len(idx) != 1:
            sys.exit("gen_facts: %s: expected one line starting with '%s', found %d"
                     % (path, name, len(idx)))
        return "\n".join(lines[:idx[0]] + new_lines + lines[idx[0] + 1:])
    b = [i for i, l in enumerate(lines) if l.rstrip().endswith("begin generated: " + name)
         or ("begin generated: " + name + " ") in l]
    e = [i for i, l in enumerate(lines) if l.rstrip().endswith("end generated: " + name)
         or ("end generated: " + name + " ") in l]
    if len(b) != 1 or len(e) != 1 or e[0] < b[0]:
        sys.exit("gen_facts: %s: markers 'begin/end generated: %s' missing or repeated"
                 % (path, name))
    return "\n".join(lines[:b[0] + 1] + new_lines + lines[e[0]:])


def main():
    ap = argparse.ArgumentParser(description="write or check the mirrors of lib/wire/dtype.h")
    ap.add_argument("--dump", required=True, help="the wire_dtype_dump program")
    ap.add_argument("--root", required=True, help="source tree")
    ap.add_argument("--write", action="store_true", help="rewrite the mirrors in place")
    a = ap.parse_args()
    table = json.loads(subprocess.run([a.dump], check=True, capture_output=True,
                                      text=True).stdout)
    new, old = {}, {}
    yang = sorted(glob.glob(os.path.join(a.root, "yang", "inca-switch@*.yang")))
    if len(yang) != 1:
        sys.exit("gen_facts: expected one yang/inca-switch@*.yang, found %d" % len(yang))
    for path, name, render in TARGETS:
        if path == YANG:
            path = os.path.relpath(yang[0], a.root)
        full = os.path.join(a.root, path)
        if full not in new:
            with open(full, encoding="utf-8") as f:
                old[full] = new[full] = f.read()
        new[full] = apply(new[full], name, render(table), path)
    stale = [p for p in new if new[p] != old[p]]
    if a.write:
        for p in stale:
            with open(p, "w", encoding="utf-8") as f:
                f.write(new[p])
            print("gen_facts: rewrote", os.path.relpath(p, a.root))
        return 0
    for p in stale:
        rel = os.path.relpath(p, a.root)
        sys.stdout.writelines(difflib.unified_diff(old[p].splitlines(True),
                                                   new[p].splitlines(True), rel, rel + " (table)"))
    if stale:
        print("gen_facts: %d file(s) disagree with lib/wire/dtype.h; run "
              "`meson compile -C build gen-facts`" % len(stale))
        return 1
    print("gen_facts: %d mirrors agree with lib/wire/dtype.h" % len(TARGETS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
