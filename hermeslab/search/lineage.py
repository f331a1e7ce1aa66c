"""Map every session to the root of its lineage (the chain of ``parent_session_id`` links).

Compression rotations, branches and resumes create child sessions, so one
conversation is spread over a chain of them; a search hit is reported once per
conversation, under its root. The walk upward stops at a session without a
parent and at a parent the index does not know. Links can form a cycle (a
hand-edited lab, a buggy importer); every session on a cycle, and everything
below it, then shares one root: the cycle member with the smallest id, so the
answer does not depend on where the walk started.
"""

from __future__ import annotations

from typing import Mapping, Sequence


def lineage_roots(parents: Sequence[int]) -> list[int]:
    """``roots[i]`` for sessions ``0..n-1`` where ``parents[i]`` is the parent's index or -1.

    Sessions are numbered by the caller; on a cycle the smallest index wins. Linear time.
    """
    n = len(parents)
    roots = [-1] * n
    for start in range(n):
        if roots[start] >= 0:
            continue
        path: list[int] = []
        on_path: dict[int, int] = {}
        node = start
        while True:
            if roots[node] >= 0:
                root = roots[node]
                break
            if node in on_path:
                cycle = path[on_path[node]:]
                root = min(cycle)
                break
            on_path[node] = len(path)
            path.append(node)
            parent = parents[node]
            if not 0 <= parent < n:
                root = node
                break
            node = parent
        for member in path:
            roots[member] = root
    return roots


def roots_by_id(parents: Mapping[str, str | None]) -> dict[str, str]:
    """The lineage root of every session id in ``parents`` (id → parent id or None)."""
    ids = sorted(parents)
    index = {session_id: position for position, session_id in enumerate(ids)}
    numbered = [index.get(parents[session_id] or "", -1) for session_id in ids]
    return {session_id: ids[root] for session_id, root in zip(ids, lineage_roots(numbered))}
