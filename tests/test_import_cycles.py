"""No import loops among the project's modules (textrecords, bert_data, w2v_data, mt_data, scripts).

The graph is built from the source with `ast`: an edge A -> B for every
`import B` / `from B import x` / `from . import x` in A that names one of
these modules (`from P import M` names the submodule P.M when there is one),
at module level and inside functions alike: a function-level import is
still a loop at run time, only a later one. Left out, each for a reason:
  * imports under `if __name__ == "__main__":`, which run only when the file
    is the program itself (as module `__main__`, not under its own name);
  * the implicit import of a parent package's `__init__` (Python's own
    order, the same for every submodule).

Cycles that remain in code other work is still moving are listed in KNOWN,
each with what would remove it: a new cycle fails, and so does a listed one
that is gone (take it off the list).
"""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("textrecords", "bert_data", "w2v_data", "mt_data", "scripts")

# Remaining cycles (as sorted module lists) and what removes each.
KNOWN = {}


def _modules() -> dict:
  """module name -> source path, for every .py file of PACKAGES."""
  out = {}
  for pkg in PACKAGES:
    for folder, dirs, files in os.walk(os.path.join(ROOT, pkg)):
      dirs[:] = [d for d in dirs if d != "__pycache__"]
      for f in files:
        if f.endswith(".py"):
          name = os.path.relpath(os.path.join(folder, f), ROOT)[:-3].replace(os.sep, ".")
          out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = \
              os.path.join(folder, f)
  return out


def _is_main_guard(node) -> bool:
  test = node.test if isinstance(node, ast.If) else None
  return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
          and test.left.id == "__name__" and len(test.comparators) == 1
          and getattr(test.comparators[0], "value", None) == "__main__")


def _imports(tree, package: str):
  """The names every import of `tree` brings in (candidates: module, or
  module.name for `from module import name`), skipping __main__ guards."""
  stack = list(tree.body)
  while stack:
    node = stack.pop()
    if _is_main_guard(node):
      stack.extend(node.orelse)
      continue
    if isinstance(node, ast.Import):
      for a in node.names:
        yield a.name, None
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parts = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
      for a in node.names:
        yield base, a.name
    stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict:
  """module -> set of project modules it imports."""
  mods = _modules()
  graph = {}
  for name, path in mods.items():
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    deps = set()
    for module, attr in _imports(tree, package):
      if attr is not None and f"{module}.{attr}" in mods:
        deps.add(f"{module}.{attr}")
      elif module in mods:
        deps.add(module)
    deps.discard(name)
    graph[name] = deps
  return graph


def cycles(graph: dict) -> list:
  """The strongly connected components of more than one module (Tarjan), sorted."""
  index, low, stack, on_stack, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(tuple(sorted(comp)))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return sorted(out)


def _path(graph: dict, comp) -> str:
  """One loop through a component, as 'a -> b -> a'."""
  start, members = comp[0], set(comp)
  seen, path = {start}, [start]
  while True:
    nxt = sorted(w for w in graph[path[-1]] if w in members)
    back = [w for w in nxt if w == start]
    if back and len(path) > 1:
      return " -> ".join(path + [start])
    fresh = [w for w in nxt if w not in seen]
    if not fresh:
      return " -> ".join(path + [nxt[0]])
    seen.add(fresh[0])
    path.append(fresh[0])


def test_the_graph_sees_the_project():
  graph = import_graph()
  assert "textrecords.files.storage" in graph["textrecords.datasets.index"]
  assert "bert_data.masks.draws" in graph["bert_data.masks.single_piece"]
  assert "textrecords.engine.beam" in graph["textrecords.runs.generate"]  # inside a function
  assert any(m.startswith("scripts.") for m in graph)


def test_imports_found_in_functions_and_relative_forms_but_not_main_guards():
  tree = ast.parse("from . import a\nfrom .b import c\ndef f():\n  import d.e\n"
                   "if __name__ == '__main__':\n  import g\nelse:\n  import h\n")
  assert sorted(_imports(tree, "p.q")) == [("d.e", None), ("h", None), ("p.q", "a"),
                                            ("p.q.b", "c")]


def test_cycles_on_a_made_up_graph():
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
  assert cycles(graph) == [("a", "b", "c")]
  assert _path(graph, ("a", "b", "c")) == "a -> b -> c -> a"


def test_no_import_cycles_beyond_the_known_ones():
  graph = import_graph()
  found = cycles(graph)
  new = [_path(graph, c) for c in found if c not in KNOWN]
  assert not new, "import cycles: " + "; ".join(new)
  gone = [c for c in KNOWN if c not in found]
  assert not gone, f"no longer cycles, take them off KNOWN: {gone}"



# The core's rooms, lowest first: a module may import its own room and the rooms
# before it, never one after it (textrecords/__init__.py says what each owns).
ROOMS = ("foundations", "files", "wire", "datasets", "reading", "engine", "runs", "commands")
FOUNDATIONS = ("textrecords", "textrecords.errors", "textrecords.seeding",
               "textrecords.tf_import", "textrecords.lazy_exports", "textrecords.interrupts")


def room_of(module: str) -> str:
  """The room of a textrecords module ("foundations" ... "commands")."""
  if module in FOUNDATIONS:
    return "foundations"
  part = module.split(".")[1]
  return part if part in ROOMS else "commands"


def test_room_of_names_every_core_module():
  assert room_of("textrecords.files.storage") == "files"
  assert room_of("textrecords.engine") == "engine"
  assert room_of("textrecords.errors") == "foundations"
  assert room_of("textrecords.index") == "commands"


def test_the_cores_rooms_import_one_way():
  graph = import_graph()
  core = [m for m in graph if m.split(".")[0] == "textrecords"]
  assert {room_of(m) for m in core} == set(ROOMS)
  upward = [f"{m} -> {d}" for m in core for d in graph[m]
            if d.split(".")[0] == "textrecords"
            and ROOMS.index(room_of(d)) > ROOMS.index(room_of(m))]
  assert not upward, "imports against the rooms' order: " + "; ".join(sorted(upward))


def test_the_architecture_docs_map_every_core_module():
  """docs/architecture.md's module map of the core names every module of every
  room: a new, moved or renamed module updates it."""
  with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as f:
    text = f.read()
  core_map = text[text.index("### The core, `textrecords/`"):text.index("### The packages")]
  missing = sorted(name for name, path in _modules().items()
                   if name.startswith("textrecords.") and not path.endswith("__init__.py")
                   and f"`{os.path.basename(path)}`" not in core_map)
  assert not missing, f"not in docs/architecture.md's core map: {missing}"
  rooms = [r for r in ROOMS if r not in ("foundations", "commands")]
  assert all(f"**`{r}/`" in core_map for r in rooms), rooms


def _in_w2v_trainer(module: str) -> bool:
  return module == "w2v_data.train" or module.startswith("w2v_data.train.")


def test_w2v_datas_trainer_is_imported_by_nothing_else_in_w2v_data():
  """`w2v_data/train/` (the trainer) may import the reading and writing side;
  no module of w2v_data outside it imports it (in functions too)."""
  graph = import_graph()
  assert "w2v_data.dataset" in graph["w2v_data.train.draws"]  # the graph sees the trainer
  rest = [m for m in graph if m.split(".")[0] == "w2v_data" and not _in_w2v_trainer(m)]
  assert "w2v_data.dataset" in rest and "w2v_data.create" in rest
  inward = [f"{m} -> {d}" for m in rest for d in graph[m] if _in_w2v_trainer(d)]
  assert not inward, "w2v_data modules importing w2v_data.train: " + "; ".join(sorted(inward))


# --------------------------------------------------- imports at the top

LIBRARIES = ("textrecords", "bert_data", "w2v_data", "mt_data")  # not scripts/


def deferred_imports(source: str) -> list:
  """(line, statement) of every import of the project's own modules inside a
  function of `source` that says no reason: the packages import at the top,
  except what is optional (an extra, numba's compiled kernels, TensorFlow on
  the TF-free side), marked `# deferred: why` on the line or the one above."""
  lines = source.splitlines()
  found = []
  for fn in ast.walk(ast.parse(source)):
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    for node in ast.walk(fn):
      if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
      elif isinstance(node, ast.ImportFrom) and node.level == 0:
        names = [node.module or ""]
      else:
        continue
      if not any(n.split(".")[0] in LIBRARIES for n in names):
        continue
      said = " ".join(lines[max(node.lineno - 2, 0):node.lineno])
      if "# deferred:" not in said:
        found.append((node.lineno, lines[node.lineno - 1].strip()))
  return found


def test_deferred_imports_are_found_unless_they_say_why():
  code = ("import os\ndef f():\n  from textrecords import seeding\n"
          "  # deferred: the beam extra\n  from textrecords.engine import beam\n"
          "  import numpy\n  from textrecords.engine import dask  # deferred: the dask extra\n")
  assert deferred_imports(code) == [(3, "from textrecords import seeding")]


def test_the_packages_import_their_own_modules_at_the_top():
  bad = []
  for name, path in sorted(_modules().items()):
    if name.split(".")[0] in LIBRARIES:
      with open(path, encoding="utf-8") as f:
        bad += [f"{os.path.relpath(path, ROOT)}:{line}: {stmt}"
                for line, stmt in deferred_imports(f.read())]
  assert not bad, ("imports inside functions with no '# deferred: why' comment (move them to "
                   "the top, or say what is optional behind them):\n" + "\n".join(bad))
