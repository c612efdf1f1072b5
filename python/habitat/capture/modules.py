"""Which nn.Module each forward op runs in, told to the C++ capture as a qualified path.

Global forward hooks are installed only while some step is recording. A module's path is
its parent's path plus its attribute name in the parent (``encoder.layers.3.attn``); the
outermost module called contributes no name, like ``model.named_modules()``.
"""
from __future__ import annotations

import threading
import warnings
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


def _child_name(parent: nn.Module, child: nn.Module) -> str:
    names = _names.get(id(parent))
    if names is None:
        names = {}
        for name, sub in parent.named_modules(remove_duplicate=False):
            name = ".".join(part for part in name.split(".") if part != "_orig_mod")
            if name:
                names.setdefault(id(sub), name)
        _names[id(parent)] = names
    # A module the parent calls without owning it is named by its class.
    return names.get(id(child)) or type(child).__name__


def _pre_hook(module: nn.Module, args: Any) -> None:
    if torch.compiler.is_compiling() or _users == 0:  # not traced; idle between steps
        return
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
    _C._capture_enter_module(path)


def _post_hook(module: nn.Module, args: Any, output: Any) -> None:
    if torch.compiler.is_compiling() or _users == 0:  # not traced; idle between steps
        return
    stack = _stack()
    if stack and stack[-1][0] is module:
        stack.pop()
        _C._capture_exit_module()


def reset_thread() -> None:
    """Forgets the calling thread's module stack (a step begins or ends on it)."""
    _stack().clear()


def acquire() -> None:
    """Installs the global module hooks for one more recording step."""
    global _users
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
        _users += 1


def release() -> None:
    """Ends one recording step. The hooks stay installed but idle: dynamo guards on the global
    hook tables, so removing them after every step would recompile compiled models."""
    global _users
    with _lock:
        _users -= 1
        if _users == 0:
            _names.clear()
