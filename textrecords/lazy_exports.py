"""A package's public functions, imported from their modules on first use.

`bert_data`, `w2v_data` and `mt_data` name their readers at the top level
(`make_dataset`, `numpy_batches`, ...) without importing them: a module
`__getattr__` (PEP 562) imports each on first use, so `import bert_data`
stays fast and never imports TensorFlow.

>>> getattr_ = lazy_getattr("pkg", {"dumps": "json:dumps"})
>>> getattr_("dumps")([1])
'[1]'
>>> getattr_("loads")
Traceback (most recent call last):
AttributeError: module 'pkg' has no attribute 'loads'
"""

import importlib
from typing import Callable, Dict

READERS = ("numpy_batches", "grain_source", "torch_dataset")  # every <pkg>.reader has them


def lazy_getattr(package: str, names: Dict[str, str]) -> Callable[[str], object]:
  """A module `__getattr__` giving `names[name]` ("module:attribute"), imported on use."""

  def __getattr__(name: str):
    target = names.get(name)
    if target is None:
      raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, attribute = target.split(":")
    return getattr(importlib.import_module(module), attribute)

  return __getattr__


def package_getattr(package: str, **more: str) -> Callable[[str], object]:
  """`lazy_getattr` for a generator package: `make_dataset` (its `dataset`
  module, TensorFlow), the TF-free readers of its `reader` module, and `more`.
  """
  names = {"make_dataset": f"{package}.dataset:make_dataset"}
  names.update({name: f"{package}.reader:{name}" for name in READERS})
  names.update(more)
  return lazy_getattr(package, names)
