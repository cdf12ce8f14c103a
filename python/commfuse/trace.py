"""Reading the timelines that ``COMMFUSE_TRACE`` / ``commfuse bench --trace`` write.

The file is Chrome's Trace Event Format: a JSON array (its closing bracket may be missing,
as the format allows: every rank appends to the same file) of complete events
(``"ph": "X"``, times in microseconds) and one ``process_name`` metadata event per rank.
Each rank is one process track (``pid`` = rank); its threads are ``tid``. docs/tracing.md
says what each span means.

    events = commfuse.trace.load("t.json")
    summary = commfuse.trace.check(events, world_size=2)   # raises TraceError if malformed
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Optional, Sequence

__all__ = ["TraceError", "load", "spans", "check", "window"]

# The spans of the pieces of a streamed operator (docs/tracing.md): every fused operator's
# schedule records, per piece, how it arrived (waiting for a peer's slot, reading the
# peer's memory in place, or a transfer this rank drives) and what was computed on it. A
# trace of one without them has lost its pieces. ("pack" is there only where this rank's
# piece is copied or computed into a slot: not for MPI sending straight from the caller's
# rows, nor for peers reading them in place.)
PIECE_ARRIVAL = ("wait", "read", "transfer")
PIECE_SPANS = PIECE_ARRIVAL + ("pack", "compute", "reduce")


class TraceError(ValueError):
    """The trace does not have the structure docs/tracing.md describes."""


def load(path: str) -> list[dict[str, Any]]:
    """Every event of the file, in file order. Accepts a missing closing bracket and a
    trailing comma (what an interrupted writer leaves)."""
    with open(path, encoding="utf-8") as f:
        text = f.read().strip()
    if not text:
        raise TraceError(f"{path}: empty trace (was COMMFUSE_TRACE set in every rank?)")
    if not text.endswith("]"):
        text = text.rstrip(",\n ") + "]"
    try:
        events = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(f"{path}: not a Trace Event Format array: {e}") from e
    if not isinstance(events, list):
        raise TraceError(f"{path}: the top level is {type(events).__name__}, not an array")
    return events


def spans(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The complete events ("ph": "X"), each with "end" (= ts + dur) added, by start."""
    out = [dict(e, end=e["ts"] + e["dur"]) for e in events if e.get("ph") == "X"]
    out.sort(key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    return out


def check(events: Sequence[dict[str, Any]], world_size: int,
          require_pieces: bool = True) -> dict[str, Any]:
    """Checks the structure a reader of the timeline relies on; raises TraceError naming
    the first violation. Returns a summary: spans per name, tracks, time covered.

    - one process track per rank: a ``process_name`` "rank r" for r in 0..world_size-1,
      and every span's pid is one of them;
    - spans are well formed (name, category, ts, dur >= 0) and, within one thread of one
      rank, do not overlap: two spans are either disjoint or one lies inside the other
      (a piece's GEMM inside its compute span, every piece inside its operator call);
    - with ``require_pieces``, every rank has compute spans and spans of its pieces'
      arrival (wait, read or transfer).
    """
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[e.get("pid")] = e.get("args", {}).get("name")
    want = {r: f"rank {r}" for r in range(world_size)}
    if names != want:
        raise TraceError(f"process tracks {names} are not one per rank {want}")
    xs = spans(events)
    if not xs:
        raise TraceError("no spans (\"ph\": \"X\") in the trace")
    per_track: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    per_rank_names: dict[int, set[str]] = defaultdict(set)
    for e in xs:
        for key, kind in (("name", str), ("cat", str), ("ts", (int, float)),
                          ("dur", (int, float)), ("pid", int), ("tid", int)):
            if not isinstance(e.get(key), kind):
                raise TraceError(f"span without a valid {key!r}: {e}")
        if e["dur"] < 0:
            raise TraceError(f"span with negative duration: {e}")
        if e["pid"] not in want:
            raise TraceError(f"span on pid {e['pid']}, not a rank of {world_size}: {e}")
        per_track[(e["pid"], e["tid"])].append(e)
        counts[e["name"]] += 1
        per_rank_names[e["pid"]].add(e["name"])
    for track, items in per_track.items():
        _check_nesting(track, items)
    if require_pieces:
        for r in range(world_size):
            have = per_rank_names[r]
            if "compute" not in have:
                raise TraceError(f"rank {r} has no compute spans (pieces)")
            if not have.intersection(PIECE_ARRIVAL):
                raise TraceError(f"rank {r} has no {'/'.join(PIECE_ARRIVAL)} spans (pieces' "
                                 "arrival)")
    return {"spans": dict(counts), "tracks": sorted(per_track),
            "start_us": min(e["ts"] for e in xs), "end_us": max(e["end"] for e in xs)}


def _check_nesting(track: tuple[int, int], items: list[dict[str, Any]]) -> None:
    # items are sorted by start, longest first: a stack of open spans must always contain
    # the next one, or end before it starts.
    stack: list[dict[str, Any]] = []
    for e in items:
        while stack and stack[-1]["end"] <= e["ts"]:
            stack.pop()
        if stack and e["end"] > stack[-1]["end"]:
            o = stack[-1]
            raise TraceError(
                f"rank {track[0]} thread {track[1]}: span {e['name']!r} "
                f"[{e['ts']:.3f}, {e['end']:.3f}] overlaps {o['name']!r} "
                f"[{o['ts']:.3f}, {o['end']:.3f}] without lying inside it")
        stack.append(e)


def window(events: Sequence[dict[str, Any]], op: Optional[str] = None,
           calls: int = 1) -> list[dict[str, Any]]:
    """Every rank's spans during its last ``calls`` operator calls (category "op", name
    ``op`` if given): what one picture can show. Ranks make the same calls in the same
    order, so the i-th call of each rank is the same collective call."""
    xs = spans(events)
    out = []
    for pid in sorted({e["pid"] for e in xs}):
        ops = sorted((e for e in xs if e["pid"] == pid and e["cat"] == "op"
                      and (op is None or e["name"] == op)), key=lambda e: e["ts"])
        if not ops:
            raise TraceError(f"no operator call{f' of {op}' if op else ''} on rank {pid}")
        lo, hi = ops[-min(calls, len(ops))]["ts"], ops[-1]["end"]
        out += [e for e in xs if e["pid"] == pid and e["ts"] >= lo and e["end"] <= hi]
    return out
