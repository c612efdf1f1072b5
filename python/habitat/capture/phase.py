"""Tells the C++ capture when ops run inside ``optimizer.step()`` (the optimizer phase).

Global optimizer step hooks are installed while a detailed step records and removed after it,
under the same rule as the module hooks (:mod:`habitat.capture.modules`): dynamo guards on the
global hook table, so once code was compiled while they were installed they stay, idle, until
:func:`uninstall` (``predict_on.close()``).
"""
from __future__ import annotations

import threading
from typing import Any

import torch
from torch.optim import Optimizer
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.hooks import RemovableHandle

from habitat import _C
from habitat.capture import modules as _modules

_lock = threading.Lock()
_users = 0
_handles: list[RemovableHandle] = []


def _pre_hook(optimizer: Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if torch.compiler.is_compiling() or _users == 0:  # not traced; idle between steps
        return
    _C._capture_enter_optimizer()


def _post_hook(optimizer: Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if torch.compiler.is_compiling() or _users == 0:  # not traced; idle between steps
        return
    _C._capture_exit_optimizer()


def acquire() -> None:
    global _users
    with _lock:
        if not _handles:
            _handles.append(register_optimizer_step_pre_hook(_pre_hook))
            _handles.append(register_optimizer_step_post_hook(_post_hook))
        _users += 1


def release() -> None:
    """Call after :func:`habitat.capture.modules.release` (whose decision it follows)."""
    global _users
    with _lock:
        _users = max(0, _users - 1)
        if _users == 0 and not _modules.installed():
            _remove()


def uninstall() -> None:
    with _lock:
        if _users == 0:
            _remove()


def installed() -> bool:
    return bool(_handles)


def _remove() -> None:
    for handle in _handles:
        handle.remove()
    _handles.clear()
