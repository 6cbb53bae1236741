"""String functions of native expressions (lpad, rpad, zfill, replace, format_string)
against plain Python."""

import pytest

from spate import Row, col
from spate.expr import concat, format_string


def run(env, rows, expr):
    return list(env.from_collection(rows).map(expr).execute_and_collect())


WORDS = ["", "a", "ab", "abc", "héllo", "-5", "+12", "7"]


@pytest.mark.parametrize("width", [0, 1, 3, 6])
def test_pads_are_rjust_and_ljust(env, width):
    rows = [Row(s=s) for s in WORDS]
    got = run(env, rows, concat(col("s").lpad(width, "0"), "|", col("s").rpad(width),
                                "|", col("s").zfill(width)))
    assert got == [f"{s.rjust(width, '0')}|{s.ljust(width)}|{s.zfill(width)}" for s in WORDS]


def test_pad_with_a_longer_fill_repeats_it(env):
    assert run(env, [Row(s="hi")], col("s").lpad(7, "ab")) == ["ababahi"]
    assert run(env, [Row(s="hi")], col("s").rpad(5, "xy")) == ["hixyx"]


@pytest.mark.parametrize("old,new", [("a", "o"), ("ab", ""), ("", "-"), ("zz", "y")])
def test_replace_is_pythons(env, old, new):
    rows = [Row(s=s) for s in WORDS + ["abab", "banana"]]
    got = run(env, rows, col("s").replace(old, new))
    assert got == [r.s.replace(old, new) for r in rows]


def test_none_stays_none(env):
    assert run(env, [Row(s=None)], col("s").lpad(3, "0")) == [None]


def test_errors_name_the_problem(env):
    import spate
    with pytest.raises(spate.JobExecutionError, match="needs a str"):
        run(env, [Row(s=5)], col("s").lpad(3))
    with pytest.raises(spate.JobExecutionError, match="not enough arguments"):
        run(env, [Row(s="x")], format_string("%s %s", col("s")))
    with pytest.raises(spate.JobExecutionError, match="not all arguments converted"):
        run(env, [Row(s="x")], format_string("%s", col("s"), 1))


INTS = [0, 7, -7, 42, -1000, 123456789, -(2 ** 63)]
INT_FORMATS = ["%d", "%i", "%5d", "%-5d|", "%05d", "%+d", "% d", "%.3d", "%x", "%X", "%#x",
               "%o", "%#o", "%08.3d", "%+06x", "%%%d%%"]


@pytest.mark.parametrize("fmt", INT_FORMATS)
def test_format_string_ints(env, fmt):
    got = run(env, [Row(v=v) for v in INTS], format_string(fmt, col("v")))
    assert got == [fmt % v for v in INTS]


FLOATS = [0.0, -0.0, 1.5, -2.25, 3.14159265, 1e-5, 123456.789, 1e20, 2.5, 0.125,
          float("inf"), float("-inf"), float("nan")]
FLOAT_FORMATS = ["%f", "%.2f", "%10.3f", "%-10.1f|", "%010.2f", "%+.1f", "%e", "%.3E",
                 "%g", "%.3g", "%G", "%#g", "%.0f", "%.0e", "%12g", "%#.0f", "%#.0e", "%#.3g"]


@pytest.mark.parametrize("fmt", FLOAT_FORMATS)
def test_format_string_floats(env, fmt):
    got = run(env, [Row(v=v) for v in FLOATS], format_string(fmt, col("v")))
    assert got == [fmt % v for v in FLOATS]


def test_format_string_strings_and_mixed(env):
    rows = [Row(a=1, s="xyz", f=0.5, n=None, b=True), Row(a=-3, s="", f=-1.0, n=None, b=False)]
    fmt = "%s|%5s|%-5s|%.2s|%r|%s|%d|%c|%s"
    got = run(env, rows, format_string(fmt, col("s"), col("s"), col("s"), col("s"), col("s"),
                                       col("n"), col("b"), 65, col("f")))
    assert got == [fmt % (r.s, r.s, r.s, r.s, r.s, r.n, r.b, 65, r.f) for r in rows]


def test_nexmark_q1_price(env):
    """q1's price*908/1000 with 3 decimals, exactly as the anchors' plain Python writes it."""
    prices = [0, 1, 999, 1000, 1102, 763076, -1, -1102, 2 ** 40]
    v = col("p") * 908
    sign = ((v < 0) & "-") | ""
    got = run(env, [Row(p=p) for p in prices],
              format_string("%s%d.%03d", sign, v.abs() // 1000, v.abs() % 1000))
    also = run(env, [Row(p=p) for p in prices],
               concat(sign, v.abs() // 1000, ".", (v.abs() % 1000).str().lpad(3, "0")))
    want = []
    for p in prices:
        x = p * 908
        want.append("%s%d.%03d" % ("-" if x < 0 else "", abs(x) // 1000, abs(x) % 1000))
    assert got == want and also == want
