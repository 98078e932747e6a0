"""RolloutGraph: links a session's model calls into trees of token streams.

A turn's parent is the turn whose prompt+completion ids are the longest exact prefix of its
prompt; nothing else (request ids, timestamps, headers, `retry_of`) is consulted.

How it stays linear:
- Lookup. Polynomial prefix hashes of the new prompt (forward powers, so the hash of `x[:n]`
  is comparable with any stored sequence of length n) are computed once in O(L) with numpy.
  Every node's full-stream hash is indexed under (length, hash); a 32-bit filter per length
  yields, in one vectorised pass, the lengths <= L whose filter admits the prompt's prefix hash.
  They are tried longest first and each hash hit is verified token by token, so a hash
  collision can never pick a wrong parent.
- Storage. Tokens live in *runs*: append-only int32 buffers. A child of a run's last node is
  appended to that run, so a chain of turns is one contiguous buffer and each prompt is stored as
  its delta from the parent. A fork starts a new run whose base is (parent's run, parent's end).
  A retry (same parent, identical prompt) of a run's last node reuses that prompt in place: the
  superseded completion moves to a small side run. Verifying a candidate therefore costs one
  numpy comparison per run on its path, not one per turn.
- Messages. A turn keeps only the request messages its parent's request did not carry
  (`messages_inherited` + delta); `messages(i)` rebuilds the list on demand.
- Tool manifests. Every call of an agent usually repeats the same manifest: the graph keeps one
  object per distinct manifest (keyed by a digest of its exact JSON, key order included, since a
  template renders that order) in `tool_manifests()`; a turn refers to its entry.

Discarded turns: a turn superseded by a later call with the identical (non-empty) prompt is
discarded with its descendants, and so is any later turn attached under a discarded turn.

Drift (retokenisation): a new turn is flagged when its prompt contains the whole prompt of an
earlier live turn T (one that could have been its parent or sibling: a child of the same parent,
or another root) but diverges inside T's *sampled* completion, after at least
`DRIFT_MIN_TOKENS` shared tokens. That is the signature of a harness re-rendering sampled tokens
differently (whitespace in tool calls, stripped reasoning). Divergence inside a prompt region is
not drift: compaction roots and subagents legitimately share the system prompt only.
"""

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from capture.turns import Turn
from capture.types import Role

DRIFT_MIN_TOKENS = 32

_MOD = 2_147_483_647  # 2**31 - 1: (id mod M) * power < 2**62 and a cumsum of them fits int64
_BASE = 1_000_003
_EMPTY_IDS = np.zeros(0, dtype=np.int32)
_META_FIELDS = tuple(
    f.name
    for f in fields(Turn)
    if f.name not in ("prompt_ids", "completion_ids", "completion_logprobs", "messages")
)
_MESSAGE_CACHE = 32  # recent full message lists kept (a chain's parent is almost always recent)


@dataclass(frozen=True)
class Drift:
    """Where a turn's prompt stopped matching an earlier turn's sampled tokens."""

    turn: int  # the earlier turn whose completion was not re-sent as sampled
    index: int  # first differing token position (in both streams)
    token: int  # the new prompt's id at `index`
    expected: int  # the earlier turn's id at `index`


@dataclass(frozen=True)
class Node:
    """A snapshot of one graph node. `meta` holds every Turn field except ids and messages
    (use `RolloutGraph.turn(i)` for the full Turn)."""

    index: int
    parent: int | None
    root: int
    depth: int
    children: tuple[int, ...]
    discarded: bool
    role: Role
    demoted: bool
    attached_to_discarded: bool  # arrived under a turn a retry had already superseded
    drift: Drift | None
    prompt_start: int  # = parent's full length: where this turn's prompt delta begins
    prompt_len: int
    completion_len: int
    messages_inherited: int
    meta: dict[str, Any]


@dataclass
class Sequence:
    """One root→leaf token stream. `logprobs` is NaN where `loss_mask` is 0."""

    node_ids: list[int]
    token_ids: np.ndarray  # int32
    loss_mask: np.ndarray  # uint8
    logprobs: np.ndarray  # float32


class _Run:
    """Append-only int32 buffer holding stream positions [offset, offset + size)."""

    __slots__ = ("base", "buf", "offset", "size")

    def __init__(self, base: "_Run | None", offset: int) -> None:
        self.base = base  # positions < offset are read from base
        self.offset = offset
        self.buf = _EMPTY_IDS
        self.size = 0

    @property
    def end(self) -> int:
        return self.offset + self.size

    def append(self, ids: np.ndarray) -> None:
        need = self.size + len(ids)
        if need > len(self.buf):
            grown = np.empty(max(need, self.size + self.size // 4 + 64), dtype=np.int32)
            grown[: self.size] = self.buf[: self.size]
            self.buf = grown
        self.buf[self.size : need] = ids
        self.size = need


def _pieces(run: _Run | None, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (position, view) pieces of stream[start:stop], last piece first."""
    while run is not None and stop > start:
        if stop > run.offset:
            lo = max(start, run.offset)
            yield lo, run.buf[lo - run.offset : stop - run.offset]
            stop = lo
        run = run.base


def _read(run: _Run | None, start: int, stop: int) -> np.ndarray:
    parts = [view for _, view in _pieces(run, start, stop)]
    if not parts:
        return _EMPTY_IDS.copy()
    return np.concatenate(parts[::-1]) if len(parts) > 1 else parts[0].copy()


def _matches(run: _Run | None, start: int, stop: int, ids: np.ndarray) -> bool:
    """stream[start:stop] == ids[start:stop] (caller guarantees len(ids) >= stop)."""
    return all(
        np.array_equal(view, ids[pos : pos + len(view)]) for pos, view in _pieces(run, start, stop)
    )


def _common(run: _Run | None, start: int, stop: int, ids: np.ndarray) -> int:
    """Length of the common prefix of stream[:stop] and ids, given that [:start] is common."""
    stop = min(stop, len(ids))
    for pos, view in reversed(list(_pieces(run, start, stop))):
        diff = np.flatnonzero(view != ids[pos : pos + len(view)])
        if len(diff):
            return pos + int(diff[0])
    return stop


def _key(length: int, hash_: int) -> int:
    return length << 31 | hash_  # one int, not a tuple: index entries stay small


def _bucket(index: dict[int, int | list[int]], key: int) -> list[int]:
    found = index.get(key)
    if found is None:
        return []
    return found if isinstance(found, list) else [found]


def _insert(index: dict[int, int | list[int]], key: int, value: int) -> None:
    found = index.get(key)
    if found is None:
        index[key] = value
    elif isinstance(found, list):
        found.append(value)
    else:
        index[key] = [found, value]


@dataclass(slots=True)
class _Node:
    parent: int
    root: int
    depth: int
    prompt_start: int
    prompt_len: int
    prompt_hash: int
    full_len: int
    run: _Run | None
    logprobs: np.ndarray | None
    messages_inherited: int
    messages_delta: list[dict[str, Any]]
    meta: Turn  # ids and messages stripped: never exposed as a Turn
    tools: int  # index in the graph's tool manifests; -1: none
    children: list[int]
    live_children: int = 0
    discarded: bool = False
    demoted: bool = False
    attached_to_discarded: bool = False
    drift: Drift | None = None


class RolloutGraph:
    """The turns of one session, linked by exact token prefixes. Not thread-safe by itself."""

    def __init__(self) -> None:
        self._nodes: list[_Node] = []
        # key(length, hash) -> node index, or a list of them (rare: identical streams).
        self._full_index: dict[int, int | list[int]] = {}
        self._prompt_index: dict[int, int | list[int]] = {}
        # Per length, a 32-bit filter of the full-stream hashes indexed at that length (bit
        # hash % 32): nonzero = the length is present; a clear bit rules a candidate out.
        self._filter = np.zeros(256, dtype=np.uint32)
        self._powers = np.ones(1, dtype=np.int32)  # B^j mod M < 2**31: int32 halves the table
        self._message_cache: dict[int, list[dict[str, Any]]] = {}
        self._manifests: list[list[dict[str, Any]]] = []
        self._manifest_ids: dict[bytes, int] = {}
        self._root_size: dict[int, int] = {}
        self._tool_roots: set[int] = set()
        self._largest_root = -1
        self._roots: list[int] = []
        self._live_roots = 0
        self._forks = 0
        self._discarded = 0
        self._prompt_tokens = 0
        self._completion_tokens = 0
        self._unique_tokens = 0

    # ---- ingest -------------------------------------------------------------------------

    def add(self, turn: Turn) -> int:
        """Link `turn` into the graph; returns its node index (arrival order, 0-based)."""
        prompt = np.asarray(turn.prompt_ids, dtype=np.int32)
        completion = np.asarray(turn.completion_ids, dtype=np.int32)
        index = len(self._nodes)
        plen = len(prompt)
        hashes = self._prefix_hashes(prompt)
        same = self._identical_prompts(prompt, hashes) if plen else []
        superseded = [i for i in same if not self._nodes[i].discarded]
        # An identical-prompt turn that sampled nothing has the new prompt as its full stream;
        # it is the new turn's sibling, never its parent.
        parent = self._find_parent(prompt, hashes, set(same))
        pnode = self._nodes[parent] if parent >= 0 else None
        start = pnode.full_len if pnode else 0
        run = self._store(pnode, parent, prompt[start:], completion, superseded)
        inherited, delta, messages = self._message_delta(parent, turn.messages)
        tools = self._intern_tools(turn.tools)
        node = _Node(
            parent=parent,
            root=pnode.root if pnode else index,
            depth=pnode.depth + 1 if pnode else 0,
            prompt_start=start,
            prompt_len=plen,
            prompt_hash=int(hashes[plen]),
            full_len=plen + len(completion),
            run=run,
            # Owned copy: the caller's array may be a view into a larger response buffer.
            logprobs=None
            if turn.completion_logprobs is None
            else np.array(turn.completion_logprobs, dtype=np.float32),
            messages_inherited=inherited,
            messages_delta=delta,
            meta=replace(
                turn,
                prompt_ids=_EMPTY_IDS,
                completion_ids=_EMPTY_IDS,
                completion_logprobs=None,
                messages=[],
                tools=self._manifests[tools] if tools >= 0 else None,
                **self._shared_settings(turn),
            ),
            tools=tools,
            children=[],
            demoted=bool(turn.aux),
        )
        node.drift = self._drift(pnode, prompt, hashes)
        self._nodes.append(node)
        self._link(index, node, pnode, turn.has_tools)
        for old in superseded:
            self._discard(old)
        self._index(index, node, completion)
        self._remember_messages(index, messages)
        self._prompt_tokens += plen
        self._completion_tokens += len(completion)
        self._unique_tokens += plen - start + len(completion)
        return index

    def _intern_tools(self, tools: list[dict[str, Any]] | None) -> int:
        """The index of this manifest in `tool_manifests()` (added when new); -1 for none."""
        if not tools:
            return -1
        exact = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
        digest = hashlib.blake2b(exact.encode(), digest_size=16).digest()
        found = self._manifest_ids.get(digest)
        if found is None:
            found = self._manifest_ids[digest] = len(self._manifests)
            self._manifests.append(tools)
        return found

    def tool_manifests(self) -> list[list[dict[str, Any]]]:
        """Every distinct tool manifest, in order of first use (turns refer to them by index)."""
        return list(self._manifests)

    def tools_index(self, index: int) -> int | None:
        """The index of turn `index`'s manifest in `tool_manifests()`; None when it had none."""
        found = self._nodes[index].tools
        return found if found >= 0 else None

    def _shared_settings(self, turn: Turn) -> dict[str, Any]:
        """Sampling dicts equal to the previous turn's reuse its objects (they rarely change)."""
        if not self._nodes:
            return {}
        last = self._nodes[-1].meta
        return {
            name: getattr(last, name)
            for name in ("sampling_requested", "sampling_applied")
            if getattr(turn, name) == getattr(last, name)
        }

    def demote(self, index: int) -> None:
        """Explicit override (e.g. from the ATIF trajectory): the turn is auxiliary, never loss."""
        self._nodes[index].demoted = True

    # ---- hashing and lookup -------------------------------------------------------------

    def _power_table(self, n: int) -> np.ndarray:
        while len(self._powers) < n:
            k = len(self._powers)
            more = min(k, max(n, k + k // 4) - k)  # B^(k+j) = B^j * B^k, for j < k
            step = pow(_BASE, k, _MOD)
            tail = self._powers[:more].astype(np.int64) * step % _MOD
            self._powers = np.concatenate([self._powers, tail.astype(np.int32)])
        return self._powers[:n]

    def _prefix_hashes(self, ids: np.ndarray, start: int = 0) -> np.ndarray:
        """h[n] = hash(ids[:n]) - ids are placed at positions start, start+1, ..."""
        powers = self._power_table(start + len(ids))[start:]
        terms = (ids.astype(np.int64) % _MOD) * powers % _MOD
        out = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(terms, out=out[1:])
        return out % _MOD

    def _find_parent(self, prompt: np.ndarray, hashes: np.ndarray, exclude: set[int]) -> int:
        limit = min(len(prompt) + 1, len(self._filter))
        lengths = np.flatnonzero(self._filter[:limit])
        bits = (hashes[lengths] & 31).astype(np.uint32)
        lengths = lengths[(self._filter[lengths] >> bits) & np.uint32(1) == 1]
        for n in lengths[::-1]:
            bucket = _bucket(self._full_index, _key(int(n), int(hashes[n])))
            if not bucket:
                continue
            # Identical streams (a retry that resampled the same answer): prefer a live node,
            # then the latest.
            best = -1
            for i in bucket:
                node = self._nodes[i]
                if (
                    i not in exclude
                    and _matches(node.run, 0, node.full_len, prompt)
                    and (best < 0 or self._nodes[best].discarded or not node.discarded)
                ):
                    best = i
            if best >= 0:
                return best
        return -1

    def _identical_prompts(self, prompt: np.ndarray, hashes: np.ndarray) -> list[int]:
        """Turns whose prompt equals `prompt` exactly (the live ones are superseded)."""
        bucket = _bucket(self._prompt_index, _key(len(prompt), int(hashes[len(prompt)])))
        return [i for i in bucket if _matches(self._nodes[i].run, 0, len(prompt), prompt)]

    def _index(self, index: int, node: _Node, completion: np.ndarray) -> None:
        prompt_hash = node.prompt_hash
        if node.prompt_len:
            _insert(self._prompt_index, _key(node.prompt_len, prompt_hash), index)
        if not node.full_len:
            return  # an empty stream is nobody's parent
        tail = self._prefix_hashes(completion, node.prompt_len)[-1]
        full_hash = (prompt_hash + int(tail)) % _MOD
        _insert(self._full_index, _key(node.full_len, full_hash), index)
        if node.full_len >= len(self._filter):
            size = max(node.full_len + 1, len(self._filter) + len(self._filter) // 4)
            grown = np.zeros(size, dtype=np.uint32)
            grown[: len(self._filter)] = self._filter
            self._filter = grown
        self._filter[node.full_len] |= np.uint32(1) << np.uint32(full_hash & 31)

    # ---- storage ------------------------------------------------------------------------

    def _store(
        self,
        pnode: _Node | None,
        parent: int,
        delta: np.ndarray,
        completion: np.ndarray,
        superseded: list[int],
    ) -> _Run:
        """Place delta + completion in a run; returns the run holding the completion."""
        for old in superseded:
            onode = self._nodes[old]
            run = onode.run
            if (
                onode.parent == parent
                and run is not None
                and run.end == onode.full_len
                and not onode.children
                and onode.prompt_len >= run.offset
            ):
                # Retry of a run's last turn: share its prompt in place, move its completion out.
                side = _Run(run, onode.prompt_len)
                side.append(run.buf[onode.prompt_len - run.offset : onode.full_len - run.offset])
                onode.run = side
                run.size = onode.prompt_len - run.offset
                run.append(completion)
                return run
        if pnode is not None and pnode.run is not None and pnode.run.end == pnode.full_len:
            run = pnode.run
        else:
            start = pnode.full_len if pnode else 0
            run = _Run(pnode.run if pnode else None, start)
        run.append(delta)
        run.append(completion)
        return run

    # ---- structure ----------------------------------------------------------------------

    def _link(self, index: int, node: _Node, pnode: _Node | None, has_tools: bool) -> None:
        if pnode is None:
            self._live_roots += 1
            self._roots.append(index)
        elif pnode.discarded:
            node.discarded = node.attached_to_discarded = True
            self._discarded += 1
        else:
            pnode.live_children += 1
            if pnode.live_children == 2:
                self._forks += 1
        if pnode is not None:
            pnode.children.append(index)
        size = self._root_size.get(node.root, 0) + 1
        self._root_size[node.root] = size
        # The largest root; a tie goes to the earlier root, whatever the interleaving.
        top = self._largest_root
        if top < 0 or (size, -node.root) > (self._root_size[top], -top):
            self._largest_root = node.root
        if has_tools:
            self._tool_roots.add(node.root)

    def _discard(self, index: int) -> None:
        node = self._nodes[index]
        if node.parent < 0:
            self._live_roots -= 1
        else:
            pnode = self._nodes[node.parent]
            pnode.live_children -= 1
            if pnode.live_children == 1 and not pnode.discarded:
                self._forks -= 1
        stack = [index]
        while stack:
            n = self._nodes[stack.pop()]
            if n.discarded:
                continue
            n.discarded = True
            self._discarded += 1
            if n.live_children >= 2:
                self._forks -= 1
            stack.extend(n.children)

    def _drift(self, pnode: _Node | None, prompt: np.ndarray, hashes: np.ndarray) -> Drift | None:
        candidates = pnode.children if pnode else self._roots
        if pnode is not None and pnode.full_len == pnode.prompt_len:
            # A parent that sampled nothing shares its prompt with its retries: they are
            # candidates too (their prompt is exactly the parent's stream).
            same = _bucket(self._prompt_index, _key(pnode.prompt_len, pnode.prompt_hash))
            candidates = [*candidates, *same]
        start = pnode.full_len if pnode else 0
        best: Drift | None = None
        for c in candidates:
            node = self._nodes[c]
            # Drift needs the whole earlier prompt re-sent: its hash rules most candidates out.
            if (
                node.discarded
                or len(prompt) <= node.prompt_len
                or hashes[node.prompt_len] != node.prompt_hash
            ):
                continue
            k = _common(node.run, start, node.full_len, prompt)
            if (
                node.prompt_len <= k < min(node.full_len, len(prompt))
                and k >= DRIFT_MIN_TOKENS
                and (best is None or k > best.index)
            ):
                expected = int(_read(node.run, k, k + 1)[0])
                best = Drift(turn=c, index=k, token=int(prompt[k]), expected=expected)
        return best

    # ---- messages -----------------------------------------------------------------------

    def _message_delta(
        self, parent: int, messages: list[dict[str, Any]]
    ) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
        """(inherited count, new messages, full list built from the graph's own dicts).

        The full list never holds the caller's inherited dicts: those are copies (each request
        is parsed anew) that the graph must not keep alive."""
        known = self.messages(parent) if parent >= 0 else []
        n = len(known)
        if messages[:n] != known:
            n = 0
            while n < min(len(known), len(messages)) and messages[n] == known[n]:
                n += 1
        delta = list(messages[n:])
        return n, delta, known[:n] + delta

    def _remember_messages(self, index: int, messages: list[dict[str, Any]]) -> None:
        self._message_cache[index] = messages
        while len(self._message_cache) > _MESSAGE_CACHE:
            del self._message_cache[next(iter(self._message_cache))]

    def messages(self, index: int) -> list[dict[str, Any]]:
        """The full request messages of a turn, rebuilt from the per-turn deltas."""
        cached = self._message_cache.get(index)
        if cached is not None:
            return list(cached)
        parts: list[list[dict[str, Any]]] = []
        need: int | None = None  # how many of the current node's messages are still needed
        i = index
        while i >= 0 and need != 0:
            node = self._nodes[i]
            total = node.messages_inherited + len(node.messages_delta)
            need = total if need is None else min(need, total)
            if need > node.messages_inherited:
                parts.append(node.messages_delta[: need - node.messages_inherited])
                need = node.messages_inherited
            i = node.parent
        return [m for part in reversed(parts) for m in part]

    # ---- reading ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._nodes)

    def prompt_ids(self, index: int) -> np.ndarray:
        node = self._nodes[index]
        return _read(node.run, 0, node.prompt_len)

    def prompt_delta(self, index: int) -> np.ndarray:
        """The prompt tokens this turn added after its parent's prompt+completion."""
        node = self._nodes[index]
        return _read(node.run, node.prompt_start, node.prompt_len)

    def completion_ids(self, index: int) -> np.ndarray:
        node = self._nodes[index]
        return _read(node.run, node.prompt_len, node.full_len)

    def completion_logprobs(self, index: int) -> np.ndarray | None:
        logprobs = self._nodes[index].logprobs
        return None if logprobs is None else logprobs.copy()

    def token_ids(self, index: int) -> np.ndarray:
        """Prompt + completion of a turn: the stream its children extend."""
        node = self._nodes[index]
        return _read(node.run, 0, node.full_len)

    def turn(self, index: int) -> Turn:
        """The full Turn as it was added (ids and messages rebuilt from deltas)."""
        node = self._nodes[index]
        return replace(
            node.meta,
            prompt_ids=self.prompt_ids(index),
            completion_ids=self.completion_ids(index),
            completion_logprobs=self.completion_logprobs(index),
            messages=self.messages(index),
        )

    def role(self, index: int) -> Role:
        node = self._nodes[index]
        if node.demoted:
            return "aux"
        if self._tool_roots:
            return "agent" if node.root in self._tool_roots else "aux"
        return "agent" if node.root == self._largest_root else "aux"

    def node(self, index: int) -> Node:
        n = self._nodes[index]
        return Node(
            index=index,
            parent=n.parent if n.parent >= 0 else None,
            root=n.root,
            depth=n.depth,
            children=tuple(n.children),
            discarded=n.discarded,
            role=self.role(index),
            demoted=n.demoted,
            attached_to_discarded=n.attached_to_discarded,
            drift=n.drift,
            prompt_start=n.prompt_start,
            prompt_len=n.prompt_len,
            completion_len=n.full_len - n.prompt_len,
            messages_inherited=n.messages_inherited,
            meta={name: getattr(n.meta, name) for name in _META_FIELDS},
        )

    @property
    def roots(self) -> list[int]:
        """Every root in arrival order (discarded ones included; see `node(i).discarded`)."""
        return list(self._roots)

    @property
    def forks(self) -> list[int]:
        """Live turns with two or more live children."""
        return [i for i, n in enumerate(self._nodes) if not n.discarded and n.live_children >= 2]

    def leaves(self) -> list[int]:
        """Live turns without live children: each ends one sequence."""
        return [i for i, n in enumerate(self._nodes) if not n.discarded and n.live_children == 0]

    def path(self, index: int) -> list[int]:
        """Node ids from the root down to `index`."""
        out = []
        while index >= 0:
            out.append(index)
            index = self._nodes[index].parent
        return out[::-1]

    def sequence(self, leaf: int) -> Sequence:
        """The root→leaf stream: mask 1 only on sampled tokens of agent turns."""
        node = self._nodes[leaf]
        ids = _read(node.run, 0, node.full_len)
        mask = np.zeros(len(ids), dtype=np.uint8)
        logprobs = np.full(len(ids), np.nan, dtype=np.float32)
        path = self.path(leaf)
        for i in path:
            n = self._nodes[i]
            if self.role(i) != "agent":
                continue
            mask[n.prompt_len : n.full_len] = 1
            if n.logprobs is not None:
                lp = n.logprobs[: n.full_len - n.prompt_len]
                logprobs[n.prompt_len : n.prompt_len + len(lp)] = lp
        return Sequence(node_ids=path, token_ids=ids, loss_mask=mask, logprobs=logprobs)

    def sequences(self) -> list[Sequence]:
        return [self.sequence(leaf) for leaf in self.leaves()]

    def counters(self) -> dict[str, int]:
        return {
            "turns": len(self._nodes),
            "roots": self._live_roots,
            "forks": self._forks,
            "discarded": self._discarded,
            "prompt_tokens": self._prompt_tokens,
            "completion_tokens": self._completion_tokens,
            "unique_tokens": self._unique_tokens,
        }
