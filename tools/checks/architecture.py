#!/usr/bin/env python3
"""Architecture rules of docs/design.md, checked on the source tree (run from the repository root; CI runs it).

* No import cycle between top-level modules of src/ (doc comments and test modules not counted).
* No function over 150 lines.
* The writer lock is taken in one place: src/store/core/write.rs.
* Only src/storage/ names the redb crate (its backend, src/storage/redb/, and the dispatch beside it).
* Records, not tables: outside the port (src/storage/), only the record modules (src/store/records/) open a
  kind (`.table(`, `.open(KIND)`), name the kinds (`storage::tables`) or call a record codec (`encode`,
  `decode`, `vector_to_bytes`, `vector_from_bytes`, `postcard::`; sync's segment files, a wire format with
  its own header version, encode with postcard in src/sync/segment.rs).
* The record modules sit below the domain: src/store/records/ imports only the model, the storage port, the
  indexes and the error type (`crate::` anything else, `super::super`, fails); the types they keep live in
  src/model/ and src/index/.
* The runtime core sits below the services: nothing in src/store/core/ imports a service of the store
  (`crate::store::...` outside `core` and `records`, `super::super::...` outside `records`) or names
  `KnowledgeStore`; the services borrow the core, never the other way round.
* The backend mode is chosen once, at open: outside the runtime core (src/store/core/), the storage port
  (src/storage/), the configuration (src/config.rs) and the CLI that fills it (src/bin/), no code asks whether
  the database is shared (`.shared()`) or reads the index mode (`index_mode`).
* Records read what they write: no key-range scan (`.range(`) in src/store/ outside the record modules; a
  service asks a record module's reader (`thread::messages_between`, `entity::relates_of`, `in_space`, ...).
  Nor does it unpack a stored key or value (`.value()`): the readers hand out typed records, owned values or
  borrowed parts in a closure (`Records::each`, `map_each`, `storage::txn::map_rows`).
* `KnowledgeStore` is a handle that lends its services: it is implemented only in src/store/mod.rs (`impl
  KnowledgeStore`, `impl ... for KnowledgeStore`), with at most 20 `pub fn` (open, config, storage and the
  service accessors); every other operation is a method of a service (`store.memories()`, ...).
* A file per job in the services: no file over 600 lines in src/store/ outside the runtime core and the record
  modules.
* No source file over 1,000 lines in src/ or bindings/ (tests included; a module's tests may sit in its own
  `tests.rs`, which the other rules do not read as code).
* Typed calls between our own layers: the agent tools (src/api/tools/) call the API layer's typed functions
  (`api::memories::get`, `api::search::search`, `api::fs::ls`, ...), never a route by method and path
  (`.invoke(`, `dispatch(`, `path_of(`).
* No store lock (`index`, `graph`, `chunks`, `chunk_index`, the database handle `inner`: parking_lot RwLocks)
  is taken again, directly or through a method, while a guard of it is held in a `let` binding: a second read
  behind a waiting writer deadlocks (parking_lot queues new readers behind a writer), as `health` did with
  `expiry_status` in stop 51's CI.

Prints each violation and exits 1 when there is any. Standard library only.
"""
import glob
import os
import re
import sys

SRC = "src"


def code_of(path):
    if os.path.basename(path) == "tests.rs":  # a module's tests, in a file of their own
        return ""
    text = open(path, encoding="utf-8").read()
    for marker in ("#[cfg(test)]\nmod tests", "#[cfg(test)]\npub(crate) mod tests"):
        text = text.split(marker)[0]
    return "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))


def files():
    return sorted(glob.glob(f"{SRC}/**/*.rs", recursive=True))


def cycles():
    mods = {p[:-3] if p.endswith(".rs") else p for p in os.listdir(SRC)} - {"lib", "bin"}
    deps = {m: set() for m in mods}
    for p in files():
        top = p[len(SRC) + 1 :].split("/")[0].removesuffix(".rs")
        if top not in mods:
            continue
        src = code_of(p)
        found = set(re.findall(r"crate::(\w+)", src))
        for grp in re.findall(r"use crate::\{([^;]*)\};", src, re.S):
            found |= set(re.findall(r"(?:^|[,{\s])(\w+)(?=::)", grp))
        deps[top] |= {m for m in found if m in mods and m != top}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in deps[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(f"import cycle between top-level modules: {' -> '.join(sorted(comp))}")

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return out


def without_literals(text):
    """`text` with its string literals (across lines too) and char literals emptied and its `//` comments cut:
    the braces left are code."""
    t = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    t = re.sub(r"'(\\.|[^'\\])'", "''", t)
    return re.sub(r"//[^\n]*", "", t)


def long_functions(limit=150):
    out = []
    fn = re.compile(r'\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern "C"\s+)?fn\s+(\w+)')
    for p in files():
        lines = open(p, encoding="utf-8").read().split("\n")
        for i, line in enumerate(lines):
            m = fn.match(line)
            if not m:
                continue
            depth, started, j = 0, False, i
            while j < len(lines):
                t = without_literals(lines[j])
                for ch in t:
                    if ch == "{":
                        depth, started = depth + 1, True
                    elif ch == "}":
                        depth -= 1
                if (started and depth <= 0) or (not started and t.rstrip().endswith(";")):
                    break
                j += 1
            if started and j - i + 1 > limit:
                out.append(f"{p}:{i + 1}: fn {m.group(7)} is {j - i + 1} lines (at most {limit})")
    return out


def writer_lock():
    sites = [
        f"{p}:{n}" for p in files() for n, l in enumerate(open(p, encoding="utf-8"), 1)
        if re.search(r"\.lock\.(lock|try_lock)\(\)|writer\.(lock|try_lock)\(\)", l)
    ]
    bad = [s for s in sites if not s.startswith(f"{SRC}/store/core/write.rs:")]
    return [f"the writer lock is taken outside src/store/core/write.rs: {s}" for s in bad] + (
        [] if sites else ["the writer lock is not taken in src/store/core/write.rs"]
    )


def redb_outside_storage():
    return [
        f"{p}:{n}: names redb outside src/storage/"
        for p in files() if not p.startswith(f"{SRC}/storage/")
        for n, l in enumerate(code_of(p).split("\n"), 1) if re.search(r"\bredb::", l)
    ]


def records_not_tables():
    rules = [
        (r"\.table\(", "opens a kind"),
        (r"storage::tables\b|\btables::[A-Z_]+", "names a kind"),
        (r"\b(?:codec|schema)::(?:encode|decode)\b|\bvector_(?:to|from)_bytes\b|\bpostcard::", "calls a record codec"),
    ]
    out = []
    for p in files():
        if p.startswith(f"{SRC}/storage/") or p.startswith(f"{SRC}/store/records/"):
            continue
        for n, l in enumerate(code_of(p).split("\n"), 1):
            for pat, what in rules:
                # Sync's segment files are a wire format with a header version of their own, not store records.
                if p == f"{SRC}/sync/segment.rs" and what == "calls a record codec":
                    continue
                if re.search(pat, l):
                    out.append(f"{p}:{n}: {what} outside the record modules (src/store/records/)")
    return out


def lines_matching(inside, pattern, message):
    """`path:line: message` for each code line (comments and test modules left out) of the files `inside`
    accepts that matches `pattern`."""
    return [
        f"{p}:{n}: {message}"
        for p in files() if inside(p)
        for n, l in enumerate(code_of(p).split("\n"), 1) if re.search(pattern, l)
    ]


def records_below_the_domain():
    """The record modules sit below the domain: they import the model, the storage port, the indexes and the
    error type, never the store's aggregates (`crate::store::...` outside `records`, or `super::super`)."""
    return lines_matching(
        lambda p: p.startswith(f"{SRC}/store/records/"),
        r"\bcrate::(?!model\b|storage\b|index\b|error\b|store::records\b)\w+|\bsuper::super\b",
        "a record module imports the store's domain (records import only model, storage, index)",
    )


def core_below_the_services():
    """The runtime core (src/store/core/) imports the records, the storage port, the indexes, the model and the
    crate's leaves, never a service of the store nor the store itself."""
    return lines_matching(
        lambda p: p.startswith(f"{SRC}/store/core/"),
        r"\bcrate::store::(?!records\b|core\b)\w+|\bsuper::super::(?!records\b)\w+|\bKnowledgeStore\b",
        "the runtime core imports a service or the store (the core sits below them)",
    )


def backend_mode_in_the_core():
    """`.shared()` and `index_mode` are read only where the mode is chosen (the core's `Commits` and `IndexReads`,
    store/core/modes.rs) or defined (the port, the configuration, the CLI)."""
    allowed = (f"{SRC}/store/core/", f"{SRC}/storage/", f"{SRC}/config.rs", f"{SRC}/bin/")
    return lines_matching(
        lambda p: not p.startswith(allowed),
        r"\.shared\(\)|\bindex_mode\b",
        "asks the backend mode outside the core (use Core's commits and reads)",
    )


def ranges_in_records():
    """Key ranges encode a kind's key layout: only the record modules (and the port) scan them."""
    return lines_matching(
        lambda p: p.startswith(f"{SRC}/store/") and not p.startswith(f"{SRC}/store/records/"),
        r"\.range\(",
        "scans a key range outside the record modules (add a reader to src/store/records/)",
    )


def values_in_records():
    """Stored keys and values are unpacked (`.value()`) only by the record modules and the port."""
    return lines_matching(
        lambda p: p.startswith(f"{SRC}/store/") and not p.startswith(f"{SRC}/store/records/"),
        r"\.value\(\)",
        "unpacks a stored key or value outside the record modules (add a reader to src/store/records/)",
    )


def typed_tool_calls():
    """The agent tools call typed functions of the API layer, not routes by path string."""
    return lines_matching(
        lambda p: p.startswith(f"{SRC}/api/tools/"),
        r"\.invoke\(|\bdispatch\(|\bpath_of\(",
        "an agent tool calls a route by path (call the API module's typed function)",
    )


def function_bodies():
    """(path, name, body) of every fn outside test modules; bodies by brace matching on code without literals."""
    out = []
    for p in files():
        src = without_literals(code_of(p))
        for m in re.finditer(r"\bfn\s+(\w+)[^{;]*\{", src):
            i, depth = m.end(), 1
            while depth and i < len(src):
                depth += (src[i] == "{") - (src[i] == "}")
                i += 1
            out.append((p, m.group(1), src[m.end():i]))
    return out


def relocked_store_locks():
    # `self.core.index` in a service, `self.index` in the core.
    lock = r"self\.(?:core\.)?{}\.(?:read|write)\(\)"
    bodies = function_bodies()
    out = []
    for name in ("index", "graph", "chunks", "chunk_index", "inner"):
        # Methods that take the lock, directly or through other methods of the store (by name: a
        # conservative closure).
        takes = {f for _, f, b in bodies if re.search(lock.format(name), b)}
        grew = True
        while grew:
            grew = False
            for _, f, b in bodies:
                if f not in takes and any(re.search(rf"self\.(?:core\.)?{t}\(", b) for t in takes):
                    takes.add(f)
                    grew = True
        held = re.compile(r"let\s+(?:mut\s+)?(\w+)\s*=\s*" + lock.format(name) + ";")
        for p, f, b in bodies:
            for m in held.finditer(b):
                # The guard lives to the end of its block or to drop(guard).
                rest, depth, end = b[m.end():], 0, None
                for i, ch in enumerate(rest):
                    depth += (ch == "{") - (ch == "}")
                    if depth < 0:
                        end = i
                        break
                rest = rest[:end]
                dropped = re.search(rf"drop\({m.group(1)}\)", rest)
                rest = rest[: dropped.start()] if dropped else rest
                again = re.search(lock.format(name), rest)
                calls = [t for t in sorted(takes) if re.search(rf"self\.(?:core\.)?{t}\(", rest)]
                if again or calls:
                    what = "itself" if again else f"self.{calls[0]}(), which takes it"
                    out.append(f"{p}: fn {f} holds the {name} lock ({m.group(1)}) and takes it again: {what}")
    return out


def store_is_a_handle(max_pub_fns=20):
    """`impl KnowledgeStore` only in src/store/mod.rs, with at most `max_pub_fns` `pub fn`."""
    home = f"{SRC}/store/mod.rs"
    out = lines_matching(
        lambda p: p != home,
        r"^\s*impl\b[^{]*\bKnowledgeStore\s*\{",
        "implements KnowledgeStore outside src/store/mod.rs (add the method to a service)",
    )
    code = code_of(home)
    pub_fns = 0
    for m in re.finditer(r"^impl KnowledgeStore \{\n(.*?)^\}", code, re.S | re.M):
        pub_fns += len(re.findall(r"^    pub fn ", m.group(1), re.M))
    if pub_fns > max_pub_fns:
        out.append(f"{home}: KnowledgeStore has {pub_fns} pub fn, over {max_pub_fns} (add the method to a service)")
    return out


def long_service_files(limit=600):
    """A file per job in the services: no file over `limit` lines in src/store/ outside core/ and records/."""
    out = []
    for p in files():
        if not p.startswith(f"{SRC}/store/") or p.startswith((f"{SRC}/store/core/", f"{SRC}/store/records/")):
            continue
        n = sum(1 for _ in open(p, encoding="utf-8"))
        if n > limit:
            out.append(f"{p}: {n} lines, over {limit} in a service: split it by job (a child module per part)")
    return out


def long_files(limit=1000):
    """No source file over `limit` lines (tests included) in src/ or bindings/: a file per job."""
    out = []
    for p in sorted(set(files()) | set(glob.glob("bindings/**/*.rs", recursive=True))):
        n = sum(1 for _ in open(p, encoding="utf-8"))
        if n > limit:
            out.append(f"{p}: {n} lines, over {limit}: split it by job (a child module per part, tests in tests.rs)")
    return out


def main():
    problems = (
        cycles() + long_functions() + writer_lock() + redb_outside_storage() + records_not_tables()
        + records_below_the_domain()
        + core_below_the_services()
        + backend_mode_in_the_core()
        + ranges_in_records()
        + values_in_records()
        + relocked_store_locks()
        + store_is_a_handle()
        + long_service_files()
        + long_files()
        + typed_tool_calls()
    )
    for p in problems:
        print(p)
    print(f"architecture: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
