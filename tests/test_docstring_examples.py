"""Every docstring example (>>> lines) in the four packages runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("textrecords", "w2v_data", "bert_data", "mt_data")
# Modules whose docstrings must carry worked examples (a lost example fails).
WITH_EXAMPLES = (
    "textrecords.wire.example_encoder", "textrecords.wire.varint",
    "textrecords.wire.example_decoder", "textrecords.wire.example_kernels",
    "textrecords.datasets.layout", "textrecords.datasets.metadata",
    "textrecords.reading.read_options", "textrecords.lazy_exports",
    "textrecords.files.text_input", "textrecords.files.atomic_file",
    "w2v_data.sampling", "w2v_data.records", "w2v_data.corpus",
    "bert_data.instance_packing")


def _modules():
  names = []
  for package in PACKAGES:
    root = importlib.import_module(package)
    names.append(package)
    names.extend(m.name for m in pkgutil.walk_packages(root.__path__, package + "."))
  return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_hold(name):
  try:
    module = importlib.import_module(name)
  except ModuleNotFoundError as e:  # an optional extra (e.g. apache_beam) not installed
    if (e.name or "").split(".")[0] in PACKAGES:
      raise
    pytest.skip(f"{name}: needs {e.name}")
  result = doctest.testmod(module, verbose=False, report=True)
  assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
  if name in WITH_EXAMPLES:
    assert result.attempted > 0, f"{name}: its worked examples are gone"


def test_modules_that_must_have_examples_exist():
  assert set(WITH_EXAMPLES) <= set(_modules())
