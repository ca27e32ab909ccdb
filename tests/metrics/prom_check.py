# prom_check: a strict reader of the Prometheus text exposition format 0.0.4, written for the
# metrics tests (tests/metrics/metrics_test.py). It refuses what the format allows loosely and
# this project never emits: a line that is neither "# HELP", "# TYPE" nor a sample, a family
# without HELP and TYPE before its samples, a family split in two, a counter whose name does not
# end in _total, a duplicate series, a bad name, label or escape.
import math
import re

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class PromError(ValueError):
    pass


def _labels(text, lineno):
    """Parse 'k="v",k2="v2"' (the inside of the braces) into a dict."""
    out, i = {}, 0
    while i < len(text):
        eq = text.find("=", i)
        if eq < 0:
            raise PromError(f"line {lineno}: label without '='")
        key = text[i:eq]
        if not LABEL.match(key) or key.startswith("__"):
            raise PromError(f"line {lineno}: bad label name {key!r}")
        if key in out:
            raise PromError(f"line {lineno}: label {key} twice")
        if eq + 1 >= len(text) or text[eq + 1] != '"':
            raise PromError(f"line {lineno}: label {key} value not quoted")
        j, val = eq + 2, []
        while True:
            if j >= len(text):
                raise PromError(f"line {lineno}: unterminated value of label {key}")
            c = text[j]
            if c == "\\":
                nxt = text[j + 1:j + 2]
                if nxt not in ("\\", '"', "n"):
                    raise PromError(f"line {lineno}: bad escape \\{nxt} in label {key}")
                val.append("\n" if nxt == "n" else nxt)
                j += 2
            elif c == '"':
                break
            elif c == "\n":
                raise PromError(f"line {lineno}: raw newline in label {key}")
            else:
                val.append(c)
                j += 1
        out[key] = "".join(val)
        j += 1
        if j < len(text):
            if text[j] != ",":
                raise PromError(f"line {lineno}: expected ',' after label {key}")
            j += 1
        i = j
    return out


def _value(s, lineno):
    if s in ("NaN", "+Inf", "-Inf"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.match(r"[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)\Z", s):
        raise PromError(f"line {lineno}: bad value {s!r}")
    return float(s)


def parse(text):
    """Returns (families, samples): families {name: {"type", "help"}}, samples
    {(name, frozenset(labels.items())): value}. Raises PromError on the first violation."""
    if not text.endswith("\n"):
        raise PromError("exposition does not end with a newline")
    families, samples = {}, {}
    current, closed = None, set()
    for lineno, line in enumerate(text[:-1].split("\n"), 1):
        if line.startswith("#"):
            m = re.match(r"# (HELP|TYPE) (\S+) ?(.*)\Z", line)
            if not m:
                raise PromError(f"line {lineno}: comment that is neither HELP nor TYPE: {line!r}")
            kind, name, rest = m.groups()
            if not NAME.match(name):
                raise PromError(f"line {lineno}: bad metric name {name!r}")
            if name != current:
                if current is not None:
                    closed.add(current)
                if name in closed or name in families:
                    raise PromError(f"line {lineno}: family {name} appears twice")
                families[name] = {"help": None, "type": None, "samples": 0}
                current = name
            fam = families[name]
            if fam["samples"]:
                raise PromError(f"line {lineno}: {kind} of {name} after its samples")
            if kind == "HELP":
                if fam["help"] is not None:
                    raise PromError(f"line {lineno}: second HELP for {name}")
                if re.search(r"\\[^\\n]", rest.replace("\\\\", "")):
                    raise PromError(f"line {lineno}: bad escape in HELP of {name}")
                fam["help"] = rest
            else:
                if fam["type"] is not None:
                    raise PromError(f"line {lineno}: second TYPE for {name}")
                if rest not in TYPES:
                    raise PromError(f"line {lineno}: unknown type {rest!r}")
                if rest == "counter" and not name.endswith("_total"):
                    raise PromError(f"line {lineno}: counter {name} does not end in _total")
                fam["type"] = rest
            continue
        if not line.strip():
            raise PromError(f"line {lineno}: empty line")
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?\Z", line)
        if not m:
            raise PromError(f"line {lineno}: not a sample: {line!r}")
        name, _, ltext, val, _ts = m.groups()
        if name != current:
            raise PromError(f"line {lineno}: sample {name} outside its family ({current})")
        fam = families[name]
        if fam["type"] is None or fam["help"] is None:
            raise PromError(f"line {lineno}: sample of {name} before its HELP and TYPE")
        labels = _labels(ltext or "", lineno)
        v = _value(val, lineno)
        if fam["type"] == "counter" and (v < 0 or math.isnan(v)):
            raise PromError(f"line {lineno}: counter {name} is {v}")
        key = (name, frozenset(labels.items()))
        if key in samples:
            raise PromError(f"line {lineno}: duplicate series {line!r}")
        samples[key] = v
        fam["samples"] += 1
    return families, samples


def get(samples, name, **labels):
    """The value of one series (labels given as keywords), None if absent."""
    return samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))


def self_test():
    """The reader must refuse what it promises to refuse (a test that can fail)."""
    good = ('# HELP a_total x\n# TYPE a_total counter\na_total{k="v\\"\\n\\\\"} 1\n'
            '# HELP g y\n# TYPE g gauge\ng 2.5\n')
    f, s = parse(good)
    assert get(s, "a_total", k='v"\n\\') == 1 and get(s, "g") == 2.5, s
    bad = [
        "# TYPE a counter\n# HELP a x\na 1\n",                         # counter without _total
        "# HELP a x\n# TYPE a gauge\na 1\na 2\n",                       # duplicate series
        "# HELP a x\n# TYPE a gauge\na 1\n# HELP b y\n# TYPE b gauge\nb 1\na 3\n",  # split
        "a 1\n",                                                       # no TYPE
        "# HELP a x\n# TYPE a gauge\na{k=\"v} 1\n",                     # unterminated
        "# HELP a x\n# TYPE a gauge\na{k=\"\\q\"} 1\n",                 # bad escape
        "# HELP 1a x\n# TYPE 1a gauge\n1a 1\n",                         # bad name
        "# HELP a x\n# TYPE a gauge\na one\n",                          # bad value
        "# HELP a x\n# TYPE a gauge\na 1",                              # no final newline
        "# a comment\n# HELP a x\n# TYPE a gauge\na 1\n",               # other comment
        "# HELP a_total x\n# TYPE a_total counter\na_total -1\n",       # negative counter
    ]
    for b in bad:
        try:
            parse(b)
        except PromError:
            continue
        raise AssertionError(f"accepted: {b!r}")
