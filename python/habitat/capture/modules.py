"""Which nn.Module each forward op runs in, told to the C++ capture as a qualified path.

Global forward hooks are installed only while a detailed step records (steady-state steps
of ``predict_on`` record no module paths) and removed when it ends, so a program's module calls
keep torch's no-hook fast path outside them. One exception: dynamo guards on the global hook
tables, so once torch.compile has compiled something while the hooks were installed, removing
them would recompile that code at its next call; they then stay installed, idle (the hooks
return at once), until :func:`uninstall` (``predict_on.close()``). A module's path is its
parent's path plus its attribute name in the parent (``encoder.layers.3.attn``); the outermost
module called contributes no name, like ``model.named_modules()``.
"""
from __future__ import annotations

import sys
import threading
import time
import warnings
import weakref
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _nn_module
from torch.utils.hooks import RemovableHandle

from habitat import _C

# torch.compile(module) warns on every call while any global module hook exists.
_COMPILED_MODULE_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"

_lock = threading.Lock()
_users = 0
_handles: list[RemovableHandle] = []
_local = threading.local()
# Set once dynamo compiled code while the hooks were installed: they stay until uninstall().
_keep = False
_frames_at_install: int | None = None
# Relative paths of each parent's submodules, by id(parent) then id(child); rebuilt per use
# of the hooks so renamed or replaced modules are picked up at the next step.
_names: dict[int, dict[int, str]] = {}


def _stack() -> list[tuple[nn.Module, str]]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _is_compiled_wrapper(module: nn.Module) -> bool:
    # torch.compile(module) returns an OptimizedModule whose hooks fire and which then calls
    # the original module's: only the original is a level of the path.
    return type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod")


def _subtree_names_slow(parent: nn.Module) -> dict[int, str]:
    names: dict[int, str] = {}
    for name, sub in parent.named_modules(remove_duplicate=False):
        name = ".".join(part for part in name.split(".") if part != "_orig_mod")
        if name:
            names.setdefault(id(sub), name)
    return names


_BASE_NAMED_MODULES = nn.Module.named_modules


def _subtree_names(parent: nn.Module) -> dict[int, str]:
    """Each module under `parent` by id, named by its first path in pre-order with the
    ``_orig_mod`` levels left out: what :func:`_subtree_names_slow` computes from
    ``named_modules(remove_duplicate=False)``, without its nested generators (a cost per
    level per module) and without splitting every name again. Rebuilt at every detailed
    step for each parent, so its cost is per step."""
    names: dict[int, str] = {}
    stack: list[tuple[nn.Module, str]] = [(parent, "")]
    while stack:
        module, path = stack.pop()
        if type(module).named_modules is not _BASE_NAMED_MODULES:
            return _subtree_names_slow(parent)  # a class that walks its modules its own way
        if path:
            names.setdefault(id(module), path)
        children = module._modules
        if children:
            for key, sub in reversed(list(children.items())):
                if sub is not None:
                    stack.append((sub, path if key == "_orig_mod" else
                                  (f"{path}.{key}" if path else key)))
    return names


def _child_name(parent: nn.Module, child: nn.Module) -> str:
    names = _names.get(id(parent))
    if names is None:
        names = _names[id(parent)] = _subtree_names(parent)
    # A module the parent calls without owning it is named by its class.
    return names.get(id(child)) or type(child).__name__


def _pre_hook(module: nn.Module, args: Any) -> None:
    if torch.compiler.is_compiling() or _users == 0:  # not traced; idle between steps
        return
    started = time.perf_counter_ns()  # the hook's own time goes to the step's overhead
    if _is_compiled_wrapper(module):
        return
    stack = _stack()
    if stack:
        parent, parent_path = stack[-1]
        name = _child_name(parent, module)
        path = f"{parent_path}.{name}" if parent_path else name
    else:
        path = ""
    stack.append((module, path))
    _C._capture_enter_module(path, time.perf_counter_ns() - started)


def _post_hook(module: nn.Module, args: Any, output: Any) -> None:
    if torch.compiler.is_compiling() or _users == 0:  # not traced; idle between steps
        return
    started = time.perf_counter_ns()
    stack = _stack()
    if stack and stack[-1][0] is module:
        stack.pop()
        if not stack:
            _watch_graph(output)
        _C._capture_exit_module(time.perf_counter_ns() - started)


class GraphWatch:
    """Whether the outermost module's output of this thread's detailed step carries an
    autograd graph (``built``), and whether a gradient reached it since (``used``: a backward
    pass ran through it). habitat.capture.mistakes tells a forward-only step from them."""

    __slots__ = ("built", "used")

    def __init__(self) -> None:
        self.built = False
        self.used = False

    def _reached(self, grad: Any) -> None:  # a tensor hook: returns None, the gradient unchanged
        self.used = True


def graph_watch() -> GraphWatch:
    watch = getattr(_local, "graph", None)
    if watch is None:
        watch = _local.graph = GraphWatch()
    return watch


def _graph_tensors(output: Any) -> list[torch.Tensor]:
    """The output's tensors that carry an autograd graph (a tensor, or one level of a tuple,
    list or dict such as a ModelOutput; at most 8)."""
    if isinstance(output, torch.Tensor):
        items = [output]
    elif isinstance(output, (tuple, list)):
        items = list(output[:8])
    elif isinstance(output, dict):
        items = list(output.values())[:8]
    else:
        return []
    return [t for t in items if isinstance(t, torch.Tensor) and t.grad_fn is not None]


def _watch_graph(output: Any) -> None:
    tensors = _graph_tensors(output)
    if tensors:
        watch = graph_watch()
        watch.built = True
        for t in tensors:
            t.register_hook(watch._reached)


def reset_thread() -> None:
    """Forgets the calling thread's module stack and graph watch (a step begins or ends on it)."""
    _stack().clear()
    _local.graph = None


def _dynamo_frames() -> int | None:
    """Frames dynamo has converted so far (None when dynamo is not loaded)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return None
    try:
        return int(sum(utils.counters["frames"].values()))
    except Exception:  # a torch whose counters differ: assume compiled code may exist
        return -1


def note_compiled() -> None:
    """Dynamo is compiling: if the hooks are installed, the code it compiles guards on them,
    so they stay installed (idle between steps) until :func:`uninstall`."""
    global _keep
    with _lock:
        if _handles:
            _keep = True


# predict_on objects between their first step and close(), with the threads they ran on.
_predicting: "weakref.WeakSet[Any]" = weakref.WeakSet()


def note_predicting(predictor: Any) -> None:
    """`predictor` (with a ``_threads`` set) runs steps: see :func:`predicting_here`."""
    _predicting.add(predictor)


def forget_predicting(predictor: Any) -> None:
    _predicting.discard(predictor)


def predicting_here() -> bool:
    """Whether a predictor not closed yet has run a step on the calling thread: code dynamo
    compiles here then runs inside and between its steps, so it should guard on the capture
    key being included (the key then stays included until the predictor closes)."""
    thread = threading.get_ident()
    return any(thread in p._threads for p in list(_predicting))


def compiled_code_seen() -> bool:
    """Whether dynamo has compiled code in this process (it then guards on the thread's
    dispatch keys too, so the capture key must stay where it is)."""
    if _keep:
        return True
    frames = _dynamo_frames()
    return frames is not None and frames != 0


def installed() -> bool:
    """Whether Habitat's global module hooks are installed now."""
    return bool(_handles)


def acquire() -> None:
    """Installs the global module hooks for one more detailed step."""
    global _users, _frames_at_install
    with _lock:
        if _users == 0:
            _names.clear()
            # The extra hook call torch warns about is handled by _is_compiled_wrapper. Renewed
            # each step: code that restores the warning filters (pytest) drops it.
            warnings.filterwarnings("ignore", message=_COMPILED_MODULE_WARNING,
                                    category=UserWarning)
        if not _handles:
            _handles.append(_nn_module.register_module_forward_pre_hook(_pre_hook))
            # always_call: the post hook runs even when forward raises, keeping the stack right.
            _handles.append(_nn_module.register_module_forward_hook(_post_hook, always_call=True))
            _frames_at_install = _dynamo_frames()
        _users += 1


def release() -> None:
    """Ends one detailed step: the hooks are removed when no step needs them, unless dynamo
    compiled code while they were installed (see the module docstring)."""
    global _users, _keep
    with _lock:
        _users -= 1
        if _users > 0:
            return
        _users = 0
        _names.clear()
        if _handles and not _keep:
            frames = _dynamo_frames()
            if frames is not None and (frames != _frames_at_install or frames < 0):
                _keep = True  # something was compiled (or recompiled) with the hooks in place
        if not _keep:
            _remove()


def uninstall() -> None:
    """Removes the hooks if no step is recording (``predict_on.close()`` calls this): module
    calls pay nothing for Habitat afterwards. Code compiled while they were installed
    recompiles once at its next call."""
    global _keep
    with _lock:
        if _users == 0:
            _keep = False
            _remove()


def _remove() -> None:
    for handle in _handles:
        handle.remove()
    _handles.clear()
