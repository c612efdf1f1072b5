"""Tells the C++ capture when ops run inside ``optimizer.step()`` (the optimizer phase).

Global optimizer step hooks are installed by the first recording step and stay, idle between
steps: dynamo guards on the global hook table, so removing them would recompile a compiled
optimizer step at the next step.
"""
from __future__ import annotations

import threading
from typing import Any

import torch
from torch.optim import Optimizer
from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                   register_optimizer_step_pre_hook)
from torch.utils.hooks import RemovableHandle

from habitat import _C

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
    global _users
    with _lock:
        _users -= 1
