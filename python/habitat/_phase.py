"""Tells the C++ capture when ops run inside ``optimizer.step()`` (the optimizer phase).

Global optimizer step hooks are installed only while some step is recording.
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
    if torch.compiler.is_compiling():  # dynamo must not trace our bookkeeping
        return
    _C._capture_enter_optimizer()


def _post_hook(optimizer: Optimizer, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if torch.compiler.is_compiling():  # dynamo must not trace our bookkeeping
        return
    _C._capture_exit_optimizer()


def acquire() -> None:
    global _users
    with _lock:
        if _users == 0:
            _handles.append(register_optimizer_step_pre_hook(_pre_hook))
            _handles.append(register_optimizer_step_post_hook(_post_hook))
        _users += 1


def release() -> None:
    global _users
    with _lock:
        _users -= 1
        if _users == 0:
            for handle in _handles:
                handle.remove()
            _handles.clear()
