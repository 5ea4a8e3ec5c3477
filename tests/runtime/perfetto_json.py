"""Perfetto's JSON trace importer, as its source does it (trace_processor's json_trace_tokenizer,
json_trace_parser, trace_sorter, slice_tracker and flow_tracker at google/perfetto ec5d16b;
the rules, with file and line, in docs/trace_readers.md), modelled for the parts a writer can
get wrong: what it sorts how, which slice each v1 flow event binds to, and the stats it raises.

  import_json(events) -> Imported(stats, flows, slices)

stats: Perfetto's stat names for what it dropped or could not parse (a trace that opens cleanly
has none); flows: each drawn arrow as (from slice, to slice); slices: every slice by id."""
import collections
import math
import numbers

ROOT = -1


class Slice:
    __slots__ = ("id", "pid", "tid", "ts", "end", "name", "cat", "args", "depth")

    def __init__(self, sid, e, ts, dur, depth):
        self.id, self.pid, self.tid, self.ts, self.end = sid, e.get("pid"), e.get("tid"), ts, ts + dur
        self.name, self.cat, self.args, self.depth = e.get("name"), e.get("cat"), e.get("args") or {}, depth


class Imported:
    def __init__(self):
        self.stats = collections.Counter()
        self.flows = []  # (from Slice, to Slice, the s event, the f event)
        self.slices = []


def to_ns(v):
    """ts/dur in µs as int, float or numeric string (CoerceToTs); None when not a number."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if not isinstance(v, numbers.Real) or math.isnan(v):
        return None
    return round(v * 1000)


def is_uint32(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**32


def sort_key(index, e, ts):
    """(ts, tie, file order): at one timestamp E first, then X by descending duration, then the
    rest (B, i, s, t, f, C, …) in file order (trace_sorter.h SlowOperatorLess::KeyForType)."""
    ph = e.get("ph")
    if ph == "E":
        tie = (0, 0)
    elif ph == "X" and (to_ns(e.get("dur")) or 0) > 0:
        tie = (1, -to_ns(e.get("dur")))
    else:
        tie = (2, 0)
    return (ts, tie, index)


def import_json(events):
    out = Imported()
    timed = []
    for i, e in enumerate(events):
        ph = e.get("ph")
        if not ph:
            out.stats["json_tokenizer_failure"] += 1
            continue
        if ph == "M":
            check_metadata(e, out.stats)
            continue
        ts = to_ns(e.get("ts"))
        if ts is None:
            out.stats["json_tokenizer_failure"] += 1
            continue
        if ts < 0:
            out.stats["trace_sorter_negative_timestamp_dropped"] += 1
            continue
        for key in ("pid", "tid"):
            if key in e and not is_uint32(e[key]):
                out.stats[f"{key}_not_uint32 (gtrace's check: Perfetto makes it 0 or a string id)"] += 1
        timed.append((sort_key(i, e, ts), e, ts))
    timed.sort(key=lambda t: t[0])

    stacks = collections.defaultdict(list)        # (pid, tid) -> open slices, outermost first
    flow_starts = {}                              # (id, cat, name) -> (Slice, s event)
    pending_next = collections.defaultdict(list)  # (pid, tid) -> f events without bp: the next slice to begin
    for _, e, ts in timed:
        ph, track = e["ph"], (e.get("pid"), e.get("tid") or e.get("pid"))
        if ph == "X":
            dur = to_ns(e.get("dur"))
            if dur is None:
                out.stats["json_parser_failure"] += 1
                continue
            if dur < 0:
                out.stats["slice_negative_duration"] += 1
                continue
            stack = stacks[track]
            while stack and stack[-1].end <= ts and not (stack[-1].end == stack[-1].ts == ts and dur == 0):
                stack.pop()  # half-open: a slice beginning at another's end follows it
            if stack and ts + dur > stack[-1].end:
                out.stats["slice_spill_overlapping_complete_event"] += 1  # moved to an overlap track
                continue
            s = Slice(len(out.slices), e, ts, dur, len(stack))
            out.slices.append(s)
            stack.append(s)
            for f in pending_next.pop(track, []):
                bind_end(out, flow_starts, f, s)
        elif ph in ("s", "t", "f"):
            if not valid_flow_id(e):
                out.stats["flow_invalid_id"] += 1
                continue
            key = (e["id"], e.get("cat"), e.get("name"))
            top = stacks[track][-1] if stacks[track] else None
            if ph == "s":
                if top is None:
                    out.stats["flow_no_enclosing_slice"] += 1
                elif key in flow_starts:
                    out.stats["flow_duplicate_id"] += 1
                else:
                    flow_starts[key] = (top, e)
            elif ph == "t":
                if key not in flow_starts:
                    out.stats["flow_step_without_start"] += 1
                elif top is not None:
                    flow_starts[key] = (top, e)
            elif e.get("bp") == "e":
                if top is None:
                    out.stats["flow_no_enclosing_slice"] += 1
                else:
                    bind_end(out, flow_starts, e, top)
            else:
                pending_next[track].append(e)
        elif ph == "C":
            check_counter(e, out.stats)
    return out


def valid_flow_id(e):
    v = e.get("id")
    if isinstance(v, str):
        try:
            int(v, 16)
            return True
        except ValueError:
            return False
    return isinstance(v, int) and not isinstance(v, bool)


def bind_end(out, flow_starts, f, to_slice):
    key = (f["id"], f.get("cat"), f.get("name"))
    start = flow_starts.get(key)
    if start is None:
        out.stats["flow_end_without_start"] += 1  # processed before its start: not drawn
        return
    out.flows.append((start[0], to_slice, start[1], f))  # v1 'f' does not close the id


def check_counter(e, stats):
    args = e.get("args")
    if not isinstance(args, dict) or not args:
        stats["json_parser_failure"] += 1
        return
    for v in args.values():
        if isinstance(v, bool) or not (isinstance(v, numbers.Real) or (isinstance(v, str) and to_ns(v) is not None)):
            stats["json_parser_failure"] += 1  # that argument gets no counter track


def check_metadata(e, stats):
    name, args = e.get("name"), e.get("args") or {}
    if name in ("process_name", "thread_name"):
        if not isinstance(args.get("name"), str) or not args["name"]:
            stats["json_parser_failure"] += 1
    elif name in ("process_sort_index", "thread_sort_index"):
        if not isinstance(args.get("sort_index"), numbers.Real) or isinstance(args.get("sort_index"), bool):
            stats["json_parser_failure"] += 1
