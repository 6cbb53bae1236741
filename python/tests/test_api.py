"""The DataStream API against plain-Python oracles."""

import functools
import json
from collections import defaultdict

import pytest

import spate
from spate import Row, StreamExecutionEnvironment, Types, agg, col, lit
from spate.functions import MapFunction, ReduceFunction


def collect(stream):
    return list(stream.execute_and_collect())


def test_map_filter_flat_map_match_python(env):
    lines = ["the quick brown fox", "", "jumps over the lazy dog", "the end"]
    out = collect(env.from_collection(lines)
                  .flat_map(str.split)
                  .filter(lambda w: w != "the")
                  .map(lambda w: (w, len(w))))
    assert out == [(w, len(w)) for line in lines for w in line.split() if w != "the"]


def test_plain_values_round_trip(env):
    items = [None, True, 3, -2**63, 2**70, 1.5, "é", b"\x00b", [1, [2]], (1, "a"),
             {"k": (1, 2)}, {3, 4}, Row(a=1, b="x"), Row(1, 2)]
    assert collect(env.from_collection(items).map(lambda x: x)) == items


def test_function_objects_open_and_close(env):
    events = []

    class AddOffset(MapFunction):
        def open(self, ctx):
            events.append(("open", ctx.get_job_name()))
            self.offset = 100

        def map(self, value):
            return value + self.offset

        def close(self):
            events.append(("close",))

    out = env.from_collection([1, 2, 3]).map(AddOffset()).execute_and_collect("offsets")
    assert list(out) == [101, 102, 103]
    assert events == [("open", "offsets"), ("close",)]


def test_keyed_reduce_is_a_running_reduce_per_key(env):
    data = [("a", 1), ("b", 10), ("a", 2), ("c", 5), ("b", 20), ("a", 3)]

    class Add(ReduceFunction):
        def reduce(self, x, y):
            return (x[0], x[1] + y[1])

    out = collect(env.from_collection(data).key_by(lambda p: p[0]).reduce(Add()))
    per_key = defaultdict(list)
    for k, v in out:
        per_key[k].append(v)
    want = defaultdict(list)
    acc = {}
    for k, v in data:
        acc[k] = acc.get(k, 0) + v
        want[k].append(acc[k])
    assert per_key == want


@pytest.mark.parametrize("workers", [1, 2])
def test_rolling_aggregates_follow_flink(workers):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)
    data = [(1, 5, "a"), (1, 3, "b"), (2, 7, "c"), (1, 9, "d"), (2, 1, "e")]
    s = env.from_collection(data)
    sums = s.key_by(0).sum(1)
    mins = s.key_by(0).min(1)
    maxbys = s.key_by(0).max_by(1)
    from spate.datastream import DataStream  # noqa: F401
    handle_sums = sums._then({"op": "collect"})
    handle_mins = mins._then({"op": "collect"})
    handle_max = maxbys._then({"op": "collect"})
    raw = env._run("rolling")
    got = {h._id: raw["collected"][h._id] for h in (handle_sums, handle_mins, handle_max)}

    # With two workers the collection is split between them, so the order in which a
    # key's records meet is not fixed: compare what every order agrees on, the last result.
    def last_per_key(records, better):
        best = {}
        for r in records:
            if r[0] not in best or better(r, best[r[0]]):
                best[r[0]] = r
        return best

    keys = {k for k, _, _ in data}
    total = {k: sum(v for kk, v, _ in data if kk == k) for k in keys}
    low = {k: min(v for kk, v, _ in data if kk == k) for k in keys}
    top = {k: max((r for r in data if r[0] == k), key=lambda r: r[1]) for k in keys}
    sums = last_per_key(got[handle_sums._id], lambda r, b: r[1] > b[1])
    assert {k: r[1] for k, r in sums.items()} == total
    mins = last_per_key(got[handle_mins._id], lambda r, b: r[1] < b[1])
    assert {k: r[1] for k, r in mins.items()} == low
    assert last_per_key(got[handle_max._id], lambda r, b: r[1] > b[1]) == top
    # Flink's rolling aggregates keep the other fields of the key's first record, and emit
    # one result per record.
    assert len(got[handle_sums._id]) == len(data)
    if workers == 1:
        assert [r[2] for r in got[handle_sums._id]] == ["a", "a", "c", "a", "c"]


def test_native_expressions_match_python(env):
    rows = [Row(price=p, name=n) for p, n in [(-7, "Ann"), (1000, "bob"), (12345, "Al"), (3, "z")]]
    out = collect(env.from_collection(rows)
                  .filter((col("price") > 0) & col("name").starts_with("A") | (col("price") == 3))
                  .map(spate.expr.row(eur=col("price") * 908 // 1000, m=col("price") % -7,
                                      up=col("name").upper(), f=col("price") / 2)))
    want = [Row(eur=r.price * 908 // 1000, m=r.price % -7, up=r.name.upper(), f=r.price / 2)
            for r in rows if (r.price > 0 and r.name.startswith("A")) or r.price == 3]
    assert out == want


@pytest.mark.parametrize("a", [-7, 7, 0, -1, 13])
@pytest.mark.parametrize("b", [2, -2, 3, -5])
def test_integer_division_is_pythons(env, a, b):
    out = collect(env.from_collection([Row(a=a, b=b)])
                  .map(spate.expr.tuple_(col("a") // col("b"), col("a") % col("b"))))
    assert out == [(a // b, a % b)]


def test_native_plans_call_no_python(env, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a b\nb c\n")
    from spate.connectors import FileSource
    words = env.from_source(FileSource.text_lines(str(src))).flat_map(col("*").split())
    words.key_by(col("*")).count().print()
    result = env.execute("native")
    assert result.python_calls == 0


def test_python_stages_are_fused(env):
    s = (env.from_collection(list(range(10)))
         .map(lambda x: x + 1).name("inc")
         .filter(lambda x: x % 2 == 0).name("even")
         .map(lambda x: x * 10).name("tens"))
    s.print()
    result = env.execute("fused")
    assert "inc -> even -> tens" in result.operators, result.operators
    assert result.python_calls == 10 + 10 + 5


def test_an_exception_fails_the_job_with_its_traceback(env):
    def boom(x):
        return 1 // (x - 3)

    env.from_collection([1, 2, 3, 4]).map(boom).name("divide").print()
    with pytest.raises(spate.JobExecutionError) as info:
        env.execute("failing")
    message = str(info.value)
    assert "divide" in message
    assert "ZeroDivisionError" in message and "boom" in message
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_a_second_execute_runs_normally(env):
    assert collect(env.from_collection([1, 2]).map(lambda x: -x)) == [-1, -2]
    assert collect(env.from_collection([3]).map(lambda x: x * 2)) == [6]


def test_a_job_without_sinks_is_refused(env):
    env.from_collection([1]).map(lambda x: x)
    with pytest.raises(RuntimeError, match="no sinks"):
        env.execute()


def test_rows(env):
    r = Row(auction=1, price=20)
    assert (r.auction, r["price"], r[1], len(r), list(r)) == (1, 20, 20, 2, [1, 20])
    assert repr(r) == "Row(auction=1, price=20)" and r.as_dict() == {"auction": 1, "price": 20}
    with pytest.raises(AttributeError):
        r.nope
    import pickle
    assert pickle.loads(pickle.dumps(r)) == r
    assert collect(env.from_collection([r]).map(lambda x: x.price + 1)) == [21]


def test_jsonl_rows_are_decoded_in_rust(env, tmp_path):
    path = tmp_path / "bids.jsonl"
    bids = [{"auction": i % 3, "price": i * 10, "extra": "x" * i} for i in range(20)]
    path.write_text("".join(json.dumps(b) + "\n" for b in bids))
    from spate.connectors import FileSource
    schema = Types.ROW_NAMED(["auction", "price"], [Types.LONG(), Types.LONG()])
    out = collect(env.from_source(FileSource.jsonl(str(path), schema))
                  .filter(col("price") >= 50).map(lambda b: (b.auction, b.price)))
    assert sorted(out) == sorted((b["auction"], b["price"]) for b in bids if b["price"] >= 50)


def test_native_jobs_decode_only_the_fields_they_read(tmp_path):
    # Line 2's `note` and `nested.y` are numbers where strings are declared. A job of native
    # operations that never reads them does not decode them (projection push-down, as
    # Flink's JSON format): the line is not a bad record. A Python function may read any
    # field, so the same source then decodes them all and drops line 2.
    path = tmp_path / "rows.jsonl"
    path.write_text('{"k": 1, "v": 10, "note": "a", "nested": {"x": 1, "y": "p"}}\n'
                    '{"k": 2, "v": 20, "note": 5, "nested": {"x": 2, "y": 7}}\n'
                    '{"k": 3, "v": 30, "note": "c", "nested": null}\n')
    from spate.connectors import FileSource
    schema = Types.ROW_NAMED(["k", "v", "note", "nested"], [
        Types.LONG(), Types.LONG(), Types.STRING(),
        Types.ROW_NAMED(["x", "y"], [Types.LONG(), Types.STRING()])])

    def source():
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_rest(False)
        return env.from_source(FileSource.jsonl(str(path), schema, bad_records="drop"))

    native = source().filter(~col("nested").is_null()).map(col("k") * 100 + col("nested.x"))
    assert sorted(collect(native)) == [101, 202]
    keyed = (source().key_by(col("k") % 2).full_window_partition()
             .aggregate(agg.sum("v").alias("v")))
    assert sorted((r.key, r.v) for r in collect(keyed)) == [(0, 20), (1, 40)]
    assert collect(source().map(lambda r: r.k)) == [1, 3]
    assert collect(source().map(col("note"))) == ["a", "c"]


def test_a_bad_json_line_fails_the_job_naming_file_and_line(env, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    from spate.connectors import FileSource
    schema = Types.ROW_NAMED(["a"], [Types.LONG()])
    env.from_source(FileSource.jsonl(str(path), schema)).print()
    with pytest.raises(spate.JobExecutionError, match=r"bad\.jsonl.*line 2"):
        env.execute()


def test_bad_json_lines_can_go_to_dead_letters(env, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    dead = tmp_path / "dead.jsonl"
    from spate.connectors import FileSource, dead_letter
    schema = Types.ROW_NAMED(["a"], [Types.LONG()])
    out = collect(env.from_source(FileSource.jsonl(str(path), schema,
                                                   bad_records=dead_letter(str(dead))))
                  .map(col("a")))
    assert out == [1, 3]
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert len(letters) == 1
    assert letters[0]["raw"] == '{"a": ' and letters[0]["line"] == 2
    assert letters[0]["source"].endswith("bad.jsonl") and letters[0]["reason"]


@pytest.mark.parametrize("workers", [1, 2])
def test_csv_rows_of_a_declared_type_are_decoded_in_rust(workers, tmp_path):
    import csv as pycsv
    from spate.connectors import CsvReaderFormat, FileSource, dead_letter
    src = tmp_path / "trips"
    src.mkdir()
    rows = [(i, f"c{i % 4}", i * 1.5, i % 3 == 0) for i in range(300)]
    for part in range(3):  # a directory of files, with their columns in another order
        with open(src / f"part-{part}.csv", "w", newline="") as f:
            w = pycsv.writer(f, delimiter=";")
            w.writerow(["fare", "id", "city", "flag", "unused"])
            for i, city, fare, flag in rows[part::3]:
                w.writerow([fare, i, city, str(flag).lower(), "x"])
    with open(src / "part-3.csv", "w") as f:
        f.write("fare;id;city;flag;unused\n1.0;not-a-number;c9;true;x\n")
    dead = tmp_path / "dead.jsonl"
    t = Types.ROW_NAMED(["id", "city", "fare", "flag"],
                        [Types.LONG(), Types.STRING(), Types.DOUBLE(), Types.BOOLEAN()])
    env = spate.StreamExecutionEnvironment.get_execution_environment().set_parallelism(workers)
    env.set_rest(False)
    fmt = CsvReaderFormat.for_schema(t, delimiter=";")
    source = FileSource.for_record_stream_format(fmt, str(src)).bad_records(
        dead_letter(str(dead))).build()
    out = collect(env.from_source(source).map(spate.expr.tuple_(
        col("id"), col("city"), col("fare"), col("flag"))))
    assert sorted(out) == rows
    (letter,) = [json.loads(line) for line in dead.read_text().splitlines()]
    assert letter["line"] == 2 and letter["source"].endswith("part-3.csv")
    assert "field `id`" in letter["reason"], letter
    with pytest.raises(TypeError):
        FileSource.csv(str(src), Types.LONG())


def test_file_sink_writes_every_record(env, tmp_path):
    from spate.connectors import Encoder, FileSink
    out_dir = tmp_path / "out"
    (env.from_collection([Row(k=i % 2, v=i) for i in range(100)])
        .sink_to(FileSink.for_row_format(str(out_dir), Encoder.json()).build()))
    env.execute("files")
    rows = [json.loads(line) for f in sorted(out_dir.iterdir()) if not f.name.startswith(".")
            for line in f.read_text().splitlines()]
    assert sorted(r["v"] for r in rows) == list(range(100))
    assert all(r["k"] == r["v"] % 2 for r in rows)


def test_expressions_refuse_python_truthiness():
    with pytest.raises(TypeError, match="& | ~"):
        bool(col("a") > 1)


def test_sequence_source_includes_its_end(env):
    assert sorted(collect(env.from_sequence(1, 5))) == [1, 2, 3, 4, 5]


def test_union(env):
    a = env.from_collection([1, 2])
    b = env.from_collection([3])
    assert sorted(collect(a.union(b).map(lambda x: x * 2))) == [2, 4, 6]


def test_missing_field_in_an_expression_names_it(env):
    env.from_collection([Row(a=1)]).map(col("b") + 1).name("plus").print()
    with pytest.raises(spate.JobExecutionError, match="no field `b`"):
        env.execute()


def test_functools_partial_is_a_function(env):
    def scale(k, x):
        return k * x
    assert collect(env.from_collection([1, 2]).map(functools.partial(scale, 3))) == [3, 6]


def test_lit_compares(env):
    assert collect(env.from_collection([1, 5]).filter(col("*") > lit(2))) == [5]


def test_connect_co_map_and_co_flat_map(env):
    from spate.functions import CoFlatMapFunction, CoMapFunction

    class Tag(CoMapFunction):
        def map1(self, v):
            return ("num", v * 2)

        def map2(self, v):
            return ("str", v.upper())

    class Split(CoFlatMapFunction):
        def flat_map1(self, v):
            return [v] * v

        def flat_map2(self, v):
            yield from v

    nums, strs = env.from_collection([1, 2, 3]), env.from_collection(["a", "bc"])
    assert sorted(collect(nums.connect(strs).map(Tag()))) == sorted(
        [("num", 2), ("num", 4), ("num", 6), ("str", "A"), ("str", "BC")])
    nums, strs = env.from_collection([1, 2]), env.from_collection(["xy"])
    assert sorted(map(str, collect(nums.connect(strs).flat_map(Split())))) == ["1", "2", "2",
                                                                               "x", "y"]


def test_keyed_co_process_shares_state_between_inputs(env):
    from spate.functions import KeyedCoProcessFunction
    from spate.state import ValueStateDescriptor

    class Enrich(KeyedCoProcessFunction):
        """Orders wait for their customer's name; later orders use it at once."""

        def open(self, ctx):
            self.name = ctx.get_state(ValueStateDescriptor("name"))
            self.waiting = ctx.get_list_state(__import__("spate").state.ListStateDescriptor("w"))

        def process_element1(self, order, ctx):
            name = self.name.value()
            if name is None:
                self.waiting.add(order)
            else:
                yield (order["id"], name)

        def process_element2(self, customer, ctx):
            self.name.update(customer["name"])
            for o in self.waiting.get():
                yield (o["id"], customer["name"])
            self.waiting.clear()

    orders = env.from_collection([{"id": i, "cust": i % 3} for i in range(9)])
    customers = env.from_collection([{"cust": c, "name": f"c{c}"} for c in range(3)])
    out = collect(orders.connect(customers).key_by("cust", "cust").process(Enrich()))
    assert sorted(out) == [(i, f"c{i % 3}") for i in range(9)]


def test_collect_is_refused_on_several_processes(env):
    env.set_processes(2)
    with pytest.raises(RuntimeError, match="one process"):
        env.from_collection([1]).execute_and_collect()


def test_to_timestamp_reads_flinks_format_and_epoch_millis(env):
    from datetime import datetime, timezone
    texts = ["1970-01-01 00:00:01.5", "2015-07-15 00:00:01.123", "2024-02-29T12:30:00", "1500"]
    out = collect(env.from_collection([Row(t=t) for t in texts]).map(col("t").to_timestamp()))
    def utc(*a):
        return int(datetime(*a, tzinfo=timezone.utc).timestamp() * 1000)
    want = [1500, utc(2015, 7, 15, 0, 0, 1) + 123, utc(2024, 2, 29, 12, 30), 1500]
    assert out == want
    env.from_collection([Row(t="2023-02-30 00:00:00")]).map(col("t").to_timestamp()).print()
    with pytest.raises(spate.JobExecutionError, match="cannot read `2023-02-30 00:00:00`"):
        env.execute()


def test_a_keyed_stream_without_a_keyed_operation_is_a_clear_error(env):
    env.from_collection([1]).key_by(lambda x: x).map(lambda x: x).print()
    with pytest.raises(TypeError, match="needs a keyed operation"):
        env.execute()


def test_socket_text_stream_reads_lines_until_the_server_closes(env):
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def serve():
        conn, _ = server.accept()
        conn.sendall(b"alpha\r\nbeta\n\ngamma\n")
        conn.close()
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    out = collect(env.socket_text_stream("127.0.0.1", port).map(lambda s: s.upper()))
    assert out == ["ALPHA", "BETA", "", "GAMMA"]


def test_bad_json_lines_can_be_dropped(env, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    from spate.connectors import FileSource
    schema = Types.ROW_NAMED(["a"], [Types.LONG()])
    s = env.from_source(FileSource.jsonl(str(path), schema, bad_records="drop")).map(col("a"))
    assert collect(s) == [1, 3]
