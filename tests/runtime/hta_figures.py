"""Holistic Trace Analysis on a Kineto directory, as its users run it: validate_trace at each of
its levels, then TraceAnalysis's analyses — temporal breakdown, idle time, kernel breakdown,
launch statistics, communication/computation overlap, critical path over a ProfilerStep — and
their figures as one JSON object on stdout, for hta_check.py to compare with gtrace report.
Each analysis's failure is recorded (its exception), not raised: the checker says which failed.

Runs in the project venv (scripts/setup.sh: HolisticTraceAnalysis, pandas 2.x):
  .venv/bin/python tests/runtime/hta_figures.py TRACE_DIR"""
import contextlib
import json
import math
import statistics
import sys
import traceback
import warnings

warnings.simplefilter("ignore")


def attempt(out, key, fn):
    try:
        out[key] = fn()
    except Exception as e:  # the figure is the failure: the checker reports it
        tb = traceback.extract_tb(e.__traceback__)[-1]
        out.setdefault("failures", {})[key] = f"{type(e).__name__}: {e} ({tb.filename.split('site-packages/')[-1]}:{tb.lineno})"


def finite(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def validate(trace_dir):
    from hta.common.trace_file import get_trace_files
    from hta.utils.validate_trace import validate_trace_format
    files = get_trace_files(trace_dir)
    out = {"ranks_found": sorted(files)}
    for rank, path in files.items():
        for level in ("minimal", "standard", "complete"):
            ok, errors = validate_trace_format(path, level=level)
            out[f"{rank}/{level}"] = {"ok": bool(ok), "errors": {k: str(v)[:300] for k, v in (errors or {}).items()}}
    return out


def per_rank_rows(a):
    """Per rank: the sum of each GPU row's duration by name, and by name per ProfilerStep (HTA's
    iteration column), over the rows HTA kept."""
    from hta.utils.utils import get_kernel_type
    sym = a.t.symbol_table.get_sym_table()
    out = {}
    for rank in a.t.get_ranks():
        df = a.t.get_trace(rank)
        gpu = df[df["stream"] != -1]
        names = gpu["name"].map(lambda i: sym[i])
        iterations = [int(i) for i in a.t.get_iterations(rank)]
        in_steps = gpu[gpu["iteration"] >= 0]
        by_name_in_steps = in_steps.groupby(names[in_steps.index])["dur"].sum()
        out[str(rank)] = {
            "iterations": len(iterations),
            "gpu_rows": int(len(gpu)),
            "cats": {sym[c]: int(n) for c, n in df["cat"].value_counts().items()},
            "sum_us_by_name": {n: float(v) for n, v in gpu.groupby(names)["dur"].sum().items()},
            "per_step_us_by_name": {n: float(v) / max(len(iterations), 1) for n, v in by_name_in_steps.items()},
            "in_steps_count_by_name": {n: int(v) for n, v in in_steps.groupby(names[in_steps.index])["dur"].count().items()},
            "kernel_type_by_name": {n: get_kernel_type(n) for n in set(names)},
        }
    return out


def launch_stats(a):
    res = a.get_cuda_kernel_launch_stats(ranks=a.t.get_ranks(), visualize=False)
    return {str(rank): {"launches": int(len(df)),
                        "median_cpu_duration_us": finite(statistics.median(df["cpu_duration"])) if len(df) else None,
                        "median_launch_delay_us": finite(statistics.median(df["launch_delay"])) if len(df) else None}
            for rank, df in res.items()}


def temporal(a):
    df = a.get_temporal_breakdown(visualize=False)
    return {str(int(r["rank"])): {k: finite(v) for k, v in r.items() if k != "rank"} for _, r in df.iterrows()}


def idle(a):
    df, _ = a.get_idle_time_breakdown(ranks=a.t.get_ranks(), visualize=False, show_idle_interval_stats=True)
    out = {}
    for _, r in df.iterrows():
        out.setdefault(str(int(r["rank"])), {})[f"stream {int(r['stream'])}/{r['idle_category']}"] = finite(r["idle_time"])
    return out


def kernel_breakdown(a):
    type_df, _ = a.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    return {r["kernel_type"]: finite(r["sum"]) for _, r in type_df.iterrows()}


def overlap(a):
    df = a.get_comm_comp_overlap(visualize=False)
    return {str(int(r["rank"])): finite(r["comp_comm_overlap_pctg"]) for _, r in df.iterrows()}


def critical_path(a):
    """Over the middle ProfilerStep of each rank (HTA's instance_id counts the rows whose name
    holds the annotation, in its order)."""
    out = {}
    sym = a.t.symbol_table.get_sym_table()
    for rank in a.t.get_ranks():
        df = a.t.get_trace(rank)
        steps = df[df["name"].map(lambda i: sym[i].startswith("ProfilerStep#"))]
        instance = len(steps) // 2
        g, ok = a.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=instance)
        summary = g.summary()
        out[str(rank)] = {"success": bool(ok), "instance": instance, "nodes": g.number_of_nodes(), "edges": g.number_of_edges(),
                          "path_nodes": len(g.critical_path_nodes),
                          "bound_by_us": {str(k) or "(none)": finite(v) for k, v in summary.items()}}
    return out


def main():
    with contextlib.redirect_stdout(sys.stderr):  # HTA prints as it goes
        out = analyses(sys.argv[1])
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


def analyses(trace_dir):
    out = {}
    attempt(out, "validate", lambda: validate(trace_dir))
    from hta.trace_analysis import TraceAnalysis
    analyzer = None

    def load():
        nonlocal analyzer
        # HTA leaves out the last ProfilerStep unless asked (trace.py _filter_irrelevant_gpu_kernels:
        # it may be cut short); gtrace writes only whole steps and counts the last one, so the
        # figures compared are over the same steps (one long op in the last step was 5% apart).
        analyzer = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
        return {"ranks": [int(r) for r in analyzer.t.get_ranks()]}

    attempt(out, "load", load)
    if analyzer:
        for key, fn in (("rows", per_rank_rows), ("temporal", temporal), ("idle", idle), ("kernel_types", kernel_breakdown),
                        ("launch", launch_stats), ("overlap", overlap), ("critical_path", critical_path)):
            attempt(out, key, lambda fn=fn: fn(analyzer))
    return out


if __name__ == "__main__":
    main()
