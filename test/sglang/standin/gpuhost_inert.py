"""gpuhost STAND-IN support for torch and triton in the SGLang parser test (not PyTorch).

SGLang's argument parser (sglang.srt.server_args) imports torch and triton at module
level (device probes, op registration, nn.Module subclasses), but parsing a command line never runs
a tensor. PyPI's torch cannot even be imported without its CUDA wheels (about 4.2 GB), so the parser
test puts these stand-ins first on sys.path instead: every attribute that SGLang's import reads and
that this file does not define concretely is an inert placeholder, a class that

  - is falsy, iterates as empty, and is its own result when called, indexed or or-ed,
  - returns a function unchanged when called with it alone (decorators such as torch.compile),
  - can be subclassed (class Op(torch.nn.Module, ABC)),
  - has no numeric value: int(), comparisons and arithmetic fail loudly, so any code that needs a
    real number from torch stops the test instead of reading a made-up one.

Every placeholder path is recorded; the harness reports them (accessed()).
"""
import abc
import importlib.abc
import importlib.machinery
import sys
import types

_ACCESSED = set()
_CACHE = {}


class Inert(abc.ABCMeta):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return placeholder(cls._path + "." + name)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], Inert):
            return args[0]
        return placeholder(cls._path + "()")

    def __bool__(cls):
        return False

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __getitem__(cls, key):
        return cls

    def __iter__(cls):
        return iter(())


def placeholder(path):
    _ACCESSED.add(path)
    if path not in _CACHE:
        _CACHE[path] = Inert(path.rsplit(".", 1)[-1], (), {"_path": path})
    return _CACHE[path]


def accessed():
    return sorted(_ACCESSED)


class InertModule(types.ModuleType):
    """A module whose undefined attributes are placeholders."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return placeholder(self.__name__ + "." + name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Submodules (torch.distributed, torch.nn.functional, triton.language...) as inert modules."""

    ROOTS = {"torch", "triton"}

    def find_spec(self, name, path, target=None):
        if "." in name and name.split(".", 1)[0] in self.ROOTS:
            _ACCESSED.add("import " + name)
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return InertModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
